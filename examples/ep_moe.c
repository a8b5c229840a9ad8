/*
 * Expert parallelism: a mixture-of-experts layer whose experts are spread over the ranks, in the
 * two ways inference frameworks move tokens to experts.
 *
 * Each rank holds `tokens` tokens of its own and `experts_per_rank` experts (expert e lives on rank
 * e / experts_per_rank; each is a small MLP, relu(x W1_e) W2_e). A router (replicated: every rank has
 * the same weights) picks each token's top-2 experts and their gates, softmax over the two logits.
 * The layer's output for token t is sum_k gate_k * expert_{e_k}(x_t).
 *
 * 1. AllGather -> local experts -> ReduceScatter (the seed's pattern; Megatron's "allgather"
 *    dispatcher): every rank gathers every rank's tokens, runs its own experts on the tokens routed
 *    to them, writing gate * output into a buffer of all tokens (zero where none of its experts was
 *    chosen), and a ReduceScatter(SUM) hands each rank the sum for its own tokens. Simple, and every
 *    rank moves all tokens whatever the routing.
 *
 * 2. AlltoAllV dispatch and combine (DeepSpeed-MoE, Megatron's "alltoall" dispatcher): each rank
 *    sends each token only to the ranks owning its chosen experts. The per-peer row counts go first
 *    (an AlltoAll of one count per peer), then the rows with an AlltoAllV, and the expert index of
 *    each row with a second AlltoAllV; the experts run, and a reverse AlltoAllV (counts swapped)
 *    brings each output back to the rank that owns the token, which scales and sums them.
 *
 * Both are checked on every rank against the layer computed for its tokens with all experts on the
 * one rank, and against each other.
 *
 * Run: hccl-run -n 4 ./ep_moe [tokens hidden ffn experts_per_rank]
 */
#include "example_common.h"

#define TOP_K 2

typedef struct {
    uint32_t rank, size;
    uint64_t tokens, hidden, ffn, per_rank, experts;
    float **w1, **w2; /* this rank's experts (or all of them, for the reference) */
    float *router;    /* hidden x experts, the same on every rank */
} moe_t;

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes);

    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* Weights of expert e: tensors 2e+1 (W1, hidden x ffn) and 2e+2 (W2, ffn x hidden). */
static void expert_weights(const moe_t *m, uint64_t e, float **w1_p, float **w2_p)
{
    *w1_p = xmalloc(m->hidden * m->ffn * sizeof(float));
    *w2_p = xmalloc(m->ffn * m->hidden * sizeof(float));
    ex_fill(*w1_p, 2 * e + 1, m->ffn, 0, 0, m->hidden, m->ffn, 1.0f / sqrtf((float)m->hidden));
    ex_fill(*w2_p, 2 * e + 2, m->hidden, 0, 0, m->ffn, m->hidden, 1.0f / sqrtf((float)m->ffn));
}

/* out = relu(x W1) W2 for `rows` rows. */
static void expert_run(const moe_t *m, const float *w1, const float *w2, const float *x, uint64_t rows,
                       float *out)
{
    float *h = xmalloc(rows * m->ffn * sizeof(float));

    ex_matmul(h, x, w1, rows, m->hidden, m->ffn, 0);
    for (uint64_t i = 0; i < rows * m->ffn; i++)
        h[i] = h[i] > 0.0f ? h[i] : 0.0f;
    ex_matmul(out, h, w2, rows, m->ffn, m->hidden, 0);
    free(h);
}

/* Top-2 experts of one token and their gates (softmax over the two chosen logits). */
static void route(const moe_t *m, const float *x, uint32_t expert[TOP_K], float gate[TOP_K])
{
    float *logits = xmalloc(m->experts * sizeof(float)), z;

    ex_matmul(logits, x, m->router, 1, m->hidden, m->experts, 0);
    expert[0] = 0;
    for (uint32_t e = 1; e < m->experts; e++)
        if (logits[e] > logits[expert[0]])
            expert[0] = e;
    expert[1] = expert[0] == 0 ? 1 : 0;
    for (uint32_t e = 0; e < m->experts; e++)
        if (e != expert[0] && logits[e] > logits[expert[1]])
            expert[1] = e;
    z = expf(logits[expert[1]] - logits[expert[0]]);
    gate[0] = 1.0f / (1.0f + z);
    gate[1] = z / (1.0f + z);
    free(logits);
}

