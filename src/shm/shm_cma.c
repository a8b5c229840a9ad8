/*
 * Cross-memory attach: reading a peer's plain (malloc) memory with process_vm_readv, a single copy
 * where the copy-through path makes two. Whether the kernel allows it (same user, and Yama's
 * ptrace_scope or a container policy may forbid it between sibling processes) is probed once when
 * the communicator is created: every rank reads every local peer's control block through CMA,
 * checks the address it finds there and writes it back (AllReduce writes its result into the
 * peers' outputs with process_vm_writev), then the ranks agree through the bootstrap, so that all
 * of them take the same path for every op.
 *
 * Whether it pays depends on the pages and on the machine. process_vm_readv pins the peer's pages
 * one by one before it copies. A read of memory backed by transparent huge pages (numpy advises
 * them for arrays of 4 MiB and more; hugetlbfs) runs at memcpy speed, since one pin covers 2 MiB.
 * For 4 KiB pages the pin's cost decides, and it varies by a factor of ten between machines: 1-2 us
 * a page on a PVM guest (2-5 GB/s, against 20-100 GB/s for the memcpy pair of a pipelined
 * copy-through), ~0.3 us on an EPYC Milan guest, ~0.1 us on a KVM guest. So each process measures
 * it once (calibrate), and where every local rank found it fast, some collectives read 4 KiB-page
 * memory with CMA from sizes of their own; where it is fair (Milan), only the largest AlltoAll(V)
 * of ranks that share cores do (which ones, and why: pick_copy_thresholds in shm_engine.c).
 *
 * So the owner of a buffer, which alone can look at its own page tables, says in the op's first
 * step whether its peers should read it with CMA (hc_shm_cma_readable): from HOSTCCL_CMA_HUGE_MIN
 * bytes when almost all of it is huge pages; whatever its pages, from HOSTCCL_CMA_MIN bytes when
 * that is set, else as calibrated. The readers follow what the owner published, so every rank
 * reads alike. AllReduce alone decides by the op's size (hc_shm_cma_allreduce): it writes into every
 * output, whatever memory it is.
 *
 * The page test is PAGEMAP_SCAN on /proc/self/pagemap (Linux 6.7), which walks page tables without
 * reading a line of the buffer; its answers are kept in a small cache keyed by address range (the
 * "registration" of a user buffer). A stale entry (the program freed the buffer and got other pages
 * at the same address) can only choose the slower path, never move wrong data, since process_vm_readv
 * reads whatever the range holds when the op runs; entries are re-checked after CACHE_RECHECK_NS
 * anyway, so that pages khugepaged collapses later are seen. Kernels without PAGEMAP_SCAN never see
 * huge pages here and keep copy-through for plain memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "hc_check.h"
#include "hc_config.h"
#include "hc_time.h"
#include "shm_internal.h"

static int can_attach(hc_shm_engine_t *eng, uint32_t i)
{
    uint64_t expected = hc_shm_ctrl(eng, i)->self_addr, seen = 0;
    struct iovec local = {.iov_base = &seen, .iov_len = sizeof(seen)};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)(expected + offsetof(hc_shm_ctrl_t, self_addr)),
                           .iov_len = sizeof(seen)};

    if (eng->pids[i] == eng->pids[eng->me])
        return 1;
    /* AllReduce writes too: the value read is written back where it was (the same bytes). */
    return process_vm_readv(eng->pids[i], &local, 1, &remote, 1, 0) == (ssize_t)sizeof(seen) && seen == expected &&
           process_vm_writev(eng->pids[i], &local, 1, &remote, 1, 0) == (ssize_t)sizeof(seen);
}

/*
 * How fast is CMA on 4 KiB pages here? Once per process: the best of CALIBRATE_ROUNDS reads of
 * CALIBRATE_BYTES of this process's own fresh anonymous memory with process_vm_readv against
 * memcpy of the same bytes. Where the read took 1.8x the memcpy (a KVM guest) CMA made the
 * collectives above faster; where the pins alone made it 4-20x (a PVM guest) it made them 1.5-3x
 * slower. CMA_FAST_RATIO sits between. Between the two, what the read costs beyond the copy, per
 * page, tells whether CMA can still win where data is copied at memory speed: on an EPYC Milan
 * guest (3.0-3.6x, 0.23-0.39 us a page beyond the copy; a 16 MiB read 2x a memcpy of it, as fast as
 * the two copies of the slots) it read the largest AlltoAll(V) of ranks that share cores 1.1-1.4x
 * faster (pick_copy_thresholds); the PVM guest's 1-2 us a page stay slow. CMA_FAIR_PAGE_NS sits
 * between. Costs 64 page faults and ten 256 KiB copies (~0.3 ms on the KVM guest, a few ms on the
 * PVM one).
 */
