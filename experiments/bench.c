/* bench.c: ./bench, speed measurements.
 *
 * By default: training throughput on the reference configuration (4 layers,
 * d 256, 4 heads, T 256, B 16, tied embeddings, AdamW: the option table's
 * defaults with d_model and context at 256), the median over timed steps after warm-up, with a
 * per-op breakdown. --vs-torch runs experiments/torch_reference.py, the same model
 * in PyTorch, in the same invocation: a short probe of each plausible thread and
 * OpenMP setting, then --rounds rounds of both under PyTorch's fastest, and
 * prints the median of the rounds' ratios (bench_vs_torch).
 *
 * --ops: each matmul product of a training step (forward, and the two
 * backward products) through op_matmul, against raw cblas_sgemm on the same
 * shapes and transposes, in one run. Then the other ops' time per call.
 * Every figure is the median of --reps timed runs after one warm-up.
 *
 * --attn X (and any model option) changes the training configuration; attn=
 * linformer has no causal form, so it benchmarks objective=mlm unless
 * --objective is given.
 *
 * --scaling: how one attention layer's time and memory grow with the length.
 * The layer is the attention module: x [1, T, d] -> q, k, v projections, the
 * kernel, the output projection (no norm, no MLP), forward and backward (with
 * dx, as in a model) from a random output gradient; d 256 and 4 heads (the
 * reference configuration), B 1, 2 threads unless --threads says otherwise.
 * Then the kernel alone, the same way: its fused op from q, k, v to the
 * per-head output and back to dq, dk, dv (and its own parameters' gradients),
 * in the layout the module gives it (forward_qkv: one [B, T, H (2 dk + dv)] tensor, no split).
 * For T = 512, 1024, ... 16384 (--lengths), per kernel: softmax and causal
 * cosformer by default, or the one --attn names. Per row: the median time per
 * step of --reps timed steps (default 5, or about a second of steps when they
 * are short, up to 100; 3 when a step takes over a second)
 * after one warm-up step and the fastest of them (the better estimate on a
 * busy machine), time per token, the arena's peak bytes over those
 * steps (every activation, gradient and saved tensor of the layer, or of the
 * kernel; not the inputs x or q, k, v, nor the parameters, 1 MiB here), and
 * the process's peak RSS during the layer's steps. A kernel whose estimated memory passes the cap (8 GiB, or 3/4 of
 * RAM if less) is skipped at that length with a note: softmax keeps P, B H T^2
 * floats, plus a T^2 scratch per thread in backward. Writes the table to
 * bench-scaling.csv, time per token against T to bench-scaling.png and the
 * arena peak against T to bench-scaling-memory.png, in the current folder.
 * With --vs-torch, the causal cosformer rows run again in PyTorch
 * (experiments/torch_scaling.py: the same layer, chunked, with autograd) and
 * the table gains PyTorch's time, the ratio and PyTorch's memory. */
#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <sys/resource.h>
#include <unistd.h>

#include "mlm.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "options.h"
#include "plot.h"
#include "rng.h"
#include "run.h"
#include "startup.h"
#include "util.h"

typedef struct {
    int reps;
    bool reps_given;
    int threads;
    int steps;
    bool ops, vs_torch, scaling;
    bool attn_given;
    int lengths[32], n_lengths; /* --scaling */
    int rounds;                 /* --scaling: sweeps over the lengths */
} Options;

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

