/*
 * The measured choice between CMA and the slots (src/shm/shm_cma.c, "measured choice") on an engine
 * with CMA allowed, driven with made-up op times: the owner of a buffer tries both paths, keeps the
 * faster, follows a change of the program's pattern within a few calls, and keeps each collective
 * and size class apart. Times are given by moving the op's start back by the time it is to have taken.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "shm_internal.h"

#define KIB 1024u
/* A made-up time unit of 1 ms: the real time a call of this test takes (well under 1 us, a
 * preemption at worst a few ms) stays far below the differences the policy is to see. */
#define US 1000000

static hc_shm_engine_t *engine(void)
{
    hc_shm_engine_t *eng = calloc(1, sizeof(*eng));

    assert_non_null(eng);
    eng->cma = 1;
    eng->pagemap_fd = -1;
    eng->cma_min = eng->cma_gather_min = eng->cma_alltoall_min = eng->cma_scatter_min = UINT64_MAX;
    eng->cma_allreduce_min = eng->cma_huge_min = UINT64_MAX;
    eng->cma_choose_min = eng->p2p_choose_min = 64 * KIB;
    eng->p2p_cma_min = eng->p2p_cma_sym_min = UINT64_MAX;
    eng->bcast_choose_min = eng->gather_choose_min = eng->zc_choose_min = 64 * KIB;
    return eng;
}

static void done(hc_shm_engine_t *eng)
{
    hc_shm_cma_close(eng);
    free(eng);
}

static uint64_t seq;

/* An exchange below the threshold takes the fixed rule, untimed. */
static void op_below_threshold_is_not_timed(hc_shm_engine_t *eng)
{
    hc_op_t op = {.seq = ++seq};

    op.sig.coll = HC_COLL_BATCH_SENDRECV;
    assert_int_equal(hc_shm_cma_exchange(eng, &op, 32 * KIB, 32 * KIB), 0);
    assert_null(eng->timing);
}

/* One op of coll over op_bytes whose run takes slots_ns or cma_ns by the path chosen, and after
 * which the program's own work takes after_ns longer on CMA (the lines its peers read come back
 * when it writes them); returns the path. A batch is the sends of an exchange. */
static int call_after(hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes, int64_t slots_ns, int64_t cma_ns,
                      int64_t after_ns)
{
    static char buf[1];
    hc_op_t op = {.seq = ++seq};
    hc_shm_choice_t *c;
    int cma;

    op.sig.coll = (uint32_t)coll;
    cma = coll == HC_COLL_BATCH_SENDRECV ? hc_shm_cma_exchange(eng, &op, op_bytes, op_bytes)
                                         : hc_shm_cma_readable(eng, &op, buf, op_bytes, op_bytes);
    assert_non_null(c = eng->timing);
    eng->timing_since_ns -= cma ? cma_ns : slots_ns;
    hc_shm_cma_op_end(eng, &op, HCCL_SUCCESS);
    assert_null(eng->timing);
    if (cma)
        c->open_since_ns -= after_ns;
    return cma;
}

static int call(hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes, int64_t slots_ns, int64_t cma_ns)
{
    return call_after(eng, coll, op_bytes, slots_ns, cma_ns, 0);
}

/* How many of n calls chose CMA. */
static int calls(hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes, int n, int64_t slots_ns, int64_t cma_ns)
{
    int cma = 0;

    for (int i = 0; i < n; i++)
        cma += call(eng, coll, op_bytes, slots_ns, cma_ns);
    return cma;
}

/* Untouched buffers (CMA faster): both paths tried in the first calls, then CMA but for the probes of
 * the slots, fewer and fewer. Then the program writes its buffer before every call (CMA 4x slower):
 * the slots within a few calls. */
static void test_keeps_the_faster_path(void **state)
{
    hc_shm_engine_t *eng = engine();
    int first = calls(eng, HC_COLL_BROADCAST, 64 * KIB, 8, 12 * US, 8 * US);

    (void)state;
    assert_int_equal(first, 4); /* two calls on each path in turn */
    assert_in_range(calls(eng, HC_COLL_BROADCAST, 64 * KIB, 2000, 12 * US, 8 * US), 1980, 1998);
    assert_in_range(calls(eng, HC_COLL_BROADCAST, 64 * KIB, 4, 12 * US, 40 * US), 1, 3);
    assert_in_range(calls(eng, HC_COLL_BROADCAST, 64 * KIB, 2000, 12 * US, 40 * US), 2, 20);
    /* And back: a probe of CMA, at the latest after PROBE_MAX (1024) calls, finds it fast again. */
    assert_in_range(calls(eng, HC_COLL_BROADCAST, 64 * KIB, 2100, 12 * US, 8 * US), 1000, 2099);
    done(eng);
}

