/* test_grid.c: ./ablate's grid (experiments/analysis/grid.h): its words, runs, run
 * folders and tables, without training. */
#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grid_report.h"
#include "ladder.h"
#include "gemm.h"
#include "memory.h"
#include "provenance.h"
#include "run.h"
#include "stats.h"
#include "test_util.h"

/* Rows longer than any fixed share of a buffer: 32 prompts of 255 bytes by 3
 * learning rates. Every row is written whole, the last one included. */
START_TEST(test_tables_of_long_rows) {
    Grid g;
    grid_init(&g);
    Err e;
    size_t len = 32 * 256 + 16;
    char *word = malloc(len);
    size_t k = (size_t)snprintf(word, len, "prompt=");
    for (int i = 0; i < 32; i++) {
        if (i) word[k++] = '/';
        memset(word + k, 'A' + i % 26, 253);
        k += 253;
        k += (size_t)sprintf(word + k, "%02d", i);
    }
    ck_assert_msg(grid_word(&g, word, &e) == 0, "%s", e.msg);
    free(word);
    ck_assert_msg(grid_word(&g, "lr=0.00123456789/0.00223456789/0.00323456789", &e) == 0, "%s", e.msg);
    ck_assert_int_eq(grid_settle(&g, &e), 0);
    GridRun *runs;
    int n = grid_plan(&g, false, "out", &runs, &e);
    ck_assert_msg(n == 96, "%d runs: %s", n, e.msg);
    /* long names are cut for their folders, which stay apart */
    for (int i = 0; i < n; i++) {
        ck_assert_uint_lt(strlen(runs[i].folder), 220);
        for (int j = 0; j < i; j++) ck_assert_str_ne(runs[i].folder, runs[j].folder);
        runs[i].result = (TrainResult){.status = TRAIN_DONE, .step = 1, .val_bpb = 7.5 + i, .best_val_bpb = 7.25,
                                       .tok_s = 1000};
    }
    char *md, *csv;
    grid_tables(&g, runs, n, &md, &csv, NULL);
    int md_rows = 0, csv_rows = 0;
    /* each row ends with the model's parameter count and its kernel (none recorded) */
    char tail[96];
    long params = model_param_count(&runs[0].cfg.model);
    ck_assert_int_gt(params, 1000);
    snprintf(tail, sizeof tail, " | 7.2500 | - | - | 1000 | %ld | - |\n", params);
    for (const char *p = md; (p = strstr(p, tail)); p++) md_rows++;
    for (const char *p = csv; (p = strchr(p, '\n')); p++) csv_rows++;
    ck_assert_int_eq(md_rows, 96);
    ck_assert_int_eq(csv_rows, 97);
    ck_assert_msg(strstr(md, "| 102.5000 |"), "the last row is missing");
    snprintf(tail, sizeof tail, ",102.500000,7.250000,,,1000,done,%ld,,\n", params);
    ck_assert_msg(strstr(csv, tail), "the last CSV row is missing");
    free(md);
    free(csv);
    grid_free(runs, n);
    grid_release(&g);
}
END_TEST

/* A bad axis is named whole in the error. */
START_TEST(test_words_refused) {
    Grid g;
    grid_init(&g);
    Err e;
    ck_assert_int_ne(grid_word(&g, "phi=relu//elu", &e), 0);
    ck_assert_msg(strstr(e.msg, "phi=relu//elu: an empty value in the axis"), "%s", e.msg);
    ck_assert_int_ne(grid_word(&g, "phi=relu/", &e), 0);
    ck_assert_msg(strstr(e.msg, "phi=relu/: an empty value"), "%s", e.msg);
    ck_assert_int_ne(grid_word(&g, "bogus=1/2", &e), 0);
    ck_assert_msg(strstr(e.msg, "unknown key 'bogus'"), "%s", e.msg);
    ck_assert_int_ne(grid_word(&g, "out=a/b", &e), 0);
    ck_assert_int_eq(g.n_axes, 0);
    ck_assert_int_ne(grid_settle(&g, &e), 0);
    ck_assert_msg(strstr(e.msg, "no axis given"), "%s", e.msg);
}
END_TEST

/* A folder with a finished run of other options is refused, naming them; one
 * of the same options is finished. */
