/* spectrum.c: ./spectrum RUN_DIR_OR_CHECKPOINT [corpus.txt] [--samples N] [--length T] [--eigen]
 *
 * The Linformer paper's analysis (Wang et al. 2020, section 3): take the
 * attention matrix P of every layer and head over held-out text and compute
 * its singular values. The normalised cumulative spectrum
 *   c(k) = sum_{i <= k} s_i / sum_i s_i
 * averaged over the windows says how much of P a rank-k matrix can hold. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "checkpoint.h"
#include "corpus.h"
#include "interrupt.h"
#include "ladder.h"
#include "memory.h"
#include "open.h"
#include "output_check.h"
#include "page.h"
#include "plot.h"
#include "progress.h"
#include "run.h"
#include "spectrum_pairs.h"
#include "startup.h"
#include "stats.h"

/* LAPACK (in OpenBLAS), column-major. */
void sgesdd_(const char *jobz, const int *m, const int *n, float *a, const int *lda, float *s, float *u,
             const int *ldu, float *vt, const int *ldvt, float *work, const int *lwork, int *iwork, int *info);
void sgeev_(const char *jobvl, const char *jobvr, const int *n, float *a, const int *lda, float *wr, float *wi,
            float *vl, const int *ldvl, float *vr, const int *ldvr, float *work, const int *lwork, int *info);

typedef struct {
    int layers, heads, rows, cols; /* P is rows x cols (T x T, or T x k for Linformer) */
    int n_values;                  /* min(rows, cols) singular values, or rows eigenvalues */
    bool eigen;
    double *sum_c; /* [layers][heads][n_values]: c(k) summed over windows */
    double *sum_s; /* the same for the values themselves */
    float *a, *s, *wi, *work;
    int *iwork;
    int lwork;
    int windows;
    bool failed;
} Spectrum;

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Singular values (or eigenvalue moduli) of one P, descending, into sp->s. */
static bool head_values(Spectrum *sp, const float *P) {
    int m = sp->cols, n = sp->rows, info = 0, one = 1;
    /* Row-major P is column-major P^T: same singular values; eigenvalues of P^T
     * are those of P. */
    memcpy(sp->a, P, (size_t)m * n * sizeof(float));
    if (sp->eigen) {
        sgeev_("N", "N", &n, sp->a, &n, sp->s, sp->wi, NULL, &one, NULL, &one, sp->work, &sp->lwork, &info);
        for (int i = 0; i < n; i++) sp->s[i] = hypotf(sp->s[i], sp->wi[i]);
        qsort(sp->s, (size_t)n, sizeof(float), cmp_desc);
    } else {
        sgesdd_("N", &m, &n, sp->a, &m, sp->s, NULL, &one, NULL, &one, sp->work, &sp->lwork, sp->iwork, &info);
    }
    return info == 0;
}

/* Sizes the buffers from the first P, and asks LAPACK for its workspace. */
static void spectrum_init(Spectrum *sp, const Tensor *P) {
    sp->rows = P->shape[2];
    sp->cols = P->shape[3];
    sp->n_values = sp->rows < sp->cols ? sp->rows : sp->cols;
    long nv = sp->eigen ? sp->rows : sp->n_values;
    sp->sum_c = xcalloc((size_t)sp->layers * sp->heads * nv, sizeof(double));
    sp->sum_s = xcalloc((size_t)sp->layers * sp->heads * nv, sizeof(double));
    sp->a = xmalloc((size_t)sp->rows * sp->cols * sizeof(float));
    sp->s = xmalloc((size_t)sp->rows * sizeof(float) + sizeof(float));
    sp->wi = xmalloc((size_t)sp->rows * sizeof(float));
    sp->iwork = xmalloc((size_t)8 * sp->n_values * sizeof(int));
    int m = sp->cols, n = sp->rows, one = 1, info = 0, query = -1;
    float size = 0;
    if (sp->eigen)
        sgeev_("N", "N", &n, sp->a, &n, sp->s, sp->wi, NULL, &one, NULL, &one, &size, &query, &info);
    else
        sgesdd_("N", &m, &n, sp->a, &m, sp->s, NULL, &one, NULL, &one, &size, &query, sp->iwork, &info);
    sp->lwork = (int)size + 1;
    sp->work = xmalloc((size_t)sp->lwork * sizeof(float));
    if (sp->eigen) sp->n_values = sp->rows;
}

