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
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hc_compiler.h"
#include "hc_api.h"
#include "hc_check.h"
#include "hc_comm.h"

/* A parked call: an op (a collective, or a batch from HcclBatchSendRecv), or a single Send or Recv
 * kept as the item it adds to its communicator's batch (no op of its own: a Send + Recv group is
 * the usual pattern, and two ops made and freed per group were a third of its cost). A parked op
 * holds a reference on its communicator, the one its call took; a parked item holds none: the
 * group's end looks its communicator up again by handle (one destroyed meanwhile is refused there).
 * handle NULL: issued. */
typedef struct {
    HcclComm handle;
    hc_op_t *op; /* NULL: `item` */
    aclrtStream stream;
    HcclSendRecvItem item;
} parked_t;

/* The thread's parked calls, in an array kept from group to group (grown as needed, freed at thread
 * exit by a key destructor), so that a group allocates nothing; only its pointer and counts are
 * thread-local (libraries loaded with dlopen share ~1.6 KB of static TLS, docs/design-notes.md). */
#define GROUP_FIRST_CAP 8

static HC_TLS_FAST struct {
    int depth;
    parked_t *ops;
    size_t n, cap;
} group;

static pthread_key_t group_key;
static pthread_once_t group_once = PTHREAD_ONCE_INIT;
static int group_key_ok;

static void group_thread_exit(void *ops)
{
    free(ops);
}

static void group_key_create(void)
{
    group_key_ok = pthread_key_create(&group_key, group_thread_exit) == 0;
}

int hc_api_group_active(void)
{
    return group.depth > 0;
}

/* Grow the thread's array of parked calls; 0 when out of memory (logged, naming `what`). */
static __attribute__((noinline)) int grow_parked(const char *what)
{
    size_t cap = group.cap != 0 ? group.cap * 2 : GROUP_FIRST_CAP;
    parked_t *grown = realloc(group.ops, cap * sizeof(*grown));

    if (grown == NULL) {
        HC_ERROR("out of memory parking a %s in a group", what);
        return 0;
    }
    pthread_once(&group_once, group_key_create);
    if (group_key_ok)
        (void)pthread_setspecific(group_key, grown); /* else it stays until exit */
    group.ops = grown;
    group.cap = cap;
    return 1;
}

/* Room for one more parked call; NULL when out of memory (logged, naming `what`). */
static inline parked_t *park_slot(const char *what)
{
    if (group.n == group.cap && !grow_parked(what))
        return NULL;
    return &group.ops[group.n++];
}

HcclResult hc_api_group_add(hc_op_t *op, aclrtStream stream)
{
    parked_t *slot = park_slot(hc_coll_name(op->sig.coll));

    /* A Send or Recv is parked as its item (hc_api_group_add_p2p), never as an op. */
    hc_assert(op->sig.coll != HC_COLL_SEND && op->sig.coll != HC_COLL_RECV);
    if (slot == NULL) {
        hc_op_free(op);
        return HCCL_E_MEMORY;
    }
    *slot = (parked_t){.handle = op->comm->handle, .op = op, .stream = stream};
    return HCCL_SUCCESS;
}

HcclResult hc_api_group_add_p2p(hc_comm_t *comm, const hc_call_t *call, aclrtStream stream)
{
    int send = call->coll == HC_COLL_SEND;
    parked_t *slot = park_slot(send ? "Send" : "Recv");

    if (slot == NULL)
        return HCCL_E_MEMORY;
    slot->handle = comm->handle;
    slot->op = NULL;
    slot->stream = stream;
    slot->item = (HcclSendRecvItem){.sendRecvType = send ? HCCL_SEND : HCCL_RECV,
                                    .buf = send ? call->sendbuf : call->recvbuf, .count = call->count,
                                    .dataType = call->dtype, .remoteRank = call->root};
    return HCCL_SUCCESS;
}

static int is_p2p(const parked_t *p)
{
    return p->op == NULL || hc_coll_is_p2p((hc_coll_t)p->op->sig.coll);
}

/* How many send/receive items the parked point-to-point calls of `handle` hold. */
static uint32_t count_items(HcclComm handle)
{
    uint32_t n = 0;

    for (size_t i = 0; i < group.n; i++) {
        const parked_t *p = &group.ops[i];
        if (p->handle == handle && is_p2p(p))
            n += p->op != NULL ? p->op->nitems : 1;
    }
    return n;
}

/* Append the parked call's sends/receives to batch's items (allocated for all of them). */
static void append_items(hc_op_t *batch, const parked_t *p)
{
    if (p->op == NULL) {
        batch->items[batch->nitems++] = p->item;
        return;
    }
    for (uint32_t i = 0; i < p->op->nitems; i++)
        batch->items[batch->nitems++] = p->op->items[i];
}

/* Build in `batch` (the caller's) the batch op for comm's parked sends and receives, with room for
 * all their items; 0 when out of memory. */
static int new_batch(hc_comm_t *comm, hc_op_t *batch)
{
    memset(batch, 0, offsetof(hc_op_t, task));
    batch->comm = comm;
    batch->sig.coll = HC_COLL_BATCH_SENDRECV;
    batch->fn = "HcclGroupEnd";
    return hc_op_items(batch, count_items(comm->handle)) == HCCL_SUCCESS;
}

/* Forget a batch built by new_batch that was neither run nor copied. */
static void drop_batch(hc_op_t *batch)
{
    if (batch->items != batch->inline_items)
        free(batch->items);
}