static void bench_matmul(const Options *o, int M, int K, int N, bool tb) {
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

static void bench_pointwise(const Options *o) {
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

/* ---- training throughput ------------------------------------------------- */

/* Parameters that take part in matmuls: 6 flops per parameter per token
 * (forward 2, backward 4), plus 12 L T d per token for the attention scores
 * and their product with v (the usual estimate, as in llm.c / nanoGPT). */
static double flops_per_token(const ModelConfig *c) {
    double d = c->d_model, H = c->heads, dk = model_key_size(c), dv = model_head_size(c);
    double per_layer = d * H * dk * 2 + d * H * dv * 2 + 2 * d * c->mlp_ratio * d;
    double matmul_params = c->layers * per_layer + (double)c->vocab * d;
    return 6 * matmul_params + 12.0 * c->layers * c->context * d;
}

static double bench_train(const Options *o, const Config *cfg) {
    const ModelConfig *mc = &cfg->model;
    int B = cfg->train.batch, T = mc->context;
    Model m;
    model_init(&m, mc);
    Rng rng;
    rng_seed(&rng, 1);
    model_init_weights(&m, &rng);
    int *ids = xmalloc((size_t)B * T * sizeof(int)), *targets = xmalloc((size_t)B * T * sizeof(int));
    for (int i = 0; i < B * T; i++) {
        ids[i] = (int)rng_below(&rng, 256);
        targets[i] = (int)rng_below(&rng, 256);
    }
    if (mc->objective == OBJECTIVE_MLM) /* masked inputs, targets at the chosen positions only */
        for (int b = 0; b < B; b++) mlm_mask_row(&rng, ids + (long)b * T, targets + (long)b * T, T);
    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    AdamWConfig opt = adamw_default();
    const int warm = 3;
    double *step_s = xmalloc((size_t)o->steps * sizeof(double)), optim_s = 0;
    grad_set(true);
    for (int s = 0; s < warm + o->steps; s++) {
        if (s == warm) profile_start();
        double t0 = now_seconds();
        arena_reset(&arena);
        tape_reset();
        params_zero_grad(&m.params);
        Tensor *loss = model_loss(&m, ids, targets, B, T);
        backward(loss);
        double t1 = now_seconds();
        clip_grad_norm(&m.params, 1.0f);
        adamw_step(&m.params, &opt, 1e-4f, s + 1);
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
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char attn[32];
    printf("training, reference configuration: %d layers, d_model %d, %d heads, T %d, B %d, %s embeddings, AdamW\n",
           mc->layers, mc->d_model, mc->heads, T, B, mc->tie_embeddings ? "tied" : "untied");
    printf("  attention: attn=%s, objective=%s\n", option_format(cfg, option_find("attn"), attn, sizeof attn),
           mc->objective == OBJECTIVE_MLM ? "mlm" : "clm");
    printf("  %d timed steps after %d warm-up: median %.1f ms/step\n", o->steps, warm, med * 1e3);
    printf("  throughput   %8.0f tok/s\n", tok_s);
    printf("  compute      %8.1f GFLOP/s (%.1f MFLOP per token x tok/s)\n", tok_s * flops_per_token(mc) * 1e-9,
           flops_per_token(mc) * 1e-6);
    printf("  peak RSS     %8.1f MiB\n", ru.ru_maxrss / 1024.0);
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
    printf("  %-16s %7s %11.2f %11s %6.1f%%\n", "clip + AdamW", "", optim_s / o->steps * 1e3, "", 100 * optim_s / total);
    printf("  %-16s %7s %11.2f %11s %6.1f%%\n", "other", "", (total - accounted) / o->steps * 1e3, "",
           100 * (total - accounted) / total);
    free(step_s);
    free(ids);
    free(targets);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&arena);
    model_free(&m);
    return tok_s;
}

/* ---- PyTorch ------------------------------------------------------------- */

/* Runs `python experiments/<script> <args>` with the first Python that has
 * PyTorch (PYTHON, /usr/bin/python3, python3; once one has worked, that one),
 * echoing its output unless `quiet`; each line goes to `line` too. Returns 0
 * when the script ran and exited 0. */
static int run_python_script(const char *script, const char *args, bool quiet, void (*line)(const char *, void *),
                             void *ctx) {
    static int worked = -1; /* the Python that ran a script, once known */
    const char *pythons[] = {getenv("PYTHON"), "/usr/bin/python3", "python3"};
    /* the scripts sit beside ./bench, wherever it is run from */
    char dir[1024] = ".";
    ssize_t len = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (len > 0 && !memchr(dir, '\'', (size_t)len)) {
        dir[len] = 0;
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
    } else {
        strcpy(dir, ".");
    }
    for (int i = 0; i < 3; i++) {
        if (!pythons[i] || (worked >= 0 && i != worked)) continue;
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s -c 'import torch' 2>/dev/null && %s '%s/experiments/%s' %s", pythons[i],
                 pythons[i], dir, script, args);
        fflush(stdout);
        FILE *p = popen(cmd, "r");
        if (!p) continue;
        char buf[2048]; /* the BLAS line names a few libraries */
        while (fgets(buf, sizeof buf, p)) {
            if (!quiet) {
                fputs(buf, stdout);
                fflush(stdout);
            }
            line(buf, ctx);
        }
        if (pclose(p) == 0) {
            worked = i;
            return 0;
        }
    }
    fprintf(stderr, "error: --vs-torch: could not run experiments/%s\nhint: it needs PyTorch (Debian: apt-get "
            "install python3-torch)\n", script);
    return -1;
}

static int run_torch_script(const char *script, const char *args, void (*line)(const char *, void *), void *ctx) {
    return run_python_script(script, args, false, line, ctx);
}

/* ---- scaling: one attention layer against the length --------------------- */

static double rss_peak_mib(void) {
    /* VmHWM since the last reset_rss_peak (Linux), else the lifetime peak */
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kb = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
        fclose(f);
        if (kb >= 0) return kb / 1024.0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

/* Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
 * Free heap goes back to the system first, so that an earlier row's memory
 * does not count in this one's. */
static bool reset_rss_peak(void) {
    malloc_trim(0);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* The memory cap for a row: 8 GiB, or 3/4 of the machine's RAM if less. */
static double memory_cap_bytes(void) {
    double cap = 8.0 * (1 << 30);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && 0.75 * (double)pages * (double)page < cap) cap = 0.75 * (double)pages * (double)page;
    return cap;
}

/* The part of the layer's memory that grows faster than T: softmax keeps P
 * (H T^2 floats at B 1) for backward, and its backward takes a T^2 scratch per
 * thread; talking heads, an H T^2 one, twice, per thread. */
static double layer_quadratic_bytes(const ModelConfig *m, int T, int threads) {
    if (m->attn != ATTN_SOFTMAX) return 0;
    double per_thread = m->talking_heads != TALKING_NONE ? 2.0 * m->heads : 1.0;
    return 4.0 * (double)T * T * (m->heads + per_thread * threads);
}

typedef struct {
    double step_s, best_s; /* median and fastest step */
    double arena_mib;      /* the arena's peak over the steps */
} Timing;

typedef struct {
    int attn, T;
    int kernel_i; /* which of bench_scaling's kernels */
    Timing layer, kernel;
    double sgemm_ms, sgemm_gflop; /* the projections' products as raw sgemm calls (median), and their work */
    double rss_mib;
    /* --vs-torch (cosformer rows), else NAN: PyTorch's median and fastest step,
     * and its peak RSS above the RSS at the length's start */
    double torch_ms, torch_best_ms, torch_growth_mib;
} ScalingRow;

/* One forward + backward from x (the layer) or from q, k, v (the kernel). */
typedef struct {
    Attention *a;
    ParamSet *ps;
    int T, d;
    float *x, *q, *k, *v; /* inputs, outside the arena: q, k, v side by side in q with forward_qkv */
    float *seed_y, *seed_o;  /* the output gradients: layer [1, T, d], kernel [1, H, T, head_size]
                                (or [1, T, H head_size], forward_qkv) */
    bool kernel_only;
} ScalingStep;

static void scaling_step(const ScalingStep *st) {
    params_zero_grad(st->ps);
    const Attention *a = st->a;
    if (!st->kernel_only) {
        Tensor x;
        tensor_wrap(&x, st->x, 3, (int[]){1, st->T, st->d});
        x.requires_grad = true;
        backward_seeded(attention_forward(a, &x), st->seed_y);
        return;
    }
    /* the kernel's call, as attention_forward makes it */
    AttnCall c = a->call;
    c.B = 1;
    c.T = st->T;
    for (int i = 0; i < ATTN_MAX_PARAMS; i++) c.params[i] = a->params[i];
    Tensor q, k, v; /* in the layout the module gives the kernel */
    if (a->kernel->forward_qkv) {
        tensor_wrap(&q, st->q, 3, (int[]){1, st->T, a->heads * (2 * a->key_size + a->head_size)});
        q.requires_grad = true;
        backward_seeded(a->kernel->forward_qkv(&c, &q), st->seed_o);
        return;
    }
    tensor_wrap(&q, st->q, 4, (int[]){1, a->heads, st->T, a->key_size});
    tensor_wrap(&k, st->k, 4, (int[]){1, a->heads, st->T, a->key_size});
    tensor_wrap(&v, st->v, 4, (int[]){1, a->heads, st->T, a->head_size});
    q.requires_grad = k.requires_grad = v.requires_grad = true;
    backward_seeded(a->kernel->forward(&c, &q, &k, &v), st->seed_o);
}

/* Median and fastest of `reps` steps after one warm-up, in a fresh arena.
 * Without --reps: 5, or as many as fill about a second (at most 100) when
 * steps are short, so that a short row's median is not a handful of noisy
 * milliseconds; 3 when the warm-up took over a second. */
static Timing time_steps(const Options *o, const ScalingStep *st) {
    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    grad_set(true);
    int reps = o->reps_given ? o->reps : 5;
    double *t = xmalloc((size_t)((reps > 100 ? reps : 100) + 1) * sizeof(double));
    int done = 0;
    for (int s = 0; s <= reps; s++) {
        double t0 = now_seconds();
        arena_reset(&arena);
        tape_reset();
        scaling_step(st);
        double dt = now_seconds() - t0;
        if (s == 0) { /* the warm-up step sizes the arena */
            if (!o->reps_given && dt > 1.0) reps = 3;
            else if (!o->reps_given && dt * reps < 1.0) reps = dt > 0.01 ? (int)(1.0 / dt) : 100;
            continue;
        }
        t[done++] = dt;
    }
    Timing r;
    r.step_s = median_of(t, done); /* sorts t */
    r.best_s = t[0];
    r.arena_mib = (double)arena.peak / (1 << 20);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&arena);
    free(t);
    return r;
}

static float *random_buffer(Rng *rng, long n) {
    float *p = xmalloc((size_t)n * sizeof(float));
    rng_fill_normal(rng, p, n, 0.0f, 1.0f);
    return p;
}

/* The projections' products of one layer step as raw cblas_sgemm calls, on
 * buffers outside the engine: forward x W^T for q, k, v (one product when the
 * kernel takes them fused, else three) and o, and per projection dx += dy W
 * and dW += dy^T x. The median of `reps` runs after one warm-up, in seconds;
 * their work in *gflop. What the layer takes beyond this is the kernel and
 * the engine's other work (bias, copies, zeroing). */
static double time_projections(const Options *o, const Attention *a, int T, int d, double *gflop) {
    int outs[4], n = 0;
    if (a->kernel->forward_qkv) outs[n++] = a->heads * (2 * a->key_size + a->head_size);
    else outs[n++] = a->heads * a->key_size, outs[n++] = a->heads * a->key_size, outs[n++] = a->heads * a->head_size;
    int hv = a->heads * a->head_size, widest = outs[0] > d ? outs[0] : d;
    long big = (long)T * (widest > hv ? widest : hv);
    float *x = xcalloc((size_t)big, sizeof(float)), *y = xcalloc((size_t)big, sizeof(float));
    float *dx = xcalloc((size_t)big, sizeof(float)), *w = xcalloc((size_t)widest * widest, sizeof(float));
    float *dw = xcalloc((size_t)widest * widest, sizeof(float));
    int reps = o->reps_given ? o->reps : 5;
    double *t = xmalloc((size_t)(reps + 1) * sizeof(double));
    *gflop = 0;
    for (int r = 0; r <= reps; r++) {
        double t0 = now_seconds();
        for (int i = 0; i <= n; i++) { /* the q, k, v products, then o (in hv, out d) */
            int in = i < n ? d : hv, out = i < n ? outs[i] : d;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, in, out, 1.0f, y, out, w, in, 1.0f, dx, in);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, T, 1.0f, y, out, x, in, 1.0f, dw, in);
            if (r == 0) *gflop += 3 * 2.0 * T * in * out / 1e9;
        }
        if (r) t[r - 1] = now_seconds() - t0;
    }
    double m = median_of(t, reps);
    free(x), free(y), free(dx), free(w), free(dw), free(t);
    return m;
}

