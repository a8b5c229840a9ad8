/*
 * HcclGroupStart / HcclGroupEnd. The group is per thread (as NCCL's): calls made between them on
 * this thread are parked and issued at the outermost HcclGroupEnd. For each communicator, in the
 * order communicators first appear, its collectives are enqueued in issue order, then its sends and
 * receives as one batch op on the stream of the first of them. Every rank applies the same rule, so
 * ranks agree on the order of ops whatever order the point-to-point calls had inside the group.
 *
 * Sends and receives given on other streams join that batch through events, with NCCL's rule: the
 * batch runs after the work enqueued before the group on every stream involved, and each of those
 * streams' later work waits for the batch. A Recv on stream B whose batch runs on stream A is
 * therefore complete when aclrtSynchronizeStream(B) returns.
 */
#include <stdlib.h>
#include <string.h>

#include "hc_compiler.h"
#include "hc_api.h"
#include "hc_check.h"
#include "hc_comm.h"

typedef struct {
    hc_op_t *op;
    aclrtStream stream;
} parked_t;

/* Most groups park a few calls (a Send and a Recv per peer): those fit in `parked`, so a group
 * allocates nothing; larger groups grow a heap array, freed at the group's end. */
#define GROUP_INLINE_OPS 8

static HC_TLS_FAST struct {
    int depth;
    parked_t *ops;
    size_t n, cap;
    parked_t parked[GROUP_INLINE_OPS];
} group;

int hc_api_group_active(void)
{
    return group.depth > 0;
}

HcclResult hc_api_group_add(hc_op_t *op, aclrtStream stream)
{
    if (group.ops == NULL) {
        group.ops = group.parked;
        group.cap = GROUP_INLINE_OPS;
    }
    if (group.n == group.cap) {
        size_t cap = group.cap * 2;
        parked_t *grown = group.ops == group.parked ? malloc(cap * sizeof(*grown))
                                                    : realloc(group.ops, cap * sizeof(*grown));
        if (grown == NULL) {
            HC_ERROR("out of memory parking a %s in a group", hc_coll_name(op->sig.coll));
            hc_op_free(op);
            return HCCL_E_MEMORY;
        }
        if (group.ops == group.parked)
            memcpy(grown, group.parked, sizeof(group.parked));
        group.ops = grown;
        group.cap = cap;
    }
    atomic_fetch_add(&op->comm->refs, 1); /* the group holds the communicator until it is issued */
    group.ops[group.n++] = (parked_t){.op = op, .stream = stream};
    return HCCL_SUCCESS;
}

static int is_p2p(const hc_op_t *op)
{
    return hc_coll_is_p2p((hc_coll_t)op->sig.coll);
}

/* How many send/receive items the parked point-to-point ops of comm hold. */
static uint32_t count_items(const hc_comm_t *comm)
{
    uint32_t n = 0;

    for (size_t i = 0; i < group.n; i++) {
        const hc_op_t *op = group.ops[i].op;
        if (op != NULL && op->comm == comm && is_p2p(op))
            n += op->sig.coll == HC_COLL_BATCH_SENDRECV ? op->nitems : 1;
    }
    return n;
}

/* Append op's sends/receives to batch's items (allocated for all of them by issue_comm). */
static void append_items(hc_op_t *batch, const hc_op_t *op)
{
    if (op->sig.coll == HC_COLL_BATCH_SENDRECV) {
        for (uint32_t i = 0; i < op->nitems; i++)
            batch->items[batch->nitems++] = op->items[i];
    } else {
        int send = op->sig.coll == HC_COLL_SEND;
        batch->items[batch->nitems++] = (HcclSendRecvItem){
            .sendRecvType = send ? HCCL_SEND : HCCL_RECV, .buf = send ? op->sendbuf : op->recvbuf,
            .count = op->count, .dataType = op->dtype, .remoteRank = op->root};
    }
}

/* The batch op for comm's parked sends and receives, with room for all their items. */
static hc_op_t *new_batch(hc_comm_t *comm)
{
    hc_op_t *batch = hc_op_alloc(comm, HC_COLL_BATCH_SENDRECV);
    uint32_t n = count_items(comm);

    if (batch == NULL)
        return NULL;
    batch->fn = "HcclGroupEnd";
    if (hc_op_items(batch, n) != HCCL_SUCCESS) {
        hc_op_free(batch);
        return NULL;
    }
    return batch;
}

/* The distinct streams of comm's parked point-to-point ops other than `first` (at most `cap`;
 * returns how many there are, which may exceed cap). */
