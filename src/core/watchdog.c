/* The waiting policy of hc_watchdog.h: still-waiting lines, certain deadlocks, one diagnosis. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hc_dtype.h"
#include "hc_time.h"
#include "hc_watchdog.h"

/* Still-waiting lines never come further apart than this, whatever the backoff: a wait of hours
 * still says every ten minutes that it goes on. */
#define MAX_INTERVAL_NS (600 * HC_NS_PER_S)

void hc_watchdog_start(hc_watchdog_t *wd, int64_t now_ns, int64_t interval_s, int64_t backoff)
{
    *wd = (hc_watchdog_t){.started_ns = now_ns, .first_ns = interval_s * HC_NS_PER_S,
                          .backoff = backoff > 0 ? backoff : 1};
    wd->interval_ns = wd->first_ns;
    wd->next_report_ns = interval_s > 0 ? now_ns + wd->first_ns : 0;
}

void hc_watchdog_progress(hc_watchdog_t *wd, int64_t now_ns)
{
    wd->started_ns = now_ns;
    wd->interval_ns = wd->first_ns;
    wd->next_report_ns = wd->first_ns > 0 ? now_ns + wd->first_ns : 0;
    wd->suspect = 0;
}

int hc_watchdog_report_due(hc_watchdog_t *wd, int64_t now_ns)
{
    if (wd->next_report_ns == 0 || now_ns < wd->next_report_ns)
        return 0;
    if (wd->interval_ns < MAX_INTERVAL_NS / wd->backoff)
        wd->interval_ns *= wd->backoff;
    else
        wd->interval_ns = MAX_INTERVAL_NS;
    wd->next_report_ns = now_ns + wd->interval_ns;
    return 1;
}

double hc_watchdog_waited_s(const hc_watchdog_t *wd, int64_t now_ns)
{
    return (double)(now_ns - wd->started_ns) / (double)HC_NS_PER_S;
}

double hc_watchdog_next_s(const hc_watchdog_t *wd, int64_t now_ns)
{
    return wd->next_report_ns == 0 ? 0.0 : (double)(wd->next_report_ns - now_ns) / (double)HC_NS_PER_S;
}

int hc_watchdog_look_due(hc_watchdog_t *wd, int64_t now_ns)
{
    if (now_ns < wd->next_look_ns)
        return 0;
    wd->next_look_ns = now_ns + HC_WD_LOOK_NS;
    return 1;
}

/* ---- deadlocks ---------------------------------------------------------------------------------- */

/* Does r have a pending item toward rank `peer`? */
static int has_item_toward(const hc_wd_rank_t *r, uint32_t peer)
{
    for (uint32_t k = 0; k < r->nitems && k < HC_WD_ITEMS; k++)
        if (r->items[k].peer == peer)
            return 1;
    return 0;
}

/* Does one of a's items toward b pair with one of b's toward a (a send with a receive)? */
static int some_pair(const hc_wd_rank_t *a, uint32_t a_rank, const hc_wd_rank_t *b, uint32_t b_rank)
{
    for (uint32_t i = 0; i < a->nitems && i < HC_WD_ITEMS; i++) {
        if (a->items[i].peer != b_rank)
            continue;
        for (uint32_t k = 0; k < b->nitems && k < HC_WD_ITEMS; k++)
            if (b->items[k].peer == a_rank && b->items[k].is_send != a->items[i].is_send)
                return 1;
    }
    return 0;
}

/* A rank publishes at most HC_WD_ITEMS pending items: with that many, more may exist. */
static int items_complete(const hc_wd_rank_t *r)
{
    return r->nitems < HC_WD_ITEMS;
}

/* "send to rank 1" or "receive from rank 1", for r's first item toward peer. */
static const char *first_item(const hc_wd_rank_t *r, uint32_t peer, char *buf, size_t len)
{
    for (uint32_t k = 0; k < r->nitems && k < HC_WD_ITEMS; k++) {
        const hc_wd_item_t *it = &r->items[k];
        if (it->peer == peer) {
            snprintf(buf, len, "%s %llu %s %s rank %u", it->is_send ? "send of" : "receive of",
                     (unsigned long long)it->count, hc_dtype_name((HcclDataType)it->dtype),
                     it->is_send ? "to" : "from", peer);
            return buf;
        }
    }
    snprintf(buf, len, "nothing for rank %u", peer);
    return buf;
}

