/*
 * Soak: a long random stream of collectives (`make soak`; never part of `make test`, see
 * docs/testing.md). Run under hccl-run: every rank plans the same ops from (--seed, op index), so
 * the ranks agree without talking, and every rank checks every result it receives against a
 * checksum of the output it computes itself from the same deterministic inputs.
 *
 * Each op has a random kind (AllReduce, AllGather, ReduceScatter, Broadcast, AlltoAll, a Send/Recv
 * ring in a group, Barrier), data type, reduction, size (0..--max-bytes, skewed to small: most
 * traffic of inference is small), buffer kind (aclrtMalloc arena or plain malloc), communicator
 * (the world and two more made from their own root infos) and stream (two per rank). One op in four
 * runs together with the next on the other stream and another communicator, so that two engines
 * are busy at once.
 *
 * What a long run finds that the test matrix does not: leaks (memory, descriptors, threads),
 * sequence numbers or flags that drift, a rare race between the two streams. After the warm-up (the
 * first 10% of ops) the RSS may grow by less than 5% and the descriptor and thread counts must not
 * change; no result may be wrong. Exit status 0 only when all of that holds on this rank.
 *
 * usage: soak [--ops N] [--seed S] [--max-bytes B] [--report N]
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#define NCOMMS 3
#define NSLOTS 2             /* streams, each with its own buffers */
#define WARMUP_FRACTION 10   /* the warm-up is the first 1/10 of the ops */
#define RSS_GROWTH_PCT 5
#define MAX_REPORTED_WRONG 10

typedef enum { K_ALLREDUCE, K_ALLGATHER, K_REDUCESCATTER, K_BROADCAST, K_ALLTOALL, K_SENDRECV, K_BARRIER, K_COUNT } kind_t;

static const char *const kind_names[K_COUNT] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                                "alltoall",  "sendrecv",  "barrier"};

typedef struct {
    const char *name;
    HcclDataType type;
    size_t size;
    int is_float;
    int is_signed;
} dtype_t;

static const dtype_t dtypes[] = {
    {"int8", HCCL_DATA_TYPE_INT8, 1, 0, 1},    {"int16", HCCL_DATA_TYPE_INT16, 2, 0, 1},
    {"int32", HCCL_DATA_TYPE_INT32, 4, 0, 1},  {"int64", HCCL_DATA_TYPE_INT64, 8, 0, 1},
    {"uint8", HCCL_DATA_TYPE_UINT8, 1, 0, 0},  {"uint16", HCCL_DATA_TYPE_UINT16, 2, 0, 0},
    {"uint32", HCCL_DATA_TYPE_UINT32, 4, 0, 0}, {"uint64", HCCL_DATA_TYPE_UINT64, 8, 0, 0},
    {"fp16", HCCL_DATA_TYPE_FP16, 2, 1, 1},    {"bf16", HCCL_DATA_TYPE_BFP16, 2, 1, 1},
    {"fp32", HCCL_DATA_TYPE_FP32, 4, 1, 1},    {"fp64", HCCL_DATA_TYPE_FP64, 8, 1, 1},
};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

/* One planned op: the same on every rank. */
typedef struct {
    uint64_t index;
    uint64_t key;       /* seeds the inputs of this op */
    kind_t kind;
    int comm;
    int slot;
    int use_malloc;
    int inplace;        /* AllReduce only */
    const dtype_t *dt;
    HcclReduceOp op;
    uint64_t count;     /* AllReduce/Broadcast/SendRecv: elements; the others: elements per rank block */
    uint32_t root;
} op_t;

typedef struct {
    uint8_t *send[2], *recv[2]; /* [0] arena, [1] malloc */
    aclrtStream stream;
} slot_t;

typedef struct {
    long rss_kib;
    long anon_kib;      /* of which private (heap, stacks) ... */
    long shmem_kib;     /* ... and shared (the arena, the communicators' segments) */
    long fds;
    long threads;
} usage_t;

typedef struct {
    uint64_t ops, seed, report;
    size_t max_bytes;
    t_world_t world;
    HcclComm comms[NCOMMS];
    slot_t slots[NSLOTS];
    uint8_t *expect;
    int64_t *stats;     /* rss, anon, shmem, fds, threads, wrong: for the progress line */
    uint32_t rank, nranks;
    uint64_t wrong, done, kinds[K_COUNT];
} soak_t;

