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
#include <unistd.h>

#include "args.h"
#include "checkpoint.h"
#include "corpus.h"
#include "interrupt.h"
#include "memory.h"
#include "mlm.h"
#include "plot.h"
#include "progress.h"
#include "run.h"
#include "startup.h"
#include "stats.h"

#define MAX_LENGTHS 64
#define MAX_OVERRIDES 3

/* The model options that may change at evaluation: they change what a query
 * sees or how its logits are scaled, not the parameters. */
static const char *const inference_keys[MAX_OVERRIDES] = {"window", "logn", "bca"};

typedef struct {
    char key[16], value[64];
} Override;

typedef struct {
    const char *spec; /* as given on the command line */
    char path[1100];  /* the checkpoint file */
    char name[1100];  /* the run folder's name, or the file's stem */
    Override ov[MAX_OVERRIDES];
    int n_ov;
    char label[1200];
    int group;        /* its group: the variants whose label is the same up to a _seed-N */
    Config cfg;
    const char *corpus_path;
    Corpus corpus;
    Model model;
    bool loaded;
    char beyond[256]; /* the lengths beyond the learned positions, for the note */
    double bpb[MAX_LENGTHS]; /* NAN: n/a */
    long windows[MAX_LENGTHS], bytes[MAX_LENGTHS];
} Variant;

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
            "  --threads N       threads (default 0 = all cores)\n"
            "  --out DIR         where extrapolate.csv and extrapolate.png go (default: the first\n"
            "                    checkpoint's run folder, or . for a bare .safetensors file)\n"
            "  --label A,B,...   row labels, one per checkpoint, in order (default: as above)\n",
            DEFAULT_MAX_BYTES, DEFAULT_MAX_BYTES / 1024);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool is_inference_key(const char *key) {
    for (int i = 0; i < MAX_OVERRIDES; i++)
        if (!strcmp(key, inference_keys[i])) return true;
    return false;
}

/* Why key cannot be an override: the one-line reason. */
static int refuse_key(const char *where, const char *key, Err *e) {
    const OptDef *o = option_find(key);
    if (o && o->group == GROUP_MODEL)
        err_set(e, "%s%s%s is fixed by the checkpoint", where, where[0] ? ": " : "", key);
    else if (o)
        err_set(e, "%s%s%s is a %s option; ./extrapolate trains and samples nothing", where, where[0] ? ": " : "", key,
                o->group == GROUP_TRAIN ? "training" : "sampling");
    else
        err_set(e, "%s%sunknown key '%s'", where, where[0] ? ": " : "", key);
    return err_hint(e, "only window, logn and bca can change at evaluation");
}

static int add_override(Override *ov, int *n, const char *where, const char *key, const char *value, Err *e) {
    if (!is_inference_key(key)) return refuse_key(where, key, e);
    for (int i = 0; i < *n; i++)
        if (!strcmp(ov[i].key, key))
            return where[0] == '-' ? err_set(e, "--%s is given twice", key) : err_set(e, "%s: %s is given twice", where, key);
    if (strlen(value) >= sizeof ov->value || !value[0]) return err_set(e, "%s: %s: needs a value", where, key);
    /* the value's own check, on a scratch config */
    Config scratch;
    config_defaults(&scratch);
    Err sub;
    if (option_set(&scratch, key, value, &sub) != 0) /* sub.msg starts with --key */
        return where[0] == '-' ? err_set(e, "%s", sub.msg) : err_set(e, "%s: %s", where, sub.msg);
    snprintf(ov[*n].key, sizeof ov->key, "%s", key);
    snprintf(ov[*n].value, sizeof ov->value, "%s", value);
    (*n)++;
    return 0;
}

/* "runs/rope@logn=on,window=128": the path, then the overrides. A path that
 * exists as written is taken whole (it may contain '@'). */
