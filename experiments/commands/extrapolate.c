/* extrapolate.c: ./extrapolate CHECKPOINT[@key=v,...] [CHECKPOINT ...] [corpus.txt] [--lengths T1,T2,...]
 *
 * Length extrapolation: how well a model trained at context n predicts text
 * at lengths T > n. Each checkpoint (a variant: the checkpoint plus
 * inference-time overrides of window, logn and bca) is scored on the
 * held-out split at every length, with gradients off and one window at a
 * time in an arena reset per window.
 *
 * The windows are the validation windows of data/corpus.h: the held-out
 * split is cut into full = val_bytes / (T + 1) non-overlapping windows of
 * T + 1 bytes, window w covering held-out bytes [w (T + 1), w (T + 1) + T];
 * the inputs are its first T bytes and the targets the next byte at each
 * position. A remainder shorter than T + 1 bytes is unused. With
 * --max_windows N, N evenly spaced windows of those (slot floor(i full / N)).
 * Every predicted byte of every window is scored:
 *   bpb = (sum of the cross-entropies, in nats) / ln 2 / (windows * T). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "checkpoint.h"
#include "corpus.h"
#include "extrapolate.h"
#include "interrupt.h"
#include "memory.h"
#include "mlm.h"
#include "open.h"
#include "output_check.h"
#include "progress.h"
#include "run.h"
#include "startup.h"

/* The default window cap: every length scores about this many bytes. */
enum { DEFAULT_MAX_BYTES = 1 << 18 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./extrapolate CHECKPOINT[@key=value,...] [CHECKPOINT ...] [corpus.txt] [--lengths T1,T2,...]\n"
            "                     [--max_windows N] [--window W] [--logn on|off] [--bca on|off]\n"
            "                     [--threads N] [--out DIR] [--label NAME,NAME,...]\n"
            "\n"
            "Scores each checkpoint on the held-out split at every length and writes a bpb-by-length\n"
            "table: extrapolate.csv (label, pos, train_context, length, ratio, bpb, windows, bytes) and\n"
            "extrapolate.png (bpb against length on a log axis, one line per variant).\n"
            "\n"
            "Arguments. A CHECKPOINT is a run folder or a .safetensors file. Every positional argument\n"
            "but the last is a checkpoint; the last one is a checkpoint too when it is a folder, ends in\n"
            ".safetensors or carries @overrides, and otherwise it is the corpus. Without a corpus, each\n"
            "checkpoint is scored on the corpus its metadata names.\n"
            "\n"
            "The window rule (the validation windows of training, at length T). The held-out split is\n"
            "the last val_fraction of the corpus (the checkpoint's val_fraction). It is cut into\n"
            "full = floor(held-out bytes / (T + 1)) non-overlapping windows: window w covers held-out\n"
            "bytes [w(T+1), w(T+1) + T]; its inputs are its first T bytes and its targets the next byte\n"
            "at each position. The remainder shorter than T + 1 bytes is unused. --max_windows N takes\n"
            "N evenly spaced windows of those instead (window i = slot floor(i * full / N)); --max_bytes B\n"
            "takes N = max(1, floor(B / T)) so every length scores about the same amount of text. Every\n"
            "predicted byte of every window is scored, with the model starting afresh in each window:\n"
            "    bpb = total cross-entropy in nats / ln 2 / (windows * T)\n"
            "At T = the training context and N = eval_batches * batch this is the val_bpb of training.\n"
            "\n"
            "Masked LMs (objective=mlm). A window is its first T bytes, not shifted, and its scored\n"
            "bytes are the positions that training's validation masks: n = max(1, round(0.15 T)) of\n"
            "them, chosen uniformly and corrupted (80%% mask id, 10%% a random byte, 10%% unchanged)\n"
            "with an RNG seeded from the window's index alone, the same rule at every length and for\n"
            "every checkpoint. bpb = total nats / ln 2 / (windows * n) over those positions; the bytes\n"
            "column counts them. --window W is then bidirectional (|i - j| < W). clm and mlm\n"
            "checkpoints are not mixed in one table.\n"
            "\n"
            "Inference-time overrides. --window, --logn and --bca replace the checkpoint's values for\n"
            "every variant; CHECKPOINT@key=value,... does so for one variant (it wins over the flags),\n"
            "so one command can compare e.g. runs/rope runs/rope@window=128 runs/rope@logn=on,window=128.\n"
            "The keys are window, logn and bca; every other model option is fixed by the checkpoint.\n"
            "Combinations the model cannot run are refused with the reason (./train --help lists them).\n"
            "A row's label is the checkpoint's run folder name plus its overrides.\n"
            "\n"
            "Seeds. Labels that differ only in a _seed-N in the run name (./ablate --seeds names its\n"
            "runs so: pos-rope_seed-1337, pos-rope_seed-1338, ...) form a group, as do equal --label\n"
            "values. With a group of more than one, a second table gives each group's mean and 95%%\n"
            "interval (t) per length, extrapolate-summary.csv has them (group, length, runs, mean,\n"
            "sd, low, high), and the plot draws the group means over faint +- 1 sd lines.\n"
            "\n"
            "n/a. pos=learned has positions up to its training context only: longer lengths are shown\n"
            "as n/a (an empty bpb in the CSV), with a note on stderr. To extrapolate, train with a\n"
            "relative scheme (--pos rope, alibi, kerple_log, ...). A length whose window does not fit\n"
            "in the held-out split is an error that names the length and the held-out size.\n"
            "\n"
            "  --lengths T1,...  lengths in bytes, each >= 2, no repeats (default: 1, 2, 4 and 8 times\n"
            "                    the first checkpoint's training context)\n"
            "  --max_windows N   at most N evenly spaced windows per length (0 = all of them)\n"
            "  --max_bytes B     at most max(1, B / T) evenly spaced windows at length T (0 = off); the\n"
            "                    default when neither is given is --max_bytes %d, about %d KiB of text\n"
            "                    per length (all windows: --max_bytes 0)\n"
            "  --window W        sliding causal window, 0 = full (softmax only)\n"
            "  --logn on|off     scale logits by max(1, log n / log context) (softmax only), n the\n"
            "                    keys a row sees: a causal --window W <= the training context keeps\n"
            "                    n <= context, so there log-n never scales (clm window + logn = window)\n"
            "  --bca on|off      blockwise causal attention, blocks of context / 2 (softmax, clm only)\n"
            "  --threads N       threads, at most the CPUs this process may use (default 0 = all of them)\n"
            "  --out DIR         where extrapolate.csv and extrapolate.png go (default: the first\n"
            "                    checkpoint's run folder, or the folder of a bare .safetensors file)\n"
            "  --label A,B,...   row labels, one per checkpoint, in order (default: as above)\n",
            DEFAULT_MAX_BYTES, DEFAULT_MAX_BYTES / 1024);
}

