/* ops_arith.c: add, mul and div with suffix broadcasting, scale, sum, mean. */
#include <string.h>

#include "ops_impl.h"

/* b's shape must be a's shape or a suffix of it; then a is a->n / b->n
 * copies of b's block of b->n elements. */
static void check_suffix(const char *op, const Tensor *a, const Tensor *b) {
    SHAPE_CHECK(b->ndim <= a->ndim, op, "the second operand's shape must be a suffix of the first's", a, b);
    for (int i = 1; i <= b->ndim; i++)
        SHAPE_CHECK(a->shape[a->ndim - i] == b->shape[b->ndim - i], op,
                    "the second operand's shape must be a suffix of the first's", a, b);
}

static Tensor *binary(OpId id, Tensor *a, Tensor *b) {
    check_suffix(op_defs[id].name, a, b);
    Node *n = node_with(id, 2, a, b, NULL);
    n->out = tensor_new(a->ndim, a->shape);
    return node_run(n);
}

Tensor *op_add(Tensor *a, Tensor *b) { return binary(OP_ADD, a, b); }
Tensor *op_mul(Tensor *a, Tensor *b) { return binary(OP_MUL, a, b); }
Tensor *op_div(Tensor *a, Tensor *b) { return binary(OP_DIV, a, b); }

/* out = a + b, b repeated over a's leading dims */
void op_add_forward(Node *n) {
    const Tensor *a = n->in[0], *b = n->in[1];
    long bn = b->n, reps = a->n / (bn ? bn : 1);
    float *o = n->out->data;
    #pragma omp parallel for if (a->n > PAR_MIN)
    for (long r = 0; r < reps; r++)
        for (long j = 0; j < bn; j++) o[r * bn + j] = a->data[r * bn + j] + b->data[j];
}

void op_add_backward(Node *n) {
    Tensor *a = n->in[0], *b = n->in[1];
    long bn = b->n, reps = a->n / (bn ? bn : 1);
    const float *g = n->out->grad;
    if (a->requires_grad) {
        float *da = tensor_grad(a);
        #pragma omp parallel for if (a->n > PAR_MIN)
        for (long i = 0; i < a->n; i++) da[i] += g[i];
    }
    if (b->requires_grad) { /* db = dout summed over the repeats, in a fixed order */
        float *db = tensor_grad(b);
        for (long r = 0; r < reps; r++)
            for (long j = 0; j < bn; j++) db[j] += g[r * bn + j];
    }
}

/* out = a * b, b repeated over a's leading dims */
void op_mul_forward(Node *n) {
    const Tensor *a = n->in[0], *b = n->in[1];
    long bn = b->n, reps = a->n / (bn ? bn : 1);
    float *o = n->out->data;
    #pragma omp parallel for if (a->n > PAR_MIN)
    for (long r = 0; r < reps; r++)
        for (long j = 0; j < bn; j++) o[r * bn + j] = a->data[r * bn + j] * b->data[j];
}

void op_mul_backward(Node *n) {
    Tensor *a = n->in[0], *b = n->in[1];
    long bn = b->n, reps = a->n / (bn ? bn : 1);
    const float *g = n->out->grad;
    if (a->requires_grad) { /* da = dout * b */
        float *da = tensor_grad(a);
        #pragma omp parallel for if (a->n > PAR_MIN)
        for (long r = 0; r < reps; r++)
            for (long j = 0; j < bn; j++) da[r * bn + j] += g[r * bn + j] * b->data[j];
    }
    if (b->requires_grad) { /* db = sum over repeats of dout * a */
        float *db = tensor_grad(b);
        for (long r = 0; r < reps; r++)
            for (long j = 0; j < bn; j++) db[j] += g[r * bn + j] * a->data[r * bn + j];
    }
}

