/* test_stats.c: t quantiles, Welch's and the paired intervals, and the power
 * lines, on inputs worked by hand. The t quantiles were computed apart from
 * our code, by integrating Student's density to 30 digits and solving for
 * the quantile. Each check is one a plausible mistake fails: df rounded
 * down (t(0.975, 4.909) would be t(0.975, 4) = 2.7764), n instead of n - 1,
 * Welch's interval where the seeds are paired, z instead of t in the power.
 * Then ./spectrum's per-layer figures and its spectrum.csv reader. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spectrum_pairs.h"
#include "stats.h"
#include "test_util.h"

START_TEST(test_t_quantiles) {
    static const struct {
        double p, df, want;
    } q[] = {
        {0.975, 1, 12.7062047362}, {0.975, 2, 4.30265272975}, {0.975, 4.56, 2.64700839566},
        {0.975, 10, 2.22813885199}, {0.975, 30, 2.0422724563}, {0.8, 4, 0.940964577235},
        {0.8, 2.3, 1.02731593174},  {0.975, 1e6, 1.95996635681}, {0.975, 1.5, 6.01666310443},
    };
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        double got = t_quantile(q[i].p, q[i].df);
        ck_assert_msg(fabs(got - q[i].want) < 1e-8 * q[i].want, "t(%g, %g) = %.12g, want %.12g", q[i].p, q[i].df,
                      got, q[i].want);
        ck_assert_double_eq_tol(t_cdf(got, q[i].df), q[i].p, 1e-10);
    }
    ck_assert_double_eq_tol(t_quantile(0.025, 10), -2.22813885199, 1e-8);
    ck_assert_double_eq_tol(t_cdf(0, 3), 0.5, 1e-15);
    ck_assert(isnan(t975(0)) && isnan(t_quantile(1, 3)) && isnan(t_quantile(0.5, -1)));
}
END_TEST

START_TEST(test_summary_and_welch) {
    Summary a = summarize((const double[]){3.0, 3.1, 3.2}, 3);
    ck_assert_int_eq(a.n, 3);
    ck_assert_double_eq_tol(a.mean, 3.1, 1e-12);
    ck_assert_double_eq_tol(a.sd, 0.1, 1e-12);
    ck_assert_double_eq_tol(a.half, 4.30265272975 * 0.1 / sqrt(3.0), 1e-9);
    Summary one = summarize((const double[]){2.5}, 1);
    ck_assert(one.mean == 2.5 && isnan(one.sd) && isnan(one.half));
    /* b: mean 3.3, sd sqrt(0.08 / 3) over 4. Welch: va = 0.01 / 3, vb = 0.08 / 12,
     * nu = (va + vb)^2 / (va^2 / 2 + vb^2 / 3) = 4.9091, used as it is:
     * t(0.975, 4.9091) = 2.58496604761 */
    Summary b = summarize((const double[]){3.1, 3.3, 3.5, 3.3}, 4);
    double va = 0.01 / 3, vb = 0.08 / 12, nu = (va + vb) * (va + vb) / (va * va / 2 + vb * vb / 3);
    ck_assert_double_eq_tol(nu, 54.0 / 11, 1e-12);
    Difference d = difference(&a, &b);
    ck_assert_double_eq_tol(d.diff, -0.2, 1e-12);
    ck_assert_double_eq_tol(d.df, nu, 1e-12);
    ck_assert_double_eq_tol(d.half, t975(nu) * sqrt(va + vb), 1e-12);
    ck_assert_double_eq_tol(d.half, 2.58496604761 * 0.1, 1e-9); /* not t(4) = 2.776 */
    ck_assert(!d.excludes_zero);
    Summary flat = summarize((const double[]){3.0, 3.0}, 2), flat2 = summarize((const double[]){3.5, 3.5}, 2);
    Difference exact = difference(&flat2, &flat);
    ck_assert(exact.half == 0 && exact.excludes_zero);
}
END_TEST

/* Three seed-matched pairs whose levels vary from seed to seed far more
 * than their difference does: the paired interval excludes 0, Welch's on
 * the same numbers does not. diffs -0.05, -0.04, -0.05: mean -0.046667,
 * sd sqrt(0.000066667 / 2) = 0.0057735, se 0.0033333, half t(0.975, 2)
 * 0.0033333 = 0.014342. */