/* The bytes a window of T scores: all T left to right, or under mlm the
 * mlm_count(T) masked ones. */
static long scored_per_window(const Variant *v, int T) {
    return v->cfg.model.objective == OBJECTIVE_MLM ? mlm_count(T) : T;
}

/* Sum of the cross-entropies (nats) over every scored byte of window w. */
static double window_nats(Variant *v, int T, long max_windows, long w, int *ids, int *targets) {
    if (v->cfg.model.objective == OBJECTIVE_MLM)
        mlm_val_window(&v->corpus, T, max_windows, w, ids, targets);
    else
        corpus_val_window(&v->corpus, T, max_windows, w, ids, targets);
    Tensor *loss = model_loss(&v->model, ids, targets, 1, T);
    return (double)loss->data[0] * (double)scored_per_window(v, T);
}

/* The window cap at length T: --max_windows N, or --max_bytes B as
 * max(1, B / T) windows (the same amount of text at every length); 0 = all. */
static long windows_at(int T, int max_windows, int max_bytes) {
    if (max_bytes) {
        long n = max_bytes / T;
        return n < 1 ? 1 : n;
    }
    return max_windows;
}

/* The command line. ARGS_OK, or the status to exit with (said). */
static int parse_args(Job *j, int argc, char **argv) {
    /* -1: not given; when neither is, --max_bytes DEFAULT_MAX_BYTES */
    j->max_windows = j->max_bytes = -1;
    const ArgFlag flags[] = {
        {"--lengths", .text = &j->lengths_arg},
        {"--max_windows", .integer = &j->max_windows, .lo = 0, .hi = 1 << 30},
        {"--max_bytes", .integer = &j->max_bytes, .lo = 0, .hi = 1 << 30},
        {"--threads", .integer = &j->threads, .lo = 0, .hi = 1024, .repeat = true},
        {"--out", .text = &j->out_arg},
        {"--label", .text = &j->labels_arg},
    };
    const ArgSpec cli = {.command = "extrapolate", .usage = usage, .flags = flags,
                         .n_flags = (int)(sizeof flags / sizeof *flags), .option = xp_set_option, .ctx = &j->overrides,
                         .missing_hint = "./extrapolate --help"};
    int status = args_parse(&cli, argc, argv, &j->pos);
    if (status != ARGS_OK) return status;
    j->n_pos = j->pos.n;
    if (j->max_windows >= 0 && j->max_bytes >= 0) {
        fprintf(stderr, "error: --max_windows and --max_bytes both cap the windows; give one\n");
        return 2;
    }
    if (j->max_windows < 0 && j->max_bytes < 0) j->max_bytes = DEFAULT_MAX_BYTES;
    if (j->max_windows < 0) j->max_windows = 0;
    if (j->max_bytes < 0) j->max_bytes = 0;
    if (j->n_pos == 0) {
        fprintf(stderr, "error: no checkpoint given\nhint: ./extrapolate runs/NAME corpus.txt --lengths 128,256,512\n");
        return 2;
    }
    if (!xp_looks_like_checkpoint(j->pos.v[j->n_pos - 1])) {
        j->corpus_arg = j->pos.v[--j->n_pos];
        if (j->n_pos == 0) {
            fprintf(stderr, "error: %s: not a run folder or checkpoint, and no checkpoint given\n"
                            "hint: ./extrapolate runs/NAME [corpus.txt] --lengths 128,256,512\n",
                    j->corpus_arg);
            return 2;
        }
    }
    return ARGS_OK;
}

