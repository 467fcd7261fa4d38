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
#include "open.h"
#include "page.h"
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
            "  --threads N       threads, at most the CPUs this process may use (default 0 = all of them)\n"
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
    if (snprintf(path, sizeof path, "%s", spec) >= (int)sizeof path) return err_set(e, "%.60s...: path too long", spec);
    const char *at = strrchr(spec, '@');
    if (at && !file_exists(spec)) {
        path[at - spec] = '\0';
        char list[512];
        if (snprintf(list, sizeof list, "%s", at + 1) >= (int)sizeof list) return err_set(e, "%.60s...: overrides too long", spec);
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

/* The command: its arguments, then the variants and what is planned for
 * them, filled in by the steps of main in turn. */
typedef struct {
    int threads, max_windows, max_bytes;
    const char *out_arg, *labels_arg, *lengths_arg, *corpus_arg;
    GlobalOverrides overrides;
    ArgPositional pos;
    int n_pos; /* the positionals that are checkpoints */
    Variant *vs;
    int nv;
    int lengths[MAX_LENGTHS], nl;
    long total_bytes; /* what scoring every variant at every length reads */
    int max_T;
    char out_dir[1100], csv_path[1200], png_path[1200], sum_path[1200];
    int lock; /* out_dir's lock (run.h), -1 until taken: at once when it exists, else when it is made */
} Job;

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
                         .n_flags = (int)(sizeof flags / sizeof *flags), .option = set_option, .ctx = &j->overrides,
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
    if (!looks_like_checkpoint(j->pos.v[j->n_pos - 1])) {
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
        if (parse_variant(v, j->pos.v[i], &e) != 0) return err_print(&e), 2;
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
    if (j->lengths_arg && parse_lengths(j->lengths_arg, j->lengths, &j->nl, &e) != 0) return err_print(&e), 2;
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
    const char *first = j->vs[0].path;
    if (j->out_arg)
        snprintf(j->out_dir, sizeof j->out_dir, "%s", j->out_arg);
    else if (ends_with(first, "/model.safetensors") && is_directory(j->pos.v[0]))
        snprintf(j->out_dir, sizeof j->out_dir, "%.*s", (int)(strlen(first) - strlen("/model.safetensors")), first);
    else
        snprintf(j->out_dir, sizeof j->out_dir, ".");
    if (path_join(j->csv_path, sizeof j->csv_path, j->out_dir, "extrapolate.csv", &e) != 0 ||
        path_join(j->png_path, sizeof j->png_path, j->out_dir, "extrapolate.png", &e) != 0)
        return err_print(&e), 2;
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

/* Whether every variant has the same training context (then the ratio is
 * in the table's header and the plot's title). */
static bool same_context(const Job *j) {
    for (int i = 0; i < j->nv; i++)
        if (j->vs[i].cfg.model.context != j->vs[0].cfg.model.context) return false;
    return true;
}

/* The table: rows = variants, columns = lengths. */
static void print_table(const Job *j) {
    int ctx0 = j->vs[0].cfg.model.context, width = 7;
    bool same_ctx = same_context(j);
    for (int i = 0; i < j->nv; i++) {
        int n = (int)strlen(j->vs[i].label);
        if (n > width) width = n;
    }
    printf("\nbits per byte on the held-out split, by length%s\n", same_ctx ? " (x the training context)" : "");
    printf("%-*s  %-12s %7s", width, "variant", "pos", "context");
    for (int l = 0; l < j->nl; l++) {
        char head[48], r[16];
        format_ratio(r, sizeof r, j->lengths[l], ctx0);
        if (same_ctx)
            snprintf(head, sizeof head, "%d (%sx)", j->lengths[l], r);
        else
            snprintf(head, sizeof head, "%d", j->lengths[l]);
        printf("  %12s", head);
    }
    printf("\n");
    for (int i = 0; i < j->nv; i++) {
        const Variant *v = &j->vs[i];
        char posbuf[32];
        printf("%-*s  %-12s %7d", width, v->label, option_format(&v->cfg, option_find("pos"), posbuf, sizeof posbuf),
               v->cfg.model.context);
        for (int l = 0; l < j->nl; l++) {
            if (isfinite(v->bpb[l]))
                printf("  %12.4f", v->bpb[l]);
            else
                printf("  %12s", "n/a");
        }
        printf("\n");
    }
}

/* The groups of seeds: the variants of each (runs), its key and label, and
 * per length its mean and 95% interval (sum[g * nl + l]). */
typedef struct {
    int n;
    int *runs;
    char (*keys)[1200], (*labels)[1300];
    Summary *sum;
} Groups;

static Groups make_summaries(Job *j) {
    Groups gr;
    gr.runs = xmalloc((size_t)j->nv * sizeof *gr.runs);
    gr.keys = xmalloc((size_t)j->nv * sizeof *gr.keys);
    gr.labels = xmalloc((size_t)j->nv * sizeof *gr.labels);
    gr.n = make_groups(j->vs, j->nv, gr.runs, gr.keys);
    gr.sum = xcalloc((size_t)gr.n * j->nl, sizeof *gr.sum);
    for (int g = 0; g < gr.n; g++) {
        snprintf(gr.labels[g], sizeof gr.labels[g], "%s (%d run%s)", gr.keys[g], gr.runs[g], gr.runs[g] == 1 ? "" : "s");
        for (int l = 0; l < j->nl; l++) {
            double xs[64];
            int n = 0;
            for (int i = 0; i < j->nv; i++)
                if (j->vs[i].group == g && isfinite(j->vs[i].bpb[l]) && n < 64) xs[n++] = j->vs[i].bpb[l];
            gr.sum[(long)g * j->nl + l] = n ? summarize(xs, n) : (Summary){0, NAN, NAN, NAN};
        }
    }
    return gr;
}

static void groups_free(Groups *gr) { free(gr->runs), free(gr->keys), free(gr->labels), free(gr->sum); }

/* The second table, for groups of more than one: mean +- the 95% interval. */
static void print_groups(const Job *j, const Groups *gr) {
    int gw = 7;
    for (int g = 0; g < gr->n; g++) gw = (int)strlen(gr->keys[g]) + 10 > gw ? (int)strlen(gr->keys[g]) + 10 : gw;
    printf("\nthe runs of each group (their names differ only in _seed-N): mean +- the 95%% interval (t)\n");
    printf("%-*s", gw, "group");
    for (int l = 0; l < j->nl; l++) printf("  %18d", j->lengths[l]);
    printf("\n");
    for (int g = 0; g < gr->n; g++) {
        printf("%-*s", gw, gr->labels[g]);
        for (int l = 0; l < j->nl; l++) {
            const Summary *s = &gr->sum[(long)g * j->nl + l];
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

/* extrapolate.csv, one row per variant and length. */
static char *variants_csv(const Job *j) {
    size_t cap = 128, len = 0; /* a quoted label is at most twice its length plus 2 */
    for (int i = 0; i < j->nv; i++) cap += (size_t)j->nl * (2 * strlen(j->vs[i].label) + 200);
    char *csv = xmalloc(cap);
    len += (size_t)snprintf(csv, cap, "label,pos,train_context,length,ratio,bpb,windows,bytes\n");
    for (int i = 0; i < j->nv; i++) {
        const Variant *v = &j->vs[i];
        char posbuf[32], r[16], bpb[32];
        option_format(&v->cfg, option_find("pos"), posbuf, sizeof posbuf);
        for (int l = 0; l < j->nl; l++) {
            format_ratio(r, sizeof r, j->lengths[l], v->cfg.model.context);
            if (isfinite(v->bpb[l]))
                snprintf(bpb, sizeof bpb, "%.9f", v->bpb[l]);
            else
                bpb[0] = '\0';
            len = csv_field(csv, cap, len, v->label);
            len += (size_t)snprintf(csv + len, cap - len, ",%s,%d,%d,%s,%s,%ld,%ld\n", posbuf, v->cfg.model.context,
                                    j->lengths[l], r, bpb, v->windows[l], v->bytes[l]);
        }
    }
    return csv;
}

/* extrapolate-summary.csv, one row per group and length. */
static char *groups_csv(const Job *j, const Groups *gr) {
    size_t cap = 128 + (size_t)gr->n * j->nl * (2 * 1200 + 160), len = 0;
    char *sum = xmalloc(cap);
    len += (size_t)snprintf(sum, cap, "group,length,runs,mean,sd,low,high\n");
    for (int g = 0; g < gr->n; g++)
        for (int l = 0; l < j->nl; l++) {
            const Summary *s = &gr->sum[(long)g * j->nl + l];
            len = csv_field(sum, cap, len, gr->keys[g]);
            len += (size_t)snprintf(sum + len, cap - len, ",%d,%d", j->lengths[l], s->n);
            if (s->n)
                len += (size_t)snprintf(sum + len, cap - len, ",%.9f", s->mean);
            else
                len += (size_t)snprintf(sum + len, cap - len, ",");
            if (isfinite(s->half))
                len += (size_t)snprintf(sum + len, cap - len, ",%.9f,%.9f,%.9f\n", s->sd, s->mean - s->half,
                                        s->mean + s->half);
            else
                len += (size_t)snprintf(sum + len, cap - len, ",,,\n");
        }
    return sum;
}

/* The plot's lines, into series (and their values into y, nv x nl or, when
 * grouped, 3 ng x nl): a line per variant, or each group's mean over faint
 * +- 1 sd lines. Returns the number of series. */
static int plot_series(const Job *j, const Groups *gr, bool grouped, const double *x, double *y, PlotSeries *series) {
    int nl = j->nl, n = 0;
    if (!grouped) {
        for (int i = 0; i < j->nv; i++) {
            for (int l = 0; l < nl; l++) y[(long)i * nl + l] = j->vs[i].bpb[l];
            series[n++] = (PlotSeries){j->vs[i].label, x, y + (long)i * nl, nl, 0};
        }
        return n;
    }
    for (int g = 0; g < gr->n; g++) {
        double *m = y + (long)g * 3 * nl, *lo = m + nl, *hi = lo + nl;
        for (int l = 0; l < nl; l++) {
            const Summary *s = &gr->sum[(long)g * nl + l];
            m[l] = s->n ? s->mean : NAN;
            lo[l] = isfinite(s->sd) ? s->mean - s->sd : NAN;
            hi[l] = isfinite(s->sd) ? s->mean + s->sd : NAN;
        }
        series[n++] = (PlotSeries){gr->labels[g], x, m, nl, 0};
        series[n++] = (PlotSeries){NULL, x, lo, nl, 1};
        series[n++] = (PlotSeries){NULL, x, hi, nl, 1};
    }
    return n;
}

/* extrapolate.png: titled with the run, or the grid of runs that --out names. */
static int write_plot(const Job *j, const Groups *gr, bool grouped, Err *e) {
    int nv = j->nv, nl = j->nl, rows = grouped ? 3 * gr->n : nv;
    double *x = xmalloc((size_t)nl * sizeof(double)), *y = xmalloc((size_t)rows * nl * sizeof(double));
    PlotSeries *series = xmalloc((size_t)rows * sizeof *series);
    for (int l = 0; l < nl; l++) x[l] = j->lengths[l];
    int n_series = plot_series(j, gr, grouped, x, y, series);
    char title[400], what[160], name[256];
    if (same_context(j))
        snprintf(what, sizeof what, "length extrapolation (trained at %d bytes)", j->vs[0].cfg.model.context);
    else
        snprintf(what, sizeof what, "length extrapolation");
    bool one_run = true;
    for (int i = 1; i < nv; i++) one_run = one_run && !strcmp(j->vs[i].name, j->vs[0].name);
    if (one_run)
        snprintf(name, sizeof name, "%.255s", j->vs[0].name);
    else if (j->out_arg)
        run_name_of(j->out_arg, name, sizeof name);
    else
        snprintf(name, sizeof name, "%d checkpoints", nv);
    plot_title(title, sizeof title, name, what);
    int shown = grouped ? gr->n : nv;
    PlotSpec spec = {title, "length in bytes (log scale)", "bits per byte (held-out)", 1, 0, shown > 4 ? 1200 : 0, 0,
                     shown > 4};
    int rc = plot_lines(j->png_path, &spec, series, n_series, e);
    free(x), free(y), free(series);
    return rc;
}

/* The tables, then the CSV(s) and the plot, each written to a temporary
 * file and renamed. The exit status. */
static int report(Job *j) {
    print_table(j);
    Groups gr = make_summaries(j);
    bool grouped = gr.n < j->nv;
    if (grouped) print_groups(j, &gr);
    char *csv = variants_csv(j), *sum = grouped ? groups_csv(j, &gr) : NULL;
    Err e;
    int status = 0;
    if (path_join(j->sum_path, sizeof j->sum_path, j->out_dir, "extrapolate-summary.csv", &e) != 0) {
        status = 2;
    } else if (make_dirs(j->out_dir, &e) != 0 || (j->lock < 0 && (j->lock = run_lock(j->out_dir, &e)) < 0) ||
               write_plot(j, &gr, grouped, &e) != 0 ||
               write_file_atomic(j->csv_path, csv, &e) != 0 || (grouped && write_file_atomic(j->sum_path, sum, &e) != 0)) {
        status = 1;
    } else {
        if (!grouped) unlink(j->sum_path); /* a summary from an earlier, grouped table would not match */
        if (grouped)
            printf("\nwrote %s, %s, %s\n", j->csv_path, j->sum_path, j->png_path);
        else
            printf("\nwrote %s, %s\n", j->csv_path, j->png_path);
        char why[200]; /* a run folder's page gets the extrapolation's chart */
        if (page_kind(j->out_dir, why, sizeof why) == PAGE_RUN) {
            if (page_write_run(j->out_dir, NULL, &e) != 0)
                status = 1;
            else
                printf("page: %s/index.html\n", j->out_dir);
        }
    }
    if (status != 0) err_print(&e);
    free(csv), free(sum);
    groups_free(&gr);
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
    interrupt_install();
    Job j = {.threads = 0, .lock = -1};
    int status = parse_args(&j, argc, argv);
    if (status != ARGS_OK) return status;
    Err e;
    if (command_threads(j.threads, stdout, &e) < 0) return err_print(&e), 1; /* before the models, which count them */
    if ((status = make_variants(&j)) == 0 && (status = plan(&j)) == 0 && (status = score(&j)) == 0)
        status = report(&j);
    job_free(&j);
    return status;
}
