/* ladder.c: a claim across compute (ladder.h). */
#include "ladder.h"

#include <cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grid_report.h"
#include "memory.h"
#include "page.h"
#include "plot.h"
#include "run.h"
#include "spectrum_pairs.h"

/* One claim at one rung. */
typedef struct {
    GridPaired p;
    Config cfg;
    long params;
    double tokens, flops;
    char verdict[200];
    bool ok; /* its arms had runs */
    char why[520];
} Rung;

/* side (trimmed) as the folder prefix of its point's runs. */
static void side_folder(const char *side, size_t len, char *out, size_t size) {
    char name[300];
    while (len && isspace((unsigned char)*side)) side++, len--;
    while (len && isspace((unsigned char)side[len - 1])) len--;
    if (len == 8 && !strncmp(side, "baseline", 8))
        snprintf(name, sizeof name, "baseline attn=%s", option_find("attn")->def);
    else
        snprintf(name, sizeof name, "%.*s", (int)len, side);
    grid_folder_name(name, out, size);
}

/* "A < B" (or "B > A") into the folder prefixes of the lower and the higher side. */
static int claim_sides(const char *claim, char *lower, char *higher, size_t size, Err *e) {
    const char *op = strpbrk(claim, "<>");
    if (!op || strpbrk(op + 1, "<>") || op == claim || !op[1])
        return err_set(e, "--expect \"%s\": expected \"A < B\" or \"A > B\"", claim),
               err_hint(e, "each side a point as the grid's tables name it, e.g. \"reweight=cos < reweight=none\"");
    char *a = *op == '<' ? lower : higher, *b = *op == '<' ? higher : lower;
    side_folder(claim, (size_t)(op - claim), a, size);
    side_folder(op + 1, strlen(op + 1), b, size);
    if (!*a || !*b) return err_set(e, "--expect \"%s\": a side is empty", claim);
    return 0;
}

/* The slope of the pairs' effects against log10 FLOPs, its 95% half-width
 * (NAN when it cannot be had: fewer than 3 pairs, or pairs at one rung alone),
 * and the point the fitted line passes through, the pairs' mean log10 FLOPs and effect
 * (mean may be NULL). */
static void slope_of(const Rung *r, int n, double *slope, double *half, int *pairs, double mean[2]) {
    double sx = 0, sy = 0;
    int N = 0, rungs = 0;
    for (int i = 0; i < n; i++)
        if (r[i].ok && isfinite(r[i].flops)) {
            for (int k = 0; k < r[i].p.pairs; k++) sx += log10(r[i].flops), sy += r[i].p.diffs[k], N++;
            rungs += r[i].p.pairs > 0;
        }
    *slope = *half = NAN;
    *pairs = N;
    /* pairs at one rung alone have no spread in FLOPs (sxx below is then
     * rounding error, not 0, and the slope's interval absurd) */
    if (N < 3 || rungs < 2) return;
    double mx = sx / N, my = sy / N, sxx = 0, sxy = 0;
    if (mean) mean[0] = mx, mean[1] = my;
    for (int i = 0; i < n; i++)
        if (r[i].ok && isfinite(r[i].flops))
            for (int k = 0; k < r[i].p.pairs; k++) {
                double dx = log10(r[i].flops) - mx;
                sxx += dx * dx, sxy += dx * (r[i].p.diffs[k] - my);
            }
    if (!(sxx > 0)) return;
    *slope = sxy / sxx;
    double rss = 0;
    for (int i = 0; i < n; i++)
        if (r[i].ok && isfinite(r[i].flops))
            for (int k = 0; k < r[i].p.pairs; k++) {
                double fit = my + *slope * (log10(r[i].flops) - mx), res = r[i].p.diffs[k] - fit;
                rss += res * res;
            }
    *half = t975(N - 2) * sqrt(rss / (N - 2) / sxx);
}

/* The least-squares line of slope_of at log10 FLOPs x (through mean, the pairs' mean point). */
static double line_at(const double mean[2], double slope, double x) { return mean[1] + slope * (x - mean[0]); }

/* A value and the ends of its interval, value +- half, each in one printf format. */
typedef struct {
    char v[64], lo[64], hi[64];
} Span;
static Span span_of(const char *fmt, double v, double half) {
    Span s;
    snprintf(s.v, sizeof s.v, fmt, v), snprintf(s.lo, sizeof s.lo, fmt, v - half), snprintf(s.hi, sizeof s.hi, fmt, v + half);
    return s;
}