/* --label A,B,...: one label per variant. 0, or the status to exit with (said). */
static int set_labels(Variant *vs, int nv, const char *labels) {
    int count = 1;
    for (const char *c = labels; *c; c++) count += *c == ',';
    if (count != nv) {
        fprintf(stderr, "error: --label: %d label%s for %d checkpoint%s\nhint: give one label per checkpoint, comma-separated\n",
                count, count == 1 ? "" : "s", nv, nv == 1 ? "" : "s");
        return 2;
    }
    const char *p = labels;
    for (int i = 0; i < nv; i++) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof vs[i].label) {
            fprintf(stderr, "error: --label: label %d is %s\n", i + 1, n ? "too long" : "empty");
            return 2;
        }
        snprintf(vs[i].label, sizeof vs[i].label, "%.*s", (int)n, p);
        p += n + (p[n] == ',');
    }
    return 0;
}

/* The variants: paths, overrides (a variant's own win over the flags) and
 * labels. 0, or the status to exit with (said). */
static int make_variants(Job *j) {
    j->nv = j->n_pos;
    j->vs = xcalloc((size_t)j->nv, sizeof *j->vs);
    for (int i = 0; i < j->nv; i++) {
        Variant *v = &j->vs[i];
        Err e;
        if (xp_parse_variant(v, j->pos.v[i], &e) != 0) return err_print(&e), 2;
        for (int g = 0; g < j->overrides.n; g++) {
            bool given = false;
            for (int k = 0; k < v->n_ov; k++) given |= !strcmp(v->ov[k].key, j->overrides.ov[g].key);
            if (!given) v->ov[v->n_ov++] = j->overrides.ov[g];
        }
        size_t len = (size_t)snprintf(v->label, sizeof v->label, "%s", v->name);
        for (int k = 0; k < v->n_ov && len < sizeof v->label; k++)
            len += (size_t)snprintf(v->label + len, sizeof v->label - len, "%s%s=%s", k ? "," : "@", v->ov[k].key,
                                    v->ov[k].value);
    }
    return j->labels_arg ? set_labels(j->vs, j->nv, j->labels_arg) : 0;
}

static const char *objective_name(const Variant *v) {
    return v->cfg.model.objective == OBJECTIVE_MLM ? "mlm" : "clm";
}

/* Variant v's config: the checkpoint's, the same objective as the first
 * variant's, with its overrides, and valid. 0, or the status to exit with
 * (said). */
static int settle_config(Variant *v, const Variant *first) {
    if (v->cfg.model.objective != first->cfg.model.objective) {
        fprintf(stderr,
                "error: %s: objective=%s, and %s has objective=%s: their bpb are on different bytes (every byte, "
                "or the masked ones)\nhint: score them in two commands\n",
                v->spec, objective_name(v), first->spec, objective_name(first));
        return 2;
    }
    Err e;
    for (int k = 0; k < v->n_ov; k++)
        if (option_set(&v->cfg, v->ov[k].key, v->ov[k].value, &e) != 0) return err_print(&e), 2;
    Err why;
    if (config_validate(&v->cfg, &why) != 0) {
        err_set(&e, "%s: %s", v->label, why.msg);
        snprintf(e.hint, sizeof e.hint, "%s", why.hint);
        return err_print(&e), 2;
    }
    return 0;
}