/* ---- deterministic values ---------------------------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t next_random(uint64_t *state)
{
    return mix64(*state += 0x9e3779b97f4a7c15ull);
}

static uint64_t raw_input(uint64_t key, uint32_t rank, uint64_t i)
{
    return mix64(key ^ (rank + 1) * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xd6e8feb86659fd93ull);
}

/* Float inputs are exact in every float type and stay exact under any reduction of up to 8 ranks,
 * so the expected output does not depend on the order the library reduces in. */
static double float_input(uint64_t raw, HcclReduceOp op)
{
    static const double prod_values[] = {1.0, -1.0, 2.0, 0.5, -2.0};

    if (op == HCCL_REDUCE_PROD)
        return prod_values[raw % 5];
    return (double)((int)(raw % 11) - 5);
}

/* Integers keep their low size bytes, sign-extended for signed types. */
static uint64_t int_input(const dtype_t *dt, uint64_t raw)
{
    unsigned shift = (unsigned)(64 - 8 * dt->size);

    if (shift == 0)
        return raw;
    return dt->is_signed ? (uint64_t)((int64_t)(raw << shift) >> shift) : raw & (~0ull >> shift);
}

/* Exact conversion of the small values above (normal numbers with few mantissa bits). */
static uint16_t to_fp16(float f)
{
    uint32_t b;
    int exp;

    memcpy(&b, &f, sizeof(b));
    if ((b & 0x7fffffffu) == 0)
        return (uint16_t)(b >> 16);
    exp = (int)((b >> 23) & 0xff) - 127 + 15;
    return (uint16_t)((b >> 16 & 0x8000u) | (uint32_t)exp << 10 | (b >> 13 & 0x3ffu));
}

static void put(const dtype_t *dt, uint8_t *buf, uint64_t i, uint64_t ivalue, double fvalue)
{
    uint8_t *p = buf + i * dt->size;
    float f = (float)fvalue;
    uint32_t bits;
    uint16_t half;

    if (!dt->is_float) {
        memcpy(p, &ivalue, dt->size); /* little-endian: the low bytes */
    } else if (dt->type == HCCL_DATA_TYPE_FP16) {
        half = to_fp16(f);
        memcpy(p, &half, 2);
    } else if (dt->type == HCCL_DATA_TYPE_BFP16) {
        memcpy(&bits, &f, 4);
        half = (uint16_t)(bits >> 16);
        memcpy(p, &half, 2);
    } else if (dt->type == HCCL_DATA_TYPE_FP32) {
        memcpy(p, &f, 4);
    } else {
        memcpy(p, &fvalue, 8);
    }
}

/* Input element i of rank r for this op, stored at index `at` of buf. */
static void put_input(const op_t *op, uint8_t *buf, uint64_t at, uint32_t r, uint64_t i)
{
    uint64_t raw = raw_input(op->key, r, i);

    put(op->dt, buf, at, int_input(op->dt, raw), float_input(raw, op->op));
}

/* The reduction over all ranks of input element i, stored at index `at` of buf. */
static void put_reduced(const op_t *op, uint32_t nranks, uint8_t *buf, uint64_t at, uint64_t i)
{
    const dtype_t *dt = op->dt;
    uint64_t iacc = 0;
    double facc = 0;

    for (uint32_t r = 0; r < nranks; r++) {
        uint64_t raw = raw_input(op->key, r, i), iv = int_input(dt, raw);
        double fv = float_input(raw, op->op);
        if (r == 0) {
            iacc = iv;
            facc = fv;
        } else if (op->op == HCCL_REDUCE_SUM) {
            iacc += iv;
            facc += fv;
        } else if (op->op == HCCL_REDUCE_PROD) {
            iacc *= iv;
            facc *= fv;
        } else {
            int greater = dt->is_signed ? (int64_t)iv > (int64_t)iacc : iv > iacc;
            if (greater == (op->op == HCCL_REDUCE_MAX))
                iacc = iv;
            if ((fv > facc) == (op->op == HCCL_REDUCE_MAX))
                facc = fv;
        }
    }
    put(dt, buf, at, iacc, facc);
}

