/*
 * The model's arithmetic, one shard at a time: seeded weights (any shard regenerates exactly its
 * slice, so every split of the model is the same model), RMSNorm, rotary attention with a KV
 * cache, a SwiGLU MLP, top-2 experts, and the vocabulary head. Matrix products go to BLAS, one
 * thread per rank (set in demo.c): with a fixed thread count OpenBLAS returns the same bits for
 * the same shapes, which the bit-equality check relies on.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "demo.h"

#define NORM_EPS 1e-5f

/* Tensor identities for the seeded weights: layer l owns 1000 * (l + 1) + k. */
enum { T_EMBED = 1, T_HEAD = 2, T_Q = 0, T_K = 1, T_V = 2, T_O = 3, T_GATE = 4, T_UP = 5, T_DOWN = 6, T_ROUTER = 7,
       T_EXPERT = 100 };

double demo_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *demo_alloc(size_t bytes)
{
    void *p = calloc(1, bytes > 0 ? bytes : 1);

    if (p == NULL) {
        fprintf(stderr, "demo: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* Device memory (the shared arena): buffers that collectives read or write in place. */
void *demo_device_alloc(size_t bytes)
{
    void *p = NULL;

    DEMO_CHECK_ACL(aclrtMalloc(&p, bytes > 0 ? bytes : 1, ACL_MEM_MALLOC_HUGE_FIRST));
    memset(p, 0, bytes > 0 ? bytes : 1);
    return p;
}

void demo_device_free(void *p)
{
    if (p != NULL)
        DEMO_CHECK_ACL(aclrtFree(p));
}

/* Uniform in [-scale, scale), a function of (tensor, index) only. */
static float weight(uint64_t tensor, uint64_t index, float scale)
{
    uint64_t z = tensor * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return scale * ((float)(z >> 40) / (float)(1ull << 23) - 1.0f);
}

/* Columns [col0, col0 + cols) of tensor (rows x full_cols) into dst with row stride ld, from dst_col. */
static void fill_cols(float *dst, uint64_t ld, uint64_t dst_col, uint64_t tensor, uint64_t rows, uint64_t full_cols,
                      uint64_t col0, uint64_t cols, float scale)
{
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++)
            dst[r * ld + dst_col + c] = weight(tensor, r * full_cols + col0 + c, scale);
}

/* Rows [row0, row0 + rows) of tensor (.. x cols). */
static void fill_rows(float *dst, uint64_t tensor, uint64_t row0, uint64_t rows, uint64_t cols, float scale)
{
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++)
            dst[r * cols + c] = weight(tensor, (row0 + r) * cols + c, scale);
}

int32_t demo_prompt_token(uint32_t seq, uint32_t pos, uint32_t vocab)
{
    float v = weight(3, (uint64_t)seq * 65536 + pos, 0.5f) + 0.5f; /* [0, 1) */
    uint32_t t = (uint32_t)(v * (float)vocab);

    return (int32_t)(t < vocab ? t : vocab - 1);
}

static void layer_init(const demo_cfg_t *cfg, const demo_shard_t *sh, uint32_t l, demo_layer_t *ly)
{
    uint64_t base = 1000 * ((uint64_t)l + 1), h = cfg->hidden, hd = cfg->head_dim, qkv = (uint64_t)cfg->heads * hd;
    uint64_t lq = (uint64_t)sh->local_heads * hd, q0 = (uint64_t)sh->tp_index * lq;
    float s_in = 1.0f / sqrtf((float)h);

    ly->wqkv = demo_alloc(h * 3 * lq * sizeof(float));
    fill_cols(ly->wqkv, 3 * lq, 0, base + T_Q, h, qkv, q0, lq, s_in);
    fill_cols(ly->wqkv, 3 * lq, lq, base + T_K, h, qkv, q0, lq, s_in);
    fill_cols(ly->wqkv, 3 * lq, 2 * lq, base + T_V, h, qkv, q0, lq, s_in);
    ly->wo = demo_alloc(lq * h * sizeof(float));
    fill_rows(ly->wo, base + T_O, q0, lq, h, 1.0f / sqrtf((float)qkv));
    ly->kcache = demo_alloc((uint64_t)cfg->batch * cfg->max_len * lq * sizeof(float));
    ly->vcache = demo_alloc((uint64_t)cfg->batch * cfg->max_len * lq * sizeof(float));
    if (cfg->experts == 0) {
        uint64_t lf = sh->local_ffn, f0 = (uint64_t)sh->tp_index * lf;
        ly->wgu = demo_alloc(h * 2 * lf * sizeof(float));
        fill_cols(ly->wgu, 2 * lf, 0, base + T_GATE, h, cfg->ffn, f0, lf, s_in);
        fill_cols(ly->wgu, 2 * lf, lf, base + T_UP, h, cfg->ffn, f0, lf, s_in);
        ly->wd = demo_alloc(lf * h * sizeof(float));
        fill_rows(ly->wd, base + T_DOWN, f0, lf, h, 1.0f / sqrtf((float)cfg->ffn));
        return;
    }
    ly->router = demo_alloc(h * cfg->experts * sizeof(float));
    fill_rows(ly->router, base + T_ROUTER, 0, h, cfg->experts, s_in);
    ly->ewgu = demo_alloc(sh->local_experts * sizeof(float *));
    ly->ewd = demo_alloc(sh->local_experts * sizeof(float *));
    for (uint32_t le = 0; le < sh->local_experts; le++) {
        uint64_t e = (uint64_t)sh->tp_index * sh->local_experts + le, ef = cfg->expert_ffn;
        ly->ewgu[le] = demo_alloc(h * 2 * ef * sizeof(float));
        fill_cols(ly->ewgu[le], 2 * ef, 0, base + T_EXPERT + 3 * e, h, ef, 0, ef, s_in);
        fill_cols(ly->ewgu[le], 2 * ef, ef, base + T_EXPERT + 3 * e + 1, h, ef, 0, ef, s_in);
        ly->ewd[le] = demo_alloc(ef * h * sizeof(float));
        fill_rows(ly->ewd[le], base + T_EXPERT + 3 * e + 2, 0, ef, h, 1.0f / sqrtf((float)ef));
    }
}

/* Layers [stage * layers / pp, (stage + 1) * layers / pp): as even a split as the count allows. */
void demo_shard_init(const demo_cfg_t *cfg, uint32_t stage, uint32_t tp_index, uint32_t tp, uint32_t pp,
                     demo_shard_t *sh)
{
    memset(sh, 0, sizeof(*sh));
    sh->stage = stage;
    sh->tp_index = tp_index;
    sh->tp = tp;
    sh->layer0 = stage * cfg->layers / pp;
    sh->nlayers = (stage + 1) * cfg->layers / pp - sh->layer0;
    sh->local_heads = cfg->heads / tp;
    sh->local_ffn = cfg->ffn / tp;
    sh->local_experts = cfg->experts / tp;
    sh->local_vocab = cfg->vocab / tp;
    sh->layer = demo_alloc(sh->nlayers * sizeof(demo_layer_t));
    for (uint32_t i = 0; i < sh->nlayers; i++)
        layer_init(cfg, sh, sh->layer0 + i, &sh->layer[i]);
    if (stage == 0) {
        sh->embed = demo_alloc((uint64_t)cfg->vocab * cfg->hidden * sizeof(float));
        fill_rows(sh->embed, T_EMBED, 0, cfg->vocab, cfg->hidden, 1.0f);
    }
    if (stage + 1 == pp) {
        sh->head = demo_alloc((uint64_t)cfg->hidden * sh->local_vocab * sizeof(float));
        fill_cols(sh->head, sh->local_vocab, 0, T_HEAD, cfg->hidden, cfg->vocab,
                  (uint64_t)tp_index * sh->local_vocab, sh->local_vocab, 1.0f / sqrtf((float)cfg->hidden));
    }
}

void demo_shard_free(const demo_cfg_t *cfg, demo_shard_t *sh)
{
    for (uint32_t i = 0; i < sh->nlayers; i++) {
        demo_layer_t *ly = &sh->layer[i];
        free(ly->wqkv);
        free(ly->wo);
        free(ly->wgu);
        free(ly->wd);
        free(ly->router);
        free(ly->kcache);
        free(ly->vcache);
        for (uint32_t le = 0; ly->ewgu != NULL && le < sh->local_experts; le++) {
            free(ly->ewgu[le]);
            free(ly->ewd[le]);
        }
        free(ly->ewgu);
        free(ly->ewd);
    }
    free(sh->layer);
    free(sh->embed);
    free(sh->head);
    (void)cfg;
}

/* Buffers for the largest item, the prefill of seq_per_group sequences. */
void demo_group_alloc(const demo_cfg_t *cfg, const demo_shard_t *sh, demo_group_t *g)
{
    uint64_t rows = (uint64_t)cfg->seq_per_group * cfg->prompt, h = cfg->hidden;
    uint64_t wide = 3 * (uint64_t)sh->local_heads * cfg->head_dim, act = (uint64_t)sh->local_heads * cfg->head_dim;

    memset(g, 0, sizeof(*g));
    if (2 * (uint64_t)sh->local_ffn > wide)
        wide = 2 * (uint64_t)sh->local_ffn;
    if (2 * (uint64_t)cfg->expert_ffn > wide)
        wide = 2 * (uint64_t)cfg->expert_ffn;
    if (cfg->experts > wide)
        wide = cfg->experts;
    if (sh->local_ffn > act)
        act = sh->local_ffn;
    if (cfg->expert_ffn > act)
        act = cfg->expert_ffn;
    g->x = demo_device_alloc(rows * h * sizeof(float));
    g->hn = demo_device_alloc(rows * h * sizeof(float));
    g->hn_loc = demo_device_alloc(rows * h * sizeof(float));
    g->part = demo_device_alloc(rows * h * sizeof(float));
    g->red = demo_device_alloc(rows * h * sizeof(float));
    g->scratch = demo_alloc(rows * wide * sizeof(float));
    g->attn = demo_alloc(rows * act * sizeof(float));
    g->head_part = demo_device_alloc((uint64_t)cfg->seq_per_group * sh->local_vocab * sizeof(float));
    g->head_all = demo_device_alloc((uint64_t)cfg->seq_per_group * cfg->vocab * sizeof(float));
    g->logits = demo_alloc((uint64_t)cfg->seq_per_group * cfg->vocab * sizeof(float));
    g->next = demo_alloc(cfg->seq_per_group * sizeof(int32_t));
    g->gate = demo_alloc(rows * DEMO_TOP_K * sizeof(float));
    g->choice = demo_alloc(rows * DEMO_TOP_K * sizeof(int32_t));
    if (cfg->experts > 0 && cfg->dispatch == DISPATCH_ALLTOALL) {
        g->disp_rows_cap = rows * DEMO_TOP_K;
        g->rows_to = demo_device_alloc(DEMO_MAX_TP * sizeof(uint64_t));
        g->rows_from = demo_device_alloc(DEMO_MAX_TP * sizeof(uint64_t));
        g->disp_send = demo_device_alloc(g->disp_rows_cap * h * sizeof(float));
        g->disp_back = demo_device_alloc(g->disp_rows_cap * h * sizeof(float));
        g->disp_recv = demo_device_alloc(g->disp_rows_cap * h * sizeof(float));
        g->disp_out = demo_device_alloc(g->disp_rows_cap * h * sizeof(float));
        g->eid_send = demo_device_alloc(g->disp_rows_cap * sizeof(int32_t));
        g->eid_recv = demo_device_alloc(g->disp_rows_cap * sizeof(int32_t));
        g->slot_of = demo_alloc(g->disp_rows_cap * sizeof(uint32_t));
    }
}

void demo_group_free(demo_group_t *g)
{
    demo_device_free(g->x);
    demo_device_free(g->hn);
    demo_device_free(g->hn_loc);
    demo_device_free(g->part);
    demo_device_free(g->red);
    free(g->scratch);
    free(g->attn);
    demo_device_free(g->head_part);
    demo_device_free(g->head_all);
    free(g->logits);
    free(g->next);
    free(g->gate);
    free(g->choice);
    demo_device_free(g->rows_to);
    demo_device_free(g->rows_from);
    demo_device_free(g->disp_send);
    demo_device_free(g->disp_back);
    demo_device_free(g->disp_recv);
    demo_device_free(g->disp_out);
    demo_device_free(g->eid_send);
    demo_device_free(g->eid_recv);
    free(g->slot_of);
    memset(g, 0, sizeof(*g));
}

/* Point the group at sequences [seq0, seq0 + seq_per_group) for generation step `step` (0: prefill). */
void demo_group_set(const demo_cfg_t *cfg, const demo_shard_t *sh, demo_group_t *g, uint32_t seq0, uint32_t step)
{
    g->seq0 = seq0;
    g->nseq = cfg->seq_per_group;
    g->pos0 = step == 0 ? 0 : cfg->prompt + step - 1;
    g->ntok = step == 0 ? cfg->prompt : 1;
    g->rows = g->nseq * g->ntok;
    g->rows_loc = cfg->experts > 0 ? g->rows / sh->tp : g->rows;
}

/* C[m x n] = A[m x k] B[k x n], row-major. */
static void matmul(float *c, const float *a, const float *b, uint64_t m, uint64_t k, uint64_t n)
{
    if (m == 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k, b, (int)n, 0.0f,
                c, (int)n);
}

static void rmsnorm(float *out, const float *x, uint64_t rows, uint64_t h)
{
    for (uint64_t r = 0; r < rows; r++) {
        const float *xr = x + r * h;
        float ss = 0.0f, scale;
        for (uint64_t j = 0; j < h; j++)
            ss += xr[j] * xr[j];
        scale = 1.0f / sqrtf(ss / (float)h + NORM_EPS);
        for (uint64_t j = 0; j < h; j++)
            out[r * h + j] = xr[j] * scale;
    }
}

static void add(float *x, const float *y, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        x[i] += y[i];
}

static float silu(float v)
{
    return v / (1.0f + expf(-v));
}

/* Rotary position embedding of one head vector at position pos. */
static void rope(float *v, uint32_t hd, uint32_t pos)
{
    for (uint32_t j = 0; j + 1 < hd; j += 2) {
        float theta = (float)pos * powf(10000.0f, -(float)j / (float)hd);
        float c = cosf(theta), s = sinf(theta), a = v[j], b = v[j + 1];
        v[j] = a * c - b * s;
        v[j + 1] = a * s + b * c;
    }
}

/*
 * Attention of this shard's heads over hn (g->rows rows): Q, K, V of the new tokens, K and V into
 * the cache, causal softmax attention over positions 0..pos, then this shard's rows of the output
 * projection: g->part holds a partial sum that the TP group adds up.
 */
static void attention(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer, const float *hn)
{
    demo_layer_t *ly = &sh->layer[layer - sh->layer0];
    uint32_t hd = cfg->head_dim, nh = sh->local_heads, lq = nh * hd;
    float *qkv = g->scratch, *scores = demo_alloc((cfg->max_len + 1) * sizeof(float));
    float inv = 1.0f / sqrtf((float)hd);

    matmul(qkv, hn, ly->wqkv, g->rows, cfg->hidden, 3 * (uint64_t)lq);
    for (uint32_t s = 0; s < g->nseq; s++)
        for (uint32_t i = 0; i < g->ntok; i++) {
            uint64_t row = (uint64_t)s * g->ntok + i, pos = g->pos0 + i;
            uint64_t at = ((uint64_t)(g->seq0 + s) * cfg->max_len + pos) * lq;
            float *q = qkv + row * 3 * lq;
            for (uint32_t h = 0; h < nh; h++) {
                rope(q + h * hd, hd, (uint32_t)pos);
                rope(q + lq + h * hd, hd, (uint32_t)pos);
            }
            memcpy(ly->kcache + at, q + lq, lq * sizeof(float));
            memcpy(ly->vcache + at, q + 2 * lq, lq * sizeof(float));
        }
    for (uint32_t s = 0; s < g->nseq; s++)
        for (uint32_t i = 0; i < g->ntok; i++) {
            uint64_t row = (uint64_t)s * g->ntok + i, pos = g->pos0 + i;
            const float *kc = ly->kcache + (uint64_t)(g->seq0 + s) * cfg->max_len * lq;
            const float *vc = ly->vcache + (uint64_t)(g->seq0 + s) * cfg->max_len * lq;
            for (uint32_t h = 0; h < nh; h++) {
                const float *q = qkv + row * 3 * lq + h * hd;
                float *out = g->attn + row * lq + h * hd, mx = -INFINITY, sum = 0.0f;
                for (uint64_t t = 0; t <= pos; t++) {
                    float dot = 0.0f;
                    for (uint32_t j = 0; j < hd; j++)
                        dot += q[j] * kc[t * lq + h * hd + j];
                    scores[t] = dot * inv;
                    mx = scores[t] > mx ? scores[t] : mx;
                }
                for (uint64_t t = 0; t <= pos; t++) {
                    scores[t] = expf(scores[t] - mx);
                    sum += scores[t];
                }
                memset(out, 0, hd * sizeof(float));
                for (uint64_t t = 0; t <= pos; t++)
                    for (uint32_t j = 0; j < hd; j++)
                        out[j] += scores[t] / sum * vc[t * lq + h * hd + j];
            }
        }
    matmul(g->part, g->attn, ly->wo, g->rows, lq, cfg->hidden);
    free(scores);
}

/* SwiGLU over `rows` rows of hn with the given gate|up and down weights, into out. */
static void swiglu(demo_group_t *g, const float *hn, uint64_t rows, uint64_t hidden, uint64_t f, const float *wgu,
                   const float *wd, float *out)
{
    matmul(g->scratch, hn, wgu, rows, hidden, 2 * f);
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t j = 0; j < f; j++)
            g->attn[r * f + j] = silu(g->scratch[r * 2 * f + j]) * g->scratch[r * 2 * f + f + j];
    matmul(out, g->attn, wd, rows, f, hidden);
}

