/* options.c: the option table and everything made from it. */
#include "precision.h"
#include "options.h"

#include <ctype.h>

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "utf8.h"

static const char *const on_off_choices[] = {"off", "on", NULL};
static const char *const norm_choices[] = {"layernorm", "rmsnorm", NULL};
static const char *const objective_choices[] = {"clm", "mlm", NULL};
static const char *const schedule_choices[] = {"cosine", "linear", "constant", NULL};
static const char *const bool_choices[] = {"false", "true", NULL};
static const char *const recompute_choices[] = {"auto", "off", "on", NULL};

#define M(field) offsetof(Config, model.field)
#define T(field) offsetof(Config, train.field)
#define S(field) offsetof(Config, sample.field)

static const OptDef table_rows[] = {
    /* model */
    /* the defaults of these two come from their registries (build_table) */
    {.name = "attn", .type = OPT_CHOICE, .group = GROUP_MODEL, .offset = M(attn), .choices_of = attn_choice_names,
     .help = "attention kernel (layers/attention/); a preset fixes some of its kernel's options"},
    {.name = "pos", .type = OPT_CHOICE, .group = GROUP_MODEL, .offset = M(pos), .choices_of = pos_scheme_names,
     .help = "position scheme"},
    {.name = "window", .type = OPT_INT, .group = GROUP_MODEL, .offset = M(window), .def = "0", .min = 0,
     .max = 1048576,
     .help = "sliding window: each query sees the keys at distance < W (the last W under clm, W - 1 each side "
             "under mlm); 0 = all (also at inference)"},
    {.name = "logn", .type = OPT_CHOICE, .group = GROUP_MODEL, .offset = M(logn), .def = "off",
     .choices = on_off_choices,
     .help = "scale logits by max(1, log n / log context), n = keys seen (also at inference)"},
    {.name = "bca", .type = OPT_CHOICE, .group = GROUP_MODEL, .offset = M(bca), .def = "off",
     .choices = on_off_choices,
     .help = "blockwise causal attention (XPOS): a query sees its block of context / 2 and the one before; "
             "inference only"},
    {.name = "layers", .type = OPT_INT, .group = GROUP_MODEL, .offset = M(layers), .def = "4", .min = 1, .max = 64,
     .help = "transformer blocks"},
    {.name = "d_model", .type = OPT_INT, .group = GROUP_MODEL, .offset = M(d_model), .def = "128", .min = 8,
     .max = 8192, .help = "model width"},
    {.name = "heads", .type = OPT_INT, .group = GROUP_MODEL, .offset = M(heads), .def = "4", .min = 1, .max = 256,
     .help = "attention heads"},
    {.name = "key_size", .type = OPT_INT, .group = GROUP_MODEL, .offset = M(key_size), .def = "0", .min = 0,
     .max = 4096, .help = "per-head size of q and k; 0 = d_model / heads"},
    {.name = "head_size", .type = OPT_INT, .group = GROUP_MODEL, .offset = M(head_size), .def = "0", .min = 0,
     .max = 4096, .help = "per-head size of v and the output; 0 = d_model / heads"},
    {.name = "mlp_ratio", .type = OPT_INT, .group = GROUP_MODEL, .offset = M(mlp_ratio), .def = "4", .min = 1,
     .max = 16, .help = "MLP hidden width / d_model"},
    {.name = "norm", .type = OPT_CHOICE, .group = GROUP_MODEL, .offset = M(norm), .def = "layernorm",
     .choices = norm_choices, .help = "normalisation"},
    {.name = "context", .type = OPT_INT, .group = GROUP_MODEL, .offset = M(context), .def = "128", .min = 2,
     .max = 65536, .help = "training length in bytes"},
    {.name = "tie_embeddings", .type = OPT_BOOL, .group = GROUP_MODEL, .offset = M(tie_embeddings), .def = "true",
     .choices = bool_choices, .help = "LM head shares the token embedding"},
    {.name = "objective", .type = OPT_CHOICE, .group = GROUP_MODEL, .offset = M(objective), .def = "clm",
     .choices = objective_choices, .help = "clm: causal LM; mlm: masked LM (bidirectional)"},
    /* training */
    {.name = "batch", .type = OPT_INT, .group = GROUP_TRAIN, .offset = T(batch), .def = "16", .min = 1, .max = 4096,
     .help = "windows per step"},
    {.name = "steps", .type = OPT_INT, .group = GROUP_TRAIN, .offset = T(steps), .def = "1500", .min = 1,
     .max = 100000000, .help = "optimizer steps"},
    {.name = "lr", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = T(lr), .def = "2e-3", .min = 0, .max = 10,
     .help = "peak learning rate"},
    {.name = "min_lr", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = T(min_lr), .def = "1e-4", .min = 0,
     .max = 10, .help = "learning rate at the end of the decay"},
    {.name = "warmup", .type = OPT_INT, .group = GROUP_TRAIN, .offset = T(warmup), .def = "100", .min = 0,
     .max = 100000000, .help = "linear warmup steps"},
    {.name = "schedule", .type = OPT_CHOICE, .group = GROUP_TRAIN, .offset = T(schedule), .def = "cosine",
     .choices = schedule_choices, .help = "decay after warmup"},
    {.name = "optimizer", .type = OPT_CHOICE, .group = GROUP_TRAIN, .offset = T(optimizer), .choices_of = optim_names,
     .help = "the optimizer"},
    {.name = "weight_decay", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = T(weight_decay), .def = "0.1",
     .min = 0, .max = 10, .help = "weight decay of matrices, applied as the optimizer says (decoupled or L2: its own help and docs/training.md)"},
    {.name = "clip", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = T(clip), .def = "1.0", .min = 0, .max = 1e6,
     .help = "global gradient-norm clip; 0 = off"},
    {.name = "seed", .type = OPT_INT64, .group = GROUP_TRAIN, .offset = T(seed), .def = "1337", .min = 0,
     .max = 9007199254740991.0, .help = "seed for initialisation and data order"},
    {.name = "eval_every", .type = OPT_INT, .group = GROUP_TRAIN, .offset = T(eval_every), .def = "250", .min = 1,
     .max = 100000000, .help = "steps between validation runs"},
    {.name = "eval_batches", .type = OPT_INT, .group = GROUP_TRAIN, .offset = T(eval_batches), .def = "8", .min = 1,
     .max = 100000, .help = "validation batches (fixed, evenly spaced windows)"},
    {.name = "save_every", .type = OPT_INT, .group = GROUP_TRAIN, .offset = T(save_every), .def = "500", .min = 1,
     .max = 100000000, .help = "steps between checkpoints"},
    {.name = "threads", .type = OPT_INT, .group = GROUP_TRAIN, .offset = T(threads), .def = "0", .min = 0,
     .max = 1024, .help = "threads, at most the CPUs this process may use (more is lowered, with a note); 0 = all"},
    {.name = "precision", .type = OPT_CHOICE, .group = GROUP_TRAIN, .offset = T(precision), .def = "fp32",
     .choices = precision_choices,
     .help = "matrix products: fp32, or bf16 (inputs rounded to bfloat16, sums in fp32; needs AVX512-BF16 or "
             "AMX); weights, optimizer, norms, softmax and loss stay fp32"},
    {.name = "recompute", .type = OPT_CHOICE, .group = GROUP_TRAIN, .offset = T(recompute), .def = "auto",
     .choices = recompute_choices,
     .help = "keep only each block's input and run its forward again in backward (training gives the same bits; "
             "validation goes a row at a time, the same to float rounding; a third more compute, a block's "
             "activations alive at a time); auto = on when the step would need over 1 GiB"},
    {.name = "val_fraction", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = T(val_fraction), .def = "0.1",
     .min = 1e-6, .max = 0.9, .help = "last part of the corpus held out"},
    {.name = "log_every", .type = OPT_INT, .group = GROUP_TRAIN, .offset = T(log_every), .def = "10", .min = 1,
     .max = 100000000, .help = "steps between metrics lines"},
    {.name = "out", .type = OPT_STRING, .group = GROUP_TRAIN, .offset = T(out), .def = "",
     .size = sizeof(((TrainConfig *)0)->out),
     .help = "run folder; default runs/<attn>_<changed options>-<date>-<time>, "
             "e.g. runs/softmax_pos-rope-20261123-101500"},
    /* sampling */
    {.name = "prompt", .type = OPT_STRING, .group = GROUP_SAMPLE, .offset = S(prompt), .def = "The ",
     .size = sizeof(((SampleConfig *)0)->prompt), .help = "text the sample starts from"},
    {.name = "temperature", .type = OPT_FLOAT, .group = GROUP_SAMPLE, .offset = S(temperature), .def = "0.8",
     .min = 0, .max = 100, .help = "sampling temperature; 0 = greedy"},
    {.name = "top_k", .type = OPT_INT, .group = GROUP_SAMPLE, .offset = S(top_k), .def = "40", .min = 0, .max = 256,
     .help = "sample among the k likeliest; 0 = all"},
    {.name = "sample_length", .type = OPT_INT, .group = GROUP_SAMPLE, .offset = S(length), .def = "400", .min = 0,
     .max = 100000, .help = "bytes to sample"},
};

