/*
 * Memory: the shared arena (allocation, bad frees, coalescing, exhaustion, lookup and sharing,
 * giving freed memory back), host memory, synchronous and stream-ordered memcpy and memset.
 *
 * The arena is made small (ARENA_BYTES) so that exhaustion and coalescing can be shown exactly.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_test.h"

#define ARENA_BYTES (16u << 20)
#define MiB (1u << 20)

static void test_malloc_arguments(void **state)
{
    void *ptr = NULL;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc(&ptr, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMalloc(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMalloc(&ptr, 1, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
    assert_non_null(ptr);
    assert_int_equal((uintptr_t)ptr % 512, 0);
    memset(ptr, 0xab, 1);
    assert_int_equal(aclrtFree(ptr), ACL_SUCCESS);
}

static void test_bad_frees_are_errors(void **state)
{
    void *ptr, *host = malloc(64);
    int local;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc(&ptr, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtFree((char *)ptr + 512), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtFree((char *)ptr + 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtFree(host), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtFree(&local), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtFree(ptr), ACL_SUCCESS);
    assert_int_equal(aclrtFree(ptr), ACL_ERROR_INVALID_PARAM);
    assert_non_null(strstr(aclGetRecentErrMsg(), "aclrtFree"));
    free(host);
}

static void test_exhaustion(void **state)
{
    void *ptr = NULL;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc(&ptr, ARENA_BYTES + 1, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_BAD_ALLOC);
    assert_non_null(strstr(aclGetRecentErrMsg(), "HOSTCCL_ARENA_BYTES"));
    assert_int_equal(aclrtMalloc(&ptr, SIZE_MAX, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_BAD_ALLOC);
}

/*
 * Fill the arena with blocks of varied sizes, free them in a scrambled order, then allocate the
 * whole arena as one block: that fits only if every free merged with its neighbours.
 */
