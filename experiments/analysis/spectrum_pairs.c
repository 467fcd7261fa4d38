/* spectrum_pairs.c: per-layer skew of P's spectrum, from ./spectrum's sums or
 * a run's spectrum.csv, and two arms of runs compared seed by seed (a trained
 * model against its initialisation, say). The statistics are stats.h's, the
 * same paired interval and verdict rule as ./ablate --paired. */
#include "spectrum_pairs.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grid.h"
#include "run.h"
#include "stats.h"

void layer_skew(const double *c, int L, int H, int K, double *mean, LayerSkew *skew) {
    int quarter = K / 4 > 0 ? K / 4 : 1;
    double *m = mean ? mean : xmalloc((size_t)L * K * sizeof(double));
    skew->layers = L < SKEW_MAX_LAYERS ? L : SKEW_MAX_LAYERS;
    skew->values = K;
    for (int l = 0; l < L; l++) {
        double *ml = m + (long)l * K;
        for (int k = 0; k < K; k++) ml[k] = 0;
        for (int h = 0; h < H; h++)
            for (int k = 0; k < K; k++) ml[k] += c[((long)l * H + h) * K + k];
        for (int k = 0; k < K; k++) ml[k] /= H; /* the sum over the heads, then / H */
        int k90 = K, k99 = K;
        for (int k = K - 1; k >= 0; k--) {
            if (ml[k] >= 0.90) k90 = k + 1;
            if (ml[k] >= 0.99) k99 = k + 1;
        }
        if (l < skew->layers) skew->c_quarter[l] = ml[quarter - 1], skew->k90[l] = k90, skew->k99[l] = k99;
    }
    if (!mean) free(m);
}

/* One row of spectrum.csv: layer, head, k, c, s. false when it is not one. */
static bool csv_row(char *line, long *l, long *h, long *k, double *c) {
    char *p = line, *end;
    long v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = strtol(p, &end, 10);
        if (end == p || *end != ',') return false;
        p = end + 1;
    }
    *c = strtod(p, &end);
    if (end == p || *end != ',') return false;
    p = end + 1;
    double s = strtod(p, &end);
    if (end == p || *end || !isfinite(s)) return false;
    *l = v[0], *h = v[1], *k = v[2];
    return true;
}

typedef struct {
    long l, h, k;
    double c;
} CsvRow;

/* The rows of the open file f, after its header; -1 with e set. */
static long csv_rows(FILE *f, const char *path, CsvRow **rows, long *max, Err *e) {
    char *line = NULL;
    size_t cap = 0;
    long n = 0, size = 0, lineno = 1;
    int rc = 0;
    max[0] = max[1] = max[2] = -1;
    *rows = NULL;
    ssize_t got = getline(&line, &cap, f);
    if (got < 0 || strncmp(line, "layer,head,k,c,s", 16) || strspn(line + 16, "\r\n") != strlen(line + 16))
        rc = err_set(e, "%s: line 1: not the header layer,head,k,c,s (not ./spectrum's spectrum.csv)", path);
    while (rc == 0 && (got = getline(&line, &cap, f)) >= 0) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        CsvRow r;
        if (!csv_row(line, &r.l, &r.h, &r.k, &r.c)) {
            rc = err_set(e, "%s: line %ld: not layer,head,k,c,s with numbers", path, lineno);
        } else if (r.l < 0 || r.h < 0 || r.k < 1 || r.l >= SKEW_MAX_LAYERS || r.h > 4096 || r.k > (1L << 24)) {
            rc = err_set(e, "%s: line %ld: layer %ld, head %ld, k %ld out of range", path, lineno, r.l, r.h, r.k);
        } else if (!(r.c >= 0 && r.c <= 1 + 1e-6)) {
            rc = err_set(e, "%s: line %ld: c %g is not in [0, 1]", path, lineno, r.c);
        } else {
            if (n == size) {
                size = size ? 2 * size : 1024;
                CsvRow *grown = realloc(*rows, (size_t)size * sizeof **rows);
                if (!grown) DIE("out of memory");
                *rows = grown;
            }
            (*rows)[n++] = r;
            max[0] = r.l > max[0] ? r.l : max[0], max[1] = r.h > max[1] ? r.h : max[1];
            max[2] = r.k > max[2] ? r.k : max[2];
        }
    }
    free(line);
    if (rc == 0 && n == 0) rc = err_set(e, "%s: no rows after the header", path);
    return rc == 0 ? n : -1;
}