const char *const options_clm_sampling[] = {"prompt", "temperature", "top_k", NULL};
const char *const options_inference[] = {"window", "logn", "bca", NULL};

/* The whole table: table_rows with the position schemes' rows after pos and
 * the kernels' after attn, made when first asked for (and again after a
 * kernel is registered). */
enum { MAX_REGISTRY_ROWS = 8 * ATTN_MAX_KERNELS + 32 };
static OptDef table[sizeof table_rows / sizeof table_rows[0] + MAX_REGISTRY_ROWS];
static int n_table = -1, table_kernels = -1;

/* Appends a registry's rows (offsets into the config from `base`); a row two
 * schemes share (rope_dims: rope and xpos) once. */
static void append_rows_at(const OptDef *rows, size_t base) {
    for (const OptDef *r = rows; r && r->name; r++) {
        bool seen = false;
        for (int j = 0; j < n_table && !seen; j++) seen = !strcmp(table[j].name, r->name);
        if (seen) continue;
        if (n_table == (int)(sizeof table / sizeof table[0])) DIE("option table: more than %d rows", n_table);
        table[n_table] = *r;
        table[n_table++].offset += base;
    }
}

/* A kernel's or position scheme's rows: offsets into ModelConfig. */
static void append_rows(const OptDef *rows) { append_rows_at(rows, offsetof(Config, model)); }

