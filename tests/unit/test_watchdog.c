/*
 * The waiting policy (src/core/watchdog.c): which pairs of rank states are certain deadlocks and
 * which are not, when still-waiting lines are due, and that a failure's diagnosis is claimed by
 * exactly one rank, the lowest that fails.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hc_time.h"
#include "hc_watchdog.h"

static hc_wd_rank_t p2p(uint64_t number, uint32_t peer, int is_send)
{
    hc_wd_rank_t r = {.in_op = 1, .is_coll = 0, .number = number, .nitems = 1};

    r.sig.coll = is_send ? HC_COLL_SEND : HC_COLL_RECV;
    r.items[0] = (hc_wd_item_t){.peer = peer, .is_send = (uint32_t)is_send, .count = 16, .dtype = 4};
    return r;
}

static hc_wd_rank_t coll(uint64_t number)
{
    hc_wd_rank_t r = {.in_op = 1, .is_coll = 1, .number = number};

    r.sig.coll = HC_COLL_ALLREDUCE;
    return r;
}

static int deadlock(uint32_t me, const hc_wd_rank_t *mine, uint32_t peer, const hc_wd_rank_t *theirs)
{
    char why[512];

    return hc_watchdog_deadlock(me, mine, peer, theirs, why, sizeof(why));
}

static void test_certain_deadlocks(void **state)
{
    hc_wd_rank_t send01 = p2p(1, 1, 1), send10 = p2p(1, 0, 1), recv01 = p2p(1, 1, 0), recv10 = p2p(1, 0, 0);
    hc_wd_rank_t ar1 = coll(1);

    (void)state;
    assert_true(deadlock(0, &send01, 1, &send10));   /* send-send */
    assert_true(deadlock(0, &recv01, 1, &recv10));   /* receive-receive */
    assert_false(deadlock(0, &send01, 1, &recv10));  /* they pair */
    assert_true(deadlock(0, &send01, 1, &ar1));      /* rank 1 in a collective rank 0 has not done */
    assert_true(deadlock(1, &ar1, 0, &send01));      /* and the same seen from rank 1 */
}

static void test_not_certain(void **state)
{
    hc_wd_rank_t send01 = p2p(1, 1, 1), send12 = p2p(1, 2, 1), idle = {0}, ar1 = coll(1), failed = p2p(1, 0, 1);
    hc_wd_rank_t both = p2p(1, 0, 1), many = p2p(1, 0, 1), writer = coll(3);

    (void)state;
    assert_false(deadlock(0, &send01, 1, &send12)); /* rank 1 waits for rank 2, not for rank 0 */
    assert_false(deadlock(0, &send01, 1, &idle));   /* rank 1 is in no op: it may come */
    failed.failed = 1;
    assert_false(deadlock(0, &send01, 1, &failed)); /* a failed peer is reported as such */
    /* A batch with a receive that pairs with rank 0's send: it moves. */
    both.nitems = 2;
    both.items[1] = (hc_wd_item_t){.peer = 0, .is_send = 0, .count = 16, .dtype = 4};
    assert_false(deadlock(0, &send01, 1, &both));
    /* More pending items than published: a pair may be among the unseen ones. */
    many.nitems = HC_WD_ITEMS;
    for (uint32_t k = 0; k < HC_WD_ITEMS; k++)
        many.items[k] = (hc_wd_item_t){.peer = 0, .is_send = 1};
    assert_false(deadlock(0, &send01, 1, &many));
    /* A collective rank 0 has finished, or one rank 1 may finish alone (an eager writer). */
    send01.colls_done = 1;
    assert_false(deadlock(0, &send01, 1, &ar1));
    writer.finishes_alone = 1;
    assert_false(deadlock(0, &send01, 1, &writer));
    /* Two collectives: the signature check handles those. */
    assert_false(deadlock(0, &ar1, 1, &writer));
}

static void test_confirmation(void **state)
{
    hc_watchdog_t wd;
    hc_wd_rank_t theirs = p2p(7, 0, 1);
    uint64_t key = hc_watchdog_suspect_key(1, &theirs);

    (void)state;
    hc_watchdog_start(&wd, 0, 0, 2);
    assert_false(hc_watchdog_confirm(&wd, key, 1000));
    assert_false(hc_watchdog_confirm(&wd, key, 1000 + HC_WD_CONFIRM_NS - 1));
    assert_true(hc_watchdog_confirm(&wd, key, 1000 + HC_WD_CONFIRM_NS));
    /* Another op of the peer, or no suspicion in between, starts over. */
    theirs.number = 8;
    assert_false(hc_watchdog_confirm(&wd, hc_watchdog_suspect_key(1, &theirs), 2 * HC_WD_CONFIRM_NS));
    hc_watchdog_confirm(&wd, 0, 3 * HC_WD_CONFIRM_NS);
    assert_false(hc_watchdog_confirm(&wd, key, 4 * HC_WD_CONFIRM_NS));
}