/* out = a / b, b repeated over a's leading dims */
void op_div_forward(Node *n) {
    const Tensor *a = n->in[0], *b = n->in[1];
    long bn = b->n, reps = a->n / (bn ? bn : 1);
    float *o = n->out->data;
    #pragma omp parallel for if (a->n > PAR_MIN)
    for (long r = 0; r < reps; r++)
        for (long j = 0; j < bn; j++) o[r * bn + j] = a->data[r * bn + j] / b->data[j];
}

void op_div_backward(Node *n) {
    Tensor *a = n->in[0], *b = n->in[1];
    long bn = b->n, reps = a->n / (bn ? bn : 1);
    const float *g = n->out->grad, *o = n->out->data;
    if (a->requires_grad) { /* da = dout / b */
        float *da = tensor_grad(a);
        #pragma omp parallel for if (a->n > PAR_MIN)
        for (long r = 0; r < reps; r++)
            for (long j = 0; j < bn; j++) da[r * bn + j] += g[r * bn + j] / b->data[j];
    }
    if (b->requires_grad) { /* db = -sum over repeats of dout * a / b^2 = -sum dout * out / b */
        float *db = tensor_grad(b);
        for (long r = 0; r < reps; r++)
            for (long j = 0; j < bn; j++) db[j] -= g[r * bn + j] * o[r * bn + j] / b->data[j];
    }
}

typedef struct {
    float s;
} ScaleAttrs;
NODE_ATTRS_DECLARE(ScaleAttrs);

Tensor *op_scale(Tensor *a, float s) {
    Node *n = node_with(OP_SCALE, 1, a, NULL, NULL);
    NODE_ATTRS(n, ScaleAttrs)->s = s;
    n->out = tensor_new(a->ndim, a->shape);
    return node_run(n);
}

/* out = s * a */
void op_scale_forward(Node *n) {
    const Tensor *a = n->in[0];
    float s = NODE_ATTRS(n, ScaleAttrs)->s, *o = n->out->data;
    #pragma omp parallel for if (a->n > PAR_MIN)
    for (long i = 0; i < a->n; i++) o[i] = s * a->data[i];
}

void op_scale_backward(Node *n) {
    Tensor *a = n->in[0];
    if (!a->requires_grad) return;
    float s = NODE_ATTRS(n, ScaleAttrs)->s, *da = tensor_grad(a);
    const float *g = n->out->grad;
    #pragma omp parallel for if (a->n > PAR_MIN)
    for (long i = 0; i < a->n; i++) da[i] += s * g[i];
}

static Tensor *reduce(OpId id, Tensor *a) {
    Node *n = node_with(id, 1, a, NULL, NULL);
    n->out = tensor_new(0, NULL);
    return node_run(n);
}

Tensor *op_sum(Tensor *a) { return reduce(OP_SUM, a); }
Tensor *op_mean(Tensor *a) { return reduce(OP_MEAN, a); }

/* Summed in double: a float accumulator loses digits over long tensors. */
static double sum_all(const Tensor *a) {
    double s = 0.0;
    for (long i = 0; i < a->n; i++) s += a->data[i];
    return s;
}

static void broadcast_grad(Node *n, float scale) {
    Tensor *a = n->in[0];
    if (!a->requires_grad) return;
    float g = scale * n->out->grad[0], *da = tensor_grad(a);
    for (long i = 0; i < a->n; i++) da[i] += g;
}

/* out = sum_i a_i */
void op_sum_forward(Node *n) { n->out->data[0] = (float)sum_all(n->in[0]); }
void op_sum_backward(Node *n) { broadcast_grad(n, 1.0f); }

/* out = sum_i a_i / n; the mean of nothing is 0 */
void op_mean_forward(Node *n) {
    const Tensor *a = n->in[0];
    n->out->data[0] = a->n ? (float)(sum_all(a) / (double)a->n) : 0.0f;
}
void op_mean_backward(Node *n) { broadcast_grad(n, n->in[0]->n ? 1.0f / (float)n->in[0]->n : 0.0f); }