int spectrum_csv_read(const char *path, double **c, int *L, int *H, int *K, Err *e) {
    *c = NULL;
    FILE *f = fopen_regular(path, "r", e);
    if (!f) return errno == ENOENT ? err_set(e, "%s: no such file", path) : -1;
    CsvRow *rows;
    long max[3];
    long n = csv_rows(f, path, &rows, max, e);
    fclose(f);
    if (n < 0) return free(rows), -1;
    long l = max[0] + 1, h = max[1] + 1, k = max[2];
    if (l * h * k != n) {
        free(rows);
        return err_set(e, "%s: %ld rows, but %ld layers x %ld heads x %ld values need %ld", path, n, l, h, k, l * h * k);
    }
    double *out = xmalloc((size_t)n * sizeof *out);
    char *seen = xcalloc((size_t)n, 1);
    int rc = 0;
    for (long i = 0; i < n && rc == 0; i++) {
        long at = (rows[i].l * h + rows[i].h) * k + rows[i].k - 1;
        if (seen[at]++)
            rc = err_set(e, "%s: line %ld: layer %ld, head %ld, k %ld given twice", path, i + 2, rows[i].l, rows[i].h,
                         rows[i].k);
        out[at] = rows[i].c;
    }
    free(rows), free(seen);
    if (rc != 0) return free(out), -1;
    *c = out, *L = (int)l, *H = (int)h, *K = (int)k;
    return 0;
}

#define ARM_MAX 256

/* One run of an arm: its seed, its spectrum's skew and what its record says. */
typedef struct {
    long long seed;
    LayerSkew skew;
    double val_bpb; /* NAN without a curve */
    bool init;      /* trained at learning rate 0: an initialisation */
    bool plateau;
    double time_s; /* its training time (0 when not logged) */
    Config cfg;
    char why[128], folder[1300];
} ArmRun;

/* One run folder of an arm: its spectrum.csv and its record. */
static int arm_run(ArmRun *r, const char *folder, long long seed, Err *e) {
    char path[1400];
    double *c;
    int L, H, K;
    snprintf(r->folder, sizeof r->folder, "%s", folder);
    if (path_join(path, sizeof path, folder, "spectrum.csv", e) != 0) return -1;
    if (!file_exists(path))
        return err_set(e, "%s: no spectrum.csv", folder), err_hint(e, "./spectrum %s corpus.txt writes it", folder);
    if (spectrum_csv_read(path, &c, &L, &H, &K, e) != 0) return -1;
    layer_skew(c, L, H, K, NULL, &r->skew);
    free(c);
    GridRun g;
    if (grid_read_folder(&g, folder, e) != 0) return -1;
    r->seed = seed;
    r->val_bpb = g.n_points ? g.result.val_bpb : NAN;
    r->init = g.cfg.train.lr == 0;
    r->plateau = !r->init && grid_plateau(&g, r->why, sizeof r->why);
    r->time_s = isfinite(g.time_s) ? g.time_s : 0;
    r->cfg = g.cfg;
    free(g.steps), free(g.bpb);
    return 0;
}

static bool has_seed(const GridArmRun *runs, int n, long long seed) {
    for (int i = 0; i < n; i++)
        if (runs[i].seed == seed) return true;
    return false;
}

/* The runs of arm DIR/POINT, the folders DIR/POINT_seed-<n>, by seed, given
 * the other arm's folders: the count, or -1 with e set. A folder with no
 * spectrum.csv whose seed the other arm lacks is left out: it has no pair
 * either way (a grid part-way through a later look of its plan, whose new
 * seeds are measured when it ends). */
static int arm_read(const GridArmRun *folders, int n, const GridArmRun *other, int n_other, ArmRun *runs, Err *e) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        char path[1400];
        if (path_join(path, sizeof path, folders[i].folder, "spectrum.csv", e) != 0) return -1;
        if (!file_exists(path) && !has_seed(other, n_other, folders[i].seed)) continue;
        if (arm_run(&runs[k++], folders[i].folder, folders[i].seed, e) != 0) return -1;
    }
    return k;
}

/* The verdict rule on B - A, with no claim: which way the interval excludes 0. */
static void verdict_text(char *buf, size_t size, const Difference *d, double within, const char *fmt) {
    if (!isfinite(d->half)) {
        snprintf(buf, size, "inconclusive: too few pairs for an interval");
        return;
    }
    Verdict v = verdict_rule(d, within);
    char x[32];
    snprintf(x, sizeof x, fmt, v.bound);
    if (v.kind == VERDICT_AGREES || v.kind == VERDICT_DISAGREES)
        snprintf(buf, size, "excludes 0, B %c A", v.kind == VERDICT_AGREES ? '<' : '>');
    else if (v.kind == VERDICT_NO_EFFECT)
        snprintf(buf, size, "no effect larger than %s", x);
    else if (v.seeds_needed < 0)
        snprintf(buf, size, "inconclusive; over %d pairs would resolve it", VERDICT_SEEDS_CAP);
    else
        snprintf(buf, size, "inconclusive; %d pairs would resolve it", v.seeds_needed);
}

