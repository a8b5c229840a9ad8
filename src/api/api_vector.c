/* Checks and op construction for the calls with count arrays (V variants), AlltoAll and
 * BatchSendRecv. */
#include <stdlib.h>
#include <string.h>

#include "hc_api.h"
#include "hc_check.h"
#include "hc_comm.h"
#include "hc_dtype.h"

/* Sum of n counts, failing on overflow. */
static HcclResult sum_counts(const hc_call_t *call, const uint64_t *counts, size_t n, uint64_t *sum_p)
{
    uint64_t sum = 0;

    for (size_t i = 0; i < n; i++) {
        if (counts[i] > UINT64_MAX - sum) {
            HC_ERROR("%s: the counts overflow 64 bits", call->fn);
            return HCCL_E_PARA;
        }
        sum += counts[i];
    }
    *sum_p = sum;
    return HCCL_SUCCESS;
}

static HcclResult need_array(const hc_call_t *call, const void *array, const char *name)
{
    if (array == NULL) {
        HC_ERROR("%s: %s is NULL", call->fn, name);
        return HCCL_E_PTR;
    }
    return HCCL_SUCCESS;
}

HcclResult hc_api_check_alltoall(const hc_call_t *call)
{
    if (call->recv_dtype != call->dtype || call->recv_count != call->count) {
        HC_ERROR("%s: send (%llu %s) and receive (%llu %s) must describe the same block per rank", call->fn,
                 (unsigned long long)call->count, hc_dtype_name(call->dtype), (unsigned long long)call->recv_count,
                 hc_dtype_name(call->recv_dtype));
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

HcclResult hc_api_check_vectors(const hc_call_t *call, const hc_comm_t *comm, uint64_t *moved_p)
{
    uint32_t n = comm->nranks;
    uint64_t sent = 0, received = 0;

    switch (call->coll) {
    case HC_COLL_ALLGATHERV:
        HC_CHECK(need_array(call, call->recv_counts, "recvCounts"));
        HC_CHECK(need_array(call, call->recv_displs, "recvDispls"));
        if (((const uint64_t *)call->recv_counts)[comm->rank] != call->count) {
            HC_ERROR("%s: sendCount %llu differs from recvCounts[%u] = %llu", call->fn,
                     (unsigned long long)call->count, comm->rank,
                     (unsigned long long)((const uint64_t *)call->recv_counts)[comm->rank]);
            return HCCL_E_PARA;
        }
        return sum_counts(call, call->recv_counts, n, moved_p);
    case HC_COLL_REDUCE_SCATTERV:
        HC_CHECK(need_array(call, call->counts, "sendCounts"));
        HC_CHECK(need_array(call, call->displs, "sendDispls"));
        if (((const uint64_t *)call->counts)[comm->rank] != call->count) {
            HC_ERROR("%s: recvCount %llu differs from sendCounts[%u] = %llu", call->fn,
                     (unsigned long long)call->count, comm->rank,
                     (unsigned long long)((const uint64_t *)call->counts)[comm->rank]);
            return HCCL_E_PARA;
        }
        return sum_counts(call, call->counts, n, moved_p);
    case HC_COLL_ALLTOALLV:
        HC_CHECK(need_array(call, call->counts, "sendCounts"));
        HC_CHECK(need_array(call, call->displs, "sdispls"));
        HC_CHECK(need_array(call, call->recv_counts, "recvCounts"));
        HC_CHECK(need_array(call, call->recv_displs, "rdispls"));
        HC_CHECK(sum_counts(call, call->counts, n, &sent));
        HC_CHECK(sum_counts(call, call->recv_counts, n, &received));
        break;
    default: /* HC_COLL_ALLTOALLVC: this rank's row is what it sends, its column what it receives */
        HC_CHECK(need_array(call, call->counts, "sendCountMatrix"));
        HC_CHECK(sum_counts(call, call->counts, (size_t)n * n, moved_p));
        for (uint32_t j = 0; j < n; j++) {
            sent += ((const uint64_t *)call->counts)[(size_t)comm->rank * n + j];
            received += ((const uint64_t *)call->counts)[(size_t)j * n + comm->rank];
        }
        break;
    }
    if ((sent > 0 && call->sendbuf == NULL) || (received > 0 && call->recvbuf == NULL)) {
        HC_ERROR("%s: the %s buffer is NULL with %llu elements to move", call->fn, sent > 0 && call->sendbuf == NULL ? "send" : "receive",
                 (unsigned long long)(sent > 0 && call->sendbuf == NULL ? sent : received));
        return HCCL_E_PTR;
    }
    if (call->recv_dtype != call->dtype) {
        HC_ERROR("%s: sendType %s and recvType %s differ", call->fn, hc_dtype_name(call->dtype),
                 hc_dtype_name(call->recv_dtype));
        return HCCL_E_PARA;
    }
    /* AlltoAllV is collective even for a rank that moves nothing: report at least 1 so it takes
     * part. AlltoAllVC: the whole matrix (same on every rank) decides. Buffers were checked here. */
    if (call->coll == HC_COLL_ALLTOALLV)
        *moved_p = 1 + sent + received;
    return HCCL_SUCCESS;
}

HcclResult hc_api_check_batch(const hc_call_t *call, const hc_comm_t *comm, uint64_t *moved_p)
{
    uint64_t moved = 0;

    if (call->nitems > 0 && call->items == NULL) {
        HC_ERROR("%s: sendRecvInfo is NULL with itemNum %u", call->fn, call->nitems);
        return HCCL_E_PTR;
    }
    for (uint32_t i = 0; i < call->nitems; i++) {
        const HcclSendRecvItem *item = &call->items[i];
        if (item->sendRecvType != HCCL_SEND && item->sendRecvType != HCCL_RECV) {
            HC_ERROR("%s: item %u has type %d (HCCL_SEND or HCCL_RECV expected)", call->fn, i, (int)item->sendRecvType);
            return HCCL_E_PARA;
        }
        if (hc_dtype_size(item->dataType) == 0) {
            HC_ERROR("%s: item %u has unsupported data type %s", call->fn, i, hc_dtype_name(item->dataType));
            return HCCL_E_PARA;
        }
        if (item->remoteRank >= comm->nranks) {
            HC_ERROR("%s: item %u names peer %u of a communicator of %u ranks", call->fn, i, item->remoteRank,
                     comm->nranks);
            return HCCL_E_PARA;
        }
        if (item->count > 0 && item->buf == NULL) {
            HC_ERROR("%s: item %u has a NULL buffer with count %llu", call->fn, i, (unsigned long long)item->count);
            return HCCL_E_PTR;
        }
        moved += item->count;
    }
    *moved_p = moved;
    return HCCL_SUCCESS;
}

void hc_api_point_vectors(hc_op_t *op, const hc_call_t *call, const hc_comm_t *comm)
{
    size_t n = comm->nranks;

    switch (call->coll) {
    case HC_COLL_ALLGATHERV:
        op->recv_counts = (uint64_t *)(uintptr_t)call->recv_counts;
        op->recv_displs = (uint64_t *)(uintptr_t)call->recv_displs;
        op->sig.digest = hc_op_digest(op->recv_counts, n);
        break;
    case HC_COLL_REDUCE_SCATTERV:
        op->counts = (uint64_t *)(uintptr_t)call->counts;
        op->displs = (uint64_t *)(uintptr_t)call->displs;
        op->sig.digest = hc_op_digest(op->counts, n);
        break;
    case HC_COLL_ALLTOALLV: /* counts differ per rank by design; pairs are checked by the engine */
        op->counts = (uint64_t *)(uintptr_t)call->counts;
        op->displs = (uint64_t *)(uintptr_t)call->displs;
        op->recv_counts = (uint64_t *)(uintptr_t)call->recv_counts;
        op->recv_displs = (uint64_t *)(uintptr_t)call->recv_displs;
        break;
    case HC_COLL_ALLTOALLVC:
        op->counts = (uint64_t *)(uintptr_t)call->counts;
        op->sig.digest = hc_op_digest(op->counts, n * n);
        break;
    default:
        return;
    }
    op->vectors_borrowed = 1;
}

HcclResult hc_api_attach_vectors(hc_op_t *op, const hc_call_t *call, const hc_comm_t *comm)
{
    if (call->coll == HC_COLL_BATCH_SENDRECV) {
        if (hc_op_items(op, call->nitems) != HCCL_SUCCESS)
            return HCCL_E_MEMORY;
        memcpy(op->items, call->items, call->nitems * sizeof(*op->items));
        op->nitems = call->nitems;
        return HCCL_SUCCESS;
    }
    hc_api_point_vectors(op, call, comm);
    if (!op->vectors_borrowed || hc_op_own_vectors(op))
        return HCCL_SUCCESS;
    HC_ERROR("%s: out of memory copying the count arrays", call->fn);
    return HCCL_E_MEMORY;
}