int hc_watchdog_deadlock(uint32_t me, const hc_wd_rank_t *mine, uint32_t peer, const hc_wd_rank_t *theirs,
                         char *why, size_t len)
{
    char sig[160], a[96], b[96];

    if (!mine->in_op || !theirs->in_op || theirs->failed || me == peer)
        return 0;
    hc_op_sig_format(&theirs->sig, sig, sizeof(sig));
    if (!mine->is_coll && !theirs->is_coll) {
        if (!has_item_toward(mine, peer) || !has_item_toward(theirs, me) || !items_complete(mine) ||
            !items_complete(theirs) || some_pair(mine, me, theirs, peer))
            return 0;
        snprintf(why, len,
                 "rank %u is in %s #%llu, whose %s waits for this rank, while this rank's %s waits for rank %u: "
                 "neither op has the matching half of the other's (a send needs a receive), so both wait forever",
                 peer, sig, (unsigned long long)theirs->number, first_item(theirs, me, a, sizeof(a)),
                 first_item(mine, peer, b, sizeof(b)), peer);
        return 1;
    }
    if (!mine->is_coll && theirs->is_coll) {
        if (!has_item_toward(mine, peer) || theirs->number <= mine->colls_done || theirs->finishes_alone)
            return 0;
        snprintf(why, len,
                 "rank %u is in %s #%llu, a collective that needs this rank, while this rank's %s waits for "
                 "rank %u: a rank runs its ops of a communicator one after the other, so neither can go on",
                 peer, sig, (unsigned long long)theirs->number, first_item(mine, peer, b, sizeof(b)), peer);
        return 1;
    }
    if (mine->is_coll && !theirs->is_coll) {
        if (!has_item_toward(theirs, me))
            return 0;
        snprintf(why, len,
                 "rank %u is in %s #%llu, whose %s waits for this rank, while this rank waits for rank %u in a "
                 "collective: a rank runs its ops of a communicator one after the other, so neither can go on",
                 peer, sig, (unsigned long long)theirs->number, first_item(theirs, me, a, sizeof(a)), peer);
        return 1;
    }
    return 0; /* two collectives: their signatures are compared (a mismatch fails at once) */
}

uint64_t hc_watchdog_suspect_key(uint32_t peer, const hc_wd_rank_t *theirs)
{
    uint64_t words[5] = {peer, theirs->number, (uint64_t)theirs->since_ns, (uint64_t)theirs->is_coll,
                         theirs->nitems};
    uint64_t key = hc_op_digest(words, 5);

    return key != 0 ? key : 1;
}

int hc_watchdog_confirm(hc_watchdog_t *wd, uint64_t key, int64_t now_ns)
{
    if (key == 0 || key != wd->suspect) {
        wd->suspect = key;
        wd->suspect_since_ns = now_ns;
        return 0;
    }
    return now_ns - wd->suspect_since_ns >= HC_WD_CONFIRM_NS;
}

/* ---- one diagnosis ------------------------------------------------------------------------------ */

#define CLAIM_PRINTED (1ull << 63)
#define CLAIM_POLL_NS (2 * HC_NS_PER_MS)

int hc_watchdog_claim(atomic_uint_fast64_t *word, uint32_t me, int (*lower_busy)(void *ctx, uint32_t me),
                      void *ctx, int64_t settle_ns)
{
    uint64_t mine = (uint64_t)me + 1, cur = atomic_load(word);
    int64_t deadline = hc_now_ns() + settle_ns;
    struct timespec pause = {.tv_sec = 0, .tv_nsec = CLAIM_POLL_NS};

    /* Claim, unless a lower rank did, or the diagnosis was printed. */
    while (!(cur & CLAIM_PRINTED) && (cur == 0 || cur > mine))
        if (atomic_compare_exchange_weak(word, &cur, mine))
            cur = mine;
    /* Give the lower ranks still in an op a moment to fail and claim (they print then). */
    for (;;) {
        cur = atomic_load(word);
        if ((cur & CLAIM_PRINTED) || (cur & ~CLAIM_PRINTED) < mine)
            return 0;
        if (!lower_busy(ctx, me) || hc_now_ns() >= deadline)
            break;
        nanosleep(&pause, NULL);
    }
    cur = mine;
    return atomic_compare_exchange_strong(word, &cur, mine | CLAIM_PRINTED);
}
