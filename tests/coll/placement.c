/*
 * CPU placement (docs/performance.md, "Ranks that share a CPU"): a waiter that finds the rank it
 * waits for on its own CPU skips its spin, and when the ranks could each have a CPU the higher one
 * moves itself to a free CPU by switching its affinity mask and back. What a program relies on:
 * the affinity mask it gave is the mask it finds after any number of ops, collectives and
 * point-to-point alike complete with the right values, and ranks the launcher pinned to one CPU
 * (ctest runs this once under `taskset -c 0`) are never moved and still finish: every wait gives
 * the CPU up instead of spinning for a peer that cannot run.
 *
 * With --expect-shares (under hccl-run's default --bind-to share) the ranks also gather their masks
 * and check the split: pairwise disjoint when there are CPUs enough for every rank, else one CPU each.
 *
 * --fake-cpu0 --expect-moves / --expect-no-moves (unbound ranks, 2 CPUs or more): whether the
 * library moves a rank off a shared CPU, which is what HOSTCCL_SPREAD_RANKS switches. The program
 * defines sched_getcpu and sched_setaffinity itself (exported to the library, which calls them
 * through libc's symbols): every rank is told it runs on CPU 0, so the ranks always look as if they
 * share it and the higher one moves whenever it may; every affinity change the library makes is
 * counted. With --expect-moves rank 1 must have moved (and its mask is still checked to be back);
 * with --expect-no-moves no rank may change its affinity at all.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "test_util.h"

static int fake_cpu0;
static int affinity_changes;

/* Interposed: the library's calls land here (the executable exports both, see CMakeLists.txt). */
__attribute__((visibility("default"))) int sched_getcpu(void)
{
    unsigned cpu = 0;

    if (fake_cpu0)
        return 0;
    return syscall(SYS_getcpu, &cpu, NULL, NULL) == 0 ? (int)cpu : -1;
}

__attribute__((visibility("default"))) int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *mask)
{
    affinity_changes++;
    return syscall(SYS_sched_setaffinity, pid, size, mask) == 0 ? 0 : -1;
}

#define BURSTS 40
#define PER_BURST 50
#define MASK_WORDS (CPU_SETSIZE / 64)

/* The masks of all ranks (AllGather) obey hccl-run's share rule; the number of violations. */
static int check_shares(t_world_t *world, const cpu_set_t *mine, uint32_t n)
{
    uint64_t *all, word[MASK_WORDS] = {0}, *out;
    cpu_set_t any;
    int bad = 0;

    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, mine))
            word[cpu / 64] |= 1ull << (cpu % 64);
    T_CHECK_ACL(aclrtMalloc((void **)&all, (size_t)n * sizeof(word), ACL_MEM_MALLOC_HUGE_FIRST));
    T_CHECK_ACL(aclrtMalloc((void **)&out, sizeof(word), ACL_MEM_MALLOC_HUGE_FIRST));
    for (int w = 0; w < MASK_WORDS; w++)
        out[w] = word[w];
    T_CHECK_HCCL(HcclAllGather(out, all, MASK_WORDS, HCCL_DATA_TYPE_UINT64, world->comm, world->stream));
    T_CHECK_ACL(aclrtSynchronizeStream(world->stream));
    CPU_ZERO(&any);
    for (uint32_t r = 0; r < n; r++)
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
            if (all[r * MASK_WORDS + cpu / 64] >> (cpu % 64) & 1)
                CPU_SET(cpu, &any);
    for (uint32_t a = 0; a < n; a++) {
        int count = 0, shared = 0;
        for (int w = 0; w < MASK_WORDS; w++) {
            count += __builtin_popcountll(all[a * MASK_WORDS + w]);
            for (uint32_t b = a + 1; b < n; b++)
                shared |= (all[a * MASK_WORDS + w] & all[b * MASK_WORDS + w]) != 0;
        }
        if ((uint32_t)CPU_COUNT(&any) >= n ? shared : count != 1) {
            fprintf(stderr, "rank %u's mask (%d CPUs) breaks the share rule (%d CPUs among %u ranks)\n", a,
                    count, CPU_COUNT(&any), n);
            bad++;
        }
    }
    T_CHECK_ACL(aclrtFree(all));
    T_CHECK_ACL(aclrtFree(out));
    return bad;
}

int main(int argc, char **argv)
{
    t_world_t world;
    cpu_set_t before, after;
    float *buf;
    uint32_t me, n, peer;
    int wrong = 0;

    for (int i = 1; i < argc; i++)
        fake_cpu0 |= strcmp(argv[i], "--fake-cpu0") == 0;
    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    me = world.launch.rank;
    n = world.launch.size;
    peer = me ^ 1u;
    if (sched_getaffinity(0, sizeof(before), &before) != 0) {
        perror("sched_getaffinity");
        return 1;
    }
    T_CHECK_ACL(aclrtMalloc((void **)&buf, 4 * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    for (int burst = 0; burst < BURSTS; burst++) {
        for (int i = 0; i < PER_BURST; i++) {
            buf[0] = (float)(me + 1);
            T_CHECK_HCCL(HcclAllReduce(buf, buf, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, world.comm, world.stream));
            T_CHECK_ACL(aclrtSynchronizeStream(world.stream));
            wrong += buf[0] != (float)(n * (n + 1) / 2);
        }
        if (peer < n) {
            buf[1] = (float)(burst * 10 + (int)me);
            T_CHECK_HCCL(HcclGroupStart());
            T_CHECK_HCCL(HcclSend(&buf[1], 1, HCCL_DATA_TYPE_FP32, peer, world.comm, world.stream));
            T_CHECK_HCCL(HcclRecv(&buf[2], 1, HCCL_DATA_TYPE_FP32, peer, world.comm, world.stream));
            T_CHECK_HCCL(HcclGroupEnd());
            T_CHECK_ACL(aclrtSynchronizeStream(world.stream));
            wrong += buf[2] != (float)(burst * 10 + (int)peer);
        }
    }
    if (sched_getaffinity(0, sizeof(after), &after) != 0) {
        perror("sched_getaffinity");
        return 1;
    }
    if (!CPU_EQUAL(&before, &after)) {
        fprintf(stderr, "rank %u: the affinity mask changed: %d CPUs before, %d after\n", me, CPU_COUNT(&before),
                CPU_COUNT(&after));
        wrong++;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--expect-shares") == 0)
            wrong += check_shares(&world, &after, n);
        if (strcmp(argv[i], "--expect-no-moves") == 0 && affinity_changes != 0) {
            fprintf(stderr, "rank %u: the library changed its affinity %d times\n", me, affinity_changes);
            wrong++;
        }
        if (strcmp(argv[i], "--expect-moves") == 0 && me == 1 && affinity_changes == 0) {
            fprintf(stderr, "rank %u: the library never moved this rank off the CPU it seemed to share\n", me);
            wrong++;
        }
    }
    printf("rank %u: %d ops on %d allowed CPUs (now on CPU %d), %d affinity changes, %d wrong\n", me,
           BURSTS * (PER_BURST + 1), CPU_COUNT(&before), sched_getcpu(), affinity_changes, wrong);
    T_CHECK_ACL(aclrtFree(buf));
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    return wrong != 0;
}