#define CALIBRATE_BYTES (256u * 1024u)
#define CALIBRATE_ROUNDS 5
#define CMA_FAST_RATIO 2.5
#define CMA_FAIR_PAGE_NS 750

static pthread_once_t calibrate_once = PTHREAD_ONCE_INIT;
static int cma_speed_here = HC_CMA_SLOW;

int hc_shm_cma_speed(int64_t read_ns, int64_t copy_ns, uint64_t bytes)
{
    int64_t page_ns = (read_ns - copy_ns) / (int64_t)(bytes / 4096u > 0 ? bytes / 4096u : 1);

    if ((double)read_ns <= CMA_FAST_RATIO * (double)copy_ns)
        return HC_CMA_FAST;
    return page_ns <= CMA_FAIR_PAGE_NS ? HC_CMA_FAIR : HC_CMA_SLOW;
}

static void calibrate(void)
{
    uint8_t *a = mmap(NULL, 2 * CALIBRATE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *b;
    int64_t best_cma = INT64_MAX, best_copy = INT64_MAX;

    if (a == MAP_FAILED)
        return;
    b = a + CALIBRATE_BYTES;
    (void)madvise(a, 2 * CALIBRATE_BYTES, MADV_NOHUGEPAGE);
    memset(a, 1, 2 * CALIBRATE_BYTES);
    for (int r = 0; r < CALIBRATE_ROUNDS; r++) {
        struct iovec local = {.iov_base = b, .iov_len = CALIBRATE_BYTES};
        struct iovec remote = {.iov_base = a, .iov_len = CALIBRATE_BYTES};
        int64_t t0 = hc_now_ns(), t1, t2;
        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)CALIBRATE_BYTES)
            goto out;
        t1 = hc_now_ns();
        memcpy(b, a, CALIBRATE_BYTES);
        __asm__ volatile("" : : "r"(b) : "memory"); /* the copy is what is timed */
        t2 = hc_now_ns();
        best_cma = t1 - t0 < best_cma ? t1 - t0 : best_cma;
        best_copy = t2 - t1 < best_copy ? t2 - t1 : best_copy;
    }
    cma_speed_here = hc_shm_cma_speed(best_cma, best_copy, CALIBRATE_BYTES);
    HC_DEBUG("process_vm_readv of %u KiB of 4 KiB pages: %.1f us, memcpy %.1f us (%.2f us a page more): %s",
             CALIBRATE_BYTES / 1024, (double)best_cma / 1e3, (double)best_copy / 1e3,
             (double)(best_cma - best_copy) / (CALIBRATE_BYTES / 4096u) / 1e3,
             cma_speed_here == HC_CMA_FAST ? "fast" : cma_speed_here == HC_CMA_FAIR ? "fair" : "slow");
out:
    munmap(a, 2 * CALIBRATE_BYTES);
}

/* Another local rank in another process (whose plain memory a copy would read with CMA)? */
static int other_process(const hc_shm_engine_t *eng)
{
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (eng->pids[i] != eng->pids[eng->me])
            return 1;
    return 0;
}