/* Noise (a guest's other jobs) slows ten calls in a row of every fifty by 5x, whatever their path:
 * the choice stays on the faster path but for few calls (here the slots; CMA 3x slower, as for a
 * written buffer). Comparing the chosen path's samples in a slow stretch with the other's from
 * before it once switched back and forth with every stretch. */
static void test_noise_does_not_steer(void **state)
{
    hc_shm_engine_t *eng = engine();
    int cma = 0;

    (void)state;
    for (int i = 0; i < 3000; i++) {
        int64_t slow = i % 50 >= 40 ? 5 : 1;
        cma += call(eng, HC_COLL_SCATTER, 128 * KIB, 12 * US * slow, 36 * US * slow);
    }
    assert_in_range(cma, 4, 60);
    done(eng);
}

/* A sample runs from an op's start to the next op of its class, so it holds what the path costs the
 * program after the op: a written send buffer its peer read in place (CMA faster within the op, 3x
 * slower in all) goes through the slots. Timing the op alone chose CMA. The sends of an exchange
 * choose alike. (The test has no clock of its own: it moves the ended op's start back, which only a
 * sample taken at the next choice sees; an end taken at the op's end would not.) */
static void test_cost_after_the_op_counts(void **state)
{
    hc_shm_engine_t *eng = engine();
    int cma = 0;

    (void)state;
    for (int i = 0; i < 500; i++)
        cma += call_after(eng, HC_COLL_BATCH_SENDRECV, 64 * KIB, 12 * US, 8 * US, 28 * US);
    assert_in_range(cma, 4, 30);
    assert_in_range(calls(eng, HC_COLL_BATCH_SENDRECV, 128 * KIB, 200, 20 * US, 10 * US), 180, 199);
    op_below_threshold_is_not_timed(eng);
    done(eng);
}

/* A batch with two sends of an exchange makes one choice (the class of its largest send) and one
 * sample; another collective's calls in between leave the sample open; where the samples cannot
 * tell the paths apart, learning ends on the fixed sizes' path. */
static void test_one_choice_per_op(void **state)
{
    hc_shm_engine_t *eng = engine();
    hc_shm_choice_t *c;

    (void)state;
    for (int i = 0; i < 40; i++) {
        hc_op_t op = {.seq = ++seq};
        int first, second;
        op.sig.coll = HC_COLL_BATCH_SENDRECV;
        first = hc_shm_cma_exchange(eng, &op, 64 * KIB, 1024 * KIB);
        assert_non_null(c = eng->timing);
        second = hc_shm_cma_exchange(eng, &op, 1024 * KIB, 1024 * KIB);
        assert_int_equal(first, second);
        eng->timing_since_ns -= first ? 8 * US : 12 * US;
        hc_shm_cma_op_end(eng, &op, HCCL_SUCCESS);
        assert_int_equal(calls(eng, HC_COLL_BROADCAST, 64 * KIB, 3, 40 * US, 40 * US) >= 0, 1);
    }
    assert_ptr_equal(c, &eng->choices[4 * 2 * HC_SHM_CHOICE_CLASSES + 20]); /* plain, the 1 MiB class */
    assert_int_equal(c->calls, 40);
    assert_int_equal(c->choice, 1);
    /* Equal times: the fixed sizes decide (here: CMA from 64 KiB, then never). */
    eng->p2p_cma_sym_min = 64 * KIB;
    assert_in_range(calls(eng, HC_COLL_BATCH_SENDRECV, 128 * KIB, 100, 20 * US, 20 * US), 90, 100);
    eng->p2p_cma_sym_min = UINT64_MAX;
    assert_in_range(calls(eng, HC_COLL_BATCH_SENDRECV, 256 * KIB, 100, 20 * US, 20 * US), 4, 10);
    done(eng);
}

/* Each collective and size class learns on its own; sizes below the threshold keep the fixed rule
 * and are not timed. */