/* ---- the steps of a stage's program ----------------------------------------------------------- */

void demo_step_embed(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    uint64_t first = cfg->experts > 0 ? (uint64_t)sh->tp_index * g->rows_loc : 0;

    for (uint64_t r = 0; r < g->rows_loc; r++)
        memcpy(g->x + r * cfg->hidden, sh->embed + (uint64_t)g->tokens[first + r] * cfg->hidden,
               cfg->hidden * sizeof(float));
    (void)layer;
}

/* Dense (the residual stream replicated over the TP group). */
void demo_step_dense_attn(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    if (layer != sh->layer0)
        add(g->x, g->part, (uint64_t)g->rows * cfg->hidden); /* the previous MLP's summed output */
    rmsnorm(g->hn, g->x, g->rows, cfg->hidden);
    attention(cfg, sh, g, layer, g->hn);
}

void demo_step_dense_mlp(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    demo_layer_t *ly = &sh->layer[layer - sh->layer0];

    add(g->x, g->part, (uint64_t)g->rows * cfg->hidden);
    rmsnorm(g->hn, g->x, g->rows, cfg->hidden);
    swiglu(g, g->hn, g->rows, cfg->hidden, sh->local_ffn, ly->wgu, ly->wd, g->part);
}

void demo_step_dense_finish(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    add(g->x, g->part, (uint64_t)g->rows * cfg->hidden);
    (void)sh;
    (void)layer;
}

