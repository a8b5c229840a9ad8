/*
 * The collective test matrix: collective x dtype x op x count x in-place x buffer kind, on the
 * ranks this program was launched with (hccl-run -n N), or on N threads of one process
 * (--threads N, HcclCommInitAll). Inputs are a deterministic function of (rank, index), so every
 * rank computes the expected output of every case itself. Integers use all their bits and wrap.
 * Floating inputs are inexact (fractions that no float format holds exactly, mixed signs), so sums
 * and products round, and the expected output follows the contract of docs/reductions.md to the
 * bit: the inputs as stored in their type, combined in rank order, fp16 and bf16 widened to fp32
 * and accumulated there, every result rounded to nearest even once. A reduction in another order,
 * in the narrow type, or with a different rounding shows as wrong bits.
 *
 * usage: coll_matrix [--colls a,b] [--dtypes all|a,b] [--ops all|a,b] [--counts 0,1,7]
 *                    [--inplace 0|1|both] [--mem arena|malloc|both|mixed|split|huge|hugemix] [--threads N]
 *                    [--order rank|any]
 *
 * --order any: floating reductions may combine ranks in any order, with roundings in between (the
 * TCP schedules and the two-level composition across hosts without HCCL_DETERMINISTIC); each such
 * element must be within nranks * S * (2^-m + 2^-24) of the rank-order result, S the sum of the
 * inputs' magnitudes (their product's for prod), m the output type's mantissa bits. Max and min,
 * and every other collective, stay bit-exact.
 *
 * --mem mixed: even ranks use aclrtMalloc buffers, odd ranks malloc, so that one op reads some
 * ranks' buffers in place and stages the others. --mem split: send buffers from aclrtMalloc,
 * receive buffers from malloc (one buffer, from aclrtMalloc, when they are the same). --mem huge:
 * plain memory advised for transparent huge pages (as numpy allocates large arrays), which a peer
 * reads with process_vm_readv from HOSTCCL_CMA_HUGE_MIN when the kernel backs it with huge pages;
 * --mem hugemix: even ranks huge, odd ranks malloc, so that one op reads some sources with CMA and
 * stages the others.
 */
#include <math.h>
#include <sys/mman.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_util.h"

#define C_COUNT 14
static const char *const coll_names[C_COUNT] = {
    "allreduce", "broadcast", "barrier", "reduce", "allgather", "allgatherv", "reducescatter",
    "reducescatterv", "scatter", "alltoall", "alltoallv", "alltoallvc", "sendrecv", "batch"};

static const struct {
    const char *name;
    HcclDataType dtype;
    size_t size;
} dtypes[] = {
    {"int8", HCCL_DATA_TYPE_INT8, 1},     {"uint8", HCCL_DATA_TYPE_UINT8, 1},   {"int16", HCCL_DATA_TYPE_INT16, 2},
    {"uint16", HCCL_DATA_TYPE_UINT16, 2}, {"int32", HCCL_DATA_TYPE_INT32, 4},   {"uint32", HCCL_DATA_TYPE_UINT32, 4},
    {"int64", HCCL_DATA_TYPE_INT64, 8},   {"uint64", HCCL_DATA_TYPE_UINT64, 8}, {"fp16", HCCL_DATA_TYPE_FP16, 2},
    {"bf16", HCCL_DATA_TYPE_BFP16, 2},    {"fp32", HCCL_DATA_TYPE_FP32, 4},     {"fp64", HCCL_DATA_TYPE_FP64, 8},
};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))
static const char *const op_names[] = {"sum", "prod", "max", "min"};

typedef struct {
    unsigned colls;   /* bit per coll_t */
    unsigned dtypes;  /* bit per dtypes[] index */
    unsigned ops;     /* bit per HcclReduceOp 0..3 */
    uint64_t counts[16];
    int ncounts;
    int inplace_min, inplace_max;
    int mem_min, mem_max; /* 0 arena, 1 malloc, 2 mixed (by rank parity) */
    int threads;
    int order_any;        /* --order any */
    uint32_t perm[64];    /* --ranks: world ranks in the order of a sub-communicator to run on */
    uint32_t nperm;
} options_t;

/* ---- values ------------------------------------------------------------------------------------ */

static int is_float(HcclDataType t)
{
    return t == HCCL_DATA_TYPE_FP16 || t == HCCL_DATA_TYPE_BFP16 || t == HCCL_DATA_TYPE_FP32 ||
           t == HCCL_DATA_TYPE_FP64;
}

/* Integer inputs: all 64 bits vary with rank and index. */
static uint64_t int_value(uint32_t rank, uint64_t i)
{
    uint64_t x = (rank + 1) * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 29);
}

/* Float inputs: thirds and sevenths (inexact in every format) of mixed signs and magnitudes; for
 * products, factors near 1 (ten ranks multiply to at most ~60, inside fp16's range). */
static double float_value(uint32_t rank, uint64_t i, HcclReduceOp op)
{
    static const double prod_values[] = {1.0, -1.0, 1.5, 0.75, -1.25};
    double fraction = (double)((rank * 13 + i * 7) % 23) / 69.0 + (double)(i % 5) / 7000.0;

    if (op == HCCL_REDUCE_PROD)
        return prod_values[(rank * 3 + i) % 5] * (1.0 + fraction / 8.0);
    return (double)((int)((rank * 7 + i * 3) % 11) - 5) + fraction;
}

