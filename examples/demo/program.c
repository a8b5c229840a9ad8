/*
 * A stage's forward pass as a list of steps, and the collectives' single-process stand-ins.
 *
 * Dense model (Megatron tensor parallelism, the residual stream replicated over the TP group):
 *   per layer   attn -> AllReduce -> mlp -> AllReduce            (the seed's "twice per layer")
 * MoE model (sequence parallelism: each TP rank owns 1/tp of the rows; experts spread over the group):
 *   per layer   norm -> AllGather -> attn -> ReduceScatter -> norm -> dispatch -> experts -> combine
 *   AllGather dispatcher:  AllGather -> all experts here over all rows -> ReduceScatter
 *   AlltoAll dispatcher:   route own rows -> AlltoAll(counts) -> AlltoAllV(expert ids) ->
 *                          AlltoAllV(rows) -> experts -> AlltoAllV(back) -> combine
 * Last stage: norm the last position -> (moe: AllGather) -> vocabulary slice -> AllGather -> sample.
 */
#include <stdlib.h>
#include <string.h>

#include "demo.h"

static void push(demo_program_t *p, const char *name, demo_compute_fn compute, demo_describe_fn describe,
                 int needs_host, uint32_t layer)
{
    if (p->nsteps == p->cap) {
        p->cap = p->cap == 0 ? 32 : 2 * p->cap;
        p->steps = realloc(p->steps, p->cap * sizeof(*p->steps));
        if (p->steps == NULL) {
            fprintf(stderr, "demo: out of memory\n");
            exit(1);
        }
    }
    p->steps[p->nsteps++] = (demo_step_t){.name = name, .compute = compute, .describe = describe,
                                          .needs_host = needs_host, .layer = layer};
}

/* ---- the collectives of a step ----------------------------------------------------------------- */

static void allreduce_part(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer, demo_coll_t *c)
{
    *c = (demo_coll_t){.kind = COLL_ALLREDUCE, .send = g->part, .recv = g->part,
                       .count = (uint64_t)g->rows * cfg->hidden, .dtype = HCCL_DATA_TYPE_FP32};
    (void)sh;
    (void)layer;
}

static void allgather_hn(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer, demo_coll_t *c)
{
    *c = (demo_coll_t){.kind = COLL_ALLGATHER, .send = g->hn_loc, .recv = g->hn,
                       .count = (uint64_t)g->rows_loc * cfg->hidden, .dtype = HCCL_DATA_TYPE_FP32};
    (void)sh;
    (void)layer;
}

static void reducescatter_part(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer,
                               demo_coll_t *c)
{
    *c = (demo_coll_t){.kind = COLL_REDUCESCATTER, .send = g->part, .recv = g->red,
                       .count = (uint64_t)g->rows_loc * cfg->hidden, .dtype = HCCL_DATA_TYPE_FP32};
    (void)sh;
    (void)layer;
}

static void alltoall_counts(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer,
                            demo_coll_t *c)
{
    *c = (demo_coll_t){.kind = COLL_ALLTOALL, .send = g->rows_to, .recv = g->rows_from, .count = 1,
                       .dtype = HCCL_DATA_TYPE_UINT64};
    (void)cfg;
    (void)sh;
    (void)layer;
}

/* Counts and displacements of the dispatch in units of `width` elements per row; back swaps them. */
static void alltoallv(demo_shard_t *sh, demo_group_t *g, demo_coll_t *c, uint64_t width, int back)
{
    uint64_t s_at = 0, r_at = 0;

    for (uint32_t r = 0; r < sh->tp; r++) {
        uint64_t to = (back ? g->rows_from[r] : g->rows_to[r]) * width;
        uint64_t from = (back ? g->rows_to[r] : g->rows_from[r]) * width;
        c->scount[r] = to;
        c->sdispl[r] = s_at;
        c->rcount[r] = from;
        c->rdispl[r] = r_at;
        s_at += to;
        r_at += from;
    }
}

static void alltoallv_ids(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer, demo_coll_t *c)
{
    *c = (demo_coll_t){.kind = COLL_ALLTOALLV, .send = g->eid_send, .recv = g->eid_recv,
                       .dtype = HCCL_DATA_TYPE_INT32};
    alltoallv(sh, g, c, 1, 0);
    (void)cfg;
    (void)layer;
}

static void alltoallv_rows(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer, demo_coll_t *c)
{
    *c = (demo_coll_t){.kind = COLL_ALLTOALLV, .send = g->disp_send, .recv = g->disp_recv,
                       .dtype = HCCL_DATA_TYPE_FP32};
    alltoallv(sh, g, c, cfg->hidden, 0);
    (void)layer;
}

static void alltoallv_back(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer, demo_coll_t *c)
{
    *c = (demo_coll_t){.kind = COLL_ALLTOALLV, .send = g->disp_out, .recv = g->disp_back,
                       .dtype = HCCL_DATA_TYPE_FP32};
    alltoallv(sh, g, c, cfg->hidden, 1);
    (void)layer;
}

static void allgather_head_hn(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer,
                              demo_coll_t *c)
{
    *c = (demo_coll_t){.kind = COLL_ALLGATHER, .send = g->hn_loc, .recv = g->hn,
                       .count = (uint64_t)(g->nseq / sh->tp) * cfg->hidden, .dtype = HCCL_DATA_TYPE_FP32};
    (void)layer;
}

static void allgather_logits(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer,
                             demo_coll_t *c)
{
    *c = (demo_coll_t){.kind = COLL_ALLGATHER, .send = g->head_part, .recv = g->head_all,
                       .count = (uint64_t)g->nseq * sh->local_vocab, .dtype = HCCL_DATA_TYPE_FP32};
    (void)cfg;
    (void)layer;
}

