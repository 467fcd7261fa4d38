/* stats.c: summaries, intervals and power for a grid's seeds.
 *
 * Student's t distribution through the regularised incomplete beta function:
 * for t >= 0, P(T <= t) = 1 - I_x(df / 2, 1 / 2) / 2 with x = df / (df + t^2).
 * I_x is evaluated by its continued fraction (modified Lentz), on whichever
 * side of the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) converges fast, and the
 * quantile by bisection on the cdf, which is monotone. */
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>

#include "util.h"

#include <math.h>

/* The continued fraction of I_x(a, b) without its prefactor. */
static double beta_fraction(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-15;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 500; m++) {
        double m2 = 2.0 * m;
        double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
        for (int pass = 0; pass < 2; pass++) {
            d = 1 + num * d;
            if (fabs(d) < tiny) d = tiny;
            c = 1 + num / c;
            if (fabs(c) < tiny) c = tiny;
            d = 1 / d;
            h *= d * c;
            num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
        }
        if (fabs(d * c - 1) < eps) break;
    }
    return h;
}

/* The regularised incomplete beta function I_x(a, b), 0 <= x <= 1. */
static double inc_beta(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double lead = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    if (x < (a + 1) / (a + b + 2)) return lead * beta_fraction(a, b, x) / a;
    return 1 - lead * beta_fraction(b, a, 1 - x) / b;
}

double t_cdf(double t, double df) {
    if (!(df > 0) || isnan(t)) return NAN;
    if (isinf(t)) return t > 0 ? 1 : 0;
    double tail = 0.5 * inc_beta(df / 2, 0.5, df / (df + t * t));
    return t >= 0 ? 1 - tail : tail;
}

double t_quantile(double p, double df) {
    if (!(df > 0) || !(p > 0 && p < 1)) return NAN;
    if (p < 0.5) return -t_quantile(1 - p, df);
    double lo = 0, hi = 1;
    while (t_cdf(hi, df) < p && hi < 1e300) hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * (1 + hi); i++) {
        double mid = 0.5 * (lo + hi);
        if (t_cdf(mid, df) < p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

double t975(double df) { return t_quantile(0.975, df); }

Summary summarize(const double *x, int n) {
    Summary s = {.n = n, .mean = NAN, .sd = NAN, .half = NAN};
    if (n < 1) return s;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    s.mean = sum / n;
    if (n < 2) return s;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (x[i] - s.mean) * (x[i] - s.mean);
    s.sd = sqrt(ss / (n - 1));
    s.half = t975(n - 1) * s.sd / sqrt(n);
    return s;
}

/* The interval diff +- t((1 + level) / 2, df) se. */
static Difference interval_at(double diff, double se, double df, double level) {
    Difference d = {.diff = diff, .half = NAN, .excludes_zero = false, .df = df, .se = se};
    if (se == 0) { /* no spread at all: the interval is the point */
        d.half = 0;
        d.excludes_zero = diff != 0;
        return d;
    }
    d.half = t_quantile(0.5 + level / 2, df) * se;
    d.excludes_zero = fabs(diff) > d.half;
    return d;
}

static Difference interval(double diff, double se, double df) { return interval_at(diff, se, df, 0.95); }

Difference difference(const Summary *a, const Summary *b) {
    if (a->n < 2 || b->n < 2) return (Difference){a->mean - b->mean, NAN, false, NAN, NAN};
    double va = a->sd * a->sd / a->n, vb = b->sd * b->sd / b->n, se2 = va + vb;
    double nu = se2 > 0 ? se2 * se2 / (va * va / (a->n - 1) + vb * vb / (b->n - 1)) : NAN;
    return interval(a->mean - b->mean, sqrt(se2), nu);
}

Difference paired_difference_at(const double *a, const double *b, int n, double level) {
    if (n < 1) return (Difference){NAN, NAN, false, NAN, NAN};
    double mean = 0, ss = 0;
    for (int i = 0; i < n; i++) mean += (a[i] - b[i]) / n;
    if (n < 2) return (Difference){mean, NAN, false, NAN, NAN};
    for (int i = 0; i < n; i++) ss += (a[i] - b[i] - mean) * (a[i] - b[i] - mean);
    return interval_at(mean, sqrt(ss / (n - 1)) / sqrt(n), n - 1, level);
}

Difference paired_difference(const double *a, const double *b, int n) { return paired_difference_at(a, b, n, 0.95); }

double min_resolvable(double se, double df) {
    if (!(se >= 0) || !(df > 0)) return NAN;
    return (t975(df) + t_quantile(0.8, df)) * se;
}

int seeds_needed_paired(double diff, double sd, int cap) {
    if (!(sd >= 0) || !isfinite(diff) || diff == 0) return -1;
    for (int n = 2; n <= cap; n++)
        if (min_resolvable(sd / sqrt(n), n - 1) <= fabs(diff)) return n;
    return -1;
}

int seeds_needed_welch(double diff, double sa, double sb, int cap) {
    if (!(sa >= 0) || !(sb >= 0) || !isfinite(diff) || diff == 0) return -1;
    for (int n = 2; n <= cap; n++) {
        double va = sa * sa / n, vb = sb * sb / n, se2 = va + vb;
        double nu = se2 > 0 ? se2 * se2 / ((va * va + vb * vb) / (n - 1)) : n - 1;
        if (min_resolvable(sqrt(se2), nu) <= fabs(diff)) return n;
    }
    return -1;
}

Verdict verdict_rule(const Difference *d, double within) {
    Verdict v = {.kind = VERDICT_INCONCLUSIVE, .bound = NAN, .seeds_needed = -1};
    if (!isfinite(d->half)) return v;
    double lo = d->diff - d->half, hi = d->diff + d->half;
    if (d->excludes_zero) {
        v.kind = hi < 0 ? VERDICT_AGREES : VERDICT_DISAGREES;
        return v;
    }
    v.bound = fmax(fabs(lo), fabs(hi));
    if (v.bound <= within) {
        v.kind = VERDICT_NO_EFFECT;
        return v;
    }
    /* a paired interval: n = df + 1 pairs of sd se sqrt(n) */
    v.seeds_needed = seeds_needed_paired(d->diff, d->se * sqrt(d->df + 1), VERDICT_SEEDS_CAP);
    return v;
}

int seed_plan_parse(const char *text, SeedPlan *p, char *why, size_t size) {
    p->n_looks = 0;
    const char *s = text;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || (*end && *end != ',') || v < 2 || v > 1000)
            return snprintf(why, size, "'%s': expected pair counts from 2 to 1000, comma-separated (3,6,12)", text),
                   -1;
        if (p->n_looks == SEED_PLAN_MAX_LOOKS)
            return snprintf(why, size, "'%s': at most %d looks", text, SEED_PLAN_MAX_LOOKS), -1;
        if (p->n_looks && v <= p->looks[p->n_looks - 1])
            return snprintf(why, size, "'%s': the looks must increase", text), -1;
        p->looks[p->n_looks++] = (int)v;
        s = *end ? end + 1 : end;
        if (*end && !*s) return snprintf(why, size, "'%s': a look is missing after the last comma", text), -1;
    }
    if (!p->n_looks) return snprintf(why, size, "'%s': no looks", text), -1;
    return 0;
}