static void build_table(void) {
    if (n_table >= 0 && table_kernels == attn_kernel_count()) return;
    n_table = 0;
    table_kernels = attn_kernel_count();
    for (size_t i = 0; i < sizeof table_rows / sizeof table_rows[0]; i++) {
        OptDef *row = &table[n_table++];
        *row = table_rows[i];
        if (!strcmp(row->name, "attn")) {
            row->def = attn_choice(0)->name;
            for (int k = 0; k < table_kernels; k++) append_rows(attn_kernel_rows(k));
        } else if (!strcmp(row->name, "pos")) {
            row->def = pos_default_name;
            for (int k = 0; k < n_pos_schemes; k++) append_rows(pos_schemes[k]->option_rows);
        } else if (!strcmp(row->name, "optimizer")) {
            row->def = optimizers[0]->name;
            for (int k = 0; k < n_optimizers; k++)
                append_rows_at(optim_rows(k), offsetof(Config, train) + offsetof(TrainConfig, optim_options));
        }
    }
}

int option_count(void) {
    build_table();
    return n_table;
}

const OptDef *option_at(int i) {
    build_table();
    if (i < 0 || i >= n_table) DIE("option_at(%d): there are %d", i, n_table);
    return &table[i];
}

const char *const *option_choices(const OptDef *o) { return o->choices ? o->choices : o->choices_of(); }

const OptDef *option_find(const char *name) {
    for (int i = 0; i < option_count(); i++)
        if (strcmp(option_at(i)->name, name) == 0) return option_at(i);
    return NULL;
}

void config_defaults(Config *c) {
    _Static_assert(OPTIONS_MAX % 8 == 0, "whole bytes of given flags");
    memset(c, 0, sizeof *c);
    if (option_count() > OPTIONS_MAX) DIE("%d options: more than OPTIONS_MAX %d", option_count(), OPTIONS_MAX);
    for (int i = 0; i < option_count(); i++)
        if (option_set(c, option_at(i)->name, option_at(i)->def, NULL) != 0)
            DIE("bad default for option %s", option_at(i)->name);
    c->model.vocab = VOCAB_BYTES;
}