/* Times forward + backward of one attention layer at length T, then of its
 * kernel alone, then the projections' sgemm calls alone. */
static ScalingRow scaling_row(const Options *o, const ModelConfig *base, int T) {
    ModelConfig mc = *base;
    mc.context = T; /* Linformer's E, F are [k, n] with n = the context */
    ScalingRow row = {.attn = mc.attn, .T = T, .torch_ms = NAN, .torch_best_ms = NAN, .torch_growth_mib = NAN};
    ParamSet ps;
    params_init(&ps);
    Attention a;
    attention_declare(&a, &ps, "attn", 0, &mc);
    params_alloc(&ps);
    Rng rng;
    rng_seed(&rng, 3);
    for (int i = 0; i < params_count(&ps); i++) {
        Tensor *t = ps.list[i];
        if (t->ndim >= 2) rng_fill_normal(&rng, t->data, t->n, 0.0f, 0.02f);
    }
    long n = (long)T * mc.d_model, nk = (long)T * a.heads * a.key_size, nv = (long)T * a.heads * a.head_size;
    bool fused = a.kernel->forward_qkv; /* q holds q, k and v, side by side */
    ScalingStep st = {&a,
                      &ps,
                      T,
                      mc.d_model,
                      random_buffer(&rng, n),
                      random_buffer(&rng, fused ? 2 * nk + nv : nk),
                      fused ? NULL : random_buffer(&rng, nk),
                      fused ? NULL : random_buffer(&rng, nv),
                      random_buffer(&rng, n),
                      random_buffer(&rng, nv),
                      false};
    bool rss_reset = reset_rss_peak();
    row.layer = time_steps(o, &st);
    row.rss_mib = rss_reset ? rss_peak_mib() : NAN; /* the layer's: it holds the kernel's */
    st.kernel_only = true;
    row.kernel = time_steps(o, &st);
    row.sgemm_ms = time_projections(o, &a, T, mc.d_model, &row.sgemm_gflop) * 1e3;
    free(st.x), free(st.q), free(st.k), free(st.v), free(st.seed_y), free(st.seed_o);
    params_free(&ps);
    return row;
}

/* "cosformer causal", "linear phi=elu reweight=cos causal", "linformer k=64 bidirectional",
 * "softmax window=64 causal" ... */
static const char *kernel_label(const ModelConfig *m, char *buf, size_t size) {
    static const char *const names[] = {"softmax", "linear", "cosformer", "linformer"};
    static const char *const phis[] = {"identity", "relu", "leakyrelu", "elu"};
    static const char *const talking[] = {"none", "pre", "post", "both"};
    char extra[64] = "";
    if (m->attn == ATTN_LINEAR)
        snprintf(extra, sizeof extra, " phi=%s%s", phis[m->phi], m->reweight == REWEIGHT_COS ? " reweight=cos" : "");
    else if (m->attn == ATTN_LINFORMER)
        snprintf(extra, sizeof extra, " k=%d", m->linformer_k);
    else if (m->attn == ATTN_SOFTMAX && m->talking_heads != TALKING_NONE)
        snprintf(extra, sizeof extra, " talking_heads=%s", talking[m->talking_heads]);
    else if (m->attn == ATTN_SOFTMAX && m->window > 0)
        snprintf(extra, sizeof extra, " window=%d", m->window);
    snprintf(buf, size, "%s%s %s", names[m->attn], extra, m->objective == OBJECTIVE_CLM ? "causal" : "bidirectional");
    return buf;
}

static void print_row(const char *label, const ScalingRow *r) {
    printf("  %-32s %6d | %8.2f %8.2f %8.3f %8.1f | %8.2f %8.2f %6.1f | %8.2f | %7.1f\n", label, r->T,
           r->layer.step_s * 1e3, r->layer.best_s * 1e3, r->layer.step_s * 1e6 / r->T, r->layer.arena_mib,
           r->kernel.step_s * 1e3, r->kernel.best_s * 1e3, r->kernel.arena_mib, r->sgemm_ms, r->rss_mib);
}

/* Row i over the rounds (rows `stride` apart): median times, the fastest
 * step of all, the largest memory. */
static ScalingRow median_row(const ScalingRow *by_round, int i, int stride, int rounds) {
    double a[3][100]; /* rounds <= 100 (--rounds) */
    ScalingRow r = by_round[i];
    for (int k = 0; k < rounds; k++) {
        const ScalingRow *x = &by_round[k * stride + i];
        a[0][k] = x->layer.step_s, a[1][k] = x->kernel.step_s, a[2][k] = x->sgemm_ms;
        r.layer.best_s = fmin(r.layer.best_s, x->layer.best_s);
        r.kernel.best_s = fmin(r.kernel.best_s, x->kernel.best_s);
        r.layer.arena_mib = fmax(r.layer.arena_mib, x->layer.arena_mib);
        r.kernel.arena_mib = fmax(r.kernel.arena_mib, x->kernel.arena_mib);
        r.rss_mib = fmax(r.rss_mib, x->rss_mib);
    }
    r.layer.step_s = median_of(a[0], rounds);
    r.kernel.step_s = median_of(a[1], rounds);
    r.sgemm_ms = median_of(a[2], rounds);
    return r;
}

