/*
 * Cross-memory attach: reading a peer's plain (malloc) memory with process_vm_readv, a single copy
 * where the copy-through path makes two. Whether the kernel allows it (same user, and Yama's
 * ptrace_scope or a container policy may forbid it between sibling processes) is probed once when
 * the communicator is created: every rank reads every local peer's control block through CMA and
 * checks the address it finds there, then the ranks agree through the bootstrap, so that all of
 * them take the same path for every op.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "hc_check.h"
#include "hc_config.h"
#include "shm_internal.h"

static int can_read(hc_shm_engine_t *eng, uint32_t i)
{
    uint64_t expected = hc_shm_ctrl(eng, i)->self_addr, seen = 0;
    struct iovec local = {.iov_base = &seen, .iov_len = sizeof(seen)};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)(expected + offsetof(hc_shm_ctrl_t, self_addr)),
                           .iov_len = sizeof(seen)};

    if (eng->pids[i] == eng->pids[eng->me])
        return 1;
    return process_vm_readv(eng->pids[i], &local, 1, &remote, 1, 0) == (ssize_t)sizeof(seen) && seen == expected;
}

HcclResult hc_shm_cma_probe(hc_shm_engine_t *eng, hc_boot_t *boot)
{
    const hc_group_t *group = &eng->base.group;
    int32_t *all = calloc(group->comm_size, sizeof(*all));
    int32_t ok = (int32_t)hc_config_int(HC_CFG_CMA);
    HcclResult res;

    if (all == NULL)
        return HCCL_E_MEMORY;
    hc_shm_ctrl(eng, eng->me)->self_addr = (uintptr_t)hc_shm_ctrl(eng, eng->me);
    /* Round 1: every rank has published its block's address. */
    HC_CHECK_GOTO(hc_boot_allgather(boot, &ok, sizeof(ok), all), res, out);
    for (uint32_t i = 0; i < eng->nlocal && ok; i++)
        ok = can_read(eng, i);
    /* Round 2: everyone's verdict. */
    HC_CHECK_GOTO(hc_boot_allgather(boot, &ok, sizeof(ok), all), res, out);
    eng->cma = 1;
    for (uint32_t k = 0; k < eng->nlocal; k++)
        eng->cma &= all[hc_group_rank(group, k)] != 0;
    HC_DEBUG("cross-memory attach between the ranks of this host: %s", eng->cma ? "allowed" : "not allowed");
out:
    free(all);
    return res;
}

HcclResult hc_shm_copy_from_peer(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, void *dst, uint64_t addr,
                                 int64_t off, size_t bytes)
{
    uint8_t *src = hc_shm_peer_buffer(eng, i, addr, off, bytes), *out = dst;

    if (src != NULL) {
        memcpy(dst, src, bytes);
        return HCCL_SUCCESS;
    }
    if (hc_shm_peer_range_bad(eng, i, off, bytes))
        return HCCL_E_INTERNAL;
    if (!eng->cma)
        return hc_shm_unreachable(eng, op, i);
    while (bytes > 0) {
        struct iovec local = {.iov_base = out, .iov_len = bytes};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = bytes};
        ssize_t n = process_vm_readv(eng->pids[i], &local, 1, &remote, 1, 0);
        if (n < 0 && errno == ESRCH) {
            HC_ERROR("copy failed: rank %u (pid %d) exited while this rank waited for it (reading its memory)",
                     hc_group_rank(&eng->base.group, i), eng->pids[i]);
            return HCCL_E_REMOTE;
        }
        if (n <= 0) {
            HC_ERROR("reading %zu bytes of rank %u (pid %d) with process_vm_readv failed: %s", bytes,
                     hc_group_rank(&eng->base.group, i), eng->pids[i], n < 0 ? strerror(errno) : "no progress");
            return HCCL_E_SYSCALL;
        }
        out += n;
        addr += (uint64_t)n;
        bytes -= (size_t)n;
    }
    return HCCL_SUCCESS;
}
