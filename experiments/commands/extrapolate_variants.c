/* extrapolate_variants.c: ./extrapolate's variants: CHECKPOINT@key=v,...,
 * the inference-time overrides and the options that may not change, --lengths,
 * and the groups of seeds (extrapolate.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extrapolate.h"
#include "run.h"

/* The model options that may change at evaluation: they change what a query
 * sees or how its logits are scaled, not the parameters. */
static const char *const *const inference_keys = options_inference; /* MAX_OVERRIDES of them */

bool xp_ends_with(const char *s, const char *suffix) {
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
int xp_parse_variant(Variant *v, const char *spec, Err *e) {
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
bool xp_looks_like_checkpoint(const char *a) {
    if (is_directory(a) || xp_ends_with(a, ".safetensors")) return true;
    const char *at = strrchr(a, '@');
    if (!at || file_exists(a)) return false;
    if (strchr(at, '=')) return true;
    char base[1100];
    snprintf(base, sizeof base, "%.*s", (int)(at - a), a);
    return is_directory(base) || xp_ends_with(base, ".safetensors");
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* "256,512,1024": sorted, each in [2, 2^20], no repeats. */
int xp_parse_lengths(const char *s, int *out, int *n, Err *e) {
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

int xp_set_option(const OptDef *o, const char *value, void *ctx) {
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
int xp_make_groups(Variant *vs, int nv, int *runs, char (*keys)[1200]) {
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
