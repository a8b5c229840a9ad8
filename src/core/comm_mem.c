/*
 * Memory a program hands to a communicator: virtual ranges with activated pieces (the zero-copy
 * API hccl_test -z uses) and symmetric windows.
 *
 * On an NPU these calls register memory with the device's DMA engines and exchange it with the
 * peers. On a host there is nothing to register: the pieces are mapped from the runtime's shared
 * arena (aclrtMapMem), so the engine already finds them by address (aclrtHostArenaLookup) and reads
 * them in place. What is left, and what this file does, is the bookkeeping CANN's API promises:
 * validating what is set and activated, refusing what was never set, and answering lookups.
 */
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_comm.h"

typedef struct {
    uintptr_t start;
    size_t size;
} span_t;

typedef struct {
    span_t span;
    aclrtDrvMemHandle handle;
} active_t;

typedef struct hc_comm_window {
    hc_comm_t *comm; /* not a reference: the window dies with the communicator */
    span_t span;
} window_t;

typedef struct hc_comm_mem {
    pthread_mutex_t lock;
    span_t *ranges;
    size_t nranges;
    active_t *actives;
    size_t nactives;
    window_t **windows;
    size_t nwindows;
} hc_comm_mem_t;

/* Every live window, so that HcclCommSymWinDeregister (which gets no communicator) can check a handle
 * without touching freed memory, as comm handles are checked. */
static pthread_mutex_t windows_lock = PTHREAD_MUTEX_INITIALIZER;
static window_t **all_windows;
static size_t nall_windows;

static int span_contains(span_t outer, uintptr_t start, size_t size)
{
    return start >= outer.start && size <= outer.size && start - outer.start <= outer.size - size;
}

static int spans_overlap(span_t a, span_t b)
{
    return a.start < b.start + b.size && b.start < a.start + a.size;
}

/* Grow *array (of elem bytes, *count used) by one slot; 0 on success. */
static int grow(void *array_p, size_t count, size_t elem)
{
    void **array = array_p;
    void *grown = realloc(*array, (count + 1) * elem);

    if (grown == NULL)
        return -1;
    *array = grown;
    return 0;
}

static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER; /* guards every comm->mem pointer */

/* comm's memory state if it was ever created, else NULL. */
static hc_comm_mem_t *mem_if_any(hc_comm_t *comm)
{
    hc_comm_mem_t *mem;

    pthread_mutex_lock(&create_lock);
    mem = comm->mem;
    pthread_mutex_unlock(&create_lock);
    return mem;
}

/* comm's memory state, created on first use; NULL only when out of memory (logged). */
static hc_comm_mem_t *mem_of(hc_comm_t *comm)
{
    hc_comm_mem_t *mem;

    pthread_mutex_lock(&create_lock);
    if (comm->mem == NULL) {
        mem = calloc(1, sizeof(*mem));
        if (mem != NULL && pthread_mutex_init(&mem->lock, NULL) != 0) {
            free(mem);
            mem = NULL;
        }
        comm->mem = mem;
    }
    mem = comm->mem;
    pthread_mutex_unlock(&create_lock);
    if (mem == NULL)
        HC_ERROR("out of memory for the communicator's memory ranges");
    return mem;
}

HcclResult hc_comm_mem_set_range(hc_comm_t *comm, void *base, size_t size)
{
    span_t span = {.start = (uintptr_t)base, .size = size};
    hc_comm_mem_t *mem = mem_of(comm);
    HcclResult res = HCCL_SUCCESS;

    if (mem == NULL)
        return HCCL_E_MEMORY;
    pthread_mutex_lock(&mem->lock);
    for (size_t i = 0; i < mem->nranges && res == HCCL_SUCCESS; i++) {
        if (spans_overlap(mem->ranges[i], span)) {
            HC_ERROR("HcclCommSetMemoryRange: [%p, +%zu) overlaps the range set at %p", base, size,
                     (void *)mem->ranges[i].start);
            res = HCCL_E_PARA;
        }
    }
    if (res == HCCL_SUCCESS && grow(&mem->ranges, mem->nranges, sizeof(span_t)) != 0) {
        HC_ERROR("HcclCommSetMemoryRange: out of memory");
        res = HCCL_E_MEMORY;
    }
    if (res == HCCL_SUCCESS)
        mem->ranges[mem->nranges++] = span;
    pthread_mutex_unlock(&mem->lock);
    return res;
}

