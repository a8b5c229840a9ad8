/*
 * The registry of live streams, events, contexts and physical allocations: a slot map
 * (core/hc_slotmap.h) whose lookups take no lock, since every stream call and every HCCL op looks a
 * handle up. A handle encodes a slot index, the slot's generation and the object kind; destroying an
 * object bumps its slot's generation, so the old handle never matches again even when the slot is
 * reused. A stale, forged or wrong-kind handle is therefore answered with
 * ACL_ERROR_RT_INVALID_HANDLE without dereferencing anything it points to. kind is 1..4, so a handle
 * is never NULL (NULL means "the default stream" to the stream calls), and never a communicator's
 * handle (kind 5).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hc_compiler.h"
#include "hc_log.h"
#include "hc_rt.h"
#include "hc_slotmap.h"

static hc_slotmap_t registry = HC_SLOTMAP_INITIALIZER(hc_rt_object_t, refs);

aclError hc_rt_handle_register(hc_rt_object_t *obj)
{
    obj->handle = hc_slotmap_register(&registry, obj, (uint32_t)obj->kind);
    if (obj->handle != NULL)
        return ACL_SUCCESS;
    HC_ERROR("cannot register a new %s: out of handles or memory (%u in use)",
             obj->kind == HC_RT_KIND_STREAM ? "stream" : obj->kind == HC_RT_KIND_EVENT ? "event" : "object", hc_slotmap_live(&registry, (uint32_t)obj->kind));
    return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
}

aclError hc_rt_handle_lookup(const void *handle, hc_rt_kind_t kind, hc_rt_object_t **obj_p)
{
    hc_rt_object_t *obj = hc_slotmap_lookup(&registry, handle, (uint32_t)kind);

    if (obj == NULL)
        return ACL_ERROR_RT_INVALID_HANDLE;
    *obj_p = obj;
    return ACL_SUCCESS;
}

aclError hc_rt_handle_unregister(const void *handle, hc_rt_kind_t kind, hc_rt_object_t **obj_p)
{
    hc_rt_object_t *obj = hc_slotmap_unregister(&registry, handle, (uint32_t)kind);

    if (obj == NULL)
        return ACL_ERROR_RT_INVALID_HANDLE;
    *obj_p = obj;
    return ACL_SUCCESS;
}

/*
 * The thread's cache of borrowed objects (hc_rt_handle_borrow): streams and events, which every
 * launch, record and synchronisation looks up. Each entry holds one reference to its object, taken
 * when it was first looked up, and counts the borrows not yet returned. A borrow of a cached handle
 * only checks that the handle is still live (one load): a destroyed object's handle is not, so the
 * call fails as it would without the cache, and the entry is dropped once nothing on this thread
 * borrows it. An entry is replaced only when nothing borrows it, so an object borrowed by an outer
 * call on this thread (a task that synchronises another stream) is never released under it. What
 * the cache keeps alive after a destroy is the object's memory alone (a destroyed stream has
 * stopped its worker and run its tasks). The references go at thread exit (a key destructor) or when
 * a later borrow needs the entry; a child of fork() forgets the entries untouched, as it forgets the
 * parent's objects. Streams have entries of their own: a program that cycles through many events
 * never evicts its streams, whose cached borrow is what lets an op run at launch
 * (hc_rt_stream_direct_begin looks only there).
 */
#define BORROW_ENTRIES 4 /* of each table */

typedef struct {
    const void *handle; /* NULL: empty */
    hc_rt_object_t *obj;
    atomic_uint_fast64_t *state; /* the handle's slot state word (hc_slotmap_state_of): liveness in one load */
    unsigned borrows;
} borrow_entry_t;

static HC_TLS_FAST borrow_entry_t tls_borrowed[2][BORROW_ENTRIES]; /* streams, then the others */
static HC_TLS_FAST unsigned tls_borrow_next[2]; /* per table, the entry to try replacing first */
static HC_TLS_FAST unsigned tls_borrow_last[2]; /* per table, the entry borrowed last: looked at first */
static pthread_key_t borrow_key;
static pthread_once_t borrow_once = PTHREAD_ONCE_INIT;
static int borrow_key_ok;

static void borrow_clear(borrow_entry_t *e)
{
    if (e->handle != NULL)
        hc_rt_object_unref(e->obj);
    *e = (borrow_entry_t){0};
}

/* Thread exit: the key's value only says the thread has entries. */
static void borrow_thread_exit(void *unused)
{
    (void)unused;
    for (unsigned t = 0; t < 2; t++)
        for (unsigned i = 0; i < BORROW_ENTRIES; i++)
            borrow_clear(&tls_borrowed[t][i]);
}

static unsigned table_of(hc_rt_kind_t kind)
{
    return kind == HC_RT_KIND_STREAM ? 0 : 1;
}

static void borrow_key_create(void)
{
    borrow_key_ok = pthread_key_create(&borrow_key, borrow_thread_exit) == 0;
}

