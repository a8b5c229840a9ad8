/*
 * hostccl's inference demo (make demo): a small decoder-only transformer generating tokens with
 * TP x PP over the ranks of the job, in the three execution patterns of exec.c, each verified
 * against a single-rank reference; it prints tokens per second, where the time went, and what
 * overlapping communication with computation gained.
 *
 *   hccl-run -n 4 ./demo                      4 layers, hidden 1024, tp 2 x pp 2
 *   hccl-run -n 4 ./demo --moe alltoall       the MoE variant, AlltoAllV dispatch
 *   hccl-run -n 8 ./demo --tp 4 --pp 2 --layers 8 --hidden 2048
 *
 * Options: see usage() or docs/examples.md.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hccl-run -n N demo [options]\n"
            "  --tp T --pp P        tensor- and pipeline-parallel sizes, T x P = N (default: tp 2 if N is even)\n"
            "  --layers L           decoder layers (default 4), split over the pipeline stages\n"
            "  --hidden H           model width (default 1024); heads of 64\n"
            "  --ffn F              MLP width (default 8/3 H, rounded up to a multiple of 64 x tp)\n"
            "  --vocab V            vocabulary (default 4096)\n"
            "  --moe allgather|alltoall   experts instead of the MLP, dispatched by AllGather/ReduceScatter or\n"
            "                       AlltoAllV (sequence parallel over each stage's TP group)\n"
            "  --experts E          experts per layer with --moe (default 8), top-2 routing\n"
            "  --batch B            sequences (default 8), in pp micro-batches of --groups groups (default 2)\n"
            "  --prompt P --gen G   prompt tokens (default 16) and tokens generated per sequence (default 16)\n"
            "  --modes LIST         of serial,host,streams (default all three)\n"
            "  --no-unsharded       skip the comparison with the unsharded model\n");
}

static int parse_modes(const char *list, uint32_t *modes)
{
    char buf[64], *tok, *save = NULL;

    snprintf(buf, sizeof(buf), "%s", list);
    *modes = 0;
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int m = 0; m < MODE_COUNT; m++)
            if (strcmp(tok, demo_mode_name((demo_mode_t)m)) == 0) {
                *modes |= 1u << m;
                found = 1;
            }
        if (!found)
            return -1;
    }
    return *modes != 0 ? 0 : -1;
}

static int parse_u32(const char *s, uint32_t *v)
{
    char *end;
    unsigned long x = strtoul(s, &end, 10);

    if (*s == '\0' || *end != '\0' || x == 0 || x > 1u << 24)
        return -1;
    *v = (uint32_t)x;
    return 0;
}

/* Fills cfg; returns an error message or NULL. */
static const char *parse(int argc, char **argv, uint32_t size, demo_cfg_t *cfg)
{
    static char msg[160];
    uint32_t tp = 0, pp = 0;

    *cfg = (demo_cfg_t){.layers = 4, .hidden = 1024, .head_dim = 64, .vocab = 4096, .batch = 8, .prompt = 16,
                        .gen = 16, .groups = 2, .modes = (1u << MODE_COUNT) - 1, .unsharded_check = 1};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint32_t *target = strcmp(o, "--tp") == 0       ? &tp
                           : strcmp(o, "--pp") == 0     ? &pp
                           : strcmp(o, "--layers") == 0 ? &cfg->layers
                           : strcmp(o, "--hidden") == 0 ? &cfg->hidden
                           : strcmp(o, "--ffn") == 0    ? &cfg->ffn
                           : strcmp(o, "--vocab") == 0  ? &cfg->vocab
                           : strcmp(o, "--experts") == 0 ? &cfg->experts
                           : strcmp(o, "--batch") == 0  ? &cfg->batch
                           : strcmp(o, "--prompt") == 0 ? &cfg->prompt
                           : strcmp(o, "--gen") == 0    ? &cfg->gen
                           : strcmp(o, "--groups") == 0 ? &cfg->groups
                                                        : NULL;
        if (target != NULL) {
            if (v == NULL || parse_u32(v, target) != 0) {
                snprintf(msg, sizeof(msg), "%s needs a positive integer", o);
                return msg;
            }
            i++;
        } else if (strcmp(o, "--moe") == 0 && v != NULL && (strcmp(v, "allgather") == 0 || strcmp(v, "alltoall") == 0)) {
            cfg->dispatch = strcmp(v, "allgather") == 0 ? DISPATCH_ALLGATHER : DISPATCH_ALLTOALL;
            if (cfg->experts == 0)
                cfg->experts = 8;
            i++;
        } else if (strcmp(o, "--modes") == 0 && v != NULL) {
            if (parse_modes(v, &cfg->modes) != 0)
                return "--modes takes a list of serial,host,streams";
            i++;
        } else if (strcmp(o, "--no-unsharded") == 0) {
            cfg->unsharded_check = 0;
        } else if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            return "";
        } else {
            snprintf(msg, sizeof(msg), "unknown option or missing value: %s", o);
            return msg;
        }
    }
    if (tp == 0 && pp == 0)
        tp = size % 2 == 0 ? 2 : 1;
    if (tp == 0)
        tp = pp != 0 && size % pp == 0 ? size / pp : 0;
    if (pp == 0)
        pp = tp != 0 && size % tp == 0 ? size / tp : 0;
    if (tp == 0 || pp == 0 || tp * pp != size) {
        snprintf(msg, sizeof(msg), "--tp x --pp must equal the %u ranks of the job", size);
        return msg;
    }
    cfg->tp = tp;
    cfg->pp = pp;
    cfg->heads = cfg->hidden / cfg->head_dim;
    if (cfg->ffn == 0) {
        uint32_t unit = 64 * tp;
        cfg->ffn = (cfg->hidden * 8 / 3 + unit - 1) / unit * unit;
    }
    if (cfg->experts > 0)
        cfg->expert_ffn = cfg->hidden / 2;
    cfg->micro = pp;
    if (cfg->hidden % cfg->head_dim != 0 || cfg->heads % tp != 0)
        return "--hidden must be a multiple of 64 heads' width, with the heads divisible by --tp";
    if (tp > DEMO_MAX_TP || cfg->groups > 64)
        return "--tp is at most 16 and --groups at most 64";
    if (cfg->ffn % tp != 0 || cfg->vocab % tp != 0)
        return "--ffn and --vocab must be divisible by --tp";
    if (cfg->experts > 0 && (cfg->experts % tp != 0 || cfg->experts < 2))
        return "--experts must be at least 2 and divisible by --tp";
    if (cfg->layers < pp)
        return "every pipeline stage needs a layer: --layers >= --pp";
    if (cfg->batch % (pp * cfg->groups) != 0)
        return "--batch must be divisible by --pp x --groups";
    cfg->seq_per_group = cfg->batch / (pp * cfg->groups);
    if (cfg->experts > 0 && cfg->seq_per_group % tp != 0)
        return "with --moe each group's sequences (batch / pp / groups) must divide over --tp";
    cfg->groups_total = cfg->batch / cfg->seq_per_group;
    cfg->max_len = cfg->prompt + cfg->gen;
    return NULL;
}

