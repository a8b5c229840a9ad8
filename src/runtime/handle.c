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
#include <stdint.h>
#include <stdlib.h>

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

int hc_rt_handle_live(const void *handle, hc_rt_kind_t kind)
{
    return hc_slotmap_is_live(&registry, handle, (uint32_t)kind);
}

aclError hc_rt_handle_unregister(const void *handle, hc_rt_kind_t kind, hc_rt_object_t **obj_p)
{
    hc_rt_object_t *obj = hc_slotmap_unregister(&registry, handle, (uint32_t)kind);

    if (obj == NULL)
        return ACL_ERROR_RT_INVALID_HANDLE;
    *obj_p = obj;
    return ACL_SUCCESS;
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
    hc_slotmap_fork_child(&registry);
}

int hc_rt_handle_from_parent(const void *handle, hc_rt_kind_t kind)
{
    return hc_slotmap_from_parent(&registry, handle, (uint32_t)kind);
}