START_TEST(test_stale_run_refused) {
    char dir[] = "/tmp/attnlab-grid-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    Grid g;
    grid_init(&g);
    Err e;
    ck_assert_int_eq(grid_word(&g, "phi=relu/elu", &e), 0);
    ck_assert_int_eq(grid_settle(&g, &e), 0);
    GridRun *runs;
    int n = grid_plan(&g, false, dir, &runs, &e);
    ck_assert_int_eq(n, 2);
    GridRun *r = &runs[0];
    ck_assert_int_eq(grid_run_state(r, "corpus.txt", &e), GRID_NEW);
    ck_assert_int_eq(make_dirs(r->folder, &e), 0);
    /* the folder's run: the same but for layers and the corpus */
    Config had = r->cfg;
    ck_assert_int_eq(option_set(&had, "layers", "2", &e), 0);
    ck_assert_int_eq(option_set(&had, "threads", "7", &e), 0); /* bookkeeping: not a difference */
    cJSON *json = config_to_json(&had);
    cJSON_AddStringToObject(json, "corpus", "other.txt");
    char *text = cJSON_Print(json), path[1200];
    cJSON_Delete(json);
    snprintf(path, sizeof path, "%s/config.json", r->folder);
    ck_assert_int_eq(write_file_atomic(path, text, &e), 0);
    free(text);
    snprintf(path, sizeof path, "%s/result.json", r->folder);
    ck_assert_int_eq(write_file_atomic(path, "{\"status\": \"done\", \"step\": 50, \"val_bpb\": 3.5}", &e), 0);
    ck_assert_int_eq(grid_run_state(r, "corpus.txt", &e), -1);
    ck_assert_msg(strstr(e.msg, "holds a run with other options (layers 2 -> 4, corpus other.txt -> corpus.txt)"),
                  "%s", e.msg);
    ck_assert_msg(!strstr(e.msg, "threads"), "%s", e.msg);
    /* the same options: finished */
    ck_assert_int_eq(option_set(&had, "layers", "4", &e), 0);
    json = config_to_json(&had);
    cJSON_AddStringToObject(json, "corpus", "corpus.txt");
    text = cJSON_Print(json);
    cJSON_Delete(json);
    snprintf(path, sizeof path, "%s/config.json", r->folder);
    ck_assert_int_eq(write_file_atomic(path, text, &e), 0);
    free(text);
    ck_assert_int_eq(grid_run_state(r, "corpus.txt", &e), GRID_FINISHED);
    ck_assert(r->result.val_bpb == 3.5 && r->result.step == 50);
    /* a config.json that is not one */
    ck_assert_int_eq(write_file_atomic(path, "{\"layers\": \"many\"", &e), 0);
    ck_assert_int_eq(grid_run_state(r, "corpus.txt", &e), -1);
    ck_assert_msg(strstr(e.msg, "config.json: not the file a run writes"), "%s", e.msg);
    /* a FIFO in its place is refused, not waited on */
    unlink(path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(grid_run_state(r, "corpus.txt", &e), -1);
    ck_assert_msg(strstr(e.msg, "not a regular file"), "%s", e.msg);
    unlink(path);
    snprintf(path, sizeof path, "%s/result.json", r->folder);
    unlink(path);
    rmdir(r->folder);
    rmdir(dir);
    grid_free(runs, n);
    grid_release(&g);
}
END_TEST

/* --seeds: each point N times with seed, seed + 1, ...; the summary rows
 * from the finished, undiverged runs. */
START_TEST(test_seeds) {
    Grid g;
    grid_init(&g);
    Err e;
    g.seeds = 3;
    ck_assert_int_eq(grid_word(&g, "phi=relu/elu", &e), 0);
    ck_assert_int_eq(grid_settle(&g, &e), 0);
    GridRun *runs;
    int n = grid_plan(&g, true, "out", &runs, &e);
    ck_assert_int_eq(n, 9);
    long long seed = g.base.train.seed;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(runs[i].point, i / 3);
        ck_assert_int_eq(runs[i].seed_index, i % 3);
        ck_assert(runs[i].cfg.train.seed == seed + i % 3);
        char want[64];
        snprintf(want, sizeof want, ",seed=%lld", seed + i % 3);
        ck_assert_msg(strstr(runs[i].name, want), "%s", runs[i].name);
        for (int j = 0; j < i; j++) ck_assert_str_ne(runs[i].folder, runs[j].folder);
    }
    ck_assert_msg(!strncmp(runs[6].name, "baseline attn=", 14), "%s", runs[6].name);
    /* relu: 3.0, 3.1, 3.2; elu: 3.6, 3.61, diverged; baseline 3.1, 3.3, 3.5 */
    const double bpb[9] = {3.0, 3.1, 3.2, 3.6, 3.61, NAN, 3.1, 3.3, 3.5};
    for (int i = 0; i < n; i++)
        runs[i].result = (TrainResult){.status = isnan(bpb[i]) ? TRAIN_DIVERGED : TRAIN_DONE, .step = 10,
                                       .diverged_step = 7, .val_bpb = bpb[i], .best_val_bpb = bpb[i], .tok_s = 100};
    char *md, *csv, *summary;
    grid_tables(&g, runs, n, &md, &csv, &summary);
    /* relu against the baseline: -0.2 +- t(nu) sqrt(0.01/3 + 0.04/3), nu = 50/17 =
     * 2.9412 by Welch-Satterthwaite, used as it is: t(0.975, 2.9412) = 3.2187586145
     * (mpmath, integrating Student's density; rounded down to t(2) = 4.3027 it
     * would be [-0.7555, +0.3555]) */
    double va = 0.01 / 3, vb = 0.04 / 3, nu = (va + vb) * (va + vb) / (va * va / 2 + vb * vb / 2);
    ck_assert_double_eq_tol(nu, 50.0 / 17, 1e-12);
    double half = 3.2187586145 * sqrt(va + vb);
    char want[200];
    snprintf(want, sizeof want, "| phi=relu | relu | 3/3 | 3.1000 | 0.1000 | [%.4f, %.4f] | -0.2000 | [%+.4f, %+.4f] | no |",
             3.1 - 4.3027 * 0.1 / sqrt(3.0), 3.1 + 4.3027 * 0.1 / sqrt(3.0), -0.2 - half, -0.2 + half);
    ck_assert_msg(strstr(md, want), "want %s in\n%s", want, md);
    ck_assert_msg(strstr(md, "| phi=elu | elu | 2/3 | 3.6050 |"), "%s", md);
    ck_assert_msg(strstr(md, "| baseline attn=softmax | - | 3/3 | 3.3000 | 0.2000 |"), "%s", md);
    ck_assert_msg(strstr(summary, "point,phi,runs,mean,sd,low,high,minus_baseline,diff_low,diff_high,differs,"
                                  "welch_df,paired_against,pairs,apart,paired_diff,paired_low,paired_high,"
                                  "paired_differs,resolvable,pairs_needed,mixed_kernels,beyond_look,"
                                  "interval_level\n"),
                  "%s", summary);
    ck_assert_msg(strstr(summary, "phi=relu,relu,3,3.100000,0.100000,"), "%s", summary);
    /* paired, relu - baseline: the baseline's seed 1339 (3.5) is on the causal
     * plateau (above 3.3), so its pair is apart; the others differ by -0.1 and
     * -0.2: mean -0.15, sd 0.070711, se 0.05, half t(0.975, 1) 0.05 = 0.635310
     * (z would give 0.098, sd over n 0.449, the plateau kept 3 pairs and mean
     * -0.1667). Power: (t(0.975, 1) + t(0.8, 1)) 0.05 = (12.70620 + 1.37638)
     * 0.05 = 0.704129; pairs for 0.15 at sd 0.070711: 3 resolve 0.2190, 4 0.1471,
     * so 4. Worked apart with mpmath. */
    ck_assert_msg(strstr(md, "| -0.2000 | [-0.6155, +0.2155] | no | -0.1500 | [-0.7853, +0.4853] | 2 (1 apart) | no | "
                             "0.7041 | 4 |"),
                  "%s", md);
    ck_assert_msg(strstr(summary, ",2.9412,baseline attn=softmax,2,1,-0.150000,-0.785310,0.485310,no,0.704129,4,0,0,"
                                  "0.9500\n"),
                  "%s", summary);
    ck_assert_msg(strstr(md, "\n- baseline attn=softmax,seed=1339: ends above the plateau level\n"), "%s", md);
    ck_assert_msg(!strstr(md, "softmax,seed=1338: ends above"), "%s", md); /* 3.3 is not above 3.3 */
    ck_assert_msg(strstr(md, "Every run:"), "%s", md);
    ck_assert_msg(strstr(md, "| phi=elu,seed="), "%s", md);
    /* the effect of phi: elu (3.6, 3.61) minus relu (3.0, 3.1, 3.2), Welch:
     * nu = 2.0299, t(0.975, 2.0299) = 4.2425171048 (mpmath, as above) */
    double ve = 0.00005 / 2, vr = 0.01 / 3, nu_e = (ve + vr) * (ve + vr) / (ve * ve / 1 + vr * vr / 2);
    ck_assert_double_eq_tol(nu_e, 2.02988413803, 1e-9);
    double half_e = 4.2425171048 * sqrt(ve + vr);
    snprintf(want, sizeof want, "| phi | relu | elu | - | +0.5050 | [%+.4f, %+.4f] | yes |", 0.505 - half_e, 0.505 + half_e);
    ck_assert_msg(strstr(md, want), "want %s in\n%s", want, md);
    free(md);
    free(csv);
    free(summary);
    grid_free(runs, n);
    grid_release(&g);
}
END_TEST

