/* test_engine.c: the RNG, the arena, parameter slabs, training steps (of
 * primitive ops, and the model's) that call malloc zero times once the arena
 * has its size, and running out of memory (an error line and exit 1). */
#include <check.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gemm.h"
#include "test_util.h"
#include "blas_stub.h"
#include "fastmath.h"
#include "attention/kernels.h"
#include "model.h"
#include "ops.h"
#include "optim/optim.h"
#include "params.h"
#include "rng.h"
#include "startup.h"
#include "tensor.h"
#include "util.h"

/* The test binary is linked with --wrap for these, so every call from our
 * own code (not from shared libraries) is counted. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);
static long mallocs;
void *__wrap_malloc(size_t size) { mallocs++; return __real_malloc(size); }
void *__wrap_calloc(size_t n, size_t size) { mallocs++; return __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t size) { mallocs++; return __real_realloc(p, size); }
void *__wrap_aligned_alloc(size_t align, size_t size) { mallocs++; return __real_aligned_alloc(align, size); }

START_TEST(test_rng_reproducible) {
    Rng a, b, c;
    rng_seed(&a, 42);
    rng_seed(&b, 42);
    rng_seed(&c, 43);
    int same_as_other_seed = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = rng_u64(&a);
        ck_assert_uint_eq(x, rng_u64(&b));
        same_as_other_seed += x == rng_u64(&c);
    }
    ck_assert_int_eq(same_as_other_seed, 0);
    /* The state is all there is: a copy continues the same stream. */
    Rng saved = a;
    float u = rng_normal(&a);
    ck_assert_float_eq(u, rng_normal(&saved));
}
END_TEST

/* Pinned values: a change to the generator changes every run's data order and
 * initialisation, so it must be a deliberate one. */
START_TEST(test_rng_known_values) {
    Rng r;
    rng_seed(&r, 0);
    ck_assert_uint_eq(rng_u64(&r), 0x99ec5f36cb75f2b4ULL);
}
END_TEST

