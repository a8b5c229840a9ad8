/*
 * A registry of live objects whose lookups take no lock: communicators (core/comm.c) and the
 * runtime's streams and events (runtime/handle.c). Every API call looks its handle up, so the
 * lookup is on every op's path; a process-wide mutex or rwlock there was two atomic
 * read-modify-writes on one line shared by all threads, plus a call each way.
 *
 * A handle is `generation << 32 | index << 3 | kind` (kind 1..7, so never NULL): it names a slot and
 * the generation the slot had when the object was registered, never an address. Unregistering
 * bumps the generation, so a stale, forged or wrong-kind handle is refused without touching the
 * memory it points to, even when its slot was reused.
 *
 * Lookup pins the slot (a count in the slot's state word, raised with a compare-and-swap that also
 * checks the generation), takes a reference on the object through the caller's function and unpins.
 * Unregister clears the slot's live bit, then waits until no lookup holds a pin (pins last a few
 * instructions; the wait yields), so once it returns no lookup can still reach the object and the
 * registry's reference passes to the caller. Slots live in chunks that are never freed or moved,
 * so a lookup may read any slot at any time. Register and unregister take a mutex (rare calls).
 */
#ifndef HC_SLOTMAP_H
#define HC_SLOTMAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HC_SLOTMAP_CHUNK 256
#define HC_SLOTMAP_CHUNKS 4096 /* at most 1M live objects per map */
#define HC_SLOTMAP_KIND_BITS 3

typedef struct hc_slot {
    atomic_uint_fast64_t state; /* generation << 32 | pins << 1 | live */
    void *_Atomic obj;
    uint32_t kind;              /* written before the state publishes it */
    uint32_t next_free;         /* under the map's mutex */
    uint32_t parent_gen;        /* after fork(): the generation the parent's object had here (0: none) */
    uint32_t parent_kind;
} hc_slot_t;

typedef struct {
    size_t refs_offset;  /* where the objects keep their reference count (an atomic_uint) */
    pthread_mutex_t lock;
    hc_slot_t *_Atomic chunks[HC_SLOTMAP_CHUNKS];
    uint32_t count;      /* slots ever handed out */
    uint32_t free_head;  /* UINT32_MAX: none */
} hc_slotmap_t;

/* A map of objects of type `type` whose reference count is the atomic_uint member `refs`. */
#define HC_SLOTMAP_INITIALIZER(type, refs) \
    {.refs_offset = offsetof(type, refs), .lock = PTHREAD_MUTEX_INITIALIZER, .free_head = UINT32_MAX}

#define HC_SLOTMAP_INDEX_BITS 29
#define HC_SLOTMAP_LIVE 1ull
#define HC_SLOTMAP_PIN 2ull
#define HC_SLOTMAP_GEN_SHIFT 32

/* Enter obj of kind (1..7) and return its handle, or NULL when out of memory or slots. */
void *hc_slotmap_register(hc_slotmap_t *map, void *obj, uint32_t kind);

/* The object a live handle of `kind` names, with a reference taken; NULL for anything else (NULL,
 * stale, forged, wrong kind). Takes no lock; inline, as every API call makes one or two. */
static inline void *hc_slotmap_lookup(hc_slotmap_t *map, const void *handle, uint32_t kind)
{
    uint64_t value = (uint64_t)(uintptr_t)handle, state;
    uint32_t index = (uint32_t)(value >> HC_SLOTMAP_KIND_BITS) & ((1u << HC_SLOTMAP_INDEX_BITS) - 1);
    hc_slot_t *chunk, *slot;
    void *obj;

    if ((value & ((1u << HC_SLOTMAP_KIND_BITS) - 1)) != kind || index / HC_SLOTMAP_CHUNK >= HC_SLOTMAP_CHUNKS)
        return NULL;
    chunk = atomic_load_explicit(&map->chunks[index / HC_SLOTMAP_CHUNK], memory_order_acquire);
    if (chunk == NULL)
        return NULL;
    slot = &chunk[index % HC_SLOTMAP_CHUNK];
    state = atomic_load_explicit(&slot->state, memory_order_acquire);
    do {
        if ((state >> HC_SLOTMAP_GEN_SHIFT) != (value >> HC_SLOTMAP_GEN_SHIFT) || !(state & HC_SLOTMAP_LIVE))
            return NULL;
    } while (!atomic_compare_exchange_weak_explicit(&slot->state, &state, state + HC_SLOTMAP_PIN,
                                                    memory_order_acquire, memory_order_acquire));
    obj = slot->kind == kind ? atomic_load_explicit(&slot->obj, memory_order_relaxed) : NULL;
    if (obj != NULL)
        atomic_fetch_add_explicit((atomic_uint *)(void *)((char *)obj + map->refs_offset), 1, memory_order_relaxed);
    /* release: the reference taken above happens before an unregister that sees the pin gone. */
    atomic_fetch_sub_explicit(&slot->state, HC_SLOTMAP_PIN, memory_order_release);
    return obj;
}

