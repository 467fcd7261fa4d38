#include "checkpoint.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The index of the first value of x[0, n) that is not finite (or, when
 * nonneg, negative), or -1. */
static long first_bad(const float *x, long n, bool nonneg) {
    for (long i = 0; i < n; i++)
        if (!isfinite(x[i]) || (nonneg && x[i] < 0.0f)) return i;
    return -1;
}

int checkpoint_check_finite(const Model *m, Err *e) {
    const ParamSet *p = &m->params;
    for (int i = 0; i < params_count(p); i++) {
        const Tensor *w = p->list[i];
        static const char *const what[3] = {"", "its AdamW moment m: ", "its AdamW moment v: "};
        const float *slab[3] = {p->value, p->m, p->v};
        for (int k = 0; k < 3; k++) {
            long at = first_bad(slab[k] + p->offset[i], w->n, false);
            if (at >= 0)
                return err_set(e, "parameter '%s': %svalue %ld is %g", w->name, what[k], at,
                               (double)slab[k][p->offset[i] + at]);
        }
    }
    return 0;
}

int checkpoint_save(const char *path, const Model *m, const Config *c, long step, const Rng *data_rng,
                    const char *corpus, double best_val_bpb, int ranks, Err *e) {
    Err why;
    if (checkpoint_check_finite(m, &why) != 0) return err_set(e, "%s: not saved: %s", path, why.msg);
    const ParamSet *p = &m->params;
    int n = params_count(p);
    StTensor *t = xmalloc((size_t)3 * n * sizeof *t);
    char **names = xmalloc((size_t)2 * n * sizeof *names);
    for (int i = 0; i < n; i++) {
        const Tensor *w = p->list[i];
        size_t len = strlen(w->name) + 16;
        names[2 * i] = xmalloc(len);
        names[2 * i + 1] = xmalloc(len);
        snprintf(names[2 * i], len, "optim.m.%s", w->name);
        snprintf(names[2 * i + 1], len, "optim.v.%s", w->name);
        t[i] = (StTensor){w->name, w->ndim, w->shape, w->data};
        t[n + i] = (StTensor){names[2 * i], w->ndim, w->shape, p->m + p->offset[i]};
        t[2 * n + i] = (StTensor){names[2 * i + 1], w->ndim, w->shape, p->v + p->offset[i]};
    }
    cJSON *json = config_to_json(c);
    char *config = cJSON_PrintUnformatted(json);
    cJSON_Delete(json);
    char step_s[32], rng_s[80], best_s[32] = "", ranks_s[16];
    snprintf(ranks_s, sizeof ranks_s, "%d", ranks);
    snprintf(step_s, sizeof step_s, "%ld", step);
    if (isfinite(best_val_bpb)) snprintf(best_s, sizeof best_s, "%.17g", best_val_bpb);
    snprintf(rng_s, sizeof rng_s, "%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64, data_rng->s[0],
             data_rng->s[1], data_rng->s[2], data_rng->s[3]);
    StMeta meta[] = {
        {"format", CHECKPOINT_FORMAT}, {"format_version", CHECKPOINT_VERSION}, {"config", config},
        {"step", step_s},              {"data_rng", rng_s},                     {"corpus", corpus ? corpus : ""},
        {"best_val_bpb", best_s},       {"ranks", ranks_s},
    };
    /* one process's checkpoint has no "ranks", as before data parallelism */
    int n_meta = (int)(sizeof meta / sizeof meta[0]) - (ranks > 1 ? 0 : 1);
    int rc = st_save(path, t, 3 * n, meta, n_meta, e);
    free(config);
    for (int i = 0; i < 2 * n; i++) free(names[i]);
    free(names);
    free(t);
    return rc;
}

/* "%016x %016x %016x %016x", as checkpoint_save writes it, and nothing else. */
static int parse_rng(const char *text, Rng *r) {
    const char *c = text;
    for (int k = 0; k < 4; k++) {
        uint64_t v = 0;
        for (int i = 0; i < 16; i++, c++) {
            int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
            if (d < 0) return -1;
            v = v << 4 | (uint64_t)d;
        }
        r->s[k] = v;
        if (*c != (k < 3 ? ' ' : '\0')) return -1;
        c++;
    }
    return 0;
}