/* The whole of a small text file the test just wrote, into text (size bytes, NUL-ended). */
static void read_text(const char *path, char *text, size_t size) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: cannot open", path);
    size_t n = fread(text, 1, size - 1, f);
    fclose(f);
    text[n] = '\0';
}

/* A settled grid of `seeds` seeds on the axes words[0..n). */
static void grid_of(Grid *g, int seeds, const char *const *words, int n) {
    Err e;
    grid_init(g);
    g->seeds = seeds;
    for (int i = 0; i < n; i++) ck_assert_msg(grid_word(g, words[i], &e) == 0, "%s: %s", words[i], e.msg);
    ck_assert_int_eq(grid_settle(g, &e), 0);
}

/* The effects table pairs points that differ on one axis alone: with
 * phi x reweight, two rows per axis, none across both. */
START_TEST(test_effects_one_axis_at_a_time) {
    Grid g;
    Err e;
    grid_of(&g, 2, (const char *[]){"phi=relu/elu", "reweight=none/cos"}, 2);
    GridRun *runs;
    int n = grid_plan(&g, true, "out", &runs, &e);
    ck_assert_int_eq(n, 10);
    for (int i = 0; i < n; i++) {
        /* bpb = 3 + 0.1 * (the point) + 0.01 * (the seed) */
        double bpb = 3.0 + 0.1 * runs[i].point + 0.01 * runs[i].seed_index;
        runs[i].result = (TrainResult){.status = TRAIN_DONE, .step = 10, .val_bpb = bpb, .best_val_bpb = bpb, .tok_s = 1};
    }
    char *md, *csv, *summary;
    grid_tables(&g, runs, n, &md, &csv, &summary);
    int rows = 0;
    for (const char *p = md; (p = strstr(p, "\n| ")); p++) rows += !strncmp(p, "\n| phi | ", 9) || !strncmp(p, "\n| reweight | ", 14);
    ck_assert_msg(rows == 4, "%d rows in\n%s", rows, md);
    /* equal spreads: the differences are exact multiples of 0.1 */
    ck_assert_msg(strstr(md, "| phi | relu | elu | reweight=none | +0.2000 |"), "%s", md);
    ck_assert_msg(strstr(md, "| phi | relu | elu | reweight=cos | +0.2000 |"), "%s", md);
    ck_assert_msg(strstr(md, "| reweight | none | cos | phi=relu | +0.1000 |"), "%s", md);
    ck_assert_msg(strstr(md, "| reweight | none | cos | phi=elu | +0.1000 |"), "%s", md);
    const char *effects = strstr(md, "| axis |"), *end = effects ? strstr(effects, "\n\n") : NULL;
    ck_assert(effects && end && effects < end);
    const char *b = strstr(effects, "baseline");
    ck_assert_msg(!b || b > end, "the baseline is in no effect row:\n%s", effects);
    free(md);
    free(csv);
    free(summary);
    grid_free(runs, n);
    grid_release(&g);
}
END_TEST

/* Linked keys vary together: d_model:key_size=128:16/96:64 is two runs, not
 * four, each with both values; the table has one column for the pair. */
START_TEST(test_linked_axis) {
    Grid g;
    grid_init(&g);
    Err e;
    ck_assert_msg(grid_word(&g, "d_model:key_size=128:16/96:64", &e) == 0, "%s", e.msg);
    ck_assert_msg(grid_word(&g, "heads=4/8", &e) == 0, "%s", e.msg);
    ck_assert_int_eq(grid_settle(&g, &e), 0);
    GridRun *runs;
    int n = grid_plan(&g, false, "out", &runs, &e);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(runs[0].cfg.model.d_model, 128);
    ck_assert_int_eq(runs[0].cfg.model.key_size, 16);
    ck_assert_int_eq(runs[3].cfg.model.d_model, 96);
    ck_assert_int_eq(runs[3].cfg.model.key_size, 64);
    ck_assert_int_eq(runs[3].cfg.model.heads, 8);
    ck_assert_str_eq(runs[3].name, "d_model:key_size=96:64,heads=8");
    char dir[256];
    grid_default_dir(&g, dir, sizeof dir);
    ck_assert_str_eq(dir, "runs/ablate-d_model+key_size-heads");
    ck_assert_str_eq(runs[3].folder, "out/d_model+key_size-96+64_heads-8");
    for (int i = 0; i < n; i++) runs[i].result = (TrainResult){.status = TRAIN_DONE, .val_bpb = 3, .tok_s = 1};
    char *md, *csv;
    grid_tables(&g, runs, n, &md, &csv, NULL);
    ck_assert_msg(strstr(md, "| run | d_model:key_size | heads |"), "%s", md);
    ck_assert_msg(strstr(md, "| 96:64 | 8 |"), "%s", md);
    free(md);
    free(csv);
    grid_free(runs, n);
    grid_release(&g);
    /* refused: a part short or extra, a key twice, an unknown key */
    const char *bad[] = {"d_model:key_size=128/96:64", "d_model:key_size=128:16:4/96:64", "d_model:d_model=1/2",
                         "d_model:kee_size=128:16/96:64", "d_model:key_size=128:x/96:64"};
    const char *why[] = {"2 values joined by ':', one per key", "not more", "linked to itself", "unknown key 'kee_size'",
                         "--key_size: expected an integer"};
    for (int i = 0; i < 5; i++) {
        grid_init(&g);
        ck_assert_int_ne(grid_word(&g, bad[i], &e), 0);
        ck_assert_msg(strstr(e.msg, why[i]), "%s: %s", bad[i], e.msg);
        ck_assert_int_eq(g.n_axes, 0);
    }
}
END_TEST

/* --expect: the verdict rule of EXPERIMENTS.md on each pair of points a claim
 * names, from hand-worked runs (the intervals worked apart with mpmath). */