START_TEST(test_paired) {
    const double a[] = {3.00, 3.10, 3.25}, b[] = {3.05, 3.14, 3.30};
    Difference p = paired_difference(a, b, 3);
    ck_assert_double_eq_tol(p.diff, -0.14 / 3, 1e-12);
    ck_assert_double_eq_tol(p.se, 0.0033333333, 1e-9);
    ck_assert_double_eq_tol(p.half, 0.0143421758, 1e-9);
    ck_assert_double_eq(p.df, 2);
    ck_assert(p.excludes_zero);
    Summary sa = summarize(a, 3), sb = summarize(b, 3);
    Difference w = difference(&sa, &sb);
    ck_assert_double_eq_tol(w.diff, p.diff, 1e-12);
    ck_assert(!w.excludes_zero && w.half > 5 * p.half);
    Difference one = paired_difference(a, b, 1);
    ck_assert(isnan(one.half) && !one.excludes_zero);
}
END_TEST

/* min_resolvable(se, df) = (t(0.975, df) + t(0.8, df)) se: at se 0.01, df 4,
 * (2.7764451 + 0.9409646) 0.01 = 0.0371741 (z would give 0.0280). Pairs
 * of sd 0.0057735 against a difference of 0.015: 2 pairs resolve 0.057492,
 * 3 pairs 0.017878, 4 pairs 0.012012, so 4 are needed. */
START_TEST(test_power) {
    ck_assert_double_eq_tol(min_resolvable(0.01, 4), 0.0371741, 1e-6);
    double sd = 0.0057735026919;
    ck_assert_double_eq_tol(min_resolvable(sd / sqrt(3.0), 2), 0.0178777097, 1e-8);
    ck_assert_double_eq_tol(min_resolvable(sd / sqrt(4.0), 3), 0.0120115374, 1e-8);
    ck_assert_int_eq(seeds_needed_paired(-0.015, sd, 1000), 4);
    ck_assert_int_eq(seeds_needed_paired(0, sd, 1000), -1);
    ck_assert_int_eq(seeds_needed_paired(1e-6, sd, 1000), -1); /* beyond the cap */
    /* unpaired arms of sd 0.1 and 0.1 against a difference of 0.2: n per arm
     * with (t(0.975, 2n - 2) + t(0.8, 2n - 2)) sqrt(0.02 / n) <= 0.2: at 5,
     * (2.306 + 0.889) 0.0632 = 0.202; at 6, (2.228 + 0.879) 0.0577 = 0.179 */
    ck_assert_int_eq(seeds_needed_welch(0.2, 0.1, 0.1, 1000), 6);
    double at5 = min_resolvable(sqrt(0.02 / 5), 8), at6 = min_resolvable(sqrt(0.02 / 6), 10);
    ck_assert(at5 > 0.2 && at6 <= 0.2);
}
END_TEST

/* The verdict rule on d = (claimed lower) - (claimed higher), hand-worked:
 * the pairs of test_paired lie below 0 (agrees), their negation above
 * (disagrees). Differences +0.001, +0.002, +0.003: mean 0.002, sd 0.001,
 * half t(0.975, 2) 0.001 / sqrt(3) = 0.0024841: [-0.00048, +0.00448], no
 * effect larger than 0.00448 within 0.02; within 0.004 inconclusive, and 5
 * pairs resolve 0.002 ((2.7764 + 0.9410) 0.001 / sqrt(5) = 0.001662; 4 pairs
 * 0.002080). +0.01, -0.01, +0.03: mean 0.01, sd 0.02, 34 pairs (33 resolve
 * 0.010063, 34 0.009905, from t(0.975, 32..33) and t(0.8, 32..33)). */
