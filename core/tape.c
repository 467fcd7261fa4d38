#include "tape.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

static bool grad_on = true;
static Node *last;

static TapeWatcher watcher;

void tape_watch(TapeWatcher w) { watcher = w; }

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs f(n), timed as def's forward or backward when watched. */
static void run_watched(Node *n, void (*f)(Node *n), bool is_backward) {
    if (!watcher) {
        f(n);
        return;
    }
    double t = seconds();
    f(n);
    watcher(n->def, is_backward, seconds() - t);
}

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

static void record(Node *n) {
    bool needs = false;
    for (int k = 0; k < n->n_in; k++) needs |= n->in[k]->requires_grad;
    if (grad_on && needs) {
        n->out->requires_grad = true;
        n->out->producer = n;
        n->prev = last;
        last = n;
    }
}

/* An input stored in bf16 where the op reads fp32 would be read as NULL
 * data: a programming error, caught here with the op's name. */
static void check_in16(const Node *n) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k]->dtype != DTYPE_F32 && !(n->def->in16 & (1u << k)))
            DIE("op %s: input %d is stored in bf16, and the op reads it as fp32 (OpDef.in16 has no bit for it)",
                n->def->name, k);
}

Tensor *node_run(Node *n) {
    check_in16(n);
    run_watched(n, n->def->forward, false);
    record(n);
    return n->out;
}

Tensor *node_run_fused(Node *first, Node *n, void (*forward)(Node *n)) {
    check_in16(first);
    check_in16(n);
    run_watched(n, forward, false);
    record(first);
    record(n);
    return n->out;
}

Node *tape_last(void) { return last; }

void tape_reset(void) { last = NULL; }

/* A view's output shares its input's data (ops_shape.c): it is pointed at
 * the input again, never handed back on its own. */
static bool is_view(const Node *n) { return n->view; }

/* A tensor whose data was handed back after forward, made again from its
 * producer's inputs (which are alive: nothing releases those) when the first
 * backward that reads it comes. */
static void recompute(Tensor *t) {
    if (tensor_has_data(t) || !t->recompute) return;
    Node *p = t->producer;
    for (int k = 0; k < p->n_in; k++) recompute(p->in[k]); /* a chain of them, from its start */
    tensor_storage_alloc(t);
    if (p->saved_n && !p->saved) p->saved = tensor_scratch(p->saved_n);
    p->def->forward(p);
}

static void release_saved(Node *n) {
    if (n->saved_n && n->saved) {
        tensor_scratch_release(n->saved, n->saved_n);
        n->saved = NULL;
    }
}

/* Once its producer's backward has run, nothing reads the data again. */
static void recomputed_done(Node *n) {
    if (n->out->recompute && tensor_has_data(n->out) && is_view(n)) {
        n->out->data = NULL;
        n->out->data16 = NULL;
        return;
    }
    if (n->out->recompute && tensor_has_data(n->out)) {
        tensor_storage_release(n->out);
        release_saved(n);
    }
}

void tensor_release_recomputable(Tensor *t) {
    /* (not tensor_release_data: it may have several readers) */
    tensor_storage_release(t);
    if (!t->producer) return; /* not on the tape: no backward will read it */
    release_saved(t->producer);
    t->recompute = true;
}

void tape_checkpoint(Node *before, Tensor *keep) {
    Node *first = NULL, *newest = keep->producer ? keep->producer : last;
    for (Node *n = newest; n && n != before; n = n->prev) {
        first = n;
        if (n->out == keep) continue;
        if (is_view(n))
            n->out->data = NULL, n->out->data16 = NULL;
        else
            tensor_release_recomputable(n->out);
        n->out->recompute = true;
    }
    if (newest && first && newest != first) newest->rerun_from = first;
}

/* The forwards of the span first..n again, oldest first, for the outputs that
 * were handed back. */
static void rerun(Node *n) {
    enum { MAX_SPAN = 512 };
    Node *span[MAX_SPAN];
    int k = 0;
    for (Node *m = n;; m = m->prev) {
        if (k == MAX_SPAN) DIE("tape_checkpoint: a span of more than %d nodes", MAX_SPAN);
        span[k++] = m;
        if (m == n->rerun_from) break;
    }
    while (k--) {
        Node *m = span[k];
        if (tensor_has_data(m->out)) continue;
        if (is_view(m)) {
            tensor_storage_share(m->out, m->in[0]);
            continue;
        }
        tensor_storage_alloc(m->out);
        if (m->saved_n && !m->saved) m->saved = tensor_scratch(m->saved_n);
        m->def->forward(m);
        /* an input that forward handed back after its one reader: again now */
        for (int i = 0; i < m->n_in; i++)
            if (m->in[i]->read_once && tensor_has_data(m->in[i])) tensor_storage_release(m->in[i]);
    }
}

void backward_seeded(Tensor *out, const float *seed) {
    if (!out->requires_grad) DIE("backward: the tensor does not depend on anything that requires a gradient");
    float *g = tensor_grad(out);
    for (long i = 0; i < out->n; i++) g[i] += seed[i];
    for (Node *n = last; n; n = n->prev) {
        /* A node whose output got no gradient contributes nothing. */
        if (n->rerun_from) rerun(n);
        if (!n->out->grad) {
            recomputed_done(n);
            continue;
        }
        for (int k = 0; k < n->n_in; k++) recompute(n->in[k]);
        run_watched(n, n->def->backward, true);
        /* nothing reads n's output gradient any more: the nodes that used
         * n->out came after n on the tape, so their backward has run */
        tensor_grad_release(n->out);
        recomputed_done(n);
    }
}

void backward(Tensor *loss) {
    if (loss->n != 1) DIE("backward: the loss has %ld elements; use backward_seeded for non-scalars", loss->n);
    const float one = 1.0f;
    backward_seeded(loss, &one);
}
