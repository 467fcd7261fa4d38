/* ops_pointwise.c: gelu (tanh form), relu, leakyrelu, elu, exp, sigmoid.
 *
 * Each op is two kernels over a range of elements: forward o = f(x) and
 * backward dx += dout * f'(x). parallel_range() gives each thread one
 * contiguous range; `omp simd` asks for vector code whatever -O2's cost model
 * thinks, and fm_expf/fm_tanhf (fastmath.h) are inlined into it. */
#include <math.h>

#include "fastmath.h"
#include "ops_impl.h"

/* leakyrelu's slope (relu: 0), elu's alpha and shift, 1 for sigmoid (0:
 * exp); gelu has none. */
typedef struct {
    float slope, alpha, shift, logistic;
} PointwiseAttrs;
NODE_ATTRS_DECLARE(PointwiseAttrs);

typedef struct {
    const float *x, *g; /* input, and dout (backward) */
    float *o;           /* output (forward) or dx (backward) */
    PointwiseAttrs a;
} Pointwise;

typedef void (*RangeFn)(const Pointwise *p, long lo, long hi);

static void run(const Pointwise *p, long n, RangeFn fn) {
    #pragma omp parallel if (n > PAR_MIN)
    {
        long lo, hi;
        thread_range(n, &lo, &hi);
        fn(p, lo, hi);
    }
}

static Tensor *pointwise(OpId id, Tensor *x, PointwiseAttrs a) {
    Node *n = node_with(id, 1, x, NULL, NULL);
    *NODE_ATTRS(n, PointwiseAttrs) = a;
    n->out = tensor_new(x->ndim, x->shape);
    return node_run(n);
}

Tensor *op_gelu(Tensor *x) { return pointwise(OP_GELU, x, (PointwiseAttrs){0}); }
Tensor *op_relu(Tensor *x) { return pointwise(OP_RELU, x, (PointwiseAttrs){.slope = 0.0f}); }
Tensor *op_leakyrelu(Tensor *x, float slope) { return pointwise(OP_LEAKYRELU, x, (PointwiseAttrs){.slope = slope}); }
Tensor *op_elu(Tensor *x, float alpha, float shift) {
    return pointwise(OP_ELU, x, (PointwiseAttrs){.alpha = alpha, .shift = shift});
}
Tensor *op_exp(Tensor *x) { return pointwise(OP_EXP, x, (PointwiseAttrs){0}); }
Tensor *op_sigmoid(Tensor *x) { return pointwise(OP_SIGMOID, x, (PointwiseAttrs){.logistic = 1.0f}); }

static void run_forward(Node *n, RangeFn fn) {
    Pointwise p = {n->in[0]->data, NULL, n->out->data, *NODE_ATTRS(n, PointwiseAttrs)};
    run(&p, n->out->n, fn);
}

/* fn gets p->x = the input, or the output when from_out (exp and sigmoid
 * have their derivative in terms of it). */
static void run_backward_of(Node *n, RangeFn fn, bool from_out) {
    Tensor *x = n->in[0];
    if (!x->requires_grad) return;
    Pointwise p = {from_out ? n->out->data : x->data, n->out->grad, tensor_grad(x), *NODE_ATTRS(n, PointwiseAttrs)};
    run(&p, x->n, fn);
}

static void run_backward(Node *n, RangeFn fn) { run_backward_of(n, fn, false); }

/* ---- gelu: 0.5 x (1 + tanh u), u = c (x + a x^3) -------------------------- */

/* fm_gelu and fm_gelu_slope (fastmath.h), which gemm's epilogues share */

static void gelu_fwd(const Pointwise *p, long lo, long hi) {
    const float *restrict x = p->x;
    float *restrict o = p->o;
    #pragma omp simd
    for (long i = lo; i < hi; i++) o[i] = fm_gelu(x[i]);
}

static inline float gelu_slope(float x) { return fm_gelu_slope(x); }

static void gelu_bwd(const Pointwise *p, long lo, long hi) {
    const float *restrict x = p->x, *restrict g = p->g;
    float *restrict dx = p->o;
    #pragma omp simd
    for (long i = lo; i < hi; i++) dx[i] += g[i] * gelu_slope(x[i]);
}