static void test_still_waiting_schedule(void **state)
{
    hc_watchdog_t wd;
    int64_t s = HC_NS_PER_S;
    int due[20] = {0};

    (void)state;
    hc_watchdog_start(&wd, 0, 1, 2);
    for (int64_t t = 0; t < 20; t++)
        due[t] = hc_watchdog_report_due(&wd, t * s);
    /* After 1 s, then 2 s later, then 4, then 8: seconds 1, 3, 7, 15. */
    for (int t = 0; t < 20; t++)
        assert_int_equal(due[t], t == 1 || t == 3 || t == 7 || t == 15);
    hc_watchdog_progress(&wd, 100 * s); /* progress: the clock starts over with the first interval */
    assert_false(hc_watchdog_report_due(&wd, 100 * s + s / 2));
    assert_true(hc_watchdog_report_due(&wd, 101 * s));
    hc_watchdog_start(&wd, 0, 0, 2); /* 0: never */
    assert_false(hc_watchdog_report_due(&wd, 1000000 * s));
    hc_watchdog_start(&wd, 0, 300, 16); /* never further apart than 10 minutes */
    assert_true(hc_watchdog_report_due(&wd, 300 * s));
    assert_false(hc_watchdog_report_due(&wd, 899 * s));
    assert_true(hc_watchdog_report_due(&wd, 900 * s));
}

/* ---- the claim -------------------------------------------------------------------------------- */

typedef struct {
    atomic_uint_fast64_t *word;
    atomic_int *in_op; /* per rank: inside an op (a failed rank stays in its op, as it publishes) */
    uint32_t me;
    int printed;
} claimer_t;

static int lower_busy(void *ctx, uint32_t me)
{
    atomic_int *in_op = ctx;

    for (uint32_t j = 0; j < me; j++)
        if (atomic_load(&in_op[j]))
            return 1;
    return 0;
}

static void *claim_thread(void *arg)
{
    claimer_t *c = arg;

    c->printed = hc_watchdog_claim(c->word, c->me, lower_busy, (void *)c->in_op, 5 * HC_NS_PER_S);
    return NULL;
}

static void test_claim_once_lowest(void **state)
{
    atomic_uint_fast64_t word = 0;
    atomic_int in_op[4];
    claimer_t c[4];
    pthread_t t[4];
    int printed = 0;

    (void)state;
    /* Ranks fail in the order 3, 2, 1, 0, each seeing the lower ones still in their op. */
    for (uint32_t i = 0; i < 4; i++)
        atomic_init(&in_op[i], 1);
    for (int i = 3; i >= 0; i--) {
        c[i] = (claimer_t){.word = &word, .in_op = in_op, .me = (uint32_t)i};
        assert_int_equal(pthread_create(&t[i], NULL, claim_thread, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        printed += c[i].printed;
    }
    assert_int_equal(printed, 1);
    assert_true(c[0].printed);
    /* Once printed, nobody prints again, not even a lower rank. */
    assert_false(hc_watchdog_claim(&word, 0, lower_busy, (void *)in_op, 0));
}

static void test_claim_no_wait_for_idle_lower_ranks(void **state)
{
    atomic_uint_fast64_t word = 0;
    atomic_int in_op[3];
    int64_t start;

    (void)state;
    for (uint32_t i = 0; i < 3; i++)
        atomic_init(&in_op[i], 0); /* ranks 0 and 1 are in no op: they will not report */
    start = hc_now_ns();
    assert_true(hc_watchdog_claim(&word, 2, lower_busy, (void *)in_op, 5 * HC_NS_PER_S));
    assert_true(hc_now_ns() - start < HC_NS_PER_S);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_certain_deadlocks),
        cmocka_unit_test(test_not_certain),
        cmocka_unit_test(test_confirmation),
        cmocka_unit_test(test_still_waiting_schedule),
        cmocka_unit_test(test_claim_once_lowest),
        cmocka_unit_test(test_claim_no_wait_for_idle_lower_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