static void spectrum_free(Spectrum *sp) {
    free(sp->sum_c), free(sp->sum_s), free(sp->a), free(sp->s), free(sp->wi), free(sp->iwork), free(sp->work);
}

static void on_layer(int layer, const Tensor *P, void *ctx) {
    Spectrum *sp = ctx;
    if (interrupt_signal()) return; /* the window loop stops next */
    if (!sp->sum_c) spectrum_init(sp, P);
    for (int h = 0; h < sp->heads; h++) {
        if (!head_values(sp, P->data + (long)h * sp->rows * sp->cols)) {
            sp->failed = true;
            return;
        }
        double total = 0, run = 0;
        for (int i = 0; i < sp->n_values; i++) total += sp->s[i];
        double *c = sp->sum_c + ((long)layer * sp->heads + h) * sp->n_values;
        double *s = sp->sum_s + ((long)layer * sp->heads + h) * sp->n_values;
        for (int i = 0; i < sp->n_values; i++) {
            s[i] += sp->s[i];
            run += sp->s[i];
            c[i] += total > 0 ? run / total : 0.0;
        }
    }
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./spectrum RUN_DIR_OR_CHECKPOINT [...] [corpus.txt] [--samples N] [--length T] [--eigen] [--out DIR]\n"
            "                  [--threads N]\n"
            "       ./spectrum --paired GRID/POINT_A GRID/POINT_B [--within X] [--within_k K] [--plan 3,6,12]\n"
            "       ./spectrum --ladder INIT_S0/POINT TRAINED_S0/POINT INIT_S1/POINT TRAINED_S1/POINT ... --out DIR\n"
            "                  [--within X] [--within_k K] [--plan 3,6,12]\n"
            "\n"
            "Takes the attention matrix P of every layer and head over N held-out windows of T bytes\n"
            "(the validation split's fixed windows) and computes its singular values with LAPACK's\n"
            "sgesdd. Writes the normalised cumulative spectrum c(k) = sum_{i<=k} s_i / sum_i s_i,\n"
            "averaged over the windows, as spectrum.csv (layer, head, k, c, and s: the k-th value\n"
            "itself, averaged over the windows), spectrum.png (one curve per layer, averaged over\n"
            "heads, over light per-head curves), singular-values.png (s by k on a log scale, the same\n"
            "way) and heatmap.png (c(T/4) per layer and head), and prints per layer c(T/4) and the k\n"
            "that reaches 90%% and 99%%.\n"
            "\n"
            "A causal P is lower triangular, so its eigenvalues are just its diagonal: singular values\n"
            "are the meaningful spectrum. --eigen uses eigenvalue moduli instead (LAPACK sgeev).\n"
            "\n"
            "Several runs (seeds of one model, say): each gets the outputs above in its own folder, then\n"
            "a table gives per layer the mean over the runs of c(T/4), k 90%% and k 99%% with 95%%\n"
            "intervals (t), written with a plot of c(T/4) by layer as spectrum-summary.csv and\n"
            "spectrum-summary.png into --out (default: the current folder). The last argument is the\n"
            "corpus unless it is a folder or a .safetensors file.\n"
            "\n"
            "  corpus.txt   default: the corpus recorded in the checkpoint, if it still exists\n"
            "  --samples N  windows (default 8)\n"
            "  --length T   window length (default: the model's context)\n"
            "  --out DIR    where the outputs go (default: the run folder); with several runs, where\n"
            "               the summary goes (default: the current folder)\n"
            "  --threads N  threads, at most the CPUs this process may use; 0 = all of them (default 0:\n"
            "               the run's thread count is not a request)\n"
            "\n"
            "--paired GRID/POINT_A GRID/POINT_B measures nothing: it reads the spectrum.csv of the\n"
            "run folders GRID/POINT_seed-<n> of both arms (a trained model's and its initialisation's,\n"
            "say) and prints, per layer and for the seeds both arms have, B - A of c(T/4) and of the\n"
            "k reaching 90%%, seed by seed, with the paired 95%% interval (t) and the verdict rule of\n"
            "EXPERIMENTS.md: excludes 0 (B < A or B > A), no effect larger than X (the interval within\n"
            "+-X, X at most --within for c, 0.02, and --within_k for k, 2), or inconclusive with the\n"
            "pairs that would resolve the difference seen (95%%, 80%% power). A run still on the byte\n"
            "plateau is set apart with its pair, unless it trained at learning rate 0 (an\n"
            "initialisation). sh scripts/results.sh spectrum-paired runs it on archived grids.\n"
            "--plan 3,6,12: the seed plan fixed before the runs (as ./ablate's): each interval at the\n"
            "plan's level over the first pairs of the last look reached.\n"
            "\n"
            "--ladder measures nothing either: the claim \"training makes P more skewed than its\n"
            "initialisation\" across compute, each rung two arms, the initialisations and the trained\n"
            "models, in order of compute. For the first and the last layer, c(T/4) (rises when P grows\n"
            "more skewed) and k 90%% (falls): per rung the model, tokens, FLOPs, pairs, the effect with\n"
            "its interval and the verdict, then the slope against log10 FLOPs and whether the first\n"
            "rung's verdict survives, as ./ablate --ladder writes them: DIR/ladder.md, ladder.csv,\n"
            "ladder.png and index.html.\n");
}