int checkpoint_open(StFile *st, const char *path, CheckpointInfo *info, Err *e) {
    if (st_open(st, path, e) != 0) return -1;
    memset(info, 0, sizeof *info);
    const char *format = st_meta(st, "format"), *version = st_meta(st, "format_version");
    const char *config = st_meta(st, "config"), *step = st_meta(st, "step"), *rng = st_meta(st, "data_rng");
    const char *corpus = st_meta(st, "corpus");
    Err sub;
    if (!format || strcmp(format, CHECKPOINT_FORMAT) != 0) {
        err_set(e, "%s: not an attnlab checkpoint (metadata 'format' is %s)", path, format ? format : "missing");
        goto fail;
    }
    if (!version || strcmp(version, CHECKPOINT_VERSION) != 0) {
        err_set(e, "%s: checkpoint format version %s; this build reads version %s", path, version ? version : "missing",
                CHECKPOINT_VERSION);
        goto fail;
    }
    cJSON *json = config ? cJSON_Parse(config) : NULL;
    config_defaults(&info->cfg);
    int rc = json ? config_from_json(&info->cfg, json, &sub) : err_set(&sub, "missing or not JSON");
    cJSON_Delete(json);
    if (rc != 0 || config_validate(&info->cfg, &sub) != 0) {
        err_set(e, "%s: bad config in checkpoint: %s", path, sub.msg);
        goto fail;
    }
    char *end;
    info->step = step ? strtol(step, &end, 10) : -1;
    if (!step || *end || info->step < 0) {
        err_set(e, "%s: bad or missing 'step' in metadata", path);
        goto fail;
    }
    if (!rng || parse_rng(rng, &info->data_rng) != 0) {
        err_set(e, "%s: bad or missing 'data_rng' in metadata (four words of 16 lowercase hex digits)", path);
        goto fail;
    }
    if (!rng_state_valid(&info->data_rng)) {
        err_set(e, "%s: 'data_rng' in metadata is all zero, a state the generator cannot have", path);
        goto fail;
    }
    info->best_val_bpb = NAN;
    const char *best = st_meta(st, "best_val_bpb");
    if (best && best[0]) {
        info->best_val_bpb = strtod(best, &end);
        if (*end || !isfinite(info->best_val_bpb) || info->best_val_bpb < 0) {
            err_set(e, "%s: bad 'best_val_bpb' in metadata ('%s')", path, best);
            goto fail;
        }
    }
    info->ranks = 1;
    const char *ranks = st_meta(st, "ranks");
    if (ranks) {
        long r = strtol(ranks, &end, 10);
        if (!ranks[0] || *end || r < 1 || r > 1 << 20) {
            err_set(e, "%s: bad 'ranks' in metadata ('%s')", path, ranks);
            goto fail;
        }
        info->ranks = (int)r;
    }
    snprintf(info->corpus, sizeof info->corpus, "%s", corpus ? corpus : "");
    info->has_optim = st->n_entries > 0 && st_find(st, "optim.m.tok_emb.weight") != NULL;
    return 0;
fail:
    st_close(st);
    return -1;
}

/* Reads one tensor and refuses a value that is not finite (or a negative
 * one, for AdamW's second moment). */
static int read_checked(StFile *st, const char *name, const Tensor *w, float *dst, bool nonneg, Err *e) {
    if (st_read_expect(st, name, w->ndim, w->shape, dst, e) != 0) return -1;
    long at = first_bad(dst, w->n, nonneg);
    if (at >= 0) return err_set(e, "%s: tensor '%s': value %ld is %g", st->path, name, at, (double)dst[at]);
    return 0;
}

/* Whether entry name is one of the model's tensors, or AdamW's moment of one. */
static bool model_tensor(const ParamSet *p, const char *name) {
    if (!strncmp(name, "optim.m.", 8) || !strncmp(name, "optim.v.", 8)) name += 8;
    return params_find(p, name) != NULL;
}

int checkpoint_load(StFile *st, Model *m, bool with_optim, Err *e) {
    ParamSet *p = &m->params;
    for (int i = 0; i < params_count(p); i++) {
        Tensor *w = p->list[i];
        if (read_checked(st, w->name, w, w->data, false, e) != 0) return -1;
        if (!with_optim) continue;
        char name[160];
        snprintf(name, sizeof name, "optim.m.%s", w->name);
        if (read_checked(st, name, w, p->m + p->offset[i], false, e) != 0) return -1;
        snprintf(name, sizeof name, "optim.v.%s", w->name);
        if (read_checked(st, name, w, p->v + p->offset[i], true, e) != 0) return -1;
    }
    /* and nothing else: a checkpoint holds exactly its model's tensors (and their moments) */
    for (int i = 0; i < st->n_entries; i++)
        if (!model_tensor(p, st->entries[i].name))
            return err_set(e, "%s: tensor '%s' is not one of the model's (a checkpoint holds exactly its model's "
                              "tensors)", st->path, st->entries[i].name);
    return 0;
}