START_TEST(test_rng_distributions) {
    Rng r;
    rng_seed(&r, 7);
    const int n = 200000;
    double sum = 0, sum2 = 0, usum = 0;
    int below_counts[5] = {0};
    for (int i = 0; i < n; i++) {
        float u = rng_uniform(&r);
        ck_assert(u >= 0.0f && u < 1.0f);
        usum += u;
        float z = rng_normal(&r);
        ck_assert(isfinite(z));
        sum += z;
        sum2 += (double)z * z;
        uint32_t k = rng_below(&r, 5);
        ck_assert_uint_lt(k, 5);
        below_counts[k]++;
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    ck_assert_double_lt(fabs(mean), 0.01);
    ck_assert_double_lt(fabs(var - 1.0), 0.02);
    ck_assert_double_lt(fabs(usum / n - 0.5), 0.005);
    for (int k = 0; k < 5; k++) ck_assert_int_gt(below_counts[k], n / 5 - 1000);
}
END_TEST

START_TEST(test_arena_alignment_and_reset) {
    Arena a;
    arena_init(&a, 1024);
    for (int i = 1; i < 50; i++) {
        void *p = arena_alloc(&a, (size_t)i * 7);
        ck_assert_uint_eq((uintptr_t)p % ARENA_ALIGN, 0);
        memset(p, 0xab, (size_t)i * 7); /* ASan checks that the memory is ours */
    }
    size_t peak = a.peak;
    ck_assert_uint_gt(peak, 1024);
    arena_reset(&a);
    ck_assert_uint_eq(arena_in_use(&a), 0);
    ck_assert_uint_ge(a.cap, peak);
    /* The same requests again fit in the grown block: no system allocation. */
    size_t before = a.mallocs;
    for (int i = 1; i < 50; i++) arena_alloc(&a, (size_t)i * 7);
    ck_assert_uint_eq(a.mallocs, before);
    float *z = arena_calloc(&a, 100 * sizeof(float));
    for (int i = 0; i < 100; i++) ck_assert_float_eq(z[i], 0.0f);
    arena_free(&a);
}
END_TEST

START_TEST(test_params_slabs) {
    ParamSet p;
    params_init(&p);
    Tensor *w = params_add(&p, "w", 2, (int[]){3, 4});
    Tensor *b = params_add(&p, "b", 1, (int[]){4});
    params_alloc(&p);
    ck_assert_int_eq(p.total, 16);
    ck_assert_ptr_eq(w->data, p.value);
    ck_assert_ptr_eq(b->data, p.value + 12);
    ck_assert_ptr_eq(b->grad, p.grad + 12);
    ck_assert_ptr_eq(params_find(&p, "b"), b);
    ck_assert_ptr_null(params_find(&p, "c"));
    for (long i = 0; i < p.total; i++) p.grad[i] = 1.0f;
    params_zero_grad(&p);
    for (long i = 0; i < p.total; i++) ck_assert_float_eq(p.grad[i], 0.0f);
    params_free(&p);
}
END_TEST

/* params_add_after places a chain of parameters one after another in the
 * slabs, each chain starting where its first member was declared, while the
 * list (the order initialisation draws in) stays the declaration order. */
START_TEST(test_params_chains) {
    ParamSet p;
    params_init(&p);
    Tensor *qw = params_add(&p, "q.weight", 2, (int[]){2, 3});
    Tensor *qb = params_add(&p, "q.bias", 1, (int[]){2});
    Tensor *kw = params_add_after(&p, qw, "k.weight", 2, (int[]){2, 3});
    Tensor *kb = params_add_after(&p, qb, "k.bias", 1, (int[]){2});
    Tensor *vw = params_add_after(&p, kw, "v.weight", 2, (int[]){1, 3});
    Tensor *ow = params_add(&p, "o.weight", 1, (int[]){5});
    params_alloc(&p);
    ck_assert_int_eq(p.total, 6 + 2 + 6 + 2 + 3 + 5);
    Tensor *order[] = {qw, qb, kw, kb, vw, ow};
    for (int i = 0; i < 6; i++) ck_assert_ptr_eq(p.list[i], order[i]);
    /* q.weight k.weight v.weight | q.bias k.bias | o.weight */
    ck_assert_ptr_eq(qw->data, p.value);
    ck_assert_ptr_eq(kw->data, p.value + 6);
    ck_assert_ptr_eq(vw->data, p.value + 12);
    ck_assert_ptr_eq(qb->data, p.value + 15);
    ck_assert_ptr_eq(kb->data, p.value + 17);
    ck_assert_ptr_eq(ow->data, p.value + 19);
    for (int i = 0; i < 6; i++) {
        ck_assert_ptr_eq(order[i]->grad, p.grad + (order[i]->data - p.value));
        ck_assert_int_eq(p.offset[i], order[i]->data - p.value);
    }
    params_free(&p);
}
END_TEST

/* A gradient that reaches a parameter through two paths gets both. */
START_TEST(test_param_used_twice_accumulates) {
    ParamSet p;
    params_init(&p);
    Tensor *w = params_add(&p, "w", 1, (int[]){3});
    params_alloc(&p);
    for (int i = 0; i < 3; i++) w->data[i] = (float)(i + 1);
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    tape_reset();
    /* loss = sum(w * w) + sum(3 w): dloss/dw = 2 w + 3 */
    Tensor *loss = op_add(op_sum(op_mul(w, w)), op_sum(op_scale(w, 3.0f)));
    backward(loss);
    for (int i = 0; i < 3; i++) ck_assert_float_eq_tol(w->grad[i], 2.0f * (float)(i + 1) + 3.0f, 1e-6f);
    tape_reset();
    arena_free(&a);
    params_free(&p);
}
END_TEST

/* A small model's training step, repeated: after the first step (which sizes
 * the arena) forward, backward and the optimizer step call malloc zero times,
 * a norm made again in backward and the fused residual add + norm included.
 * The gradients are zeroed once; adamw_step zeroes them after that. */
START_TEST(test_step_makes_no_mallocs) {
    ParamSet p;
    params_init(&p);
    Tensor *emb = params_add(&p, "emb", 2, (int[]){16, 8});
    Tensor *ln_w = params_add(&p, "ln.w", 1, (int[]){8});
    Tensor *ln_b = params_add(&p, "ln.b", 1, (int[]){8});
    Tensor *fc = params_add(&p, "fc.weight", 2, (int[]){32, 8});
    Tensor *fc_b = params_add(&p, "fc.bias", 1, (int[]){32});
    Tensor *proj = params_add(&p, "proj.weight", 2, (int[]){8, 32});
    params_alloc(&p);
    Rng rng;
    rng_seed(&rng, 1);
    rng_fill_normal(&rng, p.value, p.total, 0.0f, 0.1f);
    int ids[2 * 5], targets[2 * 5];
    for (int i = 0; i < 10; i++) {
        ids[i] = (int)rng_below(&rng, 16);
        targets[i] = (int)rng_below(&rng, 16);
    }

    Arena a;
    arena_init(&a, 0);
    engine_set_arena(&a);
    long after_first = 0;
    bool finite = true;
    AdamWConfig opt = adamw_default();
    params_zero_grad(&p);
    /* No ck_assert inside the loop: Check's bookkeeping allocates. */
    for (int step = 0; step < 4; step++) {
        arena_reset(&a); /* after step 0 this sizes the arena: one malloc */
        if (step == 1) after_first = mallocs;
        tape_reset();
        Tensor *x = op_embedding(emb, ids, 2, (int[]){2, 5});
        Tensor *h = op_layernorm(x, ln_w, ln_b, 1e-5f);
        Tensor *g = op_gelu(op_add(op_matmul(h, fc, false, true), fc_b));
        tensor_release_recomputable(h); /* made again in backward */
        h = op_add_layernorm(x, op_matmul(g, proj, false, true), ln_w, ln_b, 1e-5f, &x); /* residual + final norm */
        Tensor *logits = op_matmul(h, emb, false, true); /* tied head */
        Tensor *loss = op_cross_entropy(logits, targets, -1);
        backward(loss);
        finite &= isfinite(loss->data[0]) != 0;
        adamw_step(&p, &opt, 1e-3f, step + 1, clip_scale(grad_norm(&p), 1.0f));
    }
    long extra = mallocs - after_first;
    ck_assert(finite);
    ck_assert_int_eq(extra, 0);
    tape_reset();
    arena_free(&a);
    params_free(&p);
}
END_TEST

/* The same for the model's own step: model_loss (the fused LM head and
 * loss), backward, clipping and AdamW, as the training loop runs them; for
 * both norms (each residual add fused with the norm after it), with
 * activation checkpointing off and on (norms made again and blocks run
 * again in backward). */
START_TEST(test_model_step_makes_no_mallocs) {
    enum { B = 2, T = 16 };
    long extra[4];
    bool finite = true;
    for (int k = 0; k < 4; k++) {
        ModelConfig cfg = {.vocab = 256, .layers = 2, .d_model = 16, .heads = 2, .key_size = 8, .head_size = 8,
                           .mlp_ratio = 2, .context = T, .norm = k & 1 ? NORM_RMSNORM : NORM_LAYERNORM,
                           .tie_embeddings = true, .attn = ATTN_SOFTMAX, .pos = pos_of("learned"),
                           .objective = OBJECTIVE_CLM};
        Model m;
        model_init(&m, &cfg);
        m.checkpoint = k & 2;
        Rng rng;
        rng_seed(&rng, 2);
        model_init_weights(&m, &rng);
        int ids[B * T], targets[B * T];
        for (int i = 0; i < B * T; i++) {
            ids[i] = (int)rng_below(&rng, 256);
            targets[i] = i % 5 ? (int)rng_below(&rng, 256) : -1;
        }
        AdamWConfig opt = adamw_default();
        params_zero_grad(&m.params); /* once: each adamw_step zeroes them after */
        Arena a;
        arena_init(&a, 0);
        engine_set_arena(&a);
        bool was = grad_set(true);
        long after_first = 0;
        for (int step = 0; step < 4; step++) { /* no ck_assert inside: Check's bookkeeping allocates */
            arena_reset(&a);
            if (step == 1) after_first = mallocs;
            tape_reset();
            Tensor *loss = model_loss(&m, ids, targets, B, T);
            backward(loss);
            finite &= isfinite(loss->data[0]) != 0;
            adamw_step(&m.params, &opt, 1e-3f, step + 1, clip_scale(grad_norm(&m.params), 1.0f));
        }
        extra[k] = mallocs - after_first;
        grad_set(was);
        tape_reset();
        engine_set_arena(NULL);
        arena_free(&a);
        model_free(&m);
    }
    ck_assert(finite);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(extra[k] == 0, "%s, checkpointing %s: %ld mallocs after the first step",
                      k & 1 ? "rmsnorm" : "layernorm", k & 2 ? "on" : "off", extra[k]);
}
END_TEST

/* The same in bf16, with the products whose K is over 256 (the weight
 * gradients', K = B T = 512, and the MLP's dX) sent to oneDNN and the others
 * to gemm's own kernel, the weights' bf16 copy refreshed after each step: the
 * primitives, their memory objects and the packing buffers are made in the
 * first step, and none after it. */
START_TEST(test_bf16_step_makes_no_mallocs) {
    if (!bf16_runs_here("test_engine")) return;
    enum { B = 8, T = 64 };
    ModelConfig cfg = {.vocab = 256, .layers = 2, .d_model = 128, .heads = 2, .key_size = 64, .head_size = 64,
                       .mlp_ratio = 4, .context = T, .norm = NORM_LAYERNORM, .tie_embeddings = true,
                       .attn = ATTN_SOFTMAX, .pos = pos_of("learned"), .objective = OBJECTIVE_CLM};
    Model m;
    model_init(&m, &cfg);
    Rng rng;
    rng_seed(&rng, 3);
    model_init_weights(&m, &rng);
    static int ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int)rng_below(&rng, 256), targets[i] = (int)rng_below(&rng, 256);
    AdamWConfig opt = adamw_default();
    params_zero_grad(&m.params);
    Precision p_was = gemm_set_precision(PRECISION_BF16);
    int min_k = gemm_bf16_set_dnnl_min_k(256);
    gemm_bind_weights(m.params.value, m.params.total);
    Arena a;
    arena_init(&a, 0);
    engine_set_arena(&a);
    bool was = grad_set(true);
    long after_first = 0;
    gemm_bf16_count_clear();
    for (int step = 0; step < 4; step++) {
        arena_reset(&a);
        if (step == 1) after_first = mallocs;
        tape_reset();
        Tensor *loss = model_loss(&m, ids, targets, B, T);
        backward(loss);
        adamw_step(&m.params, &opt, 1e-3f, step + 1, clip_scale(grad_norm(&m.params), 1.0f));
        gemm_weights_changed();
    }
    long extra = mallocs - after_first;
    double big = gemm_bf16_madds() - gemm_bf16_sgemm_madds(), small = gemm_bf16_sgemm_madds();
    grad_set(was);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&a);
    gemm_bind_weights(NULL, 0);
    gemm_set_precision(p_was);
    gemm_bf16_set_dnnl_min_k(min_k);
    model_free(&m);
    ck_assert_msg(big > 0 && small > 0, "both paths ran: %.0f multiply-adds in oneDNN, %.0f in gemm's kernel", big,
                  small);
    ck_assert_msg(extra == 0, "%ld mallocs after the first bf16 step", extra);
}
END_TEST