/* fp32 -> bf16, round to nearest even (no NaN occurs here). */
static uint16_t bf16_of(float f)
{
    uint32_t bits;

    memcpy(&bits, &f, sizeof(bits));
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

static float float_of_bf16(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* A value as type t holds it once stored (rounded to nearest even), widened back to double. */
static double as_stored(HcclDataType t, double v)
{
    switch (t) {
    case HCCL_DATA_TYPE_FP16:
        return aclFloat16ToFloat(aclFloatToFloat16((float)v));
    case HCCL_DATA_TYPE_BFP16:
        return float_of_bf16(bf16_of((float)v));
    case HCCL_DATA_TYPE_FP32:
        return (float)v;
    default:
        return v;
    }
}

static void store(HcclDataType t, void *buf, uint64_t i, uint64_t ivalue, double fvalue)
{
    switch (t) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)ivalue;
        break;
    case HCCL_DATA_TYPE_INT16:
    case HCCL_DATA_TYPE_UINT16:
        ((uint16_t *)buf)[i] = (uint16_t)ivalue;
        break;
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_UINT32:
        ((uint32_t *)buf)[i] = (uint32_t)ivalue;
        break;
    case HCCL_DATA_TYPE_INT64:
    case HCCL_DATA_TYPE_UINT64:
        ((uint64_t *)buf)[i] = ivalue;
        break;
    case HCCL_DATA_TYPE_FP16:
        ((uint16_t *)buf)[i] = aclFloatToFloat16((float)fvalue);
        break;
    case HCCL_DATA_TYPE_BFP16:
        ((uint16_t *)buf)[i] = bf16_of((float)fvalue);
        break;
    case HCCL_DATA_TYPE_FP32:
        ((float *)buf)[i] = (float)fvalue;
        break;
    default:
        ((double *)buf)[i] = fvalue;
        break;
    }
}


/* Sign-extend or zero-extend the low `bytes` of v as the integer type would hold it. */
static int64_t as_signed(uint64_t v, size_t bytes)
{
    unsigned shift = (unsigned)(64 - 8 * bytes);
    return (int64_t)(v << shift) >> shift;
}

static int int_signed(HcclDataType t)
{
    return t == HCCL_DATA_TYPE_INT8 || t == HCCL_DATA_TYPE_INT16 || t == HCCL_DATA_TYPE_INT32 ||
           t == HCCL_DATA_TYPE_INT64;
}

/* The reduction over all ranks of element i, stored into expected[i]. */
static void reduce_expected(HcclDataType t, size_t size, HcclReduceOp op, uint32_t nranks, uint64_t i,
                            void *expected, uint64_t idx)
{
    if (t == HCCL_DATA_TYPE_FP64) {
        double acc = float_value(0, i, op);
        for (uint32_t r = 1; r < nranks; r++) {
            double v = float_value(r, i, op);
            acc = op == HCCL_REDUCE_SUM ? acc + v : op == HCCL_REDUCE_PROD ? acc * v
                                                  : op == HCCL_REDUCE_MAX  ? (v > acc ? v : acc)
                                                                           : (v < acc ? v : acc);
        }
        store(t, expected, idx, 0, acc);
        return;
    }
    if (is_float(t)) {
        /* fp32 arithmetic (one rounding per combine), on the stored inputs, in rank order; fp16 and
         * bf16 are rounded once, by store(). */
        float acc = (float)as_stored(t, float_value(0, i, op));
        for (uint32_t r = 1; r < nranks; r++) {
            float v = (float)as_stored(t, float_value(r, i, op));
            acc = op == HCCL_REDUCE_SUM ? acc + v : op == HCCL_REDUCE_PROD ? acc * v
                                                  : op == HCCL_REDUCE_MAX  ? (v > acc ? v : acc)
                                                                           : (v < acc ? v : acc);
        }
        store(t, expected, idx, 0, acc);
        return;
    }
    uint64_t mask = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
    uint64_t acc = int_value(0, i) & mask;
    for (uint32_t r = 1; r < nranks; r++) {
        uint64_t v = int_value(r, i) & mask;
        if (op == HCCL_REDUCE_SUM)
            acc = (acc + v) & mask;
        else if (op == HCCL_REDUCE_PROD)
            acc = (acc * v) & mask;
        else {
            int v_bigger = int_signed(t) ? as_signed(v, size) > as_signed(acc, size) : v > acc;
            if (op == HCCL_REDUCE_MAX ? v_bigger : (!v_bigger && v != acc))
                acc = v;
        }
    }
    store(t, expected, idx, acc, 0);
}

/* ---- one case ------------------------------------------------------------------------------------ */

typedef enum {
    C_ALLREDUCE, C_BROADCAST, C_BARRIER, C_REDUCE, C_ALLGATHER, C_ALLGATHERV, C_REDUCESCATTER,
    C_REDUCESCATTERV, C_SCATTER, C_ALLTOALL, C_ALLTOALLV, C_ALLTOALLVC, C_SENDRECV, C_BATCH, C_ALL
} coll_id_t;

typedef struct {
    int coll;
    int dtype_index;
    HcclReduceOp op;
    uint64_t count;
    int inplace;
    int mem;
    int order_any; /* options_t.order_any */
} case_t;

