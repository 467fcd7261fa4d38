/* ops_pointwise.c: gelu (tanh form), relu, leakyrelu, elu. */
#include <math.h>

#include "ops_impl.h"

static Tensor *pointwise(OpId id, Tensor *x, float f0, float f1) {
    Node *n = node_with(id, 1, x, NULL, NULL);
    n->f[0] = f0;
    n->f[1] = f1;
    n->out = tensor_new(x->ndim, x->shape);
    return node_run(n);
}

Tensor *op_gelu(Tensor *x) { return pointwise(OP_GELU, x, 0, 0); }
Tensor *op_relu(Tensor *x) { return pointwise(OP_RELU, x, 0, 0); }
Tensor *op_leakyrelu(Tensor *x, float slope) { return pointwise(OP_LEAKYRELU, x, slope, 0); }
Tensor *op_elu(Tensor *x, float alpha, float shift) { return pointwise(OP_ELU, x, alpha, shift); }

/* Each backward is dx += dout * f'(x), with f' from the saved input. */
#define POINTWISE_BACKWARD(name, deriv)                            \
    void name##_backward(Node *n) {                                \
        Tensor *x = n->in[0];                                      \
        if (!x->requires_grad) return;                             \
        const float *xs = x->data, *g = n->out->grad;              \
        float *dx = tensor_grad(x);                                \
        float f0 = n->f[0];                                        \
        (void)f0;                                                  \
        _Pragma("omp parallel for if (x->n > PAR_MIN)")            \
        for (long i = 0; i < x->n; i++) dx[i] += g[i] * (deriv);   \
    }

#define POINTWISE_FORWARD(name, value)                             \
    void name##_forward(Node *n) {                                 \
        const float *xs = n->in[0]->data;                          \
        float *o = n->out->data, f0 = n->f[0], f1 = n->f[1];       \
        (void)f0;                                                  \
        (void)f1;                                                  \
        _Pragma("omp parallel for if (n->out->n > PAR_MIN)")       \
        for (long i = 0; i < n->out->n; i++) o[i] = (value);       \
    }

#define GELU_C 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

static inline float gelu(float x) { return 0.5f * x * (1.0f + tanhf(GELU_C * (x + GELU_A * x * x * x))); }

/* d/dx 0.5 x (1 + tanh u), u = c (x + a x^3):
 * 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 a x^2) */
static inline float gelu_grad(float x) {
    float t = tanhf(GELU_C * (x + GELU_A * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * x * x);
}

POINTWISE_FORWARD(gelu, gelu(xs[i]))
POINTWISE_BACKWARD(gelu, gelu_grad(xs[i]))

/* relu'(0) is taken as 0, as PyTorch does. */
POINTWISE_FORWARD(relu, xs[i] > 0.0f ? xs[i] : 0.0f)
POINTWISE_BACKWARD(relu, xs[i] > 0.0f ? 1.0f : 0.0f)

POINTWISE_FORWARD(leakyrelu, xs[i] > 0.0f ? xs[i] : f0 * xs[i])
POINTWISE_BACKWARD(leakyrelu, xs[i] > 0.0f ? 1.0f : f0)

/* elu(x) + shift; expm1f keeps precision near 0. */
POINTWISE_FORWARD(elu, (xs[i] > 0.0f ? xs[i] : f0 * expm1f(xs[i])) + f1)
POINTWISE_BACKWARD(elu, xs[i] > 0.0f ? 1.0f : f0 * expf(xs[i]))