START_TEST(test_claims) {
    Grid g;
    Err e;
    grid_of(&g, 3, (const char *[]){"phi=relu/elu/identity", "reweight=none/cos"}, 2);
    const char *claims[] = {"reweight=cos < reweight=none", "baseline < phi=relu,reweight=none", "phi=relu < phi=elu",
                            " phi=elu,reweight=none > phi=identity,reweight=none "};
    for (int i = 0; i < 4; i++) ck_assert_msg(grid_expect(&g, claims[i], &e) == 0, "%s: %s", claims[i], e.msg);
    GridRun *runs;
    int n = grid_plan(&g, true, "out", &runs, &e);
    ck_assert_int_eq(n, 21);
    /* by point: relu none, relu cos, elu none, elu cos, identity none, identity cos, baseline */
    static const double bpb[7][3] = {{3.00, 3.10, 3.25}, {2.95, 3.06, 3.20},    {2.00, 2.10, 2.20}, {2.01, 2.09, 2.23},
                                     {2.001, 2.102, 2.203}, {2.5, 2.4, 2.3}, {2.50, 2.62, 3.40}};
    for (int i = 0; i < n; i++) {
        double v = bpb[runs[i].point][runs[i].seed_index];
        runs[i].result = (TrainResult){.status = TRAIN_DONE, .step = 10, .val_bpb = v, .best_val_bpb = v, .tok_s = 1};
    }
    ck_assert_int_eq(grid_check_claims(&g, runs, n, &e), 0);
    char *md, *csv, *summary;
    grid_tables(&g, runs, n, &md, &csv, &summary);
    const char *want[] = {
        /* cos - none at relu: -0.05 -0.04 -0.05, mean -0.046667, sd 0.0057735, half
         * t(0.975, 2) 0.0033333 = 0.014342: below 0 */
        "verdict: reweight=cos < reweight=none at phi=relu: agrees (paired -0.0467 [-0.0610, -0.0323], 3 pairs)\n",
        /* at elu: +0.01 -0.01 +0.03, mean 0.01, sd 0.02: [-0.0397, +0.0597], wider than
         * +-0.02; 34 pairs resolve 0.01 (33 resolve 0.01006) */
        "verdict: reweight=cos < reweight=none at phi=elu: inconclusive; 34 seed pairs would resolve +0.0100 (95%, "
        "80% power) (paired +0.0100 [-0.0397, +0.0597], 3 pairs)\n",
        /* the baseline's seed 1339 (3.40) is on the plateau: -0.50 -0.48, sd 0.014142,
         * half t(0.975, 1) 0.01 = 0.127062 */
        "verdict: baseline < phi=relu,reweight=none: agrees (paired -0.4900 [-0.6171, -0.3629], 2 pairs, 1 apart)\n",
        /* relu - elu: +1.00 +1.00 +1.05 at none, +0.94 +0.97 +0.97 at cos: above 0 */
        "verdict: phi=relu < phi=elu at reweight=none: disagrees (paired +1.0167 [+0.9450, +1.0884], 3 pairs)\n",
        "verdict: phi=relu < phi=elu at reweight=cos: disagrees (paired +0.9600 [+0.9170, +1.0030], 3 pairs)\n",
        /* identity - elu: +0.001 +0.002 +0.003, [-0.0005, +0.0045]: inside +-0.02 */
        "verdict:  phi=elu,reweight=none > phi=identity,reweight=none : no effect larger than 0.0045 bpb (paired "
        "+0.0020 [-0.0005, +0.0045], 3 pairs)\n",
    };
    const char *said = strstr(md, "The claims");
    ck_assert_ptr_nonnull(said);
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_msg(strstr(said, want[i]), "want %s in\n%.2000s", want[i], said);
    int lines = 0;
    for (const char *p = md; (p = strstr(p, "\nverdict: ")); p++) lines++;
    ck_assert_int_eq(lines, 7); /* 3 + 1 + 2 + 1: one per pair of points */
    /* within 0.004 the last is no longer "no effect": 5 pairs would resolve 0.002 */
    g.within = 0.004;
    free(md), free(csv), free(summary);
    grid_tables(&g, runs, n, &md, &csv, &summary);
    ck_assert_msg(strstr(md, "phi=identity,reweight=none : inconclusive; 5 seed pairs would resolve +0.0020"), "%.2000s",
                  strstr(md, "The claims"));
    free(md), free(csv), free(summary);
    grid_free(runs, n);
    /* without the baseline, a claim on it names no two points */
    n = grid_plan(&g, false, "out", &runs, &e);
    ck_assert_int_eq(grid_check_claims(&g, runs, n, &e), -1);
    ck_assert_msg(strstr(e.msg, "--expect \"baseline < phi=relu,reweight=none\": no two points of the grid to compare"),
                  "%s", e.msg);
    grid_free(runs, n);
    grid_release(&g);
}
END_TEST

/* Where runs ran and the seed plan: a pair whose runs ran under different
 * kernels is left out of the paired columns and verdicts unless
 * mixed_kernels; a run that recorded none differs from nothing; under a plan
 * the verdict uses the first pairs of the last look reached, at the plan's
 * level. */
START_TEST(test_kernels_and_plan) {
    Grid g;
    Err e;
    grid_of(&g, 6, (const char *[]){"phi=relu/elu"}, 1);
    ck_assert_int_eq(grid_expect(&g, "phi=relu < phi=elu", &e), 0);
    GridRun *runs;
    int n = grid_plan(&g, false, "out", &runs, &e);
    ck_assert_int_eq(n, 12);
    static const double noise[6] = {0.01, -0.02, 0.015, 0.0, -0.01, 0.02};
    for (int i = 0; i < n; i++) {
        double v = 2.0 + 0.1 * runs[i].point + (runs[i].point ? noise[runs[i].seed_index] : 0);
        runs[i].result = (TrainResult){.status = TRAIN_DONE, .step = 10, .val_bpb = v, .best_val_bpb = v, .tok_s = 1};
        snprintf(runs[i].kernel, sizeof runs[i].kernel, "bf16: kernel A; 1 thread");
    }
    /* elu's second seed ran elsewhere; relu's fifth recorded nothing */
    snprintf(runs[6 + 1].kernel, sizeof runs[7].kernel, "fp32: kernel B; 1 thread");
    runs[4].kernel[0] = '\0';
    char *md, *csv, *summary;
    grid_tables(&g, runs, n, &md, &csv, &summary);
    ck_assert_msg(strstr(md, "5 pairs, 1 of mixed kernels left out)\n"), "%s", strstr(md, "verdict:"));
    ck_assert_msg(strstr(md, "| 5 (1 mixed kernels) |"), "%s", md);
    ck_assert_msg(strstr(md, "- K1: bf16: kernel A; 1 thread\n- K2: fp32: kernel B; 1 thread\n"), "%s", md);
    ck_assert_msg(strstr(md, "| phi=elu,seed=1338 | elu |") && strstr(md, "| K2 |\n"), "%s", md);
    ck_assert_msg(strstr(md, "- -: a run made before runs recorded where they ran"), "%s", md);
    ck_assert_msg(strstr(csv, ",fp32: kernel B; 1 thread,\n"), "%s", csv);
    free(md), free(csv), free(summary);
    /* counted when asked */
    g.mixed_kernels = true;
    grid_tables(&g, runs, n, &md, &csv, &summary);
    ck_assert_msg(strstr(md, ", 6 pairs)\n"), "%s", strstr(md, "verdict:"));
    free(md), free(csv), free(summary);
    /* the plan 3,6: 5 pairs reach the first look alone, at 97.5% */
    g.mixed_kernels = false;
    char why[200];
    ck_assert_int_eq(seed_plan_parse("3,6", &g.plan, why, sizeof why), 0);
    grid_tables(&g, runs, n, &md, &csv, &summary);
    ck_assert_msg(strstr(md, "at 97.5%, 3 pairs, 1 of mixed kernels left out, 2 past the look)\n"), "%s",
                  strstr(md, "verdict:"));
    ck_assert_msg(strstr(md, "looks at 3 and 6 seed pairs, each look's interval at 97.5%"), "%s", md);
    free(md), free(csv), free(summary);
    /* the plan 4,8: not at its first look (3 usable pairs... here 5, so look 1 of 4 pairs) */
    ck_assert_int_eq(seed_plan_parse("6,12", &g.plan, why, sizeof why), 0);
    grid_tables(&g, runs, n, &md, &csv, &summary);
    ck_assert_msg(strstr(md, "inconclusive; the plan's first look is at 6 pairs off the plateau, 5 so far"), "%s",
                  strstr(md, "verdict:"));
    free(md), free(csv), free(summary);
    grid_free(runs, n);
    grid_release(&g);
}
END_TEST