static void setup(demo_t *d)
{
    HcclRootInfo root;
    uint32_t tp = d->cfg.tp, pp = d->cfg.pp, stage = d->rank / tp, tp_index = d->rank % tp;
    uint32_t ids[DEMO_MAX_TP * 64];

    if (d->rank == 0)
        DEMO_CHECK_HCCL(HcclGetRootInfo(&root));
    if (d->size > 1)
        DEMO_CHECK_HCCL(HcclHostBroadcastRootInfo(&root));
    DEMO_CHECK_HCCL(HcclCommInitRootInfo(d->size, &root, d->rank, &d->world));
    /* One communicator per dimension: TP inside a stage, PP across stages (the seed's advice). */
    for (uint32_t i = 0; i < tp; i++)
        ids[i] = stage * tp + i;
    DEMO_CHECK_HCCL(HcclCreateSubCommConfig(&d->world, tp, ids, 1 + stage, tp_index, NULL, &d->tp_comm));
    for (uint32_t s = 0; s < pp; s++)
        ids[s] = s * tp + tp_index;
    DEMO_CHECK_HCCL(HcclCreateSubCommConfig(&d->world, pp, ids, 1000 + tp_index, stage, NULL, &d->pp_comm));
    DEMO_CHECK_ACL(aclrtCreateStream(&d->stream));
    DEMO_CHECK_ACL(aclrtCreateStream(&d->comm_stream));
    DEMO_CHECK_ACL(aclrtCreateStream(&d->compute_stream));
}