/* What ./spectrum measures, from the command line. */
typedef struct {
    const char *corpus_path, *out_dir; /* NULL: the checkpoint's corpus, the run folder */
    int samples, length;               /* length 0: the model's context */
    int threads;                       /* --threads: 0 = all the CPUs allowed */
    bool eigen;
} SpectrumArgs;

/* What the loaded model can be asked (the length, --eigen), and the corpus
 * and output folder: 0 with the corpus open, or the status to exit with (said). */
static int prepare(const char *target, const SpectrumArgs *a, const OpenRun *o, Corpus *corpus, int T) {
    const ModelConfig *mc = &o->info.cfg.model;
    const AttnKernel *kern = attn_kernel_for(mc->attn);
    Err e;
    if (pos_scheme(mc->pos)->bounded && T > mc->context) {
        fprintf(stderr, "error: --length %d: the model learned positions up to %d only\nhint: use --length %d or less\n",
                T, mc->context, mc->context);
        return 2;
    }
    if (kern->check_length && kern->check_length(mc, T, &e) != 0) return err_print(&e), 2;
    const char *corpus_path = a->corpus_path ? a->corpus_path : open_run_corpus(o);
    if (!corpus_path) {
        /* through err_set, which keeps a forged path on one line */
        err_set(&e, "no corpus given, and the checkpoint's (%s) is not there", open_run_corpus_said(o));
        err_hint(&e, "./spectrum %s corpus.txt", target);
        return err_print(&e), 2;
    }
    if (corpus_open(corpus, corpus_path, o->info.cfg.train.val_fraction, T, &e) != 0) return err_print(&e), 1;
    /* the folder the outputs go to: writable, checked before the measuring (output_check.h) */
    if (output_dir_check(a->out_dir ? "--out" : "the output folder", a->out_dir ? a->out_dir : o->dir, "--out DIR",
                         &e) != 0 ||
        make_dirs(a->out_dir ? a->out_dir : o->dir, &e) != 0) {
        err_print(&e);
        corpus_close(corpus);
        return 1;
    }
    if (a->eigen && kern->projected_probs) {
        fprintf(stderr, "error: --eigen: attn=%s's P is T x k, not square, so it has no eigenvalues\n",
                attn_choice(mc->attn)->name);
        corpus_close(corpus);
        return 2;
    }
    return 0;
}

/* Opens target, checks memory for every layer's P at length T, builds and
 * loads the model, then prepare: 0 with the model and corpus open, or the
 * status to exit with (said). */
static int open_one(const char *target, const SpectrumArgs *a, OpenRun *o, Model *m, Corpus *corpus, int *T) {
    Err e;
    int status = open_run(o, target, &e);
    if (status == 0) {
        *T = a->length ? a->length : o->info.cfg.model.context;
        char what[1200];
        snprintf(what, sizeof what, "%s: P of every layer at length %d", o->path, *T);
        OpenMemory need = {what, "use a shorter --length", *T, MEMORY_PROBS, engine_threads()};
        status = open_run_load(o, m, &need, false, &e);
    }
    if (status != 0) return err_print(&e), status;
    if ((status = prepare(target, a, o, corpus, *T)) != 0) model_free(m);
    return status;
}

