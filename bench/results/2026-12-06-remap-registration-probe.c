/*
 * What registering a plain malloc buffer by remapping it would cost (probe for
 * docs/design-notes.md, "Plain memory is read with CMA"): copy the buffer's whole pages into a
 * memfd, map the memfd over them at the same address (MAP_SHARED | MAP_FIXED), fault the pages in;
 * then what a per-call validity check costs (readlink of /proc/self/map_files/START-END) and what
 * madvise(MADV_DONTNEED) leaves in the pages afterwards (zeros in private memory; the data in shared).
 *
 *   cc -O2 -o probe remap-registration-probe.c && ./probe [MiB]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 16) << 20, page = 4096;
    uint8_t *buf = malloc(bytes + page), *base, *copy = malloc(bytes);
    double t0, t_copy, t_map, t_fault, t_memcpy, t_check = 0;
    char path[128], target[256];
    int fd = memfd_create("probe-registration", MFD_CLOEXEC);

    if (buf == NULL || copy == NULL || fd < 0 || ftruncate(fd, (off_t)bytes) != 0)
        return 1;
    base = (uint8_t *)(((uintptr_t)buf + page - 1) & ~(uintptr_t)(page - 1));
    memset(base, 7, bytes); /* the program's data, faulted in */
    memcpy(copy, base, bytes); /* faults the copy's pages in */
    t0 = now_us();
    memcpy(copy, base, bytes);
    t_memcpy = now_us() - t0; /* a copy between faulted-in buffers */

    t0 = now_us();
    uint8_t *staging = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    memcpy(staging, base, bytes); /* the pages' contents into the memfd (faults its pages) */
    t_copy = now_us() - t0;
    t0 = now_us();
    if (mmap(base, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != base)
        return 2;
    t_map = now_us() - t0;
    t0 = now_us();
    volatile uint8_t sink = 0;
    for (size_t off = 0; off < bytes; off += page)
        sink ^= base[off]; /* the program's next access: a fault per page on the new mapping */
    t_fault = now_us() - t0;

    snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)(uintptr_t)base,
             (unsigned long)(uintptr_t)(base + bytes));
    for (int i = 0; i < 1000; i++) {
        t0 = now_us();
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        t_check += now_us() - t0;
        if (n < 0) {
            perror("readlink");
            break;
        }
        target[n] = 0;
    }
    printf("%zu MiB: memcpy %.0f us; registering: copy into a memfd %.0f us, map over %.1f us, "
           "faults %.0f us (%.2f us a page); check %.2f us (%s)\n",
           bytes >> 20, t_memcpy, t_copy, t_map, t_fault, t_fault / (double)(bytes / page), t_check / 1000, target);

    madvise(base, page, MADV_DONTNEED); /* what an allocator does to purge a free page */
    uint8_t *priv = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(priv, 7, page);
    madvise(priv, page, MADV_DONTNEED);
    printf("after MADV_DONTNEED: registered page reads %d, a private page %d\n", base[0], priv[0]);
    (void)sink;
    return 0;
}