/* Tokens of the first last-stage rank to every rank. */
static void share_tokens(demo_t *d, demo_output_t *out)
{
    uint64_t n = (uint64_t)d->cfg.batch * d->cfg.gen;
    int32_t *buf = demo_device_alloc(n * sizeof(int32_t));

    memcpy(buf, out->tokens, n * sizeof(int32_t));
    DEMO_CHECK_HCCL(HcclBroadcast(buf, n, HCCL_DATA_TYPE_INT32, (d->cfg.pp - 1) * d->cfg.tp, d->world, d->stream));
    DEMO_CHECK_ACL(aclrtSynchronizeStream(d->stream));
    memcpy(out->tokens, buf, n * sizeof(int32_t));
    demo_device_free(buf);
}

/* What the checks found, summed (counts) or maximised (differences) over the ranks. */
typedef struct {
    double mode_mismatch, ref_mismatch, ref_max_diff, unsharded_max_diff, unsharded_scale;
    double argmax_same, argmax_total, checked;
} verdict_t;

static void compare(const demo_cfg_t *cfg, const float *got, const float *want, uint32_t stride, uint32_t offset,
                    int exact, verdict_t *v)
{
    for (uint32_t gi = offset; gi < cfg->groups_total; gi += stride)
        for (uint64_t s = (uint64_t)gi * cfg->seq_per_group; s < (uint64_t)(gi + 1) * cfg->seq_per_group; s++)
            for (uint64_t t = 0; t < cfg->gen; t++) {
                const float *a = got + (s * cfg->gen + t) * cfg->vocab, *b = want + (s * cfg->gen + t) * cfg->vocab;
                uint32_t best_a = 0, best_b = 0;
                for (uint32_t i = 0; i < cfg->vocab; i++) {
                    double diff = fabs((double)a[i] - (double)b[i]);
                    if (exact) {
                        v->ref_mismatch += memcmp(&a[i], &b[i], sizeof(float)) != 0;
                        v->ref_max_diff = diff > v->ref_max_diff ? diff : v->ref_max_diff;
                        v->checked += 1;
                    } else {
                        v->unsharded_max_diff = diff > v->unsharded_max_diff ? diff : v->unsharded_max_diff;
                        v->unsharded_scale = fabs((double)b[i]) > v->unsharded_scale ? fabs((double)b[i])
                                                                                   : v->unsharded_scale;
                    }
                    best_a = a[i] > a[best_a] ? i : best_a;
                    best_b = b[i] > b[best_b] ? i : best_b;
                }
                if (!exact) {
                    v->argmax_same += best_a == best_b;
                    v->argmax_total += 1;
                }
            }
}

/* The last stage's TP ranks share the reference work: group gi goes to tp_index gi mod tp. */
static void verify(demo_t *d, demo_output_t *out, int first_mode, verdict_t *v)
{
    const demo_cfg_t *cfg = &d->cfg;
    uint64_t n = (uint64_t)cfg->batch * cfg->gen * cfg->vocab;
    uint32_t tp_index = d->shard.tp_index;
    float *ref;

    memset(v, 0, sizeof(*v));
    if (d->shard.stage + 1 != cfg->pp)
        return;
    for (int m = 0; m < MODE_COUNT; m++)
        if ((cfg->modes & (1u << m)) && m != first_mode)
            for (uint64_t i = 0; i < n; i++)
                v->mode_mismatch += memcmp(&out[m].logits[i], &out[first_mode].logits[i], sizeof(float)) != 0;
    ref = demo_alloc(n * sizeof(float));
    demo_reference(cfg, cfg->tp, cfg->pp, out[first_mode].tokens, cfg->tp, tp_index, ref);
    compare(cfg, out[first_mode].logits, ref, cfg->tp, tp_index, 1, v);
    if (cfg->unsharded_check) {
        demo_reference(cfg, 1, 1, out[first_mode].tokens, cfg->tp, tp_index, ref);
        compare(cfg, out[first_mode].logits, ref, cfg->tp, tp_index, 0, v);
    }
    free(ref);
}

