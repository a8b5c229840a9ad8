/*
 * A randomized conformance client under mpirun (tests/netns/mpirun.sh, across netns hosts): the
 * seed's bootstrap, then a seeded random sequence of collectives and point-to-point batches, each
 * with a random data type, reduction, size (0 to ~300k elements), root, in-place mode and buffer
 * kind (malloc or aclrtMalloc), checked on every rank against MPI's result on the same inputs
 * (exact for integers, a relative bound for floating point: the two combine in different orders).
 *
 *   mpirun -np N mpi_conform [SEED [OPS]]
 *
 * Prints one line per wrong result (rank, op number, call, first wrong element) and, on rank 0,
 * "conform: OPS ops on N ranks, every result verified" or the number of wrong ones; exits 1 then.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

enum { OP_ALLREDUCE, OP_REDUCE, OP_BROADCAST, OP_ALLGATHER, OP_ALLGATHERV, OP_REDUCE_SCATTER, OP_REDUCE_SCATTERV,
       OP_SCATTER, OP_ALLTOALL, OP_ALLTOALLV, OP_SENDRECV, OP_BARRIER, OP_COUNT };
static const char *const op_names[] = {"AllReduce", "Reduce", "Broadcast", "AllGather", "AllGatherV",
                                       "ReduceScatter", "ReduceScatterV", "Scatter", "AlltoAll", "AlltoAllV",
                                       "BatchSendRecv", "Barrier"};

typedef struct {
    HcclDataType hccl;
    MPI_Datatype mpi;
    size_t size;
    int is_float;
    const char *name;
} dtype_t;

static dtype_t dtypes[5];

static const struct {
    HcclReduceOp hccl;
    MPI_Op mpi;
    const char *name;
} redops[] = {{HCCL_REDUCE_SUM, 0, "sum"}, {HCCL_REDUCE_PROD, 0, "prod"}, {HCCL_REDUCE_MAX, 0, "max"},
              {HCCL_REDUCE_MIN, 0, "min"}};
static MPI_Op mpi_ops[4];

static uint64_t rng_state;

static uint64_t rnd(void) /* xorshift64*: the same sequence on every rank */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint64_t pick(uint64_t n)
{
    return rnd() % n;
}

static uint64_t random_count(void)
{
    static const uint64_t counts[] = {0, 1, 2, 3, 7, 64, 1000, 4097, 65539, 300007};
    return counts[pick(sizeof(counts) / sizeof(counts[0]))];
}

/* Input element i of rank r for op k: small integers (products stay exact), inexact floats. */
static void fill(const dtype_t *t, int prod, void *buf, uint64_t n, int r, int k)
{
    for (uint64_t i = 0; i < n; i++) {
        /* products of 8 ranks' factors in {-1, 1, 2} fit every integer type but int8, which gets no 2 */
        int64_t v = prod ? ((i + (uint64_t)r + (uint64_t)k) % 3 == 0 ? -1 : (i + (uint64_t)r) % 5 == 0 && t->size > 1 ? 2 : 1)
                         : (int64_t)((i * 7 + (uint64_t)r * 13 + (uint64_t)k) % 11) - 5;
        double f = prod ? 1.0 + 0.01 * (double)((i + (uint64_t)r + (uint64_t)k) % 7)
                        : 0.1 * (double)v + 0.37 * r + 1e-3 * (double)(i % 97);
        switch (t->hccl) {
        case HCCL_DATA_TYPE_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
        case HCCL_DATA_TYPE_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
        case HCCL_DATA_TYPE_INT64: ((int64_t *)buf)[i] = v * 100003; break;
        case HCCL_DATA_TYPE_FP32: ((float *)buf)[i] = (float)f; break;
        default: ((double *)buf)[i] = f; break;
        }
    }
}

static double value(const dtype_t *t, const void *buf, uint64_t i)
{
    switch (t->hccl) {
    case HCCL_DATA_TYPE_INT8: return ((const int8_t *)buf)[i];
    case HCCL_DATA_TYPE_INT32: return ((const int32_t *)buf)[i];
    case HCCL_DATA_TYPE_INT64: return (double)((const int64_t *)buf)[i];
    case HCCL_DATA_TYPE_FP32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
    }
}

/* First element where got differs from want beyond the type's bound, or -1. */
static int64_t first_wrong(const dtype_t *t, const void *got, const void *want, uint64_t n, int nranks)
{
    double tol = t->hccl == HCCL_DATA_TYPE_FP32 ? 4e-6 * nranks : 1e-13 * nranks;

    for (uint64_t i = 0; i < n; i++) {
        double g = value(t, got, i), w = value(t, want, i);
        if (t->is_float ? !(fabs(g - w) <= tol * (1.0 + fabs(w))) : g != w)
            return (int64_t)i;
    }
    return -1;
}

