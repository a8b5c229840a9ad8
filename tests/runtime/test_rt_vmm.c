/*
 * Virtual memory: reservations are real inaccessible address space, physical allocations are
 * shared arena memory, mappings put one onto the other (twice if asked: both views see the same
 * bytes), and the arena lookup the collectives use finds mapped memory, so peers can map it too.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test.h"

static size_t page;

static aclrtPhysicalMemProp device_prop(uint32_t device)
{
    aclrtPhysicalMemProp prop = {.handleType = ACL_MEM_HANDLE_TYPE_NONE,
                                 .allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED,
                                 .memAttr = ACL_HBM_MEM_HUGE,
                                 .location = {.id = device, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    return prop;
}

/* Does touching addr kill a child process (SIGSEGV, or a sanitizer's report and exit)? */
static int touching_faults(volatile char *addr)
{
    pid_t pid = fork();
    int status = 0;

    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        addr[0] = 1;
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_granularity(void **state)
{
    aclrtPhysicalMemProp prop = device_prop(0);
    size_t g = 0;

    (void)state;
    assert_int_equal(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g), ACL_SUCCESS);
    assert_int_equal(g, page);
    assert_int_equal(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, &g),
                     ACL_SUCCESS);
    assert_int_equal(g, 2u << 20);
    assert_int_equal(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF, &g),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemGetAllocationGranularity(NULL, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_ERROR_INVALID_PARAM);
}

