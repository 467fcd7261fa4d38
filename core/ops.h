/* ops.h: the primitive ops. Each has a forward and a hand-written backward.
 *
 * Calling op_x(...) checks shapes (a mismatch is a programming error: it aborts
 * with the op's name and the shapes), allocates the output from the current
 * arena, runs the forward and, when gradients are on, records a node on the
 * tape. Backward functions add (+=) into their inputs' gradients.
 *
 * Adding an op: one enum value below, one line in op_defs (core/ops.c), the
 * forward/backward pair and the op_x() constructor in a core/ops_*.c file, and
 * a case in tests/op_cases.c (gradient check) and tests/reference/ops.py
 * (PyTorch fixture). The tests fail until all four exist. */
#ifndef ATTNLAB_OPS_H
#define ATTNLAB_OPS_H

#include "tape.h"

typedef enum {
    OP_MATMUL,
    OP_LINEAR,
    OP_ADD,
    OP_MUL,
    OP_DIV,
    OP_SCALE,
    OP_SUM,
    OP_MEAN,
    OP_RESHAPE,
    OP_SPLIT_HEADS,
    OP_MERGE_HEADS,
    OP_GELU,
    OP_RELU,
    OP_LEAKYRELU,
    OP_ELU,
    OP_EXP,
    OP_SIGMOID,
    OP_IDENTITY,
    OP_LAYERNORM,
    OP_RMSNORM,
    OP_ADD_LAYERNORM,
    OP_ADD_RMSNORM,
    OP_SOFTMAX,
    OP_EMBEDDING,
    OP_CROSS_ENTROPY,
    OP_COUNT
} OpId;

/* Name, forward and backward of every primitive, indexed by OpId. Not const,
 * so a test can swap in a broken backward and see the gradient check fail. */
extern OpDef op_defs[OP_COUNT];

/* The OpId of a node's op, or -1 when the op is not a primitive (a fused kernel
 * defined outside core). */
int op_id(const Node *n);

/* ---- linear algebra ----------------------------------------------------- */

/* C = op(A) op(B), op = transpose when ta / tb. Transposes go to cblas_sgemm
 * as flags; nothing is copied.
 *  - B 2-D, A [..., K] (ta = 0): every row of A times op(B); out [..., N].
 *  - B 2-D, A 2-D, ta = 1: A is [K, M]; out [M, N].
 *  - batched: A and B with the same leading dims, one product per batch
 *    element: [..., M, K] x [..., K, N] -> [..., M, N] (before transposes). */
Tensor *op_matmul(Tensor *a, Tensor *b, bool ta, bool tb);

/* nn.Linear: y = x W^T + b, x [..., in], W [out, in] (PyTorch's layout), b
 * [out] or NULL. One sgemm: the bias is written into y first and sgemm adds
 * onto it; backward takes db as a column sum with sgemv. x may be stored in
 * bf16 (tensor.h): it is read only by the products y = x W^T and dW = dy^T x. */
Tensor *op_linear(Tensor *x, Tensor *w, Tensor *b);
/* op_linear's two halves, for fused kernels outside core: y [M, out] = x [M,
 * in] W^T + b (b may be NULL), x floats or (x16) bf16; and db += the column
 * sums of dy [M, out]. */
void linear_rows(float *y, const void *x, bool x16, const Tensor *w, const Tensor *b, long M);
void bias_grad_rows(Tensor *b, const float *dy, long M);

/* GELU (tanh form, op_gelu's formula) over n floats, threaded as the ops are,
 * for fused kernels outside core: y = gelu(x), and dx = dy * gelu'(x) (dx may
 * be dy, in place). */
void gelu_rows(const float *x, float *y, long n);
void gelu_grad_rows(const float *x, const float *dy, float *dx, long n);
/* log sum_i exp(z_i) over one row of n, as max + log(sum of fm_expf(z_i -
 * max)): op_cross_entropy's per-row value, for fused kernels outside core
 * (the same function, so the same bits). */
float logsumexp_row(const float *z, int n);

/* ---- arithmetic --------------------------------------------------------- */

/* a + b, a * b and a / b, where b's shape is a's or a suffix of it: a row
 * bias [N] on [..., N], a [T, d] table on [B, T, d], a scalar on anything. */
Tensor *op_add(Tensor *a, Tensor *b);
Tensor *op_mul(Tensor *a, Tensor *b);
Tensor *op_div(Tensor *a, Tensor *b);
Tensor *op_scale(Tensor *a, float s);
/* Sum and mean of all elements: a scalar (ndim 0). */
Tensor *op_sum(Tensor *a);
Tensor *op_mean(Tensor *a);

