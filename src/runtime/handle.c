/*
 * The registry of live streams, events, contexts and physical allocations: a slot map. A handle encodes a slot index, the slot's
 * generation and the object kind; destroying an object bumps its slot's generation, so the old
 * handle never matches again even when the slot is reused. A stale, forged or wrong-kind handle is
 * therefore answered with ACL_ERROR_RT_INVALID_HANDLE without dereferencing anything it points to.
 *
 * Handle value: generation << 32 | index << 3 | kind. kind is 1..4, so a handle is never NULL
 * (NULL means "the default stream" to the stream calls).
 */
#include <stdint.h>
#include <stdlib.h>

#include "hc_log.h"
#include "hc_rt.h"

#define INDEX_BITS 29
#define MAX_SLOTS (1u << INDEX_BITS)
#define NO_SLOT UINT32_MAX

typedef struct {
    hc_rt_object_t *obj; /* NULL while the slot is free */
    uint32_t gen;        /* generation of the handle that names the slot now */
    uint32_t next_free;
    uint32_t parent_gen; /* after fork(): the generation the parent's object had here (0: none) */
    hc_rt_kind_t parent_kind;
} slot_t;

/* Lookups (every enqueue) take the lock shared; register and unregister take it exclusive.
 * Writers are preferred so that a steady stream of enqueues from many ranks cannot starve
 * aclrtCreateStream or aclrtDestroyEvent; the lock is never taken recursively. */
static pthread_rwlock_t registry_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static slot_t *slots;
static uint32_t slot_count, slot_capacity;
static uint32_t free_head = NO_SLOT;

static void *encode(uint32_t index, uint32_t gen, hc_rt_kind_t kind)
{
    uint64_t value = (uint64_t)gen << 32 | (uint64_t)index << 3 | (uint64_t)kind;

    return (void *)(uintptr_t)value;
}

/* The slot a handle names if its kind and generation match; called with the lock held. */
static slot_t *decode(const void *handle, hc_rt_kind_t kind)
{
    uint64_t value = (uint64_t)(uintptr_t)handle;
    uint32_t index = (uint32_t)(value >> 3) & (MAX_SLOTS - 1);
    uint32_t gen = (uint32_t)(value >> 32);

    if ((value & 7) != (uint64_t)kind || index >= slot_count)
        return NULL;
    if (slots[index].obj == NULL || slots[index].gen != gen || slots[index].obj->kind != kind)
        return NULL;
    return &slots[index];
}

/* A free slot index, growing the table when none is left; called with the lock held exclusive. */
static aclError take_slot(uint32_t *index_p)
{
    if (free_head != NO_SLOT) {
        *index_p = free_head;
        free_head = slots[free_head].next_free;
        return ACL_SUCCESS;
    }
    if (slot_count == slot_capacity) {
        uint32_t capacity = slot_capacity ? slot_capacity * 2 : 64;
        slot_t *grown;

        if (capacity > MAX_SLOTS)
            return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
        grown = realloc(slots, capacity * sizeof(*grown));
        if (grown == NULL)
            return ACL_ERROR_BAD_ALLOC;
        slots = grown;
        slot_capacity = capacity;
    }
    slots[slot_count] = (slot_t){.obj = NULL, .gen = 0, .next_free = NO_SLOT, .parent_gen = 0};
    *index_p = slot_count++;
    return ACL_SUCCESS;
}

aclError hc_rt_handle_register(hc_rt_object_t *obj)
{
    uint32_t index, used;
    aclError res;

    pthread_rwlock_wrlock(&registry_lock);
    used = slot_count;
    res = take_slot(&index);
    if (res == ACL_SUCCESS) {
        /* Generation 0 is skipped so that the first handle of slot 0 is not a small integer. */
        slots[index].gen = slots[index].gen + 1 == 0 ? 1 : slots[index].gen + 1;
        slots[index].obj = obj;
        obj->handle = encode(index, slots[index].gen, obj->kind);
    }
    pthread_rwlock_unlock(&registry_lock);
    if (res != ACL_SUCCESS)
        HC_ERROR("cannot register a new %s: out of handles or memory (%u slots in use)",
                 obj->kind == HC_RT_KIND_STREAM ? "stream" : "event", used);
    return res;
}

