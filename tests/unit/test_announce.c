/*
 * The announcements of the intra-host engine (src/shm/shm_announce.c) on a two-rank engine laid out
 * in plain memory: a burst of collectives enqueued far deeper than the ring of announcement entries is announced
 * ahead of what runs, all the way through, so that a root can go on while the others still run
 * earlier calls. A burst deeper than the ring of pending announcements used to lose the entries it
 * overwrote, and each of those was announced only when it ran: lockstep for the rest of the burst.
 * A writer of the eager path defers its comparison of the others' signatures and still finds a
 * mismatch, also while another rank has not announced the collectives yet; a list a rank announced
 * alike is checked at once by the running hash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shm_internal.h"

#define BURST 5000 /* collectives enqueued before any runs: ~5x the first pending ring */

typedef struct {
    hc_shm_engine_t eng;
    hc_issue_lock_t lock;
} fixture_t;

/* A zeroed stand-in for the shared segment of n ranks, page-aligned as the real mapping is (the
 * control blocks' medium slots are aligned to a page). */
static uint8_t *segment(uint32_t n)
{
    size_t bytes = HC_SHM_HEADER_BYTES + n * (size_t)HC_SHM_CTRL_BYTES;
    uint8_t *map = aligned_alloc(4096, bytes);

    if (map != NULL)
        memset(map, 0, bytes);
    return map;
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    f->eng.nlocal = 2;
    f->eng.me = 0;
    f->eng.map = segment(2);
    assert_non_null(f->eng.map);
    assert_int_equal(hc_issue_lock_init(&f->lock), 0);
    f->eng.base.group.lock = &f->lock;
    assert_int_equal(hc_shm_announce_init(&f->eng), HCCL_SUCCESS);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;

    free(f->eng.pending);
    free(f->eng.deferred_compared);
    free(f->eng.map);
    hc_issue_lock_destroy(&f->lock);
    free(f);
    return 0;
}

static hc_op_sig_t sig_of(uint64_t q)
{
    return (hc_op_sig_t){.coll = HC_COLL_BROADCAST, .dtype = HCCL_DATA_TYPE_FP32, .count = 2 + q % 7};
}

/* The collective this rank has announced in q's entry (0: none). */
static uint64_t announced(fixture_t *f, uint64_t q)
{
    return atomic_load(&hc_shm_ctrl(&f->eng, 0)->ann[q % HC_SHM_ANN_SLOTS].seq);
}

/* Enqueue BURST collectives, then run them in order, both ranks keeping pace: after each one runs,
 * this rank has announced nearly half its ring of entries ahead (the rest of the burst when less is
 * left), with the signature it enqueued. */
static void test_deep_burst_stays_announced_ahead(void **state)
{
    fixture_t *f = *state;
    hc_shm_ctrl_t *mine = hc_shm_ctrl(&f->eng, 0), *peer = hc_shm_ctrl(&f->eng, 1);

    for (uint64_t q = 1; q <= BURST; q++) {
        hc_op_sig_t sig = sig_of(q);
        hc_shm_announce(&f->eng.base, &sig, q, 1000 + q);
    }
    assert_int_equal(announced(f, HC_SHM_ANN_SLOTS), HC_SHM_ANN_SLOTS); /* as far as the ring lets it */
    for (uint64_t q = 1; q <= BURST; q++) {
        hc_op_t op = {.coll_seq = q, .sig = sig_of(q), .sig_hash = 1000 + q};
        uint64_t ahead = q + HC_SHM_ANN_SLOTS / 2 - 1 < BURST ? q + HC_SHM_ANN_SLOTS / 2 - 1 : BURST;
        hc_shm_ann_t *entry = &mine->ann[ahead % HC_SHM_ANN_SLOTS];

        assert_int_equal(hc_shm_announce_running(&f->eng, &op), HCCL_SUCCESS);
        if (atomic_load(&entry->seq) != ahead)
            fail_msg("after collective %llu ran, collective %llu was not announced (its entry holds %llu)",
                     (unsigned long long)q, (unsigned long long)ahead, (unsigned long long)atomic_load(&entry->seq));
        assert_int_equal(entry->hash, 1000 + ahead);
        assert_int_equal(mine->ann_sig[ahead % HC_SHM_ANN_SLOTS].count, sig_of(ahead).count);
        atomic_store(&mine->done_seq, q);
        atomic_store(&peer->done_seq, q);
        atomic_store(&mine->checked_seq, q);
        atomic_store(&peer->checked_seq, q);
    }
}

/* What the peer (local rank 1) announces of collective q. */
static void peer_announces(fixture_t *f, uint64_t q, uint64_t hash, hc_op_sig_t sig)
{
    hc_shm_ctrl_t *peer = hc_shm_ctrl(&f->eng, 1);

    peer->ann_sig[q % HC_SHM_ANN_SLOTS] = sig;
    peer->ann[q % HC_SHM_ANN_SLOTS].hash = hash;
    atomic_store(&peer->ann[q % HC_SHM_ANN_SLOTS].seq, q);
}

static hc_op_t writer_op(uint64_t q)
{
    return (hc_op_t){.coll_seq = q, .sig = sig_of(q), .sig_hash = 1000 + q};
}

/* A writer of the eager path completes its collectives without the peer's announcements, keeps
 * checked_seq (what frees its announcement entries) behind the first unchecked one, checks them
 * once announced, and fails a later op on the one that differs, naming it. */
