/* Private structures of the intra-host engine (see hc_shm.h for the protocol). */
#ifndef HC_SHM_INTERNAL_H
#define HC_SHM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "hc_compiler.h"
#include "hc_copy.h"
#include "hc_boot.h"
#include "hc_dtype.h"
#include "hc_shm.h"
#include "hc_watchdog.h"

#define HC_SHM_MAGIC 0x4d485343484f5354ull /* "TSOHCSHM" */
#define HC_SHM_CPU_WORDS 16 /* CPUs 0-1023 in a published affinity mask */
#define HC_SHM_HEADER_BYTES 4096
#define HC_SHM_CTRL_BYTES (712u * 1024u) /* mostly the eager ring and its medium slots */
#define HC_SHM_SLOT_MIN (64u * 1024u)
#define HC_SHM_SLOT_MAX (4u * 1024u * 1024u)

typedef struct {
    uint64_t magic;
    uint32_t nlocal;
    uint32_t reserved;
    uint64_t slot_bytes;
    uint64_t total_bytes;
    /* Which rank logs the n-rank diagnosis of a failure (hc_watchdog_claim; shm_watch.c). */
    _Alignas(64) atomic_uint_fast64_t report_claim;
} hc_shm_header_t;

/* A buffer as a peer can reach it: the address in the owner's process, and its offset in the
 * owner's arena (-1: not arena memory); and how the owner wants its send buffer read in this op
 * (hc_shm_source_t: from its slot, in place, or with process_vm_readv), which it alone decides, and
 * whether it measured to decide (then the slots are a choice, not all it could do). */
typedef struct {
    uint64_t send_addr, recv_addr;
    int64_t send_off, recv_off;
    uint32_t send_read;
    uint32_t send_measured;
} hc_shm_buf_desc_t;

/* A pending point-to-point item, as published for diagnosis. */
#define HC_DIAG_P2P 8
typedef struct {
    uint32_t peer;
    uint32_t is_send;
    uint64_t count;
    uint32_t dtype;
    uint32_t reserved;
} hc_shm_p2p_note_t;

/*
 * The hot line of one step parity: everything a waiter reads per step of a small op, so that one
 * cache-line transfer per peer carries the flag, the signature check and the data (a second line
 * for the data costs a second miss, ~0.15 us between cores here). Written in the order data, hash,
 * flag (release); double-buffered by parity for the reason the slots are (hc_shm_step_begin).
 */
#define HC_SHM_INLINE_BYTES 48
typedef struct {
    _Alignas(64) atomic_uint_fast64_t arrive; /* last step of this parity this rank published */
    uint64_t sig_hash;                        /* hash of that step's op signature and number */
    _Alignas(16) uint8_t data[HC_SHM_INLINE_BYTES]; /* the step's data when it is this small */
} hc_shm_hot_t;

_Static_assert(sizeof(hc_shm_hot_t) == 64, "the hot line is one cache line");

/*
 * Announcements and the eager ring (shm_announce.c). A rank announces every collective it will run
 * (number and signature hash) as soon as it is enqueued, if the entry it reuses is free, else when
 * it starts running; small rooted collectives (Broadcast, Reduce of at most HC_SHM_EAGER_BYTES) then
 * move their data through a ring of HC_SHM_EAGER_SLOTS slots per rank instead of lock-stepped
 * slots, so that the ranks that write (the root of a Broadcast, the others of a Reduce) run up to
 * that many collectives ahead of the readers. Every rank compares every rank's signature of every
 * collective, the writers of the eager path up to HC_SHM_DEFER_MAX collectives later ("Deferred
 * checks" in shm_announce.c): the announcements are what make that possible without waiting for
 * the others to run it. Slot k serves the collectives k, k + EAGER_SLOTS, ..., and may be reused for
 * collective q once every local rank has finished q - EAGER_SLOTS (done_seq); entry k the
 * collectives k, k + ANN_SLOTS, ..., reused once every local rank has checked q - ANN_SLOTS
 * (checked_seq).
 *
 * Data up to HC_SHM_EAGER_BYTES sits in the slot itself; larger data, up to HC_SHM_EAGER_MAX, in
 * one of HC_SHM_MEDIUM_SLOTS medium slots, taken in turn, which the slot names. A medium slot is
 * reused once every local rank has finished the collective that last used it.
 */
#define HC_SHM_EAGER_SLOTS 256
/* Announcement entries per rank: an entry is reused once every local rank has checked the
 * collective that used it last (checked_seq), which lags its done_seq by up to its deferred list,
 * so a rank can announce at enqueue up to HC_SHM_ANN_SLOTS - HC_SHM_DEFER_MAX collectives ahead of
 * the slowest rank's checks. With 256 entries and lists of 128 that lookahead was too short for
 * bursts on ranks sharing CPUs (collectives announced only when they ran tied the ranks together).
 */
#define HC_SHM_ANN_SLOTS 1024
/* Collectives a writer of the eager path (and, past 2 ranks, a reader, for the other readers) may
 * complete before it has compared the others' signatures of them (shm_announce.c, "Deferred
 * checks"): how far it runs ahead of their announcements before it waits for them. Each wait is a
 * poll of the line the peer writes next on 2 ranks, a sleep and a wake-up where ranks share CPUs.
 * 4 ranks on 2 CPUs, 8-byte Broadcast, Scatter and Reduce, us a call against a list of 16 (which
 * bursts used until the announcement ring outgrew the eager ring): launches synchronised every 8
 * calls 1.04-1.32 -> 0.51-0.64, every 1000 0.62-0.86 -> 0.53-0.68, every call within the noise;
 * 256 was no better than 128 (bench/results/2026-12-05-pvm-burst-lists.md). Less than
 * HC_SHM_ANN_SLOTS: an unchecked collective keeps its announcement entry, which the writer itself
 * needs again HC_SHM_ANN_SLOTS collectives later. */
#define HC_SHM_DEFER_MAX 128
_Static_assert(HC_SHM_DEFER_MAX < HC_SHM_ANN_SLOTS, "a writer must get its own announcement entries back");
#define HC_SHM_EAGER_BYTES 496
#define HC_SHM_MEDIUM_SLOTS 16
#define HC_SHM_EAGER_MAX (32u * 1024u)
typedef struct {
    atomic_uint_fast64_t seq; /* the collective announced here (0: none yet) */
    uint64_t hash;            /* its signature hash (as on the hot line) */
} hc_shm_ann_t;

/* The hash travels with the data, so that a reader compares the writer's signature on the line it
 * reads anyway; the writer's announcement is read only to name another call. Every rank knows the
 * data's size from the signature: up to HC_SHM_EAGER_BYTES it is in the slot, else in the medium
 * slot the slot names. */
typedef struct {
    _Alignas(64) atomic_uint_fast64_t seq; /* the collective whose data this is */
    uint64_t hash;                         /* that collective's signature hash (as on the hot line) */
    union {
        uint8_t data[HC_SHM_EAGER_BYTES];
        uint32_t medium;
    };
} hc_shm_eager_t;

_Static_assert(sizeof(hc_shm_eager_t) == 512, "an eager slot is eight cache lines");

typedef struct {
    /* A rank has published step s when hot[s & 1].arrive >= s: steps are published in order, so
     * the flag of s's parity holds s or a later step of that parity. The full signature below is
     * read only to explain a mismatch. */
    hc_shm_hot_t hot[2];
    _Alignas(64) hc_op_sig_t sig[2];          /* signature of the op of the step, by parity */
    uint64_t op_seq[2];                       /* the op's coll_seq, by parity */
    /* Ranks waiting for this rank's flags sleep on wake_seq after counting themselves in
     * sleepers; a publisher only makes the futex call when sleepers is non-zero, so the fast path
     * (nobody asleep) costs one load of a line nobody else writes. */
    _Alignas(64) atomic_uint sleepers;
    atomic_uint wake_seq;
    /* This rank's doorbell: its progress loops (point-to-point, the mailbox) sleep on `bell` after
     * counting themselves in `bell_waiters`; a peer that published something for it (a chunk, a
     * posted receive, a consumed chunk, an error) bumps `bell` and wakes them, only while they
     * wait. One per rank, not one per segment: with one, every publish woke every sleeping loop of
     * the host, and pairs that do not talk to each other took each other's CPUs. */
    _Alignas(64) atomic_uint bell;
    atomic_uint bell_waiters;
    /* Zero-copy: where this rank's buffers of the step's op are, by parity (shm_zcopy.c). */
    _Alignas(64) hc_shm_buf_desc_t bufs[2];
    /* This rank's aclrtMalloc arena, for peers to map (fd -1: none yet). */
    _Alignas(64) int32_t arena_fd;
    uint64_t arena_bytes;
    uint64_t self_addr;                /* this block's address in the owner's process (CMA probe) */
    /* What this rank is doing, for the peers' failure diagnosis (shm_diag.c); written by the rank
     * itself, read by others only when something already went wrong, so plain fields suffice. */
    _Alignas(64) uint64_t cur_seq;     /* op in progress (collective number, or issue number), 0: none */
    uint32_t cur_is_coll;
    hc_op_sig_t cur_sig;
    int64_t cur_since_ns;              /* CLOCK_MONOTONIC_COARSE, comparable across processes of a host */
    uint64_t last_seq;                 /* last collective that ended (coll_seq) */
    int32_t last_result;
    uint32_t np2p;                     /* pending point-to-point items below (at most HC_DIAG_P2P) */
    /* Set (to the HcclResult) when an op of this rank failed: it takes part in nothing any more,
     * so ranks waiting for it fail at once instead of at their timeout. */
    _Alignas(64) atomic_int failed;
    hc_shm_p2p_note_t p2p[HC_DIAG_P2P];
    /* The CPU this rank last waited on, plus one (0: not known yet); its own line, which the owner
     * writes only when the scheduler moved it, so that waiters read it from their cache. A waiter
     * does not spin for a rank that runs on its own CPU (hc_shm_wait_arrive). */
    _Alignas(64) atomic_int cpu_plus_one;
    /* The runner kick (shm_kick.c): the number of an op this rank started at launch and nobody has
     * begun running since (0: none), written by the rank; `kick`, bumped by a peer that waited too
     * long for such an op, wakes the rank's listener, which says here that it runs. */
    _Alignas(64) atomic_uint_fast64_t parked;
    atomic_uint kick;
    atomic_int kick_listens;
    /* This rank's affinity mask (bit c: CPU c), published at creation, so that every rank can tell
     * whether the local ranks together have a CPU each (hc_shm_pick_spin). */
    uint64_t cpus[HC_SHM_CPU_WORDS];
    int32_t asym_fence; /* this rank's process is registered for the asymmetric fence (shm_step.c) */
    /* Announcements (four to a line: a reader ahead of the writer misses once per four) and the
     * full signatures behind them, read only to explain a mismatch. */
    _Alignas(64) hc_shm_ann_t ann[HC_SHM_ANN_SLOTS];
    hc_op_sig_t ann_sig[HC_SHM_ANN_SLOTS];
    /* Per announcement: the running hash of every collective this rank announced up to it (its
     * own line set, read once per deferred check: shm_announce.c's compare_announced). */
    _Alignas(64) uint64_t ann_chain[HC_SHM_ANN_SLOTS];
    /* The last collective this rank finished (successfully; a failure sets `failed`), and the last
     * up to which it has compared every rank's signature of every collective (a writer of the
     * eager path defers that: shm_announce.c). Announcement entries are reused by checked_seq,
     * eager slots by done_seq. */
    _Alignas(64) atomic_uint_fast64_t done_seq;
    atomic_uint_fast64_t checked_seq;
    _Alignas(64) hc_shm_eager_t eager[HC_SHM_EAGER_SLOTS];
    _Alignas(4096) uint8_t medium[HC_SHM_MEDIUM_SLOTS][HC_SHM_EAGER_MAX];
} hc_shm_ctrl_t;

