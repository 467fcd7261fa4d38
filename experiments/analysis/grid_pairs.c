/* grid_pairs.c: seed pairs (grid_pairs.h): a grid's two points, or two arms'
 * run folders (./ablate --paired), paired seed by seed under the rule (the
 * seed plan, the plateau, the kernels), with the interval and its power;
 * grid_report.c makes the tables from them. */
#include "grid_pairs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether run r finished with a final val bpb. */
bool grid_run_has_value(const GridRun *r) {
    return r && !r->skipped && r->result.status == TRAIN_DONE && isfinite(r->result.val_bpb);
}

/* Point p's runs by seed index (NULL where it has none). */
static void by_seed(const GridRun *runs, int n, int p, const GridRun **out) {
    for (int s = 0; s < GRID_MAX_SEEDS; s++) out[s] = NULL;
    for (int i = 0; i < n; i++)
        if (runs[i].point == p && runs[i].seed_index < GRID_MAX_SEEDS) out[runs[i].seed_index] = &runs[i];
}

/* How seed pairs are counted: the seed plan the intervals follow (stats.h;
 * no looks: one 95% interval over every pair), and whether a pair whose runs
 * ran under different kernels (provenance.h) counts. */
typedef struct {
    const SeedPlan *plan;
    bool mixed_kernels;
} PairRule;

static PairRule grid_rule(const Grid *g) { return (PairRule){&g->plan, g->mixed_kernels}; }

/* Whether runs x and y ran under different kernels, as far as they say: a
 * run that recorded none (made before runs did) differs from nothing. */
static bool kernels_differ(const GridRun *x, const GridRun *y) {
    return x->kernel_mixed || y->kernel_mixed || (x->kernel[0] && y->kernel[0] && strcmp(x->kernel, y->kernel));
}

/* A seed-matched difference b - a: over the seeds where both runs have a
 * value, neither is on the plateau (apart: those where both have a value
 * but one is on it) and, unless the rule allows them, both ran under one
 * kernel (mixed: those that did not); under a plan, over the first pairs of
 * the last look they reach, at the plan's level (beyond: the pairs past
 * it). With its power: the smallest difference the pairs resolve at 95%
 * with 80% power, and the pairs that would resolve the difference seen. */

static GridPaired paired_of(const GridRun *const *a, const GridRun *const *b, int n_seeds, const PairRule *rule) {
    double x[GRID_MAX_PAIRS] = {0}, y[GRID_MAX_PAIRS] = {0};
    GridPaired p = {.pairs = 0, .look = -1, .next_look = -1};
    char why[128];
    int found = 0;
    for (int s = 0; s < n_seeds && found < GRID_MAX_PAIRS; s++) {
        if (!grid_run_has_value(a[s]) || !grid_run_has_value(b[s])) continue;
        if (grid_plateau(a[s], why, sizeof why) || grid_plateau(b[s], why, sizeof why)) {
            p.apart++;
            continue;
        }
        if (!rule->mixed_kernels && kernels_differ(a[s], b[s])) {
            p.mixed++;
            continue;
        }
        x[found] = a[s]->result.val_bpb;
        y[found++] = b[s]->result.val_bpb;
    }
    GridPaired q = grid_paired_values(x, y, found, rule->plan);
    q.apart = p.apart, q.mixed = p.mixed;
    return q;
}

GridPaired grid_paired_values(const double *x, const double *y, int found, const SeedPlan *plan) {
    GridPaired p = {.pairs = 0, .look = -1, .next_look = -1};
    p.planned = plan && plan->n_looks;
    p.level = p.planned ? seed_plan_level(plan) : 0.95;
    p.pairs = found;
    if (p.planned) {
        p.look = seed_plan_look(plan, found);
        p.pairs = p.look >= 0 ? plan->looks[p.look] : found;
        p.beyond = found - p.pairs;
        p.next_look = p.look + 1 < plan->n_looks ? plan->looks[p.look + 1] : -1;
    }
    for (int i = 0; i < p.pairs; i++) p.diffs[i] = y[i] - x[i];
    p.d = paired_difference_at(y, x, p.pairs, p.level);
    if (p.planned && p.look < 0) p.d.half = NAN, p.d.excludes_zero = false; /* not at the first look yet */
    p.sd = p.pairs > 1 ? p.d.se * sqrt(p.pairs) : NAN;
    p.resolvable = min_resolvable(p.d.se, p.d.df);
    p.needed = isfinite(p.d.half) ? seeds_needed_paired(p.d.diff, p.sd, VERDICT_SEEDS_CAP) : -1;
    return p;
}

