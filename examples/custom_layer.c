/* custom_layer.c: a layer of one's own, outside the tree, against the installed library.
 *
 * The layer is Snake (Ziyin et al. 2020), y = x + sin^2(a x) / a with a
 * learned frequency a per channel: an op of its own with a hand-written
 * backward,
 *     dx += dy (1 + sin(2 a x))
 *     da += sum over rows of dy (x sin(2 a x) / a - sin^2(a x) / a^2)
 * checked against central differences with the library's gradcheck, then
 * trained in a small byte-level model (the previous 4 bytes embedded, a
 * linear layer, Snake, the output layer) on a paragraph of text with AdamW.
 *
 *   cc custom_layer.c $(pkg-config --cflags --libs attnlab) -o custom_layer
 *   ./custom_layer                  the check, then 300 steps; exits 1 unless both hold
 *   ./custom_layer --wrong-backward the same with da off by 10%: the check must fail */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnlab/gradcheck.h>
#include <attnlab/op_kernel.h>
#include <attnlab/ops.h>
#include <attnlab/optim.h>
#include <attnlab/params.h>
#include <attnlab/rng.h>

/* ---- the op: y = snake(x, a), x [..., D], a [D] ---------------------------- */

static bool wrong_backward; /* --wrong-backward: da off by 10% */

static void snake_forward(Node *n) {
    const Tensor *x = n->in[0], *a = n->in[1];
    int D = a->n;
    long rows = x->n / D;
    for (long r = 0; r < rows; r++)
        for (int j = 0; j < D; j++) {
            float v = x->data[r * D + j], s = sinf(a->data[j] * v);
            n->out->data[r * D + j] = v + s * s / a->data[j];
        }
}

static void snake_backward(Node *n) {
    Tensor *x = n->in[0], *a = n->in[1];
    const float *dy = n->out->grad;
    int D = a->n;
    long rows = x->n / D;
    float *dx = x->requires_grad ? tensor_grad(x) : NULL, *da = a->requires_grad ? tensor_grad(a) : NULL;
    for (long r = 0; r < rows; r++)
        for (int j = 0; j < D; j++) {
            float v = x->data[r * D + j], f = a->data[j], s = sinf(f * v), s2 = sinf(2 * f * v);
            float g = dy[r * D + j];
            if (dx) dx[r * D + j] += g * (1 + s2);
            if (da) da[j] += g * (v * s2 / f - s * s / (f * f)) * (wrong_backward ? 1.1f : 1.0f);
        }
}

static const OpDef snake_op = {"snake", snake_forward, snake_backward, 0};

/* The constructor: checks the shapes, makes the output, runs and records the node. */
static Tensor *op_snake(Tensor *x, Tensor *a) {
    SHAPE_CHECK(a->ndim == 1 && x->ndim >= 1 && x->shape[x->ndim - 1] == a->shape[0], "snake",
                "a must be [D] for x [..., D]", x, a);
    Node *n = node_new(&snake_op);
    n->in[0] = x;
    n->in[1] = a;
    n->n_in = 2;
    n->out = tensor_new(x->ndim, x->shape);
    return node_run(n);
}

/* ---- its gradient check ---------------------------------------------------- */

static Tensor *snake_case(Tensor **in) { return op_snake(in[0], in[1]); }

static bool check_gradient(void) {
    /* a away from 0 (it divides): GC_POSITIVE draws it in [0.5, 1.5] */
    GradCase c = {"snake", 2, {{3, {2, 3, 8}, GC_NORMAL}, {1, {8}, GC_POSITIVE}}, snake_case};
    GcResult r;
    bool ok = gradcheck(&c, 7, NULL, &r);
    printf("gradcheck snake: %s, %d elements, worst error %.3f of the tolerance%s%s\n", ok ? "ok" : "FAILED",
           r.checked, r.worst_ratio, ok ? "" : ": ", r.why);
    return ok;
}

/* ---- a small model with it, trained -------------------------------------- */

static const char text[] =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair.";

enum { CTX = 4, EMB = 16, HID = 64, VOCAB = 256, BATCH = 32, STEPS = 300 };

typedef struct {
    ParamSet p;
    Tensor *emb, *w1, *b1, *freq, *w2, *b2;
} Net;

static void net_init(Net *m, Rng *rng) {
    params_init(&m->p);
    m->emb = params_add(&m->p, "emb.weight", 2, (int[]){VOCAB, EMB});
    m->w1 = params_add(&m->p, "fc1.weight", 2, (int[]){HID, CTX * EMB});
    m->b1 = params_add(&m->p, "fc1.bias", 1, (int[]){HID});
    m->freq = params_add(&m->p, "snake.a", 1, (int[]){HID});
    m->w2 = params_add(&m->p, "fc2.weight", 2, (int[]){VOCAB, HID});
    m->b2 = params_add(&m->p, "fc2.bias", 1, (int[]){VOCAB});
    params_alloc(&m->p);
    rng_fill_normal(rng, m->emb->data, m->emb->n, 0, 0.1f);
    rng_fill_normal(rng, m->w1->data, m->w1->n, 0, 1 / sqrtf(CTX * EMB));
    rng_fill_normal(rng, m->w2->data, m->w2->n, 0, 1 / sqrtf(HID));
    for (long i = 0; i < m->freq->n; i++) m->freq->data[i] = 1;
}

/* ids [BATCH, CTX] -> mean cross-entropy against targets [BATCH] */
static Tensor *net_loss(Net *m, const int *ids, const int *targets) {
    Tensor *e = op_embedding(m->emb, ids, 2, (int[]){BATCH, CTX});
    Tensor *h = op_linear(op_reshape(e, 2, (int[]){BATCH, CTX * EMB}), m->w1, m->b1);
    Tensor *logits = op_linear(op_snake(h, m->freq), m->w2, m->b2);
    return op_cross_entropy(logits, targets, -1);
}

int main(int argc, char **argv) {
    wrong_backward = argc > 1 && !strcmp(argv[1], "--wrong-backward");
    engine_set_threads(1);
    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    if (!check_gradient()) return 1;

    Rng rng;
    rng_seed(&rng, 1);
    Net m;
    net_init(&m, &rng);
    AdamWConfig opt = adamw_default();
    opt.weight_decay = 0;
    int n = (int)strlen(text), ids[BATCH * CTX], targets[BATCH];
    float first = 0, last = 0;
    grad_set(true);
    params_zero_grad(&m.p);
    for (int step = 0; step < STEPS; step++) {
        for (int b = 0; b < BATCH; b++) {
            int at = (int)rng_below(&rng, (uint32_t)(n - CTX));
            for (int t = 0; t < CTX; t++) ids[b * CTX + t] = (unsigned char)text[at + t];
            targets[b] = (unsigned char)text[at + CTX];
        }
        arena_reset(&arena);
        tape_reset();
        Tensor *loss = net_loss(&m, ids, targets);
        backward(loss);
        adamw_step(&m.p, &opt, 1e-2f, step + 1, clip_scale(grad_norm(&m.p), 1.0f));
        if (step == 0) first = loss->data[0];
        last = loss->data[0];
        if (step % 100 == 0 || step == STEPS - 1) printf("step %3d: loss %.4f\n", step, loss->data[0]);
    }
    tape_reset();
    params_free(&m.p);
    engine_set_arena(NULL);
    arena_free(&arena);
    /* from ln 256 = 5.55 nats at the start; the paragraph is learnt well below 1.5 */
    bool learnt = last < 1.5f && last < first;
    printf("trained: loss %.4f -> %.4f: %s\n", first, last, learnt ? "ok" : "FAILED");
    return learnt ? 0 : 1;
}
