/*
 * Generation through the pipeline, and the single-rank reference.
 *
 * Work items: micro-batch mb at generation step t (t = 0 is the prefill of the prompt, t > 0 decodes
 * one token). With pp micro-batches in flight, item w = t * pp + mb, and stage s handles item k - s
 * at tick k: every stage is busy once the pipeline is full. At the end of a tick each stage, in one
 * HcclBatchSendRecv on the PP communicator, sends its output to the next stage and receives the
 * input of its next item from the previous one; the last stage's "output" is the sampled tokens,
 * which go round to the first stage, where the micro-batch's next step needs them exactly pp ticks
 * later (one tick after the last stage produced them).
 */
#include <stdlib.h>
#include <string.h>

#include "demo.h"

typedef struct {
    demo_group_t *groups;
    float *x_send, *x_recv;      /* the stage boundary: every group's rows, packed */
    int32_t *tok_send, *tok_recv;
    int32_t *in_tokens;          /* per group: nseq * ntok tokens of the item (first stage) */
} pipe_bufs_t;

static uint32_t seq_per_micro(const demo_cfg_t *cfg)
{
    return cfg->groups * cfg->seq_per_group;
}

/* Rows of one group at step t that cross a stage boundary (moe: this rank's own). */
static uint64_t boundary_rows(const demo_cfg_t *cfg, uint32_t step)
{
    uint64_t rows = (uint64_t)cfg->seq_per_group * (step == 0 ? cfg->prompt : 1);

    return cfg->experts > 0 ? rows / cfg->tp : rows;
}

/* Point every group at item (mb, step) and give the first stage its tokens. */
static void items_set(const demo_cfg_t *cfg, demo_shard_t *sh, pipe_bufs_t *b, uint32_t mb, uint32_t step,
                      const int32_t *tokens)
{
    for (uint32_t gi = 0; gi < cfg->groups; gi++) {
        demo_group_t *g = &b->groups[gi];
        int32_t *in = b->in_tokens + (uint64_t)gi * cfg->seq_per_group * cfg->prompt;
        demo_group_set(cfg, sh, g, mb * seq_per_micro(cfg) + gi * cfg->seq_per_group, step);
        for (uint32_t s = 0; s < g->nseq; s++)
            for (uint32_t i = 0; i < g->ntok; i++)
                in[s * g->ntok + i] = step == 0 ? demo_prompt_token(g->seq0 + s, i, cfg->vocab)
                                                : tokens[(uint64_t)(g->seq0 + s) * cfg->gen + step - 1];
        g->tokens = in;
    }
}

static void pack_x(const demo_cfg_t *cfg, pipe_bufs_t *b, uint32_t step, int unpack)
{
    uint64_t n = boundary_rows(cfg, step) * cfg->hidden;

    for (uint32_t gi = 0; gi < cfg->groups; gi++) {
        if (unpack)
            memcpy(b->groups[gi].x, b->x_recv + gi * n, n * sizeof(float));
        else
            memcpy(b->x_send + gi * n, b->groups[gi].x, n * sizeof(float));
    }
}

/* The end of tick k on stage s: what goes to the next stage, what comes from the previous one. */
static void exchange(demo_t *d, pipe_bufs_t *b, int64_t w, demo_stats_t *st)
{
    const demo_cfg_t *cfg = &d->cfg;
    uint32_t s = d->shard.stage, pp = cfg->pp, m = seq_per_micro(cfg);
    int64_t items = (int64_t)pp * cfg->gen, next = w + 1;
    HcclSendRecvItem it[2];
    uint32_t n = 0;
    double t0 = demo_now();

    if (pp == 1)
        return;
    if (w >= 0 && w < items && s + 1 < pp)
        it[n++] = (HcclSendRecvItem){HCCL_SEND, b->x_send, cfg->groups * boundary_rows(cfg, (uint32_t)(w / pp)) *
                                     cfg->hidden, HCCL_DATA_TYPE_FP32, s + 1};
    if (w >= 0 && w + pp < items && s + 1 == pp)
        it[n++] = (HcclSendRecvItem){HCCL_SEND, b->tok_send, m, HCCL_DATA_TYPE_INT32, 0};
    if (next >= 0 && next < items && s > 0)
        it[n++] = (HcclSendRecvItem){HCCL_RECV, b->x_recv, cfg->groups * boundary_rows(cfg, (uint32_t)(next / pp)) *
                                     cfg->hidden, HCCL_DATA_TYPE_FP32, s - 1};
    if (next >= pp && next < items && s == 0)
        it[n++] = (HcclSendRecvItem){HCCL_RECV, b->tok_recv, m, HCCL_DATA_TYPE_INT32, pp - 1};
    if (n == 0)
        return;
    DEMO_CHECK_HCCL(HcclBatchSendRecv(it, n, d->pp_comm, d->stream));
    DEMO_CHECK_ACL(aclrtSynchronizeStream(d->stream));
    st->pp_comm += demo_now() - t0;
    st->pp_calls += 1;
}