/* The torch rows' parser:
 * "torch T 8192: 210.3 ms (fastest 201.2), peak RSS 600.1 MiB, 433.0 above the start". */
typedef struct {
    ScalingRow *rows;
    int n_rows;
} TorchRows;

static void torch_scaling_line(const char *line, void *ctx) {
    TorchRows *tr = ctx;
    int T;
    double ms, best, peak, rss;
    if (sscanf(line, "torch T %d: %lf ms (fastest %lf), peak RSS %lf MiB, %lf above the start", &T, &ms, &best, &peak,
               &rss) != 5)
        return;
    for (int i = 0; i < tr->n_rows; i++)
        if (tr->rows[i].attn == ATTN_COSFORMER && tr->rows[i].T == T) {
            tr->rows[i].torch_ms = ms;
            tr->rows[i].torch_best_ms = best;
            tr->rows[i].torch_growth_mib = rss;
        }
}

/* --vs-torch: the causal cosformer layer in PyTorch (experiments/torch_scaling.py)
 * at the same lengths, sizes, chunk, reps and threads, and the ratios. */
static int scaling_vs_torch(const Options *o, const ModelConfig *m, int threads, ScalingRow *rows, int n_rows) {
    char lengths[256] = "";
    size_t n = 0;
    for (int i = 0; i < n_rows; i++)
        if (rows[i].attn == ATTN_COSFORMER && n < sizeof lengths)
            n += (size_t)snprintf(lengths + n, sizeof lengths - n, "%s%d", n ? "," : "", rows[i].T);
    if (!n) return 0;
    char args[512];
    snprintf(args, sizeof args, "--lengths %s --d_model %d --heads %d --chunk %d --reps %d --rounds %d --threads %d",
             lengths, m->d_model, m->heads, m->chunk, o->reps_given ? o->reps : 5, o->rounds, threads);
    printf("\nPyTorch (experiments/torch_scaling.py: the same layer, chunked cosformer with autograd), same sizes,\n"
           "chunk, reps, rounds and threads:\n");
    fflush(stdout);
    TorchRows tr = {rows, n_rows};
    if (run_torch_script("torch_scaling.py", args, torch_scaling_line, &tr) != 0) return -1;
    printf("\n  %6s | %12s %12s %9s | %18s %18s\n", "T", "attnlab ms", "torch ms", "ratio", "attnlab arena MiB",
           "torch growth MiB");
    for (int i = 0; i < n_rows; i++) {
        const ScalingRow *r = &rows[i];
        if (r->attn != ATTN_COSFORMER || isnan(r->torch_ms)) continue;
        printf("  %6d | %12.1f %12.1f %8.2fx | %18.1f %18.1f\n", r->T, r->layer.step_s * 1e3, r->torch_ms,
               r->torch_ms / (r->layer.step_s * 1e3), r->layer.arena_mib, r->torch_growth_mib);
    }
    printf("  (ratio: PyTorch's median step time over attnlab's. Memory: the layer's arena peak against\n"
           "  PyTorch's peak RSS above its RSS at the length's start)\n");
    return 0;
}