START_TEST(test_verdict) {
    const double a[] = {3.00, 3.10, 3.25}, b[] = {3.05, 3.14, 3.30};
    Difference d = paired_difference(a, b, 3);
    Verdict v = verdict_rule(&d, 0.02);
    ck_assert_int_eq(v.kind, VERDICT_AGREES);
    d = paired_difference(b, a, 3);
    ck_assert_int_eq(verdict_rule(&d, 0.02).kind, VERDICT_DISAGREES);
    const double zero[] = {2.0, 2.1, 2.2}, small[] = {2.001, 2.102, 2.203}, noisy[] = {2.01, 2.09, 2.23};
    d = paired_difference(small, zero, 3);
    ck_assert_double_eq_tol(d.half, 0.00248413771, 1e-10);
    v = verdict_rule(&d, 0.02);
    ck_assert_int_eq(v.kind, VERDICT_NO_EFFECT);
    ck_assert_double_eq_tol(v.bound, 0.00448413771, 1e-10);
    v = verdict_rule(&d, 0.004);
    ck_assert_int_eq(v.kind, VERDICT_INCONCLUSIVE);
    ck_assert_int_eq(v.seeds_needed, 5);
    d = paired_difference(noisy, zero, 3);
    v = verdict_rule(&d, 0.02);
    ck_assert_int_eq(v.kind, VERDICT_INCONCLUSIVE);
    ck_assert_int_eq(v.seeds_needed, 34);
    ck_assert_double_eq_tol(v.bound, 0.0596827542, 1e-9); /* wider than 0.02 */
    d = paired_difference(noisy, zero, 1); /* one pair: no interval */
    v = verdict_rule(&d, 0.02);
    ck_assert(v.kind == VERDICT_INCONCLUSIVE && v.seeds_needed == -1);
}
END_TEST

/* ./spectrum's per-layer figures (spectrum_pairs.h), by hand: K = 8, so
 * c(T/4) is the heads' mean c at k = 2. Layer 0's heads
 *   .30 .50 .70 .80 .87 .94 .98 1  and  .50 .70 .80 .92 .95 .96 .99 1
 * have the mean .40 .60 .75 .86 .91 .95 .985 1: c(T/4) .60 (not .50 or .70,
 * a head's; not .75, c at k = 3), k 90% 5 (6 and 4 alone), k 99% 8 (.985 at
 * k 7 falls short). Layer 1 is one head's curve twice: c(T/4) .70, k 90% 4. */
static const double skew_c[2][2][8] = {
    {{.30, .50, .70, .80, .87, .94, .98, 1}, {.50, .70, .80, .92, .95, .96, .99, 1}},
    {{.50, .70, .80, .92, .95, .96, .99, 1}, {.50, .70, .80, .92, .95, .96, .99, 1}},
};

START_TEST(test_layer_skew) {
    LayerSkew s;
    double mean[2][8];
    layer_skew(&skew_c[0][0][0], 2, 2, 8, &mean[0][0], &s);
    ck_assert_int_eq(s.layers, 2);
    ck_assert_int_eq(s.values, 8);
    ck_assert_double_eq_tol(s.c_quarter[0], 0.60, 1e-12);
    ck_assert_double_eq(s.k90[0], 5);
    ck_assert_double_eq(s.k99[0], 8);
    ck_assert_double_eq_tol(s.c_quarter[1], 0.70, 1e-12);
    ck_assert_double_eq(s.k90[1], 4);
    ck_assert_double_eq(s.k99[1], 7);
    ck_assert_double_eq_tol(mean[0][6], 0.985, 1e-12);
    /* K < 4: c(T/4) is c at k = 1 */
    layer_skew(&skew_c[0][0][0], 1, 1, 2, NULL, &s);
    ck_assert_double_eq_tol(s.c_quarter[0], 0.30, 1e-12);
    ck_assert_double_eq(s.k90[0], 2);
}
END_TEST

/* spectrum.csv read back in any row order; a row missing or twice, c out of
 * [0, 1] or a wrong header refused with the line. */
