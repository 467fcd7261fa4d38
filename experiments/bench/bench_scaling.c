/* bench_scaling.c: ./bench --scaling, how one attention layer's time and
 * memory grow with the length.
 *
 * The layer is the attention module: x [1, T, d] -> q, k, v projections, the
 * kernel, the output projection (no norm, no MLP), forward and backward (with
 * dx, as in a model) from a random output gradient; d 256 and 4 heads (the
 * reference configuration), B 1, 2 threads unless --threads says otherwise.
 * Then the kernel alone, the same way: its fused op from q, k, v to the
 * per-head output and back to dq, dk, dv (and its own parameters' gradients),
 * in the layout the module gives it (forward_qkv: one [B, T, H (2 dk + dv)] tensor, no split).
 * For T = 512, 1024, ... 16384 (--lengths), per kernel: the default and the
 * causal attn_scaling_reference (layers/attention/kernel.h), or the one
 * --attn names. Per row: the median time per
 * step of --reps timed steps (default 5, or about a second of steps when they
 * are short, up to 100; 3 when a step takes over a second)
 * after one warm-up step and the fastest of them (the better estimate on a
 * busy machine), time per token, the arena's peak bytes over those
 * steps (every activation, gradient and saved tensor of the layer, or of the
 * kernel; not the inputs x or q, k, v, nor the parameters, 1 MiB here), and
 * the process's peak RSS during the layer's steps. A kernel whose estimated memory passes the cap (8 GiB, or 3/4 of
 * RAM if less) is skipped at that length with a note (talking heads keeps
 * P, B H T^2 floats, and T^2 scratch per head and thread in backward; the
 * plain softmax kernel nothing T x T). Then, per row, the layer against
 * sgemm: its time over the projections' raw products, and over what all its
 * products would take at the rate sgemm reached on the projections (the
 * kernel's own counted by AttnKernel.flops, e.g. softmax's 2 sum_i n_i
 * (4 dk + 3 dv) per head). Writes the table to
 * bench-scaling.csv, time per token against T to bench-scaling.png and the
 * arena peak against T to bench-scaling-memory.png, in the current folder.
 * With --vs-torch, the causal cosformer rows run again in PyTorch
 * (experiments/bench/torch_scaling.py: the same layer, chunked, with autograd; run
 * by bench_scaling_vs_torch in bench_torch.c) and the table gains PyTorch's
 * time, the ratio and PyTorch's memory.
 *
 * What it knows of a kernel comes from the registry (layers/attention/
 * kernel.h); the one name, attn_scaling_reference, is bench.h's. */
#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "gemm.h"
#include "model.h"
#include "ops.h"
#include "plot.h"
#include "rng.h"
#include "run.h"
#include "util.h"