/* Variant 1: AllGather -> local experts -> ReduceScatter. */
static void moe_allgather(const moe_t *m, ex_world_t *w, const float *x_local, float *y_local)
{
    uint64_t n = m->tokens * m->hidden, all = m->size * m->tokens;
    float *x_all = ex_alloc(m->size * n * sizeof(float)), *y_all = ex_alloc(m->size * n * sizeof(float));
    float *send = ex_alloc(n * sizeof(float)), *recv = ex_alloc(n * sizeof(float));
    float *rows = xmalloc(all * m->hidden * sizeof(float)), *out = xmalloc(all * m->hidden * sizeof(float));
    float *gate_of = xmalloc(all * sizeof(float));
    uint64_t *token_of = xmalloc(all * sizeof(uint64_t));
    uint32_t (*chosen)[TOP_K] = xmalloc(all * sizeof(*chosen));
    float (*gate)[TOP_K] = xmalloc(all * sizeof(*gate));

    memcpy(send, x_local, n * sizeof(float));
    CHECK_HCCL(HcclAllGather(send, x_all, n, HCCL_DATA_TYPE_FP32, w->comm, w->stream));
    CHECK_ACL(aclrtSynchronizeStream(w->stream));
    memset(y_all, 0, m->size * n * sizeof(float));
    for (uint64_t t = 0; t < all; t++) /* every rank routes every token alike: the router is replicated */
        route(m, x_all + t * m->hidden, chosen[t], gate[t]);
    for (uint64_t le = 0; le < m->per_rank; le++) {
        uint64_t e = m->rank * m->per_rank + le, count = 0;
        /* Gather the tokens routed to expert e, run it once over all of them, scatter back. */
        for (uint64_t t = 0; t < all; t++)
            for (int k = 0; k < TOP_K; k++)
                if (chosen[t][k] == e) {
                    memcpy(rows + count * m->hidden, x_all + t * m->hidden, m->hidden * sizeof(float));
                    token_of[count] = t;
                    gate_of[count++] = gate[t][k];
                }
        expert_run(m, m->w1[le], m->w2[le], rows, count, out);
        for (uint64_t r = 0; r < count; r++)
            for (uint64_t j = 0; j < m->hidden; j++)
                y_all[token_of[r] * m->hidden + j] += gate_of[r] * out[r * m->hidden + j];
    }
    CHECK_HCCL(HcclReduceScatter(y_all, recv, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, w->comm, w->stream));
    CHECK_ACL(aclrtSynchronizeStream(w->stream));
    memcpy(y_local, recv, n * sizeof(float));
    CHECK_ACL(aclrtFree(x_all));
    CHECK_ACL(aclrtFree(y_all));
    CHECK_ACL(aclrtFree(send));
    CHECK_ACL(aclrtFree(recv));
    free(rows);
    free(out);
    free(gate_of);
    free(token_of);
    free(chosen);
    free(gate);
}

/* Exclusive prefix sums of counts: the displacements of an AlltoAllV. */
static void displs(const uint64_t *counts, uint64_t *out, uint32_t n)
{
    uint64_t at = 0;

    for (uint32_t i = 0; i < n; i++) {
        out[i] = at;
        at += counts[i];
    }
}