HcclResult hc_shm_cma_probe(hc_shm_engine_t *eng, hc_boot_t *boot)
{
    const hc_group_t *group = &eng->base.group;
    int32_t *all = calloc(group->comm_size, sizeof(*all));
    int32_t ok = (int32_t)hc_config_int(HC_CFG_CMA), speed = HC_CMA_FAST;
    HcclResult res;

    if (all == NULL)
        return HCCL_E_MEMORY;
    hc_shm_ctrl(eng, eng->me)->self_addr = (uintptr_t)hc_shm_ctrl(eng, eng->me);
    /* Round 1: every rank has published its block's address. */
    HC_CHECK_GOTO(hc_boot_allgather(boot, &ok, sizeof(ok), all), res, out);
    for (uint32_t i = 0; i < eng->nlocal && ok; i++)
        ok = can_attach(eng, i);
    if (ok && other_process(eng)) {
        pthread_once(&calibrate_once, calibrate);
        ok |= cma_speed_here << 1;
    }
    /* Round 2: everyone's verdict (bit 0: can read, bits 1-2: how fast it found it); the slowest
     * rank's speed counts. */
    HC_CHECK_GOTO(hc_boot_allgather(boot, &ok, sizeof(ok), all), res, out);
    eng->cma = 1;
    for (uint32_t k = 0; k < eng->nlocal; k++) {
        int32_t verdict = all[hc_group_rank(group, k)];
        eng->cma &= (verdict & 1) != 0;
        speed = verdict >> 1 < speed ? verdict >> 1 : speed;
    }
    eng->cma_fast = eng->cma && speed == HC_CMA_FAST;
    eng->cma_fair = eng->cma && speed >= HC_CMA_FAIR;
    HC_DEBUG("cross-memory attach between the ranks of this host: %s",
             !eng->cma ? "not allowed" : eng->cma_fast ? "allowed, fast" : eng->cma_fair ? "allowed, fair"
                                                                                          : "allowed, slow");
out:
    free(all);
    return res;
}

/* ---- which buffers are worth a CMA read: huge pages --------------------------------------------- */

/* PAGEMAP_SCAN's interface (include/uapi/linux/fs.h of Linux 6.7), declared here because the C
 * library's headers of older distributions do not have it; an older kernel answers ENOTTY. */
struct hc_page_region {
    uint64_t start, end, categories;
};
struct hc_pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define HC_PAGEMAP_SCAN _IOWR('f', 16, struct hc_pm_scan_arg)
#define HC_PAGE_IS_HUGE (1u << 6)

#define PAGE_BYTES 4096u
#define SCAN_REGIONS 16
#define CACHE_RECHECK_NS (1000 * HC_NS_PER_MS)
/* A buffer counts as huge-page memory when at most 1/SMALL_PAGE_SHARE of its pages are small: each
 * small page costs a CMA read about as much as copying seven pages. */
#define SMALL_PAGE_SHARE 16u

/* Pages of [start, end) that are not huge, counted up to `limit` (the scan stops there). -1: the
 * kernel has no PAGEMAP_SCAN, or it failed. */
static int64_t small_pages(int fd, uint64_t start, uint64_t end, uint64_t limit)
{
    struct hc_page_region regions[SCAN_REGIONS];
    uint64_t found = 0;

    while (start < end && found < limit) {
        struct hc_pm_scan_arg arg = {.size = sizeof(arg), .start = start, .end = end,
                                     .vec = (uintptr_t)regions, .vec_len = SCAN_REGIONS,
                                     .max_pages = limit - found, .category_inverted = HC_PAGE_IS_HUGE,
                                     .category_mask = HC_PAGE_IS_HUGE, .return_mask = HC_PAGE_IS_HUGE};
        int n = ioctl(fd, HC_PAGEMAP_SCAN, &arg);
        if (n < 0)
            return -1;
        for (int k = 0; k < n; k++)
            found += (regions[k].end - regions[k].start) / PAGE_BYTES;
        if (arg.walk_end <= start || (n < SCAN_REGIONS && arg.walk_end >= end))
            break;
        start = arg.walk_end;
    }
    return (int64_t)found;
}

/* Is [buf, buf + bytes) almost all huge pages, as this process maps it now? */
static int scan_huge(hc_shm_engine_t *eng, const void *buf, uint64_t bytes)
{
    uint64_t start = (uintptr_t)buf & ~(uint64_t)(PAGE_BYTES - 1);
    uint64_t end = ((uintptr_t)buf + bytes + PAGE_BYTES - 1) & ~(uint64_t)(PAGE_BYTES - 1);
    uint64_t allowed = (end - start) / PAGE_BYTES / SMALL_PAGE_SHARE;
    int64_t small;

    if (eng->pagemap_fd == -1)
        eng->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (eng->pagemap_fd < 0)
        return 0;
    small = small_pages(eng->pagemap_fd, start, end, allowed + 1);
    if (small < 0) {
        HC_DEBUG("PAGEMAP_SCAN is not available (%s): plain memory is copied through the slots", strerror(errno));
        close(eng->pagemap_fd);
        eng->pagemap_fd = -2; /* never again */
        return 0;
    }
    return (uint64_t)small <= allowed;
}

