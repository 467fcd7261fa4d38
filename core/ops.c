/* ops.c: the table of primitive ops. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_impl.h"
#include "util.h"

OpDef op_defs[] = {
    [OP_MATMUL] = {"matmul", op_matmul_forward, op_matmul_backward, 0},
    [OP_LINEAR] = {"linear", op_linear_forward, op_linear_backward, .in16 = 1u << 0}, /* x: products only */
    [OP_ADD] = {"add", op_add_forward, op_add_backward, 0},
    [OP_MUL] = {"mul", op_mul_forward, op_mul_backward, 0},
    [OP_DIV] = {"div", op_div_forward, op_div_backward, 0},
    [OP_SCALE] = {"scale", op_scale_forward, op_scale_backward, 0},
    [OP_SUM] = {"sum", op_sum_forward, op_sum_backward, 0},
    [OP_MEAN] = {"mean", op_mean_forward, op_mean_backward, 0},
    [OP_RESHAPE] = {"reshape", op_view_forward, op_view_backward, .in16 = 1u << 0}, /* a view reads nothing */
    [OP_SPLIT_HEADS] = {"split_heads", op_split_heads_forward, op_split_heads_backward, 0},
    [OP_MERGE_HEADS] = {"merge_heads", op_merge_heads_forward, op_merge_heads_backward, 0},
    [OP_GELU] = {"gelu", op_gelu_forward, op_gelu_backward, 0},
    [OP_RELU] = {"relu", op_relu_forward, op_relu_backward, 0},
    [OP_LEAKYRELU] = {"leakyrelu", op_leakyrelu_forward, op_leakyrelu_backward, 0},
    [OP_ELU] = {"elu", op_elu_forward, op_elu_backward, 0},
    [OP_EXP] = {"exp", op_exp_forward, op_exp_backward, 0},
    [OP_SIGMOID] = {"sigmoid", op_sigmoid_forward, op_sigmoid_backward, 0},
    [OP_IDENTITY] = {"identity", op_view_forward, op_view_backward, .in16 = 1u << 0},
    [OP_LAYERNORM] = {"layernorm", op_layernorm_forward, op_layernorm_backward, 0},
    [OP_RMSNORM] = {"rmsnorm", op_rmsnorm_forward, op_rmsnorm_backward, 0},
    [OP_ADD_LAYERNORM] = {"add_layernorm", op_add_layernorm_forward, op_add_layernorm_backward, 0},
    [OP_ADD_RMSNORM] = {"add_rmsnorm", op_add_rmsnorm_forward, op_add_rmsnorm_backward, 0},
    [OP_SOFTMAX] = {"softmax", op_softmax_forward, op_softmax_backward, 0},
    [OP_EMBEDDING] = {"embedding", op_embedding_forward, op_embedding_backward, 0},
    [OP_CROSS_ENTROPY] = {"cross_entropy", op_cross_entropy_forward, op_cross_entropy_backward, 0},
};
/* An op added to the enum after the last entry here fails to compile; one
 * added in the middle leaves a NULL entry, which tests/test_ops.c catches. */
static_assert(sizeof op_defs / sizeof op_defs[0] == OP_COUNT, "op_defs and OpId are out of step");

int op_id(const Node *n) {
    if (n->def < op_defs || n->def >= op_defs + OP_COUNT) return -1;
    return (int)(n->def - op_defs);
}

void shape_fail(const char *op, const char *why, const Tensor *a, const Tensor *b) {
    char sa[64], sb[64];
    fflush(stdout);
    fprintf(stderr, "fatal: op %s: %s: %s", op, why, tensor_shape_str(a, sa, sizeof sa));
    if (b) fprintf(stderr, " and %s", tensor_shape_str(b, sb, sizeof sb));
    fputc('\n', stderr);
    abort();
}

Node *node_with(OpId id, int n_in, Tensor *a, Tensor *b, Tensor *c) {
    Node *n = node_new(&op_defs[id]);
    n->n_in = n_in;
    n->in[0] = a;
    n->in[1] = b;
    n->in[2] = c;
    return n;
}