HcclResult hc_comm_mem_unset_range(hc_comm_t *comm, void *base)
{
    hc_comm_mem_t *mem = mem_if_any(comm);
    HcclResult res = HCCL_SUCCESS;
    size_t i = 0;

    if (mem == NULL) {
        HC_ERROR("HcclCommUnsetMemoryRange: HcclCommSetMemoryRange was never called on this communicator");
        return HCCL_E_PARA;
    }
    pthread_mutex_lock(&mem->lock);
    while (i < mem->nranges && mem->ranges[i].start != (uintptr_t)base)
        i++;
    if (i == mem->nranges) {
        HC_ERROR("HcclCommUnsetMemoryRange: %p is not the base of a range set with HcclCommSetMemoryRange", base);
        res = HCCL_E_PARA;
    }
    for (size_t a = 0; a < mem->nactives && res == HCCL_SUCCESS; a++) {
        if (span_contains(mem->ranges[i], mem->actives[a].span.start, mem->actives[a].span.size)) {
            HC_ERROR("HcclCommUnsetMemoryRange: memory at %p inside the range is still active; "
                     "HcclCommDeactivateCommMemory it first", (void *)mem->actives[a].span.start);
            res = HCCL_E_PARA;
        }
    }
    if (res == HCCL_SUCCESS)
        mem->ranges[i] = mem->ranges[--mem->nranges];
    pthread_mutex_unlock(&mem->lock);
    return res;
}

/* Is [ptr, ptr+size) inside a set range, and clear of every active piece? Lock held. */
static HcclResult check_new_active(const hc_comm_mem_t *mem, span_t span)
{
    int inside = 0;

    for (size_t i = 0; i < mem->nranges && !inside; i++)
        inside = span_contains(mem->ranges[i], span.start, span.size);
    if (!inside) {
        HC_ERROR("HcclCommActivateCommMemory: [%p, +%zu) is not inside a range set with HcclCommSetMemoryRange",
                 (void *)span.start, span.size);
        return HCCL_E_PARA;
    }
    for (size_t a = 0; a < mem->nactives; a++) {
        if (spans_overlap(mem->actives[a].span, span)) {
            HC_ERROR("HcclCommActivateCommMemory: [%p, +%zu) overlaps memory activated at %p", (void *)span.start,
                     span.size, (void *)mem->actives[a].span.start);
            return HCCL_E_PARA;
        }
    }
    return HCCL_SUCCESS;
}

HcclResult hc_comm_mem_activate(hc_comm_t *comm, void *ptr, size_t size, aclrtDrvMemHandle handle)
{
    span_t span = {.start = (uintptr_t)ptr, .size = size};
    hc_comm_mem_t *mem = mem_if_any(comm);
    HcclResult res;

    if (mem == NULL) {
        HC_ERROR("HcclCommActivateCommMemory: HcclCommSetMemoryRange was never called on this communicator");
        return HCCL_E_PARA;
    }
    /* The runtime knows the mappings: the piece must be mapped, whole, to this handle. */
    if (aclrtHostMemMapped(ptr, size, handle) != ACL_SUCCESS) {
        HC_ERROR("HcclCommActivateCommMemory: [%p, +%zu) is not mapped to physical allocation %p with aclrtMapMem",
                 ptr, size, handle);
        return HCCL_E_PARA;
    }
    pthread_mutex_lock(&mem->lock);
    res = check_new_active(mem, span);
    if (res == HCCL_SUCCESS && grow(&mem->actives, mem->nactives, sizeof(active_t)) != 0) {
        HC_ERROR("HcclCommActivateCommMemory: out of memory");
        res = HCCL_E_MEMORY;
    }
    if (res == HCCL_SUCCESS)
        mem->actives[mem->nactives++] = (active_t){.span = span, .handle = handle};
    pthread_mutex_unlock(&mem->lock);
    return res;
}

HcclResult hc_comm_mem_deactivate(hc_comm_t *comm, void *ptr)
{
    hc_comm_mem_t *mem = mem_if_any(comm);
    HcclResult res = HCCL_E_PARA;

    if (mem != NULL) {
        pthread_mutex_lock(&mem->lock);
        for (size_t a = 0; a < mem->nactives; a++) {
            if (mem->actives[a].span.start == (uintptr_t)ptr) {
                mem->actives[a] = mem->actives[--mem->nactives];
                res = HCCL_SUCCESS;
                break;
            }
        }
        pthread_mutex_unlock(&mem->lock);
    }
    if (res != HCCL_SUCCESS)
        HC_ERROR("HcclCommDeactivateCommMemory: nothing was activated at %p on this communicator", ptr);
    return res;
}

/* ---- symmetric windows ------------------------------------------------------------------------ */

/* Enter win in its communicator's list and the global one; lock of mem held. */
static HcclResult add_window(hc_comm_mem_t *mem, window_t *win)
{
    HcclResult res = HCCL_SUCCESS;

    if (grow(&mem->windows, mem->nwindows, sizeof(window_t *)) != 0)
        return HCCL_E_MEMORY;
    pthread_mutex_lock(&windows_lock);
    if (grow(&all_windows, nall_windows, sizeof(window_t *)) != 0)
        res = HCCL_E_MEMORY;
    else
        all_windows[nall_windows++] = win;
    pthread_mutex_unlock(&windows_lock);
    if (res == HCCL_SUCCESS)
        mem->windows[mem->nwindows++] = win;
    return res;
}

