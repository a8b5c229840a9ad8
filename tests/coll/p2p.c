/*
 * Point-to-point on both protocols (src/shm/shm_p2p.c): eager through the ring, and rendezvous,
 * where the receiver copies straight from the sender's buffer (aclrtMalloc arena, or plain memory
 * with cross-memory attach). Sizes straddle HOSTCCL_P2P_SINGLE_COPY_MIN (default 256 bytes) and
 * 64 KiB (what the tests set HOSTCCL_P2P_CMA_MIN to), and go past the ring (4 chunks of 256 KiB)
 * and the rendezvous copy piece (8 MiB), in five patterns:
 *
 *   exchange   both directions of a pair in one group (the perf tool's send_recv)
 *   ring       HcclBatchSendRecv: send to rank r+1, receive from rank r-1, receive listed first
 *   same-peer  two messages to the same peer in one group, large then small and small then large:
 *              they must arrive in order and whole whatever protocol each one takes
 *   one-way    HcclSend on one rank, HcclRecv on the other, no group, then back
 *   half       rank 0 exchanges in one group, rank 1 sends and receives in two ops (send first, then
 *              receive first): rank 0's send learns that it was received from the channel, not
 *              from rank 1's message (which tells an older receive, or none)
 *
 * First, bad arguments of Send and Recv get their codes inside a group as outside, and nothing is
 * parked for them (the group's end then has nothing to issue).
 * Every element is checked against f(sender, message, index).
 * usage: p2p [--mem arena|malloc] [--counts N,N,...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define MAX_COUNTS 16

static int use_malloc;
static int wrong;

static void *alloc_buffer(size_t bytes)
{
    void *p = NULL;

    if (!use_malloc)
        T_CHECK_ACL(aclrtMalloc(&p, bytes ? bytes : 64, ACL_MEM_MALLOC_HUGE_FIRST));
    else if ((p = malloc(bytes ? bytes : 64)) == NULL)
        exit(1);
    return p;
}

static void free_buffer(void *p)
{
    if (!use_malloc)
        T_CHECK_ACL(aclrtFree(p));
    else
        free(p);
}

/* Integers below 2^24: exact in fp32. */
static float value(uint32_t sender, uint32_t msg, uint64_t i)
{
    return (float)((sender * 7919u + msg * 104729u + (uint32_t)(i % 65521u)) % 16777213u);
}

static void fill(float *buf, uint64_t count, uint32_t sender, uint32_t msg)
{
    for (uint64_t i = 0; i < count; i++)
        buf[i] = value(sender, msg, i);
}

static void check(const char *pattern, const float *buf, uint64_t count, uint32_t me, uint32_t sender, uint32_t msg)
{
    for (uint64_t i = 0; i < count; i++) {
        if (buf[i] != value(sender, msg, i)) {
            fprintf(stderr, "rank %u: %s, %llu elements from rank %u (message %u): element %llu is %g, expected %g\n",
                    me, pattern, (unsigned long long)count, sender, msg, (unsigned long long)i, (double)buf[i],
                    (double)value(sender, msg, i));
            wrong = 1;
            return;
        }
    }
}

typedef struct {
    t_world_t w;
    uint32_t me, n;
    float *send[2], *recv[2];
} ctx_t;

static void sync_stream(ctx_t *x)
{
    T_CHECK_ACL(aclrtSynchronizeStream(x->w.stream));
}