/* ---- programs ---------------------------------------------------------------------------------- */

static void moe_layer(const demo_cfg_t *cfg, demo_program_t *p, uint32_t l)
{
    push(p, "norm", demo_step_sp_norm, NULL, 0, l);
    push(p, "allgather", NULL, allgather_hn, 0, l);
    push(p, "attention", demo_step_sp_attn, NULL, 0, l);
    push(p, "reducescatter", NULL, reducescatter_part, 0, l);
    push(p, "norm", demo_step_sp_moe_norm, NULL, 0, l);
    if (cfg->dispatch == DISPATCH_ALLGATHER) {
        push(p, "allgather", NULL, allgather_hn, 0, l);
        push(p, "experts", demo_step_moe_experts_all, NULL, 0, l);
        push(p, "reducescatter", NULL, reducescatter_part, 0, l);
        return;
    }
    push(p, "route", demo_step_moe_route_own, NULL, 0, l);
    push(p, "alltoall", NULL, alltoall_counts, 0, l);
    push(p, "alltoallv", NULL, alltoallv_ids, 1, l);
    push(p, "alltoallv", NULL, alltoallv_rows, 1, l);
    push(p, "experts", demo_step_moe_experts_recv, NULL, 0, l);
    push(p, "alltoallv", NULL, alltoallv_back, 1, l);
    push(p, "combine", demo_step_moe_combine, NULL, 0, l);
}

void demo_program_build(const demo_cfg_t *cfg, const demo_shard_t *sh, uint32_t pp, demo_program_t *p)
{
    uint32_t last_layer = sh->layer0 + sh->nlayers - 1;

    memset(p, 0, sizeof(*p));
    if (sh->stage == 0)
        push(p, "embed", demo_step_embed, NULL, 0, 0);
    for (uint32_t l = sh->layer0; l < sh->layer0 + sh->nlayers; l++) {
        if (cfg->experts > 0) {
            moe_layer(cfg, p, l);
            continue;
        }
        push(p, "attention", demo_step_dense_attn, NULL, 0, l);
        push(p, "allreduce", NULL, allreduce_part, 0, l);
        push(p, "mlp", demo_step_dense_mlp, NULL, 0, l);
        push(p, "allreduce", NULL, allreduce_part, 0, l);
    }
    if (sh->nlayers > 0)
        push(p, "residual", cfg->experts > 0 ? demo_step_sp_finish : demo_step_dense_finish, NULL, 0, last_layer);
    if (sh->stage + 1 < pp)
        return;
    push(p, "head norm", demo_step_head_norm, NULL, 0, 0);
    if (cfg->experts > 0)
        push(p, "allgather", NULL, allgather_head_hn, 0, 0);
    push(p, "head", demo_step_head, NULL, 0, 0);
    push(p, "allgather", NULL, allgather_logits, 0, 0);
    push(p, "sample", demo_step_sample, NULL, 0, 0);
}

void demo_program_free(demo_program_t *p)
{
    free(p->steps);
    memset(p, 0, sizeof(*p));
}

/* ---- the reference's collectives: the same data movement in one process ------------------------ */

static size_t dtype_size(HcclDataType t)
{
    return t == HCCL_DATA_TYPE_UINT64 ? 8 : 4;
}

/* dst = src[0] + src[1] + ... in rank order, one element at a time: what hostccl's reductions do
 * (and what HCCL_DETERMINISTIC=true promises). fp32 only: the demo reduces nothing else. */
static void fold(float *dst, float *const *src, uint32_t n, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++) {
        float acc = src[0][i];
        for (uint32_t r = 1; r < n; r++)
            acc += src[r][i];
        dst[i] = acc;
    }
}

/* c[0..tp) describe the same collective on each TP rank of a stage. */
void demo_coll_local(const demo_coll_t *c, uint32_t tp)
{
    size_t es = dtype_size(c[0].dtype);
    uint64_t n = c[0].count;
    float *src[DEMO_MAX_TP];
    float *tmp = demo_alloc((c[0].kind == COLL_ALLREDUCE ? n : 1) * sizeof(float));

    switch (c[0].kind) {
    case COLL_ALLREDUCE:
        for (uint32_t r = 0; r < tp; r++)
            src[r] = c[r].send;
        fold(tmp, src, tp, n);
        for (uint32_t r = 0; r < tp; r++)
            memcpy(c[r].recv, tmp, n * sizeof(float));
        break;
    case COLL_ALLGATHER:
        for (uint32_t r = 0; r < tp; r++)
            for (uint32_t q = 0; q < tp; q++)
                memcpy((char *)c[r].recv + q * n * es, c[q].send, n * es);
        break;
    case COLL_REDUCESCATTER:
        for (uint32_t r = 0; r < tp; r++) {
            for (uint32_t q = 0; q < tp; q++)
                src[q] = (float *)c[q].send + r * n;
            fold(c[r].recv, src, tp, n);
        }
        break;
    case COLL_ALLTOALL:
        for (uint32_t r = 0; r < tp; r++)
            for (uint32_t q = 0; q < tp; q++)
                memcpy((char *)c[r].recv + q * n * es, (char *)c[q].send + r * n * es, n * es);
        break;
    case COLL_ALLTOALLV:
        for (uint32_t r = 0; r < tp; r++)
            for (uint32_t q = 0; q < tp; q++)
                memcpy((char *)c[r].recv + c[r].rdispl[q] * es, (char *)c[q].send + c[q].sdispl[r] * es,
                       c[r].rcount[q] * es);
        break;
    }
    free(tmp);
}