/* The first word of a verdict ("agrees", "disagrees", "no", "inconclusive"). */
static const char *verdict_kind(const char *words) {
    if (!strncmp(words, "agrees", 6)) return "agrees";
    if (!strncmp(words, "disagrees", 9)) return "disagrees";
    if (!strncmp(words, "no effect", 9)) return "no effect";
    return "inconclusive";
}

/* Whether a rung waits for its seed plan's next look: undecided before the plan's first look
 * or at a look that is not its last. */
static bool awaits_look(const Rung *r) {
    return r->ok && r->p.planned && r->p.next_look > 0 && !strcmp(verdict_kind(r->verdict), "inconclusive");
}

static const char *rung_ordinal(int i) {
    static const char *const names[] = {"first", "second", "third", "fourth"};
    return i < 4 ? names[i] : "later";
}

/* Each later rung's verdict appended to buf at k, "; "-separated (" agrees at the second
 * rung; disagrees at the third rung"), with a rung awaiting its plan's next look said so:
 * the characters written in all (snprintf's count). */
static size_t later_verdicts(const Rung *r, int n, char *buf, size_t k, size_t size) {
    for (int i = 1; i < n && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, " %s at the %s rung%s%s", r[i].ok ? verdict_kind(r[i].verdict) : "no pairs",
                              rung_ordinal(i), awaits_look(&r[i]) ? " (the plan's next look is due)" : "",
                              i + 1 < n ? ";" : "");
    return k;
}

/* The first rung's verdict followed along the ladder, in words, into buf: the characters
 * written (snprintf's count). */
static size_t survival_words(const Rung *r, int n, char *buf, size_t size) {
    if (r[0].ok && r[0].p.pairs == 0 && r[0].p.apart > 0) {
        /* every pair of the first rung set apart: no verdict there to follow (more seeds
         * would most likely stay on the plateau too), so what each later rung says */
        size_t k = (size_t)snprintf(buf, size, "the first rung has no verdict to follow (its %d pair%s set apart, a run "
                                               "on the byte plateau in each); later:",
                                    r[0].p.apart, r[0].p.apart > 1 ? "s all" : "");
        return later_verdicts(r, n, buf, k, size);
    }
    const char *first = r[0].ok ? verdict_kind(r[0].verdict) : "missing";
    size_t k = (size_t)snprintf(buf, size, "the first rung's verdict (%s%s) ", first,
                                awaits_look(&r[0]) ? ", undecided before the plan's next look" : "");
    bool same = true, all = true, waiting = false;
    for (int i = 0; i < n; i++) waiting = waiting || awaits_look(&r[i]);
    for (int i = 1; i < n; i++) {
        all = all && r[i].ok;
        same = same && r[i].ok && !strcmp(verdict_kind(r[i].verdict), first);
    }
    if (!all || waiting) {
        /* the rungs without pairs, else those awaiting a look: "the first, second and third rungs" */
        bool pick[LADDER_MAX_RUNGS] = {false};
        int m = 0, said = 0;
        for (int i = 0; i < n; i++) m += pick[i] = !all ? !r[i].ok : awaits_look(&r[i]);
        k += (size_t)snprintf(buf + k, size - k, "cannot be followed yet: %s",
                              !all ? "no pairs yet at the" : "the plan's next look is due at the");
        for (int i = 0; i < n && k < size; i++)
            if (pick[i]) {
                said++;
                k += (size_t)snprintf(buf + k, size - k, "%s %s", said == 1 ? "" : said == m ? " and" : ",", rung_ordinal(i));
            }
        if (k < size) k += (size_t)snprintf(buf + k, size - k, " rung%s", m > 1 ? "s" : "");
    } else if (same)
        k += (size_t)snprintf(buf + k, size - k, "holds at every rung");
    else {
        k += (size_t)snprintf(buf + k, size - k, "changes across the ladder:");
        k = later_verdicts(r, n, buf, k, size);
    }
    return k;
}

/* Whether the first rung's verdict holds at every later rung, in words; not before every
 * rung has reached the look its plan stops at. */
static void survival(const Rung *r, int n, double slope, double half, const char *unit, const char *fmt, char *buf,
                     size_t size) {
    size_t k = survival_words(r, n, buf, size);
    if (k >= size) return;
    if (isfinite(half)) {
        Span sp = span_of(fmt, slope, half);
        snprintf(buf + k, size - k, "; the effect %s with compute (slope %s %s per decade of FLOPs [%s, %s])",
                 fabs(slope) > half ? (slope < 0 ? "falls" : "rises") : "shows no trend resolved", sp.v, unit, sp.lo, sp.hi);
    } else
        snprintf(buf + k, size - k, "; too few pairs or rungs for a slope");
}