/* Sequence parallel (moe): each TP rank owns rows_loc rows of the residual stream. */
void demo_step_sp_norm(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    if (layer != sh->layer0)
        add(g->x, g->red, (uint64_t)g->rows_loc * cfg->hidden);
    rmsnorm(g->hn_loc, g->x, g->rows_loc, cfg->hidden);
}

void demo_step_sp_attn(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    attention(cfg, sh, g, layer, g->hn);
}

void demo_step_sp_moe_norm(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    add(g->x, g->red, (uint64_t)g->rows_loc * cfg->hidden);
    rmsnorm(g->hn_loc, g->x, g->rows_loc, cfg->hidden);
    (void)sh;
    (void)layer;
}

void demo_step_sp_finish(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    add(g->x, g->red, (uint64_t)g->rows_loc * cfg->hidden);
    (void)sh;
    (void)layer;
}

/* Top-2 experts of `rows` rows and their gates (softmax over the two logits). */
static void route(const demo_cfg_t *cfg, const demo_layer_t *ly, demo_group_t *g, const float *hn, uint64_t rows)
{
    uint32_t ne = cfg->experts;

    matmul(g->scratch, hn, ly->router, rows, cfg->hidden, ne);
    for (uint64_t r = 0; r < rows; r++) {
        const float *lg = g->scratch + r * ne;
        int32_t *ch = g->choice + r * DEMO_TOP_K;
        float z;
        ch[0] = 0;
        for (uint32_t e = 1; e < ne; e++)
            if (lg[e] > lg[ch[0]])
                ch[0] = (int32_t)e;
        ch[1] = ch[0] == 0 ? 1 : 0;
        for (uint32_t e = 0; e < ne; e++)
            if ((int32_t)e != ch[0] && lg[e] > lg[ch[1]])
                ch[1] = (int32_t)e;
        z = expf(lg[ch[1]] - lg[ch[0]]);
        g->gate[r * DEMO_TOP_K] = 1.0f / (1.0f + z);
        g->gate[r * DEMO_TOP_K + 1] = z / (1.0f + z);
    }
}

