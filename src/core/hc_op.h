/*
 * The operation descriptor (DESIGN.md 7): every public call fills one hc_op_t and hands it to
 * hc_op_enqueue. The op carries a per-communicator sequence number and a signature that every rank
 * must agree on; engines compare signatures at their first synchronisation.
 */
#ifndef HC_OP_H
#define HC_OP_H

#include <stdint.h>

#include <hccl/hccl.h>

#include "rt_ext.h"

struct hc_comm;

typedef enum {
    HC_COLL_ALLREDUCE,
    HC_COLL_BROADCAST,
    HC_COLL_REDUCE,
    HC_COLL_ALLGATHER,
    HC_COLL_ALLGATHERV,
    HC_COLL_REDUCE_SCATTER,
    HC_COLL_REDUCE_SCATTERV,
    HC_COLL_SCATTER,
    HC_COLL_ALLTOALL,
    HC_COLL_ALLTOALLV,
    HC_COLL_ALLTOALLVC,
    HC_COLL_BARRIER,
    HC_COLL_SEND,
    HC_COLL_RECV,
    HC_COLL_BATCH_SENDRECV,
    HC_COLL_COUNT
} hc_coll_t;

/* What every rank of an op must agree on. For V variants `digest` hashes the counts that all
 * ranks see (e.g. AllGatherV's recvCounts); 0 otherwise. Fixed-size so it fits a control block. */
typedef struct {
    uint32_t coll;
    uint32_t dtype;
    uint32_t redop;
    uint32_t root;
    uint64_t count;
    uint64_t digest;
} hc_op_sig_t;

#define HC_OP_INLINE_ITEMS 2
#define HC_OP_INLINE_VECTORS 32 /* an AlltoAllV's four count arrays of up to 8 ranks */

typedef struct hc_op {
    hc_op_sig_t sig;
    uint64_t seq;            /* per communicator, from 1, in issue order (all ops, this rank's view) */
    uint64_t coll_seq;       /* collectives only, from 1: the number every rank agrees on (0: p2p) */
    uint64_t sig_hash;       /* hc_op_sig_hash(sig, coll_seq), what ranks compare (set at enqueue) */
    uint64_t parent_number;  /* a sub-op an engine runs for another op: that op's number (messages) */
    struct hc_comm *comm;    /* holds a reference while the op exists */
    const char *fn;          /* the public call that made it ("HcclAllReduce"), for messages */
    void *sendbuf;
    void *recvbuf;
    uint64_t count;          /* elements: the op's `count` / `sendCount` / `recvCount` */
    HcclDataType dtype;
    HcclReduceOp redop;
    uint32_t root;           /* root or peer rank */
    /* V variants: arrays of comm size; AlltoAllVC: size*size matrix. In inline_vectors or one block
     * the op owns (vectors_block), or, on the blocking fast path (hc_op_run_direct: an op on the
     * caller's stack), the caller's own arrays (vectors_borrowed), which hc_op_alloc_copy copies
     * for an op that outlives the call. */
    uint64_t *counts;
    uint64_t *displs;
    uint64_t *recv_counts;
    uint64_t *recv_displs;
    uint64_t *vectors_block;
    int vectors_borrowed;
    /* BatchSendRecv (and the point-to-point calls of a group): owned copies of the items, in
     * inline_items when they fit (a Send and a Recv: no allocation; hc_op_items). */
    HcclSendRecvItem *items;
    uint32_t nitems;
    HcclSendRecvItem inline_items[HC_OP_INLINE_ITEMS];
    int started;             /* the engine began it at launch (hc_engine_ops_t.start) */
    int64_t run_ns;          /* coarse clock when it began to run (0: not yet): one read, not one each
                              * for the recorder and the engine's diagnosis (a read is a few % of a
                              * small op) */
    aclrtHostTask task;      /* the op's entry in its stream's queue */
    /* Kept when the op is reused (hc_op_alloc clears everything above): */
    _Atomic uint32_t pool_next; /* while in its communicator's pool: the next free op's index */
    uint32_t pool_index;     /* this op's index in its communicator's slabs, from 1 (0: not a slab op) */
    /* The count arrays an op owns when they fit (hc_op_own_vectors): a queued V variant of a few
     * ranks allocates nothing. Never cleared: only what own_vectors wrote is read. (Kept beside the
     * slab's ops instead, away from the op's lines, alltoallv_test's 8-byte bursts took 0.76-0.79
     * us against 0.62-0.66 here and 0.69-0.72 with a malloc'd block; the op is 600 bytes, not 344.) */
    uint64_t inline_vectors[HC_OP_INLINE_VECTORS];
} hc_op_t;