/* The cached verdict for exactly this range, scanned again when older than CACHE_RECHECK_NS. */
static int huge_backed(hc_shm_engine_t *eng, const void *buf, uint64_t bytes)
{
    int64_t now = hc_coarse_now_ns();
    hc_shm_page_entry_t *e = NULL;

    for (uint32_t k = 0; k < HC_SHM_PAGE_CACHE && e == NULL; k++)
        if (eng->page_cache[k].addr == (uintptr_t)buf && eng->page_cache[k].bytes == bytes)
            e = &eng->page_cache[k];
    if (e != NULL && now - e->checked_ns < CACHE_RECHECK_NS)
        return e->huge;
    if (e == NULL)
        e = &eng->page_cache[eng->page_cache_next++ % HC_SHM_PAGE_CACHE];
    *e = (hc_shm_page_entry_t){.addr = (uintptr_t)buf, .bytes = bytes, .checked_ns = now,
                               .huge = (uint8_t)scan_huge(eng, buf, bytes)};
    return e->huge;
}

int hc_shm_cma_huge(hc_shm_engine_t *eng, const void *buf, uint64_t bytes)
{
    return eng->cma && buf != NULL && bytes > 0 && eng->pagemap_fd != -2 && huge_backed(eng, buf, bytes);
}

/* Op bytes of coll from which any plain buffer, whatever its pages, is read with CMA. */
static uint64_t plain_min(const hc_shm_engine_t *eng, hc_coll_t coll)
{
    uint64_t calibrated = UINT64_MAX;

    if (coll == HC_COLL_ALLGATHER || coll == HC_COLL_ALLGATHERV)
        calibrated = eng->cma_gather_min;
    else if (coll == HC_COLL_ALLTOALL || coll == HC_COLL_ALLTOALLV || coll == HC_COLL_ALLTOALLVC)
        calibrated = eng->cma_alltoall_min;
    else if (coll == HC_COLL_SCATTER)
        calibrated = eng->cma_scatter_min;
    else if (coll == HC_COLL_ALLREDUCE)
        calibrated = eng->cma_allreduce_min;

    return calibrated < eng->cma_min ? calibrated : eng->cma_min;
}

/* ---- measured choice ------------------------------------------------------------------------------ */

/*
 * For the collectives that only move data (but AlltoAllVC, which keeps the fixed sizes), whether
 * CMA or the slots is faster on 4 KiB pages depends on what the program does with the buffer
 * between calls, which the library cannot see: left untouched (benchmarks), the readers find its
 * lines in their caches and CMA is 1.2-1.5x faster at 64-256 KiB; written before every call
 * (programs), the lines sit dirty in the owner's cache and CMA is 1.1-4x slower
 * (docs/performance.md). So from cma_choose_min the owner times its own calls of
 * each (collective, size class) on both paths and keeps the faster; the sender of an exchange
 * (hc_shm_cma_exchange) does the same for its sends, once per op, in the class of its largest such
 * send. A sample runs from the choice (the op's first step; an exchange's first send) to the choice
 * of the next op of its class on this rank: it includes waiting for the readers, and what
 * the path costs the program after the op (a buffer the peers read in place has its lines in their
 * caches, and the program's next writes to it fetch them back: timing the op alone, a written
 * buffer's CMA calls looked 2-8x faster than they were, and an exchange of 64 KiB chose CMA at 101
 * us a call against 42 through the slots). The first call after a change of path is no sample (it
 * pays for the other path's last call: lines, pages). A path's estimate is the least of its last
 * HC_SHM_CHOICE_SAMPLES samples. Learning: two calls on each path in turn, from first_path's, until
 * each has two samples; then the faster by the margin below, else the fixed sizes' path
 * (fixed_path). Then the chosen path, and a probe of the other (two calls,
 * compared afresh: its older samples are dropped) after PROBE_FIRST calls, twice as many each time
 * it loses, up to PROBE_MAX, and at once when the chosen path's estimate rises above the other's. A
 * probe switches when its sample is an eighth below the chosen path's estimate: a guest's noise
 * moves a call by 2-5x, and samples far apart in time would make the choice follow it.
 *
 * A mapped buffer (aclrtMalloc memory in the owner's arena, which its peers map, or ranks that are
 * threads of one process) is chosen for alike (hc_shm_mapped_readable), in place against the slots,
 * with choices of its own: a program may pass both kinds of buffer to the same collective.
 */