/* The rungs of claim c. */
static void claim_rungs(const Ladder *l, const char *lower, const char *higher, Rung *r) {
    for (int i = 0; i < l->n_grids; i++) {
        char a[1300], b[1300];
        Err e;
        snprintf(a, sizeof a, "%.800s/%.400s", l->grids[i], higher);
        snprintf(b, sizeof b, "%.800s/%.400s", l->grids[i], lower);
        memset(&r[i], 0, sizeof r[i]);
        r[i].flops = r[i].tokens = NAN;
        if (grid_arm_pairs(a, b, l->plan, l->mixed_kernels, &r[i].p, &r[i].cfg, &e) != 0) {
            snprintf(r[i].why, sizeof r[i].why, "%s", e.msg);
            continue;
        }
        r[i].ok = true;
        grid_verdict_words(&r[i].p, l->within, r[i].verdict, sizeof r[i].verdict);
    }
}

/* A rung's model and budget, from its config. */
static void rung_budget(Rung *r) {
    const Config *c = &r->cfg;
    r->params = model_param_count(&c->model);
    r->tokens = (double)c->train.steps * c->train.batch * c->model.context;
    r->flops = model_flops_per_token(&c->model) * r->tokens;
}

/* What a ladder's tables say beside the rungs: the claims, the measure and
 * its unit, the rungs' names, the command that makes them again. */
typedef struct {
    const char *const *claims;
    int n_claims, n_rungs;
    const char *measure;     /* "final val bpb" */
    const char *const *unit; /* per claim (NULL: "bpb" for every claim) */
    const char *const *fmt;  /* per claim, the effect's printf format (NULL: "%+.4f") */
    char names[LADDER_MAX_RUNGS][256];
    const SeedPlan *plan;
    const char *command;
} LadderText;

static const char *unit_of(const LadderText *t, int c) { return t->unit ? t->unit[c] : "bpb"; }
static const char *fmt_of(const LadderText *t, int c) { return t->fmt ? t->fmt[c] : "%+.4f"; }

/* One panel per claim (the claims' units differ: bpb, c(T/4), singular values): its effect
 * at each rung, the interval as a vertical bar, the least-squares line of the pairs (its slope
 * and interval in the legend) where there is one, and the line of no effect, against log FLOPs. */
static int write_plot(const char *path, const LadderText *t, Rung (*rungs)[LADDER_MAX_RUNGS], Err *e) {
    /* the fitted line as a curve of many points, as plot_lines marks each point of a series
     * of 30 or fewer and its ends are not measurements */
    enum { MAXC = PLOT_MAX_PANELS, FIT_POINTS = 64 };
    static double ex[MAXC][LADDER_MAX_RUNGS], ey[MAXC][LADDER_MAX_RUNGS], bx[MAXC][3 * LADDER_MAX_RUNGS],
        by[MAXC][3 * LADDER_MAX_RUNGS], zx[MAXC][2], zy[MAXC][2], fx[MAXC][FIT_POINTS], fy[MAXC][FIT_POINTS];
    static PlotSeries s[MAXC][4];
    static PlotSpec spec[MAXC];
    static char ylabel[MAXC][120], fit[MAXC][256];
    PlotPanel panel[MAXC];
    int np = 0;
    for (int c = 0; c < t->n_claims && c < MAXC; c++) {
        int n = 0, m = 0;
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < t->n_rungs; i++) {
            const Rung *r = &rungs[c][i];
            if (!r->ok || !isfinite(r->p.d.diff)) continue;
            ex[c][n] = r->flops, ey[c][n++] = r->p.d.diff;
            lo = fmin(lo, r->flops), hi = fmax(hi, r->flops);
            if (!isfinite(r->p.d.half)) continue;
            bx[c][m] = bx[c][m + 1] = r->flops, bx[c][m + 2] = NAN;
            by[c][m] = r->p.d.diff - r->p.d.half, by[c][m + 1] = r->p.d.diff + r->p.d.half, by[c][m + 2] = NAN;
            m += 3;
        }
        if (n == 0) continue; /* no rung judged it: nothing to draw */
        double slope, half, mean[2];
        int pairs;
        slope_of(rungs[c], t->n_rungs, &slope, &half, &pairs, mean);
        int k = 0;
        s[c][k++] = (PlotSeries){NULL, ex[c], ey[c], n, 0};
        if (m) s[c][k++] = (PlotSeries){NULL, bx[c], by[c], m, 1};
        zx[c][0] = lo / 1.3, zx[c][1] = hi * 1.3, zy[c][0] = zy[c][1] = 0;
        s[c][k++] = (PlotSeries){NULL, zx[c], zy[c], 2, 1};
        if (isfinite(half)) {
            Span sp = span_of(fmt_of(t, c), slope, half);
            snprintf(fit[c], sizeof fit[c], "slope %s [%s, %s]", sp.v, sp.lo, sp.hi);
            for (int j = 0; j < FIT_POINTS; j++) {
                double x = log10(lo) + (log10(hi) - log10(lo)) * j / (FIT_POINTS - 1);
                fx[c][j] = pow(10, x), fy[c][j] = line_at(mean, slope, x);
            }
            s[c][k++] = (PlotSeries){fit[c], fx[c], fy[c], FIT_POINTS, 0};
        }
        snprintf(ylabel[c], sizeof ylabel[c], "effect A - B, %s (below 0: holds)", unit_of(t, c));
        spec[c] = (PlotSpec){t->claims[c], "training FLOPs (log scale; slope per decade)", ylabel[c], 1, 0, 0, 0, 0};
        panel[np++] = (PlotPanel){&spec[c], s[c], k};
    }
    if (np == 0) return err_set(e, "%s: no rung has an effect to plot", path);
    return plot_panels(path, panel, np, np == 1 ? 1 : 2, e);
}