/* Variant 2: AlltoAllV dispatch, local experts, AlltoAllV combine. */
static void moe_alltoallv(const moe_t *m, ex_world_t *w, const float *x_local, float *y_local)
{
    uint32_t n = m->size, (*chosen)[TOP_K] = xmalloc(m->tokens * sizeof(*chosen));
    float (*gate)[TOP_K] = xmalloc(m->tokens * sizeof(*gate));
    uint64_t *rows_to = ex_alloc(n * sizeof(uint64_t)), *rows_from = ex_alloc(n * sizeof(uint64_t));
    uint64_t *scount = xmalloc(n * sizeof(uint64_t)), *sdispl = xmalloc(n * sizeof(uint64_t));
    uint64_t *rcount = xmalloc(n * sizeof(uint64_t)), *rdispl = xmalloc(n * sizeof(uint64_t));
    uint64_t *fill = xmalloc(n * sizeof(uint64_t)), nsend = m->tokens * TOP_K, nrecv = 0;
    float *send, *recv, *back, *out;
    int32_t *eid_send, *eid_recv;
    uint64_t *slot_of = xmalloc(nsend * sizeof(uint64_t));

    /* Route, and count the rows (token, k) going to each rank. */
    memset(rows_to, 0, n * sizeof(uint64_t));
    for (uint64_t t = 0; t < m->tokens; t++) {
        route(m, x_local + t * m->hidden, chosen[t], gate[t]);
        for (int k = 0; k < TOP_K; k++)
            rows_to[chosen[t][k] / m->per_rank]++;
    }
    /* 1. Counts: every rank learns how many rows each peer will send it. */
    CHECK_HCCL(HcclAlltoAll(rows_to, 1, HCCL_DATA_TYPE_UINT64, rows_from, 1, HCCL_DATA_TYPE_UINT64, w->comm,
                            w->stream));
    CHECK_ACL(aclrtSynchronizeStream(w->stream));
    for (uint32_t r = 0; r < n; r++)
        nrecv += rows_from[r];

    /* 2. Dispatch: rows grouped by destination rank, each with its expert index beside it. */
    send = ex_alloc(nsend * m->hidden * sizeof(float));
    back = ex_alloc(nsend * m->hidden * sizeof(float));
    recv = ex_alloc((nrecv + 1) * m->hidden * sizeof(float));
    out = ex_alloc((nrecv + 1) * m->hidden * sizeof(float));
    eid_send = ex_alloc(nsend * sizeof(int32_t));
    eid_recv = ex_alloc((nrecv + 1) * sizeof(int32_t));
    displs(rows_to, fill, n);
    for (uint64_t t = 0; t < m->tokens; t++)
        for (int k = 0; k < TOP_K; k++) {
            uint64_t slot = fill[chosen[t][k] / m->per_rank]++;
            memcpy(send + slot * m->hidden, x_local + t * m->hidden, m->hidden * sizeof(float));
            eid_send[slot] = (int32_t)chosen[t][k];
            slot_of[t * TOP_K + (uint64_t)k] = slot;
        }
    for (uint32_t r = 0; r < n; r++) {
        scount[r] = rows_to[r];
        rcount[r] = rows_from[r];
    }
    displs(scount, sdispl, n);
    displs(rcount, rdispl, n);
    CHECK_HCCL(HcclAlltoAllV(eid_send, scount, sdispl, HCCL_DATA_TYPE_INT32, eid_recv, rcount, rdispl,
                             HCCL_DATA_TYPE_INT32, w->comm, w->stream));
    for (uint32_t r = 0; r < n; r++) { /* rows of hidden elements */
        scount[r] *= m->hidden;
        sdispl[r] *= m->hidden;
        rcount[r] *= m->hidden;
        rdispl[r] *= m->hidden;
    }
    CHECK_HCCL(HcclAlltoAllV(send, scount, sdispl, HCCL_DATA_TYPE_FP32, recv, rcount, rdispl,
                             HCCL_DATA_TYPE_FP32, w->comm, w->stream));
    CHECK_ACL(aclrtSynchronizeStream(w->stream));

    /* 3. The local experts, row by row (a real kernel would group the rows by expert). */
    for (uint64_t r = 0; r < nrecv; r++) {
        uint64_t le = (uint64_t)eid_recv[r] - m->rank * m->per_rank;
        expert_run(m, m->w1[le], m->w2[le], recv + r * m->hidden, 1, out + r * m->hidden);
    }

    /* 4. Combine: the same exchange backwards, then gate * output summed per token. */
    CHECK_HCCL(HcclAlltoAllV(out, rcount, rdispl, HCCL_DATA_TYPE_FP32, back, scount, sdispl,
                             HCCL_DATA_TYPE_FP32, w->comm, w->stream));
    CHECK_ACL(aclrtSynchronizeStream(w->stream));
    memset(y_local, 0, m->tokens * m->hidden * sizeof(float));
    for (uint64_t t = 0; t < m->tokens; t++)
        for (int k = 0; k < TOP_K; k++)
            for (uint64_t j = 0; j < m->hidden; j++)
                y_local[t * m->hidden + j] += gate[t][k] * back[slot_of[t * TOP_K + (uint64_t)k] * m->hidden + j];

    CHECK_ACL(aclrtFree(rows_to));
    CHECK_ACL(aclrtFree(rows_from));
    CHECK_ACL(aclrtFree(send));
    CHECK_ACL(aclrtFree(back));
    CHECK_ACL(aclrtFree(recv));
    CHECK_ACL(aclrtFree(out));
    CHECK_ACL(aclrtFree(eid_send));
    CHECK_ACL(aclrtFree(eid_recv));
    free(chosen);
    free(gate);
    free(scount);
    free(sdispl);
    free(rcount);
    free(rdispl);
    free(fill);
    free(slot_of);
}