/* Backward hands each activation's gradient back once it has passed the
 * node that made it, and later gradients of the same size reuse it: for a
 * stack of 8 identical blocks, backward takes less than a fifth of what the
 * forward activations took (keeping every gradient would take about as much
 * as the activations themselves). */
START_TEST(test_backward_reuses_gradients) {
    ParamSet p;
    params_init(&p);
    enum { L = 8, D = 16, HID = 64, B = 4, T = 16 };
    Tensor *emb = params_add(&p, "emb", 2, (int[]){32, D});
    Tensor *fc[L], *proj[L];
    for (int l = 0; l < L; l++) {
        char name[32];
        snprintf(name, sizeof name, "fc%d", l);
        fc[l] = params_add(&p, name, 2, (int[]){HID, D});
        snprintf(name, sizeof name, "proj%d", l);
        proj[l] = params_add(&p, name, 2, (int[]){D, HID});
    }
    params_alloc(&p);
    Rng rng;
    rng_seed(&rng, 3);
    rng_fill_normal(&rng, p.value, p.total, 0.0f, 0.1f);
    int ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int)rng_below(&rng, 32), targets[i] = (int)rng_below(&rng, 32);
    Arena a;
    arena_init(&a, 0);
    engine_set_arena(&a);
    tape_reset();
    params_zero_grad(&p);
    Tensor *x = op_embedding(emb, ids, 2, (int[]){B, T});
    for (int l = 0; l < L; l++) x = op_add(x, op_matmul(op_gelu(op_matmul(x, fc[l], false, true)), proj[l], false, true));
    Tensor *loss = op_cross_entropy(op_matmul(x, emb, false, true), targets, -1);
    size_t forward = arena_in_use(&a);
    backward(loss);
    size_t grads = arena_in_use(&a) - forward;
    ck_assert_msg(grads * 5 < forward, "backward took %zu bytes after a forward of %zu", grads, forward);
    /* the released gradients are gone from their tensors */
    ck_assert_ptr_null(x->grad);
    ck_assert_ptr_null(loss->grad);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&a);
    params_free(&p);
}
END_TEST

