/* room analysis/: grids, their statistics, reports and pages, spectra; includes the engine and any room below. */
/* stats.h: what a grid's seeds say: means, standard deviations, 95%
 * intervals, differences between two variants with their intervals (Welch's
 * for independent samples, Student's paired interval for seed-matched runs),
 * and power: the smallest difference the seeds can resolve, and the seeds a
 * difference would need. */
#ifndef ATTNLAB_STATS_H
#define ATTNLAB_STATS_H

#include <stdbool.h>
#include <stddef.h>

/* x[0..n) summarised; with n < 2 sd and half are NAN. */
typedef struct {
    int n;
    double mean, sd; /* sd with n - 1 */
    double half;     /* the 95% interval is mean +- half: t(0.975, n - 1) sd / sqrt(n) */
} Summary;

/* The p quantile of Student's t with df > 0 degrees of freedom (any real df,
 * as Welch's are), for 0 < p < 1; NAN outside. Accurate to about 1e-9. */
double t_quantile(double p, double df);
/* P(T <= t) for Student's t with df > 0 degrees of freedom. */
double t_cdf(double t, double df);
/* t_quantile(0.975, df). */
double t975(double df);
Summary summarize(const double *x, int n);

/* A difference between two variants and its 95% interval, diff +- half. */
typedef struct {
    double diff, half;
    bool excludes_zero; /* the interval lies on one side of 0 */
    double df;          /* the interval's degrees of freedom (NAN when none) */
    double se;          /* its standard error */
} Difference;
/* a - b for two independent samples, Welch's interval (unequal variances):
 * diff +- t(0.975, nu) sqrt(sa^2/na + sb^2/nb), nu by Welch-Satterthwaite
 * (fractional). half is NAN when either sample has fewer than 2 values. */
Difference difference(const Summary *a, const Summary *b);
/* a[i] - b[i] over n seed-matched pairs: the mean difference with Student's
 * paired interval, t(0.975, n - 1) sd(a - b) / sqrt(n); half NAN for n < 2. */
Difference paired_difference(const double *a, const double *b, int n);

/* Power at 95% (two-sided) and 80%: for a difference with standard error se
 * on df degrees of freedom, the smallest true difference the interval
 * excludes 0 for with probability 0.8: (t(0.975, df) + t(0.8, df)) se. */
double min_resolvable(double se, double df);
/* The seeds needed to resolve a true difference `diff`: paired, with per-pair
 * sd `sd` (n pairs, df n - 1); unpaired, with arm sds sa, sb and n seeds in
 * each arm (Welch's df). The smallest n >= 2 that resolves it, or -1 when
 * more than `cap` would be needed (or diff is 0, or the spread unknown). */
int seeds_needed_paired(double diff, double sd, int cap);
int seeds_needed_welch(double diff, double sa, double sb, int cap);

/* EXPERIMENTS.md's verdict rule, on a seed-matched difference d taken as
 * (the side claimed lower) - (the side claimed higher), so that the claim is
 * d < 0 (lower val bpb is better):
 *   agrees:    the paired 95% interval lies below 0;
 *   disagrees: it lies above 0;
 *   no effect larger than X: neither, and X, the interval's larger bound in
 *              absolute value, is at most `within` (0.02 bpb);
 *   inconclusive: otherwise (or with fewer than 2 pairs), with the pairs that
 *              would resolve the difference seen at 95% with 80% power. */
typedef enum { VERDICT_AGREES, VERDICT_DISAGREES, VERDICT_NO_EFFECT, VERDICT_INCONCLUSIVE } VerdictKind;
typedef struct {
    VerdictKind kind;
    double bound;     /* the interval's larger bound in absolute value: X when no effect */
    int seeds_needed; /* inconclusive: seeds_needed_paired (-1: beyond the cap, or no interval) */
} Verdict;
#define VERDICT_SEEDS_CAP 1000
Verdict verdict_rule(const Difference *d, double within);

/* A seed plan fixed before the runs (./ablate --plan 3,6,12): the numbers of
 * seed pairs at which the paired interval is looked at, increasing. Each
 * look's interval is at the level 1 - 0.05 / (number of looks) (Bonferroni),
 * so that all the looks' intervals hold together with probability at least
 * 95% whatever the data made the experimenter do between them: stop at the
 * first look that decides, or go on to the next. A look uses exactly its
 * first n pairs, in seed order. No looks (n_looks 0): the single interval
 * at 95% over every pair there is, valid only if the number of pairs was
 * fixed in advance. */
#define SEED_PLAN_MAX_LOOKS 8
typedef struct {
    int looks[SEED_PLAN_MAX_LOOKS];
    int n_looks;
} SeedPlan;
/* "3,6,12" into p: 0, or -1 with why (at most size bytes) set. */
int seed_plan_parse(const char *text, SeedPlan *p, char *why, size_t size);
/* The two-sided level of each look's interval (0.95 without looks). */
double seed_plan_level(const SeedPlan *p);
/* The index of the last look that `pairs` reaches, -1 when none (with no
 * looks: 0 when pairs >= 2). */
int seed_plan_look(const SeedPlan *p, int pairs);
/* paired_difference with a two-sided interval at `level` instead of 0.95. */
Difference paired_difference_at(const double *a, const double *b, int n, double level);
/* Coverage of the zero effect over `experiments` simulated null experiments
 * (pair differences drawn from N(0, 1), seeded): under the plan p, each stops
 * at the first look whose interval excludes 0 or lies within +-within (the
 * verdict rule) or at the last look; covered when its final interval holds 0.
 * With p NULL, the practice a plan replaces: start at `first` pairs and add
 * one pair at a time, up to `last`, until the 95% interval decides. */
double seed_plan_coverage(const SeedPlan *p, int first, int last, double within, int experiments,
                          unsigned long long seed);

#endif
