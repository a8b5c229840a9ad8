/*
 * The overlap pattern, per round and rank (2026-12-03-kvm-overlap-launch.md): after a barrier each
 * rank enqueues a fp32 sum AllReduce of BYTES on plain memory, computes C us (a CPU-only loop) and
 * synchronises ("ovl"), or runs the op blocking and then computes ("seq"). Prints, per rank and
 * round, the stream's pattern and runner (aclrtHostStreamRunner), and the enqueue, compute and
 * synchronise times. MODE 0: every round overlapped; 1: every round sequential; 2: blocks of 14
 * sequential and 14 overlapped rounds, as bench/overlap.py runs them.
 *
 *   cc -O2 -Iinclude -Lbuild -lhccl -lascendcl -Wl,-rpath,$PWD/build -o /tmp/ovl THIS_FILE
 *   build/tools/hccl-run/hccl-run -n 2 /tmp/ovl BYTES ROUNDS C MODE
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

aclError aclrtHostStreamRunner(aclrtStream stream, int *sync_pattern_p, int *runner_p);

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static volatile double sink;

static void compute_us(double us)
{
    double end = now() + us, x = 1.0;

    while (now() < end)
        for (int i = 0; i < 100; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
}

int main(int argc, char **argv)
{
    uint64_t bytes = argc > 1 ? strtoull(argv[1], 0, 0) : 1 << 20;
    int rounds = argc > 2 ? atoi(argv[2]) : 12, mode = argc > 4 ? atoi(argv[4]) : 0;
    double c = argc > 3 ? atof(argv[3]) : 110;
    HcclHostLaunchInfo li;
    HcclComm comm;
    aclrtStream s, ctl;
    HcclRootInfo info;
    float *a, *b;
    uint64_t n = bytes / 4 ? bytes / 4 : 1;

    memset(&info, 0, sizeof(info));
    HcclHostGetLaunchInfo(&li);
    aclInit(NULL);
    aclrtSetDevice(li.localRank);
    aclrtCreateStream(&s);
    aclrtCreateStream(&ctl);
    if (li.rank == 0)
        HcclGetRootInfo(&info);
    HcclHostBroadcastRootInfo(&info);
    HcclCommInitRootInfo(li.size, &info, li.rank, &comm);
    if (posix_memalign((void **)&a, 64, n * 4) != 0 || posix_memalign((void **)&b, 64, n * 4) != 0)
        return 1;
    memset(a, 0, n * 4);
    memset(b, 0, n * 4);
    for (int i = 0; i < 20; i++) {
        HcclAllReduce(a, b, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s);
        aclrtSynchronizeStream(s);
    }
    for (int r = 0; r < rounds; r++) {
        int seq = mode == 2 ? (r / 14) % 2 == 0 : mode, sp = -1, rn = -1;
        double t0, t1, t2, t3;
        HcclBarrier(comm, ctl);
        aclrtSynchronizeStream(ctl);
        t0 = now();
        HcclAllReduce(a, b, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s);
        t1 = now();
        if (seq) {
            aclrtSynchronizeStream(s);
            t2 = now();
            compute_us(c);
        } else {
            compute_us(c);
            t2 = now();
            aclrtSynchronizeStream(s);
        }
        t3 = now();
        aclrtHostStreamRunner(s, &sp, &rn);
        printf("sp%d rn%d r%u round %2d: %s enq %6.1f %s %6.1f %s %6.1f total %6.1f\n", sp, rn, li.rank, r,
               seq ? "seq" : "ovl", t1 - t0, seq ? "sync" : "comp", t2 - t1, seq ? "comp" : "sync", t3 - t2, t3 - t0);
    }
    HcclCommDestroy(comm);
    return 0;
}