/* ladder.md, ladder.csv, ladder.png and the page into dir. */
static int write_ladder(const char *dir, const LadderText *t, Rung (*rungs)[LADDER_MAX_RUNGS], Err *e) {
    if (make_dirs(dir, e) != 0) return 1;
    char *md_text = NULL, *csv_text = NULL;
    size_t md_len, csv_len;
    FILE *md = open_memstream(&md_text, &md_len), *csv = open_memstream(&csv_text, &csv_len);
    if (!md || !csv) DIE("out of memory");
    fprintf(md, "Each claim across compute: at each rung, side B's model (parameters, training tokens = steps x batch "
                "x context, FLOPs = 3 x 2 x its multiply-adds per token, the score matrix counted whole, times the "
                "tokens), the seed pairs, the effect A - B (%s; below 0 the claim holds) with its "
                "interval",
            t->measure);
    if (t->plan && t->plan->n_looks)
        fprintf(md, " at %.1f%% (the seed plan's looks, --plan)", 100 * seed_plan_level(t->plan));
    else
        fprintf(md, " at 95%% (no seed plan: valid when the pairs were fixed in advance)");
    fprintf(md, ", the verdict and the training time of both arms' runs (their time_s, summed); then the slope of the pairs' effects against log10 FLOPs with its 95%% interval "
                "(least squares over every pair, t on N - 2 degrees of freedom).\n");
    fprintf(csv, "claim,rung,params,tokens,flops,pairs,apart,mixed_kernels,effect,low,high,level,verdict,"
                 "fit,slope,slope_low,slope_high\n");
    for (int c = 0; c < t->n_claims; c++) {
        Rung *r = rungs[c];
        const char *f = fmt_of(t, c);
        char cell[160];
        double slope, half, mean[2] = {0, 0};
        int pairs;
        slope_of(r, t->n_rungs, &slope, &half, &pairs, mean);
        fprintf(md, "\n## %s\n\n| rung | parameters | tokens | FLOPs | pairs | effect | interval | verdict | training time |\n"
                    "|---|---|---|---|---|---|---|---|---|\n",
                t->claims[c]);
        for (int i = 0; i < t->n_rungs; i++) {
            const char *name = t->names[i];
            if (!r[i].ok) {
                fprintf(md, "| %s | - | - | - | 0 | - | - | %s | - |\n", name, r[i].why);
                fprintf(csv, "\"%s\",%s,,,,0,,,,,,,,,,,\n", t->claims[c], name);
                continue;
            }
            const GridPaired *p = &r[i].p;
            fprintf(md, "| %s | %ld | %.3g | %.3g | %d", name, r[i].params, r[i].tokens, r[i].flops, p->pairs);
            if (p->apart) fprintf(md, " (%d apart)", p->apart);
            if (p->mixed) fprintf(md, " (%d mixed kernels)", p->mixed);
            /* no pair counted (all set apart): no effect, "-" rather than nan */
            if (isfinite(p->d.diff))
                snprintf(cell, sizeof cell, f, p->d.diff);
            else
                snprintf(cell, sizeof cell, "-");
            fprintf(md, " | %s | ", cell);
            if (isfinite(p->d.half)) {
                Span sp = span_of(f, p->d.diff, p->d.half);
                fprintf(md, "[%s, %s] | %s | %.1f h |\n", sp.lo, sp.hi, r[i].verdict, p->time_s / 3600);
            } else
                fprintf(md, "- | %s | %.1f h |\n", r[i].verdict, p->time_s / 3600);
            fprintf(csv, "\"%s\",%s,%ld,%.0f,%.6g,%d,%d,%d,", t->claims[c], name, r[i].params, r[i].tokens, r[i].flops,
                    p->pairs, p->apart, p->mixed);
            if (isfinite(p->d.diff)) fprintf(csv, "%.6f", p->d.diff);
            fputc(',', csv);
            if (isfinite(p->d.half))
                fprintf(csv, "%.6f,%.6f,", p->d.diff - p->d.half, p->d.diff + p->d.half);
            else
                fputs(",,", csv);
            /* the least-squares line at this rung's FLOPs, and its slope with the 95% interval,
             * so that the page draws the line the plot draws */
            char fit[160] = ",,,";
            if (isfinite(half) && isfinite(r[i].flops))
                snprintf(fit, sizeof fit, "%.6f,%.6f,%.6f,%.6f", line_at(mean, slope, log10(r[i].flops)),
                         slope, slope - half, slope + half);
            fprintf(csv, "%.4f,\"%s\",%s\n", p->level, r[i].verdict, fit);
        }
        if (isfinite(half)) {
            Span sp = span_of(f, slope, half);
            fprintf(md, "\nslope: %s %s per decade of FLOPs, 95%% interval [%s, %s] (%d pairs)\n", sp.v, unit_of(t, c),
                    sp.lo, sp.hi, pairs);
        } else
            fprintf(md, "\nslope: too few pairs (%d), or pairs at one rung alone\n", pairs);
        char words[600];
        survival(r, t->n_rungs, slope, half, unit_of(t, c), f, words, sizeof words);
        fprintf(md, "\nacross scale: %s\n", words);
        printf("%s: %s\n", t->claims[c], words);
    }
    /* the command that remade these tables (tests/results_layout.sh runs it again) */
    fprintf(md, "\ncommand: %s\n", t->command);
    int rc = 0;
    if (fclose(md) != 0 || fclose(csv) != 0) DIE("out of memory");
    char path[1200];
    if (path_join(path, sizeof path, dir, "ladder.md", e) || write_file_atomic(path, md_text, e) ||
        path_join(path, sizeof path, dir, "ladder.csv", e) || write_file_atomic(path, csv_text, e))
        rc = 1;
    if (rc == 0 && path_join(path, sizeof path, dir, "ladder.png", e) == 0) {
        Err pe;
        if (write_plot(path, t, rungs, &pe) != 0) fprintf(stderr, "note: ladder.png: %s\n", pe.msg);
    }
    if (rc == 0 && page_write_ladder(dir, e) != 0) rc = 1;
    free(md_text), free(csv_text);
    if (rc == 0) printf("wrote %s/ladder.md, ladder.csv, ladder.png, index.html\n", dir);
    return rc;
}