#define CHOICE_COLLS 7
#define PROBE_FIRST 16u
#define PROBE_MAX 1024u

static int choice_coll(hc_coll_t coll)
{
    switch (coll) {
    case HC_COLL_BROADCAST:
        return 0;
    case HC_COLL_SCATTER:
        return 1;
    case HC_COLL_ALLGATHER:
        return 2;
    case HC_COLL_ALLGATHERV:
        return 3;
    case HC_COLL_BATCH_SENDRECV: /* the sends of an exchange (hc_shm_cma_exchange) */
        return 4;
    case HC_COLL_ALLTOALL:
        return 5;
    case HC_COLL_ALLTOALLV:
        return 6;
    default:
        return -1;
    }
}

static uint64_t choose_min(const hc_shm_engine_t *eng, hc_coll_t coll)
{
    if (coll == HC_COLL_BATCH_SENDRECV)
        return eng->p2p_choose_min;
    return choice_coll(coll) >= 0 ? eng->cma_choose_min : UINT64_MAX;
}

/* Op bytes from which plain memory no longer measures. AlltoAll(V) measures only below its fixed
 * CMA size: above it, where CMA was 1.5-1.8x faster untouched and within 10% touched, a run of few
 * calls spent its learning on the slots (2 ranks, 8 MiB, 5 calls after 2: 696-744 us a call with
 * the fixed size, 853-1138 measuring). */
static uint64_t choose_max(const hc_shm_engine_t *eng, hc_coll_t coll)
{
    return coll == HC_COLL_ALLTOALL || coll == HC_COLL_ALLTOALLV ? plain_min(eng, coll) : UINT64_MAX;
}

uint64_t hc_shm_mapped_gate(const hc_shm_engine_t *eng, hc_coll_t coll)
{
    switch (coll) {
    case HC_COLL_BROADCAST:
        return eng->bcast_choose_min;
    case HC_COLL_SCATTER:
    case HC_COLL_ALLTOALL:
    case HC_COLL_ALLTOALLV:
        return eng->zc_choose_min;
    case HC_COLL_ALLGATHER:
    case HC_COLL_ALLGATHERV:
        return eng->gather_choose_min;
    default:
        return UINT64_MAX;
    }
}

static uint32_t samples(const hc_shm_choice_t *c, int path)
{
    uint32_t n = 0;

    for (int k = 0; k < HC_SHM_CHOICE_SAMPLES; k++)
        n += c->ns[path][k] != 0;
    return n;
}

static uint32_t estimate(const hc_shm_choice_t *c, int path)
{
    return hc_shm_least_sample(c->ns[path], HC_SHM_CHOICE_SAMPLES);
}

/* The size class of op_bytes (> 0): its highest bit, the last class for all larger ones. */
static uint32_t size_class(uint64_t op_bytes)
{
    uint32_t bit = (uint32_t)(63 - __builtin_clzll(op_bytes));

    return bit < HC_SHM_CHOICE_CLASSES ? bit : HC_SHM_CHOICE_CLASSES - 1;
}

/* The path the fixed sizes give op_bytes of op on plain memory (no measuring): below the measured
 * choice's threshold, and where the samples cannot tell the paths apart. */
static int fixed_path(const hc_shm_engine_t *eng, const hc_op_t *op, uint64_t op_bytes)
{
    if (op->sig.coll == HC_COLL_BATCH_SENDRECV)
        return op_bytes >= eng->p2p_cma_sym_min;
    return op_bytes >= plain_min(eng, (hc_coll_t)op->sig.coll);
}

/* Is path's estimate below the other's by the margin? */
static int faster(const hc_shm_choice_t *c, int path)
{
    return hc_shm_estimate_below(estimate(c, path), estimate(c, !path));
}