static void bufs_alloc(demo_t *d, pipe_bufs_t *b)
{
    const demo_cfg_t *cfg = &d->cfg;
    uint64_t n = cfg->groups * boundary_rows(cfg, 0) * cfg->hidden;

    b->groups = demo_alloc(cfg->groups * sizeof(demo_group_t));
    for (uint32_t gi = 0; gi < cfg->groups; gi++)
        demo_group_alloc(cfg, &d->shard, &b->groups[gi]);
    b->x_send = demo_device_alloc(n * sizeof(float));
    b->x_recv = demo_device_alloc(n * sizeof(float));
    b->tok_send = demo_device_alloc(seq_per_micro(cfg) * sizeof(int32_t));
    b->tok_recv = demo_device_alloc(seq_per_micro(cfg) * sizeof(int32_t));
    b->in_tokens = demo_alloc((uint64_t)cfg->groups * cfg->seq_per_group * cfg->prompt * sizeof(int32_t));
}

static void bufs_free(const demo_cfg_t *cfg, pipe_bufs_t *b)
{
    for (uint32_t gi = 0; gi < cfg->groups; gi++)
        demo_group_free(&b->groups[gi]);
    free(b->groups);
    demo_device_free(b->x_send);
    demo_device_free(b->x_recv);
    demo_device_free(b->tok_send);
    demo_device_free(b->tok_recv);
    free(b->in_tokens);
}

/* The last stage keeps the logits and tokens of the item; the tokens also go round to stage 0. */
static void keep_outputs(const demo_cfg_t *cfg, pipe_bufs_t *b, uint32_t step, demo_output_t *out)
{
    for (uint32_t gi = 0; gi < cfg->groups; gi++) {
        demo_group_t *g = &b->groups[gi];
        for (uint32_t s = 0; s < g->nseq; s++) {
            uint64_t at = (uint64_t)(g->seq0 + s) * cfg->gen + step;
            memcpy(out->logits + at * cfg->vocab, g->logits + (uint64_t)s * cfg->vocab, cfg->vocab * sizeof(float));
            out->tokens[at] = g->next[s];
            b->tok_send[gi * cfg->seq_per_group + s] = g->next[s];
        }
    }
}

/* Tokens for item `next` arrived at stage 0: record them where items_set looks for them. */
static void take_tokens(const demo_cfg_t *cfg, pipe_bufs_t *b, int64_t next, demo_output_t *out)
{
    uint32_t mb = (uint32_t)(next % cfg->pp), step = (uint32_t)(next / cfg->pp);

    for (uint32_t i = 0; i < seq_per_micro(cfg); i++)
        out->tokens[(uint64_t)(mb * seq_per_micro(cfg) + i) * cfg->gen + step - 1] = b->tok_recv[i];
}

void demo_generate(demo_t *d, demo_mode_t mode, demo_output_t *out, demo_stats_t *st)
{
    const demo_cfg_t *cfg = &d->cfg;
    uint32_t s = d->shard.stage, pp = cfg->pp;
    int64_t items = (int64_t)pp * cfg->gen, ticks = items + pp - 1, prefill_end = 2 * (int64_t)pp - 2;
    int last = s + 1 == pp;
    pipe_bufs_t b;
    double t0;

    bufs_alloc(d, &b);
    /* Start together, so that the phases' wall times mean the same on every rank. */
    DEMO_CHECK_HCCL(HcclBarrier(d->world, d->stream));
    DEMO_CHECK_ACL(aclrtSynchronizeStream(d->stream));
    t0 = demo_now();
    for (int64_t k = 0; k < ticks; k++) {
        int64_t w = k - s;
        if (w >= 0 && w < items) {
            uint32_t mb = (uint32_t)(w % pp), step = (uint32_t)(w / pp);
            items_set(cfg, &d->shard, &b, mb, step, out->tokens);
            if (s > 0)
                pack_x(cfg, &b, step, 1);
            demo_exec_run(d, mode, b.groups, cfg->groups, st);
            if (last)
                keep_outputs(cfg, &b, step, out);
            else
                pack_x(cfg, &b, step, 0);
        }
        exchange(d, &b, w, st);
        if (s == 0 && pp > 1 && w + 1 >= pp && w + 1 < items)
            take_tokens(cfg, &b, w + 1, out);
        if (k == prefill_end)
            st->wall_prefill = demo_now() - t0;
    }
    st->wall_decode = demo_now() - t0 - st->wall_prefill;
    bufs_free(cfg, &b);
}

