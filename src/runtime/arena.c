/*
 * "Device" memory: a per-process shared arena (DESIGN.md 2).
 *
 * One memfd, sized HOSTCCL_ARENA_BYTES (default 64 GiB) and mapped once with MAP_NORESERVE: only
 * the pages a program touches are ever allocated, and because the memory is a file, a peer process
 * on the same host can map the very pages a rank computes in (aclrtHostArenaLookup gives it the fd
 * and the offset). Collectives on aclrtMalloc buffers are then zero-copy, the way HCCS peers read
 * device memory.
 *
 * The allocator is deliberately simple: a first-fit list of blocks in address order that covers
 * the whole arena, kept in an array outside the arena (so no stray write into "device" memory can
 * corrupt it), with neighbouring free blocks merged on every free. Programs allocate their buffers
 * at start-up and keep them, so allocation speed matters far less than never fragmenting and never
 * crashing on a bad free. Blocks are 512-byte aligned, which satisfies every SIMD kernel and
 * matches CANN's alignment guarantee.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

#include "hc_config.h"
#include "hc_log.h"
#include "hc_rt.h"

/*
 * Under valgrind the arena is marked inaccessible except for live allocations. Otherwise memcheck's
 * leak scan reads the whole mapping, and reading a memfd's holes allocates its pages: tens of GiB.
 * Allocations are marked defined, not undefined: peers on the host write into them. The client
 * requests cost a few instructions outside valgrind and are absent when the header is.
 */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define HAVE_MEMCHECK_H 1
#endif
#endif
#ifndef HAVE_MEMCHECK_H
#define VALGRIND_MAKE_MEM_NOACCESS(addr, len) ((void)(addr), (void)(len))
#define VALGRIND_MAKE_MEM_DEFINED(addr, len) ((void)(addr), (void)(len))
#endif

#define BLOCK_ALIGN 512u
/* Freed blocks this large go back to the kernel; smaller ones are likely to be reused soon, and
 * punching them would only trade a page fault for a syscall. */
#define GIVE_BACK_MIN (2ull << 20)
/* When the configured size cannot be mapped (ulimit -v, valgrind), halve it down to this. */
#define SMALLEST_FALLBACK (256ull << 20)

typedef struct {
    uint64_t offset;
    uint64_t size;      /* a multiple of BLOCK_ALIGN */
    uint64_t requested; /* the size aclrtMalloc was asked for; 0 when the block is free */
    int used;
} block_t;

typedef struct {
    int fd;                /* the memfd; -1 when the arena fell back to private memory */
    unsigned char *base;   /* NULL until the first aclrtMalloc */
    uint64_t bytes;
    block_t *blocks;       /* address order, covering [0, bytes) without gaps */
    size_t count, capacity;
} arena_t;

/*
 * After fork() the child must not share the parent's arena: a block the child allocated would be
 * free in the parent's list too, and the parent's next aclrtMalloc would hand it out with the
 * child's bytes in it. So the child remaps the parent's arena privately (copy-on-write: the child
 * keeps reading the buffers it inherited, and its writes stay its own), keeps its block list only
 * so that those buffers can be freed, and creates an arena of its own for new allocations
 * (hc_rt_arena_fork_child). Each fork in a line of forks adds one such inherited arena.
 */
#define INHERITED_MAX 8

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER; /* guards everything below */
static arena_t arena = {.fd = -1};
static arena_t inherited[INHERITED_MAX];
static size_t ninherited;

/* Map `bytes`, halving while the mapping fails (an address-space limit: ulimit -v, valgrind).
 * Returns the base and the size mapped through *bytes_p, or MAP_FAILED with errno in *err_p. */
static unsigned char *map_shrinking(int fd, uint64_t *bytes_p, int *err_p)
{
    int flags = fd >= 0 ? MAP_SHARED | MAP_NORESERVE : MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    uint64_t bytes = *bytes_p;
    void *base;

    for (;;) {
        base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
        if (base != MAP_FAILED || bytes / 2 < SMALLEST_FALLBACK)
            break;
        bytes /= 2;
    }
    *err_p = base == MAP_FAILED ? errno : 0;
    *bytes_p = bytes;
    return base;
}

/* Create the arena on first use; called with the lock held. errno is saved at once each time:
 * the log call itself may change it. */
