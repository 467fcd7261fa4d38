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
    arrput(p->offset, -1);
    arrput(p->after, -1);
    p->total += t->n;
    return t;
}

Tensor *params_add_after(ParamSet *p, const Tensor *prev, const char *name, int ndim, const int *shape) {
    int k = params_count(p) - 1;
    while (k >= 0 && p->list[k] != prev) k--;
    if (k < 0) DIE("params_add_after(%s): the previous parameter is not in this set", name);
    for (int i = 0; i < params_count(p); i++)
        if (p->after[i] == k) DIE("params_add_after(%s): %s is already followed by %s", name, prev->name, p->list[i]->name);
    Tensor *t = params_add(p, name, ndim, shape);
    p->after[params_count(p) - 1] = k;
    return t;
}

/* Places parameter i and then, in turn, the chain that follows it. */
static void place(ParamSet *p, int i, long *at) {
    for (int next = i; next >= 0;) {
        p->offset[next] = *at;
        *at += p->list[next]->n;
        int k = next;
        next = -1;
        for (int j = k + 1; j < params_count(p); j++)
            if (p->after[j] == k) next = j;
    }
}

void params_alloc(ParamSet *p) {
    if (p->value) DIE("params_alloc: already allocated");
    long at = 0;
    for (int i = 0; i < params_count(p); i++)
        if (p->after[i] < 0) place(p, i, &at);
    p->value = xcalloc((size_t)p->total, sizeof(float));
    p->grad = xcalloc((size_t)p->total, sizeof(float));
    for (int k = 0; k < PARAMS_STATE_SLABS; k++) p->state[k] = xcalloc((size_t)p->total, sizeof(float));
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
    arrfree(p->after);
    free(p->value);
    free(p->grad);
    for (int k = 0; k < PARAMS_STATE_SLABS; k++) free(p->state[k]);
    memset(p, 0, sizeof *p);
}