_Static_assert(sizeof(hc_shm_ctrl_t) <= HC_SHM_CTRL_BYTES, "control block too large");
_Static_assert(sizeof(hc_shm_header_t) <= HC_SHM_HEADER_BYTES, "header too large");


/*
 * Point-to-point channel from one local rank to another: a ring of HC_P2P_SLOTS chunks. The
 * sender advances `head` after filling a chunk, the receiver `tail` after draining one; both only
 * ever grow. Every chunk carries the message's header so that the receiver checks count and type
 * against its own call on the first chunk, and reports a mismatch back through `error`. A chunk's
 * header also says that it is filled (`ready`: its number in the channel plus one, stored last),
 * so the receiver polls the header it reads next anyway instead of `head` on a line of its own:
 * one cache-line transfer fewer per message, and a message of at most HC_P2P_INLINE_BYTES rides in
 * the header's line itself.
 *
 * A chunk is either eager (its payload follows the header) or, for large messages, a rendezvous
 * descriptor: where the sender's buffer is (address in the sender's process and arena offset, as
 * hc_shm_buf_desc_t), which the receiver copies from in place and then consumes like any chunk.
 * The sender's buffer stays untouched until then because a rendezvous send completes only when
 * `tail` has passed its last chunk.
 *
 * An eager send completes as soon as its receive is posted: the receiver publishes the message
 * number, count and type of the receive it is running (`posted`, a sequence lock: the number
 * shifted left, its low bit set while the three are rewritten), and the sender, once its last chunk
 * is in the ring, compares them with its own. A send still needs its receive (HCCL's rendezvous:
 * two ranks sending to each other deadlock, and hc_shm_watch says so), but not the receiver's copy,
 * which then overlaps the sender's next message.
 *
 * A message that fits one chunk goes whole (HC_P2P_WHOLE: no offset or size to tell), and its
 * header carries instead the sender's own latest posting of a receive from that peer. In an
 * exchange (each rank of a pair sends to and receives from the other in one batch) every rank posts
 * its receive before it sends, so the chunk it reads for its receive also tells that its send is
 * received: one line per direction instead of two (2 ranks, 8 bytes, 0.13 us of ~0.77 a call).
 */
#define HC_P2P_SLOTS 4
#define HC_P2P_CHANNEL_HEADER 256

/* Values of hc_p2p_channel_t.error, set by the receiver. */
enum { HC_P2P_OK = 0, HC_P2P_ERR_MISMATCH = 1, HC_P2P_ERR_UNREADABLE = 2 };

/* Values of hc_p2p_chunk_t.kind. */
enum { HC_P2P_EAGER = 0, HC_P2P_RNDV = 1, HC_P2P_WHOLE = 2 };

typedef struct {
    _Alignas(64) atomic_uint_fast64_t head;  /* chunks written by the sender */
    _Alignas(64) atomic_uint_fast64_t tail;  /* chunks consumed by the receiver */
    /* Receiver: msg_seq << 1 of its receive (| 1: rewriting), its count and type. A line apart from
     * `tail`, which the receiver stores first when it consumes a message: a sender waiting for its
     * next receive then does not hold the line that store needs. */
    _Alignas(64) atomic_uint_fast64_t posted;
    atomic_uint_fast64_t posted_count;
    atomic_uint posted_dtype;
    _Alignas(64) atomic_uint error;          /* HC_P2P_ERR_*, set by the receiver */
} hc_p2p_channel_t;

#define HC_P2P_INLINE_BYTES 16

typedef struct {
    atomic_uint_fast64_t ready; /* the chunk's number + 1 once filled (release), by the sender */
    uint64_t msg_seq;     /* per (sender, receiver) pair, from 1 */
    uint64_t count;       /* elements of the whole message */
    uint32_t dtype;
    uint16_t kind;        /* HC_P2P_EAGER, HC_P2P_RNDV or HC_P2P_WHOLE */
    uint16_t posted_dtype; /* HC_P2P_WHOLE: the type of h.posted's receive */
    union {
        struct {
            uint64_t offset; /* bytes of the message before this chunk */
            uint64_t bytes;  /* bytes in this chunk (rendezvous: the whole message) */
        } part;              /* HC_P2P_EAGER, HC_P2P_RNDV */
        struct {
            uint64_t seq;    /* the sender's latest receive from the receiver it posted (its msg_seq) */
            uint64_t count;
        } posted;            /* HC_P2P_WHOLE */
    } h;
    union {
        struct {
            uint64_t src_addr; /* rendezvous: the send buffer, in the sender's process */
            int64_t src_off;   /* rendezvous: its offset in the sender's arena, -1: not arena memory */
        } rndv;
        uint8_t data[HC_P2P_INLINE_BYTES]; /* eager chunk of at most HC_P2P_INLINE_BYTES: its bytes */
    } u;
} hc_p2p_chunk_t;

#define HC_P2P_CHUNK_HEADER 64
_Static_assert(sizeof(hc_p2p_chunk_t) == HC_P2P_CHUNK_HEADER, "a chunk header is one cache line");

_Static_assert(sizeof(hc_p2p_channel_t) <= HC_P2P_CHANNEL_HEADER, "channel header too large");
_Static_assert(sizeof(hc_p2p_chunk_t) <= HC_P2P_CHUNK_HEADER, "chunk header too large");

/* One entry of the cache of this rank's plain buffers: is the range huge-page memory (shm_cma.c)? */
#define HC_SHM_PAGE_CACHE 16
typedef struct {
    uintptr_t addr;
    uint64_t bytes;
    int64_t checked_ns; /* coarse clock of the last page-table scan */
    uint8_t huge;
} hc_shm_page_entry_t;

/* The measured choice between reading a source buffer in place (CMA for plain memory, the mapping
 * for mapped memory) and the slots (shm_cma.c): per collective, buffer kind and size class, the
 * last op times of each path (ns per 64 KiB of op data). */
#define HC_SHM_CHOICE_SAMPLES 3
#define HC_SHM_CHOICE_CLASSES 48
typedef struct {
    uint32_t ns[2][HC_SHM_CHOICE_SAMPLES]; /* [path: 0 slots, 1 in place][ring]; 0: no sample */
    uint8_t next[2];                        /* where each ring's next sample goes */
    uint8_t choice;                         /* the path the samples favour */
    uint8_t last;                           /* the path of the previous op */
    uint8_t lead;                           /* the path learning starts with (shm_cma.c, first_path) */
    uint32_t calls;
    uint32_t since_probe, probe_every;      /* calls on the chosen path since the other was tried */
    /* The last op, ended: its sample is taken when the next op of the class begins. */
    int64_t open_since_ns;
    uint64_t open_bytes;
    uint8_t open_path, open_kept, open_ok;
} hc_shm_choice_t;

/* How fast process_vm_readv of 4 KiB pages is against memcpy, from the times of reading and of
 * copying `bytes` (shm_cma.c, calibrate): fast (at most 2.5x the copy), fair (slower, but at most
 * 0.75 us a page beyond it), slow. */
enum { HC_CMA_SLOW, HC_CMA_FAIR, HC_CMA_FAST };
int hc_shm_cma_speed(int64_t read_ns, int64_t copy_ns, uint64_t bytes);

/* The measured choices' samples (shm_cma.c, shm_write.c): a ring of n op times per 64 KiB of data,
 * 0 meaning none. Put in the time of an op that moved `bytes` (> 0) in elapsed_ns, at *next. */
