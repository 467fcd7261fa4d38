/* stats.c: summaries and Welch intervals for a grid's seeds. */
#include "stats.h"

#include <math.h>

/* t(0.975, df) for df = 1..30, then 40, 60, 120 and the normal limit. */
static const double t_small[30] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
                                   2.2010,  2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
                                   2.0796,  2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423};

double t975(double df) {
    if (!(df >= 1)) return NAN;
    if (df <= 30) return t_small[(int)floor(df) - 1]; /* the fewer degrees: the wider interval */
    if (df < 40) return 2.0423;
    if (df < 60) return 2.0211;
    if (df < 120) return 2.0003;
    return 1.9799;
}

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

Difference difference(const Summary *a, const Summary *b) {
    Difference d = {.diff = a->mean - b->mean, .half = NAN, .excludes_zero = false};
    if (a->n < 2 || b->n < 2) return d;
    double va = a->sd * a->sd / a->n, vb = b->sd * b->sd / b->n, se2 = va + vb;
    if (se2 == 0) { /* no spread at all: the interval is the point */
        d.half = 0;
        d.excludes_zero = d.diff != 0;
        return d;
    }
    double nu = se2 * se2 / (va * va / (a->n - 1) + vb * vb / (b->n - 1));
    d.half = t975(nu) * sqrt(se2);
    d.excludes_zero = fabs(d.diff) > d.half;
    return d;
}
