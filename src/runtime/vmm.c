/*
 * Virtual memory management: reserve address space, allocate physical memory, map one onto the
 * other (CANN's aclrtReserveMemAddress / aclrtMallocPhysical / aclrtMapMem family, which
 * hccl_test -z and the symmetric-memory samples use).
 *
 * On a host this is real memory management, not bookkeeping:
 * - a reservation is an inaccessible anonymous mapping (PROT_NONE, MAP_NORESERVE): address space
 *   that nothing else can take, and that faults if touched before it is mapped;
 * - a physical allocation is a page-aligned block of the shared arena's memfd (arena.c);
 * - a mapping is that block mapped again, MAP_SHARED | MAP_FIXED, at the reserved address; unmapping
 *   puts the inaccessible mapping back.
 * Because the physical memory is the arena's, mapped memory is what aclrtMalloc memory is to the
 * collectives: aclrtHostArenaLookup finds it (hc_rt_vmm_lookup), and peers read it in place.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hc_log.h"
#include "hc_rt.h"

#define RECOMMENDED_GRANULARITY (2u << 20) /* a transparent huge page */

typedef struct {
    hc_rt_object_t base; /* first: the registry holds allocations by their base */
    void *arena_ptr;     /* the block in the arena's own mapping */
    int fd;
    uint64_t file_offset;
    size_t size;
} physmem_t;

typedef struct {
    uintptr_t start;
    size_t size;
    unsigned mappings;   /* live mappings inside: a reservation with mappings cannot be released */
} reservation_t;

typedef struct {
    uintptr_t start;
    size_t size;
    physmem_t *phys;     /* holds a reference */
    uint64_t file_offset; /* of the mapping's first byte */
} mapping_t;

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static reservation_t *reservations;
static size_t nreservations;
static mapping_t *mappings;
static size_t nmappings;
static atomic_size_t live_mappings; /* so that lookups of ordinary buffers skip the lock */

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static int grow(void *array_p, size_t count, size_t elem)
{
    void **array = array_p;
    void *grown = realloc(*array, (count + 1) * elem);

    if (grown == NULL)
        return -1;
    *array = grown;
    return 0;
}

static int contains(uintptr_t start, size_t size, uintptr_t p, size_t len)
{
    return p >= start && len <= size && p - start <= size - len;
}

/* The reservation containing [p, p+len), or NULL; lock held. */
static reservation_t *find_reservation(uintptr_t p, size_t len)
{
    for (size_t i = 0; i < nreservations; i++)
        if (contains(reservations[i].start, reservations[i].size, p, len))
            return &reservations[i];
    return NULL;
}

/* The mapping containing [p, p+len), or NULL; lock held. */
static mapping_t *find_mapping(uintptr_t p, size_t len)
{
    for (size_t i = 0; i < nmappings; i++)
        if (contains(mappings[i].start, mappings[i].size, p, len))
            return &mappings[i];
    return NULL;
}