static int bench_scaling(const Options *o, const Config *cfg, int threads) {
    /* the kernels: softmax and cosformer, causal, unless --attn named one */
    ModelConfig kernels[2];
    int n_kernels = 0;
    if (o->attn_given) {
        kernels[n_kernels++] = cfg->model;
    } else {
        static const int defaults[] = {ATTN_SOFTMAX, ATTN_COSFORMER};
        for (int i = 0; i < 2; i++) {
            Config c = *cfg;
            c.model.attn = defaults[i];
            Err e;
            if (config_validate(&c, &e) != 0) {
                err_print(&e);
                return 2;
            }
            kernels[n_kernels++] = c.model;
        }
    }
    double cap = memory_cap_bytes();
    printf("scaling: one attention layer (q, k, v, o projections and the kernel), forward + backward,\n"
           "d_model %d, %d heads, key_size %d, head_size %d, B 1, %d threads; median and fastest of %s timed steps;\n"
           "%d round%s over the lengths\n\n",
           cfg->model.d_model, cfg->model.heads, model_key_size(&cfg->model), model_head_size(&cfg->model), threads,
           o->reps_given ? "--reps" : "5 to 100 (about 1 s of steps; 3 past 1 s a step)", o->rounds,
           o->rounds > 1 ? "s, each row then the median of the rounds," : "");
    printf("  %-32s %6s | %-35s | %-24s | %-8s | %s\n", "", "", "layer (projections + kernel)", "kernel alone",
           "sgemm", "process");
    printf("  %-32s %6s | %8s %8s %8s %8s | %8s %8s %6s | %8s | %s\n", "kernel", "T", "ms/step", "fastest", "us/token",
           "MiB", "ms/step", "fastest", "MiB", "ms", "RSS MiB");
    /* Every round sweeps all the lengths; a row's figures are then the median
     * over the rounds (the fastest step: the fastest of all; memory: the
     * largest), so that a few seconds of other load on a shared machine
     * spread over the rows instead of spoiling one of them. */
    enum { MAX_ROWS = 2 * 32 };
    ScalingRow rows[MAX_ROWS], *by_round = xmalloc((size_t)o->rounds * MAX_ROWS * sizeof *by_round);
    int n_rows = 0;
    char label[64], skipped[1024] = "";
    size_t sk = 0;
    double started = now_seconds();
    for (int round = 0; round < o->rounds; round++) {
        if (o->rounds > 1) {
            double spent = now_seconds() - started;
            if (round) printf("\n  round %d of %d (%.0f s so far, about %.0f s to go)\n", round + 1, o->rounds, spent,
                              spent / round * (o->rounds - round));
            else printf("  round 1 of %d\n", o->rounds);
        }
        n_rows = 0;
        for (int k = 0; k < n_kernels; k++) {
            for (int i = 0; i < o->n_lengths; i++) {
                int T = o->lengths[i];
                kernel_label(&kernels[k], label, sizeof label);
                if (kernels[k].attn == ATTN_LINFORMER && kernels[k].linformer_k > T) {
                    if (!round)
                        printf("  %-32s %6d  (skipped: linformer_k %d is longer than T)\n", label, T,
                               kernels[k].linformer_k);
                    continue;
                }
                double need = layer_quadratic_bytes(&kernels[k], T, threads);
                if (need > cap) {
                    if (round) continue;
                    printf("  %-32s %6d  (skipped: needs over %.1f GiB, above the %.1f GiB cap)\n", label, T,
                           need / (1 << 30), cap / (1 << 30));
                    if (sk < sizeof skipped)
                        sk += (size_t)snprintf(skipped + sk, sizeof skipped - sk, "%s%s at T=%d", sk ? ", " : "", label,
                                               T);
                    continue;
                }
                fflush(stdout);
                ScalingRow r = scaling_row(o, &kernels[k], T);
                r.kernel_i = k;
                by_round[round * MAX_ROWS + n_rows++] = r;
                print_row(label, &r);
            }
        }
    }
    for (int i = 0; i < n_rows; i++) rows[i] = median_row(by_round, i, MAX_ROWS, o->rounds);
    free(by_round);
    if (o->rounds > 1) {
        printf("\n  the median of the %d rounds:\n", o->rounds);
        for (int i = 0; i < n_rows; i++) print_row(kernel_label(&kernels[rows[i].kernel_i], label, sizeof label), &rows[i]);
    }
    if (skipped[0]) printf("\n  not run (memory cap %.1f GiB): %s\n", cap / (1 << 30), skipped);

    /* causal cosformer: flat time per token, linear memory, the T = 8192 target */
    const ScalingRow *first = NULL, *last = NULL;
    double lo = INFINITY, hi = 0, lo_best = INFINITY, hi_best = 0;
    for (int i = 0; i < n_rows; i++) {
        if (rows[i].attn != ATTN_COSFORMER) continue;
        if (!first) first = &rows[i];
        last = &rows[i];
        double per = rows[i].layer.step_s / rows[i].T, best = rows[i].layer.best_s / rows[i].T;
        lo = fmin(lo, per), hi = fmax(hi, per);
        lo_best = fmin(lo_best, best), hi_best = fmax(hi_best, best);
    }
    if (first && last != first)
        printf("\n  cosformer, T %d to %d: layer time per token %.2f to %.2f us (max / min %.2f; of the fastest\n"
               "  steps %.2f to %.2f, max / min %.2f); layer arena %.1f KiB per token at T %d, %.1f at T %d\n",
               first->T, last->T, lo * 1e6, hi * 1e6, hi / lo, lo_best * 1e6, hi_best * 1e6, hi_best / lo_best,
               first->layer.arena_mib * 1024 / first->T, first->T, last->layer.arena_mib * 1024 / last->T, last->T);
    for (int i = 0; i < n_rows; i++)
        if (rows[i].attn == ATTN_COSFORMER && rows[i].T == 8192)
            printf("  cosformer at T=8192 (targets: 105 ms, 150 MiB): layer %.1f ms (fastest %.1f), %.1f MiB;\n"
                   "  kernel alone %.1f ms (fastest %.1f), %.1f MiB; the projections' sgemm calls alone %.1f ms\n"
                   "  (%.1f GFLOP, %.0f GFLOP/s); process peak RSS %.1f MiB\n",
                   rows[i].layer.step_s * 1e3, rows[i].layer.best_s * 1e3, rows[i].layer.arena_mib,
                   rows[i].kernel.step_s * 1e3, rows[i].kernel.best_s * 1e3, rows[i].kernel.arena_mib, rows[i].sgemm_ms,
                   rows[i].sgemm_gflop, rows[i].sgemm_gflop / rows[i].sgemm_ms * 1e3, rows[i].rss_mib);

    if (o->vs_torch && scaling_vs_torch(o, &kernels[0], threads, rows, n_rows) != 0) return 1;

    /* bench-scaling.csv */
    size_t cap_text = 320 + (size_t)n_rows * 240, len = 0;
    char *csv = xmalloc(cap_text);
    len += (size_t)snprintf(csv + len, cap_text - len,
                            "kernel,T,layer_ms,layer_fastest_ms,layer_us_per_token,layer_arena_mib,"
                            "kernel_ms,kernel_fastest_ms,kernel_arena_mib,sgemm_ms,sgemm_gflop,rss_mib,torch_ms,torch_fastest_ms,"
                            "torch_growth_mib\n");
    for (int i = 0; i < n_rows; i++) {
        const ScalingRow *r = &rows[i];
        char torch[96] = ",,"; /* empty fields without --vs-torch */
        if (!isnan(r->torch_ms))
            snprintf(torch, sizeof torch, "%.4f,%.4f,%.2f", r->torch_ms, r->torch_best_ms, r->torch_growth_mib);
        len += (size_t)snprintf(csv + len, cap_text - len, "%s,%d,%.4f,%.4f,%.5f,%.2f,%.4f,%.4f,%.2f,%.4f,%.4f,%.2f,%s\n",
                                kernel_label(&kernels[r->kernel_i], label, sizeof label), r->T, r->layer.step_s * 1e3, r->layer.best_s * 1e3,
                                r->layer.step_s * 1e6 / r->T, r->layer.arena_mib, r->kernel.step_s * 1e3,
                                r->kernel.best_s * 1e3, r->kernel.arena_mib, r->sgemm_ms, r->sgemm_gflop, r->rss_mib, torch);
    }
    Err e;
    int rc = write_file_atomic("bench-scaling.csv", csv, &e);
    free(csv);
    if (rc != 0) {
        err_print(&e);
        return 1;
    }

    /* the plots: per kernel, the layer (solid) and the kernel alone; with
     * --vs-torch, PyTorch's cosformer layer (its memory: the growth of its RSS) */
    double xs[5][32], ys[5][32];
    PlotSeries series[5];
    char labels[5][80];
    for (int what = 0; what < 2; what++) { /* 0: time per token, 1: arena peak */
        int n_series = 0;
        for (int k = 0; k < n_kernels; k++)
            for (int part = 0; part < 3; part++) {
                int n = 0;
                for (int i = 0; i < n_rows; i++) {
                    if (rows[i].kernel_i != k) continue;
                    if (part == 2) { /* PyTorch */
                        if (isnan(rows[i].torch_ms)) continue;
                        xs[n_series][n] = rows[i].T;
                        ys[n_series][n++] = what ? rows[i].torch_growth_mib : rows[i].torch_ms * 1e3 / rows[i].T;
                        continue;
                    }
                    const Timing *t = part ? &rows[i].kernel : &rows[i].layer;
                    xs[n_series][n] = rows[i].T;
                    ys[n_series][n++] = what ? t->arena_mib : t->step_s * 1e6 / rows[i].T;
                }
                if (!n) continue;
                static const char *const parts[] = {"layer", "kernel alone", "layer in PyTorch"};
                snprintf(labels[n_series], sizeof labels[n_series], "%s, %s", kernel_label(&kernels[k], label, sizeof label),
                         parts[part]);
                series[n_series] = (PlotSeries){labels[n_series], xs[n_series], ys[n_series], n, 0};
                n_series++;
            }
        if (!n_series) break;
        PlotSpec spec = {"one attention layer, forward + backward", "length T",
                         what ? (o->vs_torch ? "arena peak; PyTorch: RSS growth (MiB)" : "arena peak (MiB)")
                              : "time per token (us)",
                         1, what, 0, 0, 0};
        if (plot_lines(what ? "bench-scaling-memory.png" : "bench-scaling.png", &spec, series, n_series, &e) != 0) {
            err_print(&e);
            return 1;
        }
    }
    printf("\nwrote bench-scaling.csv, bench-scaling.png (time per token) and bench-scaling-memory.png\n");
    return 0;
}

/* ---- --vs-torch: the reference configuration in PyTorch, at its best ---- */

/* A way to run PyTorch: the variables below are set in the child's
 * environment (libgomp and OpenBLAS read them when they load, before the
 * script runs), every other variable is inherited, OPENBLAS_CORETYPE among
 * them, so that OpenBLAS picks the kernel it picks for attnlab. */
typedef struct {
    int threads;             /* torch.set_num_threads, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS */
    const char *wait_policy; /* OMP_WAIT_POLICY, or NULL: unset */
    const char *spincount;   /* GOMP_SPINCOUNT (it overrides OMP_WAIT_POLICY), or NULL: unset */
    bool ours;               /* the wait variables attnlab runs with */
    bool aten_avx512;        /* ATEN_CPU_CAPABILITY=avx512 (unset otherwise) */
} TorchSetting;