/* ---- the reference ------------------------------------------------------------------------------ */

/*
 * All tp x pp shards of the model in this one process, group by group, stage by stage, with the
 * collectives done in memory (demo_coll_local). The tokens fed at each step are the ones the run
 * generated (teacher forcing), so that every step's logits can be compared even where a tie in
 * the greedy choice would send an unsharded model down another path. Computes the groups whose
 * index is group_offset modulo group_stride; writes their logits into logits[batch][gen][vocab].
 */
/* One stage of the reference for group gi at `step`: its tp shards, collectives in memory. */
static void reference_stage(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *gs, const demo_group_t *prev,
                            const demo_program_t *prog, uint32_t gi, uint32_t step, int32_t *in,
                            const int32_t *tokens, demo_coll_t *c)
{
    uint32_t tp = cfg->tp;

    for (uint32_t r = 0; r < tp; r++) {
        demo_group_set(cfg, &sh[r], &gs[r], gi * cfg->seq_per_group, step);
        gs[r].tokens = in;
        if (prev != NULL) /* the stage boundary: the same TP rank of the previous stage */
            memcpy(gs[r].x, prev[r].x, (uint64_t)gs[r].rows_loc * cfg->hidden * sizeof(float));
    }
    for (uint32_t s = 0; s < gs[0].nseq; s++)
        for (uint32_t i = 0; i < gs[0].ntok; i++)
            in[s * gs[0].ntok + i] = step == 0 ? demo_prompt_token(gs[0].seq0 + s, i, cfg->vocab)
                                               : tokens[(uint64_t)(gs[0].seq0 + s) * cfg->gen + step - 1];
    for (uint32_t i = 0; i < prog->nsteps; i++) {
        const demo_step_t *p = &prog->steps[i];
        for (uint32_t r = 0; r < tp; r++) {
            if (p->compute != NULL)
                p->compute(cfg, &sh[r], &gs[r], p->layer);
            else
                p->describe(cfg, &sh[r], &gs[r], p->layer, &c[r]);
        }
        if (p->compute == NULL)
            demo_coll_local(c, tp);
    }
}

void demo_reference(const demo_cfg_t *run_cfg, uint32_t tp, uint32_t pp, const int32_t *tokens,
                    uint32_t group_stride, uint32_t group_offset, float *logits)
{
    demo_cfg_t cfg = *run_cfg;
    uint32_t nshards = tp * pp;
    demo_shard_t *sh = demo_alloc(nshards * sizeof(*sh));
    demo_program_t *prog = demo_alloc(pp * sizeof(*prog));
    demo_group_t *g = demo_alloc(nshards * sizeof(*g));
    demo_coll_t *c = demo_alloc(tp * sizeof(*c));
    int32_t *in = demo_alloc((uint64_t)cfg.seq_per_group * cfg.prompt * sizeof(int32_t));

    cfg.tp = tp;
    cfg.pp = pp;
    for (uint32_t i = 0; i < nshards; i++) {
        demo_shard_init(&cfg, i / tp, i % tp, tp, pp, &sh[i]);
        demo_group_alloc(&cfg, &sh[i], &g[i]);
    }
    for (uint32_t st = 0; st < pp; st++)
        demo_program_build(&cfg, &sh[st * tp], pp, &prog[st]);
    for (uint32_t gi = group_offset; gi < cfg.groups_total; gi += group_stride)
        for (uint32_t step = 0; step < cfg.gen; step++)
            for (uint32_t st = 0; st < pp; st++) {
                demo_group_t *gs = &g[st * tp];
                reference_stage(&cfg, &sh[st * tp], gs, st > 0 ? &g[(st - 1) * tp] : NULL, &prog[st], gi, step, in,
                                tokens, c);
                if (st + 1 < pp)
                    continue;
                for (uint32_t s = 0; s < gs[0].nseq; s++)
                    memcpy(logits + ((uint64_t)(gs[0].seq0 + s) * cfg.gen + step) * cfg.vocab,
                           gs[0].logits + (uint64_t)s * cfg.vocab, cfg.vocab * sizeof(float));
            }
    for (uint32_t i = 0; i < nshards; i++) {
        demo_group_free(&g[i]);
        demo_shard_free(&cfg, &sh[i]);
    }
    for (uint32_t st = 0; st < pp; st++)
        demo_program_free(&prog[st]);
    free(sh);
    free(prog);
    free(g);
    free(c);
    free(in);
}