static int parse_variant(Variant *v, const char *spec, Err *e) {
    memset(v, 0, sizeof *v);
    v->spec = spec;
    char path[1100];
    if (snprintf(path, sizeof path, "%s", spec) >= (int)sizeof path) return err_set(e, "%s: path too long", spec);
    const char *at = strrchr(spec, '@');
    if (at && !file_exists(spec)) {
        path[at - spec] = '\0';
        char list[512];
        if (snprintf(list, sizeof list, "%s", at + 1) >= (int)sizeof list) return err_set(e, "%s: overrides too long", spec);
        if (!list[0])
            return err_set(e, "%s: nothing after '@'", spec), err_hint(e, "write e.g. %s@window=128", path);
        char *save = NULL;
        int items = 0;
        for (char *p = list;; p = NULL) {
            char *item = strtok_r(p, ",", &save);
            if (!item) break;
            items++;
            char *eq = strchr(item, '=');
            if (!eq)
                return err_set(e, "%s: '%s' is not key=value", spec, item), err_hint(e, "write e.g. %s@window=128", path);
            *eq = '\0';
            if (add_override(v->ov, &v->n_ov, spec, item, eq + 1, e) != 0) return -1;
        }
        /* strtok_r skips empty items: count the commas to catch "a=1,,b=2" */
        int commas = 0;
        for (const char *c = at + 1; *c; c++) commas += *c == ',';
        if (items != commas + 1) return err_set(e, "%s: empty item in the overrides", spec);
    }
    if (!path[0]) return err_set(e, "%s: no checkpoint before '@'", spec);
    char trimmed[1100];
    snprintf(trimmed, sizeof trimmed, "%s", path);
    for (size_t n = strlen(trimmed); n > 1 && trimmed[n - 1] == '/'; n--) trimmed[n - 1] = '\0';
    if (is_directory(trimmed)) {
        if (path_join(v->path, sizeof v->path, trimmed, "model.safetensors", e) != 0) return -1;
    } else {
        snprintf(v->path, sizeof v->path, "%s", trimmed);
    }
    run_name_of(trimmed, v->name, sizeof v->name);
    return 0;
}

/* A positional is a checkpoint when it names a folder, a .safetensors file
 * or carries @overrides. */
static bool looks_like_checkpoint(const char *a) {
    if (is_directory(a) || ends_with(a, ".safetensors")) return true;
    const char *at = strrchr(a, '@');
    if (!at || file_exists(a)) return false;
    if (strchr(at, '=')) return true;
    char base[1100];
    snprintf(base, sizeof base, "%.*s", (int)(at - a), a);
    return is_directory(base) || ends_with(base, ".safetensors");
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* "256,512,1024": sorted, each in [2, 2^20], no repeats. */
static int parse_lengths(const char *s, int *out, int *n, Err *e) {
    *n = 0;
    if (!s || !s[0]) return err_set(e, "--lengths: no lengths given"), err_hint(e, "e.g. --lengths 128,256,512");
    const char *p = s;
    for (;;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || (*end && *end != ','))
            return err_set(e, "--lengths: '%s' is not a comma-separated list of integers", s),
                   err_hint(e, "e.g. --lengths 128,256,512");
        if (x < 2 || x > (1 << 20)) return err_set(e, "--lengths: %ld is outside [2, %d]", x, 1 << 20);
        if (*n == MAX_LENGTHS) return err_set(e, "--lengths: more than %d lengths", MAX_LENGTHS);
        out[(*n)++] = (int)x;
        if (!*end) break;
        p = end + 1;
    }
    qsort(out, (size_t)*n, sizeof *out, cmp_int);
    for (int i = 1; i < *n; i++)
        if (out[i] == out[i - 1]) return err_set(e, "--lengths: %d is given twice", out[i]);
    return 0;
}

/* Appends s to the CSV, quoted when it holds a comma, quote or newline. */
static size_t csv_field(char *buf, size_t cap, size_t len, const char *s) {
    if (!strpbrk(s, ",\"\n")) return len + (size_t)snprintf(buf + len, cap - len, "%s", s);
    len += (size_t)snprintf(buf + len, cap - len, "\"");
    for (const char *c = s; *c; c++) len += (size_t)snprintf(buf + len, cap - len, *c == '"' ? "\"\"" : "%c", *c);
    return len + (size_t)snprintf(buf + len, cap - len, "\"");
}