/* Reference: this rank's tokens through the layer with every expert on this one rank. */
static void moe_reference(const moe_t *m, const float *x_local, float *y_local)
{
    float *out = xmalloc(m->hidden * sizeof(float));

    memset(y_local, 0, m->tokens * m->hidden * sizeof(float));
    for (uint64_t t = 0; t < m->tokens; t++) {
        uint32_t chosen[TOP_K];
        float gate[TOP_K];
        route(m, x_local + t * m->hidden, chosen, gate);
        for (int k = 0; k < TOP_K; k++) {
            float *w1, *w2;
            expert_weights(m, chosen[k], &w1, &w2);
            expert_run(m, w1, w2, x_local + t * m->hidden, 1, out);
            for (uint64_t j = 0; j < m->hidden; j++)
                y_local[t * m->hidden + j] += gate[k] * out[j];
            free(w1);
            free(w2);
        }
    }
    free(out);
}

static uint64_t arg(int argc, char **argv, int i, uint64_t dflt)
{
    return argc > i ? strtoull(argv[i], NULL, 10) : dflt;
}

int main(int argc, char **argv)
{
    ex_world_t w;
    moe_t m;
    float *x, *y_ag, *y_a2a, *y_ref;
    uint64_t n, bad = 0, routed_here = 0;
    double err_ag = 0.0, err_a2a = 0.0;

    ex_world_init(&w);
    m = (moe_t){.rank = w.rank, .size = w.size, .tokens = arg(argc, argv, 1, 16), .hidden = arg(argc, argv, 2, 128),
                .ffn = arg(argc, argv, 3, 256), .per_rank = arg(argc, argv, 4, 2)};
    m.experts = m.per_rank * w.size;
    if (m.tokens == 0 || m.hidden == 0 || m.ffn == 0 || m.per_rank == 0 || m.experts < TOP_K) {
        fprintf(stderr, "ep_moe: need tokens, hidden, ffn, experts_per_rank > 0 and at least %d experts\n", TOP_K);
        return 2;
    }
    n = m.tokens * m.hidden;
    m.w1 = xmalloc(m.per_rank * sizeof(float *));
    m.w2 = xmalloc(m.per_rank * sizeof(float *));
    for (uint64_t le = 0; le < m.per_rank; le++)
        expert_weights(&m, m.rank * m.per_rank + le, &m.w1[le], &m.w2[le]);
    m.router = xmalloc(m.hidden * m.experts * sizeof(float));
    ex_fill(m.router, 0, m.experts, 0, 0, m.hidden, m.experts, 1.0f);
    x = xmalloc(n * sizeof(float));
    y_ag = xmalloc(n * sizeof(float));
    y_a2a = xmalloc(n * sizeof(float));
    y_ref = xmalloc(n * sizeof(float));
    ex_fill(x, 1000 + m.rank, m.hidden, 0, 0, m.tokens, m.hidden, 1.0f); /* this rank's own tokens */

    moe_allgather(&m, &w, x, y_ag);
    moe_alltoallv(&m, &w, x, y_a2a);
    moe_reference(&m, x, y_ref);
    bad += ex_compare("allgather/reducescatter", y_ag, y_ref, n, 1e-5f, 1e-4f, &err_ag);
    bad += ex_compare("alltoallv dispatch/combine", y_a2a, y_ref, n, 1e-5f, 1e-4f, &err_a2a);
    bad += ex_compare("allgather vs alltoallv", y_ag, y_a2a, n, 1e-5f, 1e-4f, NULL);
    for (uint64_t t = 0; t < m.tokens; t++) {
        uint32_t chosen[TOP_K];
        float gate[TOP_K];
        route(&m, x + t * m.hidden, chosen, gate);
        for (int k = 0; k < TOP_K; k++)
            routed_here += chosen[k] / m.per_rank == m.rank;
    }
    bad = ex_agree(&w, bad);
    printf("rank %u/%u: moe %llu tokens, experts %llu-%llu of %llu, top-%d (%llu of its %llu rows stay local): "
           "allgather/reducescatter max |err| %.2e, alltoallv max |err| %.2e, %s\n",
           w.rank, w.size, (unsigned long long)m.tokens, (unsigned long long)(m.rank * m.per_rank),
           (unsigned long long)((m.rank + 1) * m.per_rank - 1), (unsigned long long)m.experts, TOP_K,
           (unsigned long long)routed_here, (unsigned long long)(m.tokens * TOP_K), err_ag, err_a2a,
           bad == 0 ? "verified" : "WRONG");

    for (uint64_t le = 0; le < m.per_rank; le++) {
        free(m.w1[le]);
        free(m.w2[le]);
    }
    free(m.w1);
    free(m.w2);
    free(m.router);
    free(x);
    free(y_ag);
    free(y_a2a);
    free(y_ref);
    ex_world_fini(&w);
    return bad == 0 ? 0 : 1;
}