/* What torch_reference.py printed (torch_run_line). */
typedef struct {
    double tok_s;
    char capability[16]; /* ATen's CPU capability: AVX2, AVX512, ... */
    char kernel[64];     /* OpenBLAS's kernel, "" when not OpenBLAS */
    char blas[1024];     /* the BLAS libraries mapped, "..., ...; OpenBLAS kernel X" */
} TorchRun;

static const char *const torch_env[] = {"OMP_NUM_THREADS",     "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY",
                                        "GOMP_SPINCOUNT",      "ATEN_CPU_CAPABILITY",  "LD_LIBRARY_PATH"};
#define N_TORCH_ENV (int)(sizeof torch_env / sizeof *torch_env)

static const char *env_or_null(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static bool same_value(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static const char *torch_setting_label(const TorchSetting *s, char *buf, size_t size) {
    int n = snprintf(buf, size, "%d thread%s", s->threads, s->threads == 1 ? "" : "s");
    if (s->threads > 1 && !s->wait_policy && !s->spincount)
        n += snprintf(buf + n, size - (size_t)n, ", OpenMP wait variables unset");
    if (s->threads > 1 && s->wait_policy)
        n += snprintf(buf + n, size - (size_t)n, ", OMP_WAIT_POLICY=%.32s", s->wait_policy);
    if (s->threads > 1 && s->spincount) n += snprintf(buf + n, size - (size_t)n, ", GOMP_SPINCOUNT=%.32s", s->spincount);
    if (s->threads > 1 && s->ours) n += snprintf(buf + n, size - (size_t)n, " (as attnlab)");
    if (s->aten_avx512) snprintf(buf + n, size - (size_t)n, ", ATEN_CPU_CAPABILITY=avx512");
    return buf;
}

/* The settings worth a probe: 1 thread, and attnlab's thread count with
 * libgomp's default wait, with OMP_WAIT_POLICY=PASSIVE and =ACTIVE, and with
 * the wait variables attnlab itself runs with (by default GOMP_SPINCOUNT=1000,
 * set at start-up), each once. One thread has no idle OpenMP threads to wait. */
static int torch_candidates(int threads, TorchSetting *c) {
    int n = 0;
    if (threads > 1) c[n++] = (TorchSetting){.threads = 1};
    c[n++] = (TorchSetting){.threads = threads};
    if (threads == 1) return n;
    c[n++] = (TorchSetting){.threads = threads, .wait_policy = "PASSIVE"};
    c[n++] = (TorchSetting){.threads = threads, .wait_policy = "ACTIVE"};
    TorchSetting ours = {.threads = threads, .wait_policy = env_or_null("OMP_WAIT_POLICY"),
                         .spincount = env_or_null("GOMP_SPINCOUNT"), .ours = true};
    for (int i = 0; i < n; i++)
        if (c[i].threads == threads && same_value(c[i].wait_policy, ours.wait_policy) &&
            same_value(c[i].spincount, ours.spincount)) {
            c[i].ours = true;
            return n;
        }
    c[n++] = ours;
    return n;
}

/* attnlab's OpenBLAS: the file this process mapped it from (/proc/self/maps,
 * Linux), or "" when unknown. */
static void our_openblas(char *file, size_t size) {
    *file = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[1536];
    while (fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/'), *base = strrchr(line, '/');
        if (!path || !strstr(base, "libopenblas")) continue;
        path[strcspn(path, "\n")] = 0;
        snprintf(file, size, "%s", path);
        break;
    }
    fclose(f);
}

/* Sets the child's variables for `s` and returns the old values in `saved`
 * (torch_env_restore puts them back). Our own libgomp and OpenBLAS read theirs
 * at start-up, so only the child sees the change. LD_LIBRARY_PATH gains the
 * folder of attnlab's OpenBLAS when that folder also holds a libblas.so.3 (as
 * Debian's openblas-openmp does), so that PyTorch's libblas.so.3 is that one
 * whatever the system's BLAS alternatives say. */
static void torch_env_set(const TorchSetting *s, const char *openblas, char *saved[N_TORCH_ENV]) {
    for (int i = 0; i < N_TORCH_ENV; i++) {
        const char *v = getenv(torch_env[i]);
        saved[i] = v ? xstrdup(v) : NULL;
        if (i != N_TORCH_ENV - 1) unsetenv(torch_env[i]);
    }
    char threads[16];
    snprintf(threads, sizeof threads, "%d", s->threads);
    setenv("OMP_NUM_THREADS", threads, 1);
    setenv("OPENBLAS_NUM_THREADS", threads, 1);
    if (s->wait_policy) setenv("OMP_WAIT_POLICY", s->wait_policy, 1);
    if (s->spincount) setenv("GOMP_SPINCOUNT", s->spincount, 1);
    if (s->aten_avx512) setenv("ATEN_CPU_CAPABILITY", "avx512", 1);
    const char *slash = strrchr(openblas, '/');
    char dir[1024], blas[1100];
    if (!slash || slash - openblas >= (long)sizeof dir) return;
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - openblas), openblas);
    snprintf(blas, sizeof blas, "%s/libblas.so.3", dir);
    if (access(blas, R_OK) != 0) return;
    const char *old = saved[N_TORCH_ENV - 1];
    size_t size = strlen(dir) + (old ? strlen(old) + 2 : 1);
    char *path = xmalloc(size);
    snprintf(path, size, "%s%s%s", dir, old ? ":" : "", old ? old : "");
    setenv("LD_LIBRARY_PATH", path, 1);
    free(path);
}

static void torch_env_restore(char *saved[N_TORCH_ENV]) {
    for (int i = 0; i < N_TORCH_ENV; i++) {
        if (saved[i]) setenv(torch_env[i], saved[i], 1);
        else unsetenv(torch_env[i]);
        free(saved[i]);
    }
}

/* torch_reference.py's lines: "  torch 1.13.0: 2 threads (interop 1), ATen CPU
 * capability AVX2", "  BLAS: <libraries>; OpenBLAS kernel Haswell",
 * "  throughput 5106 tok/s". */
static void torch_run_line(const char *line, void *ctx) {
    TorchRun *r = ctx;
    const char *p;
    sscanf(line, "  throughput %lf tok/s", &r->tok_s);
    if ((p = strstr(line, "ATen CPU capability "))) sscanf(p, "ATen CPU capability %15s", r->capability);
    if (!strncmp(line, "  BLAS: ", 8)) {
        snprintf(r->blas, sizeof r->blas, "%s", line + 8);
        r->blas[strcspn(r->blas, "\n")] = 0;
        if ((p = strstr(r->blas, "; OpenBLAS kernel "))) sscanf(p, "; OpenBLAS kernel %63s", r->kernel);
    }
}

/* Runs experiments/torch_reference.py with the same configuration under
 * setting `s`, `warmup` + `steps` steps; 0 with *r filled, or -1 (said). */