static void reduce_verdict(demo_t *d, verdict_t *v)
{
    double *buf = demo_device_alloc(2 * sizeof(verdict_t));
    double sums[8] = {v->mode_mismatch, v->ref_mismatch, v->argmax_same, v->argmax_total, v->checked};
    double maxes[8] = {v->ref_max_diff, v->unsharded_max_diff, v->unsharded_scale};

    memcpy(buf, sums, sizeof(sums));
    memcpy(buf + 8, maxes, sizeof(maxes));
    DEMO_CHECK_HCCL(HcclAllReduce(buf, buf, 8, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_SUM, d->world, d->stream));
    DEMO_CHECK_HCCL(HcclAllReduce(buf + 8, buf + 8, 8, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_MAX, d->world, d->stream));
    DEMO_CHECK_ACL(aclrtSynchronizeStream(d->stream));
    *v = (verdict_t){.mode_mismatch = buf[0], .ref_mismatch = buf[1], .argmax_same = buf[2], .argmax_total = buf[3],
                     .checked = buf[4], .ref_max_diff = buf[8], .unsharded_max_diff = buf[9],
                     .unsharded_scale = buf[10]};
    demo_device_free(buf);
}

/* Every rank's stats of every mode on every rank (rank 0 prints them). */
static double *gather_stats(demo_t *d, const demo_stats_t *st)
{
    uint64_t per = MODE_COUNT * sizeof(demo_stats_t) / sizeof(double);
    double *mine = demo_device_alloc(per * sizeof(double)), *all = demo_device_alloc(per * d->size * sizeof(double));
    double *copy = demo_alloc(per * d->size * sizeof(double));

    memcpy(mine, st, per * sizeof(double));
    DEMO_CHECK_HCCL(HcclAllGather(mine, all, per, HCCL_DATA_TYPE_FP64, d->world, d->stream));
    DEMO_CHECK_ACL(aclrtSynchronizeStream(d->stream));
    memcpy(copy, all, per * d->size * sizeof(double));
    demo_device_free(mine);
    demo_device_free(all);
    return copy;
}

static const char *mode_title(int m)
{
    return m == MODE_SERIAL ? "serial  (seed: sync after each)"
           : m == MODE_HOST ? "host    (seed: compute, then sync)"
                            : "streams (callbacks + events)";
}