/* sp's sums over the windows: every layer's P over `count` held-out windows
 * of T bytes. 0, or the status to exit with (said). */
static int measure(Spectrum *sp, Model *m, const Corpus *corpus, const char *ckpt, int T, int samples) {
    long count = corpus_val_count(corpus, T, samples);
    if (count == 0) {
        fprintf(stderr, "error: %s: the validation split is shorter than one window of %d bytes\n", corpus->path, T);
        return 1;
    }
    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    int *ids = xmalloc((size_t)(T + 1) * sizeof(int)), *targets = xmalloc((size_t)(T + 1) * sizeof(int));
    printf("spectrum: %s, %ld windows of %d bytes, %s, %s\n", ckpt, count, T,
           sp->eigen ? "eigenvalue moduli" : "singular values", threads_banner(engine_threads()));
    Progress prog;
    progress_init(&prog, "spectrum", count, stdout);
    for (long w = 0; w < count && !sp->failed && !interrupt_signal(); w++) {
        arena_reset(&arena);
        corpus_val_window(corpus, T, samples, w, ids, targets);
        model_attention_probs(m, ids, 1, T, on_layer, sp);
        if (interrupt_signal()) break;
        sp->windows++;
        progress_update(&prog, w + 1, NULL);
    }
    progress_finish(&prog, interrupt_signal() ? "interrupted" : NULL);
    free(ids), free(targets);
    engine_set_arena(NULL);
    arena_free(&arena);
    if (interrupt_signal()) {
        printf("interrupted after %d of %ld windows; nothing written\n", sp->windows, count);
        return interrupt_exit_status();
    }
    if (sp->failed) {
        fprintf(stderr, "error: LAPACK did not converge on an attention matrix\n");
        return 1;
    }
    return 0;
}

/* The sums become averages over the windows: c (sum_c) and the values
 * (sum_s) per layer and head, and per layer their means over the heads
 * (c_mean, s_mean) and the heads' c(T/4) (heat). */
typedef struct {
    int L, H, K, quarter;
    const double *c, *s;
    double *x, *c_mean, *s_mean, *heat;
    LayerSkew skew; /* per layer c(T/4), k 90% and k 99% (spectrum_pairs.h) */
} Averages;

static Averages averages(Spectrum *sp) {
    Averages v = {.L = sp->layers, .H = sp->heads, .K = sp->n_values, .c = sp->sum_c, .s = sp->sum_s};
    int L = v.L, H = v.H, K = v.K;
    for (long i = 0; i < (long)L * H * K; i++) sp->sum_c[i] /= sp->windows, sp->sum_s[i] /= sp->windows;
    v.quarter = K / 4 > 0 ? K / 4 : 1;
    v.x = xmalloc((size_t)K * sizeof(double));
    v.c_mean = xmalloc((size_t)L * K * sizeof(double));
    v.s_mean = xcalloc((size_t)L * K, sizeof(double));
    v.heat = xmalloc((size_t)L * H * sizeof(double));
    for (int k = 0; k < K; k++) v.x[k] = k + 1;
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < H; h++) {
            const double *c = v.c + ((long)l * H + h) * K, *s = v.s + ((long)l * H + h) * K;
            for (int k = 0; k < K; k++) v.s_mean[(long)l * K + k] += s[k] / H;
            v.heat[l * H + h] = c[v.quarter - 1];
        }
    }
    /* c's mean over the heads and the per-layer figures: the code that
     * ./spectrum --paired applies to spectrum.csv */
    layer_skew(v.c, L, H, K, v.c_mean, &v.skew);
    return v;
}

static void averages_free(Averages *v) { free(v->x), free(v->c_mean), free(v->s_mean), free(v->heat); }

/* spectrum.csv: layer, head, k, c, s. */
static int write_csv(const Averages *v, const char *dir, Err *e) {
    int L = v->L, H = v->H, K = v->K;
    size_t cap = (size_t)L * H * K * 56 + 64, len = 0;
    char *csv = xmalloc(cap);
    len += (size_t)snprintf(csv + len, cap - len, "layer,head,k,c,s\n");
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int k = 0; k < K; k++)
                len += (size_t)snprintf(csv + len, cap - len, "%d,%d,%d,%.6f,%.6g\n", l, h, k + 1,
                                        v->c[((long)l * H + h) * K + k], v->s[((long)l * H + h) * K + k]);
    char path[1200];
    int rc = path_join(path, sizeof path, dir, "spectrum.csv", e) != 0 || write_file_atomic(path, csv, e) != 0 ? -1 : 0;
    free(csv);
    return rc;
}

