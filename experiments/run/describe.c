/* describe.c: the C side's tables in one machine-readable form, for
 * `./train --describe` (and so python/attnlab_tables.json, which make writes
 * from it and python/attnlab_tables.py reads): the option table, the
 * attention kernels with their options, presets and capabilities, the
 * position schemes with their hooks, and the optimizers with their state. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/kernels.h"
#include "attention/positions.h"
#include "options.h"

static const char *const type_names[] = {"int", "float", "choice", "bool", "string", "ints", "int64"};
static const char *const group_names[] = {"model", "train", "sample"};

/* A JSON array of the names of rows (NULL-terminated by name). */
static cJSON *row_names(const OptDef *rows) {
    cJSON *a = cJSON_CreateArray();
    for (const OptDef *r = rows; r && r->name; r++) cJSON_AddItemToArray(a, cJSON_CreateString(r->name));
    return a;
}

/* A JSON array of a NULL-terminated list of names. */
static cJSON *names_of(const char *const *names) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; names[i]; i++) cJSON_AddItemToArray(a, cJSON_CreateString(names[i]));
    return a;
}

/* A row of the table as its option's default value in the config c (the
 * defaults) gives it: a number, a bool or text. */
static cJSON *row_value(const Config *c, const OptDef *o) {
    char buf[320];
    option_format(c, o, buf, sizeof buf);
    switch (o->type) {
        case OPT_INT:
        case OPT_INT64:
        case OPT_FLOAT:
        case OPT_INTS: return strchr(buf, ',') ? cJSON_CreateString(buf) : cJSON_CreateRaw(buf); /* as option_format writes it: exact */
        case OPT_BOOL: return cJSON_CreateBool(!strcmp(buf, "true"));
        default: return cJSON_CreateString(buf);
    }
}

static cJSON *describe_options(const Config *defaults) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < option_count(); i++) {
        const OptDef *o = option_at(i);
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "name", o->name);
        cJSON_AddStringToObject(r, "type", type_names[o->type]);
        cJSON_AddStringToObject(r, "group", group_names[o->group]);
        cJSON_AddItemToObject(r, "default", row_value(defaults, o));
        if (o->type == OPT_INT || o->type == OPT_INT64 || o->type == OPT_FLOAT || o->type == OPT_INTS) {
            /* written so that they read back exactly (cJSON's numbers keep 15 digits) */
            char lo[40], hi[40];
            snprintf(lo, sizeof lo, "%.17g", o->min);
            snprintf(hi, sizeof hi, "%.17g", o->max);
            cJSON_AddRawToObject(r, "min", lo);
            cJSON_AddRawToObject(r, "max", hi);
        }
        if (o->type == OPT_INTS || o->type == OPT_STRING) cJSON_AddNumberToObject(r, "size", (double)o->size);
        if (o->type == OPT_CHOICE || o->type == OPT_BOOL) {
            const char *const *ch = o->choices ? o->choices : o->choices_of();
            cJSON *v = cJSON_CreateArray();
            for (int k = 0; ch[k]; k++) cJSON_AddItemToArray(v, cJSON_CreateString(ch[k]));
            cJSON_AddItemToObject(r, "choices", v);
        }
        cJSON_AddStringToObject(r, "help", o->help ? o->help : "");
        cJSON_AddItemToArray(a, r);
    }
    return a;
}

static cJSON *describe_kernels(const Config *defaults) {
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < attn_kernel_count(); k++) {
        const AttnKernel *kern = attn_kernels[k];
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "name", kern->name);
        cJSON_AddStringToObject(r, "title", kern->title ? kern->title : kern->name);
        cJSON_AddItemToObject(r, "options", row_names(kern->option_rows));
        cJSON_AddBoolToObject(r, "scores", kern->scores);
        cJSON_AddBoolToObject(r, "rope_inside", kern->rope_inside);
        cJSON_AddBoolToObject(r, "bidirectional_only", kern->bidirectional_only);
        cJSON_AddBoolToObject(r, "projected_probs", kern->projected_probs);
        /* each preset: the values it fixes, as the defaults with it applied give them */
        cJSON *presets = cJSON_CreateArray();
        for (const AttnPreset *p = kern->presets; p && p->name; p++) {
            Config c = *defaults;
            c.model.attn = attn_find(p->name);
            c.model = attn_effective(&c.model);
            cJSON *one = cJSON_CreateObject(), *fixes = cJSON_CreateObject();
            cJSON_AddStringToObject(one, "name", p->name);
            for (int i = 0; p->fixes && p->fixes[i]; i++)
                cJSON_AddItemToObject(fixes, p->fixes[i], row_value(&c, option_find(p->fixes[i])));
            cJSON_AddItemToObject(one, "fixes", fixes);
            cJSON_AddItemToArray(presets, one);
        }
        cJSON_AddItemToObject(r, "presets", presets);
        cJSON_AddItemToArray(a, r);
    }
    return a;
}

static cJSON *describe_positions(void) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n_pos_schemes; i++) {
        const PosScheme *s = pos_schemes[i];
        cJSON *r = cJSON_CreateObject(), *params = cJSON_CreateArray();
        cJSON_AddStringToObject(r, "name", s->name);
        cJSON_AddBoolToObject(r, "table", s->table);
        cJSON_AddBoolToObject(r, "embed", s->embed != NULL);
        cJSON_AddBoolToObject(r, "rotary", s->rotary);
        cJSON_AddBoolToObject(r, "decay", s->decay != NULL);
        cJSON_AddBoolToObject(r, "bias", s->bias != NULL);
        for (int k = 0; k < pos_param_count(i); k++) cJSON_AddItemToArray(params, cJSON_CreateString(s->params[k]));
        cJSON_AddItemToObject(r, "params", params);
        cJSON_AddBoolToObject(r, "bounded", s->bounded);
        cJSON_AddItemToObject(r, "options", row_names(s->option_rows));
        cJSON_AddItemToArray(a, r);
    }
    return a;
}

static cJSON *describe_optimizers(void) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n_optimizers; i++) {
        const Optimizer *o = optimizers[i];
        cJSON *r = cJSON_CreateObject(), *state = cJSON_CreateArray(), *nonneg = cJSON_CreateArray();
        cJSON_AddStringToObject(r, "name", o->name);
        for (int k = 0; k < o->n_state; k++) {
            cJSON_AddItemToArray(state, cJSON_CreateString(o->state_names[k]));
            cJSON_AddItemToArray(nonneg, cJSON_CreateBool(o->state_nonneg[k]));
        }
        cJSON_AddItemToObject(r, "state", state);
        cJSON_AddItemToObject(r, "state_nonneg", nonneg);
        cJSON_AddItemToObject(r, "options", row_names(o->option_rows));
        cJSON_AddItemToArray(a, r);
    }
    return a;
}

int options_describe(FILE *f) {
    Config defaults;
    config_defaults(&defaults);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "attnlab-tables");
    cJSON_AddNumberToObject(j, "version", 1);
    cJSON_AddItemToObject(j, "options", describe_options(&defaults));
    cJSON_AddItemToObject(j, "kernels", describe_kernels(&defaults));
    cJSON_AddItemToObject(j, "positions", describe_positions());
    cJSON_AddItemToObject(j, "optimizers", describe_optimizers());
    cJSON_AddItemToObject(j, "clm_sampling", names_of(options_clm_sampling));
    cJSON_AddItemToObject(j, "inference", names_of(options_inference));
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    int rc = fprintf(f, "%s\n", text) < 0 ? -1 : 0;
    free(text);
    return rc;
}