/* Run local expert le over the rows listed in idx (rows of src), gate-scaled sums into dst rows. */
static void expert_rows(const demo_cfg_t *cfg, const demo_layer_t *ly, demo_group_t *g, uint32_t le,
                        const float *src, const uint32_t *idx, const float *gates, uint64_t n, float *dst,
                        int accumulate, float *in, float *out)
{
    uint64_t h = cfg->hidden;

    for (uint64_t i = 0; i < n; i++)
        memcpy(in + i * h, src + (uint64_t)idx[i] * h, h * sizeof(float));
    swiglu(g, in, n, h, cfg->expert_ffn, ly->ewgu[le], ly->ewd[le], out);
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < h; j++) {
            float v = gates != NULL ? gates[i] * out[i * h + j] : out[i * h + j];
            if (accumulate)
                dst[(uint64_t)idx[i] * h + j] += v;
            else
                dst[(uint64_t)idx[i] * h + j] = v;
        }
}

/* AllGather dispatcher: every row of the group (gathered into hn) routed here; this shard's experts
 * run on the rows routed to them and add gate * output into part, zero elsewhere. */
void demo_step_moe_experts_all(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    const demo_layer_t *ly = &sh->layer[layer - sh->layer0];
    uint64_t h = cfg->hidden;
    uint32_t *idx = demo_alloc(g->rows * sizeof(uint32_t));
    float *gates = demo_alloc(g->rows * sizeof(float)), *in = demo_alloc(g->rows * h * sizeof(float));
    float *out = demo_alloc(g->rows * h * sizeof(float));

    route(cfg, ly, g, g->hn, g->rows);
    memset(g->part, 0, g->rows * h * sizeof(float));
    for (uint32_t le = 0; le < sh->local_experts; le++) {
        int32_t e = (int32_t)(sh->tp_index * sh->local_experts + le);
        uint64_t n = 0;
        for (uint32_t r = 0; r < g->rows; r++)
            for (int k = 0; k < DEMO_TOP_K; k++)
                if (g->choice[r * DEMO_TOP_K + (uint32_t)k] == e) {
                    idx[n] = r;
                    gates[n++] = g->gate[r * DEMO_TOP_K + (uint32_t)k];
                }
        if (n > 0)
            expert_rows(cfg, ly, g, le, g->hn, idx, gates, n, g->part, 1, in, out);
    }
    free(idx);
    free(gates);
    free(in);
    free(out);
}