/* Everything one case needs: buffers (recv may alias send), expected output, counts. */
typedef struct {
    const case_t *c;
    HcclDataType t;
    size_t size;
    uint32_t me, n;
    uint8_t *send, *recv, *expected;
    size_t send_elems, recv_elems;
    uint64_t *counts, *displs, *rcounts, *rdispls; /* V variants, n entries (VC: n*n matrix in counts) */
    uint64_t *pos;        /* --order any: the input position of each reduced output element, else NULL */
} ctx_t;

static const char *const mem_names[] = {"arena", "malloc", "mixed", "split", "huge", "hugemix"};
enum { MEM_ARENA, MEM_MALLOC, MEM_MIXED, MEM_SPLIT, MEM_HUGE, MEM_HUGEMIX, MEM_KINDS };

/* The buffer kind (MEM_ARENA, MEM_MALLOC or MEM_HUGE) of this rank in this case. */
static int mem_kind(const ctx_t *x)
{
    switch (x->c->mem) {
    case MEM_MIXED:
        return x->me & 1 ? MEM_MALLOC : MEM_ARENA;
    case MEM_SPLIT:
        return MEM_ARENA;
    case MEM_HUGEMIX:
        return x->me & 1 ? MEM_MALLOC : MEM_HUGE;
    default:
        return x->c->mem;
    }
}

/* The kind of a separate receive buffer. */
static int recv_kind(const ctx_t *x)
{
    return x->c->mem == MEM_SPLIT ? MEM_MALLOC : mem_kind(x);
}

#define HUGE_PAGE_BYTES (2u << 20)