static aclError map_arena(void)
{
    uint64_t wanted = (uint64_t)hc_config_int(HC_CFG_ARENA_BYTES) & ~(uint64_t)(BLOCK_ALIGN - 1);
    uint64_t bytes = wanted;
    int fd = memfd_create("hostccl-arena", MFD_CLOEXEC);
    int err = errno;

    if (fd < 0)
        HC_WARN("memfd_create failed (%s): aclrtMalloc memory will be private to this process, so "
                "collectives on it take the copy path", strerror(err));
    if (fd >= 0 && ftruncate(fd, (off_t)bytes) != 0) {
        err = errno;
        HC_ERROR("cannot size the memory arena to %llu bytes: %s (HOSTCCL_ARENA_BYTES)",
                 (unsigned long long)bytes, strerror(err));
        close(fd);
        return ACL_ERROR_BAD_ALLOC;
    }
    arena.base = map_shrinking(fd, &bytes, &err);
    if (arena.base == MAP_FAILED) {
        HC_ERROR("cannot map the memory arena, not even %llu bytes: %s (HOSTCCL_ARENA_BYTES)",
                 (unsigned long long)bytes, strerror(err));
        arena.base = NULL;
        if (fd >= 0)
            close(fd);
        return ACL_ERROR_BAD_ALLOC;
    }
    if (bytes != wanted)
        HC_WARN("the memory arena is %llu bytes, not the %llu of HOSTCCL_ARENA_BYTES: the address "
                "space limit is lower", (unsigned long long)bytes, (unsigned long long)wanted);
    arena.fd = fd;
    arena.bytes = bytes;
    VALGRIND_MAKE_MEM_NOACCESS(arena.base, bytes);
    return ACL_SUCCESS;
}

/* Room for n more blocks; called with the lock held. */
static aclError reserve_room(size_t n)
{
    size_t capacity;
    block_t *grown;

    if (arena.count + n <= arena.capacity)
        return ACL_SUCCESS;
    capacity = arena.capacity ? arena.capacity * 2 : 64;
    grown = realloc(arena.blocks, capacity * sizeof(*grown));
    if (grown == NULL)
        return ACL_ERROR_BAD_ALLOC;
    arena.blocks = grown;
    arena.capacity = capacity;
    return ACL_SUCCESS;
}

static aclError reserve_block(void)
{
    return reserve_room(1);
}

static void insert_block(size_t at, block_t block)
{
    memmove(&arena.blocks[at + 1], &arena.blocks[at], (arena.count - at) * sizeof(block_t));
    arena.blocks[at] = block;
    arena.count++;
}

static void erase_block(arena_t *a, size_t at)
{
    memmove(&a->blocks[at], &a->blocks[at + 1], (a->count - at - 1) * sizeof(block_t));
    a->count--;
}