/* Edit distance between a and b: insertions, deletions, substitutions and
 * swaps of two neighbours each cost 1 (optimal string alignment). */
static int edit_distance(const char *a, const char *b) {
    enum { MAX = 64 };
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n >= MAX || m >= MAX) return MAX;
    int d[MAX][MAX];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

const char *closest_word(const char *word, const char *const *cands, int n) {
    size_t len = strlen(word);
    int limit = len <= 4 ? 1 : len <= 8 ? 2 : 3, best = limit + 1;
    const char *pick = NULL;
    for (int i = 0; i < n; i++) {
        if (!cands[i]) continue;
        int dist = edit_distance(word, cands[i]);
        if (dist < best) best = dist, pick = cands[i];
    }
    return pick;
}

static void choices_text(const OptDef *o, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    const char *const *choices = option_choices(o);
    for (int i = 0; choices[i] && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%s", i ? ", " : "", choices[i]);
}

/* A field of the config at a row's offset, copied in or out: a kernel's
 * options live in ModelConfig.kernel_options, bytes of no declared type. */
static int64_t load_i64(const char *f) { int64_t v; memcpy(&v, f, sizeof v); return v; }
static int load_int(const char *f) { int v; memcpy(&v, f, sizeof v); return v; }
static float load_float(const char *f) { float v; memcpy(&v, f, sizeof v); return v; }
static bool load_bool(const char *f) { bool v; memcpy(&v, f, sizeof v); return v; }
static void store_i64(char *f, int64_t v) { memcpy(f, &v, sizeof v); }
static void store_int(char *f, int v) { memcpy(f, &v, sizeof v); }
static void store_float(char *f, float v) { memcpy(f, &v, sizeof v); }
static void store_bool(char *f, bool v) { memcpy(f, &v, sizeof v); }

/* An OPT_INT or OPT_INT64 value, range-checked, stored as its type. */
static int set_integer(const OptDef *o, char *field, const char *value, Err *e) {
    char *end;
    errno = 0;
    double x = strtod(value, &end);
    if (end == value || *end || errno || x != floor(x) || x < o->min || x > o->max)
        return err_set(e, "--%s: expected an integer in [%.0f, %.0f], got '%s'", o->name, o->min, o->max, value);
    if (o->type == OPT_INT64)
        store_i64(field, (int64_t)x);
    else
        store_int(field, (int)x);
    return 0;
}

/* OPT_INTS: "64" or "64,32,16", all checked before any is stored. */
static int set_ints(const OptDef *o, char *field, const char *value, Err *e) {
    int v[64] = {0}, n = 0;
    const char *at = value;
    char *end;
    if ((size_t)o->size > sizeof v / sizeof *v) DIE("--%s: more than 64 values", o->name);
    errno = 0;
    for (;;) {
        double x = strtod(at, &end);
        if (end == at || errno || x != floor(x) || x < o->min || x > o->max || n == (int)o->size ||
            (*end && *end != ','))
            return err_set(e, "--%s: expected up to %zu comma-separated integers in [%.0f, %.0f] (one per layer), "
                              "got '%s'", o->name, o->size, o->min, o->max, value);
        v[n++] = (int)x;
        if (!*end) break;
        at = end + 1;
    }
    memcpy(field, v, o->size * sizeof(int));
    return 0;
}

static int set_float(const OptDef *o, char *field, const char *value, Err *e) {
    char *end;
    errno = 0;
    double x = strtod(value, &end);
    if (end == value || *end || errno || !isfinite(x) || x < o->min || x > o->max)
        return err_set(e, "--%s: expected a number in [%g, %g], got '%s'", o->name, o->min, o->max, value);
    store_float(field, (float)x);
    return 0;
}

/* OPT_CHOICE and OPT_BOOL: the value's index among the choices. */
static int set_choice(const OptDef *o, char *field, const char *value, Err *e) {
    const char *const *choices = option_choices(o);
    int n = 0;
    for (; choices[n]; n++) {
        if (strcmp(choices[n], value) != 0) continue;
        if (o->type == OPT_BOOL)
            store_bool(field, n);
        else
            store_int(field, n);
        return 0;
    }
    char list[256];
    choices_text(o, list, sizeof list);
    err_set(e, "--%s: '%s' is not one of: %s", o->name, value, list);
    const char *near = closest_word(value, choices, n);
    if (near) err_hint(e, "did you mean %s?", near);
    return -1;
}

int option_set(Config *c, const char *name, const char *value, Err *e) {
    const OptDef *o = option_find(name);
    if (!o) {
        err_set(e, "unknown option '%s'", name);
        const char *names[256];
        int n = 0;
        for (int i = 0; i < option_count() && n < 256; i++) names[n++] = option_at(i)->name;
        const char *near = closest_word(name, names, n);
        return near ? err_hint(e, "did you mean %s? (--help lists the options)", near)
                    : err_hint(e, "--help lists the options");
    }
    char *field = (char *)c + o->offset;
    switch (o->type) {
        case OPT_INT:
        case OPT_INT64: return set_integer(o, field, value, e);
        case OPT_INTS: return set_ints(o, field, value, e);
        case OPT_FLOAT: return set_float(o, field, value, e);
        case OPT_CHOICE:
        case OPT_BOOL: return set_choice(o, field, value, e);
        case OPT_STRING:
            if (strlen(value) >= o->size)
                return err_set(e, "--%s: value longer than %zu bytes", name, o->size - 1);
            strcpy(field, value);
            return 0;
    }
    return err_set(e, "--%s: unknown option type", name);
}

const char *option_format(const Config *c, const OptDef *o, char *buf, size_t size) {
    const char *field = (const char *)c + o->offset;
    switch (o->type) {
        case OPT_INT: snprintf(buf, size, "%d", load_int(field)); break;
        case OPT_INT64: snprintf(buf, size, "%lld", (long long)load_i64(field)); break;
        case OPT_FLOAT: { /* the fewest digits that give the same float back: 0.002, not 0.00200000009 */
            float x = load_float(field);
            for (int digits = 1; digits <= 9; digits++) {
                snprintf(buf, size, "%.*g", digits, (double)x);
                if (strtof(buf, NULL) == x) break;
            }
            break;
        }
        case OPT_CHOICE: snprintf(buf, size, "%s", option_choices(o)[load_int(field)]); break;
        case OPT_BOOL: snprintf(buf, size, "%s", load_bool(field) ? "true" : "false"); break;
        case OPT_STRING: snprintf(buf, size, "%s", field); break;
        case OPT_INTS: {
            size_t k = 0;
            buf[0] = '\0';
            for (size_t i = 0; i < o->size && k < size; i++) {
                int x = load_int(field + i * sizeof(int));
                if (i && !x) break;
                k += (size_t)snprintf(buf + k, size - k, "%s%d", i ? "," : "", x);
            }
            break;
        }
    }
    return buf;
}

static int option_index(const char *name) {
    for (int i = 0; i < option_count(); i++)
        if (!strcmp(option_at(i)->name, name)) return i;
    return -1;
}

int option_give(Config *c, const char *name, const char *value, Err *e) {
    if (option_set(c, name, value, e) != 0) return -1;
    int i = option_index(name);
    c->given[i / 8] |= (unsigned char)(1u << (i % 8));
    return 0;
}

void option_forget(Config *c, const char *name) {
    int i = option_index(name);
    if (i >= 0) c->given[i / 8] &= (unsigned char)~(1u << (i % 8));
}

/* Whether option `name` was given on the command line or differs from its default. */
static bool changed(const Config *c, const char *name) {
    int i = option_index(name);
    if (i >= 0 && (c->given[i / 8] >> (i % 8) & 1)) return true;
    Config d;
    memset(&d, 0, sizeof d);
    const OptDef *o = option_find(name);
    option_set(&d, name, o->def, NULL);
    char a[320], b[320];
    return strcmp(option_format(c, o, a, sizeof a), option_format(&d, o, b, sizeof b)) != 0;
}

/* changed() for a kernel's validate hook. */
static bool changed_cb(const char *name, const void *ctx) { return changed(ctx, name); }

/* "attn=a" or "attn=a or b": the attn values whose kernel
 * forms an explicit score matrix. */
static const char *score_kernels(char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "attn=");
    int n = 0;
    for (int i = 0; i < attn_choice_count() && k < size; i++)
        if (attn_choice(i)->kernel->scores)
            k += (size_t)snprintf(buf + k, size - k, "%s%s", n++ ? " or " : "", attn_choice(i)->name);
    return buf;
}

