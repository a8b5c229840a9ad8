/* Shared by the overlap drivers (bench/overlap.py): the measurements, written once against a small
 * table of calls that hostccl (overlap_hccl.c) and each MPI (overlap_mpi.c) fill in, so that every
 * implementation is timed by the same code.
 *
 * Per size, on every rank (fp32 sum AllReduce):
 *   bare   the op alone: enqueue + synchronise back to back (MPI_Allreduce), best of 3 batches of
 *          the average per call;
 *   sleep  rank 0 enqueues, sleeps, synchronises; the others enqueue and synchronise at once. The
 *          peers' wait is counted from the later of the two enqueues (same host, same clock) to the
 *          end of their synchronise, so barrier skew is not counted; median over the rounds;
 *   cold   every rank sleeps as long, then a barrier and the blocking op: the op as it runs after
 *          an idle spell (cold caches and cores), the floor of the sleep test's peer wait; slowest
 *          rank, median over the rounds;
 *   seq    the op (blocking) then compute(C);
 *   ovl    enqueue, compute(C), synchronise (MPI_Iallreduce, compute, MPI_Wait);
 *          seq and ovl run in alternating blocks of rounds; each block starts with untimed rounds (a
 *          library that adapts to the pattern may learn there); median per rank, slowest rank kept;
 *   pipe   pipelined (double buffering): round r enqueues op r+1 and records its event, computes,
 *          and waits for op r's event (MPI: its request), so that the stream always holds the next
 *          op behind the one waited for; per-round median after untimed rounds, slowest rank kept.
 * compute(C) is a fixed amount of arithmetic (a dependent chain), calibrated to C microseconds on an
 * idle core: if something shares the core with it, it takes longer, as real compute would.
 */
#ifndef OVERLAP_COMMON_H
#define OVERLAP_COMMON_H

#include <stdint.h>

typedef struct {
    void *ctx;
    int rank;
    int nranks;
    /* Start the AllReduce of `bytes` (nonblocking: enqueue / MPI_Iallreduce); wait for it. */
    int (*start)(void *ctx, uint64_t bytes);
    int (*wait)(void *ctx);
    /* The same into buffer `slot` (0 or 1), waited for by slot: two ops in flight at once (HcclAllReduce +
     * aclrtRecordEvent, aclrtSynchronizeEvent / MPI_Iallreduce, MPI_Wait on the slot's request). */
    int (*start_slot)(void *ctx, uint64_t bytes, int slot);
    int (*wait_slot)(void *ctx, int slot);
    /* The op as a blocking call (HcclAllReduce + aclrtSynchronizeStream / MPI_Allreduce). */
    int (*blocking)(void *ctx, uint64_t bytes);
    int (*barrier)(void *ctx);
    /* values[0..n) := the maximum over ranks, on every rank. */
    int (*max_all)(void *ctx, double *values, int n);
} overlap_impl_t;

typedef struct {
    uint64_t *sizes;
    int nsizes;
    int quick;
    double sleep_ms;        /* how long rank 0 sleeps after enqueueing */
    double compute_factor;  /* C = factor * bare */
    int compute_ranks;      /* -1: every rank computes; r: only rank r (the others synchronise at once) */
    int phases;             /* OVERLAP_PHASE_* bits */
    const char *impl_name;
    const char *mem;        /* buffer kind, for the output */
} overlap_opts_t;

#define OVERLAP_PHASE_SLEEP 1
#define OVERLAP_PHASE_OVERLAP 2

/* Parse the common options (argv[i..]); returns 0, or -1 after printing usage. */
int overlap_parse(int argc, char **argv, overlap_opts_t *opts);

/* Run every size; rank 0 prints one JSON line per size, prefixed "OVERLAP ". 0 on success. */
int overlap_run(const overlap_impl_t *impl, const overlap_opts_t *opts);

/* A blocking loop of `iters` ops of `bytes` (for callgrind and latency); rank 0 prints
 * "LOOP <us per op>", the slowest rank's average. */
int overlap_loop(const overlap_impl_t *impl, uint64_t bytes, long iters);

double overlap_now_us(void);

#endif /* OVERLAP_COMMON_H */
