/*
 * The mailbox of the shared segment: how the members of a sub-communicator get its root info from
 * their leader without a collective over the parent (only members call HcclCreateSubCommConfig).
 *
 * An entry is {tag, root info}. The leader writes the root info, then publishes the tag with a
 * release store; a member scans the leader's entries for the tag with acquire loads, so it never
 * reads a half-written root info. Entries are reused round-robin; a member is expected to read
 * within the connect timeout, long before the leader has posted HC_MAILBOX_ENTRIES more.
 */
#include <string.h>

#include "hc_check.h"
#include "hc_time.h"
#include "shm_internal.h"

typedef struct {
    _Alignas(64) atomic_uint_fast64_t tag;
    _Alignas(64) HcclRootInfo info;
} entry_t;

_Static_assert(sizeof(entry_t) <= HC_MAILBOX_ENTRY_BYTES, "mailbox entry too large");

static entry_t *entry(hc_shm_engine_t *eng, uint32_t owner, uint32_t index)
{
    size_t offset = hc_shm_mailbox_base(eng) + ((size_t)owner * HC_MAILBOX_ENTRIES + index) * HC_MAILBOX_ENTRY_BYTES;
    return (entry_t *)(void *)(eng->map + offset);
}

HcclResult hc_shm_mailbox_post(hc_engine_t *engine, uint64_t tag, const HcclRootInfo *info, const uint32_t *members,
                               uint32_t nmembers)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    entry_t *e = entry(eng, eng->me, eng->mailbox_next++ % HC_MAILBOX_ENTRIES);

    atomic_store(&e->tag, 0); /* retract the old content before overwriting it */
    memcpy(&e->info, info, sizeof(*info));
    atomic_store_explicit(&e->tag, tag, memory_order_release);
    hc_shm_ring_all(eng);
    (void)members, (void)nmembers; /* every local rank can look */
    return HCCL_SUCCESS;
}

/* Look for tag in the owner's mailbox; copies the root info and returns 1 when found. */
static int find(hc_shm_engine_t *eng, uint32_t owner, uint64_t tag, HcclRootInfo *info_p)
{
    for (uint32_t i = 0; i < HC_MAILBOX_ENTRIES; i++) {
        entry_t *e = entry(eng, owner, i);
        if (atomic_load_explicit(&e->tag, memory_order_acquire) != tag)
            continue;
        memcpy(info_p, &e->info, sizeof(*info_p));
        /* The leader may have recycled the entry while we copied: trust the copy only if the tag
         * is still there. */
        if (atomic_load_explicit(&e->tag, memory_order_acquire) == tag)
            return 1;
    }
    return 0;
}

HcclResult hc_shm_mailbox_fetch(hc_engine_t *engine, uint32_t leader, uint64_t tag, int64_t deadline_ns,
                                HcclRootInfo *info_p)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    uint32_t index = hc_group_index_of(&engine->group, leader);
    hc_shm_poll_t poll;
    uint32_t peers[1] = {index};

    if (index == UINT32_MAX) {
        HC_ERROR("internal error: sub-communicator leader rank %u is not on this host", leader);
        return HCCL_E_INTERNAL;
    }
    hc_shm_poll_init(eng, &poll);
    poll.deadline = deadline_ns;
    for (;;) {
        HcclResult res;
        if (find(eng, index, tag, info_p)) {
            hc_shm_poll_end(eng, &poll);
            return HCCL_SUCCESS;
        }
        res = hc_shm_poll_wait(eng, &poll, peers, 1, NULL);
        if (res != HCCL_SUCCESS) {
            hc_shm_poll_end(eng, &poll);
            HC_ERROR("sub-communicator: leader rank %u %s before posting the root info (tag %llx)", leader,
                     res == HCCL_E_REMOTE ? "exited" : "did not call HcclCreateSubCommConfig in time",
                     (unsigned long long)tag);
            return res;
        }
    }
}