/* One table: per layer, the arms' means, B - A seed by seed, the mean with
 * its paired interval, and the verdict. which: 0 c(T/4), 1 k 90%. */
static void paired_table(FILE *out, const ArmRun *const *a, const ArmRun *const *b, int n, int which, double within,
                         const SeedPlan *plan) {
    const char *fmt = which ? "%.2f" : "%.4f";
    char level[32];
    snprintf(level, sizeof level, "%.4g%% interval", plan && plan->n_looks ? 100 * seed_plan_level(plan) : 95.0);
    fprintf(out, "\n%s\n%-5s %8s %8s  %-*s  %9s  %-20s  %s\n",
            which ? "k for 90%" : "c(T/4), the mean over heads of c at k = T/4", "layer", "A", "B",
            n * 9 - 1, "B - A by seed", "B - A", level, "verdict");
    for (int l = 0; l < a[0]->skew.layers; l++) {
        double x[ARM_MAX], y[ARM_MAX], sa = 0, sb = 0;
        for (int i = 0; i < n; i++) {
            x[i] = which ? a[i]->skew.k90[l] : a[i]->skew.c_quarter[l];
            y[i] = which ? b[i]->skew.k90[l] : b[i]->skew.c_quarter[l];
            sa += x[i] / n, sb += y[i] / n;
        }
        Difference d = grid_paired_values(x, y, n < GRID_MAX_PAIRS ? n : GRID_MAX_PAIRS, plan).d;
        char cell[64], verdict[96];
        fprintf(out, which ? "%-5d %8.2f %8.2f " : "%-5d %8.4f %8.4f ", l, sa, sb);
        for (int i = 0; i < n; i++) fprintf(out, which ? " %+8.0f" : " %+8.4f", y[i] - x[i]);
        if (isfinite(d.half))
            snprintf(cell, sizeof cell, which ? "[%+.2f, %+.2f]" : "[%+.4f, %+.4f]", d.diff - d.half, d.diff + d.half);
        else
            snprintf(cell, sizeof cell, "-");
        verdict_text(verdict, sizeof verdict, &d, within, fmt);
        fprintf(out, which ? "  %+9.2f  %-20s  %s\n" : "  %+9.4f  %-20s  %s\n", d.diff, cell, verdict);
    }
}

/* Seed by seed: both runs' val bpb, and why a pair is set apart. The pairs
 * counted into a and b; their number. */
static int pair_runs(FILE *out, const ArmRun *ra, int na, const ArmRun *rb, int nb, const ArmRun **a,
                     const ArmRun **b) {
    int k = 0;
    for (int j = 0; j < nb; j++) {
        int i = 0;
        while (i < na && ra[i].seed != rb[j].seed) i++;
        if (i == na) continue;
        if (!out) {
            if (!ra[i].plateau && !rb[j].plateau) a[k] = &ra[i], b[k++] = &rb[j];
            continue;
        }
        fprintf(out, "  seed %lld: A val bpb %.4f%s  B val bpb %.4f%s", rb[j].seed, ra[i].val_bpb,
                ra[i].init ? " (initialisation)" : "", rb[j].val_bpb, rb[j].init ? " (initialisation)" : "");
        if (ra[i].plateau || rb[j].plateau) {
            fprintf(out, "  apart: %s%s%s%s%s\n", ra[i].plateau ? "A " : "", ra[i].plateau ? ra[i].why : "",
                    ra[i].plateau && rb[j].plateau ? "; " : "", rb[j].plateau ? "B " : "", rb[j].plateau ? rb[j].why : "");
            continue;
        }
        fputc('\n', out);
        a[k] = &ra[i], b[k++] = &rb[j];
    }
    return k;
}

/* Both arms' runs, into ra (*na of them) and rb (*nb), every spectrum of
 * one shape; -1 with e set. */