aclError hc_rt_handle_lookup(const void *handle, hc_rt_kind_t kind, hc_rt_object_t **obj_p)
{
    slot_t *slot;
    aclError res = ACL_ERROR_RT_INVALID_HANDLE;

    pthread_rwlock_rdlock(&registry_lock);
    slot = decode(handle, kind);
    if (slot != NULL) {
        hc_rt_object_ref(slot->obj);
        *obj_p = slot->obj;
        res = ACL_SUCCESS;
    }
    pthread_rwlock_unlock(&registry_lock);
    return res;
}

aclError hc_rt_handle_unregister(const void *handle, hc_rt_kind_t kind, hc_rt_object_t **obj_p)
{
    slot_t *slot;
    aclError res = ACL_ERROR_RT_INVALID_HANDLE;

    pthread_rwlock_wrlock(&registry_lock);
    slot = decode(handle, kind);
    if (slot != NULL) {
        *obj_p = slot->obj;
        slot->obj = NULL;
        slot->next_free = free_head;
        free_head = (uint32_t)(slot - slots);
        res = ACL_SUCCESS;
    }
    pthread_rwlock_unlock(&registry_lock);
    return res;
}

aclError hc_rt_handle_collect(hc_rt_kind_t kind, hc_rt_object_t ***objs_p, size_t *count_p)
{
    hc_rt_object_t **objs;
    size_t count = 0;

    pthread_rwlock_rdlock(&registry_lock);
    objs = malloc((slot_count ? slot_count : 1) * sizeof(*objs));
    if (objs == NULL) {
        pthread_rwlock_unlock(&registry_lock);
        HC_ERROR("cannot list the live handles: out of memory (%u slots)", slot_count);
        return ACL_ERROR_BAD_ALLOC;
    }
    for (uint32_t i = 0; i < slot_count; i++) {
        if (slots[i].obj != NULL && slots[i].obj->kind == kind) {
            hc_rt_object_ref(slots[i].obj);
            objs[count++] = slots[i].obj;
        }
    }
    pthread_rwlock_unlock(&registry_lock);
    *objs_p = objs;
    *count_p = count;
    return ACL_SUCCESS;
}

void hc_rt_object_ref(hc_rt_object_t *obj)
{
    atomic_fetch_add_explicit(&obj->refs, 1, memory_order_relaxed);
}

void hc_rt_object_unref(hc_rt_object_t *obj)
{
    /* acq_rel: every use of the object by other holders happens before its release. */
    if (atomic_fetch_sub_explicit(&obj->refs, 1, memory_order_acq_rel) == 1)
        obj->release(obj);
}

/* ---- fork() (fork.c) ------------------------------------------------------------------------- */

void hc_rt_handle_fork_prepare(void)
{
    pthread_rwlock_wrlock(&registry_lock);
}

void hc_rt_handle_fork_parent(void)
{
    pthread_rwlock_unlock(&registry_lock);
}

/*
 * In the child: the parent's streams and events are not the child's (their worker threads do not
 * exist here, their locks may be held by threads that do not exist either). Every live slot is
 * freed without touching its object, which stays allocated and unused; the slot remembers the
 * handle it had, so that a call with it can say why it fails (hc_rt_handle_from_parent).
 */
void hc_rt_handle_fork_child(void)
{
    for (uint32_t i = 0; i < slot_count; i++) {
        if (slots[i].obj == NULL)
            continue;
        slots[i].parent_gen = slots[i].gen;
        slots[i].parent_kind = slots[i].obj->kind;
        slots[i].obj = NULL;
        slots[i].next_free = free_head;
        free_head = i;
    }
    /* Not unlocked but made anew: glibc recognises a writer by its thread id, which the forking
     * thread does not keep in the child, so an unlock there would release a read lock instead. */
    registry_lock = (pthread_rwlock_t)PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
}

int hc_rt_handle_from_parent(const void *handle, hc_rt_kind_t kind)
{
    uint64_t value = (uint64_t)(uintptr_t)handle;
    uint32_t index = (uint32_t)(value >> 2) & (MAX_SLOTS - 1);
    uint32_t gen = (uint32_t)(value >> 32);
    int from_parent;

    if ((value & 3) != (uint64_t)kind)
        return 0;
    pthread_rwlock_rdlock(&registry_lock);
    from_parent = index < slot_count && slots[index].parent_gen != 0 && slots[index].parent_gen == gen &&
                  slots[index].parent_kind == kind;
    pthread_rwlock_unlock(&registry_lock);
    return from_parent;
}
