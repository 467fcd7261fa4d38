/* bench_ops.c: ./bench --ops, each op's time.
 *
 * Each matmul product of a training step (forward, and the two backward
 * products) through op_matmul, against raw cblas_sgemm on the same shapes and
 * transposes, in one run. Then the other ops' time per call, and a residual
 * add and the norm after it as two ops and as one fused op. Every figure is
 * the median of --reps timed runs after one warm-up. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ops.h"
#include "rng.h"
#include "run.h"
#include "util.h"

/* ---- matmul: op_matmul against cblas_sgemm ------------------------------- */

typedef struct {
    Arena *arena;
    Tensor *a, *b; /* leaves, outside the arena */
    float *dC;
    bool tb;
    int which; /* 0 forward, 1 dA, 2 dB */
} MatmulRun;

static void run_op(MatmulRun *r) {
    arena_reset(r->arena);
    tape_reset();
    r->a->grad = r->b->grad = NULL;
    r->a->requires_grad = r->which != 2;
    r->b->requires_grad = r->which != 1;
    if (r->which == 0) {
        op_matmul(r->a, r->b, false, r->tb);
        return;
    }
    /* Backward: forward untimed, then one product. */
    Tensor *out = op_matmul(r->a, r->b, false, r->tb);
    out->grad = r->dC;
    double t = now_seconds();
    tape_last()->def->backward(tape_last());
    (void)t;
}

static double time_op(MatmulRun *r, int reps) {
    double *t = xmalloc((size_t)reps * sizeof *t);
    run_op(r);
    for (int i = 0; i < reps; i++) {
        if (r->which == 0) {
            double t0 = now_seconds();
            run_op(r);
            t[i] = now_seconds() - t0;
        } else {
            /* Time only the backward product, as a training step runs it. */
            arena_reset(r->arena);
            tape_reset();
            r->a->grad = r->b->grad = NULL;
            r->a->requires_grad = r->which == 1;
            r->b->requires_grad = r->which == 2;
            Tensor *out = op_matmul(r->a, r->b, false, r->tb);
            out->grad = r->dC;
            Node *n = tape_last();
            double t0 = now_seconds();
            n->def->backward(n);
            t[i] = now_seconds() - t0;
        }
    }
    double m = median_of(t, reps);
    free(t);
    return m;
}

/* The same product straight through cblas_sgemm. */
static double time_raw(int which, bool tb, int M, int K, int N, const float *A, const float *B, const float *dC,
                       float *C, float *dA, float *dB, int reps) {
    double *t = xmalloc((size_t)(reps + 1) * sizeof *t);
    for (int i = 0; i <= reps; i++) {
        double t0 = now_seconds();
        if (which == 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, K, B,
                        tb ? K : N, 0.0f, C, N);
        else if (which == 1)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasNoTrans : CblasTrans, M, K, N, 1.0f, dC, N, B,
                        tb ? K : N, 1.0f, dA, K);
        else if (!tb)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, M, 1.0f, A, K, dC, N, 1.0f, dB, N);
        else
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dC, N, A, K, 1.0f, dB, K);
        t[i] = now_seconds() - t0;
    }
    double m = median_of(t + 1, reps); /* the first run warms up */
    free(t);
    return m;
}

static void bench_matmul(const BenchOptions *o, int M, int K, int N, bool tb) {
    Rng rng;
    rng_seed(&rng, 1);
    long nA = (long)M * K, nB = (long)K * N, nC = (long)M * N;
    float *A = xmalloc((size_t)nA * 4), *B = xmalloc((size_t)nB * 4), *dC = xmalloc((size_t)nC * 4);
    float *C = xmalloc((size_t)nC * 4), *dA = xcalloc((size_t)nA, 4), *dB = xcalloc((size_t)nB, 4);
    rng_fill_normal(&rng, A, nA, 0, 1);
    rng_fill_normal(&rng, B, nB, 0, 1);
    rng_fill_normal(&rng, dC, nC, 0, 1);

    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    Tensor a, b;
    tensor_wrap(&a, A, 2, (int[]){M, K});
    tensor_wrap(&b, B, 2, tb ? (int[]){N, K} : (int[]){K, N});
    MatmulRun r = {&arena, &a, &b, dC, tb, 0};

    const char *what[3] = {"forward  C = A op(B)", "backward dA", "backward dB"};
    double flop = 2.0 * M * K * N;
    for (int w = 0; w < 3; w++) {
        r.which = w;
        double ours = time_op(&r, o->reps);
        double raw = time_raw(w, tb, M, K, N, A, B, dC, C, dA, dB, o->reps);
        printf("  %-22s %8.3f ms %7.1f GFLOP/s | sgemm %8.3f ms %7.1f GFLOP/s | ratio %.3f\n", what[w], ours * 1e3,
               flop / ours * 1e-9, raw * 1e3, flop / raw * 1e-9, ours / raw);
    }
    engine_set_arena(NULL);
    arena_free(&arena);
    free(A), free(B), free(dC), free(C), free(dA), free(dB);
}