/* 64-bit checksum, eight bytes at a time. */
static uint64_t checksum(const uint8_t *p, size_t len)
{
    uint64_t h = 0x243f6a8885a308d3ull ^ len;
    size_t i = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = mix64(h ^ w);
    }
    for (; i < len; i++)
        h = mix64(h ^ p[i]);
    return h;
}

/* ---- planning ---------------------------------------------------------------------------------- */

/* Bytes of the largest buffer of an op: 2% empty, else 2^(log2(max) * u^2), so that the median is
 * a few dozen bytes and the mean a few percent of max. */
static size_t draw_bytes(uint64_t *rng, size_t max_bytes)
{
    double u = (double)(next_random(rng) >> 11) / 9007199254740992.0;

    if (next_random(rng) % 50 == 0)
        return 0;
    return (size_t)pow(2.0, log2((double)max_bytes) * u * u);
}

/* Plan op `index`; `avoid` (or NULL) is the op it runs together with. */
static void plan(const soak_t *s, uint64_t index, const op_t *avoid, op_t *op_p)
{
    uint64_t rng = mix64(s->seed * 0xa0761d6478bd642full ^ index);
    op_t op = {.index = index, .key = next_random(&rng)};
    size_t bytes;

    op.kind = (kind_t)(next_random(&rng) % K_COUNT);
    if (op.kind == K_SENDRECV && s->nranks == 1)
        op.kind = K_BARRIER; /* a ring of one rank would send to itself */
    op.comm = (int)(next_random(&rng) % NCOMMS);
    op.slot = (int)(next_random(&rng) % NSLOTS);
    if (avoid != NULL) {
        op.comm = (avoid->comm + 1 + (int)(next_random(&rng) % (NCOMMS - 1))) % NCOMMS;
        op.slot = 1 - avoid->slot;
    }
    op.use_malloc = (int)(next_random(&rng) % 2);
    op.inplace = op.kind == K_ALLREDUCE && next_random(&rng) % 2;
    op.dt = &dtypes[next_random(&rng) % NDTYPES];
    op.op = (HcclReduceOp)(next_random(&rng) % 4);
    op.root = (uint32_t)(next_random(&rng) % s->nranks);
    bytes = draw_bytes(&rng, s->max_bytes);
    op.count = bytes / op.dt->size;
    if (op.kind == K_ALLGATHER || op.kind == K_REDUCESCATTER || op.kind == K_ALLTOALL)
        op.count /= s->nranks;
    *op_p = op;
}

/* ---- issuing and checking ---------------------------------------------------------------------- */

/* Elements the op writes into recvBuf on this rank. */
static uint64_t out_count(const op_t *op, uint32_t nranks)
{
    switch (op->kind) {
    case K_ALLGATHER:
    case K_ALLTOALL:
        return op->count * nranks;
    case K_BARRIER:
        return 0;
    default:
        return op->count;
    }
}