/* provenance.json: a segment per stretch of training; a resume from an
 * earlier checkpoint drops the segments of the steps it makes again; a run
 * whose segments differ reads as mixed; a file not ours reads as -1 and is
 * written anew. */
START_TEST(test_provenance_segments) {
    char dir[256], path[400], kernel[320], commit[24];
    test_tmpdir(dir, sizeof dir, "provenance");
    snprintf(path, sizeof path, "%s/%s", dir, PROVENANCE_FILE);
    bool mixed;
    Err e;
    ck_assert_int_eq(provenance_read(dir, kernel, sizeof kernel, commit, sizeof commit, &mixed), 1);
    ck_assert_int_eq(provenance_record(dir, 0, PRECISION_FP32, 1, 1, &e), 0);
    ck_assert_int_eq(provenance_record(dir, 20, PRECISION_FP32, 1, 1, &e), 0);
    ck_assert_int_eq(provenance_record(dir, 10, PRECISION_FP32, 1, 1, &e), 0);
    char text[1 << 14];
    read_text(path, text, sizeof text);
    cJSON *j = cJSON_Parse(text);
    const cJSON *segs = cJSON_GetObjectItem(j, "segments");
    ck_assert_int_eq(cJSON_GetArraySize(segs), 2); /* 0 and 10: the one from 20 went with its steps */
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(segs, 1), "from_step")->valueint, 10);
    static const char *const fields[] = {"cpu", "cpu_isa", "compiled_for", "compiler", "openblas", "openblas_kernel",
                                         "onednn", "onednn_isa", "products", "precision", "threads", "ranks",
                                         "commit", "dirty", "kernel"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        ck_assert_msg(cJSON_GetObjectItem(cJSON_GetArrayItem(segs, 0), fields[i]), "no %s in\n%s", fields[i], text);
    ck_assert_int_eq(provenance_read(dir, kernel, sizeof kernel, commit, sizeof commit, &mixed), 0);
    ck_assert(!mixed);
    char want[320];
    provenance_kernel(PRECISION_FP32, 1, want, sizeof want);
    ck_assert_str_eq(kernel, want);
    ck_assert_msg(strstr(kernel, "fp32: OpenBLAS ") && strstr(kernel, "; 1 thread; "), "%s", kernel);
    /* another thread count is another kernel */
    ck_assert_int_eq(provenance_record(dir, 15, PRECISION_FP32, 2, 1, &e), 0);
    ck_assert_int_eq(provenance_read(dir, kernel, sizeof kernel, commit, sizeof commit, &mixed), 0);
    ck_assert(mixed);
    cJSON_Delete(j);
    /* not ours */
    FILE *f = fopen(path, "w");
    fputs("{\"segments\": 3}", f);
    fclose(f);
    ck_assert_int_eq(provenance_read(dir, kernel, sizeof kernel, commit, sizeof commit, &mixed), -1);
    ck_assert_int_eq(provenance_record(dir, 0, PRECISION_FP32, 1, 1, &e), 0);
    ck_assert_int_eq(provenance_read(dir, kernel, sizeof kernel, commit, sizeof commit, &mixed), 0);
    remove(path);
    rmdir(dir);
}
END_TEST

/* A fake finished run: config.json with `steps`, a curve ending at bpb. */
static void fake_run(const char *grid, const char *name, int steps, double bpb) {
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/%s", grid, name);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    Config c;
    config_defaults(&c);
    c.train.steps = steps;
    cJSON *j = config_to_json(&c);
    char *text = cJSON_Print(j);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    free(text), cJSON_Delete(j);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    f = fopen(path, "w");
    fprintf(f, "{\"step\": %d, \"val_bpb\": 3.0}\n{\"step\": %d, \"val_bpb\": %.6f}\n", steps / 4, steps, bpb);
    fclose(f);
}

/* ./ablate --ladder on two fake rungs of one model, twice the steps: A - B
 * of -0.1 +- 0.02 and -0.2 +- 0.02. The slope over log10 FLOPs (twice the
 * tokens: 0.30103 apart) is -0.1 / 0.30103 = -0.33219 per decade; residuals
 * +-0.02, 0 twice: RSS 0.0016, N 6, se sqrt(0.0004 / (6 x 0.150515^2)) =
 * 0.054247, t(0.975, 4) 2.776445: [-0.48281, -0.18158]. */