/* The table: per layer c(T/4) and the k reaching 90% and 99%, also into *skew. */
static void print_table(const Averages *v, bool eigen, LayerSkew *skew) {
    printf("\n%-6s %8s %8s %8s   (of %d %s)\n", "layer", "c(T/4)", "k 90%", "k 99%", v->K,
           eigen ? "eigenvalues" : "singular values");
    *skew = v->skew;
    for (int l = 0; l < skew->layers; l++)
        printf("%-6d %8.3f %8.0f %8.0f\n", l, skew->c_quarter[l], skew->k90[l], skew->k99[l]);
}

/* One plot of per-layer means over light per-head curves: mean [L][K] and
 * per_head [L][H][K]. */
static int plot_layers(const Averages *v, const double *mean, const double *per_head, const char *path,
                       const PlotSpec *spec, Err *e) {
    int L = v->L, H = v->H, K = v->K, n = 0;
    PlotSeries *series = xmalloc((size_t)L * (H + 1) * sizeof *series);
    char(*labels)[32] = xmalloc((size_t)L * sizeof *labels);
    for (int l = 0; l < L; l++) {
        snprintf(labels[l], sizeof labels[l], "layer %d", l);
        series[n++] = (PlotSeries){labels[l], v->x, mean + (long)l * K, K, 0};
        for (int h = 0; h < H; h++) series[n++] = (PlotSeries){NULL, v->x, per_head + ((long)l * H + h) * K, K, 1};
    }
    int rc = plot_lines(path, spec, series, n, e);
    free(series), free(labels);
    return rc;
}

/* spectrum.png, singular-values.png and heatmap.png in dir. */
static int write_plots(const Averages *v, const char *dir, const char *target, bool eigen, int windows, int T, Err *e) {
    const char *values = eigen ? "eigenvalue moduli" : "singular values";
    char title[320], about[200], run_name[256], path[1200];
    run_name_of(target, run_name, sizeof run_name);
    snprintf(about, sizeof about, "normalised cumulative %s of P (%d windows of %d bytes)", values, windows, T);
    plot_title(title, sizeof title, run_name, about);
    PlotSpec spec = {title, "k", "c(k)", 0, 0, 0, 0, 0};
    if (path_join(path, sizeof path, dir, "spectrum.png", e) != 0 || plot_layers(v, v->c_mean, v->c, path, &spec, e) != 0)
        return -1;
    snprintf(about, sizeof about, "%s of P by rank (mean of %d windows of %d bytes)", values, windows, T);
    plot_title(title, sizeof title, run_name, about);
    PlotSpec sspec = {title, "k", eigen ? "|lambda_k| (log scale)" : "s_k (log scale)", 0, 1, 0, 0, 0};
    if (path_join(path, sizeof path, dir, "singular-values.png", e) != 0 ||
        plot_layers(v, v->s_mean, v->s, path, &sspec, e) != 0)
        return -1;
    snprintf(about, sizeof about, "c(%d), the share of the spectrum in the first T/4 values", v->quarter);
    plot_title(title, sizeof title, run_name, about);
    PlotSpec hspec = {title, "head", "layer", 0, 0, 0, 0, 0};
    if (path_join(path, sizeof path, dir, "heatmap.png", e) != 0 ||
        plot_heatmap(path, &hspec, v->heat, v->L, v->H, 0.0, 1.0, e) != 0)
        return -1;
    return 0;
}

/* Everything for one run or checkpoint: its outputs into its folder (or
 * --out) and its per-layer figures into *skew. The command's exit status. */