/* A norm's output handed back after forward is made again in backward: the
 * gradients are the same bits as with the output kept, and the buffer is
 * handed back again after the norm's own backward. */
START_TEST(test_recomputed_norm_same_gradients) {
    ParamSet p;
    params_init(&p);
    Tensor *w = params_add(&p, "ln.w", 1, (int[]){8});
    Tensor *b = params_add(&p, "ln.b", 1, (int[]){8});
    Tensor *fc = params_add(&p, "fc", 2, (int[]){5, 8});
    params_alloc(&p);
    Rng rng;
    rng_seed(&rng, 5);
    rng_fill_normal(&rng, p.value, p.total, 0.5f, 0.5f);
    Arena a;
    arena_init(&a, 0);
    engine_set_arena(&a);
    float *grads[2], *xgrad[2];
    for (int pass = 0; pass < 2; pass++) {
        tape_reset();
        params_zero_grad(&p);
        Tensor *x = tensor_new(2, (int[]){3, 8});
        Rng r2;
        rng_seed(&r2, 9);
        rng_fill_normal(&r2, x->data, x->n, 0.0f, 1.0f);
        x->requires_grad = true;
        Tensor *h = op_layernorm(x, w, b, 1e-5f);
        Tensor *y = op_linear(h, fc, NULL);
        Tensor *loss = op_sum(op_mul(y, y));
        if (pass) {
            tensor_release_recomputable(h);
            ck_assert_ptr_null(h->data);
        }
        backward(loss);
        if (pass) ck_assert_ptr_null(h->data); /* handed back again */
        grads[pass] = malloc((size_t)p.total * sizeof(float));
        memcpy(grads[pass], p.grad, (size_t)p.total * sizeof(float));
        xgrad[pass] = malloc(24 * sizeof(float));
        memcpy(xgrad[pass], x->grad, 24 * sizeof(float));
    }
    ck_assert_msg(memcmp(grads[0], grads[1], (size_t)p.total * sizeof(float)) == 0, "parameter gradients differ");
    ck_assert_msg(memcmp(xgrad[0], xgrad[1], 24 * sizeof(float)) == 0, "input gradients differ");
    for (int k = 0; k < 2; k++) free(grads[k]), free(xgrad[k]);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&a);
    params_free(&p);
}
END_TEST