START_TEST(test_ladder) {
    char root[256], g0[400], g1[400], out[400];
    test_tmpdir(root, sizeof root, "ladder");
    snprintf(g0, sizeof g0, "%s/s0", root), snprintf(g1, sizeof g1, "%s/s1", root), snprintf(out, sizeof out, "%s/out", root);
    ck_assert_int_eq(mkdir(g0, 0755), 0);
    ck_assert_int_eq(mkdir(g1, 0755), 0);
    static const double noise[3] = {0, -0.02, 0.02};
    for (int s = 0; s < 3; s++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "phi-relu_seed-%d", 1337 + s), snprintf(b, sizeof b, "phi-elu_seed-%d", 1337 + s);
        fake_run(g0, a, 1000, 2.5 - 0.1 + noise[s]);
        fake_run(g0, b, 1000, 2.5);
        fake_run(g1, a, 2000, 2.3 - 0.2 + noise[s]);
        fake_run(g1, b, 2000, 2.3);
    }
    const char *claims[] = {"phi=relu < phi=elu"};
    SeedPlan none = {.n_looks = 0};
    Ladder l = {.grids = {g0, g1}, .n_grids = 2, .claims = claims, .n_claims = 1, .plan = &none, .within = 0.02};
    Err e;
    ck_assert_msg(ladder_run(&l, out, &e) == 0, "%s", e.msg);
    char path[500], text[8192];
    snprintf(path, sizeof path, "%s/ladder.md", out);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, "| s0 | ") && strstr(text, " | 3 | -0.1000 | [-0.1497, -0.0503] | agrees |"), "%s", text);
    ck_assert_msg(strstr(text, " | 3 | -0.2000 | [-0.2497, -0.1503] | agrees |"), "%s", text);
    ck_assert_msg(strstr(text, "slope: -0.3322 bpb per decade of FLOPs, 95% interval [-0.4828, -0.1816] (6 pairs)"), "%s",
                  text);
    ck_assert_msg(strstr(text, "across scale: the first rung's verdict (agrees) holds at every rung; the effect falls"),
                  "%s", text);
    /* ladder.csv gives the line at each rung (two rungs: through each rung's mean) and the
     * slope with its interval, which the page draws */
    snprintf(path, sizeof path, "%s/ladder.csv", out);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, ",fit,slope,slope_low,slope_high\n") &&
                      strstr(text, "\"agrees\",-0.100000,-0.332193,-0.482806,-0.181579\n") &&
                      strstr(text, "\"agrees\",-0.200000,-0.332193,-0.482806,-0.181579\n"),
                  "%s", text);
    snprintf(path, sizeof path, "%s/ladder.png", out);
    ck_assert(file_exists(path));
    /* under a seed plan, a rung undecided at a look that is not its last has not settled:
     * identity 0.1 below elu at s0 (each seed alike), 0 +- 0.3 at s1, 3 pairs of 3, 6, 12 */
    static const double wide[3] = {0, -0.3, 0.3};
    for (int s = 0; s < 3; s++) {
        char a[64];
        snprintf(a, sizeof a, "phi-identity_seed-%d", 1337 + s);
        fake_run(g0, a, 1000, 2.4);
        fake_run(g1, a, 2000, 2.3 + wide[s]);
    }
    SeedPlan looks;
    char why[200];
    ck_assert_int_eq(seed_plan_parse("3,6,12", &looks, why, sizeof why), 0);
    const char *pending[] = {"phi=identity < phi=elu"};
    l.claims = pending, l.plan = &looks;
    ck_assert_msg(ladder_run(&l, out, &e) == 0, "%s", e.msg);
    snprintf(path, sizeof path, "%s/ladder.md", out);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, "across scale: the first rung's verdict (agrees) cannot be followed yet: the plan's "
                               "next look is due at the second rung; "), "%s", text);
    /* and before the plan's first look (6 pairs) at both rungs */
    ck_assert_int_eq(seed_plan_parse("6,12", &looks, why, sizeof why), 0);
    ck_assert_msg(ladder_run(&l, out, &e) == 0, "%s", e.msg);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, "cannot be followed yet: the plan's next look is due at the first and second rungs"),
                  "%s", text);
    l.plan = &none;
    /* a claim whose side has no runs at a rung says so, and a bad claim is a usage error */
    const char *missing[] = {"phi=identity < phi=elu"};
    l.claims = missing;
    ck_assert_int_eq(ladder_run(&l, out, &e), 0);
    /* pairs at one rung alone give no slope (their FLOPs do not spread; the
     * least squares would divide by rounding error): a third rung whose two
     * points ran nowhere else */
    char g2[400];
    snprintf(g2, sizeof g2, "%s/s2", root);
    ck_assert_int_eq(mkdir(g2, 0755), 0);
    int st = 2990; /* one whose log10 FLOPs, summed over the 3 pairs and divided by 3, is not itself */
    for (int s = 0; s < 3; s++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "phi-leakyrelu_seed-%d", 1337 + s), snprintf(b, sizeof b, "phi-tanh_seed-%d", 1337 + s);
        fake_run(g2, a, st, 2.2 + noise[s]);
        fake_run(g2, b, st, 2.25);
    }
    l.grids[2] = g2, l.n_grids = 3;
    const char *one_rung[] = {"phi=leakyrelu < phi=tanh"};
    l.claims = one_rung;
    ck_assert_int_eq(ladder_run(&l, out, &e), 0);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, "slope: too few pairs (3), or pairs at one rung alone") &&
                      strstr(text, "cannot be followed yet: no pairs yet at the first and second rungs; too few "
                                   "pairs or rungs for a slope"), "%s", text);
    /* three rungs awaiting the plan's next look, named as a list */
    for (int s = 0; s < 3; s++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "phi-identity_seed-%d", 1337 + s), snprintf(b, sizeof b, "phi-elu_seed-%d", 1337 + s);
        fake_run(g2, a, st, 2.2 + wide[s]);
        fake_run(g2, b, st, 2.2);
    }
    ck_assert_int_eq(seed_plan_parse("6,12", &looks, why, sizeof why), 0);
    l.claims = pending, l.plan = &looks;
    ck_assert_int_eq(ladder_run(&l, out, &e), 0);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, "the plan's next look is due at the first, second and third rungs"), "%s", text);
    l.plan = &none;
    /* a rung whose pairs are all set apart (both runs on the byte plateau) has no effect:
     * "-" in ladder.md and an empty field in ladder.csv, not nan */
    for (int s = 0; s < 3; s++) {
        char a[64], dir[500], metrics[600];
        snprintf(a, sizeof a, "phi-flat_seed-%d", 1337 + s);
        fake_run(g2, a, st, 4.0);
        snprintf(dir, sizeof dir, "%s/%s", g2, a);
        snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", dir);
        FILE *f = fopen(metrics, "w");
        fprintf(f, "{\"step\": %d, \"val_bpb\": 4.0}\n{\"step\": %d, \"val_bpb\": 4.0}\n", st / 4, st);
        fclose(f);
        snprintf(a, sizeof a, "phi-tanh_seed-%d", 1337 + s);
        snprintf(metrics, sizeof metrics, "%s/%s/metrics.jsonl", g2, a);
        f = fopen(metrics, "w");
        fprintf(f, "{\"step\": %d, \"val_bpb\": 4.1}\n{\"step\": %d, \"val_bpb\": 4.05}\n", st / 4, st);
        fclose(f);
    }
    const char *flat[] = {"phi=flat < phi=tanh"};
    l.claims = flat;
    ck_assert_int_eq(ladder_run(&l, out, &e), 0);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, "| 0 (3 apart) | - | - | inconclusive") && !strstr(text, "nan"), "%s", text);
    snprintf(path, sizeof path, "%s/ladder.csv", out);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, ",0,3,0,,,,") && !strstr(text, "nan"), "%s", text);
    /* a first rung whose pairs are all set apart has no verdict to follow: the later rungs'
     * verdicts are said, not "the plan's next look is due" at the first rung */
    for (int s = 0; s < 3; s++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "phi-flat_seed-%d", 1337 + s), snprintf(b, sizeof b, "phi-tanh_seed-%d", 1337 + s);
        fake_run(g1, a, 2000, 2.3 - 0.2 + noise[s]);
        fake_run(g1, b, 2000, 2.3);
    }
    Ladder flat_first = l;
    flat_first.grids[0] = g2, flat_first.grids[1] = g1, flat_first.n_grids = 2;
    ck_assert_int_eq(seed_plan_parse("3,6,12", &looks, why, sizeof why), 0);
    flat_first.plan = &looks;
    ck_assert_int_eq(ladder_run(&flat_first, out, &e), 0);
    snprintf(path, sizeof path, "%s/ladder.md", out);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, "across scale: the first rung has no verdict to follow (its 3 pairs all set apart, a run "
                               "on the byte plateau in each); later: agrees at the second rung; too few pairs or rungs"),
                  "%s", text);
    const char *bad[] = {"phi=relu"};
    l.claims = bad;
    ck_assert_int_eq(ladder_run(&l, out, &e), 2);
    ck_assert_msg(strstr(e.msg, "expected \"A < B\""), "%s", e.msg);
    test_rmtree(root);
}
END_TEST

