/*
 * Argument checking and op construction for every collective and point-to-point call
 * (DESIGN.md 7). Order of checks, each with its own log line: communicator (NULL: HCCL_E_PTR,
 * unknown/destroyed: HCCL_E_PARA), data type, reduction, root/peer range, then count 0 (success,
 * nothing moves), then buffers (NULL with data to move: HCCL_E_PTR). Bad arguments never reach a
 * stream or the wire.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_api.h"
#include "hc_check.h"
#include "hc_comm.h"
#include "hc_config.h"
#include "hc_dtype.h"
#include "hc_op.h"

typedef enum { BUF_NONE, BUF_ALL, BUF_ROOT } buf_rule_t;

typedef struct {
    unsigned redop : 1;  /* reduction operation checked */
    unsigned root : 1;   /* `root` must be a rank */
    unsigned peer : 1;   /* `root` is a peer: a rank other than self */
    unsigned vector : 1; /* counts arrays (V variants) */
    buf_rule_t send;
    buf_rule_t recv;
} rule_t;

static const rule_t rules[HC_COLL_COUNT] = {
    [HC_COLL_ALLREDUCE] = {.redop = 1, .send = BUF_ALL, .recv = BUF_ALL},
    [HC_COLL_BROADCAST] = {.root = 1, .send = BUF_ALL, .recv = BUF_ALL},
    [HC_COLL_REDUCE] = {.redop = 1, .root = 1, .send = BUF_ALL, .recv = BUF_ROOT},
    [HC_COLL_ALLGATHER] = {.send = BUF_ALL, .recv = BUF_ALL},
    [HC_COLL_ALLGATHERV] = {.vector = 1, .send = BUF_ALL, .recv = BUF_ALL},
    [HC_COLL_REDUCE_SCATTER] = {.redop = 1, .send = BUF_ALL, .recv = BUF_ALL},
    [HC_COLL_REDUCE_SCATTERV] = {.redop = 1, .vector = 1, .send = BUF_ALL, .recv = BUF_ALL},
    [HC_COLL_SCATTER] = {.root = 1, .send = BUF_ROOT, .recv = BUF_ALL},
    [HC_COLL_ALLTOALL] = {.send = BUF_ALL, .recv = BUF_ALL},
    [HC_COLL_ALLTOALLV] = {.vector = 1, .send = BUF_ALL, .recv = BUF_ALL},
    [HC_COLL_ALLTOALLVC] = {.vector = 1, .send = BUF_ALL, .recv = BUF_ALL},
    [HC_COLL_BARRIER] = {.send = BUF_NONE, .recv = BUF_NONE},
    [HC_COLL_SEND] = {.peer = 1, .send = BUF_ALL, .recv = BUF_NONE},
    [HC_COLL_RECV] = {.peer = 1, .send = BUF_NONE, .recv = BUF_ALL},
    [HC_COLL_BATCH_SENDRECV] = {.send = BUF_NONE, .recv = BUF_NONE},
};

static atomic_int entry_log = -1;

int hc_api_entry_log_enabled(void)
{
    int on = atomic_load_explicit(&entry_log, memory_order_relaxed);

    if (on < 0) {
        on = (int)hc_config_int(HC_CFG_ENTRY_LOG_ENABLE);
        atomic_store(&entry_log, on);
    }
    return on;
}

void hc_api_entry_log(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    hc_log_vwrite(HC_LOG_INFO, __FILE__, __LINE__, fmt, ap);
    va_end(ap);
}

