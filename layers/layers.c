/* layers.c: linear, norm and MLP. */
#include "layers.h"

#include <stdio.h>

#include "ops.h"
#include "util.h"

const char *param_name(char *buf, const char *prefix, const char *suffix) {
    int n = snprintf(buf, 128, "%s.%s", prefix, suffix);
    if (n < 0 || n >= 128) DIE("parameter name too long: %s.%s", prefix, suffix);
    return buf;
}

void linear_declare(Linear *l, ParamSet *p, const char *name, int in, int out, bool bias) {
    char buf[128];
    l->w = params_add(p, param_name(buf, name, "weight"), 2, (int[]){out, in});
    l->b = bias ? params_add(p, param_name(buf, name, "bias"), 1, (int[]){out}) : NULL;
}

Tensor *linear_forward(const Linear *l, Tensor *x) { return op_linear(x, l->w, l->b); }

void norm_declare(Norm *n, ParamSet *p, const char *name, int kind, int d) {
    char buf[128];
    n->kind = kind;
    n->w = params_add(p, param_name(buf, name, "weight"), 1, (int[]){d});
    n->b = kind == NORM_LAYERNORM ? params_add(p, param_name(buf, name, "bias"), 1, (int[]){d}) : NULL;
}

#define NORM_EPS 1e-5f

Tensor *norm_forward(const Norm *n, Tensor *x) {
    return n->kind == NORM_LAYERNORM ? op_layernorm(x, n->w, n->b, NORM_EPS) : op_rmsnorm(x, n->w, NORM_EPS);
}

void mlp_declare(Mlp *m, ParamSet *p, const char *name, int d, int hidden) {
    char buf[128];
    linear_declare(&m->fc, p, param_name(buf, name, "fc"), d, hidden, true);
    linear_declare(&m->proj, p, param_name(buf, name, "proj"), hidden, d, true);
}

Tensor *mlp_forward(const Mlp *m, Tensor *x) { return linear_forward(&m->proj, op_gelu(linear_forward(&m->fc, x))); }