/* A fake run's spectrum.csv: 2 layers, 1 head, K = 4 values, layer 0's c
 * at k = 1 (c(T/4)) c0 and c reaching 0.9 at k90; layer 1 0.5 then linear. */
static void fake_spectrum(const char *grid, const char *name, double c0, int k90) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s/spectrum.csv", grid, name);
    FILE *f = fopen(path, "w");
    fputs("layer,head,k,c,s\n", f);
    for (int k = 1; k <= 4; k++) {
        double c = k == 4 ? 1 : k >= k90 ? 0.9 + 0.01 * k : k == 1 ? c0 : 0.85;
        fprintf(f, "0,0,%d,%.6f,1\n", k, c);
    }
    for (int k = 1; k <= 4; k++) fprintf(f, "1,0,%d,%.6f,1\n", k, 0.5 + 0.125 * k);
    fclose(f);
}

/* A fake initialisation: a fake run at learning rate 0 and one step. */
static void fake_init(const char *grid, const char *name) {
    char path[700];
    fake_run(grid, name, 1, 4.0);
    Config c;
    config_defaults(&c);
    c.train.steps = 1, c.train.lr = 0;
    cJSON *j = config_to_json(&c);
    char *text = cJSON_Print(j);
    snprintf(path, sizeof path, "%s/%s/config.json", grid, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    free(text), cJSON_Delete(j);
}

/* ./spectrum --ladder on two fake rungs (the trained models twice the steps
 * at the second): layer 0's c(T/4) 0.5 at initialisation, 0.6 + noise and
 * 0.7 + noise trained, so init - trained is -0.1 and -0.2 with the same
 * +-0.02 noise as test_ladder: the same slope, -0.3322 [-0.4828, -0.1816]
 * per decade; k 90% 3 -> 2 at both (no spread: an interval of width 0
 * excludes 0); layer 1 unchanged: no effect. */
START_TEST(test_spectrum_ladder) {
    char root[256], i0[400], t0[400], i1[400], t1[400], out[400];
    test_tmpdir(root, sizeof root, "spladder");
    snprintf(i0, sizeof i0, "%s/init-s0", root), snprintf(t0, sizeof t0, "%s/th-s0", root);
    snprintf(i1, sizeof i1, "%s/init-s1", root), snprintf(t1, sizeof t1, "%s/th-s1", root);
    snprintf(out, sizeof out, "%s/out", root);
    const char *grids[] = {i0, t0, i1, t1};
    for (int g = 0; g < 4; g++) ck_assert_int_eq(mkdir(grids[g], 0755), 0);
    static const double noise[3] = {0, -0.02, 0.02};
    for (int s = 0; s < 3; s++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "heads-4_seed-%d", 1337 + s), snprintf(b, sizeof b, "plain_seed-%d", 1337 + s);
        for (int r = 0; r < 2; r++) {
            fake_init(grids[2 * r], a);
            fake_spectrum(grids[2 * r], a, 0.5, 3);
            fake_run(grids[2 * r + 1], b, 1000 * (r + 1), 2.5);
            fake_spectrum(grids[2 * r + 1], b, 0.6 + 0.1 * r - noise[s], 2);
        }
    }
    char arms[4][500];
    for (int r = 0; r < 2; r++)
        snprintf(arms[2 * r], sizeof arms[0], "%s/heads-4", grids[2 * r]),
            snprintf(arms[2 * r + 1], sizeof arms[0], "%s/plain", grids[2 * r + 1]);
    const char *v[] = {arms[0], arms[1], arms[2], arms[3]};
    SeedPlan none = {.n_looks = 0};
    Err e;
    ck_assert_msg(ladder_spectrum_run(v, 4, &none, 0.02, 2, out, &e) == 0, "%s", e.msg);
    char path[500], text[16384];
    snprintf(path, sizeof path, "%s/ladder.md", out);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, "## first layer, c(T/4): initialisation < trained\n"), "%s", text);
    ck_assert_msg(strstr(text, "| th-s0 | ") && strstr(text, " | 3 | -0.1000 | [-0.1497, -0.0503] | agrees |"), "%s",
                  text);
    ck_assert_msg(strstr(text, "| th-s1 | ") && strstr(text, " | 3 | -0.2000 | [-0.2497, -0.1503] | agrees |"), "%s",
                  text);
    ck_assert_msg(strstr(text, "slope: -0.3322 c(T/4) per decade of FLOPs, 95% interval [-0.4828, -0.1816] (6 pairs)"),
                  "%s", text);
    ck_assert_msg(strstr(text, "## last layer, c(T/4): initialisation < trained\n\n| rung |"), "%s", text);
    ck_assert_msg(strstr(text, " | 3 | +0.0000 | [+0.0000, +0.0000] | no effect larger than 0.0000 |"), "%s", text);
    ck_assert_msg(strstr(text, " | 3 | -1.00 | [-1.00, -1.00] | agrees |"), "%s", text);
    ck_assert_msg(strstr(text, "command: ./spectrum --ladder "), "%s", text);
    /* the arms the wrong way round: the claims disagree */
    const char *swapped[] = {arms[1], arms[0], arms[3], arms[2]};
    ck_assert_int_eq(ladder_spectrum_run(swapped, 4, &none, 0.02, 2, out, &e), 0);
    read_text(path, text, sizeof text);
    ck_assert_msg(strstr(text, " | 3 | +0.1000 | [+0.0503, +0.1497] | disagrees |"), "%s", text);
    /* an odd number of arms is a usage error */
    ck_assert_int_eq(ladder_spectrum_run(v, 3, &none, 0.02, 2, out, &e), 2);
    ck_assert_msg(strstr(e.msg, "each two arms"), "%s", e.msg);
    test_rmtree(root);
}
END_TEST

