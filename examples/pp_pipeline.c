/*
 * Pipeline parallelism beside tensor parallelism: micro-batches flow through stages with
 * Send/Recv, in the 1F1B order, while each stage is itself split over a TP group.
 *
 * The ranks form a tp x pp grid (rank = stage * tp + tp_index), with one communicator per
 * dimension: tp_comm for the AllReduces inside a stage, pp_comm for the activations and gradients
 * between stages. Stage s holds block s of the model, a residual MLP split as in tp_mlp.c:
 *
 *   forward   y  = x + tanh(x W1) W2                       (one TP AllReduce)
 *   backward  gx = gy + ((gy W2^T) * (1 - h^2)) W1^T        (one TP AllReduce), h = tanh(x W1)
 *
 * with the loss 0.5 * |y|^2 at the last stage, so that the gradient it sends back is y itself.
 *
 * 1F1B (one forward, one backward), the schedule of Megatron-LM and DeepSpeed: stage s first runs
 * pp - s - 1 forwards (warm-up), then alternates one forward and one backward, then drains the
 * remaining backwards. A stage therefore holds at most pp - s micro-batches' activations instead of
 * all of them. In the steady phase a stage sends an activation forward and at once needs a
 * gradient back from the same neighbour; done as two blocking calls in a row on both sides, the
 * two stages would each wait in their send for the other's receive. HcclBatchSendRecv issues the
 * pair as one operation that never deadlocks on order (Megatron's send_forward_recv_backward).
 *
 * Checked on every rank against the whole model run by one rank in the same program: the last
 * stage's outputs and the first stage's input gradients, micro-batch by micro-batch.
 *
 * Run: hccl-run -n 4 ./pp_pipeline [--tp T] [micro-batches tokens hidden ffn]
 */
#include "example_common.h"

typedef struct {
    uint32_t tp, pp, stage, tp_index;
    uint64_t micro, tokens, hidden, ffn, cols; /* cols: this rank's slice of ffn */
    HcclComm tp_comm, pp_comm;
    aclrtStream stream;
    float *w1, *w2;     /* this rank's slices of its stage's block */
    float **x, **h;     /* per micro-batch: the stage's input and tanh(x W1), kept for backward */
    float *act, *grad;  /* device buffers: what crosses stage boundaries */
    float *partial;     /* device buffer: what the TP AllReduce sums */
    char order[512];    /* the schedule as this rank ran it, for the printout */
} stage_t;

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes);

    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* Block `layer`'s weights, columns [c0, c0 + cols) of W1 and the same rows of W2. */
static void block_weights(float *w1, float *w2, uint32_t layer, uint64_t hidden, uint64_t ffn, uint64_t c0,
                          uint64_t cols)
{
    ex_fill(w1, 10 + 2 * (uint64_t)layer, ffn, 0, c0, hidden, cols, 1.0f / sqrtf((float)hidden));
    ex_fill(w2, 11 + 2 * (uint64_t)layer, hidden, c0, 0, cols, hidden, 0.5f / sqrtf((float)ffn));
}

static void tp_allreduce(stage_t *st, float *buf, uint64_t count)
{
    CHECK_HCCL(HcclAllReduce(buf, buf, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, st->tp_comm, st->stream));
    CHECK_ACL(aclrtSynchronizeStream(st->stream));
}

/* Forward of one micro-batch through this stage: st->act = x + tanh(x W1) W2. */
static void forward(stage_t *st, uint64_t mb)
{
    uint64_t n = st->tokens * st->hidden;

    memcpy(st->x[mb], st->act, n * sizeof(float));
    ex_matmul(st->h[mb], st->x[mb], st->w1, st->tokens, st->hidden, st->cols, 0);
    for (uint64_t i = 0; i < st->tokens * st->cols; i++)
        st->h[mb][i] = tanhf(st->h[mb][i]);
    ex_matmul(st->partial, st->h[mb], st->w2, st->tokens, st->cols, st->hidden, 0);
    tp_allreduce(st, st->partial, n);
    for (uint64_t i = 0; i < n; i++)
        st->act[i] = st->x[mb][i] + st->partial[i];
}

