#include "params.h"

#include <stb_ds.h>
#include <string.h>

#include "util.h"

void params_init(ParamSet *p) { memset(p, 0, sizeof *p); }

Tensor *params_add(ParamSet *p, const char *name, int ndim, const int *shape) {
    if (p->value) DIE("params_add(%s): the slabs are already allocated", name);
    if (params_find(p, name)) DIE("params_add: duplicate parameter name %s", name);
    Tensor *t = xmalloc(sizeof *t);
    tensor_wrap(t, NULL, ndim, shape);
    t->name = xstrdup(name);
    t->requires_grad = true;
    arrput(p->list, t);
    arrput(p->offset, p->total);
    p->total += t->n;
    return t;
}

void params_alloc(ParamSet *p) {
    if (p->value) DIE("params_alloc: already allocated");
    p->value = xcalloc((size_t)p->total, sizeof(float));
    p->grad = xcalloc((size_t)p->total, sizeof(float));
    p->m = xcalloc((size_t)p->total, sizeof(float));
    p->v = xcalloc((size_t)p->total, sizeof(float));
    for (int i = 0; i < params_count(p); i++) {
        p->list[i]->data = p->value + p->offset[i];
        p->list[i]->grad = p->grad + p->offset[i];
    }
}

void params_zero_grad(ParamSet *p) { memset(p->grad, 0, (size_t)p->total * sizeof(float)); }

Tensor *params_find(const ParamSet *p, const char *name) {
    for (int i = 0; i < params_count(p); i++)
        if (strcmp(p->list[i]->name, name) == 0) return p->list[i];
    return NULL;
}

int params_count(const ParamSet *p) { return (int)arrlen(p->list); }

void params_free(ParamSet *p) {
    for (int i = 0; i < params_count(p); i++) {
        free((char *)p->list[i]->name);
        free(p->list[i]);
    }
    arrfree(p->list);
    arrfree(p->offset);
    free(p->value);
    free(p->grad);
    free(p->m);
    free(p->v);
    memset(p, 0, sizeof *p);
}