int hc_rt_handle_keep(const void *handle, hc_rt_object_t *obj)
{
    unsigned t = table_of(obj->kind);
    borrow_entry_t *table = tls_borrowed[t];

    pthread_once(&borrow_once, borrow_key_create);
    if (!borrow_key_ok || pthread_setspecific(borrow_key, tls_borrowed) != 0)
        return 0; /* no destructor: the reference would outlive the thread */
    for (unsigned k = 0; k < BORROW_ENTRIES; k++) {
        borrow_entry_t *e = &table[(tls_borrow_next[t] + k) % BORROW_ENTRIES];
        if (e->borrows != 0)
            continue;
        borrow_clear(e);
        *e = (borrow_entry_t){.handle = handle, .obj = obj,
                              .state = hc_slotmap_state_of(&registry, handle, (uint32_t)obj->kind), .borrows = 1};
        tls_borrow_next[t] = (unsigned)(e - table + 1) % BORROW_ENTRIES;
        tls_borrow_last[t] = (unsigned)(e - table);
        return 1;
    }
    return 0;
}

/* The entry of a live cached handle, borrowed; else NULL (a destroyed one's entry is dropped when
 * nothing borrows it: a lookup says why the handle is refused). An entry's handle was live when it
 * was kept, so its state word exists and the handle's kind is the table's. */
static borrow_entry_t *borrow_entry(borrow_entry_t *e, const void *handle)
{
    if (hc_slotmap_state_live(e->state, handle)) {
        e->borrows++;
        return e;
    }
    if (e->borrows == 0)
        borrow_clear(e);
    return NULL;
}

hc_rt_object_t *hc_rt_handle_borrow_cached(const void *handle, hc_rt_kind_t kind)
{
    unsigned t = table_of(kind), last = tls_borrow_last[t];
    borrow_entry_t *table = tls_borrowed[t], *e;

    if (handle == NULL)
        return NULL;
    /* A program launches and synchronises on one stream at a time: its entry first. */
    if (table[last].handle == handle) {
        e = borrow_entry(&table[last], handle);
        return e != NULL ? e->obj : NULL;
    }
    for (unsigned i = 0; i < BORROW_ENTRIES; i++) {
        if (table[i].handle != handle)
            continue;
        tls_borrow_last[t] = i;
        e = borrow_entry(&table[i], handle);
        return e != NULL ? e->obj : NULL;
    }
    return NULL;
}

aclError hc_rt_handle_borrow(const void *handle, hc_rt_kind_t kind, hc_rt_object_t **obj_p)
{
    aclError res;

    if ((*obj_p = hc_rt_handle_borrow_cached(handle, kind)) != NULL)
        return ACL_SUCCESS;
    res = hc_rt_handle_lookup(handle, kind, obj_p);
    if (res == ACL_SUCCESS)
        (void)hc_rt_handle_keep(handle, *obj_p);
    return res;
}

void hc_rt_handle_return(hc_rt_object_t *obj)
{
    unsigned t = table_of(obj->kind);
    borrow_entry_t *last = &tls_borrowed[t][tls_borrow_last[t]];

    if (last->obj == obj && last->borrows > 0 && last->handle != NULL) {
        last->borrows--;
        return;
    }
    for (unsigned i = 0; i < BORROW_ENTRIES; i++) {
        borrow_entry_t *e = &tls_borrowed[t][i];
        if (e->obj == obj && e->borrows > 0 && e->handle != NULL) {
            e->borrows--;
            return;
        }
    }
    hc_rt_object_unref(obj); /* not kept: every entry was borrowed */
}

typedef struct {
    hc_rt_object_t **objs;
    size_t count, cap;
} collect_t;

static void collect_one(void *obj, void *arg)
{
    collect_t *c = arg;

    if (c->count < c->cap) {
        hc_rt_object_ref(obj);
        c->objs[c->count++] = obj;
    }
}

aclError hc_rt_handle_collect(hc_rt_kind_t kind, hc_rt_object_t ***objs_p, size_t *count_p)
{
    /* Objects registered between the count and the walk are left out, as if created after. */
    collect_t c = {.cap = hc_slotmap_live(&registry, (uint32_t)kind)};

    c.objs = malloc((c.cap ? c.cap : 1) * sizeof(*c.objs));
    if (c.objs == NULL) {
        HC_ERROR("cannot list the live handles: out of memory (%zu objects)", c.cap);
        return ACL_ERROR_BAD_ALLOC;
    }
    hc_slotmap_each(&registry, (uint32_t)kind, collect_one, &c);
    *objs_p = c.objs;
    *count_p = c.count;
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
    hc_slotmap_fork_prepare(&registry);
}

void hc_rt_handle_fork_parent(void)
{
    hc_slotmap_fork_parent(&registry);
}

/*
 * In the child: the parent's streams and events are not the child's (their worker threads do not
 * exist here, their locks may be held by threads that do not exist either). Every live slot is
 * freed without touching its object, which stays allocated and unused; the slot remembers the
 * handle it had, so that a call with it can say why it fails (hc_rt_handle_from_parent).
 */
void hc_rt_handle_fork_child(void)
{
    memset(tls_borrowed, 0, sizeof(tls_borrowed)); /* the parent's objects: dropped untouched */
    hc_slotmap_fork_child(&registry);
}

int hc_rt_handle_from_parent(const void *handle, hc_rt_kind_t kind)
{
    return hc_slotmap_from_parent(&registry, handle, (uint32_t)kind);
}
