/* Private structures of the intra-host engine (see hc_shm.h for the protocol). */
#ifndef HC_SHM_INTERNAL_H
#define HC_SHM_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "hc_shm.h"

#define HC_SHM_MAGIC 0x4d485343484f5354ull /* "TSOHCSHM" */
#define HC_SHM_HEADER_BYTES 4096
#define HC_SHM_CTRL_BYTES 256
#define HC_SHM_SLOT_MIN (64u * 1024u)
#define HC_SHM_SLOT_MAX (4u * 1024u * 1024u)

typedef struct {
    uint64_t magic;
    uint32_t nlocal;
    uint32_t reserved;
    uint64_t slot_bytes;
    uint64_t total_bytes;
    _Alignas(64) atomic_uint doorbell; /* futex word: bumped on every publish */
    _Alignas(64) atomic_uint waiters;  /* ranks asleep (or about to sleep) on the doorbell */
} hc_shm_header_t;

typedef struct {
    _Alignas(64) atomic_uint_fast64_t arrive; /* last step this rank published */
    _Alignas(64) atomic_uint_fast64_t done;   /* last step this rank finished reading */
    _Alignas(64) hc_op_sig_t sig[2];          /* signature of the op of the step, by parity */
    uint64_t op_seq[2];
} hc_shm_ctrl_t;

_Static_assert(sizeof(hc_shm_ctrl_t) <= HC_SHM_CTRL_BYTES, "control block too large");
_Static_assert(sizeof(hc_shm_header_t) <= HC_SHM_HEADER_BYTES, "header too large");

typedef enum { HC_SHM_ARRIVE, HC_SHM_DONE } hc_shm_flag_t;

typedef struct {
    hc_engine_t base;
    uint8_t *map;
    size_t map_bytes;
    hc_shm_header_t *hdr;
    uint32_t nlocal;
    uint32_t me;             /* local index of this rank */
    uint64_t slot_bytes;
    uint64_t step;           /* last step this rank began */
    int *pidfds;             /* per local rank, -1 for self or when unavailable */
    int32_t *pids;
} hc_shm_engine_t;

static inline hc_shm_ctrl_t *hc_shm_ctrl(hc_shm_engine_t *eng, uint32_t index)
{
    return (hc_shm_ctrl_t *)(void *)(eng->map + HC_SHM_HEADER_BYTES + (size_t)index * HC_SHM_CTRL_BYTES);
}

static inline uint8_t *hc_shm_slot(hc_shm_engine_t *eng, uint32_t index, uint64_t step)
{
    size_t data = HC_SHM_HEADER_BYTES + (size_t)eng->nlocal * HC_SHM_CTRL_BYTES;
    data = (data + 4095) & ~(size_t)4095;
    return eng->map + data + ((size_t)index * 2 + (step & 1)) * eng->slot_bytes;
}

/* Segment size for nlocal ranks with slots of slot_bytes. */
size_t hc_shm_segment_bytes(uint32_t nlocal, uint64_t slot_bytes);

/* Map the shared segment (create on the lowest local rank, open elsewhere). */
HcclResult hc_shm_segment_setup(hc_shm_engine_t *eng, hc_comm_t *comm, hc_boot_t *boot);
void hc_shm_segment_unmap(hc_shm_engine_t *eng);

/* Step protocol (shm_step.c). begin waits for the parity-b slots to be free and records the op's
 * signature; publish announces this rank's data; wait_all waits for every rank's data and, on the
 * op's first step, checks every rank's signature; end releases the step. */
HcclResult hc_shm_step_begin(hc_shm_engine_t *eng, const hc_op_t *op);
void hc_shm_step_publish(hc_shm_engine_t *eng);
HcclResult hc_shm_step_wait_all(hc_shm_engine_t *eng, const hc_op_t *op, int first_step);
void hc_shm_step_end(hc_shm_engine_t *eng);

/* Wait until every local rank's flag >= target (bounded, peer-aware). */
HcclResult hc_shm_wait_flag(hc_shm_engine_t *eng, hc_shm_flag_t flag, uint64_t target, const hc_op_t *op);

/* Collectives (shm_coll.c). */
HcclResult hc_shm_allreduce(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_broadcast(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_barrier(hc_engine_t *engine, hc_op_t *op);

#endif /* HC_SHM_INTERNAL_H */