static void fill_inputs(const soak_t *s, const op_t *op, uint8_t *send, uint8_t *recv)
{
    uint64_t n = op->count * (op->kind == K_REDUCESCATTER || op->kind == K_ALLTOALL ? s->nranks : 1);

    if (op->kind == K_BROADCAST) {
        if (s->rank == op->root)
            for (uint64_t i = 0; i < op->count; i++)
                put_input(op, recv, i, op->root, i);
        else
            memset(recv, 0xcd, op->count * op->dt->size);
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        put_input(op, send, i, s->rank, i);
    if (!op->inplace)
        memset(recv, 0xcd, out_count(op, s->nranks) * op->dt->size);
}

static void issue(soak_t *s, const op_t *op)
{
    slot_t *slot = &s->slots[op->slot];
    uint8_t *send = slot->send[op->use_malloc], *recv = op->inplace ? send : slot->recv[op->use_malloc];
    HcclComm comm = s->comms[op->comm];
    HcclDataType t = op->dt->type;
    uint32_t next = (s->rank + 1) % s->nranks, prev = (s->rank + s->nranks - 1) % s->nranks;

    fill_inputs(s, op, send, recv);
    switch (op->kind) {
    case K_ALLREDUCE:
        T_CHECK_HCCL(HcclAllReduce(send, recv, op->count, t, op->op, comm, slot->stream));
        break;
    case K_ALLGATHER:
        T_CHECK_HCCL(HcclAllGather(send, recv, op->count, t, comm, slot->stream));
        break;
    case K_REDUCESCATTER:
        T_CHECK_HCCL(HcclReduceScatter(send, recv, op->count, t, op->op, comm, slot->stream));
        break;
    case K_BROADCAST:
        T_CHECK_HCCL(HcclBroadcast(recv, op->count, t, op->root, comm, slot->stream));
        break;
    case K_ALLTOALL:
        T_CHECK_HCCL(HcclAlltoAll(send, op->count, t, recv, op->count, t, comm, slot->stream));
        break;
    case K_SENDRECV:
        /* Receive first, then send: without the group every rank would wait in its receive. */
        T_CHECK_HCCL(HcclGroupStart());
        T_CHECK_HCCL(HcclRecv(recv, op->count, t, prev, comm, slot->stream));
        T_CHECK_HCCL(HcclSend(send, op->count, t, next, comm, slot->stream));
        T_CHECK_HCCL(HcclGroupEnd());
        break;
    default:
        T_CHECK_HCCL(HcclBarrier(comm, slot->stream));
        break;
    }
}

/* What this rank's recvBuf must hold after the op, into s->expect. */
static void expected_output(const soak_t *s, const op_t *op)
{
    uint64_t c = op->count;
    uint32_t n = s->nranks, me = s->rank;

    switch (op->kind) {
    case K_ALLREDUCE:
        for (uint64_t i = 0; i < c; i++)
            put_reduced(op, n, s->expect, i, i);
        break;
    case K_REDUCESCATTER:
        for (uint64_t i = 0; i < c; i++)
            put_reduced(op, n, s->expect, i, me * c + i);
        break;
    case K_ALLGATHER:
        for (uint32_t r = 0; r < n; r++)
            for (uint64_t i = 0; i < c; i++)
                put_input(op, s->expect, r * c + i, r, i);
        break;
    case K_ALLTOALL:
        for (uint32_t r = 0; r < n; r++)
            for (uint64_t i = 0; i < c; i++)
                put_input(op, s->expect, r * c + i, r, me * c + i);
        break;
    case K_BROADCAST:
        for (uint64_t i = 0; i < c; i++)
            put_input(op, s->expect, i, op->root, i);
        break;
    case K_SENDRECV:
        for (uint64_t i = 0; i < c; i++)
            put_input(op, s->expect, i, (me + n - 1) % n, i);
        break;
    default:
        break;
    }
}

static void verify(soak_t *s, const op_t *op)
{
    const slot_t *slot = &s->slots[op->slot];
    const uint8_t *recv = op->inplace ? slot->send[op->use_malloc] : slot->recv[op->use_malloc];
    size_t bytes = out_count(op, s->nranks) * op->dt->size;

    expected_output(s, op);
    s->kinds[op->kind]++;
    s->done++;
    if (checksum(recv, bytes) == checksum(s->expect, bytes))
        return;
    if (++s->wrong <= MAX_REPORTED_WRONG) {
        size_t at = 0;
        while (at < bytes && recv[at] == s->expect[at])
            at++;
        fprintf(stderr,
                "soak: rank %u: op %llu (%s %s %s, %llu elements, comm %d, stream %d, %s%s, root %u) is wrong: first "
                "difference at byte %zu of %zu (got 0x%02x, expected 0x%02x)\n",
                s->rank, (unsigned long long)op->index, kind_names[op->kind], op->dt->name,
                (const char *[]){"sum", "prod", "max", "min"}[op->op], (unsigned long long)op->count, op->comm,
                op->slot, op->use_malloc ? "malloc" : "arena", op->inplace ? ", in place" : "", op->root, at, bytes,
                at < bytes ? recv[at] : 0, at < bytes ? s->expect[at] : 0);
    }
}

/* ---- resources --------------------------------------------------------------------------------- */

static long count_entries(const char *path, int minus_own_fd)
{
    DIR *dir = opendir(path);
    struct dirent *e;
    long n = 0;

    if (dir == NULL) {
        perror(path);
        exit(1);
    }
    while ((e = readdir(dir)) != NULL)
        n += e->d_name[0] != '.';
    closedir(dir);
    return n - minus_own_fd; /* /proc/self/fd lists the descriptor opendir used */
}

/* The RssAnon and RssShmem lines of /proc/self/status, which say where growth comes from. */
static void read_rss_split(usage_t *u)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL) {
        perror("/proc/self/status");
        exit(1);
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "RssAnon:", 8) == 0)
            u->anon_kib = strtol(line + 8, NULL, 10);
        else if (strncmp(line, "RssShmem:", 9) == 0)
            u->shmem_kib = strtol(line + 9, NULL, 10);
    }
    fclose(f);
}