static void format_ratio(char *buf, size_t size, int T, int context) {
    snprintf(buf, size, "%.4g", (double)T / context);
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

/* The option table's --key value: inference-time overrides for every
 * variant; any other option is refused with the reason. */
typedef struct {
    Override ov[MAX_OVERRIDES];
    int n;
} GlobalOverrides;

static int set_option(const OptDef *o, const char *value, void *ctx) {
    GlobalOverrides *g = ctx;
    Err e;
    if (!is_inference_key(o->name)) {
        refuse_key("", o->name, &e);
        fprintf(stderr, "error: --%s\nhint: %s\n", e.msg, e.hint);
        return -1;
    }
    char flag[40];
    snprintf(flag, sizeof flag, "--%s", o->name);
    if (add_override(g->ov, &g->n, flag, o->name, value, &e) != 0) {
        err_print(&e);
        return -1;
    }
    return 0;
}

/* A label's group key: the label with "_seed-<digits>" taken out of its run
 * name (ablate --seeds names its runs so), e.g. pos-rope_seed-1338@window=128
 * -> pos-rope@window=128. */
static void group_key(const char *label, char *key, size_t size) {
    const char *at = strchr(label, '@');
    size_t name_len = at ? (size_t)(at - label) : strlen(label);
    const char *cut = NULL;
    for (const char *p = label; p + 6 <= label + name_len; p++)
        if (!strncmp(p, "_seed-", 6)) {
            const char *d = p + 6;
            while (d < label + name_len && *d >= '0' && *d <= '9') d++;
            if (d > p + 6 && (d == label + name_len || *d == '_')) cut = p;
        }
    if (!cut) {
        snprintf(key, size, "%s", label);
        return;
    }
    const char *rest = cut + 6;
    while (*rest >= '0' && *rest <= '9') rest++;
    snprintf(key, size, "%.*s%s", (int)(cut - label), label, rest);
}

/* Sets each variant's group; returns the number of groups, with runs[g]
 * the variants of group g and keys[g] its key. */
static int make_groups(Variant *vs, int nv, int *runs, char (*keys)[1200]) {
    int ng = 0;
    for (int i = 0; i < nv; i++) {
        char key[1200];
        group_key(vs[i].label, key, sizeof key);
        int g = 0;
        while (g < ng && strcmp(keys[g], key)) g++;
        if (g == ng) {
            snprintf(keys[ng], sizeof keys[ng], "%s", key);
            runs[ng++] = 0;
        }
        runs[g]++;
        vs[i].group = g;
    }
    return ng;
}

int main(int argc, char **argv) {
    command_startup(argc, argv);
    interrupt_install();
    /* -1: not given; when neither is, --max_bytes DEFAULT_MAX_BYTES */
    int threads = 0, max_windows = -1, max_bytes = -1;
    const char *out_arg = NULL, *labels_arg = NULL, *lengths_arg = NULL;
    GlobalOverrides overrides = {.n = 0};
    Err e;
    const ArgFlag flags[] = {
        {"--lengths", .text = &lengths_arg},
        {"--max_windows", .integer = &max_windows, .lo = 0, .hi = 1 << 30},
        {"--max_bytes", .integer = &max_bytes, .lo = 0, .hi = 1 << 30},
        {"--threads", .integer = &threads, .lo = 0, .hi = 1024, .repeat = true},
        {"--out", .text = &out_arg},
        {"--label", .text = &labels_arg},
    };
    const ArgSpec cli = {.command = "extrapolate", .usage = usage, .flags = flags,
                         .n_flags = (int)(sizeof flags / sizeof *flags), .option = set_option, .ctx = &overrides,
                         .missing_hint = "./extrapolate --help"};
    ArgPositional pos;
    int status = args_parse(&cli, argc, argv, &pos);
    if (status != ARGS_OK) return status;
    int n_pos = pos.n;
    if (max_windows >= 0 && max_bytes >= 0) {
        fprintf(stderr, "error: --max_windows and --max_bytes both cap the windows; give one\n");
        return 2;
    }
    if (max_windows < 0 && max_bytes < 0) max_bytes = DEFAULT_MAX_BYTES;
    if (max_windows < 0) max_windows = 0;
    if (max_bytes < 0) max_bytes = 0;
    if (n_pos == 0) {
        fprintf(stderr, "error: no checkpoint given\nhint: ./extrapolate runs/NAME corpus.txt --lengths 128,256,512\n");
        return 2;
    }
    const char *corpus_arg = NULL;
    if (!looks_like_checkpoint(pos.v[n_pos - 1])) {
        corpus_arg = pos.v[--n_pos];
        if (n_pos == 0) {
            fprintf(stderr, "error: %s: not a run folder or checkpoint, and no checkpoint given\n"
                            "hint: ./extrapolate runs/NAME [corpus.txt] --lengths 128,256,512\n",
                    corpus_arg);
            return 2;
        }
    }

    /* The variants: paths, overrides and labels. */
    int nv = n_pos;
    Variant *vs = xcalloc((size_t)nv, sizeof *vs);
    for (int i = 0; i < nv; i++) {
        Variant *v = &vs[i];
        if (parse_variant(v, pos.v[i], &e) != 0) goto user_error;
        for (int g = 0; g < overrides.n; g++) {
            bool given = false;
            for (int k = 0; k < v->n_ov; k++) given |= !strcmp(v->ov[k].key, overrides.ov[g].key);
            if (!given) v->ov[v->n_ov++] = overrides.ov[g];
        }
        size_t len = (size_t)snprintf(v->label, sizeof v->label, "%s", v->name);
        for (int k = 0; k < v->n_ov && len < sizeof v->label; k++)
            len += (size_t)snprintf(v->label + len, sizeof v->label - len, "%s%s=%s", k ? "," : "@", v->ov[k].key,
                                    v->ov[k].value);
    }
    if (labels_arg) {
        int count = 1;
        for (const char *c = labels_arg; *c; c++) count += *c == ',';
        if (count != nv) {
            fprintf(stderr, "error: --label: %d label%s for %d checkpoint%s\nhint: give one label per checkpoint, comma-separated\n",
                    count, count == 1 ? "" : "s", nv, nv == 1 ? "" : "s");
            return 2;
        }
        const char *p = labels_arg;
        for (int i = 0; i < nv; i++) {
            size_t n = strcspn(p, ",");
            if (n == 0 || n >= sizeof vs[i].label) {
                fprintf(stderr, "error: --label: label %d is %s\n", i + 1, n ? "too long" : "empty");
                return 2;
            }
            snprintf(vs[i].label, sizeof vs[i].label, "%.*s", (int)n, p);
            p += n + (p[n] == ',');
        }
    }

    /* Everything that can fail on user input is checked before any scoring:
     * the lengths, the checkpoints, the overrides, the memory, the corpora. */
    int lengths[MAX_LENGTHS], nl = 0;
    if (lengths_arg && parse_lengths(lengths_arg, lengths, &nl, &e) != 0) goto user_error;
    for (int i = 0; i < nv; i++) {
        Variant *v = &vs[i];
        StFile st;
        CheckpointInfo info;
        if (checkpoint_open(&st, v->path, &info, &e) != 0) goto runtime_error;
        v->cfg = info.cfg;
        if (v->cfg.model.objective != vs[0].cfg.model.objective) {
            st_close(&st);
            fprintf(stderr,
                    "error: %s: objective=%s, and %s has objective=%s: their bpb are on different bytes (every byte, "
                    "or the masked ones)\nhint: score them in two commands\n",
                    v->spec, v->cfg.model.objective == OBJECTIVE_MLM ? "mlm" : "clm", vs[0].spec,
                    vs[0].cfg.model.objective == OBJECTIVE_MLM ? "mlm" : "clm");
            return 2;
        }
        for (int k = 0; k < v->n_ov; k++)
            if (option_set(&v->cfg, v->ov[k].key, v->ov[k].value, &e) != 0) {
                st_close(&st);
                goto user_error;
            }
        Err why;
        if (config_validate(&v->cfg, &why) != 0) {
            st_close(&st);
            err_set(&e, "%s: %s", v->label, why.msg);
            snprintf(e.hint, sizeof e.hint, "%s", why.hint);
            goto user_error;
        }
        /* one window at a time, at the longest length */
        int longest = nl ? lengths[nl - 1] : vs[0].cfg.model.context << 3;
        char what[1300];
        snprintf(what, sizeof what, "%s: scoring at length %d", v->spec, longest);
        if (memory_check(what, "score shorter --lengths", &v->cfg.model, 1, longest, MEMORY_EVAL, engine_threads(),
                         &e) != 0) {
            st_close(&st);
            goto runtime_error;
        }
        model_init(&v->model, &v->cfg.model);
        v->loaded = true;
        int rc = checkpoint_load(&st, &v->model, false, &e);
        st_close(&st);
        if (rc != 0) goto runtime_error;
        if (corpus_arg) {
            v->corpus_path = corpus_arg;
        } else {
            if (!info.corpus[0] || !file_exists(info.corpus)) {
                /* through err_set, which keeps a forged path on one line */
                err_set(&e, "no corpus given, and the one %s names (%s) is not there", v->spec,
                        info.corpus[0] ? info.corpus : "none recorded");
                err_hint(&e, "./extrapolate %s corpus.txt", v->spec);
                err_print(&e);
                return 2;
            }
            v->corpus_path = xstrdup(info.corpus);
        }
        if (corpus_open(&v->corpus, v->corpus_path, v->cfg.train.val_fraction, 1, &e) != 0) goto runtime_error;
    }
    if (!lengths_arg)
        for (int k = 0; k < 4; k++) lengths[nl++] = vs[0].cfg.model.context << k;
    long total_bytes = 0;
    int max_T = 0;
    for (int i = 0; i < nv; i++) {
        Variant *v = &vs[i];
        const ModelConfig *mc = &v->cfg.model;
        char *beyond = v->beyond;
        size_t blen = 0;
        for (int l = 0; l < nl; l++) {
            int T = lengths[l];
            v->bpb[l] = NAN;
            if (corpus_val_count(&v->corpus, T, 0) == 0) {
                size_t held = corpus_val_size(&v->corpus);
                fprintf(stderr, "error: --lengths %d: the held-out split of %s has %zu bytes, and a window of length %d needs %d\n"
                                "hint: use lengths up to %zu, or a longer corpus\n",
                        T, v->corpus_path, held, T, T + 1, held > 1 ? held - 1 : 0);
                return 1;
            }
            if (pos_scheme(mc->pos)->bounded && T > mc->context) {
                blen += (size_t)snprintf(beyond + blen, blen < sizeof v->beyond ? sizeof v->beyond - blen : 0, "%s%d",
                                         blen ? ", " : "", T);
                continue;
            }
            v->windows[l] = corpus_val_count(&v->corpus, T, windows_at(T, max_windows, max_bytes));
            v->bytes[l] = v->windows[l] * scored_per_window(v, T);
            total_bytes += v->windows[l] * T;
            if (T > max_T) max_T = T;
        }
    }
    if (total_bytes == 0) {
        fprintf(stderr, "error: --lengths: nothing to score: every length is beyond the learned positions\n"
                        "hint: include a length up to the training context\n");
        return 2;
    }
    for (int i = 0; i < nv; i++)
        if (vs[i].beyond[0])
            fprintf(stderr,
                    "note: %s: pos=learned has positions up to its context %d only; n/a at length %s\n"
                    "hint: a model trained with --pos rope, alibi, kerple_log or another relative scheme scores at "
                    "any length\n",
                    vs[i].label, vs[i].cfg.model.context, vs[i].beyond);
    char out_dir[1100];
    if (out_arg)
        snprintf(out_dir, sizeof out_dir, "%s", out_arg);
    else if (ends_with(vs[0].path, "/model.safetensors") && is_directory(pos.v[0]))
        snprintf(out_dir, sizeof out_dir, "%.*s", (int)(strlen(vs[0].path) - strlen("/model.safetensors")), vs[0].path);
    else
        snprintf(out_dir, sizeof out_dir, ".");
    char csv_path[1200], png_path[1200];
    if (path_join(csv_path, sizeof csv_path, out_dir, "extrapolate.csv", &e) != 0 ||
        path_join(png_path, sizeof png_path, out_dir, "extrapolate.png", &e) != 0)
        goto user_error;

    /* Scoring. */
    int used_threads = engine_set_threads(threads);
    printf("extrapolate: %d variant%s, lengths", nv, nv == 1 ? "" : "s");
    for (int l = 0; l < nl; l++) printf("%s%d", l ? "," : " ", lengths[l]);
    printf(", %s windows, %s\n", max_windows || max_bytes ? "evenly spaced" : "all", threads_banner(used_threads));
    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    bool was = grad_set(false);
    int *ids = xmalloc((size_t)max_T * sizeof(int)), *targets = xmalloc((size_t)max_T * sizeof(int));
    Progress prog;
    progress_init(&prog, "extrapolate", total_bytes, stderr);
    long done = 0;
    for (int i = 0; i < nv; i++) {
        Variant *v = &vs[i];
        for (int l = 0; l < nl; l++) {
            if (!v->windows[l]) continue;
            int T = lengths[l];
            double nats = 0.0;
            char extra[1300];
            snprintf(extra, sizeof extra, "%s T=%d", v->label, T);
            for (long w = 0; w < v->windows[l]; w++) {
                if (interrupt_signal()) {
                    progress_finish(&prog, "interrupted");
                    printf("interrupted; nothing written\n");
                    return interrupt_exit_status();
                }
                arena_reset(&arena);
                nats += window_nats(v, T, windows_at(T, max_windows, max_bytes), w, ids, targets);
                done += T;
                progress_update(&prog, done, extra);
            }
            v->bpb[l] = nats / M_LN2 / (double)v->bytes[l];
        }
    }
    progress_finish(&prog, "done");
    grad_set(was);
    free(ids), free(targets);
    engine_set_arena(NULL);
    arena_free(&arena);

    /* The table: rows = variants, columns = lengths. The ratio is in the
     * header when every variant has the same training context. */
    int ctx0 = vs[0].cfg.model.context, width = 7;
    bool same_ctx = true;
    for (int i = 0; i < nv; i++) {
        same_ctx &= vs[i].cfg.model.context == ctx0;
        int n = (int)strlen(vs[i].label);
        if (n > width) width = n;
    }
    printf("\nbits per byte on the held-out split, by length%s\n", same_ctx ? " (x the training context)" : "");
    printf("%-*s  %-12s %7s", width, "variant", "pos", "context");
    for (int l = 0; l < nl; l++) {
        char head[48], r[16];
        format_ratio(r, sizeof r, lengths[l], ctx0);
        if (same_ctx)
            snprintf(head, sizeof head, "%d (%sx)", lengths[l], r);
        else
            snprintf(head, sizeof head, "%d", lengths[l]);
        printf("  %12s", head);
    }
    printf("\n");
    for (int i = 0; i < nv; i++) {
        Variant *v = &vs[i];
        const OptDef *pos = option_find("pos");
        char posbuf[32];
        printf("%-*s  %-12s %7d", width, v->label, option_format(&v->cfg, pos, posbuf, sizeof posbuf), v->cfg.model.context);
        for (int l = 0; l < nl; l++) {
            if (isfinite(v->bpb[l]))
                printf("  %12.4f", v->bpb[l]);
            else
                printf("  %12s", "n/a");
        }
        printf("\n");
    }

    /* Groups of seeds: their mean and 95% interval per length. */
    int *runs = xmalloc((size_t)nv * sizeof *runs);
    char(*keys)[1200] = xmalloc((size_t)nv * sizeof *keys);
    int ng = make_groups(vs, nv, runs, keys);
    bool grouped = ng < nv;
    Summary *gs = xcalloc((size_t)ng * nl, sizeof *gs);
    for (int g = 0; g < ng; g++)
        for (int l = 0; l < nl; l++) {
            double xs[64];
            int n = 0;
            for (int i = 0; i < nv; i++)
                if (vs[i].group == g && isfinite(vs[i].bpb[l]) && n < 64) xs[n++] = vs[i].bpb[l];
            gs[(long)g * nl + l] = n ? summarize(xs, n) : (Summary){0, NAN, NAN, NAN};
        }
    if (grouped) {
        int gw = 7;
        for (int g = 0; g < ng; g++) gw = (int)strlen(keys[g]) + 10 > gw ? (int)strlen(keys[g]) + 10 : gw;
        printf("\nthe runs of each group (their names differ only in _seed-N): mean +- the 95%% interval (t)\n");
        printf("%-*s", gw, "group");
        for (int l = 0; l < nl; l++) printf("  %18d", lengths[l]);
        printf("\n");
        for (int g = 0; g < ng; g++) {
            char head[1300];
            snprintf(head, sizeof head, "%s (%d run%s)", keys[g], runs[g], runs[g] == 1 ? "" : "s");
            printf("%-*s", gw, head);
            for (int l = 0; l < nl; l++) {
                const Summary *s = &gs[(long)g * nl + l];
                char cell[48];
                if (!s->n)
                    snprintf(cell, sizeof cell, "n/a");
                else if (isfinite(s->half))
                    snprintf(cell, sizeof cell, "%.4f +- %.4f", s->mean, s->half);
                else
                    snprintf(cell, sizeof cell, "%.4f", s->mean);
                printf("  %18s", cell);
            }
            printf("\n");
        }
    }

    /* The CSV and the plot, each written to a temporary file and renamed. */
    size_t cap = 128, len = 0; /* a quoted label is at most twice its length plus 2 */
    for (int i = 0; i < nv; i++) cap += (size_t)nl * (2 * strlen(vs[i].label) + 200);
    char *csv = xmalloc(cap);
    len += (size_t)snprintf(csv, cap, "label,pos,train_context,length,ratio,bpb,windows,bytes\n");
    double *x = xmalloc((size_t)nl * sizeof(double)), *y = xmalloc((size_t)nv * nl * sizeof(double));
    PlotSeries *series = xmalloc((size_t)nv * sizeof *series);
    for (int l = 0; l < nl; l++) x[l] = lengths[l];
    for (int i = 0; i < nv; i++) {
        Variant *v = &vs[i];
        char posbuf[32], r[16], bpb[32];
        option_format(&v->cfg, option_find("pos"), posbuf, sizeof posbuf);
        for (int l = 0; l < nl; l++) {
            format_ratio(r, sizeof r, lengths[l], v->cfg.model.context);
            if (isfinite(v->bpb[l]))
                snprintf(bpb, sizeof bpb, "%.9f", v->bpb[l]);
            else
                bpb[0] = '\0';
            len = csv_field(csv, cap, len, v->label);
            len += (size_t)snprintf(csv + len, cap - len, ",%s,%d,%d,%s,%s,%ld,%ld\n", posbuf, v->cfg.model.context,
                                    lengths[l], r, bpb, v->windows[l], v->bytes[l]);
            y[(long)i * nl + l] = v->bpb[l];
        }
        series[i] = (PlotSeries){v->label, x, y + (long)i * nl, nl, 0};
    }
    /* grouped: the plot shows each group's mean over faint +- 1 sd lines,
     * and extrapolate-summary.csv the group rows */
    int n_series = nv;
    char *sum = NULL;
    char(*glabels)[1300] = NULL;
    double *gy = NULL;
    if (grouped) {
        free(series);
        series = xmalloc((size_t)ng * 3 * sizeof *series);
        glabels = xmalloc((size_t)ng * sizeof *glabels);
        gy = xmalloc((size_t)ng * 3 * nl * sizeof(double));
        size_t scap = 128 + (size_t)ng * nl * (2 * 1200 + 160), slen = 0;
        sum = xmalloc(scap);
        slen += (size_t)snprintf(sum, scap, "group,length,runs,mean,sd,low,high\n");
        n_series = 0;
        for (int g = 0; g < ng; g++) {
            snprintf(glabels[g], sizeof glabels[g], "%s (%d run%s)", keys[g], runs[g], runs[g] == 1 ? "" : "s");
            double *m = gy + (long)g * 3 * nl, *lo = m + nl, *hi = lo + nl;
            for (int l = 0; l < nl; l++) {
                const Summary *s = &gs[(long)g * nl + l];
                m[l] = s->n ? s->mean : NAN;
                lo[l] = isfinite(s->sd) ? s->mean - s->sd : NAN;
                hi[l] = isfinite(s->sd) ? s->mean + s->sd : NAN;
                slen = csv_field(sum, scap, slen, keys[g]);
                slen += (size_t)snprintf(sum + slen, scap - slen, ",%d,%d", lengths[l], s->n);
                if (s->n)
                    slen += (size_t)snprintf(sum + slen, scap - slen, ",%.9f", s->mean);
                else
                    slen += (size_t)snprintf(sum + slen, scap - slen, ",");
                if (isfinite(s->half))
                    slen += (size_t)snprintf(sum + slen, scap - slen, ",%.9f,%.9f,%.9f\n", s->sd, s->mean - s->half,
                                             s->mean + s->half);
                else
                    slen += (size_t)snprintf(sum + slen, scap - slen, ",,,\n");
            }
            series[n_series++] = (PlotSeries){glabels[g], x, m, nl, 0};
            series[n_series++] = (PlotSeries){NULL, x, lo, nl, 1};
            series[n_series++] = (PlotSeries){NULL, x, hi, nl, 1};
        }
    }
    char title[400], what[160], name[256];
    if (same_ctx)
        snprintf(what, sizeof what, "length extrapolation (trained at %d bytes)", ctx0);
    else
        snprintf(what, sizeof what, "length extrapolation");
    /* the run, or the grid of runs that --out names */
    bool one_run = true;
    for (int i = 1; i < nv; i++) one_run = one_run && !strcmp(vs[i].name, vs[0].name);
    if (one_run)
        snprintf(name, sizeof name, "%.255s", vs[0].name);
    else if (out_arg)
        run_name_of(out_arg, name, sizeof name);
    else
        snprintf(name, sizeof name, "%d checkpoints", nv);
    plot_title(title, sizeof title, name, what);
    int shown = grouped ? ng : nv;
    PlotSpec spec = {title, "length in bytes (log scale)", "bits per byte (held-out)", 1, 0, shown > 4 ? 1200 : 0, 0,
                     shown > 4};
    char sum_path[1200];
    if (path_join(sum_path, sizeof sum_path, out_dir, "extrapolate-summary.csv", &e) != 0) goto user_error;
    if (make_dirs(out_dir, &e) != 0 || plot_lines(png_path, &spec, series, n_series, &e) != 0 ||
        write_file_atomic(csv_path, csv, &e) != 0 || (grouped && write_file_atomic(sum_path, sum, &e) != 0))
        goto runtime_error;
    if (!grouped) unlink(sum_path); /* a summary from an earlier, grouped table would not match */
    if (grouped)
        printf("\nwrote %s, %s, %s\n", csv_path, sum_path, png_path);
    else
        printf("\nwrote %s, %s\n", csv_path, png_path);
    free(csv), free(x), free(y), free(series), free(sum), free(glabels), free(gy), free(runs), free(keys), free(gs);
    for (int i = 0; i < nv; i++) {
        if (vs[i].loaded) model_free(&vs[i].model);
        corpus_close(&vs[i].corpus);
        if (!corpus_arg) free((char *)vs[i].corpus_path);
    }
    free(vs);
    return 0;
user_error:
    err_print(&e);
    return 2;
runtime_error:
    err_print(&e);
    return 1;
}
