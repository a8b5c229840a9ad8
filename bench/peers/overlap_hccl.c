/* hostccl's overlap driver (bench/overlap.py): the measurements of overlap_common.c over HCCL calls.
 * Run under hccl-run:
 *
 *   hccl-run -n 2 overlap_hccl [--sizes 8,64K,4M] [--quick] [--mem malloc|acl] [...]
 *   hccl-run -n 1 overlap_hccl --loop ITERS --size BYTES     (blocking loop, for callgrind)
 *
 * The op runs on its own stream; barriers and the gathering of the timings run on a second
 * stream, so that the op's stream sees only the pattern being measured. */
#define _POSIX_C_SOURCE 200809L
#include "overlap_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

typedef struct {
    HcclComm comm;
    aclrtStream stream, ctl;
    aclrtEvent ev[2]; /* the pipelined ops' end events */
    float *send, *recv, *recv2;
    double *stats; /* 2 values, in the same kind of memory */
} hccl_ctx_t;

static int hstart(void *arg, uint64_t bytes)
{
    hccl_ctx_t *c = arg;

    return HcclAllReduce(c->send, c->recv, bytes / 4 ? bytes / 4 : 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c->comm,
                         c->stream) != HCCL_SUCCESS;
}

static int hwait(void *arg)
{
    return aclrtSynchronizeStream(((hccl_ctx_t *)arg)->stream) != ACL_SUCCESS;
}

static int hstart_slot(void *arg, uint64_t bytes, int slot)
{
    hccl_ctx_t *c = arg;

    return HcclAllReduce(c->send, slot ? c->recv2 : c->recv, bytes / 4 ? bytes / 4 : 1, HCCL_DATA_TYPE_FP32,
                         HCCL_REDUCE_SUM, c->comm, c->stream) != HCCL_SUCCESS ||
           aclrtRecordEvent(c->ev[slot], c->stream) != ACL_SUCCESS;
}

static int hwait_slot(void *arg, int slot)
{
    return aclrtSynchronizeEvent(((hccl_ctx_t *)arg)->ev[slot]) != ACL_SUCCESS;
}

static int hblocking(void *arg, uint64_t bytes)
{
    return hstart(arg, bytes) != 0 || hwait(arg) != 0;
}

static int hbarrier(void *arg)
{
    hccl_ctx_t *c = arg;

    return HcclBarrier(c->comm, c->ctl) != HCCL_SUCCESS || aclrtSynchronizeStream(c->ctl) != ACL_SUCCESS;
}

static int hmax_all(void *arg, double *values, int n)
{
    hccl_ctx_t *c = arg;

    memcpy(c->stats, values, (size_t)n * sizeof(double));
    if (HcclAllReduce(c->stats, c->stats, (uint64_t)n, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_MAX, c->comm, c->ctl) !=
            HCCL_SUCCESS ||
        aclrtSynchronizeStream(c->ctl) != ACL_SUCCESS)
        return -1;
    memcpy(values, c->stats, (size_t)n * sizeof(double));
    return 0;
}

static void *alloc_mem(const char *mem, size_t bytes)
{
    void *p = NULL;

    if (strcmp(mem, "acl") == 0)
        return aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS ? p : NULL;
    if (posix_memalign(&p, 64, bytes) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

static int init(hccl_ctx_t *c, const HcclHostLaunchInfo *li, const char *mem, uint64_t max_bytes)
{
    HcclRootInfo info;

    memset(&info, 0, sizeof(info));
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice((int32_t)li->localRank) != ACL_SUCCESS ||
        aclrtCreateStream(&c->stream) != ACL_SUCCESS ||
        aclrtCreateStream(&c->ctl) != ACL_SUCCESS || aclrtCreateEvent(&c->ev[0]) != ACL_SUCCESS ||
        aclrtCreateEvent(&c->ev[1]) != ACL_SUCCESS)
        return -1;
    if (li->rank == 0 && HcclGetRootInfo(&info) != HCCL_SUCCESS)
        return -1;
    if (li->size > 1 && HcclHostBroadcastRootInfo(&info) != HCCL_SUCCESS)
        return -1;
    if (HcclCommInitRootInfo(li->size, &info, li->rank, &c->comm) != HCCL_SUCCESS)
        return -1;
    c->send = alloc_mem(mem, max_bytes);
    c->recv = alloc_mem(mem, max_bytes);
    c->recv2 = alloc_mem(mem, max_bytes);
    c->stats = alloc_mem(mem, 64);
    return c->send != NULL && c->recv != NULL && c->recv2 != NULL && c->stats != NULL ? 0 : -1;
}

int main(int argc, char **argv)
{
    HcclHostLaunchInfo li;
    hccl_ctx_t c = {0};
    overlap_opts_t opts;
    uint64_t max_bytes = 64, loop_bytes = 8;
    long loop_iters = 0;
    int res;

    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--loop") == 0)
            loop_iters = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--size") == 0)
            loop_bytes = strtoull(argv[i + 1], NULL, 10);
    }
    if (overlap_parse(argc, argv, &opts) != 0 || HcclHostGetLaunchInfo(&li) != HCCL_SUCCESS)
        return 2;
    opts.impl_name = "hostccl";
    for (int i = 0; i < opts.nsizes; i++)
        max_bytes = opts.sizes[i] > max_bytes ? opts.sizes[i] : max_bytes;
    max_bytes = loop_bytes > max_bytes ? loop_bytes : max_bytes;
    if (init(&c, &li, opts.mem, max_bytes) != 0) {
        fprintf(stderr, "overlap_hccl: rank %u: initialisation failed: %s\n", li.rank, HcclHostGetRecentErrMsg());
        return 1;
    }
    overlap_impl_t impl = {.ctx = &c, .rank = (int)li.rank, .nranks = (int)li.size, .start = hstart, .wait = hwait,
                           .start_slot = hstart_slot, .wait_slot = hwait_slot,
                           .blocking = hblocking, .barrier = hbarrier, .max_all = hmax_all};
    res = loop_iters > 0 ? overlap_loop(&impl, loop_bytes, loop_iters) : overlap_run(&impl, &opts);
    HcclCommDestroy(c.comm);
    aclrtDestroyStream(c.stream);
    aclrtDestroyStream(c.ctl);
    aclrtDestroyEvent(c.ev[0]);
    aclrtDestroyEvent(c.ev[1]);
    aclFinalize();
    return res == 0 ? 0 : 1;
}