/* The index of the block of `a` containing offset (offset < a->bytes). */
static size_t find_block(const arena_t *a, uint64_t offset)
{
    size_t lo = 0, hi = a->count;

    /* Invariant: blocks[lo].offset <= offset < blocks[hi].offset (hi == count: the arena's end). */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;

        if (a->blocks[mid].offset <= offset)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static uint64_t largest_free(void)
{
    uint64_t largest = 0;

    for (size_t i = 0; i < arena.count; i++)
        if (!arena.blocks[i].used && arena.blocks[i].size > largest)
            largest = arena.blocks[i].size;
    return largest;
}

/* Make sure the arena and its block list exist; called with the lock held. */
static aclError ensure_arena(void)
{
    aclError res;

    if (arena.base != NULL)
        return ACL_SUCCESS;
    res = map_arena();
    if (res != ACL_SUCCESS)
        return res;
    res = reserve_block();
    if (res != ACL_SUCCESS) {
        HC_ERROR("cannot create the memory arena's block list: out of memory");
        return res;
    }
    arena.blocks[0] = (block_t){.offset = 0, .size = arena.bytes, .requested = 0, .used = 0};
    arena.count = 1;
    return ACL_SUCCESS;
}

/* First fit; called with the lock held. */
static aclError alloc_block(size_t size, void **ptr_p)
{
    uint64_t need;

    if ((uint64_t)size > arena.bytes)
        return ACL_ERROR_BAD_ALLOC;
    need = ((uint64_t)size + BLOCK_ALIGN - 1) & ~(uint64_t)(BLOCK_ALIGN - 1);
    /* A split adds one block; reserving first keeps the list consistent if that fails. */
    if (reserve_block() != ACL_SUCCESS)
        return ACL_ERROR_BAD_ALLOC;
    for (size_t i = 0; i < arena.count; i++) {
        block_t *b = &arena.blocks[i];

        if (b->used || b->size < need)
            continue;
        if (b->size > need) {
            block_t rest = {.offset = b->offset + need, .size = b->size - need, .requested = 0, .used = 0};

            b->size = need;
            insert_block(i + 1, rest);
            b = &arena.blocks[i];
        }
        b->used = 1;
        b->requested = size;
        *ptr_p = arena.base + b->offset;
        VALGRIND_MAKE_MEM_DEFINED(*ptr_p, size);
        return ACL_SUCCESS;
    }
    return ACL_ERROR_BAD_ALLOC;
}

/*
 * First fit at an alignment (a power of two, a multiple of BLOCK_ALIGN): the block may start inside
 * a free block, leaving a free block before it. Called with the lock held.
 */
static aclError alloc_aligned(size_t size, uint64_t align, uint64_t *offset_p)
{
    uint64_t need = ((uint64_t)size + BLOCK_ALIGN - 1) & ~(uint64_t)(BLOCK_ALIGN - 1);

    if ((uint64_t)size > arena.bytes || reserve_room(2) != ACL_SUCCESS) /* up to two splits */
        return ACL_ERROR_BAD_ALLOC;
    for (size_t i = 0; i < arena.count; i++) {
        block_t *b = &arena.blocks[i];
        uint64_t start = (b->offset + align - 1) & ~(align - 1);

        if (b->used || start + need > b->offset + b->size)
            continue;
        if (start > b->offset) {
            block_t front = {.offset = b->offset, .size = start - b->offset};

            b->offset = start;
            b->size -= front.size;
            insert_block(i, front);
            i++;
            b = &arena.blocks[i];
        }
        if (b->size > need) {
            insert_block(i + 1, (block_t){.offset = b->offset + need, .size = b->size - need});
            b = &arena.blocks[i];
            b->size = need;
        }
        b->used = 1;
        b->requested = size;
        VALGRIND_MAKE_MEM_DEFINED(arena.base + b->offset, size);
        *offset_p = b->offset;
        return ACL_SUCCESS;
    }
    return ACL_ERROR_BAD_ALLOC;
}

/* Return the whole pages of a large freed block to the kernel (they read as zero afterwards). */
static void give_back(arena_t *a, uint64_t offset, uint64_t size)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = (offset + page - 1) & ~(page - 1);
    uint64_t end = (offset + size) & ~(page - 1);
    int failed, err;

    if (size < GIVE_BACK_MIN || end <= start)
        return;
    if (a->fd >= 0)
        failed = fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start, (off_t)(end - start));
    else
        failed = madvise(a->base + start, end - start, MADV_DONTNEED);
    err = errno;
    /* Not fatal: the pages stay allocated and are reused by the next allocation. */
    if (failed != 0)
        HC_DEBUG("cannot give %llu freed arena bytes back to the kernel: %s",
                 (unsigned long long)(end - start), strerror(err));
}

/* Free the block of `a` starting at ptr; called with the lock held. */
static aclError free_block(arena_t *a, const unsigned char *ptr)
{
    uint64_t offset;
    size_t i;

    if (a->base == NULL || ptr < a->base || ptr >= a->base + a->bytes)
        return ACL_ERROR_INVALID_PARAM;
    offset = (uint64_t)(ptr - a->base);
    i = find_block(a, offset);
    if (a->blocks[i].offset != offset || !a->blocks[i].used)
        return ACL_ERROR_INVALID_PARAM;
    a->blocks[i].used = 0;
    a->blocks[i].requested = 0;
    VALGRIND_MAKE_MEM_NOACCESS(a->base + offset, a->blocks[i].size);
    give_back(a, a->blocks[i].offset, a->blocks[i].size);
    if (i + 1 < a->count && !a->blocks[i + 1].used) {
        a->blocks[i].size += a->blocks[i + 1].size;
        erase_block(a, i + 1);
    }
    if (i > 0 && !a->blocks[i - 1].used) {
        a->blocks[i - 1].size += a->blocks[i].size;
        erase_block(a, i);
    }
    return ACL_SUCCESS;
}

/* Free ptr from this process's arena, or from one it inherited across fork(). */
static aclError free_any(const unsigned char *ptr)
{
    if (free_block(&arena, ptr) == ACL_SUCCESS)
        return ACL_SUCCESS;
    for (size_t k = 0; k < ninherited; k++)
        if (free_block(&inherited[k], ptr) == ACL_SUCCESS)
            return ACL_SUCCESS;
    return ACL_ERROR_INVALID_PARAM;
}