double seed_plan_level(const SeedPlan *p) { return p->n_looks ? 1 - 0.05 / p->n_looks : 0.95; }

int seed_plan_look(const SeedPlan *p, int pairs) {
    if (!p->n_looks) return pairs >= 2 ? 0 : -1;
    int look = -1;
    for (int i = 0; i < p->n_looks; i++)
        if (pairs >= p->looks[i]) look = i;
    return look;
}

/* A standard normal from two 64-bit draws of a splitmix generator (Box-Muller). */
static double normal_draw(unsigned long long *state) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        unsigned long long z = (*state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        u[i] = ((double)(z >> 11) + 0.5) / 9007199254740992.0; /* in (0, 1) */
    }
    return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* Whether the verdict rule decides on d: excludes 0, or lies within +-within. */
static bool decides(const Difference *d, double within) {
    return isfinite(d->half) && (d->excludes_zero || fmax(fabs(d->diff - d->half), fabs(d->diff + d->half)) <= within);
}

double seed_plan_coverage(const SeedPlan *p, int first, int last, double within, int experiments,
                          unsigned long long seed) {
    int most = p ? p->looks[p->n_looks - 1] : last;
    double *x = xmalloc((size_t)most * sizeof *x), *zero = xcalloc((size_t)most, sizeof *zero);
    unsigned long long state = seed;
    int covered = 0;
    for (int e = 0; e < experiments; e++) {
        for (int i = 0; i < most; i++) x[i] = normal_draw(&state);
        Difference d = {0};
        if (p) {
            for (int k = 0; k < p->n_looks; k++) {
                d = paired_difference_at(x, zero, p->looks[k], seed_plan_level(p));
                if (decides(&d, within)) break;
            }
        } else {
            for (int n = first; n <= last; n++) {
                d = paired_difference(x, zero, n);
                if (decides(&d, within)) break;
            }
        }
        covered += !d.excludes_zero;
    }
    free(x), free(zero);
    return (double)covered / experiments;
}
