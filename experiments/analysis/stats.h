/* room analysis/: grids, their statistics, reports and pages, spectra; includes the engine and any room below. */
/* stats.h: what a grid's seeds say: means, standard deviations, 95%
 * intervals, differences between two variants with their intervals (Welch's
 * for independent samples, Student's paired interval for seed-matched runs),
 * and power: the smallest difference the seeds can resolve, and the seeds a
 * difference would need. */
#ifndef ATTNLAB_STATS_H
#define ATTNLAB_STATS_H

#include <stdbool.h>

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

#endif