static void decide(const hc_op_t *op, hc_shm_choice_t *c, int choice, uint64_t op_bytes, int mapped)
{
    const char *in_place = mapped ? "in place" : "with CMA";

    HC_DEBUG("%s of %llu+ bytes: peers read this rank's %s buffer %s (%.1f us per 64 KiB %s, %.1f through the "
             "slots, after %u calls)", hc_coll_name(op->sig.coll), 1ull << size_class(op_bytes),
             mapped ? "mapped" : "plain", choice ? in_place : "through the slots", estimate(c, 1) / 1e3, in_place,
             estimate(c, 0) / 1e3, c->calls);
    c->choice = (uint8_t)choice;
    c->since_probe = 0;
    c->probe_every = PROBE_FIRST;
}

/* The class's last op (ended, kept, succeeded) took from its start until now: a sample, and what it
 * decides. Learning ends on the faster path by the margin, and where neither is (a program whose
 * calls are far apart, each sample mostly its own work) on the fixed sizes' path for plain memory,
 * on the slots for mapped memory. */
static void take_sample(const hc_shm_engine_t *eng, const hc_op_t *op, hc_shm_choice_t *c, int64_t now, int mapped)
{
    int path = c->open_path;

    if (!c->open_ok)
        return;
    c->open_ok = 0;
    if (!c->open_kept || now <= c->open_since_ns)
        return;
    hc_shm_add_sample(c->ns[path], &c->next[path], HC_SHM_CHOICE_SAMPLES, (uint64_t)(now - c->open_since_ns),
                      c->open_bytes);
    if (c->probe_every == 0) { /* learning, until each path has two samples */
        if (samples(c, 0) >= 2 && samples(c, 1) >= 2)
            decide(op, c, faster(c, 1) || (!faster(c, 0) && !mapped && fixed_path(eng, op, c->open_bytes)),
                   c->open_bytes, mapped);
    } else if (path != c->choice) { /* a probe */
        if (faster(c, !c->choice))
            decide(op, c, !c->choice, c->open_bytes, mapped);
        else
            c->probe_every = c->probe_every * 2 < PROBE_MAX ? c->probe_every * 2 : PROBE_MAX;
    } else if (faster(c, !c->choice)) {
        c->since_probe = c->probe_every; /* the chosen path got slower than the other was: probe it now */
    }
}

/*
 * The path a class's learning starts with: the choice of the nearest size class of the same
 * collective and buffer kind that has decided (a program's buffers are untouched or written at
 * every size alike), else the fixed sizes' path. A size run only a few times (a benchmark's 1-5
 * calls of 32-256 MiB) is then not spent on the path that lost at the sizes below: AlltoAll on
 * plain memory, 8 MiB, 20 calls after 2: 808 us a call when learning began on the slots, against
 * 740 with CMA forced.
 */
static int first_path(const hc_shm_engine_t *eng, const hc_op_t *op, const hc_shm_choice_t *row, uint32_t class,
                      uint64_t op_bytes, int mapped)
{
    for (uint32_t d = 1; d < HC_SHM_CHOICE_CLASSES; d++) {
        if (class >= d && row[class - d].probe_every != 0)
            return row[class - d].choice;
        if (class + d < HC_SHM_CHOICE_CLASSES && row[class + d].probe_every != 0)
            return row[class + d].choice;
    }
    return !mapped && fixed_path(eng, op, op_bytes);
}

/* The path op's source takes (1: in place, with CMA for plain memory), timed until the next op of its
 * class begins; -1: no choice (out of memory). */