/* The distinct streams of the parked point-to-point calls of `handle` other than `first` (at most
 * `cap`; returns how many there are, which may exceed cap). */
static size_t other_p2p_streams(HcclComm handle, aclrtStream first, aclrtStream *streams, size_t cap)
{
    size_t n = 0;

    for (size_t i = 0; i < group.n; i++) {
        const parked_t *p = &group.ops[i];
        aclrtStream s = p->stream;
        size_t k = 0;

        if (p->handle != handle || !is_p2p(p) || s == first)
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

/* Launch the batch (built on the stack) on `stream` joined with the `n` other streams of its items:
 * after their earlier work, before their later work. A batch on one stream alone first tries the
 * blocking fast path (hc_op_run_direct). A batch that is enqueued takes a reference of its own on
 * the communicator; the caller's stays the caller's. */
#define GROUP_STREAMS_MAX 64

static HcclResult launch_joined(hc_op_t *batch, aclrtStream stream, const aclrtStream *others, size_t n)
{
    hc_comm_t *comm = batch->comm;
    HcclResult res = HCCL_SUCCESS;
    hc_op_t *op;

    if (n == 0 && hc_op_run_direct(batch, stream) != HC_DIRECT_NO)
        return HCCL_SUCCESS; /* ran, or queued with a reference of its own */
    for (size_t k = 0; k < n && res == HCCL_SUCCESS; k++)
        res = stream_wait_stream(stream, others[k]);
    if (res != HCCL_SUCCESS) {
        drop_batch(batch);
        return res;
    }
    if ((op = hc_op_alloc_copy(batch)) == NULL) {
        drop_batch(batch);
        return HCCL_E_MEMORY;
    }
    hc_comm_ref(comm);
    if ((res = hc_op_enqueue_taking(op, stream)) != HCCL_SUCCESS) {
        hc_comm_release(comm); /* the op was freed; the reference stayed ours */
        return res;
    }
    for (size_t k = 0; k < n && res == HCCL_SUCCESS; k++)
        res = stream_wait_stream(others[k], stream);
    return res;
}

/* Forget a parked call that will not be issued: an op and its reference. */
static void drop_parked(parked_t *p)
{
    if (p->op != NULL) {
        hc_comm_t *comm = p->op->comm;
        hc_op_free(p->op);
        hc_comm_release(comm);
    }
}

/*
 * Issue the parked calls of one communicator, looked up again by its handle (borrowed for the
 * issue); marks them issued. A parked collective's reference goes to it when it is enqueued; a
 * parked batch's is dropped once its items are in the group's batch, which takes a reference of its
 * own if it is enqueued. If the communicator was destroyed since the calls, none is issued.
 */
static HcclResult issue_comm(HcclComm handle)
{
    aclrtStream others[GROUP_STREAMS_MAX];
    size_t nothers = 0;
    hc_op_t batch_op, *batch = NULL; /* built on the stack (the fast path's way) */
    aclrtStream batch_stream = NULL;
    hc_comm_t *comm = NULL;
    int borrowed = 0;
    HcclResult res = hc_comm_borrow(handle, "HcclGroupEnd", &comm, &borrowed), looked_up = res, r;
    const hc_log_ctx_t *previous = res == HCCL_SUCCESS ? hc_log_ctx_push(&comm->log_ctx) : NULL;

    for (size_t i = 0; i < group.n; i++) {
        parked_t *p = &group.ops[i];
        if (p->handle != handle)
            continue;
        if (res != HCCL_SUCCESS) {
            drop_parked(p);
        } else if (!is_p2p(p)) {
            if ((r = hc_op_enqueue_taking(p->op, p->stream)) != HCCL_SUCCESS) {
                hc_comm_release(comm); /* the op was freed; its reference is ours to drop */
                res = r;
            }
        } else {
            if (batch == NULL && new_batch(comm, &batch_op)) { /* counts this call's items too */
                batch = &batch_op;
                batch_stream = p->stream;
                nothers = other_p2p_streams(handle, batch_stream, others, GROUP_STREAMS_MAX);
                if (nothers > GROUP_STREAMS_MAX) {
                    HC_ERROR("HcclGroupEnd: the sends and receives of one communicator use %zu streams; at most "
                             "%d are supported", nothers + 1, GROUP_STREAMS_MAX + 1);
                    res = HCCL_E_NOT_SUPPORT;
                }
            }
            if (batch != NULL)
                append_items(batch, p);
            else
                res = HCCL_E_MEMORY;
            drop_parked(p); /* a parked HcclBatchSendRecv: its items are in the batch */
        }
        p->handle = NULL;
    }
    if (batch != NULL && res == HCCL_SUCCESS)
        res = launch_joined(batch, batch_stream, others, nothers);
    else if (batch != NULL)
        drop_batch(batch);
    if (looked_up == HCCL_SUCCESS) {
        hc_log_ctx_pop(previous);
        hc_comm_unborrow(comm, borrowed);
    }
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
        if (group.ops[i].handle != NULL) {
            HcclResult r = issue_comm(group.ops[i].handle);
            res = res == HCCL_SUCCESS ? r : res;
        }
    }
    group.n = 0;
    return res;
}

/* After fork(): a group the forking thread had open was the parent's (its ops hold the parent's
 * communicators); the child's thread starts outside any group. */
void hc_api_group_fork_child(void)
{
    group.depth = 0;
    group.n = 0; /* the array is the child's copy: kept */
}