static void test_writer_defers_checks(void **state)
{
    fixture_t *f = *state;
    hc_shm_ctrl_t *mine = hc_shm_ctrl(&f->eng, 0);
    static const uint32_t ranks[2] = {0, 1};
    hc_op_t op;

    f->eng.base.group.ranks = (uint32_t *)ranks;
    for (uint64_t q = 1; q <= 10; q++) {
        op = writer_op(q);
        assert_int_equal(hc_shm_check_writer(&f->eng, &op), HCCL_SUCCESS);
        hc_shm_announce_done(&f->eng, &op);
    }
    assert_int_equal(atomic_load(&mine->done_seq), 10);
    assert_int_equal(atomic_load(&mine->checked_seq), 0);
    for (uint64_t q = 1; q <= 6; q++)
        peer_announces(f, q, 1000 + q, sig_of(q));
    op = writer_op(11);
    assert_int_equal(hc_shm_check_deferred(&f->eng, &op), HCCL_SUCCESS);
    assert_int_equal(atomic_load(&mine->checked_seq), 6); /* 7-10 not announced yet */
    for (uint64_t q = 7; q <= 10; q++) {
        hc_op_sig_t sig = sig_of(q);
        sig.count += q == 9; /* the peer's call of collective 9 differs */
        peer_announces(f, q, q == 9 ? 77 : 1000 + q, sig);
    }
    assert_int_equal(hc_shm_check_deferred(&f->eng, &op), HCCL_E_PARA);
    assert_int_equal(atomic_load(&mine->checked_seq), 8);
}

/* Three ranks: this one completed collectives 1-4 unchecked, rank 2 (slow) has announced none of
 * them yet, rank 1 announced all four and its call of 4 differs. The mismatch is reported now, not
 * once rank 2 catches up (by then rank 1 has failed on it and left: this rank would only have
 * reported that it left), and nothing is marked checked. */
static void test_mismatch_found_past_a_slow_rank(void **state)
{
    fixture_t *f = *state;
    static const uint32_t ranks[3] = {0, 1, 2};
    hc_op_t op;

    free(f->eng.map);
    f->eng.nlocal = 3;
    f->eng.map = segment(3);
    free(f->eng.deferred_compared);
    f->eng.deferred_compared = calloc(3, sizeof(*f->eng.deferred_compared));
    assert_non_null(f->eng.map);
    f->eng.base.group.ranks = (uint32_t *)ranks;
    for (uint64_t q = 1; q <= 4; q++) {
        op = writer_op(q);
        assert_int_equal(hc_shm_check_writer(&f->eng, &op), HCCL_SUCCESS);
        hc_shm_announce_done(&f->eng, &op);
    }
    op = writer_op(5);
    for (uint64_t q = 1; q <= 3; q++)
        peer_announces(f, q, 1000 + q, sig_of(q));
    assert_int_equal(hc_shm_check_deferred(&f->eng, &op), HCCL_SUCCESS); /* nothing differs yet */
    hc_op_sig_t other = sig_of(4);
    other.count++;
    peer_announces(f, 4, 77, other);
    assert_int_equal(hc_shm_check_deferred(&f->eng, &op), HCCL_E_PARA);
    assert_int_equal(atomic_load(&hc_shm_ctrl(&f->eng, 0)->checked_seq), 0);
}

/* Both ranks announce through the engine (a second engine on the same segment plays rank 1), so
 * every announcement carries its running hash: a list whose last collective rank 1 has announced
 * alike is checked at once; one whose rank 1 differs at collective 4 is walked to that call and
 * fails there, with 1-3 checked. */
static void chain_case(void **state, int differ)
{
    fixture_t *f = *state;
    hc_shm_engine_t peer = {.nlocal = 2, .me = 1, .map = f->eng.map};
    static const uint32_t ranks[2] = {0, 1};
    hc_op_t op;

    peer.base.group.lock = &f->lock;
    f->eng.base.group.ranks = (uint32_t *)ranks;
    assert_int_equal(hc_shm_announce_init(&peer), HCCL_SUCCESS);
    for (uint64_t q = 1; q <= 10; q++) {
        hc_op_sig_t sig = sig_of(q), theirs = sig_of(q);
        theirs.count += differ && q == 4;
        hc_shm_announce(&f->eng.base, &sig, q, 1000 + q);
        hc_shm_announce(&peer.base, &theirs, q, differ && q == 4 ? 77 : 1000 + q);
        op = writer_op(q);
        assert_int_equal(hc_shm_check_writer(&f->eng, &op), HCCL_SUCCESS);
        hc_shm_announce_done(&f->eng, &op);
    }
    assert_int_equal(f->eng.deferred_n, 10);
    if (!differ) /* at once: the entries' own hashes are not read (a walk would fail on this one) */
        hc_shm_ctrl(&f->eng, 1)->ann[2].hash = 12345;
    op = writer_op(11);
    assert_int_equal(hc_shm_check_deferred(&f->eng, &op), differ ? HCCL_E_PARA : HCCL_SUCCESS);
    assert_int_equal(atomic_load(&hc_shm_ctrl(&f->eng, 0)->checked_seq), differ ? 3 : 10);
    free(peer.pending);
    free(peer.deferred_compared);
}

static void test_list_checked_at_once(void **state)
{
    chain_case(state, 0);
}

static void test_list_walked_to_the_difference(void **state)
{
    chain_case(state, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_deep_burst_stays_announced_ahead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_defers_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mismatch_found_past_a_slow_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_checked_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_walked_to_the_difference, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
