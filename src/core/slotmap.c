/* The lock-free registry of handles (hc_slotmap.h says how it works and why). */
#include <sched.h>
#include <stdlib.h>

#include "hc_slotmap.h"

#define INDEX_BITS HC_SLOTMAP_INDEX_BITS
#define LIVE HC_SLOTMAP_LIVE
#define GEN_SHIFT HC_SLOTMAP_GEN_SHIFT
#define KIND_MASK ((1u << HC_SLOTMAP_KIND_BITS) - 1)

static void *encode(uint32_t index, uint32_t gen, uint32_t kind)
{
    return (void *)(uintptr_t)((uint64_t)gen << GEN_SHIFT | (uint64_t)index << HC_SLOTMAP_KIND_BITS | kind);
}

static hc_slot_t *slot_at(hc_slotmap_t *map, uint32_t index)
{
    hc_slot_t *chunk;

    if (index / HC_SLOTMAP_CHUNK >= HC_SLOTMAP_CHUNKS)
        return NULL;
    chunk = atomic_load_explicit(&map->chunks[index / HC_SLOTMAP_CHUNK], memory_order_acquire);
    return chunk != NULL ? &chunk[index % HC_SLOTMAP_CHUNK] : NULL;
}

/* A free slot's index, growing by a chunk when none is left. Under the mutex. */
static int take_slot(hc_slotmap_t *map, uint32_t *index_p)
{
    uint32_t index = map->free_head;

    if (index != UINT32_MAX) {
        map->free_head = slot_at(map, index)->next_free;
        *index_p = index;
        return 0;
    }
    index = map->count;
    if (index / HC_SLOTMAP_CHUNK >= HC_SLOTMAP_CHUNKS)
        return -1;
    if (index % HC_SLOTMAP_CHUNK == 0) {
        hc_slot_t *chunk = calloc(HC_SLOTMAP_CHUNK, sizeof(*chunk));
        if (chunk == NULL)
            return -1;
        atomic_store_explicit(&map->chunks[index / HC_SLOTMAP_CHUNK], chunk, memory_order_release);
    }
    map->count++;
    *index_p = index;
    return 0;
}

void *hc_slotmap_register(hc_slotmap_t *map, void *obj, uint32_t kind)
{
    uint32_t index, gen;
    hc_slot_t *slot;
    void *handle = NULL;

    pthread_mutex_lock(&map->lock);
    if (take_slot(map, &index) == 0) {
        slot = slot_at(map, index);
        /* Generation 0 is skipped so that the first handle of slot 0 is not a small integer. */
        gen = (uint32_t)(atomic_load_explicit(&slot->state, memory_order_relaxed) >> GEN_SHIFT) + 1;
        gen = gen == 0 ? 1 : gen;
        slot->kind = kind;
        atomic_store_explicit(&slot->obj, obj, memory_order_relaxed);
        atomic_store_explicit(&slot->state, (uint64_t)gen << GEN_SHIFT | LIVE, memory_order_release);
        handle = encode(index, gen, kind);
    }
    pthread_mutex_unlock(&map->lock);
    return handle;
}

void *hc_slotmap_unregister(hc_slotmap_t *map, const void *handle, uint32_t kind)
{
    uint64_t value = (uint64_t)(uintptr_t)handle, state;
    uint32_t index = (uint32_t)(value >> HC_SLOTMAP_KIND_BITS) & ((1u << INDEX_BITS) - 1);
    hc_slot_t *slot;
    void *obj = NULL;

    pthread_mutex_lock(&map->lock);
    slot = (value & KIND_MASK) == kind ? slot_at(map, index) : NULL;
    if (slot == NULL || index >= map->count || slot->kind != kind)
        goto out;
    state = atomic_load_explicit(&slot->state, memory_order_relaxed);
    if ((state >> GEN_SHIFT) != (value >> GEN_SHIFT) || !(state & LIVE))
        goto out;
    /* Live bit off: no new pin can be taken. Then wait for the pins already held (a lookup between
     * its compare-and-swap and its unpin: a few instructions, unless it was preempted there). */
    atomic_fetch_and_explicit(&slot->state, ~LIVE, memory_order_acq_rel);
    while ((atomic_load_explicit(&slot->state, memory_order_acquire) & ~(~0ull << GEN_SHIFT)) != 0)
        sched_yield();
    obj = atomic_load_explicit(&slot->obj, memory_order_relaxed);
    atomic_store_explicit(&slot->obj, NULL, memory_order_relaxed);
    slot->next_free = map->free_head;
    map->free_head = index;
out:
    pthread_mutex_unlock(&map->lock);
    return obj;
}

void hc_slotmap_each(hc_slotmap_t *map, uint32_t kind, void (*fn)(void *obj, void *arg), void *arg)
{
    pthread_mutex_lock(&map->lock);
    for (uint32_t i = 0; i < map->count; i++) {
        hc_slot_t *slot = slot_at(map, i);
        void *obj = atomic_load_explicit(&slot->obj, memory_order_relaxed);
        if (obj != NULL && slot->kind == kind)
            fn(obj, arg);
    }
    pthread_mutex_unlock(&map->lock);
}

static void count_one(void *obj, void *arg)
{
    (void)obj;
    (*(uint32_t *)arg)++;
}

uint32_t hc_slotmap_live(hc_slotmap_t *map, uint32_t kind)
{
    uint32_t n = 0;

    hc_slotmap_each(map, kind, count_one, &n);
    return n;
}

/* ---- fork() ---------------------------------------------------------------------------------- */

void hc_slotmap_fork_prepare(hc_slotmap_t *map)
{
    pthread_mutex_lock(&map->lock);
}

void hc_slotmap_fork_parent(hc_slotmap_t *map)
{
    pthread_mutex_unlock(&map->lock);
}

void hc_slotmap_fork_child(hc_slotmap_t *map)
{
    for (uint32_t i = 0; i < map->count; i++) {
        hc_slot_t *slot = slot_at(map, i);
        uint64_t state = atomic_load_explicit(&slot->state, memory_order_relaxed);

        if (!(state & LIVE))
            continue;
        slot->parent_gen = (uint32_t)(state >> GEN_SHIFT);
        slot->parent_kind = slot->kind;
        /* Pins of threads that do not exist here are dropped with the live bit. */
        atomic_store_explicit(&slot->state, state & (~0ull << GEN_SHIFT), memory_order_relaxed);
        atomic_store_explicit(&slot->obj, NULL, memory_order_relaxed);
        slot->next_free = map->free_head;
        map->free_head = i;
    }
    /* Made anew rather than unlocked: the child's thread is not the one that locked it. */
    pthread_mutex_init(&map->lock, NULL);
}

int hc_slotmap_from_parent(hc_slotmap_t *map, const void *handle, uint32_t kind)
{
    uint64_t value = (uint64_t)(uintptr_t)handle;
    uint32_t index = (uint32_t)(value >> HC_SLOTMAP_KIND_BITS) & ((1u << INDEX_BITS) - 1);
    hc_slot_t *slot;
    int found;

    if ((value & KIND_MASK) != kind)
        return 0;
    pthread_mutex_lock(&map->lock);
    slot = index < map->count ? slot_at(map, index) : NULL;
    found = slot != NULL && slot->parent_gen != 0 && slot->parent_gen == (uint32_t)(value >> GEN_SHIFT) &&
            slot->parent_kind == kind;
    pthread_mutex_unlock(&map->lock);
    return found;
}