/* points p and q (b - a = q - p) of the grid, paired */
GridPaired grid_paired_points(const Grid *g, const GridRun *runs, int n, int p, int q) {
    const GridRun *a[GRID_MAX_SEEDS], *b[GRID_MAX_SEEDS];
    by_seed(runs, n, p, a);
    by_seed(runs, n, q, b);
    PairRule rule = grid_rule(g);
    return paired_of(a, b, GRID_MAX_SEEDS, &rule);
}

#define ARM_MAX_RUNS GRID_MAX_PAIRS

static void grid_free_runs_only(GridRun *runs, int n) {
    for (int i = 0; i < n; i++) free(runs[i].steps), free(runs[i].bpb);
}

/* The runs of an arm, DIR/POINT: the folders DIR/POINT_seed-<n>, read with
 * grid_read_folder, by seed; a run not yet evaluated (no final value) is
 * left out. The count, or -1 with e set. */
static int arm_runs(const char *arm, GridRun *runs, long long *seeds, Err *e) {
    static GridArmRun folders[ARM_MAX_RUNS];
    int found = grid_arm_folders(arm, folders, ARM_MAX_RUNS, e), n = 0;
    for (int i = 0; i < found; i++) {
        if (grid_read_folder(&runs[n], folders[i].folder, e) != 0) {
            free(runs[n].steps), free(runs[n].bpb);
            grid_free_runs_only(runs, n);
            return -1;
        }
        if (runs[n].n_points)
            seeds[n++] = folders[i].seed;
        else
            free(runs[n].steps), free(runs[n].bpb);
    }
    if (found > 0 && !n) return err_set(e, "%s: no runs with a final value", arm);
    return found < 0 ? -1 : n;
}

/* The verdict rule on b - a, with no claim: which way the interval excludes 0. */
static void paired_verdict(FILE *out, const GridPaired *p, double within) {
    if (p->mixed) fprintf(out, "left out: %d seed pair(s) whose runs ran under different kernels\n", p->mixed);
    if (p->planned && p->look < 0) {
        fprintf(out, "paired: %d seed pair(s) off the plateau; the plan's first look is at %d: inconclusive\n",
                p->pairs, p->next_look);
        return;
    }
    if (!isfinite(p->d.half)) {
        fprintf(out, "paired: %d seed pair(s) off the plateau, too few for an interval: inconclusive\n", p->pairs);
        return;
    }
    double lo = p->d.diff - p->d.half, hi = p->d.diff + p->d.half;
    fprintf(out, "paired: n %d, mean %+.4f, sd %.4f, %.4g%% interval [%+.4f, %+.4f]", p->pairs, p->d.diff, p->sd,
            100 * p->level, lo, hi);
    if (p->planned) fprintf(out, " (the plan's look %d%s)", p->look + 1, p->beyond ? ", later pairs past it" : "");
    fputc('\n', out);
    Verdict v = verdict_rule(&p->d, within);
    if (v.kind == VERDICT_AGREES || v.kind == VERDICT_DISAGREES)
        fprintf(out, "verdict: excludes 0, B %c A\n", v.kind == VERDICT_AGREES ? '<' : '>');
    else if (v.kind == VERDICT_NO_EFFECT)
        fprintf(out, "verdict: no effect larger than %.4f bpb (X = %g)\n", v.bound, within);
    else if (p->planned && p->next_look > 0)
        fprintf(out, "verdict: inconclusive; the plan's next look: %d pairs\n", p->next_look);
    else if (p->planned)
        fprintf(out, "verdict: inconclusive at the plan's last look\n");
    else if (v.seeds_needed < 0)
        fprintf(out, "verdict: inconclusive; over %d seed pairs would resolve %+.4f (95%%, 80%% power)\n",
                VERDICT_SEEDS_CAP, p->d.diff);
    else
        fprintf(out, "verdict: inconclusive; %d seed pairs would resolve %+.4f (95%%, 80%% power)\n", v.seeds_needed,
                p->d.diff);
}

