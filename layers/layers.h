/* layers.h: the building blocks of the model. Each layer declares its
 * parameters in a ParamSet under PyTorch's names (so a checkpoint loads into
 * the same nn.Module with load_state_dict) and has a forward made of ops,
 * whose backward the tape provides. */
#ifndef ATTNLAB_LAYERS_H
#define ATTNLAB_LAYERS_H

#include "config.h"
#include "params.h"
#include "tape.h"
#include "rng.h"

/* Under precision bf16, the activations that only products read are stored
 * in bf16 (tensor.h): the bits of every result are the same, since a bf16
 * product rounds its inputs to those values anyway (tests/test_store16.c),
 * in less memory. Which ones, as bits of bf16_store (all at start):
 *   BF16_STORE_NORM    the outputs of ln1 and ln2, read by the q, k, v and
 *                      the MLP's first products (ln_f's, the loss's input,
 *                      stays fp32);
 *   BF16_STORE_QKV     the attention's q, k, v, when the kernel's call reads
 *                      them through products alone (AttnKernel.qkv16);
 *   BF16_STORE_MERGED  the heads merged for the output projection.
 * The tests clear bits to compare the results, and the memory, with fp32
 * copies kept. */
enum { BF16_STORE_NORM = 1, BF16_STORE_QKV = 2, BF16_STORE_MERGED = 4, BF16_STORE_ALL = 7 };
extern unsigned bf16_store;

/* nn.Linear: y = x W^T + b, W is [out, in] as in PyTorch. */
typedef struct {
    Tensor *w, *b; /* b is NULL without bias */
} Linear;

void linear_declare(Linear *l, ParamSet *p, const char *name, int in, int out, bool bias);
/* The same, with the weight (and bias) stored right after prev's, so that
 * linears declared this way in a chain run as one (linear_fused). */
void linear_declare_after(Linear *l, const Linear *prev, ParamSet *p, const char *name, int in, int out, bool bias);
Tensor *linear_forward(const Linear *l, Tensor *x);
/* n linears on the same x as one product: x [..., in] -> [..., out_0 + ... +
 * out_{n-1}], each one's outputs in its own columns, in order. The linears
 * must have been declared as a chain (linear_declare_after), after
 * params_alloc. */
Tensor *linear_fused(const Linear *const *l, int n, Tensor *x);

/* nn.LayerNorm (eps 1e-5) or RMSNorm; rmsnorm has no bias. */
typedef struct {
    int kind; /* NormKind */
    Tensor *w, *b;
} Norm;

void norm_declare(Norm *n, ParamSet *p, const char *name, int kind, int d);
Tensor *norm_forward(const Norm *n, Tensor *x);
/* norm(x + y), with x + y in *sum: a residual add and the norm after it in
 * one fused op (op_add_layernorm, op_add_rmsnorm). */
Tensor *norm_add_forward(const Norm *n, Tensor *x, Tensor *y, Tensor **sum);
/* The same with the output stored as `out` says (ops.h: op_layernorm_to). */
Tensor *norm_forward_to(const Norm *n, Tensor *x, DType out);
Tensor *norm_add_forward_to(const Norm *n, Tensor *x, Tensor *y, Tensor **sum, DType out);

/* d -> mlp_ratio d -> d with GELU (tanh form) between. */
typedef struct {
    Linear fc, proj;
} Mlp;

void mlp_declare(Mlp *m, ParamSet *p, const char *name, int d, int hidden);
/* The block as one fused op (op_mlp, layers/mlp.c). */
Tensor *mlp_forward(const Mlp *m, Tensor *x);

/* y = gelu(x W1^T + b1) W2^T + b2, x [..., in], W1 [hidden, in], W2 [in,
 * hidden]: op_linear, op_gelu, op_linear fused, keeping only x W1^T + b1 for
 * backward (layers/mlp.c). mlp_op is its OpDef, which a test may break. */
Tensor *op_mlp(Tensor *x, Tensor *w1, Tensor *b1, Tensor *w2, Tensor *b2);
extern OpDef mlp_op;
/* The most floats op_mlp's [rows, hidden] scratch may hold: it takes the rows
 * in passes of that many (a test sets it small to run several passes). */
extern long mlp_scratch_floats;
/* For the tests: in bf16, keep h in fp32 as fp32 runs do (false at start),
 * the mistake tests/test_fused.c shows its bf16-rule check catching. */
extern bool mlp_keep_h32;

/* The LM head and the mean cross-entropy as one op: x [..., d], W [V, d] ->
 * the mean over rows r whose target is not ignore_index of logsumexp(z_r) -
 * z_r[targets[r]], z_r = x_r W^T (0 when no row counts), as
 * op_cross_entropy(op_matmul(x, W, false, true), targets, ignore_index), but
 * without the logits [rows, V] or their gradient: forward keeps one float a
 * row, backward makes the logits again a block of rows at a time
 * (layers/lm_cross_entropy.c). targets must stay valid until backward.
 * lm_cross_entropy_op is its OpDef, which a test may break. */
Tensor *op_lm_cross_entropy(Tensor *x, Tensor *w, const int *targets, int ignore_index);
extern OpDef lm_cross_entropy_op;

/* Formats "prefix.suffix" into buf (sized 128); returns buf. */
const char *param_name(char *buf, const char *prefix, const char *suffix);

#endif