static void *alloc_buffer(int mem, size_t bytes)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 64;
    if (mem == MEM_ARENA) {
        T_CHECK_ACL(aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    } else if (mem == MEM_HUGE) {
        /* A fresh mapping each time: memory malloc hands back may already be faulted in as small
         * pages, which madvise does not convert (and then no case would read huge pages). */
        size_t len = (bytes + 2 * HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
        uint8_t *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
            exit(1);
        p = (void *)(((uintptr_t)base + HUGE_PAGE_BYTES) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1));
        ((size_t *)p)[-2] = (size_t)(uintptr_t)base, ((size_t *)p)[-1] = len;
        /* Whole huge pages: a huge page must fit in the advised range. Best effort: the kernel may
         * still give small pages. */
        (void)madvise(p, (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES, MADV_HUGEPAGE);
    } else if ((p = malloc(bytes)) == NULL) {
        exit(1);
    }
    return p;
}

static void free_buffer(int mem, void *p)
{
    if (mem == MEM_ARENA)
        T_CHECK_ACL(aclrtFree(p));
    else if (mem == MEM_HUGE)
        munmap((void *)(uintptr_t)((size_t *)p)[-2], ((size_t *)p)[-1]);
    else
        free(p);
}

/* Element `idx` of buf := rank r's input value at position `pos`. */
static void put(const ctx_t *x, void *buf, uint64_t idx, uint32_t r, uint64_t pos)
{
    store(x->t, buf, idx, int_value(r, pos), float_value(r, pos, x->c->op));
}

/* Element `idx` of buf := the reduction over all ranks of their input at position `pos`. */
static void put_reduced(const ctx_t *x, void *buf, uint64_t idx, uint64_t pos)
{
    reduce_expected(x->t, x->size, x->c->op, x->n, pos, buf, idx);
    if (x->pos != NULL && buf == x->expected)
        x->pos[idx] = pos;
}

/* AlltoAllV(C) counts: what rank i sends to rank j; varies with both and is 0 for some pairs. */
static uint64_t a2a_count(const ctx_t *x, uint32_t i, uint32_t j)
{
    uint64_t k = (i * 3u + j) % 4u;
    return k == 3 ? 0 : x->c->count + k;
}

/* Displacement of rank i's block for j in i's send buffer (gaps of one element between blocks). */
static uint64_t a2a_sdispl(const ctx_t *x, uint32_t i, uint32_t j)
{
    uint64_t d = 0;
    for (uint32_t k = 0; k < j; k++)
        d += a2a_count(x, i, k) + 1;
    return d;
}

static uint64_t a2a_rdispl(const ctx_t *x, uint32_t me, uint32_t i)
{
    uint64_t d = 0;
    for (uint32_t k = 0; k < i; k++)
        d += a2a_count(x, k, me) + 1;
    return d;
}

/* V-variant block sizes: count + r, with one-element gaps. */
static void v_layout(ctx_t *x)
{
    uint64_t d = 0;
    for (uint32_t r = 0; r < x->n; r++) {
        x->counts[r] = x->c->count + r;
        x->displs[r] = d;
        d += x->counts[r] + 1;
    }
}

/* Sizes of send and receive buffers, in elements. */
static void sizes(ctx_t *x)
{
    uint64_t c = x->c->count, n = x->n, total = 0;
    switch (x->c->coll) {
    case C_ALLGATHER:
        x->send_elems = c, x->recv_elems = n * c;
        break;
    case C_REDUCESCATTER:
        x->send_elems = n * c, x->recv_elems = c;
        break;
    case C_SCATTER:
        x->send_elems = n * c, x->recv_elems = c;
        break;
    case C_ALLTOALL:
    case C_BATCH:
        x->send_elems = x->recv_elems = n * c;
        break;
    case C_ALLGATHERV:
    case C_REDUCESCATTERV:
        v_layout(x);
        total = x->displs[n - 1] + x->counts[n - 1];
        x->send_elems = x->c->coll == C_ALLGATHERV ? x->counts[x->me] : total;
        x->recv_elems = x->c->coll == C_ALLGATHERV ? total : x->counts[x->me];
        break;
    case C_ALLTOALLV:
        x->send_elems = a2a_sdispl(x, x->me, x->n);
        x->recv_elems = a2a_rdispl(x, x->me, x->n);
        break;
    case C_ALLTOALLVC: /* contiguous blocks */
        x->send_elems = x->recv_elems = 0;
        for (uint32_t r = 0; r < x->n; r++) {
            x->send_elems += a2a_count(x, x->me, r);
            x->recv_elems += a2a_count(x, r, x->me);
        }
        break;
    default:
        x->send_elems = x->recv_elems = c;
        break;
    }
}

/* Fill the send buffer and compute the expected output. */
static void prepare(ctx_t *x)
{
    uint64_t c = x->c->count;
    uint32_t root = (uint32_t)(c % x->n), me = x->me;

    for (uint64_t p = 0; p < x->send_elems; p++)
        put(x, x->send, p, me, p);
    switch (x->c->coll) {
    case C_ALLREDUCE:
        for (uint64_t i = 0; i < c; i++)
            put_reduced(x, x->expected, i, i);
        break;
    case C_REDUCE:
        for (uint64_t i = 0; i < c && me == root; i++)
            put_reduced(x, x->expected, i, i);
        break;
    case C_BROADCAST:
        for (uint64_t i = 0; i < c; i++)
            put(x, x->expected, i, root, i);
        break;
    case C_ALLGATHER:
        for (uint32_t r = 0; r < x->n; r++)
            for (uint64_t i = 0; i < c; i++)
                put(x, x->expected, r * c + i, r, i);
        break;
    case C_ALLGATHERV:
        for (uint32_t r = 0; r < x->n; r++)
            for (uint64_t i = 0; i < x->counts[r]; i++)
                put(x, x->expected, x->displs[r] + i, r, i);
        break;
    case C_REDUCESCATTER:
        for (uint64_t i = 0; i < c; i++)
            put_reduced(x, x->expected, i, me * c + i);
        break;
    case C_REDUCESCATTERV:
        for (uint64_t i = 0; i < x->counts[me]; i++)
            put_reduced(x, x->expected, i, x->displs[me] + i);
        break;
    case C_SCATTER:
        for (uint64_t i = 0; i < c; i++)
            put(x, x->expected, i, root, me * c + i);
        break;
    case C_ALLTOALL:
    case C_BATCH:
        for (uint32_t r = 0; r < x->n; r++)
            for (uint64_t i = 0; i < c; i++)
                put(x, x->expected, r * c + i, r, me * c + i);
        break;
    case C_ALLTOALLV:
        for (uint32_t r = 0; r < x->n; r++)
            for (uint64_t i = 0; i < a2a_count(x, r, me); i++)
                put(x, x->expected, a2a_rdispl(x, me, r) + i, r, a2a_sdispl(x, r, me) + i);
        break;
    case C_ALLTOALLVC: {
        uint64_t d = 0;
        for (uint32_t r = 0; r < x->n; r++) {
            uint64_t sd = 0; /* where rank r's block for me starts in r's send buffer */
            for (uint32_t k = 0; k < me; k++)
                sd += a2a_count(x, r, k);
            for (uint64_t i = 0; i < a2a_count(x, r, me); i++)
                put(x, x->expected, d + i, r, sd + i);
            d += a2a_count(x, r, me);
        }
        break;
    }
    case C_SENDRECV:
        for (uint64_t i = 0; i < c; i++)
            put(x, x->expected, i, (me + x->n - 1) % x->n, i);
        break;
    default:
        break;
    }
}

static void issue_p2p(ctx_t *x, HcclComm comm, aclrtStream stream)
{
    uint32_t n = x->n, me = x->me, next = (me + 1) % n, prev = (me + n - 1) % n;
    HcclSendRecvItem items[2 * 64];
    uint32_t k = 0;

    if (x->c->coll == C_SENDRECV) {
        /* Receive first, then send: without the group every rank would wait in its receive. */
        T_CHECK_HCCL(HcclGroupStart());
        T_CHECK_HCCL(HcclRecv(x->recv, x->c->count, x->t, prev, comm, stream));
        T_CHECK_HCCL(HcclSend(x->send, x->c->count, x->t, next, comm, stream));
        T_CHECK_HCCL(HcclGroupEnd());
        return;
    }
    for (uint32_t r = 0; r < n; r++) /* every receive before any send: a batch must not care */
        if (r != me)
            items[k++] = (HcclSendRecvItem){HCCL_RECV, x->recv + r * x->c->count * x->size, x->c->count, x->t, r};
    for (uint32_t r = 0; r < n; r++)
        if (r != me)
            items[k++] = (HcclSendRecvItem){HCCL_SEND, x->send + r * x->c->count * x->size, x->c->count, x->t, r};
    memcpy(x->recv + me * x->c->count * x->size, x->send + me * x->c->count * x->size, x->c->count * x->size);
    T_CHECK_HCCL(HcclBatchSendRecv(items, k, comm, stream));
}

static void issue(ctx_t *x, HcclComm comm, aclrtStream stream)
{
    uint64_t c = x->c->count;
    uint32_t root = (uint32_t)(c % x->n);
    HcclDataType t = x->t;

    switch (x->c->coll) {
    case C_ALLREDUCE:
        T_CHECK_HCCL(HcclAllReduce(x->send, x->recv, c, t, x->c->op, comm, stream));
        break;
    case C_REDUCE:
        T_CHECK_HCCL(HcclReduce(x->send, x->recv, c, t, x->c->op, root, comm, stream));
        break;
    case C_BROADCAST:
        T_CHECK_HCCL(HcclBroadcast(x->recv, c, t, root, comm, stream));
        break;
    case C_BARRIER:
        T_CHECK_HCCL(HcclBarrier(comm, stream));
        break;
    case C_ALLGATHER:
        T_CHECK_HCCL(HcclAllGather(x->send, x->recv, c, t, comm, stream));
        break;
    case C_ALLGATHERV:
        T_CHECK_HCCL(HcclAllGatherV(x->send, x->counts[x->me], x->recv, x->counts, x->displs, t, comm, stream));
        break;
    case C_REDUCESCATTER:
        T_CHECK_HCCL(HcclReduceScatter(x->send, x->recv, c, t, x->c->op, comm, stream));
        break;
    case C_REDUCESCATTERV:
        T_CHECK_HCCL(HcclReduceScatterV(x->send, x->counts, x->displs, x->recv, x->counts[x->me], t, x->c->op,
                                        comm, stream));
        break;
    case C_SCATTER:
        T_CHECK_HCCL(HcclScatter(x->send, x->recv, c, t, root, comm, stream));
        break;
    case C_ALLTOALL:
        T_CHECK_HCCL(HcclAlltoAll(x->send, c, t, x->recv, c, t, comm, stream));
        break;
    case C_ALLTOALLV:
        for (uint32_t r = 0; r < x->n; r++) {
            x->counts[r] = a2a_count(x, x->me, r);
            x->displs[r] = a2a_sdispl(x, x->me, r);
            x->rcounts[r] = a2a_count(x, r, x->me);
            x->rdispls[r] = a2a_rdispl(x, x->me, r);
        }
        T_CHECK_HCCL(HcclAlltoAllV(x->send, x->counts, x->displs, t, x->recv, x->rcounts, x->rdispls, t, comm,
                                   stream));
        break;
    case C_ALLTOALLVC: {
        uint64_t *matrix = malloc((size_t)x->n * x->n * sizeof(uint64_t));
        for (uint32_t i = 0; i < x->n; i++)
            for (uint32_t j = 0; j < x->n; j++)
                matrix[i * x->n + j] = a2a_count(x, i, j);
        T_CHECK_HCCL(HcclAlltoAllVC(x->send, matrix, t, x->recv, t, comm, stream));
        free(matrix);
        break;
    }
    default:
        issue_p2p(x, comm, stream);
        break;
    }
}

/* Send and receive are one buffer: in-place AllReduce/Reduce, and Broadcast always. */
static int shares_buffer(const case_t *c)
{
    return (c->inplace && (c->coll == C_ALLREDUCE || c->coll == C_REDUCE)) || c->coll == C_BROADCAST;
}

/* In place, in the NCCL convention where a collective has one: the input is part of the output. */
static void place_buffers(ctx_t *x)
{
    size_t sb = x->send_elems * x->size, rb = x->recv_elems * x->size;
    int inplace = x->c->inplace;

    int mem = mem_kind(x);

    if (shares_buffer(x->c)) {
        x->recv = x->send = alloc_buffer(mem, sb);
    } else if (inplace && x->c->coll == C_ALLGATHER) {
        x->recv = alloc_buffer(mem, rb);
        x->send = x->recv + (size_t)x->me * sb;
    } else if (inplace && x->c->coll == C_REDUCESCATTER) {
        x->send = alloc_buffer(mem, sb);
        x->recv = x->send + (size_t)x->me * rb;
    } else {
        x->send = alloc_buffer(mem, sb);
        x->recv = alloc_buffer(recv_kind(x), rb);
    }
}

static void release_buffers(ctx_t *x)
{
    int inplace = x->c->inplace, mem = mem_kind(x);
    if (shares_buffer(x->c)) {
        free_buffer(mem, x->send);
    } else if (inplace && x->c->coll == C_ALLGATHER) {
        free_buffer(mem, x->recv);
    } else if (inplace && x->c->coll == C_REDUCESCATTER) {
        free_buffer(mem, x->send);
    } else {
        free_buffer(mem, x->send);
        free_buffer(recv_kind(x), x->recv);
    }
}

/*
 * Barrier: no rank leaves before every rank has arrived. The last rank arrives BARRIER_SKEW_NS late;
 * each rank notes when it called HcclBarrier and when its synchronisation returned, on
 * CLOCK_MONOTONIC (one clock for all processes of a host), and the ranks all-gather the pairs:
 * every departure must come after every arrival. A barrier that returned early fails here.
 */
#define BARRIER_SKEW_NS 50000000L

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int check_barrier(HcclComm comm, aclrtStream stream, uint32_t rank, uint32_t nranks)
{
    int64_t *mine, *all, last_arrival = 0, first_departure = INT64_MAX;
    int bad = 0;

    T_CHECK_ACL(aclrtMalloc((void **)&mine, 2 * sizeof(int64_t), ACL_MEM_MALLOC_HUGE_FIRST));
    T_CHECK_ACL(aclrtMalloc((void **)&all, 2 * sizeof(int64_t) * nranks, ACL_MEM_MALLOC_HUGE_FIRST));
    if (rank == nranks - 1 && nranks > 1)
        nanosleep(&(struct timespec){.tv_nsec = BARRIER_SKEW_NS}, NULL); /* arrives late on purpose */
    mine[0] = mono_ns();
    T_CHECK_HCCL(HcclBarrier(comm, stream));
    T_CHECK_ACL(aclrtSynchronizeStream(stream));
    mine[1] = mono_ns();
    T_CHECK_HCCL(HcclAllGather(mine, all, 2, HCCL_DATA_TYPE_INT64, comm, stream));
    T_CHECK_ACL(aclrtSynchronizeStream(stream));
    for (uint32_t r = 0; r < nranks; r++) {
        last_arrival = all[2 * r] > last_arrival ? all[2 * r] : last_arrival;
        first_departure = all[2 * r + 1] < first_departure ? all[2 * r + 1] : first_departure;
    }
    if (first_departure < last_arrival) {
        fprintf(stderr, "rank %u: FAIL barrier: a rank left %.3f ms before the last one arrived\n", rank,
                (double)(last_arrival - first_departure) / 1e6);
        bad = 1;
    }
    T_CHECK_ACL(aclrtFree(mine));
    T_CHECK_ACL(aclrtFree(all));
    return bad;
}

/* Element i of a float buffer of type t, as a double. */
static double load_float(HcclDataType t, const void *buf, uint64_t i)
{
    switch (t) {
    case HCCL_DATA_TYPE_FP16:
        return aclFloat16ToFloat(((const uint16_t *)buf)[i]);
    case HCCL_DATA_TYPE_BFP16:
        return float_of_bf16(((const uint16_t *)buf)[i]);
    case HCCL_DATA_TYPE_FP32:
        return ((const float *)buf)[i];
    default:
        return ((const double *)buf)[i];
    }
}

/* --order any: is element i (a sum or product over the ranks of the inputs at `pos`) close enough
 * to the rank-order result? (The bound is in the usage comment at the top.) */
static int within_order_bound(const ctx_t *x, uint64_t i, uint64_t pos)
{
    int mantissa = x->t == HCCL_DATA_TYPE_FP16 ? 10 : x->t == HCCL_DATA_TYPE_BFP16 ? 7
                   : x->t == HCCL_DATA_TYPE_FP32 ? 23 : 52;
    double scale = x->c->op == HCCL_REDUCE_PROD ? 1.0 : 0.0, got = load_float(x->t, x->recv, i);
    double want = load_float(x->t, x->expected, i);

    for (uint32_t r = 0; r < x->n; r++) {
        double v = fabs(as_stored(x->t, float_value(r, pos, x->c->op)));
        scale = x->c->op == HCCL_REDUCE_PROD ? scale * v : scale + v;
    }
    return fabs(got - want) <= (double)x->n * scale * (ldexp(1.0, -mantissa) + ldexp(1.0, -24));
}

/* Does this case's result depend on the order of combination (--order any applies)? */
static int order_may_vary(const case_t *c)
{
    int reduction = c->coll == C_ALLREDUCE || c->coll == C_REDUCE || c->coll == C_REDUCESCATTER ||
                    c->coll == C_REDUCESCATTERV;
    return c->order_any && reduction && is_float(dtypes[c->dtype_index].dtype) &&
           (c->op == HCCL_REDUCE_SUM || c->op == HCCL_REDUCE_PROD);
}

static int run_case(const case_t *c, HcclComm comm, aclrtStream stream, uint32_t rank, uint32_t nranks)
{
    ctx_t x = {.c = c, .t = dtypes[c->dtype_index].dtype, .size = dtypes[c->dtype_index].size, .me = rank,
               .n = nranks};
    uint64_t vec[4 * 64];
    uint64_t bad = 0, first_bad = 0;
    size_t rb;

    if (c->coll == C_BARRIER)
        return check_barrier(comm, stream, rank, nranks);
    x.counts = vec, x.displs = vec + 64, x.rcounts = vec + 128, x.rdispls = vec + 192;
    sizes(&x);
    rb = x.recv_elems * x.size;
    place_buffers(&x);
    x.expected = malloc(rb + 64);
    if (order_may_vary(c)) {
        x.pos = malloc((x.recv_elems + 1) * sizeof(*x.pos));
        for (uint64_t i = 0; i < x.recv_elems; i++)
            x.pos[i] = UINT64_MAX;
    }
    if (!shares_buffer(c))
        memset(x.recv, 0xa5, rb);
    prepare(&x);
    if (c->coll == C_REDUCE && rank != (uint32_t)(c->count % nranks)) {
        memcpy(x.expected, x.recv, rb); /* only the root's output is defined */
    } else if (c->coll == C_ALLGATHERV || c->coll == C_ALLTOALLV) {
        /* Gaps between blocks keep the prefill: copy it where no block lands. */
        uint8_t *filled = calloc(x.recv_elems + 1, 1);
        for (uint32_t r = 0; r < nranks; r++) {
            uint64_t base = c->coll == C_ALLGATHERV ? x.displs[r] : a2a_rdispl(&x, rank, r);
            uint64_t cnt = c->coll == C_ALLGATHERV ? x.counts[r] : a2a_count(&x, r, rank);
            memset(filled + base, 1, cnt);
        }
        for (uint64_t i = 0; i < x.recv_elems; i++)
            if (!filled[i])
                memset(x.expected + i * x.size, 0xa5, x.size);
        free(filled);
    }
    issue(&x, comm, stream);
    T_CHECK_ACL(aclrtSynchronizeStream(stream));
    for (size_t i = 0; c->coll != C_BARRIER && i < rb; i++) {
        uint64_t e = i / x.size;
        if (x.pos != NULL && x.pos[e] != UINT64_MAX) {
            if (i % x.size == 0 && !within_order_bound(&x, e, x.pos[e]) && bad++ == 0)
                first_bad = e;
            continue;
        }
        if (x.recv[i] != x.expected[i] && bad++ == 0)
            first_bad = i / x.size;
    }
    if (bad)
        fprintf(stderr, "rank %u: FAIL %s %s %s count=%llu inplace=%d mem=%s: %llu bytes wrong, first element %llu\n",
                rank, coll_names[c->coll], dtypes[c->dtype_index].name, op_names[c->op], (unsigned long long)c->count,
                c->inplace, mem_names[c->mem], (unsigned long long)bad, (unsigned long long)first_bad);
    release_buffers(&x);
    free(x.expected);
    free(x.pos);
    return bad != 0;
}

static int uses_op(int coll)
{
    return coll == C_ALLREDUCE || coll == C_REDUCE || coll == C_REDUCESCATTER || coll == C_REDUCESCATTERV;
}

static int has_inplace(int coll)
{
    return coll == C_ALLREDUCE || coll == C_REDUCE || coll == C_ALLGATHER || coll == C_REDUCESCATTER;
}

/* Every case of the matrix; returns the number of failed cases. */
static int run_matrix(const options_t *o, HcclComm comm, aclrtStream stream, uint32_t rank, uint32_t nranks)
{
    int failed = 0, ran = 0;
    case_t c = {.order_any = o->order_any};

    for (c.coll = 0; c.coll < C_ALL; c.coll++) {
        if (!(o->colls & (1u << c.coll)) || ((c.coll == C_SENDRECV || c.coll == C_BATCH) && nranks < 2))
            continue;
        for (c.dtype_index = 0; c.dtype_index < (int)NDTYPES; c.dtype_index++) {
            if (!(o->dtypes & (1u << c.dtype_index)))
                continue;
            for (int op = 0; op < 4; op++) {
                if (!(o->ops & (1u << op)) || (!uses_op(c.coll) && op != HCCL_REDUCE_SUM))
                    continue;
                c.op = (HcclReduceOp)op;
                for (int k = 0; k < o->ncounts; k++) {
                    c.count = o->counts[k];
                    for (c.inplace = o->inplace_min; c.inplace <= o->inplace_max; c.inplace++) {
                        if (c.inplace && !has_inplace(c.coll))
                            continue;
                        for (c.mem = o->mem_min; c.mem <= o->mem_max; c.mem++, ran++)
                            failed += run_case(&c, comm, stream, rank, nranks);
                    }
                }
            }
            if (c.coll == C_BARRIER)
                break; /* dtype-independent */
        }
    }
    if (rank == 0)
        printf("coll_matrix: %u ranks, %d cases, %d failed\n", nranks, ran, failed);
    return failed;
}

/* ---- options ------------------------------------------------------------------------------------ */

static unsigned parse_names(const char *list, const char *const *names, size_t n, const char *what)
{
    unsigned mask = 0;
    char buf[256], *save = NULL;

    if (strcmp(list, "all") == 0)
        return (1u << n) - 1;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < n && strcmp(tok, names[i]) != 0)
            i++;
        if (i == n) {
            fprintf(stderr, "unknown %s: %s\n", what, tok);
            exit(2);
        }
        mask |= 1u << i;
    }
    return mask;
}