/* ---- the other ops: time per forward and per backward -------------------- */

static void bench_pointwise(const BenchOptions *o) {
    const int B = 16, T = 256, D = 256, H = 4;
    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    Rng rng;
    rng_seed(&rng, 2);
    int *ids = xmalloc((size_t)B * T * sizeof(int));
    for (int i = 0; i < B * T; i++) ids[i] = (int)rng_below(&rng, 256);

    const char *names[] = {"layernorm [16,256,256]", "gelu [16,256,1024]", "softmax causal [16,4,256,256]",
                           "cross_entropy [4096,256]", "split_heads [16,256,256]", "add bias [16,256,1024]"};
    int n_ops = (int)(sizeof names / sizeof names[0]);
    for (int k = 0; k < n_ops; k++) {
        double *tf = xmalloc((size_t)(o->reps + 1) * sizeof(double)), *tb = xmalloc((size_t)(o->reps + 1) * sizeof(double));
        for (int rep = 0; rep <= o->reps; rep++) {
            arena_reset(&arena);
            tape_reset();
            Tensor *x, *w = NULL, *bias = NULL, *mask = NULL;
            switch (k) {
                case 0: x = tensor_3d(B, T, D); w = tensor_1d(D); bias = tensor_1d(D); break;
                case 1: x = tensor_3d(B, T, 4 * D); break;
                case 2:
                    x = tensor_4d(B, H, T, T);
                    mask = tensor_2d(T, T);
                    for (int i = 0; i < T; i++)
                        for (int j = 0; j < T; j++) mask->data[i * T + j] = j <= i ? 0.0f : -INFINITY;
                    break;
                case 3: x = tensor_2d(B * T, 256); break;
                case 4: x = tensor_3d(B, T, D); break;
                default: x = tensor_3d(B, T, 4 * D); bias = tensor_1d(4 * D); break;
            }
            rng_fill_normal(&rng, x->data, x->n, 0, 1);
            if (w) rng_fill_normal(&rng, w->data, w->n, 1, 0.1f);
            if (bias) rng_fill_normal(&rng, bias->data, bias->n, 0, 0.1f);
            x->requires_grad = true;
            if (w) w->requires_grad = true;
            if (bias) bias->requires_grad = true;
            double t0 = now_seconds();
            Tensor *y;
            switch (k) {
                case 0: y = op_layernorm(x, w, bias, 1e-5f); break;
                case 1: y = op_gelu(x); break;
                case 2: y = op_softmax(x, mask); break;
                case 3: y = op_cross_entropy(x, ids, -1); break;
                case 4: y = op_split_heads(x, H); break;
                default: y = op_add(x, bias); break;
            }
            double t1 = now_seconds();
            float *g = tensor_grad(y);
            for (long i = 0; i < y->n; i++) g[i] = 1.0f;
            Node *n = tape_last();
            double t2 = now_seconds();
            n->def->backward(n);
            double t3 = now_seconds();
            tf[rep] = t1 - t0;
            tb[rep] = t3 - t2;
        }
        printf("  %-32s forward %8.3f ms   backward %8.3f ms\n", names[k], median_of(tf + 1, o->reps) * 1e3,
               median_of(tb + 1, o->reps) * 1e3);
        free(tf);
        free(tb);
    }
    free(ids);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&arena);
}

/* ---- a residual add and the norm after it: two ops, and fused -------------- */

