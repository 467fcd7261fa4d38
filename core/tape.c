#include "tape.h"

#include <string.h>

#include "util.h"

static bool grad_on = true;
static Node *last;

bool grad_enabled(void) { return grad_on; }

bool grad_set(bool on) {
    bool was = grad_on;
    grad_on = on;
    return was;
}

Node *node_new(const OpDef *def) {
    Node *n = arena_calloc(engine_arena(), sizeof *n);
    n->def = def;
    return n;
}

Tensor *node_run(Node *n) {
    n->def->forward(n);
    bool needs = false;
    for (int k = 0; k < n->n_in; k++) needs |= n->in[k]->requires_grad;
    if (grad_on && needs) {
        n->out->requires_grad = true;
        n->prev = last;
        last = n;
    }
    return n->out;
}

Node *tape_last(void) { return last; }

void tape_reset(void) { last = NULL; }

void backward_seeded(Tensor *out, const float *seed) {
    if (!out->requires_grad) DIE("backward: the tensor does not depend on anything that requires a gradient");
    float *g = tensor_grad(out);
    for (long i = 0; i < out->n; i++) g[i] += seed[i];
    for (Node *n = last; n; n = n->prev) {
        /* A node whose output got no gradient contributes nothing. */
        if (n->out->grad) n->def->backward(n);
    }
}

void backward(Tensor *loss) {
    if (loss->n != 1) DIE("backward: the loss has %ld elements; use backward_seeded for non-scalars", loss->n);
    const float one = 1.0f;
    backward_seeded(loss, &one);
}