/* The state word of the slot that a handle of `kind` names, NULL for a handle that names none: for
 * hc_slotmap_state_live. Slots are never freed or moved, so the pointer may be kept. */
static inline atomic_uint_fast64_t *hc_slotmap_state_of(hc_slotmap_t *map, const void *handle, uint32_t kind)
{
    uint64_t value = (uint64_t)(uintptr_t)handle;
    uint32_t index = (uint32_t)(value >> HC_SLOTMAP_KIND_BITS) & ((1u << HC_SLOTMAP_INDEX_BITS) - 1);
    hc_slot_t *chunk;

    if ((value & ((1u << HC_SLOTMAP_KIND_BITS) - 1)) != kind || index / HC_SLOTMAP_CHUNK >= HC_SLOTMAP_CHUNKS)
        return NULL;
    chunk = atomic_load_explicit(&map->chunks[index / HC_SLOTMAP_CHUNK], memory_order_acquire);
    return chunk != NULL ? &chunk[index % HC_SLOTMAP_CHUNK].state : NULL;
}

/* Whether the slot whose state word is `state` (hc_slotmap_state_of(handle)) still holds handle's
 * object, live: its generation is handle's and the live bit is set (the pins may be anything). */
static inline int hc_slotmap_state_live(atomic_uint_fast64_t *state, const void *handle)
{
    const uint64_t gen_and_live = ~0ull << HC_SLOTMAP_GEN_SHIFT | HC_SLOTMAP_LIVE;
    uint64_t now = atomic_load_explicit(state, memory_order_acquire);

    return ((now ^ ((uint64_t)(uintptr_t)handle | HC_SLOTMAP_LIVE)) & gen_and_live) == 0;
}

/* Whether handle still names a live object of `kind`, taking nothing: for a caller that holds a
 * reference to the object the handle named and wants to know whether it was unregistered since. */
static inline int hc_slotmap_is_live(hc_slotmap_t *map, const void *handle, uint32_t kind)
{
    atomic_uint_fast64_t *state = hc_slotmap_state_of(map, handle, kind);

    return state != NULL && hc_slotmap_state_live(state, handle);
}

/* Remove a live handle of `kind`; returns its object (the registry's reference passes to the
 * caller), or NULL when the handle is not live. */
void *hc_slotmap_unregister(hc_slotmap_t *map, const void *handle, uint32_t kind);

/* Call fn(obj, arg) for every live object of kind, under the map's mutex (ref it to keep it). */
void hc_slotmap_each(hc_slotmap_t *map, uint32_t kind, void (*fn)(void *obj, void *arg), void *arg);

/* Live objects of `kind` now (under the mutex). */
uint32_t hc_slotmap_live(hc_slotmap_t *map, uint32_t kind);

/*
 * fork(): prepare takes the map's mutex (so the child's copy is consistent), parent releases it.
 * In the child every live object is dropped without being touched (its threads and lock holders do
 * not exist there; it stays allocated, unused); its slot remembers the handle, for from_parent.
 */
void hc_slotmap_fork_prepare(hc_slotmap_t *map);
void hc_slotmap_fork_parent(hc_slotmap_t *map);
void hc_slotmap_fork_child(hc_slotmap_t *map);

/* Whether handle named an object of kind in the parent before fork() (to explain a failed lookup). */
int hc_slotmap_from_parent(hc_slotmap_t *map, const void *handle, uint32_t kind);

#endif /* HC_SLOTMAP_H */