/* A block's residual add and the norm after it on [B, T, d]: s = x + y, h =
 * norm(s); backward from dh and from ds, the next add's share of s's
 * gradient, as in the model. Medians of forward and of backward (the norm's
 * node, then the add's when it still has a gradient) into f and b. */
static void time_add_norm(const BenchOptions *o, bool rms, bool fused, double *f, double *b) {
    const int B = 16, T = 256, D = 256;
    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    Rng rng;
    rng_seed(&rng, 3);
    Tensor x, y, w, bias, dh, ds;
    const int shape[3] = {B, T, D};
    long n = (long)B * T * D;
    float *data = xmalloc((size_t)(4 * n + 2 * D) * sizeof(float));
    tensor_wrap(&x, data, 3, shape);
    tensor_wrap(&y, data + n, 3, shape);
    tensor_wrap(&dh, data + 2 * n, 3, shape);
    tensor_wrap(&ds, data + 3 * n, 3, shape);
    tensor_wrap(&w, data + 4 * n, 1, &D);
    tensor_wrap(&bias, data + 4 * n + D, 1, &D);
    rng_fill_normal(&rng, data, 4 * n + 2 * D, 0, 1);
    x.requires_grad = y.requires_grad = w.requires_grad = bias.requires_grad = true;
    float *grads = xcalloc((size_t)2 * D, sizeof(float));
    w.grad = grads, bias.grad = grads + D;
    double *tf = xmalloc((size_t)(o->reps + 1) * sizeof(double)), *tb = xmalloc((size_t)(o->reps + 1) * sizeof(double));
    for (int rep = 0; rep <= o->reps; rep++) {
        arena_reset(&arena);
        tape_reset();
        x.grad = y.grad = NULL;
        double t0 = now_seconds();
        Tensor *sum, *h;
        if (fused) {
            h = rms ? op_add_rmsnorm(&x, &y, &w, 1e-5f, &sum) : op_add_layernorm(&x, &y, &w, &bias, 1e-5f, &sum);
        } else {
            sum = op_add(&x, &y);
            h = rms ? op_rmsnorm(sum, &w, 1e-5f) : op_layernorm(sum, &w, &bias, 1e-5f);
        }
        double t1 = now_seconds();
        memcpy(tensor_grad(h), dh.data, (size_t)n * sizeof(float));
        memcpy(tensor_grad(sum), ds.data, (size_t)n * sizeof(float));
        double t2 = now_seconds();
        for (Node *nd = tape_last(); nd; nd = nd->prev)
            if (nd->out->grad) nd->def->backward(nd);
        double t3 = now_seconds();
        tf[rep] = t1 - t0;
        tb[rep] = t3 - t2;
    }
    *f = median_of(tf + 1, o->reps);
    *b = median_of(tb + 1, o->reps);
    free(tf), free(tb), free(grads), free(data);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&arena);
}

static void bench_add_norm(const BenchOptions *o) {
    for (int rms = 0; rms < 2; rms++) {
        double f[2], b[2];
        for (int fused = 0; fused < 2; fused++) time_add_norm(o, rms, fused, &f[fused], &b[fused]);
        char name[2][40];
        snprintf(name[0], sizeof name[0], "add, then %s", rms ? "rmsnorm" : "layernorm");
        snprintf(name[1], sizeof name[1], "%s (fused)", rms ? "add_rmsnorm" : "add_layernorm");
        for (int k = 0; k < 2; k++)
            printf("  %-32s forward %8.3f ms   backward %8.3f ms\n", name[k], f[k] * 1e3, b[k] * 1e3);
    }
}

void bench_ops(const BenchOptions *o) {
    printf("matmul, (4096 x 256) . (256 x 768), B stored [K, N]:\n");
    bench_matmul(o, 4096, 256, 768, false);
    printf("\nmatmul, (4096 x 256) . (768 x 256)^T, B stored [N, K] (a linear layer's weight):\n");
    bench_matmul(o, 4096, 256, 768, true);
    printf("\nother ops (B=16, T=256, d=256, 4 heads):\n");
    bench_pointwise(o);
    printf("\na residual add and the norm after it, [16,256,256], backward from dh and ds:\n");
    bench_add_norm(o);
}
