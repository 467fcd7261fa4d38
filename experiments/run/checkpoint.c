#include "checkpoint.h"

#include <ctype.h>
#include <errno.h>
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
        /* the values, then every state slab (those an optimizer does not use stay 0) */
        for (int k = -1; k < PARAMS_STATE_SLABS; k++) {
            const float *slab = k < 0 ? p->value : p->state[k];
            long at = first_bad(slab + p->offset[i], w->n, false);
            if (at >= 0)
                return err_set(e, "parameter '%s': %svalue %ld is %g", w->name,
                               k < 0 ? "" : k == 0 ? "its optimizer state 1: " : "its optimizer state 2: ", at,
                               (double)slab[p->offset[i] + at]);
        }
    }
    return 0;
}

int checkpoint_save(const char *path, const Model *m, const Config *c, long step, const Rng *data_rng,
                    const char *corpus, double best_val_bpb, int ranks, Err *e) {
    Err why;
    if (checkpoint_check_finite(m, &why) != 0) return err_set(e, "%s: not saved: %s", path, why.msg);
    const ParamSet *p = &m->params;
    const Optimizer *opt = optimizer_at(c->train.optimizer);
    int n = params_count(p), ns = opt->n_state;
    /* the parameters, then each state slab under its optimizer's name */
    StTensor *t = xmalloc((size_t)(1 + ns) * n * sizeof *t);
    char **names = xmalloc((size_t)(ns ? ns : 1) * n * sizeof *names);
    for (int i = 0; i < n; i++) {
        const Tensor *w = p->list[i];
        t[i] = (StTensor){w->name, w->ndim, w->shape, w->data};
        for (int k = 0; k < ns; k++) {
            size_t len = strlen(opt->state_names[k]) + strlen(w->name) + 1;
            char *name = names[k * n + i] = xmalloc(len);
            snprintf(name, len, "%s%s", opt->state_names[k], w->name);
            t[(1 + k) * n + i] = (StTensor){name, w->ndim, w->shape, p->state[k] + p->offset[i]};
        }
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
    int rc = st_save(path, t, (1 + ns) * n, meta, n_meta, e);
    free(config);
    for (int i = 0; i < ns * n; i++) free(names[i]);
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
    /* digits with an optional sign, as python/attnlab_torch.py takes them: no
     * leading space, and no value strtol saturates (ERANGE) */
    errno = 0;
    info->step = step && (isdigit((unsigned char)step[0]) || ((step[0] == '+' || step[0] == '-') &&
                                                               isdigit((unsigned char)step[1])))
                     ? strtol(step, &end, 10)
                     : -1;
    if (info->step < 0 || errno == ERANGE || *end) {
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
    /* the state of the config's optimizer (the first slab of the first parameter) */
    const Optimizer *opt = optimizer_at(info->cfg.train.optimizer);
    char first[160];
    snprintf(first, sizeof first, "%stok_emb.weight", opt->n_state ? opt->state_names[0] : "");
    info->has_optim = st->n_entries > 0 && (!opt->n_state || st_find(st, first) != NULL);
    return 0;
fail:
    st_close(st);
    return -1;
}

/* Reads one tensor and refuses a value that is not finite (or, when nonneg,
 * a negative one: AdamW's second moment). */
static int read_checked(StFile *st, const char *name, const Tensor *w, float *dst, bool nonneg, Err *e) {
    if (st_read_expect(st, name, w->ndim, w->shape, dst, e) != 0) return -1;
    long at = first_bad(dst, w->n, nonneg);
    if (at >= 0) return err_set(e, "%s: tensor '%s': value %ld is %g", st->path, name, at, (double)dst[at]);
    return 0;
}

/* Whether entry name is one of the model's tensors, or optimizer opt's state of one. */
static bool model_tensor(const ParamSet *p, const Optimizer *opt, const char *name) {
    for (int k = 0; k < opt->n_state; k++) {
        size_t len = strlen(opt->state_names[k]);
        if (!strncmp(name, opt->state_names[k], len)) {
            name += len;
            break;
        }
    }
    return params_find(p, name) != NULL;
}

int checkpoint_load(StFile *st, Model *m, const Optimizer *opt, bool with_optim, Err *e) {
    ParamSet *p = &m->params;
    for (int i = 0; i < params_count(p); i++) {
        Tensor *w = p->list[i];
        if (read_checked(st, w->name, w, w->data, false, e) != 0) return -1;
        if (!with_optim) continue;
        for (int k = 0; k < opt->n_state; k++) {
            char name[160];
            snprintf(name, sizeof name, "%s%s", opt->state_names[k], w->name);
            if (read_checked(st, name, w, p->state[k] + p->offset[i], opt->state_nonneg[k], e) != 0) return -1;
        }
    }
    /* AdamW's moments: all of them with their tensors' shapes, or none, even
     * when they are not read (inference), as python/attnlab_torch.py requires */
    bool optim = st_find(st, "optim.m.tok_emb.weight") != NULL;
    for (int i = 0; i < params_count(p); i++) {
        const Tensor *w = p->list[i];
        for (int k = 0; k < 2; k++) {
            char name[160];
            snprintf(name, sizeof name, "optim.%c.%s", "mv"[k], w->name);
            const StEntry *en = st_find(st, name);
            if (optim && !en)
                return err_set(e, "%s: tensor '%s' not found (the file holds the optimizer's state of some tensors only)",
                               st->path, name);
            bool same = en && en->ndim == w->ndim;
            for (int d = 0; same && d < w->ndim; d++) same = en->shape[d] == w->shape[d];
            if (en && !same) {
                char got[ST_MAX_DIMS * 24 + 1] = "", want[TENSOR_MAX_DIMS * 24 + 1] = "";
                for (int d = 0, a = 0, b = 0; d < en->ndim || d < w->ndim; d++) { /* 24 bytes a number at most */
                    if (d < en->ndim) a += snprintf(got + a, sizeof got - (size_t)a, "%s%lld", d ? ", " : "", en->shape[d]);
                    if (d < w->ndim) b += snprintf(want + b, sizeof want - (size_t)b, "%s%d", d ? ", " : "", w->shape[d]);
                }
                return err_set(e, "%s: tensor '%s': shape [%s] in file, expected [%s]", st->path, name, got, want);
            }
        }
    }
    /* and nothing else: a checkpoint holds exactly its model's tensors (and their moments) */
    for (int i = 0; i < st->n_entries; i++)
        if (!model_tensor(p, opt, st->entries[i].name))
            return err_set(e, "%s: tensor '%s' is not one of the model's (a checkpoint holds exactly its model's "
                              "tensors)", st->path, st->entries[i].name);
    return 0;
}