/* fm_expf and fm_tanhf against libm in double, over the whole float range. */
START_TEST(test_fastmath_accuracy) {
    double worst = 0.0;
    for (float x = -87.0f; x < 88.0f; x += 0.00731f) {
        double want = exp((double)x);
        double err = fabs((double)fm_expf(x) - want) / want;
        if (err > worst) worst = err;
    }
    ck_assert_double_lt(worst, 2e-7);
    ck_assert_float_eq(fm_expf(-INFINITY), 0.0f);
    ck_assert_float_eq(fm_expf(-200.0f), 0.0f);
    ck_assert(isinf(fm_expf(200.0f)));
    ck_assert(isnan(fm_expf(NAN)));
    ck_assert_float_eq(fm_expf(0.0f), 1.0f);
    double worst_tanh = 0.0;
    for (float u = -20.0f; u < 20.0f; u += 0.001f) {
        double err = fabs((double)fm_tanhf(u) - tanh((double)u));
        if (err > worst_tanh) worst_tanh = err;
    }
    ck_assert_double_lt(worst_tanh, 5e-7);
}
END_TEST

/* A block big enough that every op takes its parallel path (more than
 * PAR_MIN values: B T D = 65536): 2 threads must give the same bits as 1,
 * for outputs and gradients (no races, and no reduction whose order depends
 * on the thread count). */