static HcclResult check_dtype(const hc_call_t *call, HcclDataType dtype)
{
    if (hc_dtype_size(dtype) == 0) {
        HC_ERROR("%s: data type %s is not supported (int8/16/32/64, uint8/16/32/64, fp16, bf16, fp32, fp64 are)",
                 call->fn, hc_dtype_name(dtype));
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

static HcclResult check_rank_arg(const hc_call_t *call, const rule_t *rule, const hc_comm_t *comm)
{
    if ((rule->root || rule->peer) && call->root >= comm->nranks) {
        HC_ERROR("%s: %s %u is out of range for a communicator of %u ranks", call->fn, rule->root ? "root" : "peer",
                 call->root, comm->nranks);
        return HCCL_E_PARA;
    }
    if (rule->peer && call->root == comm->rank) {
        HC_ERROR("%s: peer %u is this rank itself", call->fn, call->root);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* Does this rank need the buffer under `rule`? */
static int buffer_needed(buf_rule_t rule, const hc_call_t *call, const hc_comm_t *comm)
{
    return rule == BUF_ALL || (rule == BUF_ROOT && call->root == comm->rank);
}

static HcclResult check_buffers(const hc_call_t *call, const rule_t *rule, const hc_comm_t *comm)
{
    if (call->coll == HC_COLL_ALLTOALLV || call->coll == HC_COLL_ALLTOALLVC)
        return HCCL_SUCCESS; /* checked against this rank's own counts in hc_api_check_vectors */
    if (buffer_needed(rule->send, call, comm) && call->sendbuf == NULL) {
        HC_ERROR("%s: the send buffer is NULL with count %llu", call->fn, (unsigned long long)call->count);
        return HCCL_E_PTR;
    }
    if (buffer_needed(rule->recv, call, comm) && call->recvbuf == NULL) {
        HC_ERROR("%s: the receive buffer is NULL with count %llu", call->fn, (unsigned long long)call->count);
        return HCCL_E_PTR;
    }
    return HCCL_SUCCESS;
}

/* count * element size * ranks must fit in 64 bits (and in the address space). */
static HcclResult check_extent(const hc_call_t *call, const hc_comm_t *comm, uint64_t count)
{
    uint64_t bytes, all;

    /* Multiplications that report overflow: two 64-bit divisions cost ~80 cycles on every call. */
    if (__builtin_mul_overflow(count, (uint64_t)hc_dtype_size(call->dtype), &bytes) ||
        __builtin_mul_overflow(bytes, (uint64_t)comm->nranks, &all)) {
        HC_ERROR("%s: count %llu of %s overflows the address space", call->fn, (unsigned long long)count,
                 hc_dtype_name(call->dtype));
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

static HcclResult check_call(const hc_call_t *call, const rule_t *rule, const hc_comm_t *comm, uint64_t *moved_p)
{
    if (call->coll != HC_COLL_BARRIER && call->coll != HC_COLL_BATCH_SENDRECV)
        HC_CHECK(check_dtype(call, call->dtype));
    if (rule->redop && !hc_redop_valid(call->redop)) {
        HC_ERROR("%s: reduction %s is not one of sum, prod, max, min", call->fn, hc_redop_name(call->redop));
        return HCCL_E_PARA;
    }
    HC_CHECK(check_rank_arg(call, rule, comm));
    *moved_p = call->count;
    if (rule->vector)
        HC_CHECK(hc_api_check_vectors(call, comm, moved_p));
    else if (call->coll == HC_COLL_ALLTOALL)
        HC_CHECK(hc_api_check_alltoall(call));
    else if (call->coll == HC_COLL_BATCH_SENDRECV)
        HC_CHECK(hc_api_check_batch(call, comm, moved_p));
    if (*moved_p == 0)
        return HCCL_SUCCESS;
    HC_CHECK(check_extent(call, comm, *moved_p));
    return check_buffers(call, rule, comm);
}

/* `moved`: for V variants the total all ranks agree on (their own count differs by design), so that
 * is what the signature carries; AlltoAllV has no common total and is checked by the engine. */
static void fill_op(hc_op_t *op, const hc_call_t *call, uint64_t moved)
{
    op->fn = call->fn;
    op->sendbuf = call->sendbuf;
    op->recvbuf = call->recvbuf;
    op->count = call->count;
    op->dtype = call->dtype;
    op->redop = call->redop;
    op->root = call->root;
    if (call->coll != HC_COLL_BARRIER && call->coll != HC_COLL_BATCH_SENDRECV) {
        op->sig.dtype = (uint32_t)call->dtype;
        op->sig.count = call->count;
    }
    if (rules[call->coll].vector)
        op->sig.count = call->coll == HC_COLL_ALLTOALLV ? 0 : moved;
    if (rules[call->coll].redop)
        op->sig.redop = (uint32_t)call->redop;
    if (rules[call->coll].root || rules[call->coll].peer)
        op->sig.root = call->root;
}

/* The call needs a reference of its own on comm (an op or the group takes it): a borrowed
 * communicator (hc_comm_borrow) gets one, and the borrow ends. */
static void own_reference(hc_comm_t *comm, int *borrowed_p)
{
    if (*borrowed_p) {
        hc_comm_ref(comm);
        hc_comm_unborrow(comm, 1);
        *borrowed_p = 0;
    }
}

HcclResult hc_api_submit(const hc_call_t *call, aclrtStream stream)
{
    const rule_t *rule = &rules[call->coll];
    hc_comm_t *comm;
    hc_op_t *op;
    uint64_t moved = 0;
    int attached = 0; /* the op's items are attached (a batch built for the fast path) */
    int borrowed;     /* comm is borrowed, not referenced (hc_comm_borrow) */
    HcclResult res;

    HC_CHECK(hc_comm_borrow(call->handle, call->fn, &comm, &borrowed));
    const hc_log_ctx_t *previous = hc_log_ctx_push(&comm->log_ctx);
    if (hc_api_entry_log_enabled())
        hc_api_entry_log("%s(sendBuf=%p, recvBuf=%p, count=%llu, dataType=%s, op=%s, root=%u, stream=%p)", call->fn,
                         call->sendbuf, call->recvbuf, (unsigned long long)call->count,
                         hc_dtype_name(call->dtype), hc_redop_name(call->redop), call->root, stream);
    HC_CHECK_GOTO(check_call(call, rule, comm, &moved), res, out);
    if (moved == 0 && call->coll != HC_COLL_BARRIER)
        goto out; /* count 0: success, nothing moves (DESIGN.md 7) */
    if ((call->coll == HC_COLL_SEND || call->coll == HC_COLL_RECV) && hc_api_group_active()) {
        res = hc_api_group_add_p2p(comm, call, stream); /* parked without a reference */
        goto out;
    }
    if (!hc_api_group_active()) {
        /* The blocking fast path first: the op on the stack, run now if it can be (hc_op_run_direct),
         * a V variant's count arrays the caller's (copied only for an op that outlives the call). */
        hc_op_t direct;
        memset(&direct, 0, offsetof(hc_op_t, task));
        direct.comm = comm;
        direct.sig.coll = (uint32_t)call->coll;
        fill_op(&direct, call, moved);
        if (call->coll == HC_COLL_BATCH_SENDRECV)
            HC_CHECK_GOTO(hc_api_attach_vectors(&direct, call, comm), res, out);
        else if (rule->vector)
            hc_api_point_vectors(&direct, call, comm);
        switch (hc_op_run_direct(&direct, stream)) {
        case HC_DIRECT_RAN:
            goto out; /* a failure is the stream's, as a launched op's */
        case HC_DIRECT_QUEUED:
            goto out; /* the queued op took a reference of its own */
        case HC_DIRECT_NO:
            break;
        }
        own_reference(comm, &borrowed);
        if ((op = hc_op_alloc_copy(&direct)) == NULL && direct.items != direct.inline_items)
            free(direct.items);
        attached = 1;
    } else {
        own_reference(comm, &borrowed);
        if ((op = hc_op_alloc(comm, call->coll)) != NULL)
            fill_op(op, call, moved);
    }
    if (op == NULL) {
        res = HCCL_E_MEMORY;
        goto out;
    }
    /* Count arrays and items: only the V variants and batches have any to copy. */
    res = !attached && (rule->vector || call->coll == HC_COLL_BATCH_SENDRECV) ? hc_api_attach_vectors(op, call, comm)
                                                                              : HCCL_SUCCESS;
    if (res != HCCL_SUCCESS)
        hc_op_free(op);
    else if (hc_api_group_active() ? (res = hc_api_group_add(op, stream)) == HCCL_SUCCESS
                                   : (res = hc_op_enqueue_taking(op, stream)) == HCCL_SUCCESS)
        comm = NULL; /* the op (or group) holds this call's reference now; a run may have dropped it */
out:
    hc_log_ctx_pop(previous);
    if (borrowed || comm != NULL)
        hc_comm_unborrow(comm, borrowed);
    return res;
}
