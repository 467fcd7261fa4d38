/* bench_torch.c: ./bench --vs-torch, the same measurements in PyTorch.
 *
 * Without --scaling: experiments/bench/torch_reference.py, the same model in
 * PyTorch, in the same invocation: two short probes of each plausible thread and
 * OpenMP setting, then --rounds rounds of both under PyTorch's fastest, and
 * the median of the rounds' ratios (bench_vs_torch). With --scaling:
 * experiments/bench/torch_scaling.py, the causal cosformer layer with autograd, at
 * the lengths of the table (bench_scaling_vs_torch). The scripts run under the
 * first Python that has PyTorch (run_python_script). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <unistd.h>

#include "precision.h"
#include "bench.h"
#include "ops.h"
#include "run.h"
#include "util.h"

/* ---- PyTorch ------------------------------------------------------------- */

/* Runs `python experiments/bench/<script> <args>` with the first Python that has
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
        snprintf(cmd, sizeof cmd, "%s -c 'import torch' 2>/dev/null && %s '%s/experiments/bench/%s' %s", pythons[i],
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


/* ---- --scaling --vs-torch: the cosformer layer in PyTorch ---------------- */

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
        if (tr->rows[i].attn == attn_find(attn_scaling_reference) && tr->rows[i].T == T) {
            tr->rows[i].torch_ms = ms;
            tr->rows[i].torch_best_ms = best;
            tr->rows[i].torch_growth_mib = rss;
        }
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

/* run_python_script under setting s: its variables set in the child's
 * environment for the run, then put back. */
