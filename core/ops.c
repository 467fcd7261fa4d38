/* ops.c: the table of primitive ops. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_impl.h"
#include "util.h"

OpDef op_defs[] = {
    [OP_MATMUL] = {"matmul", matmul_forward, matmul_backward},
    [OP_ADD] = {"add", add_forward, add_backward},
    [OP_MUL] = {"mul", mul_forward, mul_backward},
    [OP_SCALE] = {"scale", scale_forward, scale_backward},
    [OP_SUM] = {"sum", sum_forward, sum_backward},
    [OP_MEAN] = {"mean", mean_forward, mean_backward},
    [OP_RESHAPE] = {"reshape", view_forward, view_backward},
    [OP_SPLIT_HEADS] = {"split_heads", split_heads_forward, split_heads_backward},
    [OP_MERGE_HEADS] = {"merge_heads", merge_heads_forward, merge_heads_backward},
    [OP_GELU] = {"gelu", gelu_forward, gelu_backward},
    [OP_RELU] = {"relu", relu_forward, relu_backward},
    [OP_LEAKYRELU] = {"leakyrelu", leakyrelu_forward, leakyrelu_backward},
    [OP_ELU] = {"elu", elu_forward, elu_backward},
    [OP_IDENTITY] = {"identity", view_forward, view_backward},
    [OP_LAYERNORM] = {"layernorm", layernorm_forward, layernorm_backward},
    [OP_RMSNORM] = {"rmsnorm", rmsnorm_forward, rmsnorm_backward},
    [OP_SOFTMAX] = {"softmax", softmax_forward, softmax_backward},
    [OP_EMBEDDING] = {"embedding", embedding_forward, embedding_backward},
    [OP_CROSS_ENTROPY] = {"cross_entropy", cross_entropy_forward, cross_entropy_backward},
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