static int bench_torch(const Config *cfg, const TorchSetting *s, int warmup, int steps, bool quiet, const char *openblas,
                       TorchRun *r) {
    char args[256];
    snprintf(args, sizeof args,
             "--layers %d --d_model %d --heads %d --context %d --batch %d --warmup %d --steps %d --threads %d",
             cfg->model.layers, cfg->model.d_model, cfg->model.heads, cfg->model.context, cfg->train.batch, warmup,
             steps, s->threads);
    memset(r, 0, sizeof *r);
    char *saved[N_TORCH_ENV];
    torch_env_set(s, openblas, saved);
    int rc = run_python_script("torch_reference.py", args, quiet, torch_run_line, r);
    torch_env_restore(saved);
    if (rc != 0) return -1;
    if (r->tok_s <= 0) {
        fprintf(stderr, "error: --vs-torch: experiments/torch_reference.py printed no throughput\n"
                        "hint: run it by hand to see why: python3 experiments/torch_reference.py --steps 1\n");
        return -1;
    }
    return 0;
}

/* --vs-torch: a short probe of each plausible PyTorch setting on this host
 * (torch_candidates, then the fastest with ATen's AVX-512 kernels when the CPU
 * has AVX-512 and PyTorch did not pick them), then --rounds rounds of attnlab
 * and PyTorch under the fastest setting, one after the other, and the medians
 * of the rounds' ratios and of each side. */
static int bench_vs_torch(const Options *o, const Config *cfg, int threads) {
    char openblas[1024], label[256]; /* torch_setting_label: < 160 */
    our_openblas(openblas, sizeof openblas);
    const char *kernel = engine_blas_kernel();
    TorchSetting c[8];
    int n = torch_candidates(threads, c), probe_steps = o->steps < 5 ? o->steps : 5, best = 0;
    bool avx512_tried = false;
    double probe_tok_s[8];
    TorchRun r;
    printf("PyTorch (experiments/torch_reference.py, the same model): a probe of each setting, 1 warm-up + %d timed "
           "step%s\n(N threads: torch.set_num_threads(N), OMP_NUM_THREADS and OPENBLAS_NUM_THREADS N, set before "
           "torch loads):\n",
           probe_steps, probe_steps == 1 ? "" : "s");
    for (int i = 0; i < n; i++) {
        if (bench_torch(cfg, &c[i], 1, probe_steps, true, openblas, &r) != 0) return 1;
        printf("  %6.0f tok/s  ATen %-7s %s\n", r.tok_s, r.capability, torch_setting_label(&c[i], label, sizeof label));
        probe_tok_s[i] = r.tok_s;
        if (r.tok_s > probe_tok_s[best]) best = i;
        /* ATen's AVX-512 kernels are built in but, as of torch 1.13, picked only on CPUs it knows */
        if (i == n - 1 && !avx512_tried && cpu_has_avx512() && strcasecmp(r.capability, "AVX512")) {
            avx512_tried = true;
            c[n] = c[best];
            c[n++].aten_avx512 = true;
        }
    }
    const TorchSetting *win = &c[best];
    printf("  fastest: %s\n", torch_setting_label(win, label, sizeof label));

    double ours[100], theirs[100], ratio[100]; /* rounds <= 100 (--rounds) */
    for (int k = 0; k < o->rounds; k++) {
        printf("\nround %d of %d, attnlab:\n", k + 1, o->rounds);
        ours[k] = bench_train(o, cfg);
        printf("\nround %d of %d, PyTorch (%s):\n", k + 1, o->rounds, label);
        if (bench_torch(cfg, win, 3, o->steps, false, openblas, &r) != 0) return 1;
        theirs[k] = r.tok_s;
        ratio[k] = ours[k] / theirs[k];
        printf("round %d: attnlab %.0f tok/s, PyTorch %.0f tok/s, ratio %.2fx\n", k + 1, ours[k], theirs[k], ratio[k]);
    }

    printf("\npaired rounds (each attnlab's run, then PyTorch's):\n  %5s %14s %14s %8s\n", "round", "attnlab tok/s",
           "PyTorch tok/s", "ratio");
    for (int k = 0; k < o->rounds; k++) printf("  %5d %14.0f %14.0f %7.2fx\n", k + 1, ours[k], theirs[k], ratio[k]);
    double m_ours = median_of(ours, o->rounds), m_theirs = median_of(theirs, o->rounds),
           m_ratio = median_of(ratio, o->rounds);
    printf("  %5s %14.0f %14.0f %7.2fx\n", "median", m_ours, m_theirs, m_ratio);

    /* The library and kernel of the last PyTorch run, against attnlab's */
    bool same_lib = *openblas && strstr(r.blas, openblas), same_kernel = !strcmp(r.kernel, kernel);
    printf("\nattnlab's BLAS: %s; OpenBLAS kernel %s\n", *openblas ? openblas : "unknown", kernel);
    printf("PyTorch's BLAS: %s\n", *r.blas ? r.blas : "not reported");
    if (!same_lib || !same_kernel)
        printf("note: PyTorch did not run attnlab's OpenBLAS%s%s, so the ratio also compares BLAS libraries\n",
               same_lib ? "" : " library", same_lib || same_kernel ? (same_kernel ? "" : " kernel") : " nor its kernel");
    char blas_note[160];
    if (same_kernel) snprintf(blas_note, sizeof blas_note, "OpenBLAS kernel %s in both", kernel);
    else snprintf(blas_note, sizeof blas_note, "OpenBLAS kernel %s, PyTorch's %s", kernel, *r.kernel ? r.kernel : "none");
    printf("\nattnlab / PyTorch throughput: %.2fx, the median of %d paired round%s (medians %.0f vs %.0f tok/s; "
           "PyTorch's fastest setting: %s; %s)\n",
           m_ratio, o->rounds, o->rounds == 1 ? "" : "s", m_ours, m_theirs, label, blas_note);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./bench [--ops] [--threads N] [--steps N] [--reps N] [--key value ...]\n"
            "       ./bench --vs-torch [--rounds N] [--threads N] [--steps N] [--key value ...]\n"
            "       ./bench --scaling [--attn X] [--vs-torch] [--lengths 512,1024,...] [--rounds N] [--threads N]\n"
            "                 [--reps N]\n"
            "\n"
            "  (default)    training throughput on the reference configuration (4 layers,\n"
            "               d_model 256, 4 heads, context 256, batch 16; model and batch\n"
            "               options may be changed with --key value), with a per-op breakdown\n"
            "  --vs-torch   also run experiments/torch_reference.py, the same model in PyTorch, at its\n"
            "               fastest setting here: a short probe (1 warm-up + 5 steps) of 1 thread and\n"
            "               of --threads threads with OpenMP's wait variables unset, OMP_WAIT_POLICY\n"
            "               PASSIVE or ACTIVE, or as attnlab runs (GOMP_SPINCOUNT=1000), then of the\n"
            "               fastest with ATEN_CPU_CAPABILITY=avx512 on an AVX-512 CPU. Then --rounds\n"
            "               rounds of attnlab and PyTorch in turn: each round's pair and ratio, the\n"
            "               medians, and the OpenBLAS library and kernel of each. PyTorch inherits\n"
            "               OPENBLAS_CORETYPE, and LD_LIBRARY_PATH makes its libblas.so.3 attnlab's\n"
            "               OpenBLAS where that library's folder has one. With --scaling,\n"
            "               experiments/torch_scaling.py, the causal cosformer layer in PyTorch, at\n"
            "               the same lengths\n"
            "  --ops        time each op: the matmul products of a training step against raw\n"
            "               cblas_sgemm on the same shapes, then the other ops\n"
            "  --scaling    one attention layer (projections and kernel, d_model 256, 4 heads, B 1),\n"
            "               forward + backward, at each length: time per step and per token, arena\n"
            "               peak and RSS peak; then the kernel alone. Softmax and causal cosformer,\n"
            "               or the --attn kernel (linformer runs bidirectionally). Writes\n"
            "               bench-scaling.csv, bench-scaling.png and bench-scaling-memory.png in the\n"
            "               current folder. Default 2 threads. Skips a length whose memory would\n"
            "               pass 8 GiB (softmax keeps T x T per head)\n"
            "  --lengths L  --scaling's lengths, comma-separated (default 512,1024,...,16384)\n"
            "  --rounds N   --scaling sweeps the lengths N times (default 3) and reports each row's\n"
            "               median over the sweeps, so that a burst of other load spoils no one row;\n"
            "               --vs-torch runs N paired rounds (default 3) and reports the medians\n"
            "  --threads N  threads for OpenMP and OpenBLAS (default: all cores)\n"
            "  --steps N    timed training steps, after 3 warm-up steps (default 10)\n"
            "  --reps N     timed runs per --ops figure (default 21) or --scaling row (default: 5,\n"
            "               or about 1 s of runs when they are short, up to 100; 3 past 1 s a run);\n"
            "               each figure is their median\n"
            "  --attn X     the kernel to measure (softmax, linear, cosformer, linformer); with model\n"
            "               options such as --phi or --talking_heads. attn=linformer has no causal\n"
            "               form: it runs with objective mlm unless --objective is given\n");
}

