/* Op descriptors: names, signatures, allocation, and the one enqueue path of every call. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_compiler.h"
#include "hc_comm.h"
#include "hc_dtype.h"
#include "hc_op.h"
#include "hc_time.h"
#include "rt_ext.h"

static const char *const coll_names[HC_COLL_COUNT] = {
    [HC_COLL_ALLREDUCE] = "allreduce",
    [HC_COLL_BROADCAST] = "broadcast",
    [HC_COLL_REDUCE] = "reduce",
    [HC_COLL_ALLGATHER] = "allgather",
    [HC_COLL_ALLGATHERV] = "allgatherv",
    [HC_COLL_REDUCE_SCATTER] = "reducescatter",
    [HC_COLL_REDUCE_SCATTERV] = "reducescatterv",
    [HC_COLL_SCATTER] = "scatter",
    [HC_COLL_ALLTOALL] = "alltoall",
    [HC_COLL_ALLTOALLV] = "alltoallv",
    [HC_COLL_ALLTOALLVC] = "alltoallvc",
    [HC_COLL_BARRIER] = "barrier",
    [HC_COLL_SEND] = "send",
    [HC_COLL_RECV] = "recv",
    [HC_COLL_BATCH_SENDRECV] = "batchsendrecv",
};

const char *hc_coll_name(hc_coll_t coll)
{
    return (unsigned)coll < HC_COLL_COUNT ? coll_names[coll] : "unknown";
}

static int coll_has_redop(hc_coll_t coll)
{
    return coll == HC_COLL_ALLREDUCE || coll == HC_COLL_REDUCE || coll == HC_COLL_REDUCE_SCATTER ||
           coll == HC_COLL_REDUCE_SCATTERV;
}

static int coll_has_root(hc_coll_t coll)
{
    return coll == HC_COLL_BROADCAST || coll == HC_COLL_REDUCE || coll == HC_COLL_SCATTER;
}

const char *hc_op_sig_format(const hc_op_sig_t *sig, char *buf, size_t len)
{
    hc_coll_t coll = (hc_coll_t)sig->coll;
    int used;

    if (coll == HC_COLL_BARRIER) {
        snprintf(buf, len, "barrier");
        return buf;
    }
    used = snprintf(buf, len, "%s count=%llu %s", hc_coll_name(coll), (unsigned long long)sig->count,
                    hc_dtype_name((HcclDataType)sig->dtype));
    if (used > 0 && (size_t)used < len && coll_has_redop(coll))
        used += snprintf(buf + used, len - (size_t)used, " %s", hc_redop_name((HcclReduceOp)sig->redop));
    if (used > 0 && (size_t)used < len && coll_has_root(coll))
        used += snprintf(buf + used, len - (size_t)used, " root=%u", sig->root);
    if (used > 0 && (size_t)used < len && (coll == HC_COLL_SEND || coll == HC_COLL_RECV))
        snprintf(buf + used, len - (size_t)used, " peer=%u", sig->root);
    return buf;
}

int hc_op_sig_equal(const hc_op_sig_t *a, const hc_op_sig_t *b)
{
    return a->coll == b->coll && a->dtype == b->dtype && a->redop == b->redop && a->root == b->root &&
           a->count == b->count && a->digest == b->digest;
}

/* A word at a time (every op hashes its signature: byte-wise FNV cost ~350 instructions of an
 * 8-byte AllReduce's ~3000): multiply-xorshift per word, then the splitmix64 finaliser so that
 * every input bit reaches every output bit. Detects mismatches, not adversaries. */