static int arms_read(const char *arm_a, const char *arm_b, ArmRun *ra, int *na, ArmRun *rb, int *nb, Err *e) {
    static GridArmRun fa[ARM_MAX], fb[ARM_MAX];
    int ka = grid_arm_folders(arm_a, fa, ARM_MAX, e), kb = ka < 0 ? -1 : grid_arm_folders(arm_b, fb, ARM_MAX, e);
    if (kb < 0) return -1;
    *na = arm_read(fa, ka, fb, kb, ra, e);
    *nb = *na < 0 ? -1 : arm_read(fb, kb, fa, ka, rb, e);
    if (*nb < 0) return -1;
    if (*na == 0 || *nb == 0)
        return err_set(e, "%s and %s: no seed in both arms, so no pair to compare", arm_a, arm_b);
    const ArmRun *first = &ra[0];
    for (int i = 0; i < *na + *nb; i++) {
        const ArmRun *r = i < *na ? &ra[i] : &rb[i - *na];
        if (r->skew.layers != first->skew.layers || r->skew.values != first->skew.values)
            return err_set(e, "%s: %d layers of %d values, but %s has %d of %d: the spectra cannot be compared",
                           r->folder, r->skew.layers, r->skew.values, first->folder, first->skew.layers,
                           first->skew.values);
    }
    return 0;
}

int spectrum_paired_report(FILE *out, const char *arm_a, const char *arm_b, double within_c, double within_k,
                           const SeedPlan *plan, Err *e) {
    static ArmRun ra[ARM_MAX], rb[ARM_MAX];
    int na, nb;
    if (arms_read(arm_a, arm_b, ra, &na, rb, &nb, e) != 0) return -1;
    const ArmRun *first = &ra[0];
    int shared = 0;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++) shared += ra[i].seed == rb[j].seed;
    if (shared == 0) return err_set(e, "%s and %s: no seed in both arms, so no pair to compare", arm_a, arm_b);
    int K = first->skew.values;
    fprintf(out, "B - A per layer, by seed (%d values a spectrum, c(T/4) at k = %d)\n  A = %s\n  B = %s\n", K,
            K / 4 > 0 ? K / 4 : 1, arm_a, arm_b);
    static const ArmRun *a[ARM_MAX], *b[ARM_MAX];
    int n = pair_runs(out, ra, na, rb, nb, a, b);
    fprintf(out, "%d seed pair(s) counted\n", n);
    if (plan && plan->n_looks) {
        int look = seed_plan_look(plan, n);
        if (look >= 0)
            fprintf(out, "the seed plan's look %d: the first %d pairs, intervals at %.4g%%\n", look + 1,
                    plan->looks[look], 100 * seed_plan_level(plan));
        else
            fprintf(out, "the seed plan's first look is at %d pairs: no interval yet\n", plan->looks[0]);
    }
    if (n == 0) {
        fprintf(out, "verdict: inconclusive; every pair is set apart\n");
        return 0;
    }
    paired_table(out, a, b, n, 0, within_c, plan);
    paired_table(out, a, b, n, 1, within_k, plan);
    return 0;
}

int spectrum_arm_pairs(const char *arm_a, const char *arm_b, int layer, int which, const SeedPlan *plan,
                       SpectrumPairs *out, Err *e) {
    static ArmRun ra[ARM_MAX], rb[ARM_MAX];
    static const ArmRun *a[ARM_MAX], *b[ARM_MAX];
    int na, nb;
    if (arms_read(arm_a, arm_b, ra, &na, rb, &nb, e) != 0) return -1;
    memset(out, 0, sizeof *out);
    int L = rb[0].skew.layers;
    for (int i = 0; i < na + nb; i++) out->p.time_s += i < na ? ra[i].time_s : rb[i - na].time_s;
    int l = layer < 0 ? L + layer : layer;
    if (l < 0 || l >= L || l >= SKEW_MAX_LAYERS)
        return err_set(e, "%s: layer %d: its models have %d layers", arm_b, layer, L);
    int apart = 0;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++) apart += ra[i].seed == rb[j].seed && (ra[i].plateau || rb[j].plateau);
    int n = pair_runs(NULL, ra, na, rb, nb, a, b);
    double x[ARM_MAX], y[ARM_MAX];
    for (int i = 0; i < n && i < GRID_MAX_PAIRS; i++) {
        double va = which ? a[i]->skew.k90[l] : a[i]->skew.c_quarter[l];
        double vb = which ? b[i]->skew.k90[l] : b[i]->skew.c_quarter[l];
        /* claimed lower minus claimed higher: c rises, k 90% falls when P grows more skewed */
        x[i] = which ? va : vb, y[i] = which ? vb : va;
    }
    double t = out->p.time_s;
    out->p = grid_paired_values(x, y, n < GRID_MAX_PAIRS ? n : GRID_MAX_PAIRS, plan);
    out->p.time_s = t, out->p.apart = apart;
    out->cfg = rb[0].cfg;
    out->layer = l;
    return 0;
}