/* "512,1024,2048" into o->lengths. */
static int parse_lengths(const char *flag, const char *v, Options *o) {
    o->n_lengths = 0;
    const char *p = v;
    while (p && *p && o->n_lengths < 32) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > 1 << 20) break;
        o->lengths[o->n_lengths++] = (int)x;
        if (*end == '\0') return 0;
        if (*end != ',' || end[1] == '\0') break;
        p = end + 1;
    }
    fprintf(stderr, "error: %s: expected up to 32 comma-separated lengths in [1, 1048576], got '%s'\n", flag, v ? v : "");
    return -1;
}

int main(int argc, char **argv) {
    command_startup(argc, argv);
    Options o = {.reps = 21, .threads = 0, .steps = 10};
    bool objective_given = false;
    /* The reference configuration: the defaults, at d_model 256 and T 256. */
    Config cfg;
    config_defaults(&cfg);
    cfg.model.d_model = 256;
    cfg.model.context = 256;
    Err e;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--ops")) {
            o.ops = true;
        } else if (!strcmp(a, "--vs-torch")) {
            o.vs_torch = true;
        } else if (!strcmp(a, "--threads")) {
            if (parse_int_arg(a, i + 1 < argc ? argv[++i] : NULL, 1, 1024, &o.threads)) return 2;
        } else if (!strcmp(a, "--scaling")) {
            o.scaling = true;
        } else if (!strcmp(a, "--lengths")) {
            if (parse_lengths(a, i + 1 < argc ? argv[++i] : NULL, &o)) return 2;
        } else if (!strcmp(a, "--rounds")) {
            if (parse_int_arg(a, i + 1 < argc ? argv[++i] : NULL, 1, 100, &o.rounds)) return 2;
        } else if (!strcmp(a, "--reps")) {
            if (parse_int_arg(a, i + 1 < argc ? argv[++i] : NULL, 1, 100000, &o.reps)) return 2;
            o.reps_given = true;
        } else if (!strcmp(a, "--steps")) {
            if (parse_int_arg(a, i + 1 < argc ? argv[++i] : NULL, 1, 100000, &o.steps)) return 2;
        } else if (!strncmp(a, "--", 2) && option_find(a + 2) &&
                   (option_find(a + 2)->group == GROUP_MODEL || !strcmp(a + 2, "batch"))) {
            if (i + 1 >= argc) {
                fprintf(stderr, "error: %s: needs a value\n", a);
                return 2;
            }
            if (option_set(&cfg, a + 2, argv[++i], &e) != 0) {
                err_print(&e);
                return 2;
            }
            if (!strcmp(a + 2, "attn")) o.attn_given = true;
            if (!strcmp(a + 2, "objective")) objective_given = true;
        } else {
            fprintf(stderr, "error: unknown option '%s'\nhint: ./bench --help lists the options\n", a);
            return 2;
        }
    }
    if (cfg.model.attn == ATTN_LINFORMER && !objective_given) {
        cfg.model.objective = OBJECTIVE_MLM;
        printf("attn=linformer has no causal form: measuring objective=mlm (bidirectional)\n");
    }
    if (config_validate(&cfg, &e) != 0) {
        err_print(&e);
        return 2;
    }
    if (o.scaling && o.ops) {
        fprintf(stderr, "error: --scaling: runs on its own, not with --ops\n");
        return 2;
    }
    if (o.scaling && o.vs_torch && o.attn_given && cfg.model.attn != ATTN_COSFORMER) {
        fprintf(stderr, "error: --scaling --vs-torch: compares the causal cosformer layer only\n"
                        "hint: drop --attn, or use --attn cosformer\n");
        return 2;
    }
    if (o.scaling && o.vs_torch &&
        (cfg.model.objective != OBJECTIVE_CLM || model_key_size(&cfg.model) != cfg.model.d_model / cfg.model.heads ||
         model_head_size(&cfg.model) != cfg.model.d_model / cfg.model.heads)) {
        fprintf(stderr, "error: --scaling --vs-torch: the PyTorch layer is causal, with key_size = head_size = "
                        "d_model / heads\n");
        return 2;
    }
    if (!o.n_lengths)
        for (int T = 512; T <= 16384; T *= 2) o.lengths[o.n_lengths++] = T;
    if (o.scaling && !o.threads) o.threads = 2; /* the 2-core setting */
    if (o.rounds && !o.scaling && !o.vs_torch) {
        fprintf(stderr, "error: --rounds: only with --scaling or --vs-torch\n");
        return 2;
    }
    if (!o.rounds) o.rounds = 3;
    int threads = engine_set_threads(o.threads);
    printf("attnlab bench: %s\n(%s)\n\n", threads_banner(threads), openblas_get_config());
    if (o.scaling) return bench_scaling(&o, &cfg, threads);
    if (o.ops) {
        printf("matmul, (4096 x 256) . (256 x 768), B stored [K, N]:\n");
        bench_matmul(&o, 4096, 256, 768, false);
        printf("\nmatmul, (4096 x 256) . (768 x 256)^T, B stored [N, K] (a linear layer's weight):\n");
        bench_matmul(&o, 4096, 256, 768, true);
        printf("\nother ops (B=16, T=256, d=256, 4 heads):\n");
        bench_pointwise(&o);
        return 0;
    }
    if (o.vs_torch) return bench_vs_torch(&o, &cfg, threads);
    bench_train(&o, &cfg);
    return 0;
}