static inline void hc_shm_add_sample(uint32_t *ns, uint8_t *next, int n, uint64_t elapsed_ns, uint64_t bytes)
{
    uint64_t per = elapsed_ns > UINT64_MAX / 65536u ? UINT64_MAX : elapsed_ns * 65536u / bytes;

    ns[*next] = per == 0 ? 1 : per > UINT32_MAX ? UINT32_MAX : (uint32_t)per;
    *next = (uint8_t)((*next + 1) % n);
}

/* The least of n samples (UINT32_MAX: none): the estimate, since an op the scheduler interrupted only
 * looks slower. */
static inline uint32_t hc_shm_least_sample(const uint32_t *ns, int n)
{
    uint32_t least = UINT32_MAX;

    for (int k = 0; k < n; k++)
        if (ns[k] != 0 && ns[k] < least)
            least = ns[k];
    return least;
}

/* Is one estimate below the other by the margin a choice switches at, an eighth? (Where both cost
 * about the same, the choice would otherwise follow the noise.) None (UINT32_MAX) never is. */
static inline int hc_shm_estimate_below(uint32_t estimate, uint32_t other)
{
    return (uint64_t)estimate * 8u < (uint64_t)other * 7u;
}

/* Which stores copy into shared memory (shm_write.c), per collective and size class of its data
 * (16 KiB and up, doubling): the kind kept, and each kind's recent op times (ns per 64 KiB copied;
 * 0: no sample), each from an op's first measured copy to that of the class's next op. */
#define HC_SHM_WRITER_SAMPLES 4
#define HC_SHM_WRITER_CLASSES 14
typedef struct {
    uint32_t ns[2][HC_SHM_WRITER_SAMPLES]; /* [0 ordinary, 1 non-temporal][ring] */
    uint8_t next[2];
    uint8_t stream;                         /* the kind kept: 1 non-temporal */
    uint8_t last;                           /* the kind of the class's last op */
    uint32_t since_probe, probe_every;      /* ops of the kept kind since the other was tried; 0: unused */
    /* The class's last op: when its first measured copy began, what it copied, whether it ended
     * well and counts (not an ordinary op right after non-temporal ones): then its time, taken
     * when the next op begins, is a sample. */
    int64_t open_since_ns;
    uint64_t open_bytes;
    uint8_t open_ok, open_kept;
} hc_shm_writer_class_t;

typedef struct {
    hc_shm_writer_class_t classes[HC_COLL_COUNT][HC_SHM_WRITER_CLASSES];
    int8_t fixed;      /* HOSTCCL_STREAM_STORES: 0, 1, or -1 (measured) */
    uint8_t kind;      /* the running op's */
    hc_shm_writer_class_t *cls; /* its class */
    uint64_t seq;      /* the running op (hc_op_t.seq) that chose, 0: none */
} hc_shm_writer_t;

/* A posted receive: its message number (per pair, from 1; 0: none yet), count and type. */
typedef struct {
    uint64_t msg_seq;
    uint64_t count;
    uint32_t dtype;
} hc_p2p_posting_t;

/* The chunk after the last one of a message sent (shm_p2p.c, learn_tail). */
typedef struct {
    uint64_t msg_seq;
    uint64_t end_chunk;
} hc_p2p_sent_t;

/* One message of a point-to-point op, as shm_p2p.c progresses it. */
typedef struct {
    int is_send;
    uint32_t peer;        /* local index (= rank on one host) */
    uint8_t *buf;
    uint64_t count;
    HcclDataType dtype;
    uint64_t bytes;
    uint64_t moved;       /* bytes sent or received so far */
    uint64_t msg_seq;
    int started;          /* the first chunk was handled */
    uint64_t end_chunk;   /* send: channel head after its last chunk */
    int64_t arena_off;    /* send: the buffer's offset in this rank's arena, -1: not arena memory */
    int rndv;             /* send: the receiver reads the buffer in place */
    uint32_t exchange;    /* send: the same batch receives from that peer (index + 1 of its first such receive) */
    uint64_t exchange_max; /* send of an exchange: the largest such send of its op (its choice's class) */
    int released;         /* send: the receive is posted and matches (eager), or consumed every chunk */
    int posted;           /* recv: published in the channel's `posted` */
} hc_shm_p2p_item_t;

/* A point-to-point op begun at launch (hc_shm_start): its numbered items, until it runs. */
#define HC_SHM_P2P_STARTED_MAX 8
typedef struct {
    uint64_t seq;   /* the op's (hc_op_t.seq); 0: none */
    uint64_t ready; /* seq once hc_shm_p2p_ready found it ready */
    uint32_t n;
    hc_shm_p2p_item_t items[HC_SHM_P2P_STARTED_MAX];
} hc_shm_p2p_started_t;

/* A collective this rank completed before comparing every other rank's signature of it. */
typedef struct {
    uint64_t coll_seq;
    unsigned long long number; /* as the program counts it (hc_op_number) */
    uint64_t hash;
    hc_op_sig_t sig;
} hc_shm_deferred_t;

typedef struct {
    hc_engine_t base;
    uint8_t *map;
    size_t map_bytes;
    hc_shm_header_t *hdr;
    uint32_t nlocal;
    uint32_t me;             /* local index of this rank */
    uint64_t slot_bytes;
    uint64_t step;           /* last step this rank began */
    /* The first step that hc_shm_ready found every peer's flag and signature hash at, and the op's
     * hash (step 0: none): that op's first wait (hc_shm_step_wait_all) need not look again. */
    uint64_t ready_step, ready_hash;
    uint64_t p2p_chunk_bytes; /* payload of one p2p chunk */
    /* Where the channels start in the segment, a channel's bytes and a chunk's (header and payload):
     * derived from nlocal, slot_bytes and p2p_chunk_bytes by hc_shm_p2p_init, as every message
     * computes channel and chunk addresses (~100 instructions of a grouped exchange did). */
    size_t p2p_base, p2p_channel_bytes, p2p_chunk_stride;
    uint64_t p2p_single_copy_min; /* HOSTCCL_P2P_SINGLE_COPY_MIN: rendezvous from this many bytes */
    uint64_t p2p_cma_min;    /* the same, when the receiver must read with process_vm_readv */
    uint64_t p2p_cma_sym_min; /* the same for the sends of an exchange (HOSTCCL_P2P_CMA_MIN -1) */
    uint64_t p2p_choose_min; /* bytes from which such a send chooses by measuring (hc_shm_cma_exchange) */
    uint32_t *batch_recv;    /* per local rank: index + 1 of the batch's first receive from it, 0: none (shm_p2p.c) */
    uint64_t *sent_msgs;     /* per local rank: messages sent to it */
    uint64_t *recv_msgs;     /* per local rank: messages received from it */
    /* Per local rank: the last message to it whose chunks are all posted, and the last message from
     * it received whole. Messages of one pair move strictly one after the other, also when a batch
     * holds several of them (shm_p2p.c). */
    uint64_t *posted_msgs;
    uint64_t *done_msgs;
    uint64_t *p2p_tail_seen; /* per local rank: the tail of the channel to it as last read here (shm_p2p.c) */
    uint64_t *p2p_warm_out;  /* per local rank: bytes of every chunk to it faulted in here (shm_p2p.c) */
    uint64_t *p2p_warm_in;   /* per local rank: the same for every chunk from it */
    hc_p2p_posting_t *p2p_mine;   /* per local rank: this rank's latest receive from it, posted */
    hc_p2p_posting_t *p2p_theirs; /* per local rank: its latest receive from this rank, as its chunks say */
    hc_p2p_sent_t *p2p_sent_end;  /* per local rank, HC_P2P_SLOTS: this rank's latest messages to it, by number */
    hc_shm_p2p_started_t p2p_started; /* shm_p2p.c */
    uint32_t mailbox_next;   /* entry of this rank's mailbox to post to next */
    unsigned spin_rounds;    /* busy-wait budget before yielding (hc_shm_pick_spin; collectives
                              * skip it when the ranks do not each have a CPU) */
    int own_cores;           /* every local rank can have a core of its own (the same criterion) */
    int kick_listening;      /* this rank's kick listener runs (shm_kick.c) */
    pthread_t kick_thread;
    atomic_int kick_stop;    /* the listener is to end */
    int cpus_full;           /* the local ranks fill every CPU they may use (told to the runtime) */
    int cpus_shared;         /* they outnumber those CPUs (told to the runtime) */
    int asym_fence;          /* every local rank's process is registered for membarrier (shm_step.c) */
    unsigned spin_now;       /* the budget now: shrinks while spins fail (hc_shm_wait_arrive) */
    int64_t next_move_ns;    /* no move off a shared CPU before this (coarse clock; shm_step.c) */
    int spread;              /* HOSTCCL_SPREAD_RANKS: such moves are allowed */
    int cma;                 /* every local rank can read every other with process_vm_readv */
    int cma_fast;            /* ...and every one found it fast on 4 KiB pages (shm_cma.c, calibrate) */
    int cma_fair;            /* ...or at least fair */
    uint64_t cma_min;        /* op bytes from which any plain buffer is read with CMA (HOSTCCL_CMA_MIN) */
    /* With HOSTCCL_CMA_MIN -1, as measured (shm_engine.c): the same for AllGather(V), for
     * AlltoAll(V/VC) and for Scatter */
    uint64_t cma_gather_min, cma_alltoall_min, cma_scatter_min, cma_allreduce_min;
    uint64_t cma_huge_min;   /* HOSTCCL_CMA_HUGE_MIN: the same for buffers of huge pages */
    int pagemap_fd;          /* /proc/self/pagemap, -1 not opened yet, -2 no PAGEMAP_SCAN here */
    uint32_t page_cache_next;
    hc_shm_page_entry_t page_cache[HC_SHM_PAGE_CACHE];
    uint64_t cma_choose_min; /* op bytes from which Broadcast, Scatter, AllGather(V), AlltoAll(V) choose by
                              * measuring */
    hc_shm_choice_t *choices; /* [collective][plain, mapped][HC_SHM_CHOICE_CLASSES] (shm_cma.c), made at the
                               * first choice */
    hc_shm_choice_t *timing;  /* the choice the running op made, timed until it ends */
    uint64_t timing_seq;      /* that op's (hc_op_t.seq) */
    int64_t timing_since_ns;
    uint64_t timing_bytes;
    uint8_t timing_path, timing_kept; /* its path; whether its time is a sample (not a switch's first) */
    uint64_t zero_copy_min;  /* HOSTCCL_ZERO_COPY_MIN: bytes per op from which zero copy is tried */
    uint64_t bcast_in_place_min;  /* bytes from which Broadcast reads the root's mapped buffer in place */
    uint64_t gather_in_place_min; /* bytes of output from which AllGather(V) reads mapped blocks in place */
    /* Op bytes from which the owner of a mapped buffer (arena memory, or ranks that are threads of
     * one process) chooses in place or the slots by measuring: Broadcast, AllGather(V), and Scatter
     * and AlltoAll(V) (up to zero_copy_min) */
    uint64_t bcast_choose_min, gather_choose_min, zc_choose_min;
    uint64_t pipe_bytes;          /* Broadcast, AllGather(V) copy-through: bytes per rank and step */
    hc_shm_writer_t writer;       /* shm_write.c */
    uint64_t warm_bytes;          /* every rank's slots, both parities, are faulted in up to here */
    uint64_t *medium_warm_bytes;  /* per local rank: the same for its medium slots (shm_announce.c) */
    uint8_t **peer_arena;    /* per local rank: its arena mapped here (NULL: not yet) */
    uint64_t *peer_arena_bytes;
    int *pidfds;             /* per local rank, -1 for self or when unavailable */
    int32_t *pids;
    /* Announcements (shm_announce.c). ann_next and the pending ring change under the
     * communicator's exec_lock; ann_next and enq_last are also read without it. */
    atomic_uint_fast64_t ann_next; /* the next collective number to announce */
    uint64_t ann_chain;            /* the running hash up to ann_next - 1 (exec_lock) */
    atomic_uint_fast64_t enq_last; /* the last collective number enqueued */
    struct hc_shm_pending *pending; /* pending_cap entries: enqueued, not announced yet */
    uint64_t pending_cap;           /* a power of two, grown to the deepest burst */
    uint64_t ann_min_checked;  /* every local rank has checked up to this collective (exec_lock) */
    uint64_t exec_min_checked; /* the same, as the executing thread last saw it */
    uint64_t exec_min_done;    /* every local rank has finished this collective (executing thread) */
    uint64_t medium_user[HC_SHM_MEDIUM_SLOTS]; /* the collective that last wrote each medium slot */
    uint32_t medium_next;   /* the medium slot to take next */
    /* Per collective: in-place attempts still to skip, and the length of the last skip
     * (hc_shm_zc_skipping). */
    uint16_t zc_skip[HC_COLL_COUNT];
    uint16_t zc_backoff[HC_COLL_COUNT];
    uint8_t zc_class[HC_COLL_COUNT]; /* the size class they apply to */
    /* Deferred checks, oldest first (executing thread only; shm_announce.c). */
    hc_shm_deferred_t deferred[HC_SHM_DEFER_MAX];
    uint32_t deferred_first;
    uint32_t deferred_n;
    uint32_t *deferred_compared; /* per local rank: how many of the list, oldest first, it was compared on */
    int deferred_busy;      /* a check of the list is waiting (a failed peer's report leaves it) */
} hc_shm_engine_t;