/* AlltoAll dispatcher, 1: route this shard's rows; lay them out by destination rank. */
void demo_step_moe_route_own(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    const demo_layer_t *ly = &sh->layer[layer - sh->layer0];
    uint64_t fill[DEMO_MAX_TP], at = 0, h = cfg->hidden;

    route(cfg, ly, g, g->hn_loc, g->rows_loc);
    memset(g->rows_to, 0, sh->tp * sizeof(uint64_t));
    for (uint64_t i = 0; i < (uint64_t)g->rows_loc * DEMO_TOP_K; i++)
        g->rows_to[(uint32_t)g->choice[i] / sh->local_experts]++;
    for (uint32_t r = 0; r < sh->tp; r++) {
        fill[r] = at;
        at += g->rows_to[r];
    }
    for (uint64_t i = 0; i < (uint64_t)g->rows_loc * DEMO_TOP_K; i++) {
        uint64_t slot = fill[(uint32_t)g->choice[i] / sh->local_experts]++;
        memcpy(g->disp_send + slot * h, g->hn_loc + (i / DEMO_TOP_K) * h, h * sizeof(float));
        g->eid_send[slot] = g->choice[i];
        g->slot_of[i] = (uint32_t)slot;
    }
}

/* AlltoAll dispatcher, 2: the rows that arrived, grouped by local expert, in arrival order. */
void demo_step_moe_experts_recv(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    const demo_layer_t *ly = &sh->layer[layer - sh->layer0];
    uint64_t nrecv = 0, h = cfg->hidden;
    uint32_t *idx;
    float *in, *out;

    for (uint32_t r = 0; r < sh->tp; r++)
        nrecv += g->rows_from[r];
    idx = demo_alloc(nrecv * sizeof(uint32_t));
    in = demo_alloc(nrecv * h * sizeof(float));
    out = demo_alloc(nrecv * h * sizeof(float));
    for (uint32_t le = 0; le < sh->local_experts; le++) {
        int32_t e = (int32_t)(sh->tp_index * sh->local_experts + le);
        uint64_t n = 0;
        for (uint32_t r = 0; r < nrecv; r++)
            if (g->eid_recv[r] == e)
                idx[n++] = r;
        if (n > 0)
            expert_rows(cfg, ly, g, le, g->disp_recv, idx, NULL, n, g->disp_out, 0, in, out);
    }
    free(idx);
    free(in);
    free(out);
}