/* "pos=rope or xpos": the schemes that own option `name`. */
static const char *owners_of(const char *name, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "pos=");
    int n = 0;
    for (int i = 0; i < n_pos_schemes && k < size; i++)
        for (const OptDef *r = pos_schemes[i]->option_rows; r && r->name; r++)
            if (!strcmp(r->name, name)) k += (size_t)snprintf(buf + k, size - k, "%s%s", n++ ? " or " : "", pos_schemes[i]->name);
    return buf;
}

/* The position options: what each scheme needs of the kernel and objective
 * (flags and hooks of layers/attention/positions.h). */
static int validate_positions(Config *c, const AttnKernel *kern, Err *e) {
    ModelConfig *m = &c->model;
    const PosScheme *scheme = pos_scheme(m->pos);
    const char *pos = scheme->name, *attn = attn_choice(m->attn)->name;
    bool clm = m->objective == OBJECTIVE_CLM;
    char scorers[128], owners[128];
    if (scheme->bias && !kern->scores)
        return err_set(e, "--pos %s adds a bias to every score, so it needs an explicit score matrix: %s, not %s", pos,
                       score_kernels(scorers, sizeof scorers), attn),
               err_hint(e, "kernels without a score matrix take --pos rope, sinusoidal or learned");
    /* an option another scheme owns */
    for (int i = 0; i < n_pos_schemes; i++)
        for (const OptDef *r = pos_schemes[i]->option_rows; r && r->name; r++) {
            bool mine = false;
            for (const OptDef *o = scheme->option_rows; o && o->name; o++) mine |= !strcmp(o->name, r->name);
            if (!mine && changed(c, r->name))
                return err_set(e, "--%s applies to %s, not pos=%s", r->name, owners_of(r->name, owners, sizeof owners),
                               pos);
        }
    if (scheme->validate && scheme->validate(m, kern->scores, e) != 0) return -1;
    if ((m->window > 0 || m->bca == ON || m->logn == ON) && !kern->scores)
        return err_set(e, "--%s acts on an explicit score matrix, so it needs %s, not %s",
                       m->window > 0 ? "window" : m->bca == ON ? "bca" : "logn", score_kernels(scorers, sizeof scorers),
                       attn);
    if (!clm && m->bca == ON) return err_set(e, "--bca is a causal mask, and objective=mlm is bidirectional");
    if (m->window > 0 && m->bca == ON)
        return err_set(e, "--window and --bca are two different masks; pick one");
    return 0;
}