static int spectrum_one(const char *target, const SpectrumArgs *a, LayerSkew *skew) {
    OpenRun o;
    Model m;
    Corpus corpus;
    int T;
    int status = open_one(target, a, &o, &m, &corpus, &T);
    if (status != 0) return status;
    const char *dir = a->out_dir ? a->out_dir : o.dir;
    Err le;
    int lock = run_lock(dir, &le); /* the folder's one lock (run.h): no ./train or other command writing there */
    if (lock < 0) {
        err_print(&le);
        corpus_close(&corpus);
        model_free(&m);
        return 1;
    }
    Spectrum sp = {.layers = o.info.cfg.model.layers, .heads = o.info.cfg.model.heads, .eigen = a->eigen};
    status = measure(&sp, &m, &corpus, o.path, T, a->samples);
    if (status == 0) {
        Err e;
        Averages v = averages(&sp);
        if (write_csv(&v, dir, &e) == 0) print_table(&v, a->eigen, skew);
        else status = 1;
        if (status == 0 && write_plots(&v, dir, target, a->eigen, sp.windows, T, &e) != 0) status = 1;
        /* a run folder's page gets the spectrum's chart */
        char why[200];
        bool page = status == 0 && page_kind(dir, why, sizeof why) == PAGE_RUN;
        if (page && page_write_run(dir, NULL, &e) != 0) status = 1;
        if (status != 0) {
            err_print(&e);
        } else {
            printf("\nwrote %s/spectrum.csv, %s/spectrum.png, %s/singular-values.png, %s/heatmap.png\n", dir, dir,
                   dir, dir);
            if (page) printf("page: %s/index.html\n", dir);
        }
        averages_free(&v);
    }
    spectrum_free(&sp);
    corpus_close(&corpus);
    model_free(&m);
    run_unlock(lock);
    return status;
}

/* The table across runs: per layer, the mean of c(T/4), k 90% and k 99%
 * with 95% t intervals; spectrum-summary.csv and spectrum-summary.png (c(T/4)
 * by layer, mean over the runs with its interval) in dir. */
static int spectrum_summary(const LayerSkew *skews, int n, char **names, bool eigen, const char *dir) {
    int L = skews[0].layers, K = skews[0].values;
    printf("\n%d runs (", n);
    for (int r = 0; r < n; r++) printf("%s%s", r ? ", " : "", names[r]);
    printf("): per layer, the mean over the runs and its 95%% interval (t)\n");
    printf("%-6s %20s %20s %20s   (of %d %s)\n", "layer", "c(T/4)", "k 90%", "k 99%", K,
           eigen ? "eigenvalues" : "singular values");
    size_t cap = 128 + (size_t)L * 200, len = 0;
    char *csv = xmalloc(cap);
    len += (size_t)snprintf(csv, cap, "layer,runs,c_quarter_mean,c_quarter_low,c_quarter_high,k90_mean,k90_low,k90_high,"
                                      "k99_mean,k99_low,k99_high\n");
    double *x = xmalloc((size_t)L * sizeof(double)), *band = xmalloc((size_t)3 * L * sizeof(double));
    for (int l = 0; l < L; l++) {
        double c[64], a[64], b[64];
        for (int r = 0; r < n && r < 64; r++) c[r] = skews[r].c_quarter[l], a[r] = skews[r].k90[l], b[r] = skews[r].k99[l];
        int m = n < 64 ? n : 64;
        Summary sc = summarize(c, m), s90 = summarize(a, m), s99 = summarize(b, m);
        char cells[3][48];
        snprintf(cells[0], sizeof cells[0], "%.3f +- %.3f", sc.mean, sc.half);
        snprintf(cells[1], sizeof cells[1], "%.1f +- %.1f", s90.mean, s90.half);
        snprintf(cells[2], sizeof cells[2], "%.1f +- %.1f", s99.mean, s99.half);
        printf("%-6d %20s %20s %20s\n", l, cells[0], cells[1], cells[2]);
        len += (size_t)snprintf(csv + len, cap - len, "%d,%d,%.6f,%.6f,%.6f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", l, m, sc.mean,
                                sc.mean - sc.half, sc.mean + sc.half, s90.mean, s90.mean - s90.half, s90.mean + s90.half,
                                s99.mean, s99.mean - s99.half, s99.mean + s99.half);
        x[l] = l;
        band[l] = sc.mean, band[L + l] = sc.mean - sc.half, band[2 * L + l] = sc.mean + sc.half;
    }
    Err e;
    char title[320], about[160];
    snprintf(about, sizeof about, "c(T/4) by layer, mean of %d runs (faint: 95%% interval)", n);
    plot_title(title, sizeof title, "spectrum-summary", about);
    PlotSeries s[3] = {{"c(T/4)", x, band, L, 0}, {NULL, x, band + L, L, 1}, {NULL, x, band + 2 * L, L, 1}};
    PlotSpec spec = {title, "layer", "c(T/4)", 0, 0, 0, 0, 0};
    int rc = 0;
    char csv_path[1100], png_path[1100];
    if (path_join(csv_path, sizeof csv_path, dir, "spectrum-summary.csv", &e) != 0 ||
        path_join(png_path, sizeof png_path, dir, "spectrum-summary.png", &e) != 0 || make_dirs(dir, &e) != 0 ||
        write_file_atomic(csv_path, csv, &e) != 0 || plot_lines(png_path, &spec, s, 3, &e) != 0) {
        err_print(&e);
        rc = 1;
    } else {
        printf("\nwrote %s, %s\n", csv_path, png_path);
    }
    free(csv), free(x), free(band);
    return rc;
}

