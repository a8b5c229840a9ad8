/*
 * Tensor parallelism: a transformer MLP split over the ranks, the seed's first pattern.
 *
 *   y = gelu(x W1) W2        x: tokens x hidden, W1: hidden x ffn, W2: ffn x hidden
 *
 * W1 is split by columns (column-parallel) and W2 by rows (row-parallel): rank r holds columns
 * [r*ffn/n, (r+1)*ffn/n) of W1 and the same rows of W2. Each rank then computes, with no
 * communication at all, h_r = gelu(x W1_r) and a partial output p_r = h_r W2_r; the full output is
 * the sum of the partials, y = p_0 + ... + p_{n-1}. That sum is the in-place AllReduce(SUM), here
 * in fp16 as inference does it (half the bytes of fp32). One AllReduce per MLP, one per attention
 * block: the "twice per layer" of the seed's table.
 *
 * Every rank then checks y against the unsplit MLP computed in fp32 in the same program, with a
 * bound that allows each partial's rounding to fp16 and the one rounding of the sum.
 *
 * Run: hccl-run -n 4 ./tp_mlp [tokens hidden ffn]   (ffn must be divisible by the rank count)
 */
#include "example_common.h"

/* tanh approximation of GELU, as in GPT-2. */
static float gelu(float v)
{
    return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

/* This rank's partial output p = gelu(x W1[:, c0:c0+cols]) W2[c0:c0+cols, :]. */
static void mlp_shard(float *p, const float *x, uint64_t tokens, uint64_t hidden, uint64_t ffn, uint64_t c0,
                      uint64_t cols)
{
    float *w1 = malloc(hidden * cols * sizeof(float));
    float *w2 = malloc(cols * hidden * sizeof(float));
    float *h = malloc(tokens * cols * sizeof(float));

    if (w1 == NULL || w2 == NULL || h == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    /* The same seeded weights whatever the split: tensor 1 is W1, tensor 2 is W2. */
    ex_fill(w1, 1, ffn, 0, c0, hidden, cols, 1.0f / sqrtf((float)hidden));
    ex_fill(w2, 2, hidden, c0, 0, cols, hidden, 1.0f / sqrtf((float)ffn));
    ex_matmul(h, x, w1, tokens, hidden, cols, 0);
    for (uint64_t i = 0; i < tokens * cols; i++)
        h[i] = gelu(h[i]);
    ex_matmul(p, h, w2, tokens, cols, hidden, 0);
    free(w1);
    free(w2);
    free(h);
}

static uint64_t arg(int argc, char **argv, int i, uint64_t dflt)
{
    return argc > i ? strtoull(argv[i], NULL, 10) : dflt;
}

int main(int argc, char **argv)
{
    ex_world_t w;
    uint64_t tokens = arg(argc, argv, 1, 32), hidden = arg(argc, argv, 2, 256), ffn = arg(argc, argv, 3, 1024);
    uint64_t n, cols, bad;
    float *x, *partial, *y, *ref;
    aclFloat16 *y16;
    double max_err = 0.0;

    ex_world_init(&w);
    n = w.size;
    if (tokens == 0 || hidden == 0 || ffn == 0 || ffn % n != 0) {
        fprintf(stderr, "tp_mlp: need tokens, hidden, ffn > 0 and ffn divisible by %llu ranks\n",
                (unsigned long long)n);
        return 2;
    }
    cols = ffn / n;
    x = malloc(tokens * hidden * sizeof(float));
    partial = malloc(tokens * hidden * sizeof(float));
    y = malloc(tokens * hidden * sizeof(float));
    ref = malloc(tokens * hidden * sizeof(float));
    y16 = ex_alloc(tokens * hidden * sizeof(aclFloat16)); /* device memory: the zero-copy path */
    if (x == NULL || partial == NULL || y == NULL || ref == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    ex_fill(x, 0, hidden, 0, 0, tokens, hidden, 1.0f); /* the same activations on every rank */

    /* 1. Local compute: this rank's column slice of W1 and row slice of W2. */
    mlp_shard(partial, x, tokens, hidden, ffn, w.rank * cols, cols);
    for (uint64_t i = 0; i < tokens * hidden; i++)
        y16[i] = aclFloatToFloat16(partial[i]);

    /* 2. The partial outputs summed on every rank: in place, fp16, enqueued on the stream. */
    CHECK_HCCL(HcclAllReduce(y16, y16, tokens * hidden, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, w.comm, w.stream));
    /* 3. Wait for it before using y (nothing else to overlap with here; see pp_pipeline.c). */
    CHECK_ACL(aclrtSynchronizeStream(w.stream));
    for (uint64_t i = 0; i < tokens * hidden; i++)
        y[i] = aclFloat16ToFloat(y16[i]);

    /*
     * Reference: the unsplit MLP in fp32 on this one rank. Bound: each partial rounded to fp16
     * (relative 2^-11 of |p_r|) and the sum rounded once (2^-11 of |y|), doubled to cover the fp32
     * arithmetic, whose order differs between the split and the unsplit product.
     */
    {
        float *bound = calloc(tokens * hidden, sizeof(float));
        uint64_t outside = 0;
        if (bound == NULL)
            return 1;
        mlp_shard(ref, x, tokens, hidden, ffn, 0, ffn);
        for (uint64_t r = 0; r < n; r++) {
            mlp_shard(partial, x, tokens, hidden, ffn, r * cols, cols);
            for (uint64_t i = 0; i < tokens * hidden; i++)
                bound[i] += fabsf(partial[i]);
        }
        for (uint64_t i = 0; i < tokens * hidden; i++) {
            float tol = 0x1p-10f * (bound[i] + fabsf(ref[i])) + 1e-6f;
            float err = fabsf(y[i] - ref[i]);
            if (!(err <= tol) && outside++ == 0)
                fprintf(stderr, "rank %u: y[%llu] = %.7g, reference %.7g (bound %.3g)\n", w.rank,
                        (unsigned long long)i, (double)y[i], (double)ref[i], (double)tol);
            if (err > max_err)
                max_err = err;
        }
        free(bound);
        bad = ex_agree(&w, outside);
    }
    printf("rank %u/%u: tp mlp %llux%llu -> %llu (ffn slice %llu), fp16 allreduce of %llu elements: "
           "max |y - ref| %.2e, %s\n",
           w.rank, w.size, (unsigned long long)tokens, (unsigned long long)hidden, (unsigned long long)hidden,
           (unsigned long long)cols, (unsigned long long)(tokens * hidden), max_err,
           bad == 0 ? "verified" : "WRONG");

    CHECK_ACL(aclrtFree(y16));
    free(x);
    free(partial);
    free(y);
    free(ref);
    ex_world_fini(&w);
    return bad == 0 ? 0 : 1;
}