int config_validate(Config *c, Err *e) {
    ModelConfig *m = &c->model;
    const AttnChoice *choice = attn_choice(m->attn);
    const AttnKernel *kern = choice->kernel;
    if ((!m->key_size || !m->head_size) && m->d_model % m->heads != 0)
        return err_set(e, "--heads %d does not divide --d_model %d", m->heads, m->d_model),
               err_hint(e, "pick heads dividing d_model, or set --key_size and --head_size");
    /* a preset fixes some of its kernel's options */
    ModelConfig eff = attn_effective(m);
    for (int i = 0; choice->fixes && choice->fixes[i]; i++) {
        const OptDef *o = option_find(choice->fixes[i]);
        Config fixed = *c;
        fixed.model = eff;
        char given[320], wanted[320];
        option_format(c, o, given, sizeof given);
        option_format(&fixed, o, wanted, sizeof wanted);
        if (changed(c, o->name) && strcmp(given, wanted) != 0)
            return err_set(e, "--%s: attn=%s fixes %s=%s", o->name, choice->name, o->name, wanted),
                   err_hint(e, "use --attn %s to vary it", kern->name);
    }
    /* an option another kernel owns */
    for (int i = 0; i < option_count(); i++) {
        const char *name = option_at(i)->name;
        const AttnKernel *owner = attn_option_owner(name);
        if (owner && owner != kern && changed(c, name))
            return err_set(e, "--%s applies to %s, not attn=%s", name, owner->title, choice->name),
                   err_hint(e, "add --attn %s", owner->name);
    }
    /* an option another optimizer owns, and the optimizer's own rules */
    const Optimizer *opt = optimizer_at(c->train.optimizer);
    for (int i = 0; i < option_count(); i++) {
        const char *name = option_at(i)->name;
        const Optimizer *owner = optim_option_owner(name);
        if (owner && owner != opt && changed(c, name))
            return err_set(e, "--%s applies to optimizer=%s, not optimizer=%s", name, owner->name, opt->name),
                   err_hint(e, "add --optimizer %s", owner->name);
    }
    if (opt->validate && opt->validate(optim_options(c->train.optim_options, c->train.optimizer), e) != 0) return -1;
    if (m->objective == OBJECTIVE_MLM) {
        /* samples.txt of an mlm run is a fill-in demo (experiments/training/generate.h):
         * nothing is sampled left to right, so there is no prompt or temperature */
        const char *const *clm_sampling = options_clm_sampling;
        for (int i = 0; clm_sampling[i]; i++)
            if (changed(c, clm_sampling[i]))
                return err_set(e, "--%s: objective=mlm is not sampled left to right (its samples are a fill-in demo)",
                               clm_sampling[i]),
                       err_hint(e, "--sample_length sets how many bytes the demo shows");
    }
    /* samples.txt is drawn as valid UTF-8 (experiments/training/generate.h), from the prompt on */
    if (changed(c, "prompt")) {
        size_t n = strlen(c->sample.prompt), valid = utf8_valid_prefix((const unsigned char *)c->sample.prompt, n);
        if (valid != n)
            return err_set(e, "--prompt: not valid UTF-8 (from byte %zu of %zu)", valid + 1, n),
                   err_hint(e, "samples are valid UTF-8 from the prompt on; ./sample RUN --utf8 off --prompt ... samples raw bytes");
    }
    if (kern->validate && kern->validate(&eff, changed_cb, c, e) != 0) return -1;
    if (kern->bidirectional_only && m->objective == OBJECTIVE_CLM)
        return err_set(e, "attn=%s has no causal form", choice->name), err_hint(e, "add --objective mlm");
    if (validate_positions(c, kern, e) != 0) return -1;
    m->vocab = m->objective == OBJECTIVE_MLM ? VOCAB_BYTES + 1 : VOCAB_BYTES;
    if (c->train.min_lr > c->train.lr)
        return err_set(e, "--min_lr %g is above --lr %g", (double)c->train.min_lr, (double)c->train.lr);
    return 0;
}