static void report(const demo_t *d, const double *all, const verdict_t *v, int deterministic, double setup_s)
{
    const demo_cfg_t *cfg = &d->cfg;
    double decode_rate[MODE_COUNT] = {0}, prefill_rate[MODE_COUNT] = {0};
    uint64_t params = (uint64_t)cfg->layers * (4ull * cfg->hidden * cfg->heads * cfg->head_dim +
                      (cfg->experts > 0 ? (uint64_t)cfg->experts * 3 * cfg->hidden * cfg->expert_ffn +
                                          (uint64_t)cfg->hidden * cfg->experts
                                        : 3ull * cfg->hidden * cfg->ffn)) + 2ull * cfg->vocab * cfg->hidden;

    printf("hostccl demo: decoder-only transformer, %u layers, hidden %u (%u heads of %u), %s, vocab %u: "
           "%.1f M parameters (fp32)\n", cfg->layers, cfg->hidden, cfg->heads, cfg->head_dim,
           cfg->experts > 0 ? "MoE" : "dense SwiGLU", cfg->vocab, (double)params / 1e6);
    if (cfg->experts > 0)
        printf("  MoE: %u experts of width %u, top-2, %s dispatch over each stage's TP group (sequence parallel)\n",
               cfg->experts, cfg->expert_ffn, cfg->dispatch == DISPATCH_ALLGATHER ? "AllGather/ReduceScatter"
                                                                                   : "AlltoAllV");
    else
        printf("  MLP width %u; TP: two AllReduces per layer\n", cfg->ffn);
    printf("  %u ranks = tp %u x pp %u; %u sequences in %u micro-batches of %u groups; prompt %u, %u tokens "
           "generated each; setup %.2f s\n\n", d->size, cfg->tp, cfg->pp, cfg->batch, cfg->micro, cfg->groups,
           cfg->prompt, cfg->gen, setup_s);
    printf("  %-36s %13s %12s %8s %8s %8s %8s\n", "mode", "prefill tok/s", "decode tok/s", "compute", "TP comm",
           "PP wait", "overlap");
    for (int m = 0; m < MODE_COUNT; m++) {
        double pre = 0, dec = 0, wall = 0, comp = 0, tpc = 0, ppc = 0;
        if (!(cfg->modes & (1u << m)))
            continue;
        for (uint32_t r = 0; r < d->size; r++) {
            const demo_stats_t *s = (const demo_stats_t *)(const void *)(all + (r * MODE_COUNT + (uint32_t)m) *
                                                                             (sizeof(demo_stats_t) / sizeof(double)));
            pre = s->wall_prefill > pre ? s->wall_prefill : pre;
            dec = s->wall_decode > dec ? s->wall_decode : dec;
            wall += s->wall_prefill + s->wall_decode;
            comp += s->compute;
            tpc += s->tp_comm;
            ppc += s->pp_comm;
        }
        prefill_rate[m] = (double)cfg->batch * cfg->prompt / pre;
        decode_rate[m] = cfg->gen > 1 ? (double)cfg->batch * (cfg->gen - 1) / dec : 0.0;
        /* Shares of the ranks' summed wall time; "overlap" is time counted twice: computing while a
         * collective was in flight. */
        printf("  %-36s %13.0f %12.1f %7.0f%% %7.0f%% %7.0f%% %7.0f%%\n", mode_title(m), prefill_rate[m],
               decode_rate[m], 100 * comp / wall, 100 * tpc / wall, 100 * ppc / wall,
               100 * fmax(0.0, comp + tpc + ppc - wall) / wall);
    }
    if ((cfg->modes & 1u) && (cfg->modes & ~1u)) {
        printf("\n  overlap gain over serial:");
        for (int m = 1; m < MODE_COUNT; m++)
            if (cfg->modes & (1u << m))
                printf("  %s prefill %.2fx decode %.2fx", demo_mode_name((demo_mode_t)m),
                       prefill_rate[m] / prefill_rate[0], decode_rate[m] / decode_rate[0]);
        printf("\n");
    }
    printf("\n  logits (%.0f values, %u sequences x %u steps x %u): ", v->checked, cfg->batch, cfg->gen, cfg->vocab);
    if (v->ref_mismatch == 0)
        printf("bit-equal to the single-rank reference%s", deterministic ? " (HCCL_DETERMINISTIC=true)" : "");
    else
        printf("%.0f differ from the single-rank reference, max |diff| %.3g%s", v->ref_mismatch, v->ref_max_diff,
               deterministic ? " despite HCCL_DETERMINISTIC=true: WRONG" : " (HCCL_DETERMINISTIC is off)");
    printf("; the %s modes %s\n", "execution", v->mode_mismatch == 0 ? "agree bit for bit" : "DISAGREE");
    if (cfg->unsharded_check)
        printf("  against the unsharded model (tp 1, pp 1): max |diff| %.2g (largest logit %.2g), same greedy "
               "token %.0f of %.0f\n", v->unsharded_max_diff, v->unsharded_scale, v->argmax_same, v->argmax_total);
}

static void print_tokens(const demo_cfg_t *cfg, const int32_t *tokens)
{
    for (uint32_t s = 0; s < cfg->batch && s < 2; s++) {
        printf("  sequence %u:", s);
        for (uint32_t t = 0; t < cfg->gen && t < 12; t++)
            printf(" %d", tokens[(uint64_t)s * cfg->gen + t]);
        printf("%s\n", cfg->gen > 12 ? " ..." : "");
    }
}

/*
 * A short untimed generation first: it faults in the KV caches and OpenBLAS's buffers and wakes
 * the stream workers, which would otherwise all be charged to whichever mode runs first.
 */
static void warm_up(demo_t *d)
{
    uint32_t gen = d->cfg.gen;
    demo_output_t out = {0};
    demo_stats_t st = {0};

    d->cfg.gen = gen < 2 ? gen : 2;
    out.tokens = demo_alloc((uint64_t)d->cfg.batch * d->cfg.gen * sizeof(int32_t));
    if (d->shard.stage + 1 == d->cfg.pp)
        out.logits = demo_alloc((uint64_t)d->cfg.batch * d->cfg.gen * d->cfg.vocab * sizeof(float));
    for (int m = 0; m < MODE_COUNT; m++)
        if (d->cfg.modes & (1u << m))
            demo_generate(d, (demo_mode_t)m, &out, &st);
    free(out.tokens);
    free(out.logits);
    d->cfg.gen = gen;
}