/* Backward of one micro-batch: st->grad holds dL/dy on entry and dL/dx on return. */
static void backward(stage_t *st, uint64_t mb)
{
    uint64_t n = st->tokens * st->hidden;
    float *gh = xmalloc(st->tokens * st->cols * sizeof(float));

    ex_matmul_bt(gh, st->grad, st->w2, st->tokens, st->hidden, st->cols);
    for (uint64_t i = 0; i < st->tokens * st->cols; i++)
        gh[i] *= 1.0f - st->h[mb][i] * st->h[mb][i];
    ex_matmul_bt(st->partial, gh, st->w1, st->tokens, st->cols, st->hidden);
    tp_allreduce(st, st->partial, n);
    for (uint64_t i = 0; i < n; i++)
        st->grad[i] += st->partial[i];
    free(gh);
}

/* Append "F3 " or "B3 " to the printed schedule. */
static void note(stage_t *st, char pass, uint64_t mb)
{
    size_t used = strlen(st->order);

    snprintf(st->order + used, sizeof(st->order) - used, "%c%llu ", pass, (unsigned long long)mb);
}

/* One HcclBatchSendRecv on pp_comm: optionally send `out` to `to`, optionally receive `in` from
 * `from` (a stage with nothing to exchange issues nothing). */
static void exchange(stage_t *st, float *out, int to, float *in, int from)
{
    HcclSendRecvItem items[2];
    uint32_t n = 0;
    uint64_t count = st->tokens * st->hidden;

    if (out != NULL && to >= 0 && to < (int)st->pp)
        items[n++] = (HcclSendRecvItem){.sendRecvType = HCCL_SEND, .buf = out, .count = count,
                                        .dataType = HCCL_DATA_TYPE_FP32, .remoteRank = (uint32_t)to};
    if (in != NULL && from >= 0 && from < (int)st->pp)
        items[n++] = (HcclSendRecvItem){.sendRecvType = HCCL_RECV, .buf = in, .count = count,
                                        .dataType = HCCL_DATA_TYPE_FP32, .remoteRank = (uint32_t)from};
    if (n == 0)
        return;
    CHECK_HCCL(HcclBatchSendRecv(items, n, st->pp_comm, st->stream));
    CHECK_ACL(aclrtSynchronizeStream(st->stream));
}

/* Stage 0's input for micro-batch mb: seeded, so the reference makes the same. */
static void model_input(float *x, uint64_t mb, uint64_t tokens, uint64_t hidden)
{
    ex_fill(x, 100 + mb, hidden, 0, 0, tokens, hidden, 1.0f);
}

/* The 1F1B schedule of this stage. outputs[mb] (last stage) and input_grads[mb] (first stage)
 * receive the results. */
static void run_1f1b(stage_t *st, float **outputs, float **input_grads)
{
    int s = (int)st->stage, last = st->stage + 1 == st->pp;
    uint64_t warmup = st->pp - st->stage - 1, remaining, fwd = 0, bwd = 0, n = st->tokens * st->hidden;
    float *recv_act = st->stage > 0 ? st->act : NULL;

    if (warmup > st->micro)
        warmup = st->micro;
    remaining = st->micro - warmup;
    for (uint64_t i = 0; i < warmup; i++, fwd++) {
        if (s == 0)
            model_input(st->act, fwd, st->tokens, st->hidden);
        exchange(st, NULL, -1, recv_act, s - 1);
        forward(st, fwd);
        note(st, 'F', fwd);
        exchange(st, st->act, s + 1, NULL, -1);
    }
    if (remaining > 0) {
        if (s == 0)
            model_input(st->act, fwd, st->tokens, st->hidden);
        exchange(st, NULL, -1, recv_act, s - 1);
    }
    for (uint64_t i = 0; i < remaining; i++, fwd++, bwd++) {
        forward(st, fwd);
        note(st, 'F', fwd);
        if (last) {
            memcpy(outputs[fwd], st->act, n * sizeof(float));
            memcpy(st->grad, st->act, n * sizeof(float)); /* d(0.5 |y|^2)/dy = y */
        } else {
            exchange(st, st->act, s + 1, st->grad, s + 1); /* send forward, receive backward */
        }
        backward(st, bwd);
        note(st, 'B', bwd);
        if (s == 0)
            memcpy(input_grads[bwd], st->grad, n * sizeof(float));
        if (i + 1 == remaining) {
            exchange(st, st->grad, s - 1, NULL, -1);
        } else {
            if (s == 0)
                model_input(st->act, fwd + 1, st->tokens, st->hidden);
            exchange(st, st->grad, s - 1, recv_act, s - 1); /* send backward, receive forward */
        }
    }
    for (uint64_t i = 0; i < warmup; i++, bwd++) {
        exchange(st, NULL, -1, st->grad, s + 1);
        backward(st, bwd);
        note(st, 'B', bwd);
        if (s == 0)
            memcpy(input_grads[bwd], st->grad, n * sizeof(float));
        exchange(st, st->grad, s - 1, NULL, -1);
    }
}