static int run_under(const TorchSetting *s, const char *openblas, const char *script, const char *args, bool quiet,
                     void (*line)(const char *, void *), void *ctx) {
    char *saved[N_TORCH_ENV];
    torch_env_set(s, openblas, saved);
    int rc = run_python_script(script, args, quiet, line, ctx);
    torch_env_restore(saved);
    return rc;
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

/* Runs experiments/bench/torch_reference.py with the same configuration under
 * setting `s`, `warmup` + `steps` steps; 0 with *r filled, or -1 (said). */
static int bench_torch(const Config *cfg, const TorchSetting *s, int warmup, int steps, bool quiet, const char *openblas,
                       TorchRun *r) {
    char args[256];
    snprintf(args, sizeof args,
             "--layers %d --d_model %d --heads %d --context %d --batch %d --warmup %d --steps %d --threads %d "
             "--precision %s",
             cfg->model.layers, cfg->model.d_model, cfg->model.heads, cfg->model.context, cfg->train.batch, warmup,
             steps, s->threads, precision_choices[cfg->train.precision]);
    memset(r, 0, sizeof *r);
    if (run_under(s, openblas, "torch_reference.py", args, quiet, torch_run_line, r) != 0) return -1;
    if (r->tok_s <= 0) {
        fprintf(stderr, "error: --vs-torch: experiments/bench/torch_reference.py printed no throughput\n"
                        "hint: run it by hand to see why: python3 experiments/bench/torch_reference.py --steps 1\n");
        return -1;
    }
    return 0;
}

/* --vs-torch: two short probes of each plausible PyTorch setting on this
 * host (torch_candidates, then the fastest with ATen's AVX-512 kernels when
 * the CPU has AVX-512 and PyTorch did not pick them), then --rounds rounds of attnlab
 * and PyTorch under the fastest setting, one after the other, and the medians
 * of the rounds' ratios and of each side. */
int bench_vs_torch(const BenchOptions *o, const Config *cfg, int threads) {
    char openblas[1024], label[256]; /* torch_setting_label: < 160 */
    our_openblas(openblas, sizeof openblas);
    const char *kernel = engine_blas_kernel();
    TorchSetting c[8];
    int n = torch_candidates(threads, c), probe_steps = o->steps < 5 ? o->steps : 5, best = 0;
    bool avx512_tried = false;
    double probe_tok_s[8];
    TorchRun r;
    printf("PyTorch (experiments/bench/torch_reference.py, the same model): a probe of each setting, 1 warm-up + %d timed "
           "step%s\n(N threads: torch.set_num_threads(N), OMP_NUM_THREADS and OPENBLAS_NUM_THREADS N, set before "
           "torch loads):\n",
           probe_steps, probe_steps == 1 ? "" : "s");
    /* two passes over the settings, each setting's faster probe counting: one
     * probe of 5 steps on a noisy host can put a slower setting first */
    for (int pass = 0; pass < 2; pass++) {
        if (pass) printf("  again:\n");
        for (int i = 0; i < n; i++) {
            if (bench_torch(cfg, &c[i], 1, probe_steps, true, openblas, &r) != 0) return 1;
            printf("  %6.0f tok/s  ATen %-7s %s\n", r.tok_s, r.capability, torch_setting_label(&c[i], label, sizeof label));
            probe_tok_s[i] = pass && probe_tok_s[i] > r.tok_s ? probe_tok_s[i] : r.tok_s;
            if (probe_tok_s[i] > probe_tok_s[best]) best = i;
            /* ATen's AVX-512 kernels are built in but, as of torch 1.13, picked only on CPUs it knows */
            if (i == n - 1 && !avx512_tried && cpu_has_avx512() && strcasecmp(r.capability, "AVX512")) {
                avx512_tried = true;
                c[n] = c[best];
                c[n++].aten_avx512 = true;
            }
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

/* --scaling --vs-torch: the causal cosformer layer in PyTorch
 * (experiments/bench/torch_scaling.py) at its fastest setting here (probed as
 * --vs-torch probes the training step), at the same lengths, sizes, chunk,
 * reps and rounds, and the ratios. */
int bench_scaling_vs_torch(const BenchOptions *o, const ModelConfig *m, int threads, ScalingRow *rows, int n_rows) {
    char lengths[256] = "";
    size_t n = 0;
    int Ts[BENCH_MAX_LENGTHS], n_T = 0;
    for (int i = 0; i < n_rows; i++)
        if (rows[i].attn == attn_find(attn_scaling_reference) && n < sizeof lengths && n_T < BENCH_MAX_LENGTHS) {
            n += (size_t)snprintf(lengths + n, sizeof lengths - n, "%s%d", n ? "," : "", rows[i].T);
            Ts[n_T++] = rows[i].T;
        }
    if (!n_T) return 0;
    /* PyTorch's fastest setting here, by a probe of each at one length (the
     * middle of the table's), as --vs-torch does for the training step */
    int probe_T = Ts[n_T / 2];
    char openblas[1024], label[256], args[512];
    our_openblas(openblas, sizeof openblas);
    TorchSetting c[8];
    int n_c = torch_candidates(threads, c), best = 0;
    double best_ms = INFINITY;
    printf("\nPyTorch (experiments/bench/torch_scaling.py: the same layer, chunked %s with autograd): a probe of "
           "each setting at T %d:\n", attn_scaling_reference, probe_T);
    for (int i = 0; i < n_c; i++) {
        snprintf(args, sizeof args, "--lengths %d --d_model %d --heads %d --chunk %d --reps 3 --rounds 1 --threads %d",
                 probe_T, m->d_model, m->heads, attn_option_int(m, attn_kernel_for(m->attn), "chunk"), c[i].threads);
        ScalingRow probe = {.attn = attn_find(attn_scaling_reference), .T = probe_T, .torch_ms = NAN};
        TorchRows one = {&probe, 1};
        if (run_under(&c[i], openblas, "torch_scaling.py", args, true, torch_scaling_line, &one) != 0) return -1;
        printf("  %9.1f ms  %s\n", probe.torch_ms, torch_setting_label(&c[i], label, sizeof label));
        if (probe.torch_ms < best_ms) best_ms = probe.torch_ms, best = i;
    }
    printf("  fastest: %s\n", torch_setting_label(&c[best], label, sizeof label));
    snprintf(args, sizeof args, "--lengths %s --d_model %d --heads %d --chunk %d --reps %d --rounds %d --threads %d",
             lengths, m->d_model, m->heads, attn_option_int(m, attn_kernel_for(m->attn), "chunk"), o->reps_given ? o->reps : 5, o->rounds, c[best].threads);
    printf("\nPyTorch under that setting, same sizes, chunk, reps and rounds:\n");
    fflush(stdout);
    TorchRows tr = {rows, n_rows};
    if (run_under(&c[best], openblas, "torch_scaling.py", args, false, torch_scaling_line, &tr) != 0) return -1;
    printf("\n  %6s | %12s %12s %9s | %18s %18s\n", "T", "attnlab ms", "torch ms", "ratio", "attnlab arena MiB",
           "torch growth MiB");
    for (int i = 0; i < n_rows; i++) {
        const ScalingRow *r = &rows[i];
        if (r->attn != attn_find(attn_scaling_reference) || isnan(r->torch_ms)) continue;
        printf("  %6d | %12.1f %12.1f %8.2fx | %18.1f %18.1f\n", r->T, r->layer.step_s * 1e3, r->torch_ms,
               r->torch_ms / (r->layer.step_s * 1e3), r->layer.arena_mib, r->torch_growth_mib);
    }
    printf("  (ratio: PyTorch's median step time over attnlab's. Memory: the layer's arena peak against\n"
           "  PyTorch's peak RSS above its RSS at the length's start)\n");
    return 0;
}