/* the same, overwriting dx (which may be g: no restrict) */
static void gelu_grad_set(const Pointwise *p, long lo, long hi) {
    const float *restrict x = p->x;
    const float *g = p->g;
    float *dx = p->o;
    #pragma omp simd
    for (long i = lo; i < hi; i++) dx[i] = g[i] * gelu_slope(x[i]);
}

void gelu_rows(const float *x, float *y, long n) { run(&(Pointwise){.x = x, .o = y}, n, gelu_fwd); }
void gelu_grad_rows(const float *x, const float *dy, float *dx, long n) {
    run(&(Pointwise){.x = x, .g = dy, .o = dx}, n, gelu_grad_set);
}

void op_gelu_forward(Node *n) { run_forward(n, gelu_fwd); }
void op_gelu_backward(Node *n) { run_backward(n, gelu_bwd); }

/* ---- relu, leakyrelu: the derivative at 0 is taken from the left, as PyTorch does */

static void leaky_fwd(const Pointwise *p, long lo, long hi) {
    const float *restrict x = p->x;
    float *restrict o = p->o;
    float slope = p->a.slope;
    #pragma omp simd
    for (long i = lo; i < hi; i++) o[i] = x[i] > 0.0f ? x[i] : slope * x[i];
}

static void leaky_bwd(const Pointwise *p, long lo, long hi) {
    const float *restrict x = p->x, *restrict g = p->g;
    float *restrict dx = p->o;
    float slope = p->a.slope;
    #pragma omp simd
    for (long i = lo; i < hi; i++) dx[i] += x[i] > 0.0f ? g[i] : slope * g[i];
}

/* relu is leakyrelu with slope 0, which op_relu stores in its attributes. */
void op_relu_forward(Node *n) { run_forward(n, leaky_fwd); }
void op_relu_backward(Node *n) { run_backward(n, leaky_bwd); }
void op_leakyrelu_forward(Node *n) { run_forward(n, leaky_fwd); }
void op_leakyrelu_backward(Node *n) { run_backward(n, leaky_bwd); }

/* ---- elu(x) + shift, elu(x) = x if x > 0 else alpha (e^x - 1) -------------- */

static void elu_fwd(const Pointwise *p, long lo, long hi) {
    const float *restrict x = p->x;
    float *restrict o = p->o;
    float alpha = p->a.alpha, shift = p->a.shift;
    #pragma omp simd
    for (long i = lo; i < hi; i++) o[i] = (x[i] > 0.0f ? x[i] : alpha * (fm_expf(x[i]) - 1.0f)) + shift;
}

static void elu_bwd(const Pointwise *p, long lo, long hi) {
    const float *restrict x = p->x, *restrict g = p->g;
    float *restrict dx = p->o;
    float alpha = p->a.alpha;
    #pragma omp simd
    for (long i = lo; i < hi; i++) dx[i] += x[i] > 0.0f ? g[i] : g[i] * alpha * fm_expf(x[i]);
}

void op_elu_forward(Node *n) { run_forward(n, elu_fwd); }
void op_elu_backward(Node *n) { run_backward(n, elu_bwd); }

/* ---- exp, and sigmoid = 1 / (1 + e^-x): derivatives from the output o,
 * e^x' = o and sigmoid' = o (1 - o), so o (1 - k o) with k = 0 or 1 (the
 * attribute `logistic`) ------------------------------------------------------- */

static void exp_fwd(const Pointwise *p, long lo, long hi) {
    const float *restrict x = p->x;
    float *restrict o = p->o;
    bool logistic = p->a.logistic != 0.0f;
    #pragma omp simd
    for (long i = lo; i < hi; i++) o[i] = logistic ? fm_sigmoidf(x[i]) : fm_expf(x[i]);
}

static void exp_bwd(const Pointwise *p, long lo, long hi) {
    const float *restrict o = p->x, *restrict g = p->g;
    float *restrict dx = p->o;
    float k = p->a.logistic;
    #pragma omp simd
    for (long i = lo; i < hi; i++) dx[i] += g[i] * o[i] * (1.0f - k * o[i]);
}

void op_exp_forward(Node *n) { run_forward(n, exp_fwd); }
void op_exp_backward(Node *n) { run_backward_of(n, exp_bwd, true); }
void op_sigmoid_forward(Node *n) { run_forward(n, exp_fwd); }
void op_sigmoid_backward(Node *n) { run_backward_of(n, exp_bwd, true); }