/* ---- shapes ------------------------------------------------------------- */

/* Same data, new shape (same element count). The output shares a's data. */
Tensor *op_reshape(Tensor *a, int ndim, const int *shape);
/* [B, T, H*D] -> [B, H, T, D], and back. */
Tensor *op_split_heads(Tensor *x, int heads);
Tensor *op_merge_heads(Tensor *x);
/* The same with the output stored as `out` says (tensor.h): in bf16 for a
 * reader that takes it through products only (the attention's q, k, v,
 * its merged output for the output projection); x stays fp32. */
Tensor *op_split_heads_to(Tensor *x, int heads, DType out);
Tensor *op_merge_heads_to(Tensor *x, DType out);

/* ---- pointwise ---------------------------------------------------------- */

/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
Tensor *op_gelu(Tensor *x);
Tensor *op_relu(Tensor *x);
/* x if x > 0, else slope * x. */
Tensor *op_leakyrelu(Tensor *x, float slope);
/* elu(x) + shift, elu(x) = x if x > 0 else alpha (exp(x) - 1). shift = 1 gives
 * the positive feature map elu(x) + 1 of linear attention. */
Tensor *op_elu(Tensor *x, float alpha, float shift);
/* e^x, and the logistic sigmoid 1 / (1 + e^-x). */
Tensor *op_exp(Tensor *x);
Tensor *op_sigmoid(Tensor *x);
/* Returns a view of x. Exists so that phi = identity is an op like the others. */
Tensor *op_identity(Tensor *x);

/* ---- normalisation ------------------------------------------------------ */

/* Over the last dim D: (x - mean) / sqrt(var + eps) * w + b; w, b are [D]. */
Tensor *op_layernorm(Tensor *x, Tensor *w, Tensor *b, float eps);
/* x / sqrt(mean(x^2) + eps) * w. */
Tensor *op_rmsnorm(Tensor *x, Tensor *w, float eps);
/* The norms (and the fused ones below) with the output stored as `out`
 * says: in bf16 (its fp32 values rounded to nearest even) when only
 * products read it, as the model's linear layers do. Their backward reads
 * x, never the output, so nothing fp32 is lost; x must be fp32. */
Tensor *op_layernorm_to(Tensor *x, Tensor *w, Tensor *b, float eps, DType out);
Tensor *op_rmsnorm_to(Tensor *x, Tensor *w, float eps, DType out);
/* A residual add and the norm after it, fused: *sum = x + y (x and y of one
 * shape) and the result norm(*sum), in one pass over memory forward and one
 * backward (core/ops_norm.c says which passes it saves). The same values as
 * op_add then op_layernorm / op_rmsnorm. *sum is a tensor like any other
 * (the next residual reads it); on the tape it is an OP_ADD node's output,
 * and the result the OP_ADD_LAYERNORM / OP_ADD_RMSNORM node's, whose
 * backward does the add's as well. */
Tensor *op_add_layernorm(Tensor *x, Tensor *y, Tensor *w, Tensor *b, float eps, Tensor **sum);
Tensor *op_add_rmsnorm(Tensor *x, Tensor *y, Tensor *w, float eps, Tensor **sum);
Tensor *op_add_layernorm_to(Tensor *x, Tensor *y, Tensor *w, Tensor *b, float eps, Tensor **sum, DType out);
Tensor *op_add_rmsnorm_to(Tensor *x, Tensor *y, Tensor *w, float eps, Tensor **sum, DType out);

/* ---- probabilities ------------------------------------------------------ */

/* Softmax over the last dim of x + mask. mask may be NULL; its shape is a
 * suffix of x's ([Tq, Tk] for a score tensor [B, H, Tq, Tk]) and -INFINITY
 * entries remove a key. A row with every key removed gives all zeros. If the
 * mask requires a gradient (a learned score bias), it gets one. */
Tensor *op_softmax(Tensor *x, Tensor *mask);

/* Rows of w [V, D] picked by ids: out has shape `shape` + [D] (ndim + 1 <= 4).
 * ids must stay valid until backward. */
Tensor *op_embedding(Tensor *w, const int *ids, int ndim, const int *shape);

/* Mean cross-entropy of logits [..., V] against targets (one per row), over
 * the rows whose target is not ignore_index. A scalar; 0 when no row counts.
 * targets must stay valid until backward. */
Tensor *op_cross_entropy(Tensor *logits, const int *targets, int ignore_index);

#endif