/* Opens variant v: its checkpoint and config, the memory for one window at
 * the longest length, the model, the corpus. 0, or the status to exit with
 * (said). */
static int load_variant(Variant *v, const Variant *first, const Job *j) {
    OpenRun o;
    Err e;
    int status = open_run(&o, v->path, &e);
    if (status != 0) return err_print(&e), status;
    v->cfg = o.info.cfg;
    if ((status = settle_config(v, first)) != 0) {
        open_run_close(&o);
        return status;
    }
    o.info.cfg = v->cfg; /* the model is built with the overrides */
    int longest = j->nl ? j->lengths[j->nl - 1] : first->cfg.model.context << 3;
    char what[1300];
    snprintf(what, sizeof what, "%s: scoring at length %d", v->spec, longest);
    OpenMemory need = {what, "score shorter --lengths", longest, MEMORY_EVAL, engine_threads()};
    if (open_run_load(&o, &v->model, &need, false, &e) != 0) return err_print(&e), 1;
    v->loaded = true;
    const char *corpus_path = j->corpus_arg ? j->corpus_arg : open_run_corpus(&o);
    if (!corpus_path) {
        /* through err_set, which keeps a forged path on one line */
        err_set(&e, "no corpus given, and the one %s names (%s) is not there", v->spec, open_run_corpus_said(&o));
        err_hint(&e, "./extrapolate %s corpus.txt", v->spec);
        return err_print(&e), 2;
    }
    if (corpus_open(&v->corpus, corpus_path, v->cfg.train.val_fraction, 1, &e) != 0) return err_print(&e), 1;
    return 0;
}

/* Variant v at each length: the windows and bytes it scores, or n/a beyond
 * its learned positions (listed in v->beyond). 0, or 1 (said) when a window
 * does not fit in the held-out split. */
static int plan_variant(Job *j, Variant *v) {
    const ModelConfig *mc = &v->cfg.model;
    size_t blen = 0;
    for (int l = 0; l < j->nl; l++) {
        int T = j->lengths[l];
        v->bpb[l] = NAN;
        if (corpus_val_count(&v->corpus, T, 0) == 0) {
            size_t held = corpus_val_size(&v->corpus);
            fprintf(stderr, "error: --lengths %d: the held-out split of %s has %zu bytes, and a window of length %d needs %d\n"
                            "hint: use lengths up to %zu, or a longer corpus\n",
                    T, v->corpus.path, held, T, T + 1, held > 1 ? held - 1 : 0);
            return 1;
        }
        if (pos_scheme(mc->pos)->bounded && T > mc->context) {
            blen += (size_t)snprintf(v->beyond + blen, blen < sizeof v->beyond ? sizeof v->beyond - blen : 0, "%s%d",
                                     blen ? ", " : "", T);
            continue;
        }
        v->windows[l] = corpus_val_count(&v->corpus, T, windows_at(T, j->max_windows, j->max_bytes));
        v->bytes[l] = v->windows[l] * scored_per_window(v, T);
        j->total_bytes += v->windows[l] * T;
        if (T > j->max_T) j->max_T = T;
    }
    return 0;
}

/* Everything that can fail on user input, checked before any scoring: the
 * lengths, the checkpoints, the overrides, the memory, the corpora, the
 * windows, the output paths. 0, or the status to exit with (said). */
