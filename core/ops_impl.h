/* ops_impl.h: what the core/ops_*.c files share. Not for use outside core. */
#ifndef ATTNLAB_OPS_IMPL_H
#define ATTNLAB_OPS_IMPL_H

#include "op_kernel.h"
#include "ops.h"

/* A new node with its inputs set; the constructor then sets out and attributes. */
Node *node_with(OpId id, int n_in, Tensor *a, Tensor *b, Tensor *c);

#define OP_DECLARE(name)              \
    void op_##name##_forward(Node *n);  \
    void op_##name##_backward(Node *n);

OP_DECLARE(matmul)
OP_DECLARE(linear)
OP_DECLARE(add)
OP_DECLARE(mul)
OP_DECLARE(div)
OP_DECLARE(scale)
OP_DECLARE(sum)
OP_DECLARE(mean)
OP_DECLARE(view)
OP_DECLARE(split_heads)
OP_DECLARE(merge_heads)
OP_DECLARE(gelu)
OP_DECLARE(relu)
OP_DECLARE(leakyrelu)
OP_DECLARE(elu)
OP_DECLARE(exp)
OP_DECLARE(sigmoid)
OP_DECLARE(layernorm)
OP_DECLARE(rmsnorm)
OP_DECLARE(add_layernorm)
OP_DECLARE(add_rmsnorm)
OP_DECLARE(softmax)
OP_DECLARE(embedding)
OP_DECLARE(cross_entropy)

#endif