static int choose(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t op_bytes, int mapped)
{
    hc_shm_choice_t *row, *c;
    int64_t now = hc_now_ns();
    int path;

    if (eng->choices == NULL &&
        (eng->choices = calloc(CHOICE_COLLS * 2 * HC_SHM_CHOICE_CLASSES, sizeof(*eng->choices))) == NULL)
        return -1;
    row = &eng->choices[(choice_coll((hc_coll_t)op->sig.coll) * 2 + mapped) * HC_SHM_CHOICE_CLASSES];
    c = &row[size_class(op_bytes)];
    if (c->calls == 0)
        c->lead = c->last = (uint8_t)first_path(eng, op, row, size_class(op_bytes), op_bytes, mapped);
    take_sample(eng, op, c, now, mapped);
    c->calls++;
    if (c->probe_every == 0) { /* learning */
        path = (int)((c->calls - 1) / 2 % 2) ^ c->lead;
    } else if (c->since_probe >= c->probe_every) { /* a probe: two calls, the second measured */
        path = !c->choice;
        if (c->last != path)
            memset(c->ns[path], 0, sizeof(c->ns[path])); /* compared afresh: the old samples are stale */
        else
            c->since_probe = 0;
    } else {
        path = c->choice;
        c->since_probe++;
    }
    eng->timing = c;
    eng->timing_seq = op->seq;
    eng->timing_bytes = op_bytes;
    eng->timing_path = (uint8_t)path;
    eng->timing_kept = c->last == path;
    eng->timing_since_ns = now;
    c->last = (uint8_t)path;
    return path;
}

void hc_shm_cma_op_end(hc_shm_engine_t *eng, const hc_op_t *op, HcclResult res)
{
    hc_shm_choice_t *c = eng->timing;

    if (c == NULL || eng->timing_seq != op->seq)
        return;
    eng->timing = NULL;
    c->open_ok = res == HCCL_SUCCESS;
    c->open_kept = eng->timing_kept;
    c->open_path = eng->timing_path;
    c->open_since_ns = eng->timing_since_ns;
    c->open_bytes = eng->timing_bytes;
}

int hc_shm_cma_readable(hc_shm_engine_t *eng, const hc_op_t *op, const void *buf, uint64_t bytes, uint64_t op_bytes)
{
    hc_coll_t coll = (hc_coll_t)op->sig.coll;
    int path;

    if (!eng->cma || buf == NULL || bytes == 0)
        return 0;
    if (op_bytes >= eng->cma_huge_min && hc_shm_cma_huge(eng, buf, bytes))
        return 1;
    if (op_bytes >= choose_min(eng, coll) && op_bytes < choose_max(eng, coll) &&
        (path = choose(eng, op, op_bytes, 0)) >= 0)
        return path;
    return fixed_path(eng, op, op_bytes);
}

int hc_shm_mapped_readable(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t op_bytes, uint64_t in_place_min)
{
    int path;

    if (op_bytes >= in_place_min)
        return 1;
    if (op_bytes >= hc_shm_mapped_gate(eng, (hc_coll_t)op->sig.coll) && (path = choose(eng, op, op_bytes, 1)) >= 0)
        return path;
    return 0;
}

int hc_shm_cma_may_read(hc_shm_engine_t *eng, const hc_op_t *op, const void *buf, uint64_t bytes)
{
    hc_coll_t coll = (hc_coll_t)op->sig.coll;

    if (!eng->cma || buf == NULL || bytes == 0)
        return 0;
    return plain_min(eng, coll) != UINT64_MAX || choose_min(eng, coll) != UINT64_MAX ||
           (eng->cma_huge_min != UINT64_MAX && hc_shm_cma_huge(eng, buf, bytes));
}

int hc_shm_cma_exchange(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t bytes, uint64_t op_bytes)
{
    int path;

    if (!eng->cma || op->sig.coll != HC_COLL_BATCH_SENDRECV)
        return 0;
    if (bytes >= eng->p2p_choose_min) {
        if (eng->timing != NULL && eng->timing_seq == op->seq)
            return eng->timing_path; /* another send of the same op: one choice, one sample */
        if ((path = choose(eng, op, op_bytes, 0)) >= 0)
            return path;
    }
    return fixed_path(eng, op, bytes);
}

int hc_shm_cma_allreduce(const hc_shm_engine_t *eng, uint64_t op_bytes)
{
    return eng->cma && eng->nlocal > 1 && op_bytes >= plain_min(eng, HC_COLL_ALLREDUCE);
}

int hc_shm_cma_plain(const hc_shm_engine_t *eng)
{
    uint64_t least = eng->cma_min;

    least = eng->cma_gather_min < least ? eng->cma_gather_min : least;
    least = eng->cma_alltoall_min < least ? eng->cma_alltoall_min : least;
    least = eng->cma_scatter_min < least ? eng->cma_scatter_min : least;
    least = eng->cma_allreduce_min < least ? eng->cma_allreduce_min : least;
    least = eng->p2p_cma_min < least ? eng->p2p_cma_min : least;
    least = eng->p2p_cma_sym_min < least ? eng->p2p_cma_sym_min : least;
    least = eng->cma_choose_min < least ? eng->cma_choose_min : least;
    return eng->cma && least != UINT64_MAX;
}