bool option_bookkeeping(const OptDef *o) {
    static const char *const names[] = {"threads", "log_every", "save_every", "out", "recompute", NULL};
    if (o->group == GROUP_SAMPLE) return true;
    for (int i = 0; names[i]; i++)
        if (!strcmp(o->name, names[i])) return true;
    return false;
}

void config_run_name(const Config *c, char *buf, size_t size) {
    Config d;
    config_defaults(&d);
    const OptDef *attn = option_find("attn");
    char v[320];
    size_t k = (size_t)snprintf(buf, size, "%s", option_format(c, attn, v, sizeof v));
    for (int i = 0; i < option_count() && k < size; i++) {
        const OptDef *o = option_at(i);
        char w[320];
        if (o == attn || option_bookkeeping(o) || !strcmp(option_format(c, o, v, sizeof v), option_format(&d, o, w, sizeof w)))
            continue;
        char field[400];
        int n = snprintf(field, sizeof field, "_%s-%s", o->name, v);
        /* folder-safe: no separators, spaces or shell-awkward characters */
        for (char *p = field + 1; *p; p++)
            if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '.' || *p == '_')) *p = *p == ',' ? '+' : '_';
        if (k + (size_t)n + 5 >= size || k + (size_t)n > 96) {
            /* too many to name: the config.json beside it has them all */
            k += (size_t)snprintf(buf + k, size - k, "_etc");
            break;
        }
        memcpy(buf + k, field, (size_t)n + 1);
        k += (size_t)n;
    }
}

void options_print_help(FILE *f, int groups) { options_print_help_without(f, groups, NULL); }

