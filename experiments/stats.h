/* stats.h: what a grid's seeds say: means, standard deviations, 95%
 * intervals, and differences between two variants with their intervals. */
#ifndef ATTNLAB_STATS_H
#define ATTNLAB_STATS_H

#include <stdbool.h>

/* x[0..n) summarised; with n < 2 sd and half are NAN. */
typedef struct {
    int n;
    double mean, sd; /* sd with n - 1 */
    double half;     /* the 95% interval is mean +- half: t(0.975, n - 1) sd / sqrt(n) */
} Summary;

/* The 0.975 quantile of Student's t with df degrees of freedom (df >= 1;
 * between tabled values the larger, so that an interval is never too narrow). */
double t975(double df);
Summary summarize(const double *x, int n);

/* a - b for two independent samples, Welch's interval (unequal variances):
 * diff +- t(0.975, nu) sqrt(sa^2/na + sb^2/nb), nu by Welch-Satterthwaite.
 * half is NAN when either sample has fewer than 2 values. */
typedef struct {
    double diff, half;
    bool excludes_zero; /* the interval lies on one side of 0 */
} Difference;
Difference difference(const Summary *a, const Summary *b);

#endif
