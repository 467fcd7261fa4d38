#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_cases.h"
#include "util.h"

static void (*real_backward[OP_COUNT])(Node *);

static void scaled_backward(Node *n) {
    Tensor *out = n->out;
    for (long i = 0; i < out->n; i++) out->grad[i] *= 1.1f;
    real_backward[op_id(n)](n);
    for (long i = 0; i < out->n; i++) out->grad[i] /= 1.1f;
}

static void dropped_backward(Node *n) { (void)n; }

void mutation_install(int op, Mutation m) {
    real_backward[op] = op_defs[op].backward;
    op_defs[op].backward = m == MUTATION_SCALE ? scaled_backward : dropped_backward;
}

void mutation_remove(int op) { op_defs[op].backward = real_backward[op]; }

const char *mutation_name(Mutation m) { return m == MUTATION_SCALE ? "10%-scaled" : "missing"; }

static void (*kernel_real_backward)(Node *);

static void kernel_scaled_backward(Node *n) {
    Tensor *out = n->out;
    for (long i = 0; i < out->n; i++) out->grad[i] *= 1.1f;
    kernel_real_backward(n);
    for (long i = 0; i < out->n; i++) out->grad[i] /= 1.1f;
}

void kernel_mutation_install(OpDef *op, Mutation m) {
    kernel_real_backward = op->backward;
    op->backward = m == MUTATION_SCALE ? kernel_scaled_backward : dropped_backward;
}

void kernel_mutation_remove(OpDef *op) { op->backward = kernel_real_backward; }

bool case_covers(int k, int op) {
    static bool known[64][OP_COUNT];
    static bool done[64];
    if (k >= 64) DIE("case_covers: more than 64 cases; raise the limit");
    if (!done[k]) {
        Arena a;
        arena_init(&a, 1 << 16);
        Arena *outer = engine_arena_or_null();
        engine_set_arena(&a);
        const GradCase *c = &op_cases[k];
        Tensor *in[GC_MAX_IN];
        for (int i = 0; i < c->n_in; i++) {
            in[i] = tensor_zeros(c->in[i].ndim, c->in[i].shape);
            in[i]->requires_grad = true;
        }
        bool was = grad_set(true);
        tape_reset();
        c->build(in);
        for (Node *n = tape_last(); n; n = n->prev)
            if (op_id(n) >= 0) known[k][op_id(n)] = true;
        tape_reset();
        grad_set(was);
        engine_set_arena(outer);
        arena_free(&a);
        done[k] = true;
    }
    return known[k][op];
}

int case_find(const char *name) {
    for (int k = 0; k < n_op_cases; k++)
        if (strcmp(op_cases[k].name, name) == 0) return k;
    DIE("no op case named %s", name);
}

bool close_enough(const float *got, const float *want, long n, float atol, float rtol, char *msg, int msg_size) {
    for (long i = 0; i < n; i++) {
        float tol = atol + rtol * fabsf(want[i]);
        if (!(fabsf(got[i] - want[i]) <= tol)) {
            snprintf(msg, (size_t)msg_size, "element %ld: got %.8g, want %.8g (tolerance %.2g)", i, got[i], want[i], tol);
            return false;
        }
    }
    return true;
}
