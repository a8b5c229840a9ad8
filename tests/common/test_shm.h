/* For the test programs that link the internal library and read the shared-memory engine's control
 * blocks (what ranks publish to each other). */
#ifndef HC_TEST_SHM_H
#define HC_TEST_SHM_H

#include <string.h>

#include "hc_comm.h"
#include "shm_internal.h"
#include "test_util.h"

/* The shared-memory engine of comm, which lives as long as the communicator. */
static inline hc_shm_engine_t *t_shm_engine(HcclComm comm, const char *who)
{
    hc_comm_t *c;
    hc_shm_engine_t *eng;

    T_CHECK(hc_comm_acquire(comm, who, &c) == HCCL_SUCCESS);
    eng = (hc_shm_engine_t *)(void *)c->engine;
    hc_comm_release(c);
    return eng;
}

/* A communicator of every launched rank (exactly nranks of them), its stream and shm engine: the
 * internal-library tests' t_world_t (test_util.h's needs the shared library). */
typedef struct {
    HcclHostLaunchInfo launch;
    HcclComm comm;
    aclrtStream stream;
    hc_shm_engine_t *eng;
} t_shm_world_t;

static inline void t_shm_world_init(t_shm_world_t *w, uint32_t nranks, const char *who)
{
    HcclRootInfo info;

    memset(&info, 0, sizeof(info));
    T_CHECK(aclInit(NULL) == ACL_SUCCESS);
    T_CHECK(HcclHostGetLaunchInfo(&w->launch) == HCCL_SUCCESS && w->launch.size == nranks);
    T_CHECK(aclrtSetDevice((int32_t)w->launch.localRank) == ACL_SUCCESS);
    T_CHECK(aclrtCreateStream(&w->stream) == ACL_SUCCESS);
    if (w->launch.rank == 0)
        T_CHECK(HcclGetRootInfo(&info) == HCCL_SUCCESS);
    T_CHECK(HcclHostBroadcastRootInfo(&info) == HCCL_SUCCESS);
    T_CHECK(HcclCommInitRootInfo(nranks, &info, w->launch.rank, &w->comm) == HCCL_SUCCESS);
    w->eng = t_shm_engine(w->comm, who);
}

static inline void t_shm_world_fini(t_shm_world_t *w)
{
    T_CHECK(HcclCommDestroy(w->comm) == HCCL_SUCCESS);
    T_CHECK(aclrtDestroyStream(w->stream) == ACL_SUCCESS);
    T_CHECK(aclFinalize() == ACL_SUCCESS);
}

#endif /* HC_TEST_SHM_H */
