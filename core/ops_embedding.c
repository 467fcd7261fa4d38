/* ops_embedding.c: rows of a table picked by integer ids. */
#include <string.h>

#include "ops_impl.h"
#include "util.h"

Tensor *op_embedding(Tensor *w, const int *ids, int ndim, const int *shape) {
    SHAPE_CHECK(w->ndim == 2, "embedding", "table must be [V, D]", w, NULL);
    SHAPE_CHECK(ndim >= 0 && ndim < TENSOR_MAX_DIMS, "embedding", "ids need at most 3 dims", w, NULL);
    int out_shape[TENSOR_MAX_DIMS];
    for (int i = 0; i < ndim; i++) out_shape[i] = shape[i];
    out_shape[ndim] = w->shape[1];
    Node *n = node_with(OP_EMBEDDING, 1, w, NULL, NULL);
    n->ids = ids;
    n->out = tensor_new(ndim + 1, out_shape);
    return node_run(n);
}

/* out[r] = w[ids[r]] */
void op_embedding_forward(Node *n) {
    const Tensor *w = n->in[0];
    int V = w->shape[0], D = w->shape[1];
    long rows = n->out->n / (D ? D : 1);
    for (long r = 0; r < rows; r++) {
        int id = n->ids[r];
        if (id < 0 || id >= V) DIE("embedding: id %d at row %ld is outside [0, %d)", id, r, V);
        memcpy(n->out->data + r * D, w->data + (long)id * D, (size_t)D * sizeof(float));
    }
}

/* dw[ids[r]] += dout[r], in row order (ids repeat, so rows cannot go in parallel). */
void op_embedding_backward(Node *n) {
    Tensor *w = n->in[0];
    if (!w->requires_grad) return;
    int D = w->shape[1];
    long rows = n->out->n / (D ? D : 1);
    float *dw = tensor_grad(w);
    const float *g = n->out->grad;
    for (long r = 0; r < rows; r++) {
        float *dwr = dw + (long)n->ids[r] * D;
        for (int i = 0; i < D; i++) dwr[i] += g[r * D + i];
    }
}