static void parse_options(int argc, char **argv, options_t *o)
{
    const char *dtype_names[NDTYPES];
    for (size_t i = 0; i < NDTYPES; i++)
        dtype_names[i] = dtypes[i].name;
    *o = (options_t){.colls = (1u << C_COUNT) - 1, .dtypes = (1u << NDTYPES) - 1, .ops = 15,
                     .counts = {0, 1, 7, 4097}, .ncounts = 4, .inplace_max = 1, .mem_max = 1};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *v = argv[i + 1];
        if (strcmp(argv[i], "--colls") == 0)
            o->colls = parse_names(v, coll_names, C_COUNT, "collective");
        else if (strcmp(argv[i], "--dtypes") == 0)
            o->dtypes = parse_names(v, dtype_names, NDTYPES, "dtype");
        else if (strcmp(argv[i], "--ops") == 0)
            o->ops = parse_names(v, op_names, 4, "op");
        else if (strcmp(argv[i], "--counts") == 0) {
            char buf[256], *save = NULL;
            snprintf(buf, sizeof(buf), "%s", v);
            o->ncounts = 0;
            for (char *tok = strtok_r(buf, ",", &save); tok && o->ncounts < 16; tok = strtok_r(NULL, ",", &save))
                o->counts[o->ncounts++] = strtoull(tok, NULL, 0);
        } else if (strcmp(argv[i], "--inplace") == 0) {
            o->inplace_min = strcmp(v, "1") == 0;
            o->inplace_max = strcmp(v, "0") != 0;
        } else if (strcmp(argv[i], "--mem") == 0) {
            o->mem_min = o->mem_max = -1;
            for (int k = 0; k < MEM_KINDS; k++)
                if (strcmp(v, mem_names[k]) == 0)
                    o->mem_min = o->mem_max = k;
            if (strcmp(v, "both") == 0)
                o->mem_min = MEM_ARENA, o->mem_max = MEM_MALLOC;
            if (o->mem_min < 0) {
                fprintf(stderr, "unknown --mem %s\n", v);
                exit(2);
            }
        } else if (strcmp(argv[i], "--threads") == 0) {
            o->threads = atoi(v);
        } else if (strcmp(argv[i], "--order") == 0) {
            o->order_any = strcmp(v, "any") == 0;
        } else if (strcmp(argv[i], "--ranks") == 0) {
            char buf[512], *save = NULL;
            snprintf(buf, sizeof(buf), "%s", v);
            o->nperm = 0;
            for (char *tok = strtok_r(buf, ",", &save); tok && o->nperm < 64; tok = strtok_r(NULL, ",", &save))
                o->perm[o->nperm++] = (uint32_t)strtoul(tok, NULL, 0);
        } else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            exit(2);
        }
    }
    /* HOSTCCL_TEST_FULL=1: the whole matrix, whatever the sampled command line asked for (the
     * rank or thread count stays). */
    if (getenv("HOSTCCL_TEST_FULL") != NULL && strcmp(getenv("HOSTCCL_TEST_FULL"), "1") == 0) {
        static const uint64_t full[] = {0, 1, 7, 4097, 65536 * 3 + 5, 1048579};
        o->colls = (1u << C_COUNT) - 1;
        o->dtypes = (1u << NDTYPES) - 1;
        o->ops = 15;
        memcpy(o->counts, full, sizeof(full));
        o->ncounts = (int)(sizeof(full) / sizeof(full[0]));
        o->inplace_min = o->mem_min = 0;
        o->inplace_max = o->mem_max = 1;
    }
}