/* --within and --within_k: a positive number, or the default when not given. */
static int read_bound(const char *flag, const char *text, double def, double *x) {
    char *end;
    double v = text ? strtod(text, &end) : def;
    if (text && (end == text || *end || !(v > 0) || !isfinite(v))) {
        fprintf(stderr, "error: %s: '%s' is not a positive number\nhint: %s %g\n", flag, text, flag, def);
        return 2;
    }
    *x = v;
    return 0;
}

/* --plan 3,6,12 into plan (no looks when not given); 2 on a bad plan. */
static int read_plan(const char *text, SeedPlan *plan) {
    char why[200];
    plan->n_looks = 0;
    if (!text) return 0;
    if (seed_plan_parse(text, plan, why, sizeof why) != 0) {
        fprintf(stderr, "error: --plan: %s\nhint: --plan 3,6,12 (the seed pairs at which intervals are looked at)\n", why);
        return 2;
    }
    return 0;
}

/* ./spectrum --ladder INIT TRAINED ...: the arms, the only positional words. */
static int ladder_main(const ArgPositional *pos, const char *within, const char *within_k, const char *plan_text,
                       const SpectrumArgs *a) {
    double wc, wk;
    SeedPlan plan;
    if (!a->out_dir) {
        fprintf(stderr, "error: --ladder: no --out folder for ladder.md, ladder.csv and ladder.png\n");
        return 2;
    }
    if (a->eigen || a->length) {
        fprintf(stderr, "error: --ladder: reads the runs' spectrum.csv; --eigen and --length are for measuring\n");
        return 2;
    }
    if (read_bound("--within", within, 0.02, &wc) != 0 || read_bound("--within_k", within_k, 2, &wk) != 0 ||
        read_plan(plan_text, &plan) != 0)
        return 2;
    Err e;
    int rc = ladder_spectrum_run((const char *const *)pos->v, pos->n, &plan, wc, wk, a->out_dir, &e);
    if (rc != 0) {
        err_print(&e);
        if (rc == 2) fprintf(stderr, "hint: ./spectrum --ladder results/ladder-init-s0/heads-4 "
                                     "results/ladder-th-s0/heads-4_talking_heads-none ... --out DIR\n");
    }
    return rc;
}

/* ./spectrum --paired A B: the two arms, the only positional words. */
static int paired_main(const ArgPositional *pos, const char *within, const char *within_k, const char *plan_text,
                       const SpectrumArgs *a) {
    double wc, wk;
    SeedPlan plan;
    if (pos->n != 2) {
        fprintf(stderr, "error: --paired: takes two arms, GRID/POINT_A GRID/POINT_B (got %d words)\n", pos->n);
        return 2;
    }
    if (a->out_dir || a->eigen || a->length) {
        fprintf(stderr, "error: --paired: reads the runs' spectrum.csv; --out, --eigen and --length are for measuring\n");
        return 2;
    }
    if (read_bound("--within", within, 0.02, &wc) != 0 || read_bound("--within_k", within_k, 2, &wk) != 0 ||
        read_plan(plan_text, &plan) != 0)
        return 2;
    Err e;
    char *text;
    size_t len;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) DIE("out of memory");
    int rc = spectrum_paired_report(mem, pos->v[0], pos->v[1], wc, wk, &plan, &e);
    if (fclose(mem) != 0) DIE("out of memory");
    if (rc == 0) fputs(text, stdout); /* all or nothing: an error is one line */
    free(text);
    if (rc != 0) return err_print(&e), 1;
    return 0;
}