uint64_t hc_shm_cma_gate(const hc_shm_engine_t *eng, hc_coll_t coll)
{
    uint64_t plain = plain_min(eng, coll), chosen = choose_min(eng, coll);

    if (!eng->cma)
        return UINT64_MAX;
    plain = chosen < plain ? chosen : plain;
    return plain < eng->cma_huge_min ? plain : eng->cma_huge_min;
}

void hc_shm_cma_close(hc_shm_engine_t *eng)
{
    if (eng->pagemap_fd >= 0)
        close(eng->pagemap_fd);
    eng->pagemap_fd = -1;
    free(eng->choices);
    eng->choices = NULL;
}

/* ---- the copy ------------------------------------------------------------------------------------ */

/* Move bytes between this process's `local` and local rank i's `addr` with process_vm_readv
 * (write 0) or process_vm_writev (write 1), logging why it failed. */
static HcclResult cma_move(hc_shm_engine_t *eng, uint32_t i, uint8_t *local_buf, uint64_t addr, size_t bytes,
                           int write)
{
    while (bytes > 0) {
        struct iovec local = {.iov_base = local_buf, .iov_len = bytes};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = bytes};
        ssize_t n = write ? process_vm_writev(eng->pids[i], &local, 1, &remote, 1, 0)
                          : process_vm_readv(eng->pids[i], &local, 1, &remote, 1, 0);
        if (n < 0 && errno == ESRCH) {
            HC_ERROR("copy failed: rank %u (pid %d) exited while this rank waited for it (%s its memory)",
                     hc_group_rank(&eng->base.group, i), eng->pids[i], write ? "writing" : "reading");
            return HCCL_E_REMOTE;
        }
        if (n <= 0) {
            HC_ERROR("%s %zu bytes of rank %u (pid %d) with %s failed: %s", write ? "writing" : "reading", bytes,
                     hc_group_rank(&eng->base.group, i), eng->pids[i],
                     write ? "process_vm_writev" : "process_vm_readv", n < 0 ? strerror(errno) : "no progress");
            return HCCL_E_SYSCALL;
        }
        local_buf += n;
        addr += (uint64_t)n;
        bytes -= (size_t)n;
    }
    return HCCL_SUCCESS;
}

/* Where a peer's buffer is in this process: in the mapped arena or the same process, else NULL
 * after checking that the CMA call may be tried (*res_p says what failed otherwise). */
static uint8_t *peer_direct(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, uint64_t addr, int64_t off,
                            size_t bytes, HcclResult *res_p)
{
    uint8_t *direct = hc_shm_peer_buffer(eng, i, addr, off, bytes);

    *res_p = HCCL_SUCCESS;
    if (direct != NULL)
        return direct;
    if (hc_shm_peer_range_bad(eng, i, off, bytes))
        *res_p = HCCL_E_INTERNAL;
    else if (!eng->cma)
        *res_p = hc_shm_unreachable(eng, op, i);
    return NULL;
}

HcclResult hc_shm_copy_from_peer(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, void *dst, uint64_t addr,
                                 int64_t off, size_t bytes)
{
    HcclResult res;
    uint8_t *src = peer_direct(eng, op, i, addr, off, bytes, &res);

    if (src != NULL) {
        hc_copy(dst, src, bytes);
        return HCCL_SUCCESS;
    }
    return res != HCCL_SUCCESS ? res : cma_move(eng, i, dst, addr, bytes, 0);
}

HcclResult hc_shm_copy_to_peer(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, uint64_t addr, int64_t off,
                               const void *src, size_t bytes)
{
    HcclResult res;
    uint8_t *dst = peer_direct(eng, op, i, addr, off, bytes, &res);

    if (dst != NULL) {
        hc_copy(dst, src, bytes);
        return HCCL_SUCCESS;
    }
    return res != HCCL_SUCCESS ? res : cma_move(eng, i, (uint8_t *)(uintptr_t)src, addr, bytes, 1);
}