/* The shared-memory engine behind an engine handle (it embeds hc_engine_t first). */
static inline hc_shm_engine_t *hc_shm_of(hc_engine_t *engine)
{
    return (hc_shm_engine_t *)(void *)engine;
}

/* Elements of the part [off, off + chunk) of a block of `count` elements. */
static inline uint64_t hc_shm_part(uint64_t count, uint64_t off, uint64_t chunk)
{
    return off >= count ? 0 : count - off < chunk ? count - off : chunk;
}

/* Slice j of `count` elements split among n ranks: [lo, hi), its boundaries rounded to 64 bytes for
 * the reduction kernels (the last slices may be short or empty). */
static inline void hc_shm_slice(uint64_t count, size_t esize, uint32_t n, uint32_t j, uint64_t *lo_p, uint64_t *hi_p)
{
    uint64_t per = (count + n - 1) / n, align = 64 / esize ? 64 / esize : 1;

    per = (per + align - 1) / align * align;
    *lo_p = (uint64_t)j * per < count ? (uint64_t)j * per : count;
    *hi_p = *lo_p + per < count ? *lo_p + per : count;
}

/* Per-rank arrays the collectives keep on the stack: communicators with more local ranks than this
 * get HCCL_E_NOT_SUPPORT from them. */
#define HC_SHM_MAX_RANKS_ON_STACK 256

static inline hc_shm_ctrl_t *hc_shm_ctrl(hc_shm_engine_t *eng, uint32_t index)
{
    return (hc_shm_ctrl_t *)(void *)(eng->map + HC_SHM_HEADER_BYTES + (size_t)index * HC_SHM_CTRL_BYTES);
}

static inline uint8_t *hc_shm_slot(hc_shm_engine_t *eng, uint32_t index, uint64_t step)
{
    size_t data = HC_SHM_HEADER_BYTES + (size_t)eng->nlocal * HC_SHM_CTRL_BYTES;
    data = (data + 4095) & ~(size_t)4095;
    return eng->map + data + ((size_t)index * 2 + (step & 1)) * eng->slot_bytes;
}

/* Fault in the first `bytes` of every local rank's slots, both parities, in this process (its own
 * written, the others read) when an op is about to use more of them than before (shm_step.c). */
void hc_shm_warm_slots(hc_shm_engine_t *eng, uint64_t bytes);

/* Where rank `index` stages `bytes` of data for the current step: in its hot line when they fit
 * (every rank decides alike: the size comes from the op, whose signature every rank checks before
 * reading), else in its slot. */
static inline uint8_t *hc_shm_stage(hc_shm_engine_t *eng, uint32_t index, size_t bytes)
{
    if (bytes <= HC_SHM_INLINE_BYTES)
        return hc_shm_ctrl(eng, index)->hot[eng->step & 1].data;
    return hc_shm_slot(eng, index, eng->step);
}

static inline size_t hc_shm_p2p_base(const hc_shm_engine_t *eng)
{
    return eng->p2p_base;
}

static inline size_t hc_shm_channel_bytes(const hc_shm_engine_t *eng)
{
    return eng->p2p_channel_bytes;
}

/* The channel from local rank src to local rank dst. */
static inline hc_p2p_channel_t *hc_shm_channel(hc_shm_engine_t *eng, uint32_t src, uint32_t dst)
{
    size_t index = (size_t)src * eng->nlocal + dst;
    return (hc_p2p_channel_t *)(void *)(eng->map + eng->p2p_base + index * eng->p2p_channel_bytes);
}

/* Chunk slot `n` (mod HC_P2P_SLOTS) of a channel: header, then payload. */
static inline hc_p2p_chunk_t *hc_shm_chunk(hc_shm_engine_t *eng, hc_p2p_channel_t *ch, uint64_t n)
{
    return (hc_p2p_chunk_t *)(void *)((uint8_t *)ch + HC_P2P_CHANNEL_HEADER +
                                      (n % HC_P2P_SLOTS) * eng->p2p_chunk_stride);
}

/* Mailbox: per local rank HC_MAILBOX_ENTRIES root infos, posted by a sub-communicator's leader
 * and read by its members (shm_mailbox.c). */
#define HC_MAILBOX_ENTRIES 16
#define HC_MAILBOX_ENTRY_BYTES 4224 /* tag line + HcclRootInfo, rounded to cache lines */

static inline size_t hc_shm_mailbox_base(const hc_shm_engine_t *eng)
{
    return hc_shm_p2p_base(eng) + (size_t)eng->nlocal * eng->nlocal * hc_shm_channel_bytes(eng);
}

/*
 * ThreadSanitizer pairs a release with an acquire at the same address, but every rank maps the
 * segment on its own, also when ranks are threads of one process: a flag's store and the peer's
 * load are then at different addresses, and reads of a peer's buffer in place (one mapping: the
 * process's arena) would look unsynchronised. Under TSan every publication (step flag, p2p head
 * and tail) also releases a per-local-rank object of this process, and whoever sees it acquires
 * that rank's object. (Shared by all communicators: extra edges can only hide a race, never report
 * a false one.) No code at all otherwise.
 */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define HC_SHM_TSAN_OBJECTS 64
extern char hc_shm_tsan_objects[HC_SHM_TSAN_OBJECTS];
static inline void hc_shm_tsan_release(const hc_shm_engine_t *eng)
{
    __tsan_release(&hc_shm_tsan_objects[eng->me % HC_SHM_TSAN_OBJECTS]);
}
static inline void hc_shm_tsan_acquire(const hc_shm_engine_t *eng, uint32_t rank)
{
    (void)eng;
    __tsan_acquire(&hc_shm_tsan_objects[rank % HC_SHM_TSAN_OBJECTS]);
}
#else
static inline void hc_shm_tsan_release(const hc_shm_engine_t *eng)
{
    (void)eng;
}
static inline void hc_shm_tsan_acquire(const hc_shm_engine_t *eng, uint32_t rank)
{
    (void)eng;
    (void)rank;
}
#endif

/* Segment size for the engine's rank count, slot and chunk sizes. */
size_t hc_shm_segment_bytes(const hc_shm_engine_t *eng);

