/* The MPI side of bench/overlap.py: the measurements of overlap_common.c over MPI_Allreduce and its
 * nonblocking form (MPI_Iallreduce, compute, MPI_Wait: what an MPI program writes to overlap).
 * Built with mpicc.openmpi and with mpicc.mpich; malloc buffers, as an MPI program has.
 *
 *   mpirun -np 2 overlap_mpi.openmpi [--sizes 8,64K,4M] [--quick] [...]
 */
#define _POSIX_C_SOURCE 200809L
#include "overlap_common.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *send, *recv, *recv2;
    MPI_Request req, slot_req[2];
} mpi_ctx_t;

static int mstart(void *arg, uint64_t bytes)
{
    mpi_ctx_t *c = arg;
    int count = (int)(bytes / 4 ? bytes / 4 : 1);

    return MPI_Iallreduce(c->send, c->recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &c->req) != MPI_SUCCESS;
}

static int mwait(void *arg)
{
    return MPI_Wait(&((mpi_ctx_t *)arg)->req, MPI_STATUS_IGNORE) != MPI_SUCCESS;
}

static int mstart_slot(void *arg, uint64_t bytes, int slot)
{
    mpi_ctx_t *c = arg;
    int count = (int)(bytes / 4 ? bytes / 4 : 1);

    return MPI_Iallreduce(c->send, slot ? c->recv2 : c->recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                          &c->slot_req[slot]) != MPI_SUCCESS;
}

static int mwait_slot(void *arg, int slot)
{
    return MPI_Wait(&((mpi_ctx_t *)arg)->slot_req[slot], MPI_STATUS_IGNORE) != MPI_SUCCESS;
}

static int mblocking(void *arg, uint64_t bytes)
{
    mpi_ctx_t *c = arg;
    int count = (int)(bytes / 4 ? bytes / 4 : 1);

    return MPI_Allreduce(c->send, c->recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS;
}

static int mbarrier(void *arg)
{
    (void)arg;
    return MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS;
}

static int mmax_all(void *arg, double *values, int n)
{
    (void)arg;
    return MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    mpi_ctx_t c = {0};
    overlap_opts_t opts;
    uint64_t max_bytes = 64;
    int rank, nranks, res;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (overlap_parse(argc, argv, &opts) != 0) {
        MPI_Finalize();
        return 2;
    }
#ifdef OVERLAP_MPI_NAME
    opts.impl_name = OVERLAP_MPI_NAME;
#else
    opts.impl_name = "mpi";
#endif
    opts.mem = "malloc";
    for (int i = 0; i < opts.nsizes; i++)
        max_bytes = opts.sizes[i] > max_bytes ? opts.sizes[i] : max_bytes;
    c.send = calloc(1, max_bytes);
    c.recv = calloc(1, max_bytes);
    c.recv2 = calloc(1, max_bytes);
    if (c.send == NULL || c.recv == NULL || c.recv2 == NULL) {
        fprintf(stderr, "overlap_mpi: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    overlap_impl_t impl = {.ctx = &c, .rank = rank, .nranks = nranks, .start = mstart, .wait = mwait,
                           .start_slot = mstart_slot, .wait_slot = mwait_slot,
                           .blocking = mblocking, .barrier = mbarrier, .max_all = mmax_all};
    res = overlap_run(&impl, &opts);
    free(c.send);
    free(c.recv);
    free(c.recv2);
    MPI_Finalize();
    return res == 0 ? 0 : 1;
}