typedef struct {
    int rank, size, k;
    HcclComm comm;
    aclrtStream stream;
    int wrong;
    int verbose; /* HC_CONFORM_VERBOSE: name each op before it runs */
} ctx_t;

static void *buf_alloc(uint64_t bytes, int device)
{
    void *p = NULL;

    if (device) {
        if (aclrtMalloc(&p, bytes ? bytes : 1, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 2);
    } else if ((p = malloc(bytes ? bytes : 1)) == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(p, 0x5a, bytes);
    return p;
}

static void buf_free(void *p, int device)
{
    if (device)
        aclrtFree(p);
    else
        free(p);
}

static void check(ctx_t *c, const char *what, HcclResult res, const dtype_t *t, const void *got, const void *want,
                  uint64_t n)
{
    int64_t bad;

    if (res == HCCL_SUCCESS && aclrtSynchronizeStream(c->stream) != ACL_SUCCESS)
        res = HCCL_E_INTERNAL;
    if (res != HCCL_SUCCESS) {
        printf("conform: rank %d op %d %s: returned %d\n", c->rank, c->k, what, (int)res);
        c->wrong++;
        return;
    }
    if (got != NULL && (bad = first_wrong(t, got, want, n, c->size)) >= 0) {
        printf("conform: rank %d op %d %s: element %lld is %.9g, MPI says %.9g\n", c->rank, c->k, what,
               (long long)bad, value(t, got, (uint64_t)bad), value(t, want, (uint64_t)bad));
        c->wrong++;
    }
}

/* Counts (the same on every rank) and displacements with random gaps; returns the span. */
static uint64_t layout(int n, uint64_t *counts, uint64_t *displs, int *icounts, int *idispls)
{
    uint64_t at = 0;

    for (int j = 0; j < n; j++) {
        counts[j] = random_count() % 5000;
        at += pick(3);
        displs[j] = at;
        at += counts[j];
        icounts[j] = (int)counts[j], idispls[j] = (int)displs[j];
    }
    return at;
}

static void run_one(ctx_t *c)
{
    int n = c->size, me = c->rank, op = (int)pick(OP_COUNT), dev = (int)pick(2), in_place = (int)pick(2);
    const dtype_t *t = &dtypes[pick(sizeof(dtypes) / sizeof(dtypes[0]))];
    int ro = (int)pick(4), root = (int)pick((uint64_t)n);
    uint64_t count = random_count(), es = t->size, span, total, in_n, out_n;
    uint64_t *counts = calloc((size_t)n * n, sizeof(uint64_t)), *displs = calloc(n, sizeof(uint64_t));
    uint64_t *rcounts = calloc(n, sizeof(uint64_t)), *rdispls = calloc(n, sizeof(uint64_t));
    int *ic = calloc(n, sizeof(int)), *id = calloc(n, sizeof(int)), *ric = calloc(n, sizeof(int)),
        *rid = calloc(n, sizeof(int));
    char what[160];
    void *in, *out, *want;
    HcclResult res = HCCL_SUCCESS;

    snprintf(what, sizeof(what), "%s %s %s count %llu root %d%s%s", op_names[op], t->name, redops[ro].name,
             (unsigned long long)count, root, in_place ? " in place" : "", dev ? " aclrtMalloc" : " malloc");
    if (c->verbose) {
        printf("conform: rank %d op %d: %s\n", me, c->k, what);
        fflush(stdout);
    }
    /* Every HCCL call below follows an MPI_Barrier: Open MPI's TCP transport
     * moves a large message only while the sender is inside MPI, so a rank that went on to the HCCL
     * call could leave a peer waiting in the MPI collective forever. */
    switch (op) {
    case OP_ALLREDUCE:
    case OP_REDUCE:
        in = buf_alloc(count * es, dev), want = buf_alloc(count * es, 0);
        fill(t, ro == 1, in, count, me, c->k);
        MPI_Allreduce(in, want, (int)count, t->mpi, mpi_ops[ro], MPI_COMM_WORLD);
        out = in_place ? in : buf_alloc(count * es, dev);
        MPI_Barrier(MPI_COMM_WORLD);
        res = op == OP_ALLREDUCE ? HcclAllReduce(in, out, count, t->hccl, redops[ro].hccl, c->comm, c->stream)
                                 : HcclReduce(in, out, count, t->hccl, redops[ro].hccl, (uint32_t)root, c->comm, c->stream);
        check(c, what, res, t, op == OP_ALLREDUCE || me == root ? out : NULL, want, count);
        if (out != in)
            buf_free(out, dev);
        break;
    case OP_BROADCAST:
        in = buf_alloc(count * es, dev), want = buf_alloc(count * es, 0);
        fill(t, 0, want, count, root, c->k);
        if (me == root)
            memcpy(in, want, count * es);
        MPI_Barrier(MPI_COMM_WORLD);
        res = HcclBroadcast(in, count, t->hccl, (uint32_t)root, c->comm, c->stream);
        check(c, what, res, t, in, want, count);
        out = in;
        break;
    case OP_ALLGATHER:
    case OP_SCATTER:
    case OP_ALLTOALL:
    case OP_REDUCE_SCATTER:
        count = count % 40000;
        total = count * (uint64_t)n;
        in_n = op == OP_ALLGATHER ? count : total;
        out_n = op == OP_ALLGATHER || op == OP_ALLTOALL ? total : count;
        in = buf_alloc(in_n * es, dev), want = buf_alloc(total * es, 0), out = buf_alloc(out_n * es, dev);
        fill(t, ro == 1, in, in_n, me, c->k);
        if (op == OP_ALLGATHER) {
            MPI_Allgather(in, (int)count, t->mpi, want, (int)count, t->mpi, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            res = HcclAllGather(in, out, count, t->hccl, c->comm, c->stream);
        } else if (op == OP_SCATTER) {
            MPI_Scatter(in, (int)count, t->mpi, want, (int)count, t->mpi, root, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            res = HcclScatter(in, out, count, t->hccl, (uint32_t)root, c->comm, c->stream);
        } else if (op == OP_ALLTOALL) {
            MPI_Alltoall(in, (int)count, t->mpi, want, (int)count, t->mpi, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            res = HcclAlltoAll(in, count, t->hccl, out, count, t->hccl, c->comm, c->stream);
        } else {
            MPI_Reduce_scatter_block(in, want, (int)count, t->mpi, mpi_ops[ro], MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            res = HcclReduceScatter(in, out, count, t->hccl, redops[ro].hccl, c->comm, c->stream);
        }
        check(c, what, res, t, out, want, out_n);
        buf_free(out, dev);
        out = in;
        break;
    case OP_ALLGATHERV:
        span = layout(n, rcounts, rdispls, ric, rid);
        in = buf_alloc(rcounts[me] * es, dev), out = buf_alloc(span * es, dev), want = buf_alloc(span * es, 0);
        fill(t, 0, in, rcounts[me], me, c->k);
        memset(want, 0x5a, span * es); /* the gaps stay as they were */
        MPI_Allgatherv(in, ric[me], t->mpi, want, ric, rid, t->mpi, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        res = HcclAllGatherV(in, rcounts[me], out, rcounts, rdispls, t->hccl, c->comm, c->stream);
        check(c, what, res, t, out, want, span);
        buf_free(out, dev);
        out = in;
        break;
    case OP_REDUCE_SCATTERV:
        span = layout(n, rcounts, rdispls, ric, rid);
        in = buf_alloc(span * es, dev), want = buf_alloc(span * es, 0), out = buf_alloc(rcounts[me] * es, dev);
        fill(t, ro == 1, in, span, me, c->k);
        MPI_Allreduce(in, want, (int)span, t->mpi, mpi_ops[ro], MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        res = HcclReduceScatterV(in, rcounts, rdispls, out, rcounts[me], t->hccl, redops[ro].hccl, c->comm, c->stream);
        check(c, what, res, t, out, (uint8_t *)want + rdispls[me] * es, rcounts[me]);
        buf_free(out, dev);
        out = in;
        break;
    case OP_ALLTOALLV: {
        uint64_t sspan = 0, rspan = 0;
        for (int i = 0; i < n * n; i++)
            counts[i] = random_count() % 3000; /* counts[i * n + j]: i sends to j */
        for (int j = 0; j < n; j++) {
            sspan += pick(2), displs[j] = sspan, sspan += counts[me * n + j];
            rspan += pick(2), rdispls[j] = rspan, rspan += counts[j * n + me];
            rcounts[j] = counts[j * n + me];
            ic[j] = (int)counts[me * n + j], id[j] = (int)displs[j], ric[j] = (int)rcounts[j], rid[j] = (int)rdispls[j];
        }
        for (int j = 0; j < n; j++)
            counts[j] = (uint64_t)ic[j]; /* this rank's send counts */
        in = buf_alloc(sspan * es, dev), out = buf_alloc(rspan * es, dev), want = buf_alloc(rspan * es, 0);
        fill(t, 0, in, sspan, me, c->k);
        memset(want, 0x5a, rspan * es);
        MPI_Alltoallv(in, ic, id, t->mpi, want, ric, rid, t->mpi, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        res = HcclAlltoAllV(in, counts, displs, t->hccl, out, rcounts, rdispls, t->hccl, c->comm, c->stream);
        check(c, what, res, t, out, want, rspan);
        buf_free(out, dev);
        out = in;
        break;
    }
    case OP_SENDRECV: {
        int shift = 1 + (int)pick((uint64_t)(n > 1 ? n - 1 : 1)), to = (me + shift) % n, from = (me + n - shift) % n;
        HcclSendRecvItem items[2];
        in = buf_alloc(count * es, dev), out = buf_alloc(count * es, dev), want = buf_alloc(count * es, 0);
        fill(t, 0, in, count, me, c->k);
        fill(t, 0, want, count, from, c->k);
        snprintf(what + strlen(what), sizeof(what) - strlen(what), " to %d from %d", to, from);
        items[0] = (HcclSendRecvItem){HCCL_SEND, in, count, t->hccl, (uint32_t)to};
        items[1] = (HcclSendRecvItem){HCCL_RECV, out, count, t->hccl, (uint32_t)from};
        MPI_Barrier(MPI_COMM_WORLD);
        res = HcclBatchSendRecv(items, 2, c->comm, c->stream);
        check(c, what, res, t, out, want, count);
        buf_free(out, dev);
        out = in;
        break;
    }
    default:
        in = out = want = NULL;
        MPI_Barrier(MPI_COMM_WORLD);
        res = HcclBarrier(c->comm, c->stream);
        check(c, what, res, t, NULL, NULL, 0);
        break;
    }
    if (in != NULL)
        buf_free(in, dev);
    free(want);
    free(counts), free(displs), free(rcounts), free(rdispls), free(ic), free(id), free(ric), free(rid);
}

int main(int argc, char **argv)
{
    ctx_t c = {0};
    int nops = argc > 2 ? atoi(argv[2]) : 150, total_wrong = 0;
    HcclHostLaunchInfo launch;
    HcclRootInfo root;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.size);
    c.verbose = getenv("HC_CONFORM_VERBOSE") != NULL;
    rng_state = argc > 1 ? strtoull(argv[1], NULL, 0) : 20261201;
    rng_state = rng_state ? rng_state : 1;
    dtypes[0] = (dtype_t){HCCL_DATA_TYPE_INT8, MPI_INT8_T, 1, 0, "int8"};
    dtypes[1] = (dtype_t){HCCL_DATA_TYPE_INT32, MPI_INT32_T, 4, 0, "int32"};
    dtypes[2] = (dtype_t){HCCL_DATA_TYPE_INT64, MPI_INT64_T, 8, 0, "int64"};
    dtypes[3] = (dtype_t){HCCL_DATA_TYPE_FP32, MPI_FLOAT, 4, 1, "fp32"};
    dtypes[4] = (dtype_t){HCCL_DATA_TYPE_FP64, MPI_DOUBLE, 8, 1, "fp64"};
    mpi_ops[0] = MPI_SUM, mpi_ops[1] = MPI_PROD, mpi_ops[2] = MPI_MAX, mpi_ops[3] = MPI_MIN;
    if (HcclHostGetLaunchInfo(&launch) != HCCL_SUCCESS || aclInit(NULL) != ACL_SUCCESS ||
        aclrtSetDevice((int32_t)launch.localRank) != ACL_SUCCESS || aclrtCreateStream(&c.stream) != ACL_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    memset(&root, 0, sizeof(root));
    if (c.rank == 0 && HcclGetRootInfo(&root) != HCCL_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (HcclCommInitRootInfo((uint32_t)c.size, &root, (uint32_t)c.rank, &c.comm) != HCCL_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (c.k = 0; c.k < nops; c.k++)
        run_one(&c);
    fflush(stdout);
    MPI_Allreduce(&c.wrong, &total_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (c.rank == 0) {
        if (total_wrong == 0)
            printf("conform: %d ops on %d ranks, every result verified\n", nops, c.size);
        else
            printf("conform: %d wrong results in %d ops on %d ranks\n", total_wrong, nops, c.size);
    }
    HcclCommDestroy(c.comm);
    aclrtDestroyStream(c.stream);
    aclFinalize();
    MPI_Finalize();
    return total_wrong != 0;
}