enum { BIG_B = 8, BIG_T = 64 };
static void big_step(ParamSet *p, const int *ids, const int *targets, float *loss_out) {
    Tensor *emb = params_find(p, "emb"), *ln_w = params_find(p, "ln.w"), *ln_b = params_find(p, "ln.b");
    Tensor *fc = params_find(p, "fc"), *proj = params_find(p, "proj");
    const int B = BIG_B, T = BIG_T, H = 4;
    tape_reset();
    params_zero_grad(p);
    Tensor *x = op_embedding(emb, ids, 2, (int[]){B, T});
    Tensor *h = op_layernorm(x, ln_w, ln_b, 1e-5f);
    Tensor *q = op_split_heads(h, H);
    Tensor *mask = tensor_2d(T, T);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) mask->data[i * T + j] = j <= i ? 0.0f : -INFINITY;
    Tensor *att = op_softmax(op_scale(op_matmul(q, q, false, true), 0.125f), mask);
    h = op_merge_heads(op_matmul(att, q, false, false));
    h = op_gelu(op_matmul(h, fc, false, true));
    h = op_elu(op_leakyrelu(h, 0.1f), 1.0f, 1.0f);
    Tensor *y = op_matmul(h, proj, false, true), *s;
    x = op_add(x, op_rmsnorm(y, ln_w, 1e-5f));
    /* residual adds fused with the norm after them; the second sum is read by its norm alone */
    h = op_add_layernorm(x, y, ln_w, ln_b, 1e-5f, &s);
    h = op_add_rmsnorm(s, h, ln_w, 1e-5f, &s);
    Tensor *loss = op_cross_entropy(op_matmul(h, emb, false, true), targets, -1);
    backward(loss);
    *loss_out = loss->data[0];
}

typedef struct {
    ParamSet p;
    int ids[BIG_B * BIG_T], targets[BIG_B * BIG_T];
    Arena a;
} BigStep;

static void big_init(BigStep *s) {
    const int V = 256, D = 128;
    params_init(&s->p);
    params_add(&s->p, "emb", 2, (int[]){V, D});
    params_add(&s->p, "ln.w", 1, (int[]){D});
    params_add(&s->p, "ln.b", 1, (int[]){D});
    params_add(&s->p, "fc", 2, (int[]){4 * D, D});
    params_add(&s->p, "proj", 2, (int[]){D, 4 * D});
    params_alloc(&s->p);
    Rng rng;
    rng_seed(&rng, 3);
    rng_fill_normal(&rng, s->p.value, s->p.total, 0.0f, 0.05f);
    for (int i = 0; i < BIG_B * BIG_T; i++) {
        s->ids[i] = (int)rng_below(&rng, V);
        s->targets[i] = i % 7 ? (int)rng_below(&rng, V) : -1;
    }
    arena_init(&s->a, 0);
    engine_set_arena(&s->a);
}

static void big_free(BigStep *s) {
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&s->a);
    params_free(&s->p);
}

/* The step on 1 and on 2 threads; the number of gradient values whose bits
 * differ (-1 when the losses do). */
static long big_differ(BigStep *s, bool record) {
    float *grad1 = malloc((size_t)s->p.total * sizeof(float)), loss1, loss2;
    ck_assert_ptr_nonnull(grad1);
    int threads_before = engine_threads();
    engine_set_threads(1);
    blas_record_set(record);
    big_step(&s->p, s->ids, s->targets, &loss1);
    blas_record_set(false);
    memcpy(grad1, s->p.grad, (size_t)s->p.total * sizeof(float));
    arena_reset(&s->a);
    engine_set_threads(2);
    big_step(&s->p, s->ids, s->targets, &loss2);
    engine_set_threads(threads_before);
    ck_assert(isfinite(loss1));
    long differ = 0;
    for (long i = 0; i < s->p.total; i++) differ += memcmp(&grad1[i], &s->p.grad[i], sizeof(float)) != 0;
    if (memcmp(&loss1, &loss2, sizeof loss1) != 0) differ = -1;
    free(grad1);
    return differ;
}

/* Our own kernels: with every BLAS call replaced by a fixed-order loop
 * (blas_stub.h), what is left is the project's code, which must give the
 * same bits on any thread count. */
START_TEST(test_own_kernels_thread_invariant) {
    BigStep s;
    big_init(&s);
    bool was = blas_stub_set(true);
    long differ = big_differ(&s, false);
    blas_stub_set(was);
    ck_assert_msg(differ == 0, "our kernels: %ld of %ld gradient values differ between 1 and 2 threads (-1: the loss)",
                  differ, s.p.total);
    big_free(&s);
}
END_TEST