void options_print_help_without(FILE *f, int groups, const char *skip) {
    static const char *const titles[] = {[GROUP_MODEL] = "model", [GROUP_TRAIN] = "training",
                                         [GROUP_SAMPLE] = "sampling"};
    for (int g = 0; g < (int)(sizeof titles / sizeof *titles); g++) {
        if (!(groups & (1 << g))) continue;
        fprintf(f, "\n%s options:\n", titles[g]);
        for (int i = 0; i < option_count(); i++) {
            const OptDef *o = option_at(i);
            if ((int)o->group != g || (skip && !strcmp(o->name, skip))) continue;
            char allowed[256] = "";
            if (o->type == OPT_CHOICE || o->type == OPT_BOOL)
                choices_text(o, allowed, sizeof allowed);
            else if (o->type == OPT_INT || o->type == OPT_INT64)
                snprintf(allowed, sizeof allowed, "integer in [%.0f, %.0f]", o->min, o->max);
            else if (o->type == OPT_FLOAT)
                snprintf(allowed, sizeof allowed, "number in [%g, %g]", o->min, o->max);
            else if (o->type == OPT_INTS)
                snprintf(allowed, sizeof allowed, "integers in [%.0f, %.0f], one per layer, the last repeating", o->min,
                         o->max);
            else
                snprintf(allowed, sizeof allowed, "text");
            fprintf(f, "  --%-15s %s (default: %s; %s)\n", o->name, o->help, o->def[0] ? o->def : "\"\"", allowed);
        }
    }
}

cJSON *config_to_json(const Config *c) {
    cJSON *j = cJSON_CreateObject();
    for (int i = 0; i < option_count(); i++) {
        const OptDef *o = option_at(i);
        const char *field = (const char *)c + o->offset;
        char buf[320];
        switch (o->type) {
            case OPT_INT: cJSON_AddNumberToObject(j, o->name, load_int(field)); break;
            case OPT_INT64: cJSON_AddNumberToObject(j, o->name, (double)load_i64(field)); break;
            case OPT_FLOAT:
                /* as the fewest digits that give the float back bit for bit (option_format) */
                cJSON_AddRawToObject(j, o->name, option_format(c, o, buf, sizeof buf));
                break;
            case OPT_INTS: /* one value as a number, as before there were lists */
                option_format(c, o, buf, sizeof buf);
                if (strchr(buf, ','))
                    cJSON_AddStringToObject(j, o->name, buf);
                else
                    cJSON_AddRawToObject(j, o->name, buf);
                break;
            case OPT_BOOL: cJSON_AddBoolToObject(j, o->name, load_bool(field)); break;
            default: cJSON_AddStringToObject(j, o->name, option_format(c, o, buf, sizeof buf)); break;
        }
    }
    return j;
}

int config_from_json(Config *c, const cJSON *json, Err *e) {
    if (!cJSON_IsObject(json)) return err_set(e, "config: not a JSON object");
    for (const cJSON *it = json->child; it; it = it->next) {
        const OptDef *o = option_find(it->string);
        if (!o) return err_set(e, "config: unknown option '%s'", it->string);
        char buf[320];
        /* a value of the option's own JSON type, as config_to_json writes it: "2" or "true" as text is refused */
        bool numeric = o->type == OPT_INT || o->type == OPT_INT64 || o->type == OPT_FLOAT;
        bool boolean_text = cJSON_IsString(it) && (!strcmp(it->valuestring, "true") || !strcmp(it->valuestring, "false"));
        if (cJSON_IsString(it) && (numeric || (o->type == OPT_BOOL && boolean_text)))
            return err_set(e, "config: option '%s' is the text \"%.40s\", not a JSON %s", it->string, it->valuestring,
                           numeric ? "number" : "bool");
        if (cJSON_IsString(it) || cJSON_IsRaw(it)) /* raw: a float as config_to_json wrote it */
            snprintf(buf, sizeof buf, "%s", it->valuestring);
        else if (cJSON_IsBool(it))
            snprintf(buf, sizeof buf, "%s", cJSON_IsTrue(it) ? "true" : "false");
        else if (cJSON_IsNumber(it))
            snprintf(buf, sizeof buf, "%.17g", it->valuedouble);
        else
            return err_set(e, "config: option '%s' has a value of the wrong kind", it->string);
        if (option_set(c, it->string, buf, e) != 0) return -1;
    }
    return 0;
}