/* The whole model on one rank, unsplit: output and input gradient of micro-batch mb. */
static void reference(const stage_t *st, uint64_t mb, float *y, float *gx)
{
    uint64_t n = st->tokens * st->hidden, t = st->tokens, hd = st->hidden, f = st->ffn;
    float *w1 = xmalloc(st->pp * hd * f * sizeof(float)), *w2 = xmalloc(st->pp * f * hd * sizeof(float));
    float *xs = xmalloc((st->pp + 1) * n * sizeof(float)), *hs = xmalloc(st->pp * t * f * sizeof(float));
    float *gh = xmalloc(t * f * sizeof(float)), *tmp = xmalloc(n * sizeof(float));

    model_input(xs, mb, t, hd);
    for (uint32_t l = 0; l < st->pp; l++) {
        float *h = hs + l * t * f, *x = xs + l * n, *next = xs + (l + 1) * n;
        block_weights(w1 + l * hd * f, w2 + l * f * hd, l, hd, f, 0, f);
        ex_matmul(h, x, w1 + l * hd * f, t, hd, f, 0);
        for (uint64_t i = 0; i < t * f; i++)
            h[i] = tanhf(h[i]);
        ex_matmul(tmp, h, w2 + l * f * hd, t, f, hd, 0);
        for (uint64_t i = 0; i < n; i++)
            next[i] = x[i] + tmp[i];
    }
    memcpy(y, xs + st->pp * n, n * sizeof(float));
    memcpy(gx, y, n * sizeof(float));
    for (uint32_t l = st->pp; l-- > 0;) {
        const float *h = hs + l * t * f;
        ex_matmul_bt(gh, gx, w2 + l * f * hd, t, hd, f);
        for (uint64_t i = 0; i < t * f; i++)
            gh[i] *= 1.0f - h[i] * h[i];
        ex_matmul_bt(tmp, gh, w1 + l * hd * f, t, f, hd);
        for (uint64_t i = 0; i < n; i++)
            gx[i] += tmp[i];
    }
    free(w1);
    free(w2);
    free(xs);
    free(hs);
    free(gh);
    free(tmp);
}

