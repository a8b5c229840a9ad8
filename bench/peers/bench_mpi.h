/*
 * One call of a benchmarked collective with MPI, as both MPI peers time it (mpi_coll.c alone,
 * side_by_side.c next to hostccl): fp32, sum, root 0; Send/Recv exchanges with rank ^ 1 (a rank
 * without a partner does nothing); AlltoAllV takes counts and displs (unused otherwise).
 */
#ifndef BENCH_MPI_H
#define BENCH_MPI_H

#include <mpi.h>

#include "bench_common.h"

static inline int bench_mpi_launch(int coll, int rank, int nranks, void *send, void *recv, int count,
                                   const int *counts, const int *displs)
{
    int partner = rank ^ 1;

    switch (coll) {
    case BENCH_ALL_REDUCE:
        return MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case BENCH_ALL_GATHER:
        return MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD);
    case BENCH_REDUCE_SCATTER:
        return MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case BENCH_BROADCAST:
        return MPI_Bcast(send, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    case BENCH_REDUCE:
        return MPI_Reduce(send, recv, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
    case BENCH_ALLTOALL:
        return MPI_Alltoall(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD);
    case BENCH_SCATTER:
        return MPI_Scatter(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    case BENCH_ALLTOALLV:
        return MPI_Alltoallv(send, counts, displs, MPI_FLOAT, recv, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
    case BENCH_SEND_RECV:
        if (partner >= nranks)
            return MPI_SUCCESS;
        return MPI_Sendrecv(send, count, MPI_FLOAT, partner, 0, recv, count, MPI_FLOAT, partner, 0, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE);
    default:
        return MPI_ERR_OTHER;
    }
}

#endif /* BENCH_MPI_H */