/* Two arms paired seed by seed: *p their difference b - a by the rule, *cfg
 * arm a's first run's config; each seed's line on out unless NULL. */
static int arms_paired(FILE *out, const char *arm_a, const char *arm_b, const PairRule *rule, GridPaired *p,
                       Config *cfg, Err *e) {
    static GridRun ra[ARM_MAX_RUNS], rb[ARM_MAX_RUNS];
    static long long sa[ARM_MAX_RUNS], sb[ARM_MAX_RUNS];
    int na = arm_runs(arm_a, ra, sa, e);
    if (na < 0) return -1;
    int nb = arm_runs(arm_b, rb, sb, e);
    if (nb < 0) {
        grid_free_runs_only(ra, na);
        return -1;
    }
    if (out) fprintf(out, "B - A, final val bpb, by seed\n  A = %s\n  B = %s\n", arm_a, arm_b);
    const GridRun *a[ARM_MAX_RUNS] = {0}, *b[ARM_MAX_RUNS] = {0};
    int k = 0;
    for (int j = 0; j < nb; j++) {
        int i = 0;
        while (i < na && sa[i] != sb[j]) i++;
        if (i == na) continue;
        a[k] = &ra[i], b[k++] = &rb[j];
        if (!out) continue;
        double d = rb[j].result.val_bpb - ra[i].result.val_bpb;
        char wa[128], wb[128];
        bool pa = grid_plateau(&ra[i], wa, sizeof wa), pb = grid_plateau(&rb[j], wb, sizeof wb);
        fprintf(out, "  seed %lld: A %.4f  B %.4f  B - A %+.4f", sb[j], ra[i].result.val_bpb, rb[j].result.val_bpb, d);
        if (kernels_differ(&ra[i], &rb[j])) fprintf(out, "  kernels differ%s", rule->mixed_kernels ? "" : ": left out");
        if (pa || pb)
            fprintf(out, "  apart: %s%s%s%s%s", pa ? "A " : "", pa ? wa : "", pa && pb ? "; " : "", pb ? "B " : "",
                    pb ? wb : "");
        fputc('\n', out);
    }
    *p = paired_of(a, b, k, rule);
    p->time_s = 0;
    for (int i = 0; i < na; i++) p->time_s += isfinite(ra[i].time_s) ? ra[i].time_s : 0;
    for (int j = 0; j < nb; j++) p->time_s += isfinite(rb[j].time_s) ? rb[j].time_s : 0;
    if (cfg) *cfg = ra[0].cfg;
    grid_free_runs_only(ra, na);
    grid_free_runs_only(rb, nb);
    return 0;
}

int grid_paired_report(FILE *out, const char *arm_a, const char *arm_b, double within, const SeedPlan *plan,
                       bool mixed_kernels, Err *e) {
    static GridPaired p;
    PairRule rule = {plan, mixed_kernels};
    if (arms_paired(out, arm_a, arm_b, &rule, &p, NULL, e) != 0) return -1;
    paired_verdict(out, &p, within);
    return 0;
}

int grid_arm_pairs(const char *arm_a, const char *arm_b, const SeedPlan *plan, bool mixed_kernels, GridPaired *out,
                   Config *cfg, Err *e) {
    PairRule rule = {plan, mixed_kernels};
    return arms_paired(NULL, arm_a, arm_b, &rule, out, cfg, e);
}