static int plan(Job *j) {
    Err e;
    if (j->lengths_arg && xp_parse_lengths(j->lengths_arg, j->lengths, &j->nl, &e) != 0) return err_print(&e), 2;
    for (int i = 0; i < j->nv; i++) {
        int status = load_variant(&j->vs[i], &j->vs[0], j);
        if (status != 0) return status;
    }
    if (!j->lengths_arg)
        for (int k = 0; k < 4; k++) j->lengths[j->nl++] = j->vs[0].cfg.model.context << k;
    for (int i = 0; i < j->nv; i++)
        if (plan_variant(j, &j->vs[i]) != 0) return 1;
    if (j->total_bytes == 0) {
        fprintf(stderr, "error: --lengths: nothing to score: every length is beyond the learned positions\n"
                        "hint: include a length up to the training context\n");
        return 2;
    }
    for (int i = 0; i < j->nv; i++)
        if (j->vs[i].beyond[0])
            fprintf(stderr,
                    "note: %s: pos=learned has positions up to its context %d only; n/a at length %s\n"
                    "hint: a model trained with --pos rope, alibi, kerple_log or another relative scheme scores at "
                    "any length\n",
                    j->vs[i].label, j->vs[i].cfg.model.context, j->vs[i].beyond);
    const char *first = j->vs[0].path, *slash = strrchr(first, '/');
    /* beside the first checkpoint: its run folder, or the folder of a checkpoint file */
    if (j->out_arg)
        snprintf(j->out_dir, sizeof j->out_dir, "%s", j->out_arg);
    else if (slash)
        snprintf(j->out_dir, sizeof j->out_dir, "%.*s", slash == first ? 1 : (int)(slash - first), first);
    else
        snprintf(j->out_dir, sizeof j->out_dir, ".");
    if (path_join(j->csv_path, sizeof j->csv_path, j->out_dir, "extrapolate.csv", &e) != 0 ||
        path_join(j->png_path, sizeof j->png_path, j->out_dir, "extrapolate.png", &e) != 0)
        return err_print(&e), 2;
    /* the names the plot prints, and the folder: checked before the scoring (output_check.h) */
    for (int i = 0; j->labels_arg && i < j->nv; i++)
        if (output_name_check("--label", j->vs[i].label, &e) != 0) return err_print(&e), 2;
    if (j->out_arg && output_name_check("--out", j->out_arg, &e) != 0) return err_print(&e), 2;
    if (output_dir_check(j->out_arg ? "--out" : "the output folder", j->out_dir, "--out DIR", &e) != 0)
        return err_print(&e), 1;
    /* a folder another command writes in (./train, say) is refused before the scoring */
    if (is_directory(j->out_dir) && (j->lock = run_lock(j->out_dir, &e)) < 0) return err_print(&e), 1;
    return 0;
}

/* Scores every variant at every length into v->bpb: 0, or the status to
 * exit with when interrupted. */
static int score(Job *j) {
    int used_threads = engine_threads();
    printf("extrapolate: %d variant%s, lengths", j->nv, j->nv == 1 ? "" : "s");
    for (int l = 0; l < j->nl; l++) printf("%s%d", l ? "," : " ", j->lengths[l]);
    printf(", %s windows, %s\n", j->max_windows || j->max_bytes ? "evenly spaced" : "all", threads_banner(used_threads));
    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    bool was = grad_set(false);
    int *ids = xmalloc((size_t)j->max_T * sizeof(int)), *targets = xmalloc((size_t)j->max_T * sizeof(int));
    Progress prog;
    progress_init(&prog, "extrapolate", j->total_bytes, stderr);
    long done = 0;
    int status = 0;
    for (int i = 0; i < j->nv && !status; i++) {
        Variant *v = &j->vs[i];
        for (int l = 0; l < j->nl && !status; l++) {
            if (!v->windows[l]) continue;
            int T = j->lengths[l];
            double nats = 0.0;
            char extra[1300];
            snprintf(extra, sizeof extra, "%s T=%d", v->label, T);
            for (long w = 0; w < v->windows[l]; w++) {
                if (interrupt_signal()) {
                    progress_finish(&prog, "interrupted");
                    printf("interrupted; nothing written\n");
                    status = interrupt_exit_status();
                    break;
                }
                arena_reset(&arena);
                nats += window_nats(v, T, windows_at(T, j->max_windows, j->max_bytes), w, ids, targets);
                done += T;
                progress_update(&prog, done, extra);
            }
            v->bpb[l] = nats / M_LN2 / (double)v->bytes[l];
        }
    }
    if (!status) progress_finish(&prog, "done");
    grad_set(was);
    free(ids), free(targets);
    engine_set_arena(NULL);
    arena_free(&arena);
    return status;
}

static void job_free(Job *j) {
    for (int i = 0; i < j->nv; i++) {
        if (j->vs[i].loaded) model_free(&j->vs[i].model);
        corpus_close(&j->vs[i].corpus);
    }
    free(j->vs);
    run_unlock(j->lock);
}

int main(int argc, char **argv) {
    command_startup(argc, argv);
    command_one_process("extrapolate");
    interrupt_install();
    Job j = {.threads = 0, .lock = -1};
    int status = parse_args(&j, argc, argv);
    if (status != ARGS_OK) return status;
    Err e;
    if (command_threads(j.threads, stdout, &e) < 0) return err_print(&e), 1; /* before the models, which count them */
    if ((status = make_variants(&j)) == 0 && (status = plan(&j)) == 0 && (status = score(&j)) == 0)
        status = xp_report(&j);
    job_free(&j);
    return status;
}