/* ---- threads as ranks ------------------------------------------------------------------------- */

typedef struct {
    const options_t *o;
    HcclComm comm;
    uint32_t rank, nranks;
    int failed;
} thread_arg_t;

static void *thread_main(void *p)
{
    thread_arg_t *a = p;
    aclrtStream stream;

    T_CHECK_ACL(aclrtSetDevice((int32_t)a->rank));
    T_CHECK_ACL(aclrtCreateStream(&stream));
    a->failed = run_matrix(a->o, a->comm, stream, a->rank, a->nranks);
    T_CHECK_ACL(aclrtDestroyStream(stream));
    return NULL;
}

static int run_threads(const options_t *o)
{
    uint32_t n = (uint32_t)o->threads;
    int32_t devices[64];
    HcclComm comms[64];
    pthread_t threads[64];
    thread_arg_t args[64];
    int failed = 0;

    for (uint32_t i = 0; i < n; i++)
        devices[i] = (int32_t)i;
    T_CHECK_HCCL(HcclCommInitAll(n, devices, comms));
    for (uint32_t i = 0; i < n; i++) {
        args[i] = (thread_arg_t){.o = o, .comm = comms[i], .rank = i, .nranks = n};
        pthread_create(&threads[i], NULL, thread_main, &args[i]);
    }
    for (uint32_t i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        failed += args[i].failed;
        T_CHECK_HCCL(HcclCommDestroy(comms[i]));
    }
    return failed;
}

