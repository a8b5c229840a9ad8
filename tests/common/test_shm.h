/* For the test programs that link the internal library and read the shared-memory engine's control
 * blocks (what ranks publish to each other). */
#ifndef HC_TEST_SHM_H
#define HC_TEST_SHM_H

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

#endif /* HC_TEST_SHM_H */