static void exchange(ctx_t *x, uint64_t count)
{
    uint32_t partner = x->me ^ 1u;

    if (partner >= x->n)
        return;
    fill(x->send[0], count, x->me, 1);
    T_CHECK_HCCL(HcclGroupStart());
    T_CHECK_HCCL(HcclSend(x->send[0], count, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
    T_CHECK_HCCL(HcclRecv(x->recv[0], count, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
    T_CHECK_HCCL(HcclGroupEnd());
    sync_stream(x);
    check("exchange", x->recv[0], count, x->me, partner, 1);
}

static void ring(ctx_t *x, uint64_t count)
{
    uint32_t next = (x->me + 1) % x->n, prev = (x->me + x->n - 1) % x->n;
    HcclSendRecvItem items[2] = {
        {.sendRecvType = HCCL_RECV, .buf = x->recv[0], .count = count, .dataType = HCCL_DATA_TYPE_FP32,
         .remoteRank = prev},
        {.sendRecvType = HCCL_SEND, .buf = x->send[0], .count = count, .dataType = HCCL_DATA_TYPE_FP32,
         .remoteRank = next},
    };

    fill(x->send[0], count, x->me, 2);
    T_CHECK_HCCL(HcclBatchSendRecv(items, 2, x->w.comm, x->w.stream));
    sync_stream(x);
    check("ring", x->recv[0], count, x->me, prev, 2);
}

/* Two messages each way between ranks 0 and 1 in one group: `first` elements, then `second`. */
static void same_peer(ctx_t *x, uint64_t first, uint64_t second)
{
    uint32_t partner = x->me ^ 1u;

    if (x->me > 1)
        return;
    fill(x->send[0], first, x->me, 3);
    fill(x->send[1], second, x->me, 4);
    T_CHECK_HCCL(HcclGroupStart());
    T_CHECK_HCCL(HcclRecv(x->recv[0], first, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
    T_CHECK_HCCL(HcclSend(x->send[0], first, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
    T_CHECK_HCCL(HcclSend(x->send[1], second, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
    T_CHECK_HCCL(HcclRecv(x->recv[1], second, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
    T_CHECK_HCCL(HcclGroupEnd());
    sync_stream(x);
    check("same-peer first", x->recv[0], first, x->me, partner, 3);
    check("same-peer second", x->recv[1], second, x->me, partner, 4);
}

/* Rank 0 sends, rank 1 receives, then the other way, without groups. The sender overwrites its
 * buffer as soon as its stream says the send completed, which for a message through the ring may be
 * before the receiver copied it out: whatever it reads then must still be the message. */
static void one_way(ctx_t *x, uint64_t count)
{
    for (uint32_t from = 0; from < 2 && x->n >= 2; from++) {
        uint32_t to = 1 - from;
        if (x->me == from) {
            fill(x->send[0], count, x->me, 5);
            T_CHECK_HCCL(HcclSend(x->send[0], count, HCCL_DATA_TYPE_FP32, to, x->w.comm, x->w.stream));
            sync_stream(x);
            memset(x->send[0], 0xff, count * sizeof(float));
        } else if (x->me == to) {
            T_CHECK_HCCL(HcclRecv(x->recv[0], count, HCCL_DATA_TYPE_FP32, from, x->w.comm, x->w.stream));
            sync_stream(x);
            check("one-way", x->recv[0], count, x->me, from, 5);
        }
    }
}

/* Rank 0's half is an exchange (one group), rank 1's two ops, in the order recv_first says. */
static void half_exchange(ctx_t *x, uint64_t count, int recv_first)
{
    uint32_t partner = x->me ^ 1u;

    if (x->me > 1 || x->n < 2)
        return;
    fill(x->send[0], count, x->me, 6);
    if (x->me == 0) {
        T_CHECK_HCCL(HcclGroupStart());
        T_CHECK_HCCL(HcclSend(x->send[0], count, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
        T_CHECK_HCCL(HcclRecv(x->recv[0], count, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
        T_CHECK_HCCL(HcclGroupEnd());
    } else if (recv_first) {
        T_CHECK_HCCL(HcclRecv(x->recv[0], count, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
        T_CHECK_HCCL(HcclSend(x->send[0], count, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
    } else {
        T_CHECK_HCCL(HcclSend(x->send[0], count, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
        T_CHECK_HCCL(HcclRecv(x->recv[0], count, HCCL_DATA_TYPE_FP32, partner, x->w.comm, x->w.stream));
    }
    sync_stream(x);
    check(recv_first ? "half, receive first" : "half, send first", x->recv[0], count, x->me, partner, 6);
}

/* Each bad Send or Recv gets its code, outside a group and inside one (whose end then has nothing to
 * issue); count 0 succeeds and moves nothing. */
static void bad_args(ctx_t *x)
{
    uint32_t partner = x->me ^ 1u;
    HcclComm c = x->w.comm;
    aclrtStream s = x->w.stream;
    float *b = x->send[0];

    if (partner >= x->n)
        return;
    for (int grouped = 0; grouped < 2; grouped++) {
        if (grouped)
            T_CHECK_HCCL(HcclGroupStart());
        T_CHECK(HcclSend(b, 4, (HcclDataType)99, partner, c, s) == HCCL_E_PARA);
        T_CHECK(HcclRecv(b, 4, HCCL_DATA_TYPE_FP8E4M3, partner, c, s) == HCCL_E_PARA);
        T_CHECK(HcclSend(b, 4, HCCL_DATA_TYPE_FP32, x->me, c, s) == HCCL_E_PARA);
        T_CHECK(HcclRecv(b, 4, HCCL_DATA_TYPE_FP32, x->n, c, s) == HCCL_E_PARA);
        T_CHECK(HcclSend(NULL, 4, HCCL_DATA_TYPE_FP32, partner, c, s) == HCCL_E_PTR);
        T_CHECK(HcclRecv(NULL, 4, HCCL_DATA_TYPE_FP32, partner, c, s) == HCCL_E_PTR);
        T_CHECK(HcclSend(b, UINT64_MAX / 2, HCCL_DATA_TYPE_FP32, partner, c, s) == HCCL_E_PARA);
        T_CHECK(HcclRecv(NULL, 0, HCCL_DATA_TYPE_FP32, partner, c, s) == HCCL_SUCCESS);
        T_CHECK(HcclSend(NULL, 4, HCCL_DATA_TYPE_FP32, partner, NULL, s) == HCCL_E_PTR);
        if (grouped)
            T_CHECK_HCCL(HcclGroupEnd());
        sync_stream(x);
    }
}

static int parse_counts(const char *text, uint64_t *counts)
{
    int n = 0;

    for (char *end; *text != '\0' && n < MAX_COUNTS; text = *end == ',' ? end + 1 : end) {
        counts[n++] = strtoull(text, &end, 10);
        if (end == text)
            return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    /* Inline in a chunk header (at most 16 bytes: 1, 4) and just not (5); below, at and above the
     * single-copy threshold (256 bytes), either side of 64 KiB, a whole 256 KiB chunk and a 16-byte
     * last one (65540, inline again on plain memory), above the ring (4 x 256 KiB), above one
     * rendezvous piece (8 MiB) with an odd tail. */
    uint64_t counts[MAX_COUNTS] = {1, 4, 5, 63, 64, 1023, 16383, 16385, 65540, 300007, 2621447};
    uint64_t largest = 0;
    int ncounts = 11;
    ctx_t x;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mem") == 0) {
            use_malloc = strcmp(argv[i + 1], "malloc") == 0;
        } else if (strcmp(argv[i], "--counts") == 0 && (ncounts = parse_counts(argv[i + 1], counts)) > 0) {
        } else {
            fprintf(stderr, "usage: p2p [--mem arena|malloc] [--counts N,N,...]\n");
            return 2;
        }
    }
    for (int i = 0; i < ncounts; i++)
        largest = counts[i] > largest ? counts[i] : largest;
    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&x.w);
    x.me = x.w.launch.rank;
    x.n = x.w.launch.size;
    for (int k = 0; k < 2; k++) {
        x.send[k] = alloc_buffer(largest * sizeof(float));
        x.recv[k] = alloc_buffer(largest * sizeof(float));
    }
    bad_args(&x);
    for (int i = 0; i < ncounts; i++) {
        exchange(&x, counts[i]);
        ring(&x, counts[i]);
        one_way(&x, counts[i]);
        half_exchange(&x, counts[i], 0);
        half_exchange(&x, counts[i], 1);
        same_peer(&x, counts[i], counts[(i + 1) % ncounts]);
        same_peer(&x, counts[(i + 1) % ncounts], counts[i]);
    }
    for (int k = 0; k < 2; k++) {
        free_buffer(x.send[k]);
        free_buffer(x.recv[k]);
    }
    t_world_fini(&x.w);
    T_CHECK_ACL(aclFinalize());
    if (!wrong)
        printf("rank %u: p2p %s: %d counts, every pattern right\n", x.me, use_malloc ? "malloc" : "arena", ncounts);
    return wrong;
}