static void test_classes_apart(void **state)
{
    hc_shm_engine_t *eng = engine();
    static char buf[1];
    hc_op_t op = {.seq = ++seq};

    (void)state;
    assert_in_range(calls(eng, HC_COLL_ALLGATHER, 64 * KIB, 200, 12 * US, 8 * US), 180, 199);
    assert_int_equal(calls(eng, HC_COLL_ALLGATHER, 256 * KIB, 8, 20 * US, 40 * US), 4);
    assert_in_range(calls(eng, HC_COLL_ALLGATHER, 256 * KIB, 200, 20 * US, 40 * US), 1, 20);
    assert_int_equal(calls(eng, HC_COLL_SCATTER, 64 * KIB, 8, 12 * US, 8 * US), 4);
    /* 64 KiB AllGather kept its choice while the others learnt. */
    assert_in_range(calls(eng, HC_COLL_ALLGATHER, 96 * KIB, 100, 12 * US, 8 * US), 90, 100);
    op.sig.coll = HC_COLL_ALLGATHER;
    assert_int_equal(hc_shm_cma_readable(eng, &op, buf, 32 * KIB, 32 * KIB), 0);
    assert_null(eng->timing);
    op.sig.coll = HC_COLL_ALLREDUCE; /* not a choice: AllReduce decides by size on every rank */
    assert_int_equal(hc_shm_cma_readable(eng, &op, buf, 64 * KIB, 64 * KIB), 0);
    assert_null(eng->timing);
    done(eng);
}

/* One op over a mapped buffer (arena memory) of op_bytes whose run takes slots_ns or in_place_ns by
 * the path chosen (in_place_min: the collective's fixed size); returns the path, -1 if not timed. */
static int call_mapped(hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes, uint64_t in_place_min,
                       int64_t slots_ns, int64_t in_place_ns)
{
    hc_op_t op = {.seq = ++seq};
    int in_place;

    op.sig.coll = (uint32_t)coll;
    in_place = hc_shm_mapped_readable(eng, &op, op_bytes, in_place_min);
    if (eng->timing == NULL)
        return -1;
    eng->timing_since_ns -= in_place ? in_place_ns : slots_ns;
    hc_shm_cma_op_end(eng, &op, HCCL_SUCCESS);
    return in_place;
}

/* A mapped buffer is chosen for as a plain one is, in place against the slots, with choices of its
 * own: the same collective and size on plain memory (CMA 4x slower) learns apart. Below the gate
 * the slots, from the fixed size in place, neither timed; where the paths cost the same, the slots. */
static void test_mapped_apart(void **state)
{
    hc_shm_engine_t *eng = engine();
    int in_place = 0, cma = 0;

    (void)state;
    for (int i = 0; i < 200; i++) {
        in_place += call_mapped(eng, HC_COLL_ALLGATHER, 64 * KIB, UINT64_MAX, 12 * US, 4 * US);
        cma += call(eng, HC_COLL_ALLGATHER, 64 * KIB, 12 * US, 48 * US);
    }
    assert_in_range(in_place, 180, 199);
    assert_in_range(cma, 4, 20);
    assert_int_equal(eng->choices[(2 * 2 + 1) * HC_SHM_CHOICE_CLASSES + 16].choice, 1);
    assert_int_equal(eng->choices[2 * 2 * HC_SHM_CHOICE_CLASSES + 16].choice, 0);
    assert_int_equal(call_mapped(eng, HC_COLL_BROADCAST, 32 * KIB, UINT64_MAX, 12 * US, 4 * US), -1);
    assert_int_equal(call_mapped(eng, HC_COLL_SCATTER, 1024 * KIB, 1024 * KIB, 12 * US, 4 * US), -1);
    assert_int_equal(hc_shm_mapped_readable(eng, &(hc_op_t){.sig.coll = HC_COLL_SCATTER}, 1024 * KIB, 1024 * KIB), 1);
    assert_int_equal(call_mapped(eng, HC_COLL_ALLTOALL, 1024 * KIB, 1024 * KIB, 12 * US, 4 * US), -1);
    assert_int_equal(call_mapped(eng, HC_COLL_ALLREDUCE, 1024 * KIB, UINT64_MAX, 12 * US, 4 * US), -1);
    in_place = 0;
    for (int i = 0; i < 100; i++)
        in_place += call_mapped(eng, HC_COLL_BROADCAST, 128 * KIB, UINT64_MAX, 12 * US, 12 * US);
    assert_in_range(in_place, 4, 20); /* the learning calls and the probes */
    done(eng);
}

/* Learning starts on the path the nearest decided size class of the same collective and buffer
 * kind chose, else on the fixed sizes' path; AlltoAll measures only below its fixed CMA size. */