double bench_rss_peak_mib(void) {
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

bool bench_rss_reset(void) {
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

/* The part of the layer's memory that grows faster than T (the kernel's
 * quadratic_bytes: softmax keeps P for backward). */
static double layer_quadratic_bytes(const ModelConfig *m, int T, int threads) {
    const AttnKernel *k = attn_kernel_for(m->attn);
    return k->quadratic_bytes ? k->quadratic_bytes(m, T, threads) : 0;
}

/* One forward + backward from x (the layer) or from q, k, v (the kernel). */
typedef struct {
    Attention *a;
    ParamSet *ps;
    int T, d;
    float *x, *q, *k, *v; /* inputs, outside the arena: q, k, v side by side in q with forward_qkv */
    float *seed_y, *seed_o;  /* the output gradients: layer [1, T, d], kernel [1, H, T, head_size]
                                (or [1, T, H head_size], forward_qkv) */
    bool kernel_only;
    /* q, k, v as the module stores them under precision bf16 (layers.h,
     * bf16_store), made once from q, k, v; NULL: fp32 */
    uint16_t *q16, *k16, *v16;
} ScalingStep;

/* t over n values stored in bf16 at p (the module's own tensors are). */
static void wrap16(Tensor *t, uint16_t *p, int ndim, const int *shape) {
    tensor_wrap(t, NULL, ndim, shape);
    t->dtype = DTYPE_BF16;
    t->data16 = p;
}

/* A bf16 copy of n floats, or NULL when `want` is false. */
static uint16_t *copy16(const float *x, long n, bool want) {
    if (!want) return NULL;
    uint16_t *p = xmalloc((size_t)n * sizeof *p);
    bf16_from_floats(p, x, n);
    return p;
}

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
    AttnCall c = attention_call(a, 1, st->T);
    Tensor q, k, v; /* in the layout the module gives the kernel */
    if (a->kernel->forward_qkv) {
        tensor_wrap(&q, st->q, 3, (int[]){1, st->T, a->heads * (2 * a->key_size + a->head_size)});
        q.requires_grad = true;
        backward_seeded(a->kernel->forward_qkv(&c, &q), st->seed_o);
        return;
    }
    const int qk_shape[4] = {1, a->heads, st->T, a->key_size}, v_shape[4] = {1, a->heads, st->T, a->head_size};
    if (st->q16) wrap16(&q, st->q16, 4, qk_shape); else tensor_wrap(&q, st->q, 4, qk_shape);
    if (st->k16) wrap16(&k, st->k16, 4, qk_shape); else tensor_wrap(&k, st->k, 4, qk_shape);
    if (st->v16) wrap16(&v, st->v16, 4, v_shape); else tensor_wrap(&v, st->v, 4, v_shape);
    q.requires_grad = k.requires_grad = v.requires_grad = true;
    backward_seeded(a->kernel->forward(&c, &q, &k, &v), st->seed_o);
}

/* Median and fastest of `reps` steps after one warm-up, in a fresh arena.
 * Without --reps: 5, or as many as fill about a second (at most 100) when
 * steps are short, so that a short row's median is not a handful of noisy
 * milliseconds; 3 when the warm-up took over a second. */
static Timing time_steps(const BenchOptions *o, const ScalingStep *st) {
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
static double time_projections(const BenchOptions *o, const Attention *a, int T, int d, double *gflop) {
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

/* What all of a row's products would take at the rate sgemm reached on its
 * projections, in ms: the projections' work and the kernel's counted work
 * (NAN when the kernel does not count it). */
static double cost_ms(const ScalingRow *r) { return (r->sgemm_gflop + r->kernel_gflop) / r->sgemm_gflop * r->sgemm_ms; }

/* Times forward + backward of one attention layer at length T, then of its
 * kernel alone, then the projections' sgemm calls alone. */
static ScalingRow scaling_row(const BenchOptions *o, const ModelConfig *base, int T) {
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
                      false,
                      NULL,
                      NULL,
                      NULL};
    /* the kernel alone gets q, k, v stored as attention_forward stores them */
    AttnCall call = attention_call(&a, 1, T);
    bool v16 = !fused && gemm_precision() == PRECISION_BF16 && (bf16_store & BF16_STORE_QKV) && a.kernel->qkv16(&call);
    bool qk16 = v16 && !(pos_scheme(mc.pos)->rotary && !a.kernel->rope_inside);
    st.q16 = copy16(st.q, nk, qk16), st.k16 = copy16(st.k, nk, qk16), st.v16 = copy16(st.v, nv, v16);
    bool rss_reset = bench_rss_reset();
    row.layer = time_steps(o, &st);
    row.rss_mib = rss_reset ? bench_rss_peak_mib() : NAN; /* the layer's: it holds the kernel's */
    st.kernel_only = true;
    row.kernel = time_steps(o, &st);
    row.sgemm_ms = time_projections(o, &a, T, mc.d_model, &row.sgemm_gflop) * 1e3;
    ModelConfig eff = attn_effective(&mc); /* cosformer: linear with its options */
    row.kernel_gflop = a.kernel->flops ? a.kernel->flops(&eff, T) / 1e9 : NAN;
    free(st.x), free(st.q), free(st.k), free(st.v), free(st.seed_y), free(st.seed_o);
    free(st.q16), free(st.k16), free(st.v16);
    params_free(&ps);
    return row;
}

/* "cosformer causal", "linear phi=elu reweight=cos causal", "linformer k=64 bidirectional",
 * "softmax window=64 causal" ... */
const char *bench_kernel_label(const ModelConfig *m, char *buf, size_t size) {
    const AttnChoice *choice = attn_choice(m->attn);
    char extra[64] = ""; /* a preset's name says its options */
    if (!choice->preset && choice->kernel->describe) choice->kernel->describe(m, extra, sizeof extra);
    snprintf(buf, size, "%s%s %s", choice->name, extra, m->objective == OBJECTIVE_CLM ? "causal" : "bidirectional");
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

/* The kernels --scaling measures: the default and attn_scaling_reference,
 * causal, unless --attn named one. Their number, or -1 (said). */
static int scaling_kernels(const BenchOptions *o, const Config *cfg, ModelConfig kernels[2]) {
    if (o->attn_given) {
        kernels[0] = cfg->model;
        return 1;
    }
    const int defaults[] = {attn_find(option_find("attn")->def), attn_find(attn_scaling_reference)};
    for (int i = 0; i < 2; i++) {
        Config c = *cfg;
        c.model.attn = defaults[i];
        Err e;
        if (config_validate(&c, &e) != 0) {
            err_print(&e);
            return -1;
        }
        kernels[i] = c.model;
    }
    return 2;
}

static void print_header(const BenchOptions *o, const Config *cfg, int threads) {
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
}

enum { MAX_ROWS = 2 * BENCH_MAX_LENGTHS };

/* Every round sweeps all the lengths; a row's figures are then the median
 * over the rounds (the fastest step: the fastest of all; memory: the
 * largest), so that a few seconds of other load on a shared machine spread
 * over the rows instead of spoiling one of them. Rows into rows[MAX_ROWS];
 * returns their number. */
static int measure_rounds(const BenchOptions *o, const ModelConfig *kernels, int n_kernels, int threads,
                          ScalingRow *rows) {
    double cap = memory_cap_bytes();
    ScalingRow *by_round = xmalloc((size_t)o->rounds * MAX_ROWS * sizeof *by_round);
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
                bench_kernel_label(&kernels[k], label, sizeof label);
                const AttnKernel *kern = attn_kernel_for(kernels[k].attn);
                Err why;
                if (kern->check_length && kern->check_length(&kernels[k], T, &why) != 0) {
                    if (!round) printf("  %-32s %6d  (skipped: %s)\n", label, T, why.msg);
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
        for (int i = 0; i < n_rows; i++) print_row(bench_kernel_label(&kernels[rows[i].kernel_i], label, sizeof label), &rows[i]);
    }
    if (skipped[0]) printf("\n  not run (memory cap %.1f GiB): %s\n", cap / (1 << 30), skipped);
    return n_rows;
}

/* The causal linear-time reference: flat time per token, linear memory, the T = 8192 target. */
static void print_reference(const ScalingRow *rows, int n_rows) {
    const ScalingRow *first = NULL, *last = NULL;
    double lo = INFINITY, hi = 0, lo_best = INFINITY, hi_best = 0;
    for (int i = 0; i < n_rows; i++) {
        if (rows[i].attn != attn_find(attn_scaling_reference)) continue;
        if (!first) first = &rows[i];
        last = &rows[i];
        double per = rows[i].layer.step_s / rows[i].T, best = rows[i].layer.best_s / rows[i].T;
        lo = fmin(lo, per), hi = fmax(hi, per);
        lo_best = fmin(lo_best, best), hi_best = fmax(hi_best, best);
    }
    if (first && last != first)
        printf("\n  %s, T %d to %d: layer time per token %.2f to %.2f us (max / min %.2f; of the fastest\n"
               "  steps %.2f to %.2f, max / min %.2f); layer arena %.1f KiB per token at T %d, %.1f at T %d\n",
               attn_scaling_reference, first->T, last->T, lo * 1e6, hi * 1e6, hi / lo, lo_best * 1e6, hi_best * 1e6, hi_best / lo_best,
               first->layer.arena_mib * 1024 / first->T, first->T, last->layer.arena_mib * 1024 / last->T, last->T);
}

/* Against sgemm: the layer over its projections' raw products, and over what
 * all its products (the projections' and, where the kernel counts them, its
 * own) would take at the rate sgemm reached on the projections in the same row. */
static void print_against_sgemm(const ModelConfig *kernels, const ScalingRow *rows, int n_rows) {
    char label[64];
    printf("\n  against sgemm (the rate: the projections' raw products in the same row)\n");
    printf("  %-32s %6s | %8s %8s %8s | %8s %8s %8s | %s\n", "kernel", "T", "layer ms", "proj ms", "ratio",
           "GFLOP/s", "kern GF", "cost ms", "layer/cost");
    for (int i = 0; i < n_rows; i++) {
        const ScalingRow *r = &rows[i];
        double rate = r->sgemm_gflop / r->sgemm_ms * 1e3, cost = cost_ms(r);
        printf("  %-32s %6d | %8.1f %8.1f %8.2f | %8.0f", bench_kernel_label(&kernels[r->kernel_i], label, sizeof label),
               r->T, r->layer.step_s * 1e3, r->sgemm_ms, r->layer.step_s * 1e3 / r->sgemm_ms, rate);
        if (isnan(r->kernel_gflop)) printf(" %8s %8s | %9s\n", "-", "-", "-");
        else printf(" %8.1f %8.1f | %9.2f\n", r->kernel_gflop, cost, r->layer.step_s * 1e3 / cost);
    }
}

/* bench-scaling.csv. 0, or -1 with e set. */
static int write_csv(const ModelConfig *kernels, const ScalingRow *rows, int n_rows, Err *e) {
    char label[64];
    size_t cap_text = 360 + (size_t)n_rows * 300, len = 0;
    char *csv = xmalloc(cap_text);
    len += (size_t)snprintf(csv + len, cap_text - len,
                            "kernel,T,layer_ms,layer_fastest_ms,layer_us_per_token,layer_arena_mib,"
                            "kernel_ms,kernel_fastest_ms,kernel_arena_mib,sgemm_ms,sgemm_gflop,kernel_gflop,cost_ms,rss_mib,torch_ms,torch_fastest_ms,"
                            "torch_growth_mib\n");
    for (int i = 0; i < n_rows; i++) {
        const ScalingRow *r = &rows[i];
        char torch[96] = ",,"; /* empty fields without --vs-torch */
        if (!isnan(r->torch_ms))
            snprintf(torch, sizeof torch, "%.4f,%.4f,%.2f", r->torch_ms, r->torch_best_ms, r->torch_growth_mib);
        char counted[64] = ","; /* kernel_gflop and cost_ms, empty when the kernel does not count */
        if (!isnan(r->kernel_gflop))
            snprintf(counted, sizeof counted, "%.6f,%.4f", r->kernel_gflop, cost_ms(r));
        len += (size_t)snprintf(csv + len, cap_text - len, "%s,%d,%.4f,%.4f,%.5f,%.2f,%.4f,%.4f,%.2f,%.4f,%.4f,%s,%.2f,%s\n",
                                bench_kernel_label(&kernels[r->kernel_i], label, sizeof label), r->T, r->layer.step_s * 1e3, r->layer.best_s * 1e3,
                                r->layer.step_s * 1e6 / r->T, r->layer.arena_mib, r->kernel.step_s * 1e3,
                                r->kernel.best_s * 1e3, r->kernel.arena_mib, r->sgemm_ms, r->sgemm_gflop, counted, r->rss_mib, torch);
    }
    int rc = write_file_atomic("bench-scaling.csv", csv, e);
    free(csv);
    return rc;
}

/* The plots: per kernel, the layer (solid) and the kernel alone; with
 * --vs-torch, PyTorch's cosformer layer (its memory: the growth of its RSS).
 * 0, or -1 with e set. */
static int write_plots(const BenchOptions *o, const ModelConfig *kernels, int n_kernels, const ScalingRow *rows,
                       int n_rows, Err *e) {
    double xs[5][32], ys[5][32];
    PlotSeries series[5];
    char labels[5][80], label[64];
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
                snprintf(labels[n_series], sizeof labels[n_series], "%s, %s", bench_kernel_label(&kernels[k], label, sizeof label),
                         parts[part]);
                series[n_series] = (PlotSeries){labels[n_series], xs[n_series], ys[n_series], n, 0};
                n_series++;
            }
        if (!n_series) break;
        PlotSpec spec = {"one attention layer, forward + backward", "length T",
                         what ? (o->vs_torch ? "arena peak; PyTorch: RSS growth (MiB)" : "arena peak (MiB)")
                              : "time per token (us)",
                         1, what, 0, 0, 0};
        if (plot_lines(what ? "bench-scaling-memory.png" : "bench-scaling.png", &spec, series, n_series, e) != 0)
            return -1;
    }
    return 0;
}

int bench_scaling(const BenchOptions *o, const Config *cfg, int threads) {
    ModelConfig kernels[2];
    int n_kernels = scaling_kernels(o, cfg, kernels);
    if (n_kernels < 0) return 2;
    print_header(o, cfg, threads);
    ScalingRow rows[MAX_ROWS];
    int n_rows = measure_rounds(o, kernels, n_kernels, threads, rows);
    print_reference(rows, n_rows);
    print_against_sgemm(kernels, rows, n_rows);
    /* PyTorch runs the causal reference layer: kernels[1] when --attn named
     * none (kernels[0] is the default kernel), the one named otherwise */
    const ModelConfig *reference = NULL;
    for (int k = 0; k < n_kernels; k++)
        if (kernels[k].attn == attn_find(attn_scaling_reference)) reference = &kernels[k];
    if (o->vs_torch && reference && bench_scaling_vs_torch(o, reference, threads, rows, n_rows) != 0) return 1;
    Err e;
    if (write_csv(kernels, rows, n_rows, &e) != 0 || write_plots(o, kernels, n_kernels, rows, n_rows, &e) != 0) {
        err_print(&e);
        return 1;
    }
    printf("\nwrote bench-scaling.csv, bench-scaling.png (time per token) and bench-scaling-memory.png\n");
    return 0;
}