/* The policy (huge pages or not) has no meaning on a host: every policy gets arena memory. */
HC_RT_EXPORT aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    int32_t device;
    uint64_t largest = 0, bytes = 0;
    aclError res;

    (void)policy;
    if (devPtr == NULL || size == 0) {
        HC_ERROR("aclrtMalloc: %s", devPtr == NULL ? "devPtr is NULL" : "size is 0");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = hc_rt_device_current("aclrtMalloc", &device);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    pthread_mutex_lock(&arena_lock);
    res = ensure_arena();
    if (res == ACL_SUCCESS) {
        res = alloc_block(size, devPtr);
        if (res != ACL_SUCCESS) {
            largest = largest_free();
            bytes = arena.bytes;
        }
    }
    pthread_mutex_unlock(&arena_lock);
    if (res != ACL_SUCCESS && bytes != 0)
        HC_ERROR("aclrtMalloc: cannot allocate %zu bytes: the largest free block of the %llu-byte "
                 "arena is %llu bytes (raise HOSTCCL_ARENA_BYTES)", size, (unsigned long long)bytes,
                 (unsigned long long)largest);
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    return hc_rt_ret(aclrtMalloc(devPtr, size, policy)); /* blocks are 512-byte aligned */
}

aclError hc_rt_arena_alloc_pages(size_t size, void **ptr_p, int *fd_p, uint64_t *offset_p)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    aclError res;

    pthread_mutex_lock(&arena_lock);
    res = ensure_arena();
    if (res == ACL_SUCCESS)
        res = alloc_aligned(size, page, offset_p);
    if (res == ACL_SUCCESS) {
        *ptr_p = arena.base + *offset_p;
        *fd_p = arena.fd;
    }
    pthread_mutex_unlock(&arena_lock);
    return res;
}

void hc_rt_arena_free_pages(void *ptr)
{
    pthread_mutex_lock(&arena_lock);
    (void)free_any(ptr);
    pthread_mutex_unlock(&arena_lock);
}

HC_RT_EXPORT aclError aclrtFree(void *devPtr)
{
    aclError res;

    pthread_mutex_lock(&arena_lock);
    res = free_any(devPtr);
    pthread_mutex_unlock(&arena_lock);
    if (res != ACL_SUCCESS)
        HC_ERROR("aclrtFree: %p is not the start of a live aclrtMalloc allocation (NULL, freed "
                 "twice, an interior pointer, or host memory)", devPtr);
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtHostArenaLookup(const void *ptr, size_t len, int *fd_p, uint64_t *offset_p)
{
    const unsigned char *p = ptr;
    aclError res = ACL_ERROR_INVALID_PARAM;

    if (fd_p == NULL || offset_p == NULL) {
        HC_ERROR("aclrtHostArenaLookup: %s is NULL", fd_p == NULL ? "fd_p" : "offset_p");
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&arena_lock);
    if (arena.base != NULL && arena.fd >= 0 && p >= arena.base && p < arena.base + arena.bytes) {
        uint64_t offset = (uint64_t)(p - arena.base);
        const block_t *b = &arena.blocks[find_block(&arena, offset)];
        uint64_t into = offset - b->offset;

        /* Not logged: callers probe any buffer and take the copy path when it is not in the arena. */
        if (b->used && into < b->requested && len <= b->requested - into) {
            *fd_p = arena.fd;
            *offset_p = offset;
            res = ACL_SUCCESS;
        }
    }
    pthread_mutex_unlock(&arena_lock);
    /* Reserved address space mapped with aclrtMapMem is arena memory too (vmm.c). */
    if (res != ACL_SUCCESS)
        res = hc_rt_vmm_lookup(ptr, len, fd_p, offset_p);
    return res;
}

/* ---- fork() (fork.c) ------------------------------------------------------------------------- */

void hc_rt_arena_fork_prepare(void)
{
    pthread_mutex_lock(&arena_lock);
}

void hc_rt_arena_fork_parent(void)
{
    pthread_mutex_unlock(&arena_lock);
}

/*
 * In the child, right after fork(): the parent's shared mapping becomes a private copy-on-write
 * mapping of the same file at the same address (one mmap; the inherited pointers stay valid and
 * keep their contents), the parent's memfd is closed, and the next aclrtMalloc creates this
 * process's own arena. If the remap fails (it cannot in practice: same size, same file), the
 * mapping is dropped instead: inherited buffers then fault rather than write into the parent.
 */
void hc_rt_arena_fork_child(void)
{
    /* A private arena (no memfd) is copy-on-write across fork() already: the child keeps it. */
    if (arena.base != NULL && arena.fd >= 0) {
        int flags = MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE;

        if (mmap(arena.base, arena.bytes, PROT_READ | PROT_WRITE, flags, arena.fd, 0) == MAP_FAILED)
            munmap(arena.base, arena.bytes);
        close(arena.fd);
        arena.fd = -1;
        if (ninherited < INHERITED_MAX)
            inherited[ninherited++] = arena;
        else
            free(arena.blocks); /* a line of forks this deep: the oldest buffers can no longer be freed */
        arena = (arena_t){.fd = -1};
    }
    pthread_mutex_unlock(&arena_lock);
}
