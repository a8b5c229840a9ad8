/* The shared segment: created as a memfd by the lowest local rank, opened by the others through
 * /proc/PID/fd/FD while the bootstrap keeps everyone in step. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hc_check.h"
#include "shm_internal.h"

/* What each rank tells the others during setup. */
typedef struct {
    int32_t pid;
    int32_t fd;      /* the creator's memfd, -1 for the others */
    int32_t status;  /* HcclResult of this rank's step so far */
    int32_t reserved;
} setup_msg_t;

size_t hc_shm_segment_bytes(const hc_shm_engine_t *eng)
{
    return hc_shm_mailbox_base(eng) + (size_t)eng->nlocal * HC_MAILBOX_ENTRIES * HC_MAILBOX_ENTRY_BYTES;
}

static HcclResult create_segment(hc_shm_engine_t *eng, int *fd_p)
{
    int fd = memfd_create("hostccl-shm", MFD_CLOEXEC);

    if (fd < 0) {
        HC_ERROR("memfd_create failed: %s", strerror(errno));
        return hc_result_from_errno(errno);
    }
    if (ftruncate(fd, (off_t)eng->map_bytes) != 0) {
        HC_ERROR("cannot size the shared segment to %zu bytes: %s", eng->map_bytes, strerror(errno));
        close(fd);
        return HCCL_E_MEMORY;
    }
    eng->map = mmap(NULL, eng->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (eng->map == MAP_FAILED) {
        eng->map = NULL;
        HC_ERROR("cannot map the shared segment (%zu bytes): %s", eng->map_bytes, strerror(errno));
        close(fd);
        return HCCL_E_MEMORY;
    }
    eng->hdr = (hc_shm_header_t *)(void *)eng->map;
    eng->hdr->nlocal = eng->nlocal;
    eng->hdr->slot_bytes = eng->slot_bytes;
    eng->hdr->total_bytes = eng->map_bytes;
    /* The other ranks read the header only after the bootstrap exchange that follows (a socket
     * round trip through the root), which orders these stores before their loads. */
    eng->hdr->magic = HC_SHM_MAGIC;
    *fd_p = fd;
    return HCCL_SUCCESS;
}

static HcclResult open_segment(hc_shm_engine_t *eng, const setup_msg_t *creator)
{
    char path[64];
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/fd/%d", creator->pid, creator->fd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        /* Not an error: the engine falls back to TCP between these ranks (core/engine.c). */
        HC_WARN("cannot open the shared segment of local rank 0 (%s): %s; ranks of one host share memory only "
                "when they run as the same user and see each other's /proc",
                path, strerror(errno));
        return HCCL_E_UNAVAIL;
    }
    eng->map = mmap(NULL, eng->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (eng->map == MAP_FAILED) {
        eng->map = NULL;
        HC_ERROR("cannot map the shared segment (%zu bytes): %s", eng->map_bytes, strerror(errno));
        return HCCL_E_MEMORY;
    }
    eng->hdr = (hc_shm_header_t *)(void *)eng->map;
    if (eng->hdr->magic != HC_SHM_MAGIC || eng->hdr->nlocal != eng->nlocal ||
        eng->hdr->slot_bytes != eng->slot_bytes) {
        HC_ERROR("the shared segment of local rank 0 does not match this rank's view (%u ranks, %llu-byte "
                 "slots): ranks passed different HCCL_BUFFSIZE?",
                 eng->nlocal, (unsigned long long)eng->slot_bytes);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* Exchange setup messages; fails if any rank reported a failure. */
static HcclResult exchange(const hc_group_t *group, hc_boot_t *boot, setup_msg_t *mine, setup_msg_t *all,
                           const char *stage)
{
    HC_CHECK(hc_boot_allgather(boot, mine, sizeof(*mine), all));
    for (uint32_t r = 0; r < group->comm_size; r++) {
        if (all[r].status != HCCL_SUCCESS) {
            if (r != hc_group_my_rank(group) && all[r].status == HCCL_E_UNAVAIL)
                HC_WARN("rank %u cannot share memory with its host's ranks (%s)", r, stage);
            else if (r != hc_group_my_rank(group))
                HC_ERROR("shared memory setup failed on rank %u while %s: %s", r, stage,
                         hc_result_name((HcclResult)all[r].status));
            return all[r].status == HCCL_SUCCESS ? HCCL_E_INTERNAL : (HcclResult)all[r].status;
        }
    }
    return HCCL_SUCCESS;
}

HcclResult hc_shm_segment_setup(hc_shm_engine_t *eng, hc_boot_t *boot)
{
    const hc_group_t *group = &eng->base.group;
    setup_msg_t mine = {.pid = (int32_t)getpid(), .fd = -1};
    setup_msg_t *all = calloc(group->comm_size, sizeof(*all));
    uint32_t creator = hc_group_rank(group, 0), me = hc_group_my_rank(group);
    int fd = -1;
    HcclResult res;

    if (all == NULL) {
        HC_ERROR("out of memory setting up shared memory");
        return HCCL_E_MEMORY;
    }
    eng->map_bytes = hc_shm_segment_bytes(eng);
    /* Round 1: the creator makes the segment and says where it is. */
    if (me == creator) {
        mine.status = create_segment(eng, &fd);
        mine.fd = fd;
    }
    HC_CHECK_GOTO(exchange(group, boot, &mine, all, "creating the segment"), res, err_close);
    /* Round 2: the others map it; the creator keeps its fd open until they have. */
    if (me != creator)
        mine.status = open_segment(eng, &all[creator]);
    HC_CHECK_GOTO(exchange(group, boot, &mine, all, "mapping the segment"), res, err_close);
    if (fd >= 0)
        close(fd);
    free(all);
    return HCCL_SUCCESS;

err_close:
    if (fd >= 0)
        close(fd);
    free(all);
    hc_shm_segment_unmap(eng);
    return res;
}

void hc_shm_segment_unmap(hc_shm_engine_t *eng)
{
    if (eng->map != NULL)
        munmap(eng->map, eng->map_bytes);
    eng->map = NULL;
    eng->hdr = NULL;
}