static usage_t sample_usage(void)
{
    usage_t u = {0};
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL || fscanf(f, "%ld %ld", &size, &resident) != 2) {
        perror("/proc/self/statm");
        exit(1);
    }
    fclose(f);
    u.rss_kib = resident * (sysconf(_SC_PAGESIZE) / 1024);
    read_rss_split(&u);
    u.fds = count_entries("/proc/self/fd", 1);
    u.threads = count_entries("/proc/self/task", 0);
    return u;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Progress on rank 0 with the largest figures of any rank (one small AllReduce on the world). */
static void report(soak_t *s, const struct timespec *t0)
{
    usage_t u = sample_usage();
    int64_t *stats = s->stats;
    double elapsed = seconds_since(t0);

    stats[0] = u.rss_kib;
    stats[1] = u.anon_kib;
    stats[2] = u.shmem_kib;
    stats[3] = u.fds;
    stats[4] = u.threads;
    stats[5] = (int64_t)s->wrong;
    T_CHECK_HCCL(HcclAllReduce(stats, stats, 6, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_MAX, s->comms[0], s->world.stream));
    T_CHECK_ACL(aclrtSynchronizeStream(s->world.stream));
    if (s->rank == 0)
        printf("soak: %llu/%llu ops, %.1f s, %.0f ops/s, wrong %lld; largest of any rank: rss %.1f MiB (anon %.1f, "
               "shmem %.1f), fds %lld, threads %lld\n",
               (unsigned long long)s->done, (unsigned long long)s->ops, elapsed, (double)s->done / elapsed,
               (long long)stats[5], (double)stats[0] / 1024.0, (double)stats[1] / 1024.0, (double)stats[2] / 1024.0,
               (long long)stats[3], (long long)stats[4]);
    fflush(stdout);
}

/* ---- setup ------------------------------------------------------------------------------------- */

static void parse_args(int argc, char **argv, soak_t *s)
{
    s->ops = 1000000;
    s->seed = 1;
    s->report = 10000;
    s->max_bytes = 1u << 20;
    for (int i = 1; i < argc; i += 2) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (value == NULL) {
            fprintf(stderr, "usage: soak [--ops N] [--seed S] [--max-bytes B] [--report N]\n");
            exit(2);
        } else if (strcmp(argv[i], "--ops") == 0) {
            s->ops = strtoull(value, NULL, 10);
        } else if (strcmp(argv[i], "--seed") == 0) {
            s->seed = strtoull(value, NULL, 10);
        } else if (strcmp(argv[i], "--max-bytes") == 0) {
            s->max_bytes = strtoull(value, NULL, 10);
        } else if (strcmp(argv[i], "--report") == 0) {
            s->report = strtoull(value, NULL, 10);
        } else {
            fprintf(stderr, "soak: unknown option %s\n", argv[i]);
            exit(2);
        }
    }
    if (s->report == 0 || s->max_bytes < 8) {
        fprintf(stderr, "soak: --report must be positive and --max-bytes at least 8\n");
        exit(2);
    }
}

/* Every buffer is touched in full here, so that the RSS after the warm-up does not depend on
 * whether the warm-up happened to draw the largest sizes. */
