#include "checkpoint.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int checkpoint_save(const char *path, const Model *m, const Config *c, long step, const Rng *data_rng,
                    const char *corpus, Err *e) {
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
    char step_s[32], rng_s[80];
    snprintf(step_s, sizeof step_s, "%ld", step);
    snprintf(rng_s, sizeof rng_s, "%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64, data_rng->s[0],
             data_rng->s[1], data_rng->s[2], data_rng->s[3]);
    StMeta meta[] = {
        {"format", CHECKPOINT_FORMAT}, {"format_version", CHECKPOINT_VERSION}, {"config", config},
        {"step", step_s},              {"data_rng", rng_s},                     {"corpus", corpus ? corpus : ""},
    };
    int rc = st_save(path, t, 3 * n, meta, (int)(sizeof meta / sizeof meta[0]), e);
    free(config);
    for (int i = 0; i < 2 * n; i++) free(names[i]);
    free(names);
    free(t);
    return rc;
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
    if (!rng || sscanf(rng, "%" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64, &info->data_rng.s[0], &info->data_rng.s[1],
                       &info->data_rng.s[2], &info->data_rng.s[3]) != 4) {
        err_set(e, "%s: bad or missing 'data_rng' in metadata", path);
        goto fail;
    }
    snprintf(info->corpus, sizeof info->corpus, "%s", corpus ? corpus : "");
    info->has_optim = st->n_entries > 0 && st_find(st, "optim.m.tok_emb.weight") != NULL;
    return 0;
fail:
    st_close(st);
    return -1;
}

int checkpoint_load(StFile *st, Model *m, bool with_optim, Err *e) {
    ParamSet *p = &m->params;
    for (int i = 0; i < params_count(p); i++) {
        Tensor *w = p->list[i];
        if (st_read_expect(st, w->name, w->ndim, w->shape, w->data, e) != 0) return -1;
        if (!with_optim) continue;
        char name[160];
        snprintf(name, sizeof name, "optim.m.%s", w->name);
        if (st_read_expect(st, name, w->ndim, w->shape, p->m + p->offset[i], e) != 0) return -1;
        snprintf(name, sizeof name, "optim.v.%s", w->name);
        if (st_read_expect(st, name, w->ndim, w->shape, p->v + p->offset[i], e) != 0) return -1;
    }
    return 0;
}
