/*
 * The inference demo: a small decoder-only transformer (seeded random weights) generating tokens
 * with tensor parallelism inside each pipeline stage, pipeline parallelism between stages, and in
 * its MoE variant expert parallelism over each stage's TP group (docs/examples.md).
 *
 * How the files divide the work:
 *   model.c     weights and the per-shard arithmetic (embedding, attention, MLP, experts, head);
 *   program.c   a stage's forward pass as a list of steps, compute or collective, and the
 *               single-process stand-ins for the collectives that the reference uses;
 *   exec.c      the three ways of running a program on HCCL (serial, host overlap, streams);
 *   generate.c  the pipeline: items through stages tick by tick, prefill and decode, tokens fed
 *               back from the last stage to the first, and the single-rank reference;
 *   demo.c      options, communicators, the runs, verification and the report.
 *
 * Every shard (one TP rank of one stage) computes with exactly the shapes it would have in the
 * distributed run; the reference runs all shards of all stages in one process and sums partial
 * results in rank order, as HCCL_DETERMINISTIC=true makes the collectives do. So the logits of a
 * run must equal the reference bit for bit; the demo also compares them with an unsharded model.
 */
#ifndef HOSTCCL_DEMO_H
#define HOSTCCL_DEMO_H

#include <stdint.h>
#include <stdio.h>

#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

#define DEMO_MAX_TP 16
#define DEMO_TOP_K 2

typedef enum { DISPATCH_ALLGATHER, DISPATCH_ALLTOALL } demo_dispatch_t;
typedef enum { MODE_SERIAL, MODE_HOST, MODE_STREAMS, MODE_COUNT } demo_mode_t;

/* What the user chose, and what follows from it. */
typedef struct {
    uint32_t layers, hidden, head_dim, heads, ffn, vocab;
    uint32_t experts, expert_ffn;   /* experts == 0: dense model */
    demo_dispatch_t dispatch;
    uint32_t batch, prompt, gen;    /* sequences, prompt tokens, tokens generated per sequence */
    uint32_t tp, pp, groups;        /* groups: slices of a micro-batch that overlap each other */
    uint32_t modes;                 /* bit per demo_mode_t to run */
    int unsharded_check;            /* also compare with the model unsharded (tp 1, pp 1) */
    int quiet;
    /* derived */
    uint32_t micro;                 /* micro-batches in flight: pp */
    uint32_t seq_per_group, groups_total, max_len;
} demo_cfg_t;

/* One layer's weights as shard (stage, tp_index) holds them. */
typedef struct {
    float *wqkv;    /* hidden x 3*local_heads*head_dim: this shard's heads of Q, K and V */
    float *wo;      /* local_heads*head_dim x hidden: the matching rows of the output projection */
    float *wgu;     /* dense: hidden x 2*ffn/tp, gate and up columns side by side */
    float *wd;      /* dense: ffn/tp x hidden */
    float *router;  /* moe: hidden x experts, the same on every shard */
    float **ewgu;   /* moe: per local expert, hidden x 2*expert_ffn */
    float **ewd;    /* moe: per local expert, expert_ffn x hidden */
    float *kcache, *vcache; /* [batch][max_len][local_heads][head_dim] */
} demo_layer_t;

/* One TP rank of one pipeline stage: its layers' weights and KV cache. */
typedef struct {
    uint32_t stage, tp_index, tp;
    uint32_t layer0, nlayers;
    uint32_t local_heads, local_ffn, local_experts, local_vocab;
    demo_layer_t *layer;
    float *embed;   /* first stage: vocab x hidden (replicated) */
    float *head;    /* last stage: hidden x vocab/tp (the vocabulary split over the TP group) */
} demo_shard_t;

/* The buffers of one group of sequences on one shard, for the item being processed. */
typedef struct {
    uint32_t seq0, nseq;       /* sequences [seq0, seq0 + nseq) of the batch */
    uint32_t pos0, ntok;       /* positions [pos0, pos0 + ntok) of each, this step */
    uint32_t rows, rows_loc;   /* nseq*ntok; rows this shard owns (sequence parallel: rows/tp) */
    const int32_t *tokens;     /* first stage: nseq*ntok input tokens */
    float *x;                  /* the residual stream: rows x hidden (dense) or rows_loc x hidden (moe) */
    float *hn;                 /* normed input, rows x hidden (moe: gathered from rows_loc) */
    float *hn_loc;             /* moe: this shard's rows, normed, rows_loc x hidden */
    float *part;               /* partial sums, rows x hidden: what the AllReduce/ReduceScatter sums */
    float *red;                /* moe: ReduceScatter result, rows_loc x hidden */
    float *scratch;            /* rows x max(3*local_heads*head_dim, 2*ffn/tp, 2*expert_ffn) */
    float *attn;               /* rows x local_heads*head_dim */
    float *head_part;          /* last stage: nseq x vocab/tp */
    float *head_all;           /* last stage: tp x nseq x vocab/tp, gathered */
    float *logits;             /* last stage: nseq x vocab, for the caller to keep */
    int32_t *next;             /* last stage: nseq sampled tokens */
    /* moe, AlltoAll dispatcher */
    uint64_t *rows_to, *rows_from;   /* per TP peer: rows sent, rows received */
    uint64_t disp_rows_cap;          /* capacity of the dispatch buffers, in rows */
    float *disp_send, *disp_recv, *disp_out, *disp_back;
    int32_t *eid_send, *eid_recv;
    uint32_t *slot_of;               /* (own row, k) -> row of disp_send */
    float *gate;                     /* (row, k) gates, DEMO_TOP_K per row */
    int32_t *choice;                 /* (row, k) experts */
} demo_group_t;