/* A malformed claim is refused, naming what is wrong. */
START_TEST(test_expect_refused) {
    Grid g;
    Err e;
    grid_of(&g, 1, (const char *[]){"phi=relu/elu", "reweight=none/cos"}, 2);
    static const char *bad[][2] = {
        {"reweight=cos", "not one '<' or '>' between two points"},
        {"reweight=cos < reweight=none < phi=relu", "not one '<' or '>'"},
        {"phi=relu < phi=elu > phi=relu", "not one '<' or '>'"},
        {"reweight=cos < ", "a side is empty"},
        {"rewieght=cos < reweight=none", "'rewieght' is not an axis of the grid"},
        {"reweight=sin < reweight=none", "'reweight=sin' is not a value of the axis reweight"},
        {"reweight < reweight=none", "'reweight' is not key=value (nor baseline)"},
        {"phi=relu < reweight=none", "phi is named on one side only"},
        {"phi=relu,phi=elu < phi=relu", "phi given twice on one side"},
        {"reweight=cos < reweight=cos", "the same points on both sides"},
        {"baseline < baseline", "the baseline on both sides"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(grid_expect(&g, bad[i][0], &e) == -1, "%s accepted", bad[i][0]);
        ck_assert_msg(strstr(e.msg, bad[i][1]), "%s: %s", bad[i][0], e.msg);
        ck_assert_msg(!strncmp(e.msg, "--expect \"", 10), "%s", e.msg);
    }
    ck_assert_int_eq(g.n_claims, 0);
    ck_assert_int_eq(grid_expect(&g, "phi=relu , reweight=cos<baseline", &e), 0);
    ck_assert_int_eq(g.n_claims, 1);
    ck_assert(g.claims[0].value[0][0] == 0 && g.claims[0].value[0][1] == 1 && g.claims[0].baseline[1]);
    grid_release(&g);
}
END_TEST

/* A value that holds commas (a per-layer list) is one term: a comma starts
 * the next term only before an axis name and '='. */
START_TEST(test_expect_comma_values) {
    Grid g;
    Err e;
    grid_of(&g, 1, (const char *[]){"linformer_k=64/16,64/64,16", "context=128/256"}, 2);
    ck_assert_msg(grid_expect(&g, "linformer_k=16,64 < linformer_k=64,16", &e) == 0, "%s", e.msg);
    ck_assert(g.claims[0].value[0][0] == 1 && g.claims[0].value[1][0] == 2);
    ck_assert_msg(grid_expect(&g, "linformer_k=16,64, context=256 < linformer_k=64,context=256", &e) == 0, "%s", e.msg);
    ck_assert(g.claims[1].value[0][0] == 1 && g.claims[1].value[0][1] == 1 && g.claims[1].value[1][0] == 0);
    ck_assert_int_eq(grid_expect(&g, "linformer_k=16,32 < linformer_k=64", &e), -1);
    ck_assert_msg(strstr(e.msg, "'linformer_k=16,32' is not a value of the axis linformer_k"), "%s", e.msg);
    grid_release(&g);
}
END_TEST

/* The plateau rule (EXPERIMENTS.md): above 3.3 causal, 3.9 masked, at the end,
 * or first below it only in the last quarter of the steps. */
START_TEST(test_plateau) {
    GridRun r = {.n_points = 4};
    config_defaults(&r.cfg);
    r.cfg.train.steps = 400;
    double steps[4] = {100, 200, 300, 400}, bpb[4] = {3.6, 3.5, 3.25, 3.0};
    r.steps = steps, r.bpb = bpb;
    char why[128] = "";
    ck_assert(!grid_plateau(&r, why, sizeof why)); /* below from step 300, 300 <= 0.75 * 400 */
    bpb[2] = 3.31;
    ck_assert(grid_plateau(&r, why, sizeof why));
    ck_assert_str_eq(why, "below the plateau level only from step 400 of 400");
    r.cfg.train.steps = 600; /* 400 <= 450: left in time */
    ck_assert(!grid_plateau(&r, why, sizeof why));
    bpb[3] = 3.4;
    ck_assert(grid_plateau(&r, why, sizeof why));
    ck_assert_str_eq(why, "never below the plateau level");
    bpb[0] = 3.2; /* below once, then back above */
    ck_assert(grid_plateau(&r, why, sizeof why));
    ck_assert_str_eq(why, "ends above the plateau level");
    r.cfg.model.objective = OBJECTIVE_MLM; /* 3.4 is below the masked level, 3.9 */
    ck_assert(!grid_plateau(&r, why, sizeof why));
    r.n_points = 0; /* no curve: the final value alone */
    r.result.val_bpb = 3.95;
    ck_assert(grid_plateau(&r, why, sizeof why));
    r.result.val_bpb = 3.85;
    ck_assert(!grid_plateau(&r, why, sizeof why));
}
END_TEST

Suite *grid_suite(void) {
    Suite *s = suite_create("grid");
    TCase *tc = tcase_create("grid");
    tcase_add_test(tc, test_tables_of_long_rows);
    tcase_add_test(tc, test_words_refused);
    tcase_add_test(tc, test_stale_run_refused);
    tcase_add_test(tc, test_seeds);
    tcase_add_test(tc, test_effects_one_axis_at_a_time);
    tcase_add_test(tc, test_linked_axis);
    tcase_add_test(tc, test_claims);
    tcase_add_test(tc, test_kernels_and_plan);
    tcase_add_test(tc, test_provenance_segments);
    tcase_add_test(tc, test_ladder);
    tcase_add_test(tc, test_spectrum_ladder);
    tcase_add_test(tc, test_expect_refused);
    tcase_add_test(tc, test_expect_comma_values);
    tcase_add_test(tc, test_plateau);
    suite_add_tcase(s, tc);
    return s;
}