static void parse(int argc, char **argv, uint32_t size, stage_t *st)
{
    uint64_t v[4] = {0, 8, 128, 512};
    int k = 0;

    st->tp = size % 2 == 0 && size >= 4 ? 2 : 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tp") == 0 && i + 1 < argc)
            st->tp = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (k < 4)
            v[k++] = strtoull(argv[i], NULL, 10);
    }
    if (st->tp == 0 || size % st->tp != 0) {
        fprintf(stderr, "pp_pipeline: --tp %u does not divide %u ranks\n", st->tp, size);
        exit(2);
    }
    st->pp = size / st->tp;
    st->micro = v[0] != 0 ? v[0] : 2 * (uint64_t)st->pp;
    st->tokens = v[1];
    st->hidden = v[2];
    st->ffn = v[3];
    if (st->tokens == 0 || st->hidden == 0 || st->ffn == 0 || st->ffn % st->tp != 0) {
        fprintf(stderr, "pp_pipeline: need tokens, hidden, ffn > 0 and ffn divisible by tp %u\n", st->tp);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    ex_world_t w;
    stage_t st = {0};
    float **outputs, **input_grads, *y_ref, *gx_ref;
    uint64_t n, bad = 0;
    double max_err = 0.0;

    ex_world_init(&w);
    parse(argc, argv, w.size, &st);
    st.stage = w.rank / st.tp;
    st.tp_index = w.rank % st.tp;
    st.cols = st.ffn / st.tp;
    st.stream = w.stream;
    n = st.tokens * st.hidden;
    ex_grid_split(&w, st.tp, &st.tp_comm, &st.pp_comm);

    st.w1 = xmalloc(st.hidden * st.cols * sizeof(float));
    st.w2 = xmalloc(st.cols * st.hidden * sizeof(float));
    block_weights(st.w1, st.w2, st.stage, st.hidden, st.ffn, st.tp_index * st.cols, st.cols);
    st.x = xmalloc(st.micro * sizeof(float *));
    st.h = xmalloc(st.micro * sizeof(float *));
    outputs = xmalloc(st.micro * sizeof(float *));
    input_grads = xmalloc(st.micro * sizeof(float *));
    for (uint64_t mb = 0; mb < st.micro; mb++) {
        st.x[mb] = xmalloc(n * sizeof(float));
        st.h[mb] = xmalloc(st.tokens * st.cols * sizeof(float));
        outputs[mb] = xmalloc(n * sizeof(float));
        input_grads[mb] = xmalloc(n * sizeof(float));
    }
    st.act = ex_alloc(n * sizeof(float));
    st.grad = ex_alloc(n * sizeof(float));
    st.partial = ex_alloc(n * sizeof(float));

    run_1f1b(&st, outputs, input_grads);

    y_ref = xmalloc(n * sizeof(float));
    gx_ref = xmalloc(n * sizeof(float));
    for (uint64_t mb = 0; mb < st.micro; mb++) {
        char what[64];
        reference(&st, mb, y_ref, gx_ref);
        if (st.stage + 1 == st.pp) {
            snprintf(what, sizeof(what), "rank %u output of micro-batch %llu", w.rank, (unsigned long long)mb);
            bad += ex_compare(what, outputs[mb], y_ref, n, 1e-5f, 1e-4f, &max_err);
        }
        if (st.stage == 0) {
            snprintf(what, sizeof(what), "rank %u input gradient of micro-batch %llu", w.rank,
                     (unsigned long long)mb);
            bad += ex_compare(what, input_grads[mb], gx_ref, n, 1e-5f, 1e-4f, &max_err);
        }
    }
    bad = ex_agree(&w, bad);
    printf("rank %u/%u: stage %u/%u tp %u/%u, %llu micro-batches, 1F1B order %s-> max |err| %.2e, %s\n", w.rank,
           w.size, st.stage, st.pp, st.tp_index, st.tp, (unsigned long long)st.micro, st.order, max_err,
           bad == 0 ? "verified" : "WRONG");

    for (uint64_t mb = 0; mb < st.micro; mb++) {
        free(st.x[mb]);
        free(st.h[mb]);
        free(outputs[mb]);
        free(input_grads[mb]);
    }
    free(st.x);
    free(st.h);
    free(outputs);
    free(input_grads);
    free(st.w1);
    free(st.w2);
    free(y_ref);
    free(gx_ref);
    CHECK_ACL(aclrtFree(st.act));
    CHECK_ACL(aclrtFree(st.grad));
    CHECK_ACL(aclrtFree(st.partial));
    CHECK_HCCL(HcclCommDestroy(st.tp_comm));
    CHECK_HCCL(HcclCommDestroy(st.pp_comm));
    ex_world_fini(&w);
    return bad == 0 ? 0 : 1;
}
