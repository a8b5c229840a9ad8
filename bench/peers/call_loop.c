/*
 * The C side of bench/python_bench.py's overhead figure: the same blocking AllReduce loop as the
 * Python one (enqueue, then synchronise, per call), on the same communicator, stream and buffer,
 * loaded into the same processes with ctypes. Python's cost per call is the difference.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <time.h>

#include <acl/acl.h>
#include <hccl/hccl.h>

double hostccl_bench_allreduce_loop(HcclComm comm, aclrtStream stream, void *buf, uint64_t count, int dtype,
                                    int iters);

/* Seconds for `iters` calls, or -1 if one failed. */
double hostccl_bench_allreduce_loop(HcclComm comm, aclrtStream stream, void *buf, uint64_t count, int dtype,
                                    int iters)
{
    struct timespec start, end;

    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < iters; i++) {
        if (HcclAllReduce(buf, buf, count, (HcclDataType)dtype, HCCL_REDUCE_SUM, comm, stream) != HCCL_SUCCESS ||
            aclrtSynchronizeStream(stream) != ACL_SUCCESS)
            return -1.0;
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    return (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) * 1e-9;
}
