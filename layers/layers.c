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

void linear_declare_after(Linear *l, const Linear *prev, ParamSet *p, const char *name, int in, int out, bool bias) {
    char buf[128];
    if (!prev->b != !bias) DIE("linear_declare_after(%s): the chain must agree on bias", name);
    l->w = params_add_after(p, prev->w, param_name(buf, name, "weight"), 2, (int[]){out, in});
    l->b = bias ? params_add_after(p, prev->b, param_name(buf, name, "bias"), 1, (int[]){out}) : NULL;
}

Tensor *linear_forward(const Linear *l, Tensor *x) { return op_linear(x, l->w, l->b); }

/* A header over n adjacent parameters as one tensor of `rows` rows, in the
 * arena (the tape keeps it until backward); its gradient is theirs. */
static Tensor *block_of(Tensor *const *t, int n, int rows) {
    long total = 0;
    for (int i = 0; i < n; i++) {
        if (t[i]->data != t[0]->data + total || t[i]->grad != t[0]->grad + total || !t[i]->requires_grad != !t[0]->requires_grad)
            DIE("linear_fused: %s does not follow %s in the slabs", t[i]->name, t[0]->name);
        total += t[i]->n;
    }
    Tensor *b = arena_alloc(engine_arena(), sizeof *b);
    int shape[2] = {rows, (int)(total / rows)};
    tensor_wrap(b, t[0]->data, t[0]->ndim, shape);
    b->grad = t[0]->grad;
    b->requires_grad = t[0]->requires_grad;
    return b;
}

Tensor *linear_fused(const Linear *const *l, int n, Tensor *x) {
    Tensor *w[8], *b[8];
    if (n < 1 || n > 8) DIE("linear_fused: %d linears", n);
    int rows = 0;
    for (int i = 0; i < n; i++) {
        w[i] = l[i]->w, b[i] = l[i]->b;
        rows += l[i]->w->shape[0];
        if (!l[i]->b != !l[0]->b) DIE("linear_fused: the linears must agree on bias");
    }
    return op_linear(x, block_of(w, n, rows), l[0]->b ? block_of(b, n, rows) : NULL);
}

void norm_declare(Norm *n, ParamSet *p, const char *name, int kind, int d) {
    char buf[128];
    n->kind = kind;
    n->w = params_add(p, param_name(buf, name, "weight"), 1, (int[]){d});
    n->b = kind == NORM_LAYERNORM ? params_add(p, param_name(buf, name, "bias"), 1, (int[]){d}) : NULL;
}

#define NORM_EPS 1e-5f

unsigned bf16_store = BF16_STORE_ALL;

Tensor *norm_forward(const Norm *n, Tensor *x) { return norm_forward_to(n, x, DTYPE_F32); }

Tensor *norm_forward_to(const Norm *n, Tensor *x, DType out) {
    return n->kind == NORM_LAYERNORM ? op_layernorm_to(x, n->w, n->b, NORM_EPS, out)
                                     : op_rmsnorm_to(x, n->w, NORM_EPS, out);
}

Tensor *norm_add_forward(const Norm *n, Tensor *x, Tensor *y, Tensor **sum) {
    return norm_add_forward_to(n, x, y, sum, DTYPE_F32);
}

Tensor *norm_add_forward_to(const Norm *n, Tensor *x, Tensor *y, Tensor **sum, DType out) {
    return n->kind == NORM_LAYERNORM ? op_add_layernorm_to(x, y, n->w, n->b, NORM_EPS, sum, out)
                                     : op_add_rmsnorm_to(x, y, n->w, NORM_EPS, sum, out);
}

void mlp_declare(Mlp *m, ParamSet *p, const char *name, int d, int hidden) {
    char buf[128];
    linear_declare(&m->fc, p, param_name(buf, name, "fc"), d, hidden, true);
    linear_declare(&m->proj, p, param_name(buf, name, "proj"), hidden, d, true);
}

Tensor *mlp_forward(const Mlp *m, Tensor *x) { return op_mlp(x, m->fc.w, m->fc.b, m->proj.w, m->proj.b); }