static void test_free_coalesces(void **state)
{
    enum { MAX_BLOCKS = 8192 };
    static void *blocks[MAX_BLOCKS];
    size_t count = 0;
    void *whole;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    while (count < MAX_BLOCKS) {
        size_t size = 512 * (1 + count % 13) + (count % 3 ? 7 : 0);

        if (aclrtMalloc(&blocks[count], size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS)
            break;
        memset(blocks[count], (int)count, size);
        count++;
    }
    assert_true(count > 100 && count < MAX_BLOCKS);
    /* The arena is full, up to less than the largest block size. */
    assert_int_equal(aclrtMalloc(&whole, 512 * 14, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_BAD_ALLOC);
    for (size_t stride = 0; stride < 3; stride++)
        for (size_t i = stride; i < count; i += 3)
            assert_int_equal(aclrtFree(blocks[i]), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc(&whole, ARENA_BYTES, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_ptr_equal(whole, blocks[0]);
    assert_int_equal(aclrtFree(whole), ACL_SUCCESS);
}

/* aclrtHostArenaLookup names the memfd and offset; a second mapping of them sees the same bytes. */
static void test_arena_lookup_and_sharing(void **state)
{
    unsigned char *ptr, *view;
    long page = sysconf(_SC_PAGESIZE);
    uint64_t offset, aligned;
    int fd, fd2;
    void *host = malloc(256);

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc((void **)&ptr, MiB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtHostArenaLookup(ptr + 100, 1000, &fd, &offset), ACL_SUCCESS);
    assert_true(fd >= 0);
    assert_int_equal(aclrtHostArenaLookup(ptr, MiB, &fd2, &offset), ACL_SUCCESS);
    assert_int_equal(fd2, fd);
    assert_int_equal(offset % 512, 0);
    aligned = offset & ~(uint64_t)(page - 1);
    view = mmap(NULL, MiB + (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)aligned);
    assert_true(view != MAP_FAILED);
    ptr[12345] = 0x5a;
    assert_int_equal(view[offset - aligned + 12345], 0x5a);
    view[offset - aligned + 777] = 0xa5;
    assert_int_equal(ptr[777], 0xa5);
    munmap(view, MiB + (size_t)page);
    /* Ranges that are not inside one live allocation. */
    assert_int_equal(aclrtHostArenaLookup(ptr, MiB + 1, &fd, &offset), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtHostArenaLookup(ptr + MiB - 1, 2, &fd, &offset), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtHostArenaLookup(host, 16, &fd, &offset), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtHostArenaLookup(ptr, 16, NULL, &offset), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtFree(ptr), ACL_SUCCESS);
    assert_int_equal(aclrtHostArenaLookup(ptr, 16, &fd, &offset), ACL_ERROR_INVALID_PARAM);
    free(host);
}

/* Freeing a large block returns its pages to the kernel: the memfd's allocated size drops. */
static void test_large_free_gives_memory_back(void **state)
{
    struct stat before, after;
    unsigned char *ptr;
    uint64_t offset;
    int fd;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc((void **)&ptr, 4 * MiB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtHostArenaLookup(ptr, 4 * MiB, &fd, &offset), ACL_SUCCESS);
    memset(ptr, 1, 4 * MiB);
    assert_int_equal(fstat(fd, &before), 0);
    assert_true((uint64_t)before.st_blocks * 512 >= 4 * MiB);
    assert_int_equal(aclrtFree(ptr), ACL_SUCCESS);
    assert_int_equal(fstat(fd, &after), 0);
    assert_true((uint64_t)after.st_blocks * 512 + 3 * MiB <= (uint64_t)before.st_blocks * 512);
}

typedef struct {
    int device;
    atomic_int failures;
} churn_t;

/* Allocate, fill, check, free, from several threads at once: blocks never overlap. */
static void *churn_thread(void *arg)
{
    churn_t *churn = arg;
    unsigned char *ptrs[16];
    unsigned seed = (unsigned)churn->device * 7919u;

    if (aclrtSetDevice(churn->device) != ACL_SUCCESS)
        atomic_fetch_add(&churn->failures, 1);
    for (int round = 0; round < 200; round++) {
        size_t size = 512 + (size_t)(rand_r(&seed) % 8192);

        for (int i = 0; i < 16; i++) {
            if (aclrtMalloc((void **)&ptrs[i], size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
                atomic_fetch_add(&churn->failures, 1);
                return NULL;
            }
            memset(ptrs[i], churn->device * 16 + i, size);
        }
        for (int i = 0; i < 16; i++) {
            if (ptrs[i][0] != churn->device * 16 + i || ptrs[i][size - 1] != churn->device * 16 + i)
                atomic_fetch_add(&churn->failures, 1);
            if (aclrtFree(ptrs[i]) != ACL_SUCCESS)
                atomic_fetch_add(&churn->failures, 1);
        }
    }
    return NULL;
}

static void test_concurrent_alloc_free(void **state)
{
    churn_t churns[4];
    pthread_t threads[4];

    (void)state;
    for (int t = 0; t < 4; t++) {
        churns[t].device = t;
        atomic_init(&churns[t].failures, 0);
        assert_int_equal(pthread_create(&threads[t], NULL, churn_thread, &churns[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        assert_int_equal(pthread_join(threads[t], NULL), 0);
        assert_int_equal(atomic_load(&churns[t].failures), 0);
    }
}

static void *malloc_without_device(void *arg)
{
    void *ptr;

    (void)arg;
    assert_int_equal(aclrtMalloc(&ptr, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_CONTEXT_NULL);
    assert_non_null(strstr(aclGetRecentErrMsg(), "aclrtSetDevice"));
    return NULL;
}

static void test_malloc_needs_a_device(void **state)
{
    (void)state;
    run_on_new_thread(malloc_without_device, NULL);
}

static void test_host_memory(void **state)
{
    void *ptr = NULL;

    (void)state;
    assert_int_equal(aclrtMallocHost(&ptr, 100), ACL_SUCCESS);
    assert_int_equal((uintptr_t)ptr % 64, 0);
    memset(ptr, 0, 100);
    assert_int_equal(aclrtFreeHost(ptr), ACL_SUCCESS);
    assert_int_equal(aclrtMallocHost(&ptr, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocHost(NULL, 8), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtFreeHost(NULL), ACL_ERROR_INVALID_PARAM);
}

static void test_memcpy_and_memset(void **state)
{
    char src[64], dst[64];

    (void)state;
    for (int i = 0; i < 64; i++)
        src[i] = (char)i;
    memset(dst, 0, sizeof(dst));
    assert_int_equal(aclrtMemcpy(dst, sizeof(dst), src, 64, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    assert_memory_equal(dst, src, 64);
    assert_int_equal(aclrtMemcpy(dst, 32, src, 33, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy(dst, 64, src, 8, (aclrtMemcpyKind)9), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy(dst, 64, NULL, 8, ACL_MEMCPY_DEFAULT), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy(NULL, 64, src, 8, ACL_MEMCPY_DEFAULT), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy(NULL, 0, NULL, 0, ACL_MEMCPY_HOST_TO_HOST), ACL_SUCCESS);
    /* Overlapping copies behave like memmove. */
    assert_int_equal(aclrtMemcpy(src + 1, 63, src, 32, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_SUCCESS);
    for (int i = 0; i < 32; i++)
        assert_int_equal(src[i + 1], (char)i);
    assert_int_equal(aclrtMemset(dst, 64, 0x1ff, 10), ACL_SUCCESS);
    for (int i = 0; i < 10; i++)
        assert_int_equal((unsigned char)dst[i], 0xff);
    assert_int_equal(dst[10], 10);
    assert_int_equal(aclrtMemset(dst, 8, 0, 9), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemset(NULL, 8, 0, 8), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemset(NULL, 0, 0, 0), ACL_SUCCESS);
}

/* memset a -> copy a to b -> copy b to c, in stream order, on arena memory. */
static void test_async_copies_in_order(void **state)
{
    enum { N = 3 * MiB };
    unsigned char *a, *b, *c;
    aclrtStream stream;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc((void **)&a, N, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc((void **)&b, N, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtMallocHost((void **)&c, N), ACL_SUCCESS);
    for (int round = 0; round < 4; round++) {
        assert_int_equal(aclrtMemsetAsync(a, N, round + 1, N, stream), ACL_SUCCESS);
        assert_int_equal(aclrtMemcpyAsync(b, N, a, N, ACL_MEMCPY_DEVICE_TO_DEVICE, stream), ACL_SUCCESS);
        assert_int_equal(aclrtMemcpyAsync(c, N, b, N, ACL_MEMCPY_DEVICE_TO_HOST, stream), ACL_SUCCESS);
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        assert_int_equal(c[0], round + 1);
        assert_int_equal(c[N / 2], round + 1);
        assert_int_equal(c[N - 1], round + 1);
    }
    /* Argument errors are returned at the call, not discovered by the executor. */
    assert_int_equal(aclrtMemcpyAsync(c, 16, a, 17, ACL_MEMCPY_DEVICE_TO_HOST, stream), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpyAsync(c, 16, a, 8, (aclrtMemcpyKind)-1, stream), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemsetAsync(a, 16, 0, 17, stream), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemsetAsync(NULL, 16, 0, 16, stream), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtMemsetAsync(a, 16, 0, 16, stream), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtMemcpyAsync(c, 16, a, 16, ACL_MEMCPY_DEVICE_TO_HOST, stream),
                     ACL_ERROR_RT_INVALID_HANDLE);
    /* The NULL stream is the device's default stream. */
    assert_int_equal(aclrtMemsetAsync(c, N, 9, N, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    assert_int_equal(c[N - 1], 9);
    assert_int_equal(aclrtFree(a), ACL_SUCCESS);
    assert_int_equal(aclrtFree(b), ACL_SUCCESS);
    assert_int_equal(aclrtFreeHost(c), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

/* 2-D copies: height rows of width bytes between pitched layouts, at once and in stream order. */
static void test_memcpy_2d(void **state)
{
    enum { W = 5, H = 4, SP = 8, DP = 12 };
    unsigned char src[SP * H], dst[DP * H];
    aclrtStream stream;

    (void)state;
    for (int i = 0; i < SP * H; i++)
        src[i] = (unsigned char)i;
    memset(dst, 0xee, sizeof(dst));
    assert_int_equal(aclrtMemcpy2d(dst, DP, src, SP, W, H, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    for (int r = 0; r < H; r++) {
        for (int c = 0; c < DP; c++)
            assert_int_equal(dst[r * DP + c], c < W ? src[r * SP + c] : 0xee); /* padding untouched */
    }
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    memset(dst, 0, sizeof(dst));
    assert_int_equal(aclrtMemcpy2dAsync(dst, DP, src, SP, W, H, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, stream),
                     ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(dst[3 * DP + 4], src[3 * SP + 4]);
    assert_int_equal(dst[3 * DP + 5], 0);
    assert_int_equal(aclrtMemcpy2d(dst, 4, src, SP, W, H, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy2d(dst, DP, src, 4, W, H, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy2d(NULL, DP, src, SP, W, H, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy2d(dst, DP, src, SP, W, H, (aclrtMemcpyKind)8), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy2d(NULL, DP, NULL, SP, W, 0, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpy2dAsync(dst, 4, src, SP, W, H, ACL_MEMCPY_HOST_TO_DEVICE, stream),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* aclrtMallocAlign32 is arena memory like aclrtMalloc; aclrtGetMemInfo reports the host's memory. */
static void test_align32_and_mem_info(void **state)
{
    void *ptr = NULL;
    size_t avail = 0, total = 0;
    int fd = -1;
    uint64_t offset = 0;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtMallocAlign32(&ptr, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal((uintptr_t)ptr % 32, 0);
    assert_int_equal(aclrtHostArenaLookup(ptr, 100, &fd, &offset), ACL_SUCCESS);
    assert_int_equal(aclrtFree(ptr), ACL_SUCCESS);
    assert_int_equal(aclrtMallocAlign32(&ptr, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM_HUGE, &avail, &total), ACL_SUCCESS);
    assert_true(total > 0 && avail > 0 && avail <= total);
    assert_int_equal(aclrtGetMemInfo(ACL_DDR_MEM, &avail, &total), ACL_SUCCESS);
    assert_int_equal(aclrtGetMemInfo((aclrtMemAttr)99, &avail, &total), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM, NULL, &total), ACL_ERROR_INVALID_PARAM);
    /* Every memcpy kind CANN has (0..7) is a host copy. */
    for (int kind = 0; kind <= 7; kind++)
        assert_int_equal(aclrtMemcpy(&avail, sizeof(avail), &total, sizeof(total), (aclrtMemcpyKind)kind),
                         ACL_SUCCESS);
    assert_int_equal(avail, total);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malloc_arguments),
        cmocka_unit_test(test_bad_frees_are_errors),
        cmocka_unit_test(test_exhaustion),
        cmocka_unit_test(test_free_coalesces),
        cmocka_unit_test(test_arena_lookup_and_sharing),
        cmocka_unit_test(test_large_free_gives_memory_back),
        cmocka_unit_test(test_concurrent_alloc_free),
        cmocka_unit_test(test_malloc_needs_a_device),
        cmocka_unit_test(test_host_memory),
        cmocka_unit_test(test_memcpy_and_memset),
        cmocka_unit_test(test_async_copies_in_order),
        cmocka_unit_test(test_memcpy_2d),
        cmocka_unit_test(test_align32_and_mem_info),
        /* Last: it needs the whole arena free, which every test before leaves it. */
        cmocka_unit_test(test_free_coalesces),
    };
    char bytes[32];

    /* Before the first aclrtMalloc: the arena's size is read when it is created. */
    snprintf(bytes, sizeof(bytes), "%u", ARENA_BYTES);
    setenv("HOSTCCL_ARENA_BYTES", bytes, 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