int main(int argc, char **argv)
{
    demo_t d = {0};
    HcclHostLaunchInfo launch;
    HcclConfigValue det;
    demo_output_t out[MODE_COUNT] = {{0}};
    demo_stats_t st[MODE_COUNT] = {{0}};
    const char *err;
    verdict_t v;
    double t0, *all;
    int first = -1, failed;

    openblas_set_num_threads(1); /* one core's worth per rank; and the same bits for the same shapes */
    /* The first stages wait in the verdict's AllReduce while the last stage computes the
     * single-rank reference (tens of seconds on a loaded 2-core machine): an expected wait, so
     * hostccl's still-waiting warning (10 s by default) is moved out of its way unless set. */
    setenv("HOSTCCL_STILL_WAITING_S", "300", 0);
    DEMO_CHECK_ACL(aclInit(NULL));
    DEMO_CHECK_HCCL(HcclHostGetLaunchInfo(&launch));
    DEMO_CHECK_ACL(aclrtSetDevice((int32_t)launch.localRank));
    d.rank = launch.rank;
    d.size = launch.size;
    err = parse(argc, argv, d.size, &d.cfg);
    if (err != NULL) {
        /* Every rank says it: the launcher may stop rank 0 as soon as another rank has exited. */
        if (*err != '\0')
            fprintf(stderr, "demo: rank %u: %s (--help for the options)\n", d.rank, err);
        else if (d.rank == 0)
            usage(stdout);
        return *err != '\0' ? 2 : 0;
    }
    t0 = demo_now();
    setup(&d);
    demo_shard_init(&d.cfg, d.rank / d.cfg.tp, d.rank % d.cfg.tp, d.cfg.tp, d.cfg.pp, &d.shard);
    demo_program_build(&d.cfg, &d.shard, d.cfg.pp, &d.program);
    demo_exec_init(&d);
    DEMO_CHECK_HCCL(HcclGetConfig(HCCL_DETERMINISTIC, &det));
    t0 = demo_now() - t0;

    warm_up(&d);
    for (int m = 0; m < MODE_COUNT; m++) {
        if (!(d.cfg.modes & (1u << m)))
            continue;
        first = first < 0 ? m : first;
        out[m].tokens = demo_alloc((uint64_t)d.cfg.batch * d.cfg.gen * sizeof(int32_t));
        if (d.shard.stage + 1 == d.cfg.pp)
            out[m].logits = demo_alloc((uint64_t)d.cfg.batch * d.cfg.gen * d.cfg.vocab * sizeof(float));
        demo_generate(&d, (demo_mode_t)m, &out[m], &st[m]);
        share_tokens(&d, &out[m]);
    }
    verify(&d, out, first, &v);
    reduce_verdict(&d, &v);
    all = gather_stats(&d, st);
    failed = v.mode_mismatch > 0 || (det.value != 0 && v.ref_mismatch > 0) ||
             v.ref_max_diff > 1e-3 * (v.unsharded_scale > 1 ? v.unsharded_scale : 1) ||
             (d.cfg.unsharded_check && v.unsharded_max_diff > 1e-3 * (v.unsharded_scale > 1 ? v.unsharded_scale : 1));
    if (d.rank == 0) {
        report(&d, all, &v, det.value != 0, t0);
        print_tokens(&d.cfg, out[first].tokens);
        printf("demo: %s\n", failed ? "WRONG" : "verified");
    }

    free(all);
    for (int m = 0; m < MODE_COUNT; m++) {
        free(out[m].tokens);
        free(out[m].logits);
    }
    demo_exec_fini(&d);
    demo_program_free(&d.program);
    demo_shard_free(&d.cfg, &d.shard);
    DEMO_CHECK_HCCL(HcclCommDestroy(d.tp_comm));
    DEMO_CHECK_HCCL(HcclCommDestroy(d.pp_comm));
    DEMO_CHECK_HCCL(HcclCommDestroy(d.world));
    DEMO_CHECK_ACL(aclrtDestroyStream(d.stream));
    DEMO_CHECK_ACL(aclrtDestroyStream(d.comm_stream));
    DEMO_CHECK_ACL(aclrtDestroyStream(d.compute_stream));
    DEMO_CHECK_ACL(aclFinalize());
    return failed ? 1 : 0;
}