/* The whole step with OpenBLAS. Its products give the same bits on 1 and 2
 * threads on some kernels and CPUs and not on others (OpenBLAS's AVX2 code on
 * an AMD AVX-512 host does not), so the test first measures each product the
 * step makes; when OpenBLAS itself differs, it says so and checks nothing
 * more, since the project's part is held by the test above. */
START_TEST(test_threads_give_same_bits) {
    BigStep s;
    big_init(&s);
    long differ = big_differ(&s, true);
    char why[256];
    long blas = blas_thread_variance(2, why, sizeof why);
    if (blas) {
        printf("engine: the 1- and 2-thread step is not compared: %s\n", why);
        fflush(stdout);
    } else {
        ck_assert_msg(differ == 0, "%ld of %ld gradient values differ between 1 and 2 threads (-1: the loss), while "
                      "OpenBLAS's %s kernel gives the same bits for every product of the step",
                      differ, s.p.total, blas_kernel_name());
    }
    big_free(&s);
}
END_TEST

/* The same step in bf16, with the products whose K is over 256 (the weight
 * gradients', K = B T = 512) sent to oneDNN and the others to gemm's own
 * kernel. oneDNN promises no particular bits across thread
 * counts, so the test measures both libraries on each product the step made
 * (oneDNN: every primitive in gemm's table); where either differs it says so
 * and checks nothing more, else the step must give the same bits. */
START_TEST(test_bf16_threads_give_same_bits) {
    if (!bf16_runs_here("test_engine")) return;
    BigStep s;
    big_init(&s);
    gemm_bind_weights(s.p.value, s.p.total);
    Precision was = gemm_set_precision(PRECISION_BF16);
    int min_k = gemm_bf16_set_dnnl_min_k(256);
    gemm_bf16_count_clear();
    long differ = big_differ(&s, true);
    ck_assert_msg(gemm_bf16_madds() > gemm_bf16_sgemm_madds(), "no product of the step went to oneDNN");
    char why[320];
    long var = blas_thread_variance(2, why, sizeof why);
    if (!var) var = gemm_bf16_thread_variance(2, why, sizeof why);
    gemm_set_precision(was);
    gemm_bf16_set_dnnl_min_k(min_k);
    gemm_bind_weights(NULL, 0);
    if (var) {
        printf("engine: the 1- and 2-thread bf16 step is not compared: %s\n", why);
        fflush(stdout);
    } else {
        ck_assert_msg(differ == 0, "bf16: %ld of %ld gradient values differ between 1 and 2 threads (-1: the loss), "
                      "while OpenBLAS and oneDNN give the same bits for every product of the step", differ, s.p.total);
    }
    big_free(&s);
}
END_TEST

/* The note about an AVX2 kernel on an AVX-512 CPU: exactly when the CPU has
 * AVX-512, OPENBLAS_CORETYPE is set and the kernel it gave is not AVX-512. */
START_TEST(test_blas_kernel_note) {
    char note[320];
    ck_assert(blas_kernel_is_avx512("SkylakeX") && blas_kernel_is_avx512("Cooperlake") &&
              blas_kernel_is_avx512("SapphireRapids") && blas_kernel_is_avx512("skylakex"));
    ck_assert(!blas_kernel_is_avx512("Haswell") && !blas_kernel_is_avx512("Zen") && !blas_kernel_is_avx512(""));
    ck_assert(blas_kernel_note(true, "Haswell", "Haswell", note, sizeof note));
    ck_assert_msg(strstr(note, "OPENBLAS_CORETYPE=Haswell") && strstr(note, "unset"), "%s", note);
    ck_assert(blas_kernel_note(true, "zen", "Zen", note, sizeof note));
    ck_assert(!blas_kernel_note(false, "Haswell", "Haswell", note, sizeof note)); /* no AVX-512 to miss */
    ck_assert(!blas_kernel_note(true, NULL, "Haswell", note, sizeof note));      /* unset: OpenBLAS chose */
    ck_assert(!blas_kernel_note(true, "", "Haswell", note, sizeof note));
    ck_assert(!blas_kernel_note(true, "SkylakeX", "SkylakeX", note, sizeof note));
    ck_assert(!blas_kernel_note(true, "Cooperlake", "Cooperlake", note, sizeof note));
}
END_TEST

