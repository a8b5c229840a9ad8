/*
 * CPU binding of the ranks (--bind-to share, the default). The CPUs hccl-run may use are split into
 * N contiguous shares, one per rank (the first k % N ranks get one CPU more); with more ranks than
 * CPUs, rank r gets CPU r mod k. A rank that shares a CPU with its peer cannot run while the peer
 * spins, and after start-up ranks do share one (a new process starts on its parent's CPU): on the
 * 2-CPU reference VM, 4 ranks without binding took 12-15 or 27-33 us per 8-byte collective from one
 * run to the next, with binding 12-17 us in every run (docs/performance.md). Shares rather than one
 * CPU per rank leave each rank the CPUs its own compute threads need.
 */
#include <sched.h>

#include "hccl_run.h"

int hc_run_share_cpus(const cpu_set_t *allowed, uint32_t rank, uint32_t nranks, cpu_set_t *share)
{
    uint32_t k = (uint32_t)CPU_COUNT(allowed), first, count, seen = 0;

    CPU_ZERO(share);
    if (k == 0 || nranks == 0 || rank >= nranks)
        return -1;
    if (nranks > k) {
        first = rank % k;
        count = 1;
    } else {
        uint32_t base = k / nranks, extra = k % nranks;
        first = rank * base + (rank < extra ? rank : extra);
        count = base + (rank < extra ? 1 : 0);
    }
    for (int cpu = 0; cpu < CPU_SETSIZE && seen < first + count; cpu++) {
        if (!CPU_ISSET(cpu, allowed))
            continue;
        if (seen >= first)
            CPU_SET(cpu, share);
        seen++;
    }
    return 0;
}