/* A collective, as a step describes it. */
typedef enum { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCESCATTER, COLL_ALLTOALL, COLL_ALLTOALLV } demo_coll_kind_t;
typedef struct {
    demo_coll_kind_t kind;
    void *send, *recv;
    uint64_t count;            /* allreduce: elements; allgather: send count; reducescatter: recv count;
                                  alltoall: elements per peer */
    HcclDataType dtype;
    uint64_t scount[DEMO_MAX_TP], sdispl[DEMO_MAX_TP], rcount[DEMO_MAX_TP], rdispl[DEMO_MAX_TP];
} demo_coll_t;

typedef void (*demo_compute_fn)(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
typedef void (*demo_describe_fn)(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer,
                                 demo_coll_t *c);

/* One step of a stage's forward pass: either local arithmetic or a collective of the TP group.
 * needs_host is set when describing the collective reads values an earlier collective delivered
 * (the AlltoAllV counts): the executor must have finished that one first. */
typedef struct {
    const char *name;
    demo_compute_fn compute;
    demo_describe_fn describe;
    int needs_host;
    uint32_t layer;
} demo_step_t;

typedef struct {
    demo_step_t *steps;
    uint32_t nsteps, cap;
} demo_program_t;

/* Per rank and run: where the time went (seconds). */
typedef struct {
    double wall_prefill, wall_decode;
    double compute, tp_comm, pp_comm; /* compute steps, TP collectives (stream time), PP transfers */
    double tp_calls, pp_calls;
} demo_stats_t;

typedef struct demo {
    demo_cfg_t cfg;
    uint32_t rank, size;
    HcclComm world, tp_comm, pp_comm;
    aclrtStream stream;        /* host-side collectives, PP transfers */
    aclrtStream comm_stream;   /* the TP collectives in the overlap modes */
    aclrtStream compute_stream;/* the compute callbacks in the streams mode */
    demo_shard_t shard;        /* this rank's shard */
    demo_program_t program;    /* this stage's forward pass, the same for prefill and decode */
} demo_t;

/* model.c */
void demo_shard_init(const demo_cfg_t *cfg, uint32_t stage, uint32_t tp_index, uint32_t tp, uint32_t pp,
                     demo_shard_t *sh);
void demo_shard_free(const demo_cfg_t *cfg, demo_shard_t *sh);
void demo_group_alloc(const demo_cfg_t *cfg, const demo_shard_t *sh, demo_group_t *g);
void demo_group_free(demo_group_t *g);
void demo_group_set(const demo_cfg_t *cfg, const demo_shard_t *sh, demo_group_t *g, uint32_t seq0, uint32_t step);
void *demo_alloc(size_t bytes);
void *demo_device_alloc(size_t bytes);
void demo_device_free(void *p);
int32_t demo_prompt_token(uint32_t seq, uint32_t pos, uint32_t vocab);
double demo_now(void);

/* program.c */
void demo_program_build(const demo_cfg_t *cfg, const demo_shard_t *sh, uint32_t pp, demo_program_t *p);
void demo_program_free(demo_program_t *p);
void demo_coll_local(const demo_coll_t *c, uint32_t tp);

/* model.c: the compute steps */
void demo_step_embed(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_dense_attn(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_dense_mlp(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_dense_finish(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_sp_norm(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_sp_attn(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_sp_moe_norm(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_moe_experts_all(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_moe_route_own(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_moe_experts_recv(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_moe_combine(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_sp_finish(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_head_norm(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_head(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);
void demo_step_sample(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer);

/* exec.c */
void demo_exec_init(demo_t *d);
void demo_exec_fini(demo_t *d);
void demo_exec_run(demo_t *d, demo_mode_t mode, demo_group_t *groups, uint32_t ngroups, demo_stats_t *st);
const char *demo_mode_name(demo_mode_t mode);

/* generate.c */
typedef struct {
    float *logits;     /* [batch][gen][vocab] (last stage ranks) */
    int32_t *tokens;   /* [batch][gen] generated tokens (every rank, after the run) */
} demo_output_t;
void demo_generate(demo_t *d, demo_mode_t mode, demo_output_t *out, demo_stats_t *st);
void demo_reference(const demo_cfg_t *cfg, uint32_t tp, uint32_t pp, const int32_t *tokens, uint32_t group_stride,
                    uint32_t group_offset, float *logits);

#define DEMO_CHECK_ACL(call)                                                                     \
    do {                                                                                         \
        aclError err_ = (call);                                                                  \
        if (err_ != ACL_SUCCESS) {                                                               \
            fprintf(stderr, "demo: %s:%d: %s failed: acl error %d\n", __FILE__, __LINE__, #call, \
                    (int)err_);                                                                  \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

#define DEMO_CHECK_HCCL(call)                                                                    \
    do {                                                                                         \
        HcclResult res_ = (call);                                                                \
        if (res_ != HCCL_SUCCESS) {                                                              \
            fprintf(stderr, "demo: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,           \
                    HcclGetErrorString(res_));                                                   \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

#endif /* HOSTCCL_DEMO_H */