uint64_t hc_op_digest(const uint64_t *values, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;

    for (size_t i = 0; i < n; i++) {
        h = (h ^ values[i]) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

uint64_t hc_op_sig_hash(const hc_op_sig_t *sig, uint64_t coll_seq)
{
    uint64_t words[5] = {(uint64_t)sig->coll << 32 | sig->dtype, (uint64_t)sig->redop << 32 | sig->root, sig->count,
                         sig->digest, coll_seq};
    return hc_op_digest(words, 5);
}

/*
 * Each communicator keeps one freed op for the next (hc_comm_t.spare_op, no lock): the usual
 * pattern, one op in flight at a time, then allocates nothing. A burst of launches (hccl_test's
 * pattern: every iteration, then one synchronise) takes ops from a pool, carved from slabs of
 * OP_SLAB_OPS ops that the communicator keeps until it is destroyed (at most OP_SLABS_MAX; past
 * that, ops come from calloc and go back to free).
 *
 * The pool is a lock-free stack: launching threads pop, executing threads push. Ops are named by
 * their index in the slabs, and the head carries a tag that every change increments, so a pop
 * whose view of the top became stale (popped, reused and pushed back meanwhile: ABA) fails its
 * compare-and-swap instead of linking a wrong next. Slabs are never freed before the communicator,
 * so reading a stale top's `pool_next` is safe; only adding a slab takes pool_lock.
 *
 * Slabs are written through when they are made, OP_SLABS_AT_INIT of them with the communicator:
 * on this VM the first touch of a page costs 11 us (a VM exit; MAP_POPULATE still leaves 6), so
 * ops from fresh heap memory made the first burst of 1000 8-byte AllReduces 1.5-2.4 us per op
 * against 0.3 for the next burst. (Before the pool, with malloc and free, a burst of 1000 freed
 * ~190 KB, past glibc's 128 KB trim threshold, and every burst paid that again.)
 */
#define OP_SLAB_OPS 512
#define OP_SLABS_AT_INIT 2
#define OP_SLABS_MAX 16

_Static_assert(OP_SLABS_MAX == sizeof(((hc_comm_t *)0)->slabs) / sizeof(((hc_comm_t *)0)->slabs[0]),
               "hc_comm_t.slabs holds OP_SLABS_MAX slabs");

typedef struct hc_op_slab {
    hc_op_t ops[OP_SLAB_OPS];
} hc_op_slab_t;

static hc_op_t *op_at(hc_comm_t *comm, uint32_t index)
{
    hc_op_slab_t *slab = atomic_load_explicit(&comm->slabs[(index - 1) / OP_SLAB_OPS], memory_order_acquire);

    return &slab->ops[(index - 1) % OP_SLAB_OPS];
}

/* Push the chain first..last (linked by pool_next) onto the pool. */
static void pool_push(hc_comm_t *comm, hc_op_t *first, hc_op_t *last)
{
    uint64_t head = atomic_load_explicit(&comm->pool_head, memory_order_relaxed);

    do {
        atomic_store_explicit(&last->pool_next, (uint32_t)head, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(&comm->pool_head, &head,
                                                    ((head >> 32) + 1) << 32 | first->pool_index,
                                                    memory_order_release, memory_order_relaxed));
}

/* Add a slab's ops to the pool; 0 if out of memory or slabs. */
static int add_slab(hc_comm_t *comm)
{
    hc_op_slab_t *slab;
    uint32_t n;

    pthread_mutex_lock(&comm->pool_lock);
    n = atomic_load_explicit(&comm->nslabs, memory_order_relaxed);
    if (n >= OP_SLABS_MAX || (slab = malloc(sizeof(*slab))) == NULL) {
        pthread_mutex_unlock(&comm->pool_lock);
        return 0;
    }
    memset(slab, 0, sizeof(*slab)); /* fault every page in now, not on the op path */
    for (uint32_t i = 0; i < OP_SLAB_OPS; i++) {
        slab->ops[i].pool_index = n * OP_SLAB_OPS + i + 1;
        atomic_store_explicit(&slab->ops[i].pool_next, i + 1 < OP_SLAB_OPS ? n * OP_SLAB_OPS + i + 2 : 0,
                              memory_order_relaxed);
    }
    atomic_store_explicit(&comm->slabs[n], slab, memory_order_release);
    atomic_store_explicit(&comm->nslabs, n + 1, memory_order_relaxed);
    pool_push(comm, &slab->ops[0], &slab->ops[OP_SLAB_OPS - 1]);
    pthread_mutex_unlock(&comm->pool_lock);
    return 1;
}

void hc_op_pool_init(hc_comm_t *comm)
{
    for (int i = 0; i < OP_SLABS_AT_INIT && add_slab(comm); i++)
        ;
}

static hc_op_t *pool_take(hc_comm_t *comm)
{
    uint64_t head = atomic_load_explicit(&comm->pool_head, memory_order_acquire);
    hc_op_t *op;

    for (;;) {
        uint32_t index = (uint32_t)head;
        if (index == 0) {
            if (!add_slab(comm))
                return NULL;
            head = atomic_load_explicit(&comm->pool_head, memory_order_acquire);
            continue;
        }
        op = op_at(comm, index);
        if (atomic_compare_exchange_weak_explicit(
                &comm->pool_head, &head,
                ((head >> 32) + 1) << 32 | atomic_load_explicit(&op->pool_next, memory_order_relaxed),
                memory_order_acquire, memory_order_acquire))
            return op;
    }
}

/* Give op's memory back to where it came from: its slab stays with the communicator. */
static void release_storage(hc_op_t *op)
{
    if (op->pool_index == 0)
        free(op);
}

void hc_op_pool_drain(hc_comm_t *comm)
{
    hc_op_t *spare = atomic_exchange(&comm->spare_op, NULL);
    uint32_t n = atomic_load(&comm->nslabs);

    if (spare != NULL)
        release_storage(spare);
    atomic_store(&comm->pool_head, 0); /* only slab ops are ever pooled */
    for (uint32_t i = 0; i < n; i++) {
        free(atomic_load(&comm->slabs[i]));
        atomic_store(&comm->slabs[i], NULL);
    }
    atomic_store(&comm->nslabs, 0);
}

/*
 * The slab op this thread freed last, kept for its next op on the same communicator: in the blocking
 * pattern the thread that launches an op also runs and frees it, and the communicator's spare then
 * costs two atomic read-modify-writes per op. The communicator is named by address and handle (one
 * created later at the same address has another handle), and the pointer is followed only when both
 * match: a communicator destroyed meanwhile freed its slabs, and the entry is then just forgotten.
 */
static HC_TLS_FAST struct {
    const hc_comm_t *comm;
    const void *handle;
    hc_op_t *op;
} tls_spare;

void hc_op_fork_child(void)
{
    memset(&tls_spare, 0, sizeof(tls_spare)); /* the parent's communicators are not the child's */
}

/* An op's storage: this thread's spare, the communicator's, the pool's, else the heap (calloc);
 * NULL when out of memory. Cleared up to `task` (a copy fills the rest) or up to the pool's fields. */
static hc_op_t *take_storage(hc_comm_t *comm, size_t clear)
{
    hc_op_t *op = NULL;

    if (tls_spare.op != NULL && tls_spare.comm == comm && tls_spare.handle == comm->handle) {
        op = tls_spare.op;
        tls_spare.op = NULL;
    } else if (tls_spare.op != NULL && !hc_comm_handle_live(tls_spare.handle)) {
        tls_spare.op = NULL; /* its communicator was destroyed: forgotten, never followed */
    }
    if (op == NULL)
        op = atomic_exchange_explicit(&comm->spare_op, NULL, memory_order_acquire);
    if (op == NULL)
        op = pool_take(comm);
    if (op != NULL)
        memset((char *)op + clear, 0, offsetof(hc_op_t, pool_next) - clear); /* the pool's fields stay */
    else
        op = calloc(1, sizeof(*op));
    return op;
}

hc_op_t *hc_op_alloc(hc_comm_t *comm, hc_coll_t coll)
{
    hc_op_t *op = take_storage(comm, 0);

    if (op == NULL) {
        HC_ERROR("out of memory allocating a %s", hc_coll_name(coll));
        return NULL;
    }
    op->comm = comm;
    op->sig.coll = (uint32_t)coll;
    return op;
}

/* Where the next of op's arrays goes in its block (NULL stays NULL). */
static uint64_t *copy_into(uint64_t **next, const uint64_t *from, size_t n)
{
    uint64_t *to = *next;

    if (from == NULL)
        return NULL;
    memcpy(to, from, n * sizeof(*to));
    *next = to + n;
    return to;
}

int hc_op_own_vectors(hc_op_t *op)
{
    size_t n = op->comm->nranks, len = op->sig.coll == HC_COLL_ALLTOALLVC ? n * n : n, total = len + 3 * n;
    uint64_t *next = total <= HC_OP_INLINE_VECTORS ? op->inline_vectors : malloc(total * sizeof(*next));

    op->vectors_borrowed = 0;
    op->vectors_block = next != op->inline_vectors ? next : NULL;
    if (next == NULL) {
        op->counts = op->displs = op->recv_counts = op->recv_displs = NULL;
        return 0;
    }
    op->counts = copy_into(&next, op->counts, len);
    op->displs = copy_into(&next, op->displs, n);
    op->recv_counts = copy_into(&next, op->recv_counts, n);
    op->recv_displs = copy_into(&next, op->recv_displs, n);
    return 1;
}

/* from: an op whose count arrays, if any, are borrowed (the caller's): one that owned them (in a
 * block, or inline) would give the copy its pointers. */
hc_op_t *hc_op_alloc_copy(const hc_op_t *from)
{
    hc_op_t *op;

    hc_assert(from->vectors_block == NULL && (from->vectors_borrowed || from->counts == NULL));
    if ((op = take_storage(from->comm, offsetof(hc_op_t, task))) == NULL) {
        HC_ERROR("out of memory allocating a %s", hc_coll_name((hc_coll_t)from->sig.coll));
        return NULL;
    }
    memcpy(op, from, offsetof(hc_op_t, task));
    if (from->items == from->inline_items)
        op->items = op->inline_items;
    if (from->vectors_borrowed && !hc_op_own_vectors(op)) {
        HC_ERROR("%s: out of memory copying the count arrays", hc_coll_name((hc_coll_t)from->sig.coll));
        hc_op_free(op);
        return NULL;
    }
    return op;
}

HcclResult hc_op_items(hc_op_t *op, uint32_t n)
{
    op->items = n <= HC_OP_INLINE_ITEMS ? op->inline_items : malloc(n * sizeof(*op->items));
    if (op->items != NULL)
        return HCCL_SUCCESS;
    HC_ERROR("out of memory copying %u send/receive items", n);
    return HCCL_E_MEMORY;
}

void hc_op_free(hc_op_t *op)
{
    if (op == NULL)
        return;
    if (op->vectors_block != NULL) /* only the V variants have one: free(NULL) is not free */
        free(op->vectors_block);
    if (op->items != NULL && op->items != op->inline_items)
        free(op->items);
    if (op->comm != NULL) {
        hc_op_t *none = NULL;
        if (tls_spare.op == NULL && op->pool_index != 0 && op->comm->handle != NULL) {
            tls_spare.comm = op->comm;
            tls_spare.handle = op->comm->handle;
            tls_spare.op = op;
            return;
        }
        if (atomic_compare_exchange_strong_explicit(&op->comm->spare_op, &none, op, memory_order_release,
                                                    memory_order_relaxed))
            return;
        if (op->pool_index != 0) {
            pool_push(op->comm, op, op);
            return;
        }
    }
    release_storage(op);
}

/* Wait for this op's turn: ops of a communicator run in issue order, even across streams. The
 * wait is bounded: an earlier op stuck behind an event that is only recorded after this one is a
 * program error that must not hang. */
static HcclResult wait_turn(hc_comm_t *comm, const hc_op_t *op)
{
    int64_t deadline;
    HcclResult res = HCCL_SUCCESS;

    /* The usual case: the previous op is done (one stream per communicator). */
    if (atomic_load_explicit(&comm->exec_seq, memory_order_acquire) + 1 == op->seq)
        return HCCL_SUCCESS;
    deadline = hc_deadline_after_s(comm->settings.exec_timeout_s);
    hc_issue_lock(&comm->exec_lock);
    hc_comm_waiter_enter(comm);
    while (comm->exec_seq + 1 != op->seq) {
        if (atomic_load(&comm->async_error) != HCCL_SUCCESS) {
            res = (HcclResult)atomic_load(&comm->async_error); /* an earlier op failed: fail fast */
            break;
        }
        if (hc_comm_cond_wait(comm, deadline) != 0) {
            HC_ERROR("%s #%llu waited HCCL_EXEC_TIMEOUT=%lld s for op #%llu of the same communicator, which never "
                     "ran: ops of a communicator must be able to run in the order they were issued",
                     hc_coll_name(op->sig.coll), (unsigned long long)op->seq,
                     (long long)comm->settings.exec_timeout_s, (unsigned long long)(comm->exec_seq + 1));
            res = HCCL_E_TIMEOUT;
            break;
        }
    }
    hc_comm_waiter_leave(comm);
    hc_issue_unlock(&comm->exec_lock);
    return res;
}

/* Publish that op is done. The lock is taken only when someone waits for a turn (or for destroy):
 * a waiter counts itself under the lock before re-checking exec_seq, so either it sees the new value
 * or this thread sees the waiter (hc_comm_publish_exec). */
static void finish_turn(hc_comm_t *comm, const hc_op_t *op)
{
    if (!hc_comm_publish_exec(comm, op->seq))
        return;
    hc_issue_lock(&comm->exec_lock);
    pthread_cond_broadcast(&comm->exec_cv);
    hc_issue_unlock(&comm->exec_lock);
}

/* Run op on the engine, with the hooks that let peers see what this rank does; on a failure that
 * involves the peers, report the diagnosis (once per communicator: later ops fail fast). */
/*
 * A failed op's error line goes with the stream's error to the thread that synchronises it (the
 * per-thread last error of HcclHostGetRecentErrMsg would otherwise stay on the thread that ran it):
 * the line this thread logged while running it, or, for an op that failed fast on a communicator
 * that had failed before (logged then, perhaps on another thread), a line saying so.
 */
#define FAILURE_LINE_MAX 1024

/* `direct`: the line goes there (FAILURE_LINE_MAX bytes), for a run without a task. */
static void report_failure(const hc_op_t *op, HcclResult res, unsigned errors_before, char *direct)
{
    char line[256];
    const char *text = line;

    if (hc_log_error_count() != errors_before)
        text = hc_log_last_error();
    else
        snprintf(line, sizeof(line), "hostccl[rank %u comm %s] error: %s #%llu failed with %s: the communicator "
                 "had failed before", op->comm->rank, op->comm->name, hc_coll_name(op->sig.coll),
                 (unsigned long long)op->seq, hc_result_name(res));
    if (direct != NULL)
        snprintf(direct, FAILURE_LINE_MAX, "%s", text);
    else
        aclrtHostTaskSetErrMsg(text);
}

static HcclResult run_on_engine(hc_comm_t *comm, hc_op_t *op, char *direct_line)
{
    const hc_engine_ops_t *ops = comm->engine->ops;
    unsigned errors_before = hc_log_error_count();
    HcclResult res;

    if (op->run_ns == 0) { /* else it was recorded as running when it was launched */
        op->run_ns = hc_coarse_now_ns();
        hc_trace_running(&comm->trace, op);
    }
    res = ops->op_begin != NULL ? ops->op_begin(comm->engine, op) : HCCL_SUCCESS;
    if (res == HCCL_SUCCESS)
        res = ops->coll[op->sig.coll](comm->engine, op);
    /* The recorder says "failed" before the report reads it (the JSON dump would otherwise show the
     * failed op as running and successful). op_end comes first too: it tells the peers this rank
     * failed, so that those waiting for it fail (and can claim the report) meanwhile. */
    if (res != HCCL_SUCCESS) {
        hc_trace_state(&comm->trace, op->seq, HC_TRACE_FAILED, res);
        report_failure(op, res, errors_before, direct_line); /* the cause's, not the diagnosis after it */
    }
    if (ops->op_end != NULL)
        ops->op_end(comm->engine, op, res);
    if (res != HCCL_SUCCESS && hc_trace_worth_diagnosis(res) && atomic_load(&comm->async_error) == HCCL_SUCCESS)
        hc_trace_report(comm, op, res);
    if (res != HCCL_SUCCESS)
        hc_comm_set_error(comm, res);
    return res;
}

/*
 * Describe op to the profiler (aclprof, running: the caller checked). bytes is the call's count
 * argument times the element size; for a batch, the sum over its items.
 */
static void hc_op_profile(const hc_op_t *op, HcclResult res)
{
    hc_coll_t coll = (hc_coll_t)op->sig.coll;
    aclrtHostProfInfo info = {
        .name = hc_coll_name(coll),
        .category = "hccl",
        .comm = op->comm->name,
        .rank = (int32_t)op->comm->rank,
        .nranks = op->comm->nranks,
        .seq = op->seq,
        .count = op->count,
        .dtype = coll == HC_COLL_BARRIER || coll == HC_COLL_BATCH_SENDRECV ? NULL : hc_dtype_name(op->dtype),
        .redop = coll_has_redop(coll) ? hc_redop_name(op->redop) : NULL,
        .bytes = op->count * hc_dtype_size(op->dtype),
        .peer = -1,
        .result = (int)res,
    };

    if (coll == HC_COLL_BATCH_SENDRECV) {
        info.bytes = 0;
        for (uint32_t i = 0; i < op->nitems; i++)
            info.bytes += op->items[i].count * hc_dtype_size(op->items[i].dataType);
    } else if (coll == HC_COLL_BARRIER) {
        info.bytes = 0;
    }
    if (coll_has_root(coll) || coll == HC_COLL_SEND || coll == HC_COLL_RECV) {
        info.peer = op->root;
        info.peer_role = coll_has_root(coll) ? "root" : "peer";
    }
    aclrtHostProfAnnotate(&info);
}

/* The stream task of every op. */
static aclError run_op(void *arg)
{
    hc_op_t *op = arg;
    hc_comm_t *comm = op->comm;
    const hc_log_ctx_t *previous = hc_log_ctx_push(&comm->log_ctx);
    unsigned errors_before = hc_log_error_count();
    HcclResult res = wait_turn(comm, op);
    int sticky = atomic_load(&comm->async_error);

    if (res != HCCL_SUCCESS) {
        hc_comm_set_error(comm, res);
        hc_trace_state(&comm->trace, op->seq, HC_TRACE_FAILED, res);
        report_failure(op, res, errors_before, NULL);
        hc_log_ctx_pop(previous);
        hc_op_free(op);
        hc_comm_release(comm);
        return ACL_ERROR_RT_COMM_OP_FAILED;
    }
    if (sticky != HCCL_SUCCESS) {
        /* Fail fast with the original cause (no log: it was logged when it happened). */
        res = (HcclResult)sticky;
        report_failure(op, res, errors_before, NULL);
    } else {
        res = run_on_engine(comm, op, NULL);
    }
    hc_trace_state(&comm->trace, op->seq, res == HCCL_SUCCESS ? HC_TRACE_DONE : HC_TRACE_FAILED, res);
    if (aclrtHostProfActive())
        hc_op_profile(op, res);
    finish_turn(comm, op);
    hc_log_ctx_pop(previous);
    hc_op_free(op);
    hc_comm_release(comm);
    return res == HCCL_SUCCESS ? ACL_SUCCESS : ACL_ERROR_RT_COMM_OP_FAILED;
}

/*
 * May op run at once on the launching thread (aclrtHostTask.may_run_now, asked by the runtime when
 * the stream is idle and its policy has the caller run)? Only when every earlier op of the
 * communicator has finished here (so the engine's state is this thread's to read, and nothing of
 * this rank runs in between) and the engine says the op needs nothing more of this thread: every
 * peer has begun it. Otherwise it is queued, as every op used to be.
 */
static int op_may_run_now(void *arg)
{
    hc_op_t *op = arg;
    hc_comm_t *comm = op->comm;
    const hc_engine_ops_t *ops = comm->engine->ops;

    return ops->ready != NULL && atomic_load_explicit(&comm->exec_seq, memory_order_acquire) + 1 == op->seq &&
           ops->ready(comm->engine, op);
}

/* aclrtHostTask.start_now: op was queued on an idle stream, or is the queue's head (after
 * aclrtHostRunReady). When it is also the communicator's next op to run here (every earlier one has
 * finished), the engine may start it now, once, so that its peers find this rank's part of it
 * without waiting for the thread that will run the rest. */
static void op_start_now(void *arg)
{
    hc_op_t *op = arg;
    hc_comm_t *comm = op->comm;
    const hc_engine_ops_t *ops = comm->engine->ops;

    if (ops->start != NULL && !op->started &&
        atomic_load_explicit(&comm->exec_seq, memory_order_acquire) + 1 == op->seq &&
        atomic_load_explicit(&comm->async_error, memory_order_relaxed) == HCCL_SUCCESS)
        op->started = ops->start(comm->engine, op);
}

/*
 * The blocking fast path: an op whose launch the runtime would claim (the stream idle, owned by
 * this thread, in the synchronous pattern) runs here and now without a stream task when the engine
 * says it needs nothing more of this thread (op_may_run_now): no queue entry, no op from the pool
 * (op is the caller's, on its stack), none of the task's frame. What a claimed op does stays: the
 * issue order under exec_lock, the sequence numbers, the announcement, the flight recorder, the
 * engine's diagnosis, and a failure is the stream's to report at its synchronisation.
 *
 * An op that is not ready (its peers have not begun it: two ranks that launch at once both find
 * the other absent) is started first, as a queued op on an idle stream is (op_start_now), and
 * asked again: a rank's first step is published before it looks at its peers', so of ranks that
 * start at once the last to look finds every other; only an op still waiting is queued, from the
 * pool, as the stream's next task (aclrtHostDirectQueue). Either way the stream's owner claimed it
 * before anything was done: only an idle stream's op may start, and nothing else of the stream
 * runs before it.
 */
hc_direct_t hc_op_run_direct(hc_op_t *op, aclrtStream stream)
{
    hc_comm_t *comm = op->comm;
    const hc_engine_ops_t *ops = comm->engine != NULL ? comm->engine->ops : NULL;
    char line[FAILURE_LINE_MAX];
    void *direct;
    HcclResult res;
    int entered, ready;

    if (ops == NULL || ops->ready == NULL || ops->coll[op->sig.coll] == NULL)
        return HC_DIRECT_NO; /* the launch refuses it */
    /* Earlier ops still in flight (a burst of launches): this one cannot run now. Said before the
     * issue lock and the signature hash, which the launch takes and computes again: a hint, checked
     * under the lock below. Where the engine wants it (progress_at_launch), the stream first runs
     * the queued ops that are ready and starts the next one, so that its peers find this rank's part
     * of it: else, once one op of a burst had to be queued, every later one queued too, and the
     * ranks took turns filling their queues (1024 ops) and running them (2 ranks, 8-byte bursts, us
     * a call: Broadcast 0.28-0.44 -> 0.15-0.22, AllGather 0.59-0.68 -> 0.41-0.44, Send/Recv
     * 1.06-1.08 -> 0.67-0.78; without the start, the head of a stepped op or an exchange was never
     * ready by the next launch). */
    if (atomic_load_explicit(&comm->exec_seq, memory_order_relaxed) !=
        atomic_load_explicit(&comm->next_seq, memory_order_relaxed)) {
        if (ops->progress_at_launch == NULL || !ops->progress_at_launch(comm->engine))
            return HC_DIRECT_NO;
        aclrtHostRunReady(stream);
        if (atomic_load_explicit(&comm->exec_seq, memory_order_relaxed) !=
            atomic_load_explicit(&comm->next_seq, memory_order_relaxed))
            return HC_DIRECT_NO;
    }
    entered = hc_issue_enter(&comm->exec_lock);
    op->seq = atomic_load_explicit(&comm->next_seq, memory_order_relaxed) + 1;
    op->coll_seq = hc_coll_is_p2p((hc_coll_t)op->sig.coll) ? 0 : comm->next_coll_seq + 1;
    op->sig_hash = hc_op_sig_hash(&op->sig, op->coll_seq);
    /* The sticky error after the previous op's end is seen (acquire), as run_op reads it after its
     * turn: an op that failed on another thread is seen here, and the launch fails this one fast. */
    if (atomic_load(&comm->suspended) || atomic_load_explicit(&comm->exec_seq, memory_order_acquire) + 1 != op->seq ||
        atomic_load_explicit(&comm->async_error, memory_order_relaxed) != HCCL_SUCCESS) {
        hc_issue_leave(&comm->exec_lock, entered);
        return HC_DIRECT_NO;
    }
    /* An engine that starts ops (and queues those not ready) is asked after the claim, just before
     * it would start the op. */
    ready = ops->start == NULL && ops->ready(comm->engine, op);
    if ((!ready && ops->start == NULL) || (direct = aclrtHostDirectBegin(stream)) == NULL) {
        hc_issue_leave(&comm->exec_lock, entered);
        return HC_DIRECT_NO;
    }
    if (ops->start != NULL)
        ready = ops->ready(comm->engine, op);
    atomic_store_explicit(&comm->next_seq, op->seq, memory_order_relaxed);
    comm->next_coll_seq += op->coll_seq != 0;
    if (op->coll_seq != 0 && ops->announce != NULL)
        ops->announce(comm->engine, &op->sig, op->coll_seq, op->sig_hash);
    if (!ready && (op->started = ops->start(comm->engine, op)) != 0)
        ready = ops->ready(comm->engine, op);
    op->run_ns = ready ? hc_coarse_now_ns() : 0; /* ready: it runs now, recorded as running at once */
    hc_trace_queued(&comm->trace, op, stream);
    /* The stream stays claimed: work other threads launch on it queues behind this op, which is
     * queued (at the head) outside the issue lock's section, whose owner's path must not wait. */
    hc_issue_leave(&comm->exec_lock, entered);
    if (!ready) {
        hc_op_t *queued = hc_op_alloc_copy(op);
        if (queued != NULL) {
            queued->task = (aclrtHostTask){.fn = run_op, .arg = queued,
                                           .what = op->fn != NULL ? op->fn : hc_coll_name(op->sig.coll),
                                           .may_run_now = op_may_run_now, .start_now = op_start_now,
                                           .bounded = 1};
            hc_comm_ref(comm); /* the queued op's own, which its run drops */
            aclrtHostDirectQueue(direct, &queued->task);
            return HC_DIRECT_QUEUED;
        }
        /* Out of memory for the queue entry: it runs here, waiting for its peers (bounded). */
    }
    res = run_on_engine(comm, op, line);
    hc_trace_state(&comm->trace, op->seq, res == HCCL_SUCCESS ? HC_TRACE_DONE : HC_TRACE_FAILED, res);
    finish_turn(comm, op);
    if (op->items != NULL && op->items != op->inline_items)
        free(op->items); /* a batch's, when they did not fit in the op */
    aclrtHostDirectEnd(direct, res == HCCL_SUCCESS ? ACL_SUCCESS : ACL_ERROR_RT_COMM_OP_FAILED,
                       op->fn != NULL ? op->fn : hc_coll_name(op->sig.coll), res == HCCL_SUCCESS ? NULL : line);
    return HC_DIRECT_RAN;
}

static HcclResult refuse(hc_op_t *op)
{
    hc_comm_t *comm = op->comm;
    int sticky = atomic_load(&comm->async_error);

    if (sticky != HCCL_SUCCESS) {
        HC_ERROR("%s refused: the communicator failed earlier with %s", hc_coll_name(op->sig.coll),
                 hc_result_name((HcclResult)sticky));
        hc_op_free(op);
        return (HcclResult)sticky;
    }
    if (comm->engine == NULL || comm->engine->ops->coll[op->sig.coll] == NULL) {
        HC_ERROR("%s is not supported on this communicator yet: %s", hc_coll_name(op->sig.coll),
                 comm->engine == NULL ? comm->no_engine_reason : "the engine does not implement it");
        hc_op_free(op);
        return HCCL_E_NOT_SUPPORT;
    }
    return HCCL_SUCCESS;
}

HcclResult hc_op_enqueue_taking(hc_op_t *op, aclrtStream stream)
{
    hc_comm_t *comm = op->comm;
    aclError err;
    uint64_t coll_seq, sig_hash;
    hc_op_sig_t op_sig;
    int claimed = 0, entered;

    HC_CHECK(refuse(op));
    /* Sequence numbers are taken under exec_lock together with the launch, so that their order on
     * the streams is the issue order even when several threads issue on one communicator (the one
     * thread that issues takes no lock: hc_issue.h). */
    entered = hc_issue_enter(&comm->exec_lock);
    if (atomic_load(&comm->suspended)) {
        hc_issue_leave(&comm->exec_lock, entered);
        HC_ERROR("%s refused: the communicator is suspended (HcclCommSuspend); HcclCommResume continues it",
                 hc_coll_name(op->sig.coll));
        hc_op_free(op);
        return HCCL_E_SUSPENDING;
    }
    /* Written only under exec_lock: a store, not a read-modify-write (~6 ns each here). */
    op->seq = atomic_load_explicit(&comm->next_seq, memory_order_relaxed) + 1;
    atomic_store_explicit(&comm->next_seq, op->seq, memory_order_relaxed);
    if (!hc_coll_is_p2p((hc_coll_t)op->sig.coll))
        op->coll_seq = ++comm->next_coll_seq;
    op->sig_hash = hc_op_sig_hash(&op->sig, op->coll_seq);
    coll_seq = op->coll_seq;
    op_sig = op->sig; /* once launched, op may run and be freed */
    sig_hash = op->sig_hash;
    hc_trace_queued(&comm->trace, op, stream);
    /* `what` is the public call that made the op: the runtime names it in its errors about the
     * stream (no current device, a destroyed stream). */
    op->task = (aclrtHostTask){.fn = run_op, .arg = op, .what = op->fn != NULL ? op->fn : hc_coll_name(op->sig.coll),
                               .may_run_now = op_may_run_now, .start_now = op_start_now, .bounded = 1};
    err = aclrtHostLaunchTaskIn(stream, &op->task, &claimed);
    if (err != ACL_SUCCESS) {
        hc_trace_state(&comm->trace, op->seq, HC_TRACE_FAILED, HCCL_E_RUNTIME); /* frees its entry */
        atomic_store_explicit(&comm->next_seq, op->seq - 1, memory_order_relaxed);
        comm->next_coll_seq -= op->coll_seq != 0;
    } else if (coll_seq != 0 && comm->engine->ops->announce != NULL) {
        comm->engine->ops->announce(comm->engine, &op_sig, coll_seq, sig_hash);
    }
    hc_issue_leave(&comm->exec_lock, entered);
    if (err != ACL_SUCCESS) {
        /* The runtime said why, naming the call (op->task.what). */
        hc_op_free(op);
        return HCCL_E_RUNTIME;
    }
    /* Run-at-enqueue: outside exec_lock, which the engine takes while it runs. A failure is the
     * stream's to report, as for a queued op (aclrtSynchronizeStream). */
    if (claimed == 1)
        aclrtHostRunClaimed(&op->task);
    else if (claimed == ACL_HOST_LAUNCH_FULL)
        aclrtHostThrottle(stream); /* op may have run and been freed */
    return HCCL_SUCCESS;
}

HcclResult hc_op_enqueue(hc_op_t *op, aclrtStream stream)
{
    hc_comm_t *comm = op->comm;
    HcclResult res;

    atomic_fetch_add(&comm->refs, 1);
    res = hc_op_enqueue_taking(op, stream);
    if (res != HCCL_SUCCESS)
        atomic_fetch_sub(&comm->refs, 1); /* never the last: the caller holds one */
    return res;
}