HC_RT_EXPORT aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop, aclrtMemGranularityOptions option,
                                                       size_t *granularity)
{
    if (prop == NULL || granularity == NULL) {
        HC_ERROR("aclrtMemGetAllocationGranularity: %s is NULL", prop == NULL ? "prop" : "granularity");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    if (option == ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM) {
        *granularity = page_size();
    } else if (option == ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
        *granularity = RECOMMENDED_GRANULARITY;
    } else {
        HC_ERROR("aclrtMemGetAllocationGranularity: option %d is not an aclrtMemGranularityOptions", (int)option);
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    return ACL_SUCCESS;
}

/* Inaccessible address space of size bytes at a multiple of align (a power of two >= the page). */
static void *reserve_aligned(size_t size, size_t align, void *hint)
{
    size_t extra = align > page_size() ? align : 0;
    uint8_t *base = mmap(hint, size + extra, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    uintptr_t start;

    if (base == MAP_FAILED || extra == 0)
        return base == MAP_FAILED ? NULL : base;
    start = ((uintptr_t)base + align - 1) & ~((uintptr_t)align - 1);
    if (start > (uintptr_t)base)
        munmap(base, start - (uintptr_t)base);
    if ((uintptr_t)base + extra > start)
        munmap((void *)(start + size), (uintptr_t)base + extra - start);
    return (void *)start;
}

static aclError check_reserve(void **virPtr, size_t size, size_t alignment, uint64_t flags)
{
    if (virPtr == NULL || size == 0) {
        HC_ERROR("aclrtReserveMemAddress: %s", virPtr == NULL ? "virPtr is NULL" : "size is 0");
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((alignment & (alignment - 1)) != 0) {
        HC_ERROR("aclrtReserveMemAddress: alignment %zu is not 0 or a power of two", alignment);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (flags > 1) {
        HC_ERROR("aclrtReserveMemAddress: flags %llu is not 0 or 1", (unsigned long long)flags);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

/* size is rounded up to whole pages; flags (the page type) and expectPtr are hints a host may
 * ignore: the address returned is what counts, as with CANN. */
HC_RT_EXPORT aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr,
                                             uint64_t flags)
{
    size_t bytes = (size + page_size() - 1) & ~(page_size() - 1);
    void *base;
    aclError res = check_reserve(virPtr, size, alignment, flags);

    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    base = reserve_aligned(bytes, alignment, expectPtr);
    if (base == NULL) {
        HC_ERROR("aclrtReserveMemAddress: cannot reserve %zu bytes of address space: %s", bytes, strerror(errno));
        return hc_rt_ret(ACL_ERROR_RT_MEMORY_ALLOCATION);
    }
    pthread_mutex_lock(&vmm_lock);
    if (grow(&reservations, nreservations, sizeof(*reservations)) != 0) {
        pthread_mutex_unlock(&vmm_lock);
        munmap(base, bytes);
        HC_ERROR("aclrtReserveMemAddress: out of memory");
        return hc_rt_ret(ACL_ERROR_BAD_ALLOC);
    }
    reservations[nreservations++] = (reservation_t){.start = (uintptr_t)base, .size = bytes};
    pthread_mutex_unlock(&vmm_lock);
    *virPtr = base;
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtReleaseMemAddress(void *virPtr)
{
    aclError res = ACL_ERROR_INVALID_PARAM;
    reservation_t released = {0};

    pthread_mutex_lock(&vmm_lock);
    for (size_t i = 0; i < nreservations; i++) {
        if (reservations[i].start != (uintptr_t)virPtr)
            continue;
        if (reservations[i].mappings == 0) {
            released = reservations[i];
            reservations[i] = reservations[--nreservations];
            res = ACL_SUCCESS;
        } else {
            released.mappings = reservations[i].mappings;
        }
        break;
    }
    pthread_mutex_unlock(&vmm_lock);
    if (res == ACL_SUCCESS)
        munmap((void *)released.start, released.size);
    else if (released.mappings != 0)
        HC_ERROR("aclrtReleaseMemAddress: %u mappings are still inside the reservation at %p; aclrtUnmapMem them "
                 "first", released.mappings, virPtr);
    else
        HC_ERROR("aclrtReleaseMemAddress: %p is not the start of a reservation (aclrtReserveMemAddress)", virPtr);
    return hc_rt_ret(res);
}

static void physmem_release(hc_rt_object_t *obj)
{
    physmem_t *phys = (physmem_t *)obj;

    hc_rt_arena_free_pages(phys->arena_ptr);
    free(phys);
}

static aclError check_prop(const aclrtPhysicalMemProp *prop)
{
    if (prop->handleType != ACL_MEM_HANDLE_TYPE_NONE && prop->handleType != ACL_MEM_HANDLE_TYPE_POSIX) {
        HC_ERROR("aclrtMallocPhysical: handle type %d is not an aclrtMemHandleType", (int)prop->handleType);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (prop->allocationType != ACL_MEM_ALLOCATION_TYPE_PINNED || (unsigned)prop->memAttr > ACL_MEM_P2P_HUGE1G) {
        HC_ERROR("aclrtMallocPhysical: allocation type %d / memory attribute %d is not valid",
                 (int)prop->allocationType, (int)prop->memAttr);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (prop->location.type == ACL_MEM_LOCATION_TYPE_DEVICE)
        return hc_rt_device_check(prop->location.id > INT32_MAX ? -1 : (int32_t)prop->location.id);
    if (prop->location.type != ACL_MEM_LOCATION_TYPE_HOST && prop->location.type != ACL_MEM_LOCATION_TYPE_HOST_NUMA) {
        HC_ERROR("aclrtMallocPhysical: location type %d is not a device or the host", (int)prop->location.type);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

static aclError new_physmem(size_t size, physmem_t **phys_p)
{
    physmem_t *phys = calloc(1, sizeof(*phys));
    aclError res;

    if (phys == NULL)
        return ACL_ERROR_BAD_ALLOC;
    res = hc_rt_arena_alloc_pages(size, &phys->arena_ptr, &phys->fd, &phys->file_offset);
    if (res == ACL_SUCCESS && phys->fd < 0) {
        /* A private arena (no memfd) cannot be mapped a second time. */
        hc_rt_arena_free_pages(phys->arena_ptr);
        res = ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    if (res != ACL_SUCCESS) {
        free(phys);
        return res;
    }
    phys->size = size;
    phys->base.kind = HC_RT_KIND_PHYSMEM;
    phys->base.release = physmem_release;
    atomic_init(&phys->base.refs, 1);
    res = hc_rt_handle_register(&phys->base);
    if (res != ACL_SUCCESS)
        physmem_release(&phys->base);
    else
        *phys_p = phys;
    return res;
}

HC_RT_EXPORT aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size, const aclrtPhysicalMemProp *prop,
                                          uint64_t flags)
{
    physmem_t *phys;
    aclError res;

    if (handle == NULL || prop == NULL || size == 0 || size % page_size() != 0 || flags != 0) {
        HC_ERROR("aclrtMallocPhysical: %s", handle == NULL ? "handle is NULL" : prop == NULL ? "prop is NULL" :
                 flags != 0 ? "flags must be 0" : "size must be a positive multiple of the granularity (the page size)");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = check_prop(prop);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    res = new_physmem(size, &phys);
    if (res == ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
        HC_ERROR("aclrtMallocPhysical: the memory arena is private (memfd_create failed), so it cannot be mapped");
    else if (res != ACL_SUCCESS)
        HC_ERROR("aclrtMallocPhysical: cannot allocate %zu bytes from the memory arena (HOSTCCL_ARENA_BYTES)", size);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res == ACL_ERROR_BAD_ALLOC ? ACL_ERROR_RT_MEMORY_ALLOCATION : res);
    *handle = phys->base.handle;
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtFreePhysical(aclrtDrvMemHandle handle)
{
    hc_rt_object_t *obj;

    if (hc_rt_handle_unregister(handle, HC_RT_KIND_PHYSMEM, &obj) != ACL_SUCCESS) {
        HC_ERROR("aclrtFreePhysical: %p is not a live physical allocation (never allocated, or freed twice)", handle);
        return hc_rt_ret(ACL_ERROR_RT_INVALID_HANDLE);
    }
    hc_rt_object_unref(obj); /* the memory goes with the last mapping */
    return ACL_SUCCESS;
}

/* Checks of aclrtMapMem that need the lock: inside one reservation, clear of other mappings. */
static aclError check_map_target(uintptr_t start, size_t size, reservation_t **res_p)
{
    *res_p = find_reservation(start, size);
    if (*res_p == NULL) {
        HC_ERROR("aclrtMapMem: [%p, +%zu) is not inside one reservation (aclrtReserveMemAddress)", (void *)start,
                 size);
        return ACL_ERROR_INVALID_PARAM;
    }
    for (size_t i = 0; i < nmappings; i++) {
        if (start < mappings[i].start + mappings[i].size && mappings[i].start < start + size) {
            HC_ERROR("aclrtMapMem: [%p, +%zu) overlaps the mapping at %p", (void *)start, size,
                     (void *)mappings[i].start);
            return ACL_ERROR_INVALID_PARAM;
        }
    }
    return grow(&mappings, nmappings, sizeof(*mappings)) == 0 ? ACL_SUCCESS : ACL_ERROR_BAD_ALLOC;
}

static aclError map_locked(uintptr_t start, size_t size, size_t offset, physmem_t *phys)
{
    reservation_t *reservation;
    aclError res = check_map_target(start, size, &reservation);
    void *mapped;

    if (res != ACL_SUCCESS)
        return res;
    mapped = mmap((void *)start, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, phys->fd,
                  (off_t)(phys->file_offset + offset));
    if (mapped == MAP_FAILED) {
        HC_ERROR("aclrtMapMem: cannot map %zu bytes at %p: %s", size, (void *)start, strerror(errno));
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    hc_rt_object_ref(&phys->base);
    mappings[nmappings++] = (mapping_t){.start = start, .size = size, .phys = phys,
                                        .file_offset = phys->file_offset + offset};
    reservation->mappings++;
    atomic_fetch_add(&live_mappings, 1);
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle, uint64_t flags)
{
    size_t page = page_size();
    hc_rt_object_t *obj;
    physmem_t *phys;
    aclError res;

    if (virPtr == NULL || size == 0 || flags != 0 || (uintptr_t)virPtr % page != 0 || size % page != 0 ||
        offset % page != 0) {
        HC_ERROR("aclrtMapMem: %s", virPtr == NULL ? "virPtr is NULL" : flags != 0 ? "flags must be 0" :
                 "virPtr, size and offset must be positive multiples of the granularity (the page size)");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    if (hc_rt_handle_lookup(handle, HC_RT_KIND_PHYSMEM, &obj) != ACL_SUCCESS) {
        HC_ERROR("aclrtMapMem: %p is not a live physical allocation", handle);
        return hc_rt_ret(ACL_ERROR_RT_INVALID_HANDLE);
    }
    phys = (physmem_t *)obj;
    if (offset > phys->size || size > phys->size - offset) {
        HC_ERROR("aclrtMapMem: [%zu, +%zu) is beyond the %zu bytes of allocation %p", offset, size, phys->size, handle);
        res = ACL_ERROR_INVALID_PARAM;
    } else {
        pthread_mutex_lock(&vmm_lock);
        res = map_locked((uintptr_t)virPtr, size, offset, phys);
        pthread_mutex_unlock(&vmm_lock);
    }
    hc_rt_object_unref(obj);
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtUnmapMem(void *virPtr)
{
    mapping_t gone = {0};
    aclError res = ACL_ERROR_INVALID_PARAM;

    pthread_mutex_lock(&vmm_lock);
    for (size_t i = 0; i < nmappings; i++) {
        if (mappings[i].start != (uintptr_t)virPtr)
            continue;
        gone = mappings[i];
        /* Back to reserved: inaccessible, and still ours. */
        if (mmap(virPtr, gone.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
            MAP_FAILED) {
            HC_ERROR("aclrtUnmapMem: cannot unmap %zu bytes at %p: %s", gone.size, virPtr, strerror(errno));
            res = ACL_ERROR_RT_INTERNAL_ERROR;
            break;
        }
        mappings[i] = mappings[--nmappings];
        find_reservation(gone.start, gone.size)->mappings--;
        atomic_fetch_sub(&live_mappings, 1);
        res = ACL_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&vmm_lock);
    if (res == ACL_SUCCESS)
        hc_rt_object_unref(&gone.phys->base);
    else if (gone.phys == NULL)
        HC_ERROR("aclrtUnmapMem: %p is not the start of a mapping (aclrtMapMem)", virPtr);
    return hc_rt_ret(res);
}

aclError hc_rt_vmm_lookup(const void *ptr, size_t len, int *fd_p, uint64_t *offset_p)
{
    const mapping_t *m;
    aclError res = ACL_ERROR_INVALID_PARAM;

    if (atomic_load(&live_mappings) == 0)
        return res;
    pthread_mutex_lock(&vmm_lock);
    m = find_mapping((uintptr_t)ptr, len);
    if (m != NULL) {
        *fd_p = m->phys->fd;
        *offset_p = m->file_offset + ((uintptr_t)ptr - m->start);
        res = ACL_SUCCESS;
    }
    pthread_mutex_unlock(&vmm_lock);
    return res;
}

HC_RT_EXPORT aclError aclrtHostMemReserved(const void *ptr, size_t len)
{
    aclError res;

    pthread_mutex_lock(&vmm_lock);
    res = find_reservation((uintptr_t)ptr, len) != NULL ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
    pthread_mutex_unlock(&vmm_lock);
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtHostMemMapped(const void *ptr, size_t len, void *handle)
{
    const mapping_t *m;
    aclError res;

    pthread_mutex_lock(&vmm_lock);
    m = find_mapping((uintptr_t)ptr, len);
    res = m != NULL && m->phys->base.handle == handle ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
    pthread_mutex_unlock(&vmm_lock);
    return hc_rt_ret(res);
}
