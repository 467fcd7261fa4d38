/* bench_train.c: ./bench's default, training throughput.
 *
 * The reference configuration (4 layers, d 256, 4 heads, T 256, B 16, tied
 * embeddings, AdamW: the option table's defaults with d_model and context at
 * 256) or what the model options say: the median over timed steps after
 * warm-up, with a per-op breakdown of where a step's time goes. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "precision.h"
#include "bench.h"
#include "memory.h"
#include "mlm.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "profile.h"
#include "rng.h"
#include "run.h"
#include "step.h"
#include "util.h"

/* A batch of B x T random byte ids and targets, masked under objective = mlm. */
static void random_batch(const ModelConfig *mc, Rng *rng, int B, int T, int *ids, int *targets) {
    for (int i = 0; i < B * T; i++) {
        ids[i] = (int)rng_below(rng, 256);
        targets[i] = (int)rng_below(rng, 256);
    }
    if (mc->objective == OBJECTIVE_MLM) /* masked inputs, targets at the chosen positions only */
        for (int b = 0; b < B; b++) mlm_mask_row(rng, ids + (long)b * T, targets + (long)b * T, T);
}

void bench_step_init(BenchStep *b, const Config *cfg, const uint64_t *batch_seed) {
    const ModelConfig *mc = &cfg->model;
    b->B = cfg->train.batch;
    b->T = mc->context;
    model_init(&b->m, mc);
    Rng rng;
    rng_seed(&rng, 1);
    model_init_weights(&b->m, &rng);
    precision_begin(cfg->train.precision, &b->m.params, false, NULL); /* bench_main checked the CPU */
    b->precision = cfg->train.precision;
    if (batch_seed) rng_seed(&rng, *batch_seed);
    b->ids = xmalloc((size_t)b->B * b->T * sizeof(int));
    b->targets = xmalloc((size_t)b->B * b->T * sizeof(int));
    random_batch(mc, &rng, b->B, b->T, b->ids, b->targets);
    step_init(&b->step, &b->m, &cfg->train, 1); /* ./train's step (step.h), on one rank */
}

void bench_step_grad(BenchStep *b) {
    step_backward(&b->step, step_loss(&b->step, b->ids, b->targets, b->B, b->T));
}

void bench_step_update(BenchStep *b, int s) {
    /* the clip's norm, then one pass that clips, updates and zeroes the gradients */
    step_update(&b->step, 1e-4f, s, step_norm(&b->step));
}

void bench_step_free(BenchStep *b) {
    free(b->ids);
    free(b->targets);
    step_free(&b->step);
    precision_end();
    model_free(&b->m);
}

/* Seconds for one C (M x N) = op(A) (M x K) op(B) (K x N) alone, through
 * gemm at the precision in effect (bench_gemm.c). */
static double sgemm_time(int M, int N, int K, bool ta, bool tb) { return bench_product_seconds(-1, M, N, K, ta, tb); }

/* The matrix products of one training step, as flops_per_token counts them,
 * timed through cblas_sgemm alone: every linear layer's forward, dX and dW
 * (the LM head's too), and the attention's six T x T products per batch row
 * and head (QK^T, PV; dP, dV, dQ, dK), all at full size. *flops gets their
 * multiply-adds x 2. */
static double step_sgemm_seconds(const ModelConfig *c, int B, int T, double *flops) {
    int d = c->d_model, H = c->heads, dk = model_key_size(c), dv = model_head_size(c), r = c->mlp_ratio * d;
    int BT = B * T;
    struct {
        int in, out, times;
    } lin[] = {{d, H * (2 * dk + dv), c->layers}, {H * dv, d, c->layers}, {d, r, c->layers}, {r, d, c->layers},
               {d, c->vocab, 1}};
    double s = 0, f = 0;
    for (size_t i = 0; i < sizeof lin / sizeof *lin; i++) {
        double one = sgemm_time(BT, lin[i].out, lin[i].in, false, true) + sgemm_time(BT, lin[i].in, lin[i].out, false, false) +
                     sgemm_time(lin[i].out, lin[i].in, BT, true, false);
        s += lin[i].times * one;
        f += lin[i].times * 3 * 2.0 * BT * lin[i].in * lin[i].out;
    }
    double att = sgemm_time(T, T, dk, false, true) + sgemm_time(T, dv, T, false, false) + sgemm_time(T, T, dv, false, true) +
                 sgemm_time(T, dv, T, true, false) + sgemm_time(T, dk, T, false, false) + sgemm_time(T, dk, T, true, false);
    double n_att = (double)c->layers * B * H;
    s += n_att * att;
    f += n_att * 2.0 * T * T * (3.0 * dk + 3.0 * dv);
    *flops = f;
    return s;
}