static void test_first_path(void **state)
{
    hc_shm_engine_t *eng = engine();
    static char buf[1];
    hc_op_t op = {.seq = ++seq};

    (void)state;
    eng->cma_alltoall_min = 1024 * KIB;
    /* Nothing decided: AllGather's fixed path is the slots, an exchange's from 256 KiB CMA. */
    assert_int_equal(call(eng, HC_COLL_ALLGATHER, 64 * KIB, 12 * US, 8 * US), 0);
    eng->p2p_cma_sym_min = 256 * KIB;
    assert_int_equal(call(eng, HC_COLL_BATCH_SENDRECV, 512 * KIB, 12 * US, 8 * US), 1);
    /* 64 KiB AllGather decides CMA; 128 KiB then starts on CMA, and 32 MiB too. */
    assert_in_range(calls(eng, HC_COLL_ALLGATHER, 64 * KIB, 100, 12 * US, 8 * US), 80, 99);
    assert_int_equal(call(eng, HC_COLL_ALLGATHER, 128 * KIB, 12 * US, 8 * US), 1);
    assert_int_equal(call(eng, HC_COLL_ALLGATHER, 32768 * KIB, 12 * US, 8 * US), 1);
    /* Mapped memory learns apart: its first call takes the slots. */
    assert_int_equal(call_mapped(eng, HC_COLL_ALLGATHER, 128 * KIB, UINT64_MAX, 12 * US, 8 * US), 0);
    /* AlltoAll: measured below 1 MiB, the fixed size above (untimed). */
    assert_int_equal(call(eng, HC_COLL_ALLTOALL, 512 * KIB, 12 * US, 8 * US), 0);
    op.sig.coll = HC_COLL_ALLTOALL;
    assert_int_equal(hc_shm_cma_readable(eng, &op, buf, 1024 * KIB, 1024 * KIB), 1);
    assert_null(eng->timing);
    done(eng);
}

/* A failed op, or the end of another op, is no sample. */
static void test_failure_is_no_sample(void **state)
{
    hc_shm_engine_t *eng = engine();
    static char buf[1];

    (void)state;
    for (int i = 0; i < 50; i++) {
        hc_op_t op = {.seq = ++seq}, other = {.seq = 0};
        int cma;
        op.sig.coll = HC_COLL_BROADCAST;
        cma = hc_shm_cma_readable(eng, &op, buf, 64 * KIB, 64 * KIB);
        eng->timing_since_ns -= cma ? 1 * US : 100 * US; /* CMA would look far faster... */
        hc_shm_cma_op_end(eng, &other, HCCL_SUCCESS);    /* ...but these ends are not this op's */
        assert_non_null(eng->timing);
        hc_shm_cma_op_end(eng, &op, HCCL_E_REMOTE);      /* ...and it failed */
        assert_null(eng->timing);
    }
    for (uint32_t k = 0; k < HC_SHM_CHOICE_SAMPLES; k++) {
        const hc_shm_choice_t *c = &eng->choices[16]; /* Broadcast, 64 KiB */
        assert_int_equal(c->ns[0][k], 0);
        assert_int_equal(c->ns[1][k], 0);
    }
    done(eng);
}

/* Whether a plain buffer could be read with CMA at some op size (hc_shm_cma_may_read): AlltoAllV's
 * count exchange publishes it, and an op in which no rank's could takes no describing step. Plain
 * 4 KiB-page memory (a static buffer: not huge pages, whatever the page scan finds) only where the
 * collective reads plain memory with CMA from some size or measures it; never with CMA off. */
static void test_may_read(void **state)
{
    static char buf[64];
    hc_shm_engine_t *eng = engine();
    hc_op_t op = {0};

    (void)state;
    eng->cma_huge_min = 1024 * KIB; /* huge pages from 1 MiB: the buffer is scanned, and is not */
    eng->cma_choose_min = UINT64_MAX;
    op.sig.coll = HC_COLL_ALLTOALLV;
    assert_false(hc_shm_cma_may_read(eng, &op, buf, sizeof(buf)));
    eng->cma_alltoall_min = 1024 * KIB;
    assert_true(hc_shm_cma_may_read(eng, &op, buf, sizeof(buf)));
    assert_false(hc_shm_cma_may_read(eng, &op, NULL, sizeof(buf)));
    op.sig.coll = HC_COLL_SCATTER; /* its own size: never */
    assert_false(hc_shm_cma_may_read(eng, &op, buf, sizeof(buf)));
    eng->cma_choose_min = 64 * KIB; /* measured from 64 KiB */
    assert_true(hc_shm_cma_may_read(eng, &op, buf, sizeof(buf)));
    eng->cma = 0;
    assert_false(hc_shm_cma_may_read(eng, &op, buf, sizeof(buf)));
    done(eng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keeps_the_faster_path),
        cmocka_unit_test(test_noise_does_not_steer),
        cmocka_unit_test(test_cost_after_the_op_counts),
        cmocka_unit_test(test_one_choice_per_op),
        cmocka_unit_test(test_classes_apart),
        cmocka_unit_test(test_mapped_apart),
        cmocka_unit_test(test_first_path),
        cmocka_unit_test(test_failure_is_no_sample),
        cmocka_unit_test(test_may_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