/* Map the shared segment (create on the lowest local rank, open elsewhere). */
HcclResult hc_shm_segment_setup(hc_shm_engine_t *eng, hc_boot_t *boot);
void hc_shm_segment_unmap(hc_shm_engine_t *eng);

/*
 * Step protocol (shm_step.c). begin records the op's signature for the new step; publish announces
 * this rank's data; wait_all waits for every rank's data and, on the op's first step, checks every
 * rank's signature; end marks the end of this rank's reading.
 *
 * Why the parity-b slots are free at begin without any wait: a rank publishes step s-1 only after
 * it has finished reading step s-2, and begin(s) comes after wait_all(s-1) saw every rank's step
 * s-1. So "arrived at s-1" implies "done with s-2", and end() has nothing to publish.
 */
HcclResult hc_shm_step_begin(hc_shm_engine_t *eng, const hc_op_t *op);
void hc_shm_step_publish(hc_shm_engine_t *eng);
HcclResult hc_shm_step_wait_all(hc_shm_engine_t *eng, const hc_op_t *op, int first_step);
/* The two halves of a first step's wait_all, for an op whose step carries more to check between
 * them (AlltoAllV's counts): wait_first waits for every rank's step (unless hc_shm_ready saw them
 * all) and checks that every rank's signature of it matches this rank's (HCCL_E_PARA, logged, if
 * not); then a rank that failed earlier takes part in nothing (HCCL_E_REMOTE, logged). A rank that
 * found a mismatch in the data fails at once, so the others must check the data before they look
 * for failed peers, or they would report its failure instead of the mismatch. */
HcclResult hc_shm_step_wait_first(hc_shm_engine_t *eng, const hc_op_t *op);
HcclResult hc_shm_check_failed_peers(hc_shm_engine_t *eng, const hc_op_t *op);
static inline void hc_shm_step_end(hc_shm_engine_t *eng)
{
    (void)eng;
}

/* Publish the step the caller began and staged, then wait_all. */
static inline HcclResult hc_shm_step_exchange(hc_shm_engine_t *eng, const hc_op_t *op, int first_step)
{
    hc_shm_step_publish(eng);
    return hc_shm_step_wait_all(eng, op, first_step);
}

/*
 * Start at launch (hc_engine_ops_t.start): the stepped collectives begin, stage and publish their
 * first step on the launching thread when the op will take the copy-through path, or AllReduce's
 * CMA path (every rank decides that alike, from the op's size); the run then goes on with that
 * step's wait. *_reducing:
 * AllReduce, Reduce, ReduceScatter(V), Barrier (shm_coll.c); *_moving: Broadcast, Scatter,
 * AllGather(V) (shm_move.c); *_alltoall: AlltoAll (shm_alltoall.c). 1: started.
 */
int hc_shm_start(hc_engine_t *engine, hc_op_t *op);
int hc_shm_start_reducing(hc_shm_engine_t *eng, hc_op_t *op);
int hc_shm_start_moving(hc_shm_engine_t *eng, hc_op_t *op);
int hc_shm_start_alltoall(hc_shm_engine_t *eng, hc_op_t *op);

/*
 * The short path of AllReduce, AllGather, ReduceScatter and AlltoAll (shm_coll.c, shm_move.c,
 * shm_alltoall.c): what every rank stages (hc_shm_tiny_bytes: its data, an AllGather's block, a
 * ReduceScatter's or AlltoAll's whole input) at most HC_SHM_INLINE_BYTES, on 2 or more ranks,
 * decided alike everywhere from the size. One step with the data on the hot lines, as the general
 * paths would run it, without their choices (zero copy, CMA, split) that never apply this small
 * and their chunking: a blocking 8-byte call is 12-22% fewer instructions. hc_shm_tiny_stage begins
 * the step, puts this rank's data on its hot line and publishes it (at launch when the op is
 * started).
 */
static inline uint64_t hc_shm_tiny_bytes(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    uint64_t bytes = op->count * hc_dtype_size(op->dtype);

    return op->sig.coll == HC_COLL_REDUCE_SCATTER || op->sig.coll == HC_COLL_ALLTOALL ? bytes * eng->nlocal
                                                                                      : bytes;
}

static inline int hc_shm_tiny(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    return hc_shm_tiny_bytes(eng, op) <= HC_SHM_INLINE_BYTES && eng->nlocal > 1 &&
           eng->nlocal <= HC_SHM_MAX_RANKS_ON_STACK;
}
void hc_shm_tiny_stage(hc_shm_engine_t *eng, const hc_op_t *op);

/* The short path's step: this rank's data staged (unless the op was started), then every rank's
 * line of it checked and there (hc_shm_step_wait_all). */
static inline HcclResult hc_shm_tiny_wait(hc_shm_engine_t *eng, const hc_op_t *op)
{
    if (!op->started)
        hc_shm_tiny_stage(eng, op);
    return hc_shm_step_wait_all(eng, op, 1);
}

/* Local rank i's data on its line of the current step. */
static inline const uint8_t *hc_shm_tiny_line(hc_shm_engine_t *eng, uint32_t i)
{
    return hc_shm_ctrl(eng, i)->hot[eng->step & 1].data;
}

/* Was the step of op at element offset `off` (its first) begun and published at launch? */
static inline int hc_shm_started(const hc_op_t *op, uint64_t off)
{
    return off == 0 && op->started;
}

/*
 * The runner kick (shm_kick.c). A rank that starts an op at launch (hc_shm_start) and leaves the
 * rest queued marks it parked until a runner begins it (hc_shm_op_begin). A waiter that has waited
 * ~100 us in one wait (HC_SHM_KICK_SPIN_ROUNDS of its spin, or that long asleep) for a
 * rank that shows an op parked, and whose listener runs, wakes that listener once, which has the
 * rank's streams' workers run what nobody runs. A synchronising caller comes within microseconds of
 * its launch: a rank parked this long is doing something else.
 */
#define HC_SHM_KICK_SPIN_ROUNDS 4096 /* a spin this long (pauses of ~24 ns here) counts as that wait */
typedef struct {
    int64_t due_ns;   /* kick from here on (0: armed by the first check; 1: due at once) */
    uint32_t kicked;  /* the local rank kicked in this wait, plus one (0: none) */
} hc_shm_kick_t;
void hc_shm_kick_start(hc_shm_engine_t *eng);
void hc_shm_kick_stop(hc_shm_engine_t *eng);
/* In a wait that sleeps for the `npeers` local ranks in `peers` (the first call arms k): kick a
 * parked one when due. Returns the longest the waiter may sleep before a kick is due, or -1 for no
 * bound of the kick's. */
int64_t hc_shm_kick_check(hc_shm_engine_t *eng, hc_shm_kick_t *k, const uint32_t *peers, uint32_t npeers,
                          int64_t now);
/* The same, due now: the wait has spun HC_SHM_KICK_SPIN_ROUNDS (no clock read on the spin's path). */
void hc_shm_kick_now(hc_shm_engine_t *eng, hc_shm_kick_t *k, const uint32_t *peers, uint32_t npeers);

static inline void hc_shm_park(hc_shm_engine_t *eng, uint64_t number)
{
    atomic_store_explicit(&hc_shm_ctrl(eng, eng->me)->parked, number, memory_order_relaxed);
}

/* Wait until every local rank's arrive flag >= target (bounded, peer-aware). */
HcclResult hc_shm_wait_arrive(hc_shm_engine_t *eng, uint64_t target, const hc_op_t *op);

/*
 * Progress-loop waiting for point-to-point (and the mailbox): a loop that found nothing to do calls
 * hc_shm_poll_wait, which spins, yields, and then sleeps on this rank's doorbell, bounded; the
 * deadline and the liveness of the local ranks in `peers` are checked. Returns HCCL_SUCCESS to go
 * on polling. Before it sleeps it counts itself among the doorbell's waiters and returns once more
 * (the loop must look again: a publisher rings only while someone waits); the loop calls
 * hc_shm_poll_reset when it made progress and hc_shm_poll_end when it leaves.
 */
typedef struct {
    int64_t deadline;    /* -1: HCCL_EXEC_TIMEOUT from the first sleep; else as the caller set it */
    int watching;        /* the spin and yields are over: deadline and wd are running */
    int64_t next_check;
    unsigned idle_rounds;
    int armed;           /* counted in the doorbell's waiters, doorbell read into armed_seen */
    unsigned armed_seen;
    hc_watchdog_t wd;    /* still-waiting lines and deadlock checks (shm_watch.c) */
    unsigned moves, watched_moves; /* progress made, and as the watchdog last saw it */
    hc_shm_kick_t kick;  /* kicking a peer that parked an op (shm_kick.c) */
} hc_shm_poll_t;

void hc_shm_poll_init(hc_shm_engine_t *eng, hc_shm_poll_t *poll);
void hc_shm_poll_reset(hc_shm_engine_t *eng, hc_shm_poll_t *poll);
void hc_shm_poll_end(hc_shm_engine_t *eng, hc_shm_poll_t *poll);
/* Publish this rank's affinity mask in its control block (before the creation's last exchange). */
void hc_shm_publish_cpus(hc_shm_engine_t *eng);
/* After every local rank published its mask: do the local ranks have a CPU each (eng->own_cores),
 * and how long to spin before yielding (eng->spin_rounds). */
void hc_shm_pick_spin(hc_shm_engine_t *eng);
/* The asymmetric fence of the sleep protocol (shm_step.c): register this process and publish it
 * (with the CPU mask), then, after the exchange, use it only when every local rank could. */
void hc_shm_publish_fence(hc_shm_engine_t *eng);
void hc_shm_pick_fence(hc_shm_engine_t *eng);
/* A waiter's side of the asymmetric fence, between counting itself in and its last look. */
void hc_shm_fence_waiter(const hc_shm_engine_t *eng);
void hc_shm_wake_all(hc_shm_engine_t *eng);
/* After publishing something local rank `index`'s progress loop may wait for: wake it if it sleeps
 * on its doorbell. hc_shm_ring_all: every local rank's (a mailbox post, which any may wait for). */