/* AlltoAll dispatcher, 3: the outputs are back in send order; gate-weighted sum per own row. */
void demo_step_moe_combine(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    uint64_t h = cfg->hidden;

    for (uint64_t r = 0; r < g->rows_loc; r++) {
        float *dst = g->red + r * h;
        memset(dst, 0, h * sizeof(float));
        for (uint32_t k = 0; k < DEMO_TOP_K; k++) {
            const float *src = g->disp_back + (uint64_t)g->slot_of[r * DEMO_TOP_K + k] * h;
            float gk = g->gate[r * DEMO_TOP_K + k];
            for (uint64_t j = 0; j < h; j++)
                dst[j] += gk * src[j];
        }
    }
    (void)sh;
    (void)layer;
}

/* Last stage: the last position of each sequence, normed (moe: this shard's sequences, into hn_loc). */
void demo_step_head_norm(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    uint32_t nseq = cfg->experts > 0 ? g->nseq / sh->tp : g->nseq;
    float *dst = cfg->experts > 0 ? g->hn_loc : g->hn;

    for (uint32_t s = 0; s < nseq; s++)
        rmsnorm(dst + (uint64_t)s * cfg->hidden, g->x + ((uint64_t)s * g->ntok + g->ntok - 1) * cfg->hidden, 1,
                cfg->hidden);
    (void)layer;
}

void demo_step_head(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    matmul(g->head_part, g->hn, sh->head, g->nseq, cfg->hidden, sh->local_vocab);
    (void)layer;
}

/* The gathered vocabulary slices side by side, and the greedy choice. */
void demo_step_sample(const demo_cfg_t *cfg, demo_shard_t *sh, demo_group_t *g, uint32_t layer)
{
    uint64_t lv = sh->local_vocab;

    for (uint32_t s = 0; s < g->nseq; s++) {
        float *lg = g->logits + (uint64_t)s * cfg->vocab;
        uint32_t best = 0;
        for (uint32_t r = 0; r < sh->tp; r++)
            memcpy(lg + r * lv, g->head_all + ((uint64_t)r * g->nseq + s) * lv, lv * sizeof(float));
        for (uint32_t v = 1; v < cfg->vocab; v++)
            if (lg[v] > lg[best])
                best = v;
        g->next[s] = (int32_t)best;
    }
    (void)layer;
}