int main(int argc, char **argv) {
    command_startup(argc, argv);
    command_one_process("spectrum");
    interrupt_install();
    SpectrumArgs a = {.samples = 8};
    bool paired = false, ladder = false;
    const char *within = NULL, *within_k = NULL, *plan = NULL;
    const ArgFlag flags[] = {
        {"--samples", .integer = &a.samples, .lo = 1, .hi = 100000},
        {"--length", .integer = &a.length, .lo = 2, .hi = 1 << 20},
        {"--eigen", .on = &a.eigen},
        {"--out", .text = &a.out_dir, .needs = "a folder"},
        {"--threads", .integer = &a.threads, .lo = 0, .hi = 1024},
        {"--paired", .on = &paired},
        {"--within", .text = &within, .needs = "a number"},
        {"--within_k", .text = &within_k, .needs = "a number of values"},
        {"--ladder", .on = &ladder},
        {"--plan", .text = &plan, .needs = "the looks, e.g. 3,6,12"},
    };
    const ArgSpec cli = {.command = "spectrum", .usage = usage, .flags = flags,
                         .n_flags = (int)(sizeof flags / sizeof *flags)};
    ArgPositional pos;
    int status = args_parse(&cli, argc, argv, &pos);
    if (status != ARGS_OK) return status;
    if (paired && ladder) {
        fprintf(stderr, "error: --paired and --ladder: one at a time\n");
        return 2;
    }
    if (paired) return paired_main(&pos, within, within_k, plan, &a);
    if (ladder) return ladder_main(&pos, within, within_k, plan, &a);
    if (within || within_k || plan) {
        fprintf(stderr, "error: --within, --within_k and --plan go with --paired or --ladder\n");
        return 2;
    }
    if (pos.n == 0) {
        fprintf(stderr, "error: no run folder or checkpoint given\nhint: ./spectrum runs/NAME\n");
        return 2;
    }
    Err e;
    if (command_threads(a.threads, stdout, &e) < 0) return err_print(&e), 1;
    /* the last positional is the corpus unless it names a folder or a .safetensors file */
    int n_runs = pos.n;
    const char *last = pos.v[pos.n - 1];
    size_t ll = strlen(last);
    if (pos.n > 1 && !is_directory(last) && !(ll > 12 && !strcmp(last + ll - 12, ".safetensors"))) {
        a.corpus_path = last;
        n_runs--;
    }
    if (n_runs == 1) {
        LayerSkew skew;
        return spectrum_one(pos.v[0], &a, &skew);
    }
    for (int r = 0; r < n_runs; r++)
        if (!is_directory(pos.v[r]) && !file_exists(pos.v[r])) {
            fprintf(stderr, "error: %s: no such run folder or checkpoint\n", pos.v[r]);
            return 1;
        }
    /* Several runs (seeds, say): each gets its own outputs in its folder, then
     * the figures per layer across them, with 95% intervals, into --out (the
     * current folder by default). */
    if (output_dir_check("--out", a.out_dir ? a.out_dir : ".", "--out DIR", &e) != 0) return err_print(&e), 1;
    LayerSkew *skews = xcalloc((size_t)n_runs, sizeof *skews);
    SpectrumArgs each = a;
    each.out_dir = NULL;
    for (int r = 0; r < n_runs; r++) {
        int rc = spectrum_one(pos.v[r], &each, &skews[r]);
        if (rc != 0) {
            free(skews);
            return rc;
        }
        if (skews[r].layers != skews[0].layers || skews[r].values != skews[0].values) {
            fprintf(stderr, "error: %s: %d layers and %d values, but %s has %d and %d: the runs cannot be compared\n",
                    pos.v[r], skews[r].layers, skews[r].values, pos.v[0], skews[0].layers, skews[0].values);
            free(skews);
            return 2;
        }
    }
    int rc = spectrum_summary(skews, n_runs, pos.v, a.eigen, a.out_dir ? a.out_dir : ".");
    free(skews);
    return rc;
}