/* Out of memory is an error line and exit 1, never an abort: in a child, a
 * request no machine can grant (the arena's and xmalloc's). Under ASan the
 * allocator reports such a request itself instead of returning NULL, so the
 * case runs in the plain build only. */
static void expect_oom_exit(int which) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        if (which == 0) {
            (void)xmalloc((size_t)1 << 62);
        } else {
            Arena a;
            arena_init(&a, 0);
            (void)arena_alloc(&a, (size_t)1 << 62);
        }
        _exit(3); /* not reached */
    }
    close(fds[1]);
    char err[512] = "";
    size_t len = 0;
    for (ssize_t got; len < sizeof err - 1 && (got = read(fds[0], err + len, sizeof err - 1 - len)) > 0;)
        len += (size_t)got;
    err[len] = '\0';
    close(fds[0]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "case %d: %s %d, stderr '%s'", which,
                  WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                  err);
    ck_assert_msg(strncmp(err, "error: out of memory: allocating ", 33) == 0 && strstr(err, "\nhint: "),
                  "case %d: stderr '%s'", which, err);
}

START_TEST(test_out_of_memory_exits) {
#ifndef __SANITIZE_ADDRESS__
    expect_oom_exit(0);
    expect_oom_exit(1);
#else
    (void)expect_oom_exit;
#endif
}
END_TEST

/* The commands' mmap threshold (startup_malloc_policy): a block the size of
 * multithreaded OpenBLAS's per-call buffers (512 KiB, malloc'd and freed in
 * every sgemm: at glibc's starting 128 KiB each was an mmap and a munmap, and
 * the fp32 step ran 3-5% slower) comes from the heap; a block the size of the
 * arena's overflow blocks (4 MiB) is a mapping of its own, returned at its
 * free. mallinfo2's hblks counts the blocks mapped alone. (Not under
 * AddressSanitizer, whose allocator is not glibc's; nor when the user set
 * MALLOC_MMAP_THRESHOLD_, which the commands keep.) */
START_TEST(test_mmap_threshold) {
#ifndef __SANITIZE_ADDRESS__
    if (!startup_malloc_policy()) return;
    size_t was = mallinfo2().hblks;
    char *buffer = malloc((size_t)512 << 10);
    ck_assert_ptr_nonnull(buffer);
    ck_assert_msg(mallinfo2().hblks == was, "a 512 KiB block was mapped alone");
    char *block = malloc((size_t)4 << 20);
    ck_assert_ptr_nonnull(block);
    ck_assert_msg(mallinfo2().hblks == was + 1, "a 4 MiB block came from the heap");
    buffer[0] = block[0] = 1;
    free(block);
    ck_assert_msg(mallinfo2().hblks == was, "a 4 MiB block stayed mapped after its free");
    free(buffer);
#endif
}
END_TEST

Suite *engine_suite(void) {
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("engine");
    tcase_add_test(tc, test_rng_reproducible);
    tcase_add_test(tc, test_rng_known_values);
    tcase_add_test(tc, test_rng_distributions);
    tcase_add_test(tc, test_arena_alignment_and_reset);
    tcase_add_test(tc, test_params_slabs);
    tcase_add_test(tc, test_params_chains);
    tcase_add_test(tc, test_param_used_twice_accumulates);
    tcase_add_test(tc, test_step_makes_no_mallocs);
    tcase_add_test(tc, test_model_step_makes_no_mallocs);
    tcase_add_test(tc, test_bf16_step_makes_no_mallocs);
    tcase_add_test(tc, test_bf16_threads_give_same_bits);
    tcase_add_test(tc, test_backward_reuses_gradients);
    tcase_add_test(tc, test_recomputed_norm_same_gradients);
    tcase_add_test(tc, test_fastmath_accuracy);
    tcase_add_test(tc, test_own_kernels_thread_invariant);
    tcase_add_test(tc, test_threads_give_same_bits);
    tcase_add_test(tc, test_blas_kernel_note);
    tcase_add_test(tc, test_out_of_memory_exits);
    tcase_add_test(tc, test_mmap_threshold);
    suite_add_tcase(s, tc);
    return s;
}