/* --ranks A,B,...: the matrix on a sub-communicator of every rank, numbered in that order (rank
 * placements a launcher does not make, such as ranks of two hosts interleaved). */
static int run_permuted(const options_t *o, t_world_t *world)
{
    HcclCommConfig cfg;
    HcclComm sub;
    uint32_t me = o->nperm;
    int failed;

    for (uint32_t k = 0; k < o->nperm; k++)
        if (o->perm[k] == world->launch.rank)
            me = k;
    if (o->nperm != world->launch.size || me == o->nperm) {
        fprintf(stderr, "--ranks must list each of the %u ranks once\n", world->launch.size);
        exit(2);
    }
    HcclCommConfigInit(&cfg);
    T_CHECK_HCCL(HcclCreateSubCommConfig(&world->comm, o->nperm, (uint32_t *)o->perm, 1, me, &cfg, &sub));
    failed = run_matrix(o, sub, world->stream, me, o->nperm);
    T_CHECK_HCCL(HcclCommDestroy(sub));
    return failed;
}

int main(int argc, char **argv)
{
    options_t o;
    int failed;

    parse_options(argc, argv, &o);
    T_CHECK_ACL(aclInit(NULL));
    if (o.threads > 0 && o.threads <= 64) {
        failed = run_threads(&o);
    } else {
        t_world_t world;
        t_world_init(&world);
        if (o.nperm > 0)
            failed = run_permuted(&o, &world);
        else
            failed = run_matrix(&o, world.comm, world.stream, world.launch.rank, world.launch.size);
        t_world_fini(&world);
    }
    T_CHECK_ACL(aclFinalize());
    return failed ? 1 : 0;
}