double bench_train(const BenchOptions *o, const Config *cfg) {
    const ModelConfig *mc = &cfg->model;
    /* the peak RSS is this call's: --rounds calls it again in one process */
    bool rss_reset = bench_rss_reset();
    BenchStep b;
    bench_step_init(&b, cfg, NULL);
    int B = b.B, T = b.T;
    const int warm = 3;
    double *step_s = xmalloc((size_t)o->steps * sizeof(double)), optim_s = 0;
    for (int s = 0; s < warm + o->steps; s++) {
        if (s == warm) profile_start();
        double t0 = now_seconds();
        bench_step_grad(&b);
        double t1 = now_seconds();
        bench_step_update(&b, s);
        double t2 = now_seconds();
        if (s >= warm) {
            step_s[s - warm] = t2 - t0;
            optim_s += t2 - t1;
        }
    }
    profile_stop();
    double total = 0;
    for (int s = 0; s < o->steps; s++) total += step_s[s];
    double med = median_of(step_s, o->steps), tok_s = B * T / med;
    double rss_mib = bench_rss_peak_mib(); /* the process's when the reset failed */
    char attn[32];
    printf("training, reference configuration: %d layers, d_model %d, %d heads, T %d, B %d, %s embeddings, %s\n",
           mc->layers, mc->d_model, mc->heads, T, B, mc->tie_embeddings ? "tied" : "untied",
           b.step.opt == optimizer_at(0) ? "AdamW" : b.step.opt->name);
    printf("  attention: attn=%s, objective=%s; precision %s\n", option_format(cfg, option_find("attn"), attn, sizeof attn),
           mc->objective == OBJECTIVE_MLM ? "mlm" : "clm", precision_choices[b.precision]);
    printf("  %d timed steps after %d warm-up: median %.1f ms/step\n", o->steps, warm, med * 1e3);
    printf("  throughput   %8.0f tok/s\n", tok_s);
    printf("  compute      %8.1f GFLOP/s (%.1f MFLOP per token x tok/s)\n", tok_s * model_flops_per_token(mc) * 1e-9,
           model_flops_per_token(mc) * 1e-6);
    printf("  peak RSS     %8.1f MiB%s\n", rss_mib,
           rss_reset ? "" : " (the process's: its peak could not be reset)");
    /* The same products through cblas_sgemm alone, on this run's threads: the
     * step's ceiling on this CPU and BLAS kernel, so the ratio means the same
     * on any host. */
    double mm_flops, mm_s = step_sgemm_seconds(mc, B, T, &mm_flops);
    double peak = mm_flops / mm_s, ours = tok_s * model_flops_per_token(mc);
    const char *alone = b.precision == PRECISION_BF16 ? "bf16 matmul" : "sgemm alone";
    printf("  %-12s %8.1f GFLOP/s on this step's matrix products (%.1f ms: %.0f tok/s if nothing else took time)\n",
           alone, peak * 1e-9, mm_s * 1e3, B * T / mm_s);
    printf("  of the peak  %8.1f%% (the step's GFLOP/s over %s's)\n", 100 * ours / peak,
           b.precision == PRECISION_BF16 ? "the bf16 matmul" : "sgemm");
    printf("\n  where a step's time goes (mean over the timed steps):\n");
    printf("  %-16s %7s %11s %11s %7s\n", "op", "calls", "forward ms", "backward ms", "share");
    OpProfile prof[64];
    int n = profile_read(prof, 64);
    double accounted = optim_s;
    for (int i = 0; i < n; i++) {
        double f = prof[i].forward_s / o->steps, b = prof[i].backward_s / o->steps;
        accounted += (prof[i].forward_s + prof[i].backward_s);
        printf("  %-16s %7ld %11.2f %11.2f %6.1f%%\n", prof[i].name, prof[i].calls / o->steps, f * 1e3, b * 1e3,
               100 * (f + b) / (total / o->steps));
    }
    /* the norm's pass and adamw_step's, which also zeroes the gradients */
    printf("  %-16s %7s %11.2f %11s %6.1f%%\n", "clip + AdamW", "", optim_s / o->steps * 1e3, "", 100 * optim_s / total);
    printf("  %-16s %7s %11.2f %11s %6.1f%%\n", "other", "", (total - accounted) / o->steps * 1e3, "",
           100 * (total - accounted) / total);
    free(step_s);
    bench_step_free(&b);
    return tok_s;
}