/* Is coll point-to-point (Send, Recv, a batch)? Ranks take part in different numbers of those, so
 * they do not count in coll_seq. */
static inline int hc_coll_is_p2p(hc_coll_t coll)
{
    return coll == HC_COLL_SEND || coll == HC_COLL_RECV || coll == HC_COLL_BATCH_SENDRECV;
}

/* The number to show for op in messages: its collective number, or its issue number for p2p. */
static inline unsigned long long hc_op_number(const hc_op_t *op)
{
    if (op->parent_number != 0)
        return (unsigned long long)op->parent_number;
    return (unsigned long long)(op->coll_seq != 0 ? op->coll_seq : op->seq);
}

/* "allreduce", "broadcast", ... */
const char *hc_coll_name(hc_coll_t coll);

/* "allreduce count=1024 fp16 sum" (root/peer when the collective has one) into buf. */
const char *hc_op_sig_format(const hc_op_sig_t *sig, char *buf, size_t len);

/* Do two signatures describe the same call? */
int hc_op_sig_equal(const hc_op_sig_t *a, const hc_op_sig_t *b);

/* A 64-bit hash of an array of uint64 values (signatures, V-variant digests; op.c). */
uint64_t hc_op_digest(const uint64_t *values, size_t n);

/* The hash ranks compare to check that they make the same call: the signature and the collective
 * number (equal hashes of equal-length inputs: the same call, but for a 2^-64 chance). */
uint64_t hc_op_sig_hash(const hc_op_sig_t *sig, uint64_t coll_seq);

/*
 * The blocking fast path (op.c): op, a collective, a Send, a Recv or a batch (the caller's, on its
 * stack: nothing keeps it after the call; a V variant's count arrays may be the caller's too), on
 * an idle stream the calling thread owns in the synchronous pattern. HC_DIRECT_RAN: it ran on the
 * calling thread without a stream task (a failure is the stream's, reported at its
 * synchronisation), and a batch's items, if allocated, were freed; HC_DIRECT_QUEUED: a copy from
 * the pool, owning the items, the count arrays and a reference of its own on the communicator, was
 * queued on the stream; HC_DIRECT_NO: nothing was done, launch op (hc_op_enqueue_taking, after
 * hc_op_alloc_copy). The caller's reference (or borrow) stays the caller's in every case.
 */
typedef enum { HC_DIRECT_NO, HC_DIRECT_RAN, HC_DIRECT_QUEUED } hc_direct_t;
hc_direct_t hc_op_run_direct(hc_op_t *op, aclrtStream stream);

/*
 * Enqueue op on stream: assigns the sequence number, takes a reference on the communicator and
 * launches the op in stream order. On success the op belongs to the stream task; on failure it is
 * freed here and nothing was enqueued.
 */
HcclResult hc_op_enqueue(hc_op_t *op, aclrtStream stream);

/* hc_op_enqueue that hands the caller's reference on the communicator to the op instead of taking
 * another (two atomic read-modify-writes fewer per call); on failure the caller keeps it. */
HcclResult hc_op_enqueue_taking(hc_op_t *op, aclrtStream stream);

/* Allocate a zeroed op for comm (NULL on allocation failure, logged). */
hc_op_t *hc_op_alloc(struct hc_comm *comm, hc_coll_t coll);
/* The same holding a copy of `from` up to its stream task (an op built on the stack that has to be
 * launched after all): nothing is cleared and then written again; the copy owns from's arrays
 * (borrowed count arrays are copied; NULL, logged, when that fails). */
hc_op_t *hc_op_alloc_copy(const hc_op_t *from);
/* Replace op's borrowed count arrays (vectors_borrowed) with copies it owns; 0 when out of memory,
 * and then it has none. */
int hc_op_own_vectors(hc_op_t *op);
/* Give op room for n send/receive items (op->items; inline when they fit); HCCL_E_MEMORY if not. */
HcclResult hc_op_items(hc_op_t *op, uint32_t n);
/* Free op; the caller still holds a reference on op->comm (the communicator may keep the memory
 * for its next op). */
void hc_op_free(hc_op_t *op);
/* Give a new communicator its first slabs of ops (best effort: without them ops come from calloc). */
void hc_op_pool_init(struct hc_comm *comm);
/* Free the communicator's spare op, pool and slabs (when it is destroyed). */
void hc_op_pool_drain(struct hc_comm *comm);

/* After fork(): forget the op this thread kept for its next one (hc_op_alloc). */
void hc_op_fork_child(void);

#endif /* HC_OP_H */