void hc_shm_ring(hc_shm_engine_t *eng, uint32_t index);
void hc_shm_ring_all(hc_shm_engine_t *eng);
HcclResult hc_shm_poll_wait(hc_shm_engine_t *eng, hc_shm_poll_t *poll, const uint32_t *peers, uint32_t npeers,
                            const hc_op_t *op);

/* Collectives (shm_coll.c: the reducing ones; shm_move.c: Broadcast, Scatter, AllGather(V);
 * shm_alltoall.c). */
HcclResult hc_shm_allreduce(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_broadcast(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_barrier(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_reduce(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_allgather(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_allgatherv(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_reduce_scatter(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_reduce_scatterv(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_scatter(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_alltoall(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_alltoallv(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_shm_alltoallvc(hc_engine_t *engine, hc_op_t *op);

/* Zero-copy paths over peers' arena buffers (shm_zcopy.c): return HCCL_E_AGAIN, having taken no
 * step, when the op's buffers do not allow it (the caller then runs the copy-through path). */
/* Zero-copy AllReduce over peers' arena buffers (shm_zcopy.c). Takes one step to exchange where
 * the buffers are (and check signatures); returns HCCL_E_AGAIN after it when some rank's buffers
 * cannot be reached, and the caller runs the copy-through path (signatures already checked). */
HcclResult hc_shm_zc_allreduce(hc_shm_engine_t *eng, hc_op_t *op);
/* The same contract, for the other collectives that read peers' buffers in place. */
HcclResult hc_shm_zc_reduce_scatter(hc_shm_engine_t *eng, hc_op_t *op);
HcclResult hc_shm_zc_reduce(hc_shm_engine_t *eng, hc_op_t *op);
void hc_shm_zc_unmap(hc_shm_engine_t *eng);

/*
 * Reading a source rank's send buffer in place, for Broadcast, Scatter, AllGather(V) (shm_move.c) and
 * AlltoAll(V/VC) (shm_alltoall.c), which need no step of their own for it. In the op's first step, after hc_shm_step_begin, every rank
 * describes its buffers (hc_shm_zc_describe) and, before staging anything, asks how its own block
 * will be read (hc_shm_zc_source on itself); after the step's wait the readers ask the same of each
 * source and get the same answer. A block read in place must not be returned to the program before
 * its readers are done: a later step of the op, or hc_shm_zc_close, ensures it.
 */
typedef enum {
    HC_SHM_SOURCE_SLOT,   /* staged in the source's slot (copy-through) */
    HC_SHM_SOURCE_MAPPED, /* read in place: the source's arena mapped here, or the same process */
    HC_SHM_SOURCE_CMA     /* read in place with process_vm_readv */
} hc_shm_source_t;
/* Describe this rank's buffers for the step and decide how its send buffer (send_bytes of it) is to
 * be read: in place when it is arena memory (or the ranks are threads of one process) and
 * hc_shm_mapped_readable says so (in_place_min: its fixed size), with CMA when hc_shm_cma_readable
 * says so, else from the slots. */
void hc_shm_zc_describe(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t send_bytes, uint64_t recv_bytes,
                        uint64_t op_bytes, uint64_t in_place_min);
/* Could hc_shm_zc_describe choose anything but the slots for this rank's send buffer (send_bytes of
 * it) in op, were the op large enough: arena memory, ranks that are threads of one process, or
 * plain memory that hc_shm_cma_may_read allows. By this rank's buffer alone (AlltoAllV's count
 * exchange publishes it, so that an op nobody can read in place takes no describing step). */
int hc_shm_zc_may_read_in_place(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t send_bytes);
/* How local rank j's send buffer is read in this step: what j published. */
hc_shm_source_t hc_shm_zc_source(hc_shm_engine_t *eng, uint32_t j);
/* Could local rank j's send buffer be read nothing but from its slot in this step (it is staged, and
 * not by a measured choice)? An op in which no source could be is a fallback (hc_shm_zc_outcome). */
int hc_shm_zc_slot_only(hc_shm_engine_t *eng, uint32_t j);
/* Op bytes from which hc_shm_zc_describe may choose anything but the slots: every rank computes it
 * alike from the op's size, so every rank describes (or not) in the same step. */
uint64_t hc_shm_zc_gate(const hc_shm_engine_t *eng, hc_coll_t coll, uint64_t in_place_min);
/* Copy `bytes` from byte `offset` of local rank j's send buffer (described in this step) into dst. */
HcclResult hc_shm_zc_read_source(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t j, uint64_t offset, void *dst,
                                 size_t bytes);
/* The closing step: nobody returns before every reader of its buffers is done. */
HcclResult hc_shm_zc_close(hc_shm_engine_t *eng, const hc_op_t *op);

/*
 * Attempts to read in place that keep falling back (shm_zcopy.c). An attempt costs a step, or a
 * step's start at launch, before every rank knows whether any buffer can be read in place; on plain
 * memory that CMA may not read, none can. So after an attempt of a collective that fell back, its
 * next attempts of the same size class (op bytes, rounded down to a power of two) are skipped: 1,
 * then 2, 4, ... up to HC_SHM_ZC_SKIP_MAX, until one reads in place. (Another size may be read in
 * place where this one is not: aclrtMalloc memory from HOSTCCL_ZERO_COPY_MIN.) Every rank sees the
 * same outcome and the same op bytes, so every rank skips alike. At the one place per op where an op
 * of its size would try, a collective calls hc_shm_zc_try (which counts a skip) and, after an
 * attempt, hc_shm_zc_outcome; elsewhere (at launch) it asks hc_shm_zc_skipping, which changes
 * nothing. hc_shm_zc_skips_none: no attempt of coll is being skipped, whatever the size, so an op
 * whose size reaches the gate will try (what a rank can tell before it knows the op's size).
 */
#define HC_SHM_ZC_SKIP_MAX 64
int hc_shm_zc_skipping(const hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes);
int hc_shm_zc_skips_none(const hc_shm_engine_t *eng, hc_coll_t coll);
int hc_shm_zc_try(hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes);
void hc_shm_zc_outcome(hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes, int fell_back);

/* Cross-memory attach (shm_cma.c): probed once at creation, agreed by all ranks through the
 * bootstrap, so that every rank decides alike whether copies may read peers' plain memory. */
HcclResult hc_shm_cma_probe(hc_shm_engine_t *eng, hc_boot_t *boot);
/* Should peers read this rank's plain buffer (bytes of it; op_bytes of op data) in op with CMA? By
 * the pages behind it, the collective and, from HOSTCCL_CMA_CHOOSE_MIN, the measured times of both
 * paths (shm_cma.c): the owner decides and publishes, the readers follow. */
int hc_shm_cma_readable(hc_shm_engine_t *eng, const hc_op_t *op, const void *buf, uint64_t bytes, uint64_t op_bytes);
/* Should peers read this rank's mapped send buffer (arena memory, or ranks that are threads of one
 * process) in place in op (op_bytes of op data)? From in_place_min always; from the collective's
 * choose_min by measuring, as hc_shm_cma_readable does for plain memory; else through the slots. */
int hc_shm_mapped_readable(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t op_bytes, uint64_t in_place_min);
/* The smallest op of coll for which hc_shm_mapped_readable measures (UINT64_MAX: never). */
uint64_t hc_shm_mapped_gate(const hc_shm_engine_t *eng, hc_coll_t coll);
/* The end of op on this rank: how an op of a measured choice ended (its sample is taken at the next
 * choice of its class, shm_cma.c). */
void hc_shm_cma_op_end(hc_shm_engine_t *eng, const hc_op_t *op, HcclResult res);
/* Should the peer read this rank's send of `bytes` from plain 4 KiB-page memory, a send of an
 * exchange (its batch op also receives from that peer), in place with CMA? From eng->p2p_choose_min
 * by measuring as hc_shm_cma_readable does, once per op in the size class of op_bytes (its largest
 * such send); the sender decides, the receiver follows the chunk. Below it and where
 * HOSTCCL_P2P_CMA_MIN is set, by eng->p2p_cma_sym_min. */
int hc_shm_cma_exchange(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t bytes, uint64_t op_bytes);
/* Could hc_shm_cma_readable say yes for this buffer (bytes of it) in op at some op size: plain
 * memory is read with CMA in op's collective from some size, or the buffer is huge pages? */
int hc_shm_cma_may_read(hc_shm_engine_t *eng, const hc_op_t *op, const void *buf, uint64_t bytes);
/* Is this rank's plain buffer almost all huge pages (and CMA allowed)? Cached by address range. */
int hc_shm_cma_huge(hc_shm_engine_t *eng, const void *buf, uint64_t bytes);
/* Does an AllReduce of op_bytes take the CMA path (shm_coll.c, allreduce_cma)? The same on every
 * rank: by the size alone, whatever the buffers. */
int hc_shm_cma_allreduce(const hc_shm_engine_t *eng, uint64_t op_bytes);
/* Is plain 4 KiB-page memory read with CMA in some op (of some size)? */
int hc_shm_cma_plain(const hc_shm_engine_t *eng);
/* The smallest op of coll for which hc_shm_cma_readable can say yes (UINT64_MAX: never). */
uint64_t hc_shm_cma_gate(const hc_shm_engine_t *eng, hc_coll_t coll);
void hc_shm_cma_close(hc_shm_engine_t *eng);

/* Copy n bytes of op into shared memory that other ranks read next, with the stores this rank
 * measures faster (shm_write.c); a store fence ends a copy with non-temporal stores. The op's end
 * says whether its time counts. */
void hc_shm_write(hc_shm_engine_t *eng, const hc_op_t *op, void *dst, const void *src, size_t n);
void hc_shm_write_op_end(hc_shm_engine_t *eng, const hc_op_t *op, HcclResult res);
/* Copy bytes of local rank i's buffer (address in its process, arena offset or -1) into dst:
 * through the mapped arena or the same process when possible, else with process_vm_readv. */
HcclResult hc_shm_copy_from_peer(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, void *dst, uint64_t addr,
                                 int64_t off, size_t bytes);
/* The same the other way: bytes of src into local rank i's buffer (process_vm_writev). */
HcclResult hc_shm_copy_to_peer(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, uint64_t addr, int64_t off,
                               const void *src, size_t bytes);
/* A peer's buffer that should be reachable in place is not (its arena cannot be mapped, or
 * process_vm_readv is not allowed): HCCL_E_REMOTE, logged as such, when that is because the peer
 * died meanwhile; else HCCL_E_UNAVAIL, logged (shm_step.c). */
HcclResult hc_shm_unreachable(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t index);
/* Where local rank i's buffer of `bytes` is in this process, or NULL: not reachable, or a range the
 * peer published outside its arena (logged) (shm_zcopy.c). */
uint8_t *hc_shm_peer_buffer(hc_shm_engine_t *eng, uint32_t i, uint64_t addr, int64_t off, uint64_t bytes);
/* Whether that NULL was for a range outside the peer's mapped arena (logged here): a corrupted
 * descriptor, which no other path may then try to read either. */
int hc_shm_peer_range_bad(hc_shm_engine_t *eng, uint32_t i, int64_t off, uint64_t bytes);
/* Offset of one of this rank's buffers in its arena, or -1 when it is not (all of it) arena memory;
 * publishes the arena's fd in this rank's control block for the peers to map (shm_zcopy.c). */
int64_t hc_shm_arena_offset(hc_shm_engine_t *eng, const void *buf, uint64_t bytes);

/* The mailbox (shm_mailbox.c): engine hooks. */
HcclResult hc_shm_mailbox_post(hc_engine_t *engine, uint64_t tag, const HcclRootInfo *info, const uint32_t *members,
                               uint32_t nmembers);
HcclResult hc_shm_mailbox_fetch(hc_engine_t *engine, uint32_t leader, uint64_t tag, int64_t deadline_ns,
                                HcclRootInfo *info_p);

/* Diagnosis (shm_diag.c): the engine's op_begin / op_end / describe hooks, and the p2p notes. */
HcclResult hc_shm_op_begin(hc_engine_t *engine, const hc_op_t *op);
void hc_shm_op_end(hc_engine_t *engine, const hc_op_t *op, HcclResult res);
/* Every other local rank has begun op (shm_ready.c): it may run on the launching thread. */
int hc_shm_ready(hc_engine_t *engine, const hc_op_t *op);
int hc_shm_progress_at_launch(hc_engine_t *engine);
void hc_shm_describe(hc_engine_t *engine, const hc_op_t *op, char *buf, size_t len);
void hc_shm_describe_link(hc_engine_t *engine, uint32_t r, char *buf, size_t len);
/* One rank's lines of that description (what it does, its pending sends and receives). */
void hc_shm_describe_rank(hc_shm_engine_t *eng, uint32_t i, uint64_t failed_seq, char *buf, size_t len);
/* Whether local rank i has announced collective q (it enqueued it; shm_announce.c). */
int hc_shm_announced_op(hc_shm_engine_t *eng, uint32_t i, uint64_t q);

/* The waiting policy (shm_watch.c, over hc_watchdog.h). Called by the wait loops once they sleep:
 * a still-waiting line when one is due, and HCCL_E_PARA (logged) when this rank and one of `peers`,
 * the local ranks it waits for, are deadlocked; else HCCL_SUCCESS. op NULL: not an op's wait. */
void hc_shm_watch_start(hc_shm_engine_t *eng, hc_watchdog_t *wd);
HcclResult hc_shm_watch(hc_shm_engine_t *eng, hc_watchdog_t *wd, const hc_op_t *op, const uint32_t *peers,
                        uint32_t npeers);
/* The engine's report_turn hook: the lowest live failing local rank logs the n-rank diagnosis. */
int hc_shm_report_turn(hc_engine_t *engine, const hc_op_t *op);
/* Whether local rank i's process still runs (whether or not its ops failed; shm_step.c). */
int hc_shm_peer_running(hc_shm_engine_t *eng, uint32_t i);

/* Announcements and the eager ring (shm_announce.c). */
HcclResult hc_shm_announce_init(hc_shm_engine_t *eng);
/* Fault in this rank's announcements and eager slots (~20 pages at 11 us each on the reference
 * VM) while the communicator is created, not in its first few hundred small collectives. */
void hc_shm_announce_touch(hc_shm_engine_t *eng);
/* The same for the other local ranks' announcements and eager slots in this process (after every
 * rank touched its own; shm_announce.c, "Warming"). */
void hc_shm_announce_warm(hc_shm_engine_t *eng);
/* Engine hook, under exec_lock, when a collective was enqueued: announce it if its entry is free. */
void hc_shm_announce(hc_engine_t *engine, const hc_op_sig_t *sig, uint64_t coll_seq, uint64_t sig_hash);
/* When a collective starts: make sure it is announced (waiting for its entry to be free), and
 * announce what was enqueued after it as far as entries are free. */
HcclResult hc_shm_announce_running(hc_shm_engine_t *eng, const hc_op_t *op);
/* When a collective ended successfully: publish it in done_seq. */
void hc_shm_announce_done(hc_shm_engine_t *eng, const hc_op_t *op);
/* The check of the eager path's writers ("Deferred checks" in shm_announce.c): a writer compares
 * nobody's signature before it completes; its readers compare its signature when they read its data
 * (hc_shm_eager_read), and what is left is compared later, by hc_shm_check_deferred. */
HcclResult hc_shm_check_writer(hc_shm_engine_t *eng, const hc_op_t *op);
/* Compare what the others announced of the collectives this rank completed unchecked, as far as
 * they have announced them (every op begins with this; so does the report of a failed peer). A
 * mismatch fails op (HCCL_E_PARA) with a line naming the collective that differed. */
HcclResult hc_shm_check_deferred(hc_shm_engine_t *eng, const hc_op_t *op);
/* Can a writer of the eager path defer op's check without waiting: it is below its defer limit, or
 * every other rank has announced the oldest deferred collective (comparing them then frees room).
 * Compares nothing (hc_shm_ready's look). */
int hc_shm_defer_room(hc_shm_engine_t *eng);
/* Where this rank writes `bytes` (at most HC_SHM_EAGER_MAX) of op's data: its eager slot, or the
 * next medium slot, once free (every local rank finished the collective that used it last). */
HcclResult hc_shm_eager_buffer(hc_shm_engine_t *eng, const hc_op_t *op, size_t bytes, uint8_t **buf_p);
/* The same at launch (hc_shm_start), which must not wait: NULL when the slot is still in use. */
uint8_t *hc_shm_eager_buffer_now(hc_shm_engine_t *eng, const hc_op_t *op, size_t bytes);
/* Does op take the eager path (Broadcast, Reduce of 1 B - HC_SHM_EAGER_MAX on 2 or more ranks)? Every
 * rank decides alike: the size comes from the signature (a rank whose call differs takes whichever
 * path and finds the mismatch in the announcements, or is told by the failure of a rank that did). */
static inline int hc_shm_eager_fits(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    return eng->nlocal > 1 && eng->nlocal <= HC_SHM_MAX_RANKS_ON_STACK && op->count > 0 &&
           op->count * hc_dtype_size(op->dtype) <= HC_SHM_EAGER_MAX;
}
/* Does a Scatter of `count` elements per rank take the eager path (all nlocal blocks, the root's
 * whole input, at most HC_SHM_EAGER_MAX bytes; it stages the others' only, hc_shm_eager_scatter_bytes)?
 * Decided alike on every rank, from the signature. */
static inline int hc_shm_eager_scatter_fits(const hc_shm_engine_t *eng, uint64_t count, size_t esize)
{
    /* Products, not quotients: this is asked a few times per call, and a 64-bit division costs
     * tens of cycles (count first: the product cannot overflow then). */
    return eng->nlocal > 1 && eng->nlocal <= HC_SHM_MAX_RANKS_ON_STACK && count > 0 && esize > 0 &&
           count <= HC_SHM_EAGER_MAX && count * esize * eng->nlocal <= HC_SHM_EAGER_MAX;
}
/* What the root of an eager Scatter of `block` bytes a rank writes: the other ranks' blocks, in rank
 * order (so that 2 ranks' blocks of up to HC_SHM_EAGER_BYTES fit in the slot itself), and where rank
 * j's lies in it. */
static inline size_t hc_shm_eager_scatter_bytes(const hc_shm_engine_t *eng, size_t block)
{
    return block * (eng->nlocal - 1);
}
static inline size_t hc_shm_eager_scatter_at(uint32_t root, uint32_t j, size_t block)
{
    return (j - (j > root)) * block;
}
/* Does a rank (the root of the collective `sig` or not) only write in it, on the eager path: the root
 * of a small Broadcast or Scatter, the others of a small Reduce? Such a rank completes without the
 * others taking part (shm_watch.c) and checks what it deferred only when its list is full
 * (shm_announce.c). */
static inline int hc_shm_eager_writer(const hc_shm_engine_t *eng, const hc_op_sig_t *sig, int is_root)
{
    size_t esize = hc_dtype_size((HcclDataType)sig->dtype);

    if (sig->coll == HC_COLL_SCATTER)
        return is_root && hc_shm_eager_scatter_fits(eng, sig->count, esize);
    if (sig->coll != HC_COLL_BROADCAST && sig->coll != HC_COLL_REDUCE)
        return 0;
    return is_root == (sig->coll == HC_COLL_BROADCAST) && eng->nlocal > 1 &&
           eng->nlocal <= HC_SHM_MAX_RANKS_ON_STACK && sig->count > 0 && esize > 0 &&
           sig->count <= HC_SHM_EAGER_MAX && sig->count * esize <= HC_SHM_EAGER_MAX;
}
/* Does op leave its own comparison of some rank's signature for later (shm_announce.c, "Deferred
 * checks"): a writer of the eager path, or a reader of a small Broadcast or Scatter on more than 2
 * ranks (it compares the root at once, the other readers later)? Such an op need not check the list
 * when it begins: it adds to it, and a full list is checked then. */
static inline int hc_shm_eager_defers(const hc_shm_engine_t *eng, const hc_op_sig_t *sig, int is_root)
{
    int rooted_copy = sig->coll == HC_COLL_BROADCAST || sig->coll == HC_COLL_SCATTER;

    return hc_shm_eager_writer(eng, sig, is_root) ||
           (rooted_copy && !is_root && eng->nlocal > 2 && hc_shm_eager_writer(eng, sig, 1)); /* its root's */
}
/* For run-at-enqueue (shm_ready.c), waiting for nothing: could this rank take its eager buffer of
 * `bytes` for op now (and announce op without waiting)? Has local rank i published its eager data
 * of op? */
int hc_shm_eager_free_now(hc_shm_engine_t *eng, const hc_op_t *op, size_t bytes);
int hc_shm_eager_arrived(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i);
/* Publish this rank's eager slot for op after writing its data. */
void hc_shm_eager_publish(hc_shm_engine_t *eng, const hc_op_t *op);
#define HC_SHM_EAGER_ALL UINT32_MAX /* hc_shm_eager_read: every other local rank */
/* A reader's wait for local rank i's eager data of op (HC_SHM_EAGER_ALL: every other rank's, a
 * Reduce root's), bounded: compares each writer's signature with op's (HCCL_E_PARA, logged, on a
 * mismatch, also where a writer announced another call and will write no data), makes sure no rank
 * failed earlier (HCCL_E_REMOTE), and, reading one writer past two ranks, defers the other readers'
 * checks. `bytes`: what each writer wrote (the reader faults in that much of the medium slots). */
HcclResult hc_shm_eager_read(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, size_t bytes);
static inline hc_shm_eager_t *hc_shm_eager_slot(hc_shm_engine_t *eng, uint32_t i, const hc_op_t *op)
{
    return &hc_shm_ctrl(eng, i)->eager[op->coll_seq % HC_SHM_EAGER_SLOTS];
}
/* Ask for the lines of local rank i's announcement entry and eager slot for the collective after
 * op, for writing when i is this rank: they move while this rank returns and makes its next call.
 * A writer's stores to them would otherwise wait, at its next lock, for the reader's copies to be
 * dropped; a reader would miss on them. Blocking 8-byte Broadcast, 2 ranks, slow VM state: 0.53-0.56
 * -> 0.43-0.46 us per call (the writer's prefetch alone: 0.48-0.49; the reader's alone: none).
 * The writer asks for every line of its slot that op's `bytes` of data took (the next call is
 * likely of the same size): with the first line alone, its stores to the others waited for the
 * reader's copies to be dropped (2 ranks, blocking, fast VM state, 128-240 bytes: Broadcast
 * 0.27-0.32 -> 0.19-0.23 us a call, Reduce 0.27-0.31 -> 0.17-0.27). Data of up to 2 KiB in a
 * medium slot too, once every rank finished the collective that used the next one last (as this
 * rank last saw: exec_min_done), not before: a writer up to HC_SHM_MEDIUM_SLOTS collectives ahead
 * took the lines its reader was reading (256-512 bytes: 0.27-0.35 -> 0.42-0.53 us). With the check,
 * Broadcast 512 B-1 KiB 0.32-0.49 -> 0.26-0.41 us (slow VM state), the same in the fast one; 8 KiB
 * bursts were 10-20% slower with the first 2 KiB asked for, so larger data is not. */
#define HC_SHM_MEDIUM_PREFETCH_MAX 2048u
static inline void hc_shm_eager_prefetch_next(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, size_t bytes)
{
    hc_shm_ctrl_t *c = hc_shm_ctrl(eng, i);
    unsigned k = (op->coll_seq + 1) % HC_SHM_EAGER_SLOTS;

    if (i == eng->me) {
        /* The slot's first line alone when the data goes to a medium slot. */
        hc_prefetch_write_lines(&c->eager[k],
                                bytes <= HC_SHM_EAGER_BYTES ? offsetof(hc_shm_eager_t, data) + bytes : 64);
        if (bytes > HC_SHM_EAGER_BYTES && bytes <= HC_SHM_MEDIUM_PREFETCH_MAX) {
            unsigned j = eng->medium_next % HC_SHM_MEDIUM_SLOTS;
            if (eng->medium_user[j] <= eng->exec_min_done)
                hc_prefetch_write_lines(c->medium[j], bytes);
        }
        hc_prefetch_write(&c->ann[(op->coll_seq + 1) % HC_SHM_ANN_SLOTS]);
    } else {
        __builtin_prefetch(&c->eager[k]); /* not its announcement: the hash comes with the data */
    }
}
/* A reader about to wait for local rank i's eager slot for op (`bytes` of data) asks for the lines
 * of the bytes [from, to) of that data that lie past the slot's first line (which the wait reads)
 * at once, so that they come with that line, not after it: 2 ranks, blocking 64-byte Broadcast,
 * slow VM state, 0.41-0.43 -> 0.28-0.30 us a call. Data in a medium slot (which the first line
 * names) is not asked for. */
static inline void hc_shm_eager_prefetch_data(hc_shm_engine_t *eng, uint32_t i, const hc_op_t *op, size_t bytes,
                                              size_t from, size_t to)
{
    const uint8_t *slot = (const uint8_t *)hc_shm_eager_slot(eng, i, op);
    size_t first = (offsetof(hc_shm_eager_t, data) + from) & ~(size_t)63;

    if (bytes > HC_SHM_EAGER_BYTES)
        return;
    for (size_t at = first > 64 ? first : 64; at < offsetof(hc_shm_eager_t, data) + to; at += 64)
        __builtin_prefetch(slot + at);
}
/* Local rank i's `bytes` of data for op, once hc_shm_eager_read saw it. */
static inline const uint8_t *hc_shm_eager_data(hc_shm_engine_t *eng, uint32_t i, const hc_op_t *op, size_t bytes)
{
    hc_shm_eager_t *slot = hc_shm_eager_slot(eng, i, op);

    return bytes <= HC_SHM_EAGER_BYTES ? slot->data : hc_shm_ctrl(eng, i)->medium[slot->medium];
}
/* A peer failed while this rank waited for it: if it announced a different call for op, that is
 * the reason (logged as a mismatch, HCCL_E_PARA); else HCCL_SUCCESS and nothing logged. */
HcclResult hc_shm_explain_by_announcement(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i);

/* Generic bounded wait (shm_step.c): until behind(eng, ctx) returns eng->nlocal, i.e. no local
 * rank is behind; it returns the first rank that is, whom the waiter sleeps on. */
typedef uint32_t (*hc_shm_behind_fn)(hc_shm_engine_t *eng, const void *ctx);
HcclResult hc_shm_wait_for(hc_shm_engine_t *eng, hc_shm_behind_fn behind, const void *ctx, const hc_op_t *op);
/* After publishing something a rank may wait for: wake the ranks asleep on this one. */
void hc_shm_wake_sleepers(hc_shm_engine_t *eng);
/* Publish `value` in a flag peers may sleep waiting for, before hc_shm_wake_sleepers looks for
 * sleepers: release order and a compiler barrier with the asymmetric fence, a sequentially
 * consistent store without it (shm_step.c). */
static inline void hc_shm_publish_flag(const hc_shm_engine_t *eng, atomic_uint_fast64_t *flag, uint64_t value)
{
    if (eng->asym_fence) {
        atomic_store_explicit(flag, value, memory_order_release);
        atomic_signal_fence(memory_order_seq_cst);
    } else {
        atomic_store(flag, value);
    }
}
/* Log a mismatch between this rank's op and local rank i's call `theirs` (HCCL_E_PARA). */
HcclResult hc_shm_report_sig_mismatch(hc_shm_engine_t *eng, const hc_op_sig_t *mine, unsigned long long number,
                                      uint32_t i, const hc_op_sig_t *theirs, uint64_t their_seq);
HcclResult hc_shm_report_mismatch(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, const hc_op_sig_t *theirs,
                                  uint64_t their_seq);

/* Point to point (shm_p2p.c): Send, Recv and a batch of them, progressed together. */
HcclResult hc_shm_p2p(hc_engine_t *engine, hc_op_t *op);
/* Begin a point-to-point op at launch: number its items, post its receives, put its sends' first
 * chunks in the rings (1). Ready: running it would wait for nobody (every send's receive posted,
 * every receive's message there whole). */
/* The per-local-rank point-to-point state (message numbers, tails seen, postings, ...): zeroed
 * arrays of eng->nlocal entries, and where the channels lie (p2p_base, ...); fini frees whatever
 * init allocated, also after it failed. */
HcclResult hc_shm_p2p_init(hc_shm_engine_t *eng);
void hc_shm_p2p_fini(hc_shm_engine_t *eng);
int hc_shm_p2p_start(hc_shm_engine_t *eng, hc_op_t *op);
int hc_shm_p2p_ready(hc_shm_engine_t *eng, const hc_op_t *op);

#endif /* HC_SHM_INTERNAL_H */