/* " --plan 3,6,12" (nothing without looks) appended to buf. */
static void plan_words(const SeedPlan *plan, char *buf, size_t size) {
    if (!plan || !plan->n_looks) return;
    size_t k = strlen(buf);
    k += (size_t)snprintf(buf + k, k < size ? size - k : 0, " --plan ");
    for (int i = 0; i < plan->n_looks && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%d", i ? "," : "", plan->looks[i]);
}

/* Appends printf-formatted words to buf. */
static void append(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t size, const char *fmt, ...) {
    size_t k = strlen(buf);
    if (k >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + k, size - k, fmt, ap);
    va_end(ap);
}

int ladder_run(const Ladder *l, const char *dir, Err *e) {
    static Rung rungs[16][LADDER_MAX_RUNGS];
    if (l->n_claims > 16) return err_set(e, "--ladder: at most 16 claims"), 2;
    char lower[16][400], higher[16][400];
    for (int c = 0; c < l->n_claims; c++)
        if (claim_sides(l->claims[c], lower[c], higher[c], sizeof lower[c], e) != 0) return 2;
    static LadderText t;
    static char command[8192];
    memset(&t, 0, sizeof t);
    t.claims = l->claims, t.n_claims = l->n_claims, t.n_rungs = l->n_grids;
    t.measure = "final val bpb", t.plan = l->plan;
    for (int i = 0; i < l->n_grids; i++) run_name_of(l->grids[i], t.names[i], sizeof t.names[i]);
    for (int c = 0; c < l->n_claims; c++) {
        claim_rungs(l, lower[c], higher[c], rungs[c]);
        for (int i = 0; i < l->n_grids; i++)
            if (rungs[c][i].ok) rung_budget(&rungs[c][i]);
    }
    snprintf(command, sizeof command, "./ablate --ladder");
    for (int i = 0; i < l->n_grids; i++) append(command, sizeof command, " %s", l->grids[i]);
    for (int c = 0; c < l->n_claims; c++) append(command, sizeof command, " --expect \"%s\"", l->claims[c]);
    plan_words(l->plan, command, sizeof command);
    if (l->within != 0.02) append(command, sizeof command, " --within %g", l->within);
    if (l->mixed_kernels) append(command, sizeof command, " --mixed-kernels");
    append(command, sizeof command, " --out %s", dir);
    t.command = command;
    return write_ladder(dir, &t, rungs, e);
}

int ladder_spectrum_run(const char *const *arms, int n_arms, const SeedPlan *plan, double within_c,
                        double within_k, const char *dir, Err *e) {
    static Rung rungs[4][LADDER_MAX_RUNGS];
    if (n_arms % 2 || n_arms < 4 || n_arms > 2 * LADDER_MAX_RUNGS)
        return err_set(e, "--ladder: takes 2 to %d rungs, each two arms INIT/POINT TRAINED/POINT (got %d words)",
                       LADDER_MAX_RUNGS, n_arms),
               2;
    static const char *const claims[4] = {"first layer, c(T/4): initialisation < trained",
                                          "last layer, c(T/4): initialisation < trained",
                                          "first layer, k 90%: trained < initialisation",
                                          "last layer, k 90%: trained < initialisation"};
    static const char *const units[4] = {"c(T/4)", "c(T/4)", "values", "values"};
    static const char *const fmts[4] = {"%+.4f", "%+.4f", "%+.2f", "%+.2f"};
    static LadderText t;
    static char command[8192];
    memset(&t, 0, sizeof t);
    t.claims = claims, t.n_claims = 4, t.n_rungs = n_arms / 2;
    t.measure = "the spectrum of P: c(T/4), the mean over heads of the share of the singular values' energy in the "
                "largest T/4, or the k that reaches 90%; training makes P more skewed when c rises and k falls";
    t.unit = units, t.fmt = fmts, t.plan = plan;
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < t.n_rungs; i++) {
            Rung *r = &rungs[c][i];
            const char *init = arms[2 * i], *trained = arms[2 * i + 1];
            char grid[1300];
            snprintf(grid, sizeof grid, "%s", trained);
            char *slash = strrchr(grid, '/');
            if (slash && slash != grid) *slash = '\0';
            run_name_of(grid, t.names[i], sizeof t.names[i]);
            memset(r, 0, sizeof *r);
            r->flops = r->tokens = NAN;
            static SpectrumPairs sp;
            Err pe;
            if (spectrum_arm_pairs(init, trained, c % 2 ? -1 : 0, c / 2, plan, &sp, &pe) != 0) {
                snprintf(r->why, sizeof r->why, "%s", pe.msg);
                continue;
            }
            r->ok = true, r->p = sp.p, r->cfg = sp.cfg;
            rung_budget(r);
            double within = c / 2 ? within_k : within_c;
            grid_verdict_words(&r->p, within, r->verdict, sizeof r->verdict);
            Verdict v = verdict_rule(&r->p.d, within);
            if (v.kind == VERDICT_NO_EFFECT) /* in the statistic's unit, not bpb */
                snprintf(r->verdict, sizeof r->verdict, c / 2 ? "no effect larger than %.2f values" : "no effect larger than %.4f",
                         v.bound);
        }
    snprintf(command, sizeof command, "./spectrum --ladder");
    for (int i = 0; i < n_arms; i++) append(command, sizeof command, " %s", arms[i]);
    plan_words(plan, command, sizeof command);
    if (within_c != 0.02) append(command, sizeof command, " --within %g", within_c);
    if (within_k != 2) append(command, sizeof command, " --within_k %g", within_k);
    append(command, sizeof command, " --out %s", dir);
    t.command = command;
    return write_ladder(dir, &t, rungs, e);
}