HcclResult hc_comm_win_register(hc_comm_t *comm, void *addr, uint64_t size, HcclCommSymWindow *win_p)
{
    uint64_t max_bytes = comm->settings.sym_win_max_gb << 30;
    span_t span = {.start = (uintptr_t)addr, .size = (size_t)size};
    hc_comm_mem_t *mem;
    window_t *win;
    HcclResult res = HCCL_SUCCESS;

    if (size > max_bytes) {
        HC_ERROR("HcclCommSymWinRegister: %llu bytes is more than the %llu GB per rank the communicator reserves "
                 "for windows (HcclCommConfig.hcclSymWinMaxMemSizePerRank)", (unsigned long long)size,
                 (unsigned long long)comm->settings.sym_win_max_gb);
        return HCCL_E_PARA;
    }
    mem = mem_of(comm);
    win = calloc(1, sizeof(*win));
    if (mem == NULL || win == NULL) {
        free(win);
        return HCCL_E_MEMORY;
    }
    *win = (window_t){.comm = comm, .span = span};
    pthread_mutex_lock(&mem->lock);
    for (size_t i = 0; i < mem->nwindows && res == HCCL_SUCCESS; i++) {
        if (spans_overlap(mem->windows[i]->span, span)) {
            HC_ERROR("HcclCommSymWinRegister: [%p, +%llu) overlaps the window registered at %p", addr,
                     (unsigned long long)size, (void *)mem->windows[i]->span.start);
            res = HCCL_E_PARA;
        }
    }
    if (res == HCCL_SUCCESS)
        res = add_window(mem, win);
    pthread_mutex_unlock(&mem->lock);
    if (res != HCCL_SUCCESS) {
        if (res == HCCL_E_MEMORY)
            HC_ERROR("HcclCommSymWinRegister: out of memory");
        free(win);
        return res;
    }
    *win_p = win;
    return HCCL_SUCCESS;
}

/* Take win out of the global list if it is there; 0 when it was. */
static int take_window(const window_t *win)
{
    int found = -1;

    pthread_mutex_lock(&windows_lock);
    for (size_t i = 0; i < nall_windows; i++) {
        if (all_windows[i] == win) {
            all_windows[i] = all_windows[--nall_windows];
            found = 0;
            break;
        }
    }
    pthread_mutex_unlock(&windows_lock);
    return found;
}

HcclResult hc_comm_win_deregister(HcclCommSymWindow handle)
{
    window_t *win = handle;
    hc_comm_mem_t *mem;

    if (take_window(win) != 0) {
        HC_ERROR("HcclCommSymWinDeregister: %p is not a registered window (never registered, deregistered "
                 "already, or its communicator was destroyed)", handle);
        return HCCL_E_PARA;
    }
    mem = mem_if_any(win->comm);
    pthread_mutex_lock(&mem->lock);
    for (size_t i = 0; i < mem->nwindows; i++) {
        if (mem->windows[i] == win) {
            mem->windows[i] = mem->windows[--mem->nwindows];
            break;
        }
    }
    pthread_mutex_unlock(&mem->lock);
    free(win);
    return HCCL_SUCCESS;
}

HcclResult hc_comm_win_get(hc_comm_t *comm, void *ptr, size_t size, HcclCommSymWindow *win_p, size_t *offset_p)
{
    hc_comm_mem_t *mem = mem_if_any(comm);
    HcclResult res = HCCL_E_NOT_FOUND;

    if (mem != NULL) {
        pthread_mutex_lock(&mem->lock);
        for (size_t i = 0; i < mem->nwindows; i++) {
            if (span_contains(mem->windows[i]->span, (uintptr_t)ptr, size)) {
                *win_p = mem->windows[i];
                *offset_p = (size_t)((uintptr_t)ptr - mem->windows[i]->span.start);
                res = HCCL_SUCCESS;
                break;
            }
        }
        pthread_mutex_unlock(&mem->lock);
    }
    if (res != HCCL_SUCCESS)
        HC_ERROR("HcclCommSymWinGet: no window of this communicator contains [%p, +%zu)", ptr, size);
    return res;
}

void hc_comm_mem_free(hc_comm_t *comm)
{
    hc_comm_mem_t *mem = mem_if_any(comm);

    if (mem == NULL)
        return;
    for (size_t i = 0; i < mem->nwindows; i++) {
        (void)take_window(mem->windows[i]);
        free(mem->windows[i]);
    }
    free(mem->windows);
    free(mem->actives);
    free(mem->ranges);
    pthread_mutex_destroy(&mem->lock);
    free(mem);
    comm->mem = NULL;
}
