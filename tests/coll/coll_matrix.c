/*
 * The collective test matrix: collective x dtype x op x count x in-place x buffer kind, on the
 * ranks this program was launched with (hccl-run -n N), or on N threads of one process
 * (--threads N, HcclCommInitAll). Inputs are a deterministic function of (rank, index), so every
 * rank computes the expected output of every case itself. Values are chosen so that every result is
 * exact in its type (small integers for floating types), which makes the expected output
 * independent of reduction order; integers use all their bits and wrap.
 *
 * usage: coll_matrix [--colls a,b] [--dtypes all|a,b] [--ops all|a,b] [--counts 0,1,7]
 *                    [--inplace 0|1|both] [--mem arena|malloc|both] [--threads N]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

typedef enum { C_ALLREDUCE, C_BROADCAST, C_BARRIER, C_COUNT } coll_t;
static const char *const coll_names[C_COUNT] = {"allreduce", "broadcast", "barrier"};

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
    int mem_min, mem_max; /* 0 arena, 1 malloc */
    int threads;
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

/* Float inputs: exact in every float type and closed under the reductions of up to 8 ranks. */
static double float_value(uint32_t rank, uint64_t i, HcclReduceOp op)
{
    static const double prod_values[] = {1.0, -1.0, 2.0, 0.5, -2.0};
    if (op == HCCL_REDUCE_PROD)
        return prod_values[(rank * 3 + i) % 5];
    return (double)((int)((rank * 7 + i * 3) % 11) - 5);
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
    case HCCL_DATA_TYPE_BFP16: {
        float f = (float)fvalue;
        uint32_t bits;
        memcpy(&bits, &f, sizeof(bits));
        ((uint16_t *)buf)[i] = (uint16_t)(bits >> 16); /* exact: the values have few significant bits */
        break;
    }
    case HCCL_DATA_TYPE_FP32:
        ((float *)buf)[i] = (float)fvalue;
        break;
    default:
        ((double *)buf)[i] = fvalue;
        break;
    }
}

static void fill_input(HcclDataType t, HcclReduceOp op, void *buf, uint32_t rank, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++)
        store(t, buf, i, int_value(rank, i), float_value(rank, i, op));
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
                            void *expected)
{
    if (is_float(t)) {
        double acc = float_value(0, i, op);
        for (uint32_t r = 1; r < nranks; r++) {
            double v = float_value(r, i, op);
            acc = op == HCCL_REDUCE_SUM ? acc + v : op == HCCL_REDUCE_PROD ? acc * v
                                                  : op == HCCL_REDUCE_MAX  ? (v > acc ? v : acc)
                                                                           : (v < acc ? v : acc);
        }
        store(t, expected, i, 0, acc);
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
    store(t, expected, i, acc, 0);
}

/* ---- one case ------------------------------------------------------------------------------------ */

typedef struct {
    coll_t coll;
    int dtype_index;
    HcclReduceOp op;
    uint64_t count;
    int inplace;
    int mem;
} case_t;

static void *alloc_buffer(int mem, size_t bytes)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 64;
    if (mem == 0)
        T_CHECK_ACL(aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    else if ((p = malloc(bytes)) == NULL)
        exit(1);
    return p;
}

static void free_buffer(int mem, void *p)
{
    if (mem == 0)
        T_CHECK_ACL(aclrtFree(p));
    else
        free(p);
}

static int run_case(const case_t *c, HcclComm comm, aclrtStream stream, uint32_t rank, uint32_t nranks)
{
    HcclDataType t = dtypes[c->dtype_index].dtype;
    size_t size = dtypes[c->dtype_index].size;
    size_t bytes = (size_t)c->count * size;
    uint8_t *send = alloc_buffer(c->mem, bytes);
    uint8_t *recv = c->inplace ? send : alloc_buffer(c->mem, bytes);
    uint8_t *expected = malloc(bytes + 64);
    uint32_t root = (uint32_t)(c->count % nranks);
    uint64_t bad = 0, first_bad = 0;

    fill_input(t, c->op, send, rank, c->count);
    if (!c->inplace)
        memset(recv, 0xa5, bytes);
    switch (c->coll) {
    case C_ALLREDUCE:
        for (uint64_t i = 0; i < c->count; i++)
            reduce_expected(t, size, c->op, nranks, i, expected);
        T_CHECK_HCCL(HcclAllReduce(send, recv, c->count, t, c->op, comm, stream));
        break;
    case C_BROADCAST:
        fill_input(t, c->op, expected, root, c->count);
        recv = send; /* broadcast is in place by definition */
        T_CHECK_HCCL(HcclBroadcast(send, c->count, t, root, comm, stream));
        break;
    default:
        T_CHECK_HCCL(HcclBarrier(comm, stream));
        bytes = 0;
        break;
    }
    T_CHECK_ACL(aclrtSynchronizeStream(stream));
    for (uint64_t i = 0; i < bytes; i++) {
        if (recv[i] != expected[i] && bad++ == 0)
            first_bad = i / size;
    }
    if (bad)
        fprintf(stderr, "rank %u: FAIL %s %s %s count=%llu inplace=%d mem=%s: %llu bytes wrong, first element %llu\n",
                rank, coll_names[c->coll], dtypes[c->dtype_index].name, op_names[c->op], (unsigned long long)c->count,
                c->inplace, c->mem ? "malloc" : "arena", (unsigned long long)bad, (unsigned long long)first_bad);
    if (!c->inplace && c->coll == C_ALLREDUCE)
        free_buffer(c->mem, recv);
    free_buffer(c->mem, send);
    free(expected);
    return bad != 0;
}

/* Every case of the matrix; returns the number of failed cases. */
static int run_matrix(const options_t *o, HcclComm comm, aclrtStream stream, uint32_t rank, uint32_t nranks)
{
    int failed = 0, ran = 0;
    case_t c;

    for (c.coll = 0; c.coll < C_COUNT; c.coll++) {
        if (!(o->colls & (1u << c.coll)))
            continue;
        for (c.dtype_index = 0; c.dtype_index < (int)NDTYPES; c.dtype_index++) {
            if (!(o->dtypes & (1u << c.dtype_index)))
                continue;
            for (int op = 0; op < 4; op++) {
                if (!(o->ops & (1u << op)) || (c.coll != C_ALLREDUCE && op > 0))
                    continue;
                c.op = (HcclReduceOp)op;
                for (int k = 0; k < o->ncounts; k++) {
                    c.count = o->counts[k];
                    for (c.inplace = o->inplace_min; c.inplace <= o->inplace_max; c.inplace++)
                        for (c.mem = o->mem_min; c.mem <= o->mem_max; c.mem++, ran++)
                            failed += run_case(&c, comm, stream, rank, nranks);
                }
            }
            if (c.coll == C_BARRIER)
                break; /* dtype-independent */
        }
    }
    if (rank == 0)
        printf("coll_matrix: %d ranks, %d cases, %d failed\n", nranks, ran, failed);
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
            o->mem_min = strcmp(v, "malloc") == 0;
            o->mem_max = strcmp(v, "arena") != 0;
        } else if (strcmp(argv[i], "--threads") == 0) {
            o->threads = atoi(v);
        } else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            exit(2);
        }
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
        failed = run_matrix(&o, world.comm, world.stream, world.launch.rank, world.launch.size);
        t_world_fini(&world);
    }
    T_CHECK_ACL(aclFinalize());
    return failed ? 1 : 0;
}