/* Reserve, map twice, read through both views and through what a peer would map. */
static void test_reserve_map_share(void **state)
{
    aclrtPhysicalMemProp prop = device_prop(1);
    aclrtDrvMemHandle handle = NULL;
    char *va = NULL, *view = NULL, *peer;
    uint64_t offset = 0;
    char path[64];
    int fd = -1, peer_fd;

    (void)state;
    assert_int_equal(aclrtReserveMemAddress((void **)&va, 8 * page, 0, NULL, 1), ACL_SUCCESS);
    assert_int_equal(aclrtReserveMemAddress((void **)&view, 4 * page, 1u << 21, NULL, 0), ACL_SUCCESS);
    assert_int_equal((uintptr_t)view % (1u << 21), 0);
    assert_true(touching_faults(va));
    assert_int_equal(aclrtMallocPhysical(&handle, 2 * page, &prop, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(va + page, 2 * page, 0, handle, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(view, page, page, handle, 0), ACL_SUCCESS); /* the second page */
    memset(va + page, 'a', 2 * page);
    va[2 * page + 5] = 'z';
    assert_int_equal(view[5], 'z');
    assert_int_equal(view[0], 'a');
    assert_true(touching_faults(va)); /* the unmapped first page of the reservation */
    /* The collectives' lookup: a peer maps the memfd at the offset it is given and sees the bytes. */
    assert_int_equal(aclrtHostArenaLookup(va + 2 * page + 5, 1, &fd, &offset), ACL_SUCCESS);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    peer_fd = open(path, O_RDONLY);
    assert_true(peer_fd >= 0);
    peer = mmap(NULL, page, PROT_READ, MAP_SHARED, peer_fd, (off_t)(offset & ~(uint64_t)(page - 1)));
    assert_true(peer != MAP_FAILED);
    assert_int_equal(peer[offset & (page - 1)], 'z');
    munmap(peer, page);
    close(peer_fd);
    /* A range that crosses the mapping's end is not one piece of arena memory. */
    assert_int_equal(aclrtHostArenaLookup(va + 2 * page, 2 * page, &fd, &offset), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtHostMemMapped(va + page, 2 * page, handle), ACL_SUCCESS);
    assert_int_equal(aclrtHostMemMapped(va, 2 * page, handle), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtHostMemReserved(va + page, 7 * page), ACL_SUCCESS);
    assert_int_equal(aclrtHostMemReserved(va + page, 8 * page), ACL_ERROR_INVALID_PARAM);

    /* Freeing the allocation keeps the memory until its last mapping goes. */
    assert_int_equal(aclrtFreePhysical(handle), ACL_SUCCESS);
    assert_int_equal(view[5], 'z');
    assert_int_equal(aclrtFreePhysical(handle), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_ERROR_INVALID_PARAM); /* still mapped */
    assert_int_equal(aclrtUnmapMem(va + page), ACL_SUCCESS);
    assert_true(touching_faults(va + page));
    assert_int_equal(aclrtUnmapMem(view), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(view), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_ERROR_INVALID_PARAM);
}

/* What a mapping may not be. */
static void test_map_errors(void **state)
{
    aclrtPhysicalMemProp prop = device_prop(0), bad = device_prop(8);
    aclrtDrvMemHandle handle = NULL, other = NULL;
    char *va = NULL;
    int x;

    (void)state;
    assert_int_equal(aclrtReserveMemAddress((void **)&va, 4 * page, 0, NULL, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMallocPhysical(&handle, 2 * page, &prop, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMallocPhysical(&other, page + 1, &prop, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocPhysical(&other, page, &bad, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtMallocPhysical(&other, page, &prop, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocPhysical(&other, page, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(va, 2 * page, 0, handle, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(va + page, page, 0, handle, 0), ACL_ERROR_INVALID_PARAM);     /* overlap */
    assert_int_equal(aclrtMapMem(va + 3 * page, 2 * page, 0, handle, 0), ACL_ERROR_INVALID_PARAM); /* past end */
    assert_int_equal(aclrtMapMem(va + 2 * page, page, 2 * page, handle, 0), ACL_ERROR_INVALID_PARAM); /* offset */
    assert_int_equal(aclrtMapMem(va + 2 * page + 1, page, 0, handle, 0), ACL_ERROR_INVALID_PARAM);  /* unaligned */
    assert_int_equal(aclrtMapMem(&x, page, 0, handle, 0), ACL_ERROR_INVALID_PARAM);  /* not reserved */
    assert_int_equal(aclrtMapMem(va + 2 * page, page, 0, handle, 1), ACL_ERROR_INVALID_PARAM);  /* flags */
    assert_int_equal(aclrtMapMem(va + 2 * page, page, 0, (aclrtDrvMemHandle)(uintptr_t)0x40, 0),
                     ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtUnmapMem(va + page), ACL_ERROR_INVALID_PARAM); /* not a mapping's start */
    assert_int_equal(aclrtReserveMemAddress((void **)&va, 0, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtReserveMemAddress((void **)&va, page, 3, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtReserveMemAddress((void **)&va, page, 0, NULL, 2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtUnmapMem(va), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(handle), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(va, page, 0, handle, 0), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

/* The physical memory keeps its bytes across unmap and remap; freed memory goes back to the arena,
 * so many allocations in a row do not grow it. */
static void test_remap_keeps_data(void **state)
{
    aclrtPhysicalMemProp prop = device_prop(0);
    aclrtDrvMemHandle handle = NULL;
    uint64_t offset = 0, first_offset = 0;
    char *va = NULL;
    int fd = -1;

    (void)state;
    assert_int_equal(aclrtReserveMemAddress((void **)&va, 2 * page, 0, NULL, 0), ACL_SUCCESS);
    for (int round = 0; round < 200; round++) {
        assert_int_equal(aclrtMallocPhysical(&handle, 2 * page, &prop, 0), ACL_SUCCESS);
        assert_int_equal(aclrtMapMem(va, 2 * page, 0, handle, 0), ACL_SUCCESS);
        assert_int_equal(aclrtHostArenaLookup(va, 2 * page, &fd, &offset), ACL_SUCCESS);
        if (round == 0)
            first_offset = offset;
        assert_int_equal(offset, first_offset); /* the freed block is reused */
        memset(va, round & 0x7f, 2 * page);
        assert_int_equal(aclrtUnmapMem(va), ACL_SUCCESS);
        assert_int_equal(aclrtMapMem(va + page, page, page, handle, 0), ACL_SUCCESS);
        assert_int_equal(va[page + page - 1], round & 0x7f);
        assert_int_equal(aclrtUnmapMem(va + page), ACL_SUCCESS);
        assert_int_equal(aclrtFreePhysical(handle), ACL_SUCCESS);
    }
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_granularity),
        cmocka_unit_test(test_reserve_map_share),
        cmocka_unit_test(test_map_errors),
        cmocka_unit_test(test_remap_keeps_data),
    };

    page = (size_t)sysconf(_SC_PAGESIZE);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
