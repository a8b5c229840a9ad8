/*
 * The posting a whole message's chunk carries (src/shm/shm_p2p.c, shm_internal.h), on two engines
 * laid out over one segment in plain memory: in an exchange each rank posts its receive before it
 * sends, so the chunk it reads for its receive tells whether its own send is received. A send is
 * complete only when that receive has the send's count and type; the posting told by the chunk
 * must be compared, not just its number.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shm_internal.h"

#define CHUNK_BYTES 4096u

typedef struct {
    hc_shm_engine_t eng[2];
    hc_issue_lock_t lock;
    uint8_t *map;
    float out[2][4], in[2][4];
} fixture_t;

static void engine_init(hc_shm_engine_t *eng, uint32_t me, uint8_t *map, hc_issue_lock_t *lock)
{
    eng->nlocal = 2;
    eng->me = me;
    eng->map = map;
    eng->slot_bytes = 4096;
    eng->p2p_chunk_bytes = CHUNK_BYTES;
    eng->p2p_single_copy_min = UINT64_MAX; /* eager only */
    eng->base.group.lock = lock;
    eng->pids = calloc(2, sizeof(*eng->pids));
    assert_int_equal(hc_shm_p2p_init(eng), HCCL_SUCCESS);
    assert_non_null(eng->pids);
}

static void engine_fini(hc_shm_engine_t *eng)
{
    hc_shm_p2p_fini(eng);
    free(eng->pids);
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    size_t bytes;

    assert_non_null(f);
    assert_int_equal(hc_issue_lock_init(&f->lock), 0);
    engine_init(&f->eng[0], 0, NULL, &f->lock);
    bytes = (hc_shm_segment_bytes(&f->eng[0]) + 4095) & ~(size_t)4095;
    f->map = aligned_alloc(4096, bytes);
    assert_non_null(f->map);
    memset(f->map, 0, bytes);
    f->eng[0].map = f->map;
    engine_init(&f->eng[1], 1, f->map, &f->lock);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;

    engine_fini(&f->eng[0]);
    engine_fini(&f->eng[1]);
    free(f->map);
    hc_issue_lock_destroy(&f->lock);
    free(f);
    return 0;
}

/* Rank r's batch, begun at launch: a send of `send_count` elements to the other rank (none if 0),
 * then a receive of `recv_count` from it (none if 0), as a group lists them. */
static void start_batch(fixture_t *f, hc_op_t *op, uint32_t r, uint64_t send_count, uint64_t recv_count, uint64_t seq)
{
    uint32_t n = 0;

    memset(op, 0, sizeof(*op));
    op->sig.coll = HC_COLL_BATCH_SENDRECV;
    op->items = op->inline_items;
    if (send_count > 0)
        op->items[n++] = (HcclSendRecvItem){.sendRecvType = HCCL_SEND, .buf = f->out[r], .count = send_count,
                                            .dataType = HCCL_DATA_TYPE_FP32, .remoteRank = 1 - r};
    if (recv_count > 0)
        op->items[n++] = (HcclSendRecvItem){.sendRecvType = HCCL_RECV, .buf = f->in[r], .count = recv_count,
                                            .dataType = HCCL_DATA_TYPE_FP32, .remoteRank = 1 - r};
    op->nitems = n;
    op->seq = seq;
    op->started = 1;
    assert_int_equal(hc_shm_p2p_start(&f->eng[r], op), 1);
}

/* Both ranks exchange one element; the receiver's `posted` line of rank 0's channel is then wiped:
 * rank 0 still finds its send received, from rank 1's chunk alone. */
static void test_exchange_told_by_the_chunk(void **state)
{
    fixture_t *f = *state;
    hc_op_t op0, op1;

    start_batch(f, &op0, 0, 1, 1, 1);
    start_batch(f, &op1, 1, 1, 1, 1);
    atomic_store(&hc_shm_channel(&f->eng[0], 0, 1)->posted, 0);
    assert_int_equal(hc_shm_p2p_ready(&f->eng[0], &op0), 1);
}

/* Rank 1 receives two elements where rank 0 sends one: its chunk says so, and rank 0's send is not
 * received (its run then waits for rank 1's report of the mismatch). */
static void test_exchange_count_differs(void **state)
{
    fixture_t *f = *state;
    hc_op_t op0, op1;

    start_batch(f, &op0, 0, 1, 1, 1);
    start_batch(f, &op1, 1, 1, 2, 1);
    assert_int_equal(hc_shm_p2p_ready(&f->eng[0], &op0), 0);
}

/* A one-way message: rank 1 sends nothing back, so rank 0 learns of the receive from `posted`. */
static void test_one_way_read_from_posted(void **state)
{
    fixture_t *f = *state;
    hc_op_t op0, op1;

    start_batch(f, &op0, 0, 1, 0, 1);
    assert_int_equal(hc_shm_p2p_ready(&f->eng[0], &op0), 0); /* not posted yet */
    start_batch(f, &op1, 1, 0, 1, 1);
    assert_int_equal(hc_shm_p2p_ready(&f->eng[0], &op0), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exchange_told_by_the_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exchange_count_differs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_way_read_from_posted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