static size_t other_p2p_streams(const hc_comm_t *comm, aclrtStream first, aclrtStream *streams, size_t cap)
{
    size_t n = 0;

    for (size_t i = 0; i < group.n; i++) {
        const hc_op_t *op = group.ops[i].op;
        aclrtStream s = group.ops[i].stream;
        size_t k = 0;

        if (op == NULL || op->comm != comm || !is_p2p(op) || s == first)
            continue;
        while (k < n && k < cap && streams[k] != s)
            k++;
        if (k < n && k < cap)
            continue; /* seen */
        if (n < cap)
            streams[n] = s;
        n++;
    }
    return n;
}

/* `waiter` waits (in stream order) for what `recorder` has enqueued so far. The event may be
 * destroyed at once: the queued record and wait hold it. */
static HcclResult stream_wait_stream(aclrtStream waiter, aclrtStream recorder)
{
    aclrtEvent event;
    aclError err = aclrtCreateEvent(&event);

    if (err != ACL_SUCCESS)
        return HCCL_E_RUNTIME; /* the runtime said why */
    err = aclrtRecordEvent(event, recorder);
    if (err == ACL_SUCCESS)
        err = aclrtStreamWaitEvent(waiter, event);
    aclrtDestroyEvent(event);
    return err == ACL_SUCCESS ? HCCL_SUCCESS : HCCL_E_RUNTIME;
}

/* Enqueue the batch on `stream` joined with the `n` other streams of its items: after their earlier
 * work, before their later work. */
#define GROUP_STREAMS_MAX 64

static HcclResult enqueue_joined(hc_op_t *batch, aclrtStream stream, const aclrtStream *others, size_t n)
{
    HcclResult res = HCCL_SUCCESS;

    for (size_t k = 0; k < n && res == HCCL_SUCCESS; k++)
        res = stream_wait_stream(stream, others[k]);
    if (res != HCCL_SUCCESS) {
        hc_op_free(batch);
        return res;
    }
    HC_CHECK(hc_op_enqueue(batch, stream));
    for (size_t k = 0; k < n && res == HCCL_SUCCESS; k++)
        res = stream_wait_stream(others[k], stream);
    return res;
}

/* Issue the parked ops of one communicator; marks them NULL in the list. */
static HcclResult issue_comm(hc_comm_t *comm)
{
    aclrtStream others[GROUP_STREAMS_MAX];
    size_t nothers = 0;
    hc_op_t *batch = NULL;
    aclrtStream batch_stream = NULL;
    HcclResult res = HCCL_SUCCESS, r;

    atomic_fetch_add(&comm->refs, 1); /* the parked ops' references are dropped one by one below */
    for (size_t i = 0; i < group.n; i++) {
        hc_op_t *op = group.ops[i].op;
        if (op == NULL || op->comm != comm)
            continue;
        if (!is_p2p(op)) {
            r = res == HCCL_SUCCESS ? hc_op_enqueue(op, group.ops[i].stream) : (hc_op_free(op), res);
        } else {
            if (batch == NULL && res == HCCL_SUCCESS) {
                batch = new_batch(comm);
                batch_stream = group.ops[i].stream;
                nothers = other_p2p_streams(comm, batch_stream, others, GROUP_STREAMS_MAX);
                if (nothers > GROUP_STREAMS_MAX) {
                    HC_ERROR("HcclGroupEnd: the sends and receives of one communicator use %zu streams; at most %d "
                             "are supported", nothers + 1, GROUP_STREAMS_MAX + 1);
                    res = HCCL_E_NOT_SUPPORT;
                }
            }
            r = HCCL_E_MEMORY;
            if (batch != NULL) {
                append_items(batch, op);
                r = HCCL_SUCCESS;
            }
            hc_op_free(op);
        }
        if (res == HCCL_SUCCESS)
            res = r;
        group.ops[i].op = NULL;
        hc_comm_release(comm);
    }
    if (batch != NULL && res == HCCL_SUCCESS)
        res = enqueue_joined(batch, batch_stream, others, nothers);
    else
        hc_op_free(batch);
    hc_comm_release(comm);
    return res;
}

HC_API_EXPORT HcclResult HcclGroupStart(void)
{
    group.depth++;
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclGroupEnd(void)
{
    HcclResult res = HCCL_SUCCESS;

    if (group.depth == 0) {
        HC_ERROR("HcclGroupEnd without a matching HcclGroupStart");
        return HCCL_E_PARA;
    }
    if (--group.depth > 0)
        return HCCL_SUCCESS;
    for (size_t i = 0; i < group.n; i++) {
        if (group.ops[i].op != NULL) {
            HcclResult r = issue_comm(group.ops[i].op->comm);
            res = res == HCCL_SUCCESS ? r : res;
        }
    }
    if (group.ops != group.parked)
        free(group.ops);
    group.ops = NULL;
    group.n = group.cap = 0;
    return res;
}

/* After fork(): a group the forking thread had open was the parent's (its ops hold the parent's
 * communicators); the child's thread starts outside any group. */
void hc_api_group_fork_child(void)
{
    group.depth = 0;
    group.ops = NULL;
    group.n = group.cap = 0;
}