START_TEST(test_spectrum_csv) {
    char dir[512], path[600];
    test_tmpdir(dir, sizeof dir, "spectrum_csv");
    snprintf(path, sizeof path, "%s/spectrum.csv", dir);
    static const struct {
        const char *text, *error; /* error NULL: reads */
    } cases[] = {
        {"layer,head,k,c,s\n0,1,2,1,3\n0,0,1,0.25,2\n0,1,1,0.75,1\n0,0,2,1.000000,1\n", NULL},
        {"layer,head,k,c,s\n0,0,1,0.25,2\n0,0,2,1,1\n0,1,1,0.75,1\n", "3 rows, but 1 layers x 2 heads x 2 values need 4"},
        {"layer,head,k,c,s\n0,0,1,0.25,2\n0,0,2,1,1\n0,0,2,1,1\n0,1,1,0.5,1\n", "line 4: layer 0, head 0, k 2 given twice"},
        {"layer,head,k,c,s\n0,0,1,-0.1,2\n", "line 2: c -0.1 is not in [0, 1]"},
        {"layer,head,k,c,s\n0,0,1,0.5\n", "line 2: not layer,head,k,c,s with numbers"},
        {"layer,head,k,c\n0,0,1,0.5,1\n", "line 1: not the header"},
        {"layer,head,k,c,s\n", "no rows after the header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(cases[i].text, f);
        fclose(f);
        double *c = NULL;
        int L = 0, H = 0, K = 0;
        Err e = {0};
        int rc = spectrum_csv_read(path, &c, &L, &H, &K, &e);
        if (!cases[i].error) {
            ck_assert_msg(rc == 0, "case %zu: %s", i, e.msg);
            ck_assert(L == 1 && H == 2 && K == 2);
            ck_assert(c[0] == 0.25 && c[1] == 1 && c[2] == 0.75 && c[3] == 1);
            free(c);
        } else {
            ck_assert_int_eq(rc, -1);
            ck_assert_msg(strstr(e.msg, cases[i].error) != NULL, "case %zu: '%s'", i, e.msg);
            ck_assert_ptr_null(c);
        }
    }
    test_rmtree(dir);
}
END_TEST

/* The seed plans: 10,000 null experiments each (pair differences with no
 * true effect). Under a plan fixed in advance the zero effect is covered at
 * least 95% of the time whatever the stopping; the practice the plans
 * replace, adding one pair at a time from 3 to 12 until the 95% interval
 * decides, covers it less often: this is what the check would catch. The
 * estimate of a coverage from 10,000 experiments has a standard error of
 * about 0.0022 at 95%, so the bound allows three of them: a single look
 * ("5") covers exactly 95% in expectation (0.9515 with this seed), the
 * Bonferroni plans more (3,6,12: 0.9610), the practice 0.85. */
START_TEST(test_seed_plan_coverage) {
    static const char *const plans[] = {"3,6,12", "3,6", "5", "3,4,5,6,7,8,9,10"};
    char why[200];
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        SeedPlan p;
        ck_assert_int_eq(seed_plan_parse(plans[i], &p, why, sizeof why), 0);
        double c = seed_plan_coverage(&p, 0, 0, 1.0, 10000, 1234 + i);
        ck_assert_msg(c >= 0.95 - 3 * 0.0022, "plan %s covers %.4f of 10000 null experiments, below 0.95", plans[i], c);
    }
    double naive = seed_plan_coverage(NULL, 3, 12, 1.0, 10000, 99);
    ck_assert_msg(naive < 0.95 - 3 * 0.0022, "adding seeds until the interval decides covers %.4f, expected below 0.95", naive);
    /* a look's level and the look a pair count reaches */
    SeedPlan p;
    ck_assert_int_eq(seed_plan_parse("3,6,12", &p, why, sizeof why), 0);
    ck_assert_double_eq_tol(seed_plan_level(&p), 1 - 0.05 / 3, 1e-12);
    ck_assert_int_eq(seed_plan_look(&p, 2), -1);
    ck_assert_int_eq(seed_plan_look(&p, 5), 0);
    ck_assert_int_eq(seed_plan_look(&p, 12), 2);
    ck_assert_int_eq(seed_plan_look(&p, 40), 2);
    static const char *const bad[] = {"", "3,", "6,3", "1", "3,x", "3,,6", "2,3,4,5,6,7,8,9,10"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(seed_plan_parse(bad[i], &p, why, sizeof why) != 0, "'%s' accepted", bad[i]);
}
END_TEST

Suite *stats_suite(void) {
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("intervals");
    /* the seed plans' coverage simulates 10,000 experiments per plan: seconds on a busy machine */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_t_quantiles);
    tcase_add_test(tc, test_summary_and_welch);
    tcase_add_test(tc, test_paired);
    tcase_add_test(tc, test_power);
    tcase_add_test(tc, test_verdict);
    tcase_add_test(tc, test_layer_skew);
    tcase_add_test(tc, test_spectrum_csv);
    tcase_add_test(tc, test_seed_plan_coverage);
    suite_add_tcase(s, tc);
    return s;
}
