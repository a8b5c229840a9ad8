/*
 * What every hostccl example shares: error checks, the seed's bootstrap (rank 0 makes the root
 * info, every rank receives it, every rank joins), sub-communicators for a TP x PP grid, seeded
 * values that any rank can regenerate by index, and the check of a result against a reference.
 *
 * Header-only so that each example stays one file plus this one: `cc -O2 example.c
 * $(pkg-config --cflags --libs hccl) -lm`. Only the public headers are used.
 */
#ifndef HOSTCCL_EXAMPLE_COMMON_H
#define HOSTCCL_EXAMPLE_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

#define CHECK_ACL(call)                                                                          \
    do {                                                                                         \
        aclError err_ = (call);                                                                  \
        if (err_ != ACL_SUCCESS) {                                                               \
            fprintf(stderr, "%s:%d: %s failed: acl error %d\n", __FILE__, __LINE__, #call,       \
                    (int)err_);                                                                  \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

#define CHECK_HCCL(call)                                                                         \
    do {                                                                                         \
        HcclResult res_ = (call);                                                                \
        if (res_ != HCCL_SUCCESS) {                                                              \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                 \
                    HcclGetErrorString(res_));                                                   \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

/* This process's place in the job, its stream and the communicator of all ranks. */
typedef struct {
    uint32_t rank, size;
    aclrtStream stream;
    HcclComm comm;
} ex_world_t;

/*
 * The seed's initialisation with CANN's real signatures. hccl-run (or HOSTCCL_STORE) carries the
 * root info from rank 0 to the others; under mpirun this is where MPI_Bcast would go
 * (examples/seed_mpi.c).
 */
static inline void ex_world_init(ex_world_t *w)
{
    HcclHostLaunchInfo launch;
    HcclRootInfo root;

    CHECK_ACL(aclInit(NULL));
    CHECK_HCCL(HcclHostGetLaunchInfo(&launch));
    CHECK_ACL(aclrtSetDevice((int32_t)launch.localRank));
    CHECK_ACL(aclrtCreateStream(&w->stream));
    if (launch.rank == 0)
        CHECK_HCCL(HcclGetRootInfo(&root));
    if (launch.size > 1)
        CHECK_HCCL(HcclHostBroadcastRootInfo(&root));
    CHECK_HCCL(HcclCommInitRootInfo(launch.size, &root, launch.rank, &w->comm));
    CHECK_HCCL(HcclGetRankId(w->comm, &w->rank));
    CHECK_HCCL(HcclGetRankSize(w->comm, &w->size));
}

static inline void ex_world_fini(ex_world_t *w)
{
    CHECK_HCCL(HcclCommDestroy(w->comm));
    CHECK_ACL(aclrtDestroyStream(w->stream));
    CHECK_ACL(aclFinalize());
}

/*
 * Split the world into a tp x pp grid, rank = stage * tp + tp_index, and cut one communicator per
 * parallel dimension (the seed's advice: one communicator per dimension, so that the TP AllReduces
 * of one stage and the PP transfers between stages never queue behind each other). tp_comm joins
 * the ranks of one stage, pp_comm the ranks with the same tp_index. subCommId must differ per
 * sub-communicator of a parent and agree among its members: 1 + stage for TP, 1000 + tp_index for PP.
 */
static inline void ex_grid_split(ex_world_t *w, uint32_t tp, HcclComm *tp_comm, HcclComm *pp_comm)
{
    uint32_t pp = w->size / tp, stage = w->rank / tp, tp_index = w->rank % tp;
    uint32_t *ids = malloc(sizeof(*ids) * (tp > pp ? tp : pp));

    if (ids == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (uint32_t i = 0; i < tp; i++)
        ids[i] = stage * tp + i;
    CHECK_HCCL(HcclCreateSubCommConfig(&w->comm, tp, ids, 1 + stage, tp_index, NULL, tp_comm));
    for (uint32_t s = 0; s < pp; s++)
        ids[s] = s * tp + tp_index;
    CHECK_HCCL(HcclCreateSubCommConfig(&w->comm, pp, ids, 1000 + tp_index, stage, NULL, pp_comm));
    free(ids);
}

/* A value in [-scale, scale) that depends only on (stream, index): every rank can regenerate any
 * slice of a tensor without the others, and the reference regenerates the whole. */
static inline float ex_value(uint64_t stream, uint64_t index, float scale)
{
    uint64_t z = stream * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return scale * ((float)(z >> 40) / (float)(1ull << 23) - 1.0f);
}

/* rows x cols block of tensor `stream` whose full row length is full_cols, from (row0, col0). */
static inline void ex_fill(float *dst, uint64_t stream, uint64_t full_cols, uint64_t row0, uint64_t col0,
                           uint64_t rows, uint64_t cols, float scale)
{
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++)
            dst[r * cols + c] = ex_value(stream, (row0 + r) * full_cols + col0 + c, scale);
}

/* C[m x n] = A[m x k] * B[k x n] (+ C when accumulate), row-major. Plain loops: the examples are
 * about communication, and the reference uses the very same function. */
static inline void ex_matmul(float *c, const float *a, const float *b, uint64_t m, uint64_t k, uint64_t n,
                             int accumulate)
{
    for (uint64_t i = 0; i < m; i++) {
        float *ci = c + i * n;
        if (!accumulate)
            memset(ci, 0, n * sizeof(*ci));
        for (uint64_t p = 0; p < k; p++) {
            float aip = a[i * k + p];
            const float *bp = b + p * n;
            for (uint64_t j = 0; j < n; j++)
                ci[j] += aip * bp[j];
        }
    }
}

/* C[m x n] = A[m x k] * B^T where B is n x k (the backward pass multiplies by a transpose). */
static inline void ex_matmul_bt(float *c, const float *a, const float *b, uint64_t m, uint64_t k, uint64_t n)
{
    for (uint64_t i = 0; i < m; i++)
        for (uint64_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (uint64_t p = 0; p < k; p++)
                s += a[i * k + p] * b[j * k + p];
            c[i * n + j] = s;
        }
}

/*
 * Compare got with want element by element: |got - want| <= abs_tol + rel_tol * |want|. Prints
 * the first mismatch and returns the number of elements outside the bound; *max_err_p gets the
 * largest absolute difference.
 */
static inline uint64_t ex_compare(const char *what, const float *got, const float *want, uint64_t n,
                                  float abs_tol, float rel_tol, double *max_err_p)
{
    uint64_t bad = 0;
    double max_err = 0.0;

    for (uint64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - (double)want[i]);
        if (!(err <= abs_tol + rel_tol * fabs((double)want[i]))) {
            if (bad == 0)
                fprintf(stderr, "%s: element %llu is %.9g, the reference says %.9g\n", what,
                        (unsigned long long)i, (double)got[i], (double)want[i]);
            bad++;
        }
        if (err > max_err || err != err)
            max_err = err;
    }
    if (max_err_p != NULL && max_err > *max_err_p)
        *max_err_p = max_err;
    return bad;
}

/* Every rank's verdict to every rank (an AllReduce of the failure counts), so that all exit alike. */
static inline uint64_t ex_agree(ex_world_t *w, uint64_t local_failures)
{
    uint64_t *total;

    CHECK_ACL(aclrtMalloc((void **)&total, sizeof(*total), ACL_MEM_MALLOC_HUGE_FIRST));
    *total = local_failures;
    CHECK_HCCL(HcclAllReduce(total, total, 1, HCCL_DATA_TYPE_UINT64, HCCL_REDUCE_SUM, w->comm, w->stream));
    CHECK_ACL(aclrtSynchronizeStream(w->stream));
    local_failures = *total;
    CHECK_ACL(aclrtFree(total));
    return local_failures;
}

static inline void *ex_alloc(size_t bytes)
{
    void *p = NULL;

    CHECK_ACL(aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    return p;
}

#endif /* HOSTCCL_EXAMPLE_COMMON_H */