static uint8_t *alloc_buffer(size_t bytes, int use_malloc)
{
    uint8_t *p = NULL;

    if (use_malloc)
        p = malloc(bytes);
    else
        T_CHECK_ACL(aclrtMalloc((void **)&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    if (p == NULL) {
        fprintf(stderr, "soak: out of memory\n");
        exit(1);
    }
    memset(p, 0, bytes);
    return p;
}

static void setup(soak_t *s)
{
    t_world_init(&s->world);
    s->rank = s->world.launch.rank;
    s->nranks = s->world.launch.size;
    s->comms[0] = s->world.comm;
    /* The other communicators the way a program without MPI makes them: root info from rank 0,
     * handed round through hccl-run's store. */
    for (int c = 1; c < NCOMMS; c++) {
        HcclRootInfo info;
        memset(&info, 0, sizeof(info));
        if (s->rank == 0)
            T_CHECK_HCCL(HcclGetRootInfo(&info));
        T_CHECK_HCCL(HcclHostBroadcastRootInfo(&info));
        T_CHECK_HCCL(HcclCommInitRootInfo(s->nranks, &info, s->rank, &s->comms[c]));
    }
    s->slots[0].stream = s->world.stream;
    T_CHECK_ACL(aclrtCreateStream(&s->slots[1].stream));
    for (int k = 0; k < NSLOTS; k++) {
        for (int m = 0; m < 2; m++) {
            s->slots[k].send[m] = alloc_buffer(s->max_bytes, m);
            s->slots[k].recv[m] = alloc_buffer(s->max_bytes, m);
        }
    }
    s->expect = alloc_buffer(s->max_bytes, 1);
    s->stats = (int64_t *)(void *)alloc_buffer(6 * sizeof(int64_t), 0);
}

static void teardown(soak_t *s)
{
    for (int k = 0; k < NSLOTS; k++) {
        for (int m = 0; m < 2; m++) {
            if (m == 1) {
                free(s->slots[k].send[m]);
                free(s->slots[k].recv[m]);
            } else {
                T_CHECK_ACL(aclrtFree(s->slots[k].send[m]));
                T_CHECK_ACL(aclrtFree(s->slots[k].recv[m]));
            }
        }
    }
    free(s->expect);
    T_CHECK_ACL(aclrtFree(s->stats));
    T_CHECK_ACL(aclrtDestroyStream(s->slots[1].stream));
    for (int c = 1; c < NCOMMS; c++)
        T_CHECK_HCCL(HcclCommDestroy(s->comms[c]));
    t_world_fini(&s->world);
}

/* Issue one op alone, wait for it and check it. */
static void run_checked(soak_t *s, const op_t *op)
{
    issue(s, op);
    T_CHECK_ACL(aclrtSynchronizeStream(s->slots[op->slot].stream));
    verify(s, op);
}

/* Every kind (every root, in place and not) at one size on one communicator, stream and buffer
 * kind; returns the next free op index. */
static uint64_t prime_size(soak_t *s, uint64_t index, int comm, int slot, int use_malloc, size_t bytes)
{
    for (int kind = 0; kind < K_COUNT; kind++) {
        uint32_t roots = kind == K_BROADCAST ? s->nranks : 1;
        int variants = kind == K_ALLREDUCE ? 2 : 1;
        for (uint32_t root = 0; root < roots; root++) {
            for (int inplace = 0; inplace < variants; inplace++) {
                op_t op = {.index = index, .key = mix64(~index), .kind = (kind_t)kind, .comm = comm, .slot = slot,
                           .use_malloc = use_malloc, .inplace = inplace, .dt = &dtypes[10] /* fp32 */,
                           .op = HCCL_REDUCE_SUM, .count = bytes / 4, .root = root};
                index++;
                if (op.kind == K_ALLGATHER || op.kind == K_REDUCESCATTER || op.kind == K_ALLTOALL)
                    op.count /= s->nranks;
                if (op.kind == K_SENDRECV && s->nranks == 1)
                    op.kind = K_BARRIER;
                run_checked(s, &op);
            }
        }
    }
    return index;
}

/*
 * Before the measured ops: every kind on every communicator, stream and buffer kind, at sizes from
 * --max-bytes down to 64 bytes, each 7/8 of the one before (results checked, not counted). Which
 * shared pages a rank touches (slots of its segments, the slices of the peers' arena buffers it
 * reads in place) depends on every size each combination has seen; the random draw covers them all
 * only after tens of thousands of ops, and a short run would mistake that working set filling up
 * for a leak. Measured on 4 ranks, 3000 ops: steps of 3/4 left 2.3% of RSS growth after the
 * warm-up, steps of 7/8 1.0% (and about 15 s of priming).
 */
static void prime(soak_t *s)
{
    uint64_t index = 0;

    for (int c = 0; c < NCOMMS; c++)
        for (int k = 0; k < NSLOTS; k++)
            for (int m = 0; m < 2; m++)
                for (double bytes = (double)s->max_bytes; bytes >= 64; bytes *= 0.875)
                    index = prime_size(s, index, c, k, m, (size_t)bytes);
    s->done = 0;
    memset(s->kinds, 0, sizeof(s->kinds));
}

/* ---- main -------------------------------------------------------------------------------------- */

/* Warm-up figures against the end: 1 when every limit holds (each broken one is named). */
static int judge(const soak_t *s, const usage_t *warm, const usage_t *end)
{
    int ok = 1;

    printf("soak: rank %u: %llu ops, %llu wrong; after warm-up rss %ld KiB (anon %ld, shmem %ld), fds %ld, threads "
           "%ld; at the end rss %ld KiB (anon %ld, shmem %ld; %+.2f%%), fds %ld, threads %ld\n",
           s->rank, (unsigned long long)s->done, (unsigned long long)s->wrong, warm->rss_kib, warm->anon_kib,
           warm->shmem_kib, warm->fds, warm->threads, end->rss_kib, end->anon_kib, end->shmem_kib,
           100.0 * (double)(end->rss_kib - warm->rss_kib) / (double)warm->rss_kib, end->fds, end->threads);
    if (s->wrong > 0) {
        fprintf(stderr, "soak: rank %u: %llu wrong results\n", s->rank, (unsigned long long)s->wrong);
        ok = 0;
    }
    if (end->rss_kib * 100 >= warm->rss_kib * (100 + RSS_GROWTH_PCT)) {
        fprintf(stderr, "soak: rank %u: rss grew by %d%% or more after the warm-up\n", s->rank, RSS_GROWTH_PCT);
        ok = 0;
    }
    if (end->fds != warm->fds) {
        fprintf(stderr, "soak: rank %u: %ld descriptors open, %ld after the warm-up\n", s->rank, end->fds,
                warm->fds);
        ok = 0;
    }
    if (end->threads != warm->threads) {
        fprintf(stderr, "soak: rank %u: %ld threads, %ld after the warm-up\n", s->rank, end->threads,
                warm->threads);
        ok = 0;
    }
    return ok;
}

/* Op k alone, or ops k and k+1 together on the two streams; returns how many ran. */
static uint64_t run_step(soak_t *s, uint64_t k)
{
    op_t first, second;
    int pair = k + 1 < s->ops && mix64(s->seed ^ ~k) % 4 == 0;

    plan(s, k, NULL, &first);
    issue(s, &first);
    if (pair) {
        plan(s, k + 1, &first, &second);
        issue(s, &second);
    }
    /* Every rank synchronises in the same order, so the two ops cannot wait on each other. */
    T_CHECK_ACL(aclrtSynchronizeStream(s->slots[first.slot].stream));
    verify(s, &first);
    if (pair) {
        T_CHECK_ACL(aclrtSynchronizeStream(s->slots[second.slot].stream));
        verify(s, &second);
    }
    return pair ? 2 : 1;
}

/* The measured ops, with progress lines; *warm_p receives the figures after the warm-up. */
static void run_ops(soak_t *s, const struct timespec *t0, usage_t *warm_p)
{
    uint64_t warmup_ops = s->ops / WARMUP_FRACTION;
    int have_warm = 0;

    for (uint64_t k = 0; k < s->ops;) {
        uint64_t before = k;
        k += run_step(s, k);
        if (!have_warm && k >= warmup_ops) {
            *warm_p = sample_usage();
            have_warm = 1;
        }
        if (k / s->report != before / s->report || k == s->ops)
            report(s, t0);
    }
    if (!have_warm)
        *warm_p = sample_usage();
}

int main(int argc, char **argv)
{
    static soak_t s;
    usage_t warm, end;
    struct timespec t0;
    int ok;

    parse_args(argc, argv, &s);
    setup(&s);
    prime(&s);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run_ops(&s, &t0, &warm);
    end = sample_usage();
    if (s.rank == 0) {
        double elapsed = seconds_since(&t0);
        printf("soak: %llu ops in %.1f s (%.0f ops/s):", (unsigned long long)s.done, elapsed,
               (double)s.done / elapsed);
        for (int k = 0; k < K_COUNT; k++)
            printf(" %s %llu", kind_names[k], (unsigned long long)s.kinds[k]);
        printf("\n");
    }
    ok = judge(&s, &warm, &end);
    teardown(&s);
    return ok ? 0 : 1;
}
