/* ops_shape.c: reshape and identity (views), and the head split/merge permutes. */
#include <string.h>

#include "gemm.h"
#include "ops_impl.h"

static Tensor *view(OpId id, Tensor *a, int ndim, const int *shape) {
    Node *n = node_with(id, 1, a, NULL, NULL);
    n->view = true;
    /* The output header is new; its data is a's. Nothing writes into an op's
     * output after forward, so sharing is safe. */
    n->out = arena_alloc(engine_arena(), sizeof(Tensor));
    tensor_wrap(n->out, a->data, ndim, shape);
    tensor_storage_share(n->out, a); /* of either element type */
    return node_run(n);
}

Tensor *op_reshape(Tensor *a, int ndim, const int *shape) {
    SHAPE_CHECK(ndim >= 0 && ndim <= TENSOR_MAX_DIMS, "reshape", "bad rank", a, NULL);
    if (shape_numel(ndim, shape) != a->n) {
        Tensor want;
        tensor_wrap(&want, NULL, ndim, shape);
        shape_fail("reshape", "element counts differ", a, &want);
    }
    return view(OP_RESHAPE, a, ndim, shape);
}

Tensor *op_identity(Tensor *x) { return view(OP_IDENTITY, x, x->ndim, x->shape); }

void op_view_forward(Node *n) { (void)n; /* the output already shares the input's data */ }

/* da += dout, element for element */
void op_view_backward(Node *n) {
    Tensor *a = n->in[0];
    if (!a->requires_grad) return;
    float *da = tensor_grad(a);
    const float *g = n->out->grad;
    #pragma omp parallel for if (a->n > PAR_MIN)
    for (long i = 0; i < a->n; i++) da[i] += g[i];
}

Tensor *op_split_heads(Tensor *x, int heads) { return op_split_heads_to(x, heads, DTYPE_F32); }

Tensor *op_split_heads_to(Tensor *x, int heads, DType out) {
    SHAPE_CHECK(x->ndim == 3, "split_heads", "wants [B, T, H*D]", x, NULL);
    SHAPE_CHECK(heads > 0 && x->shape[2] % heads == 0, "split_heads", "last dim not divisible by heads", x, NULL);
    Node *n = node_with(OP_SPLIT_HEADS, 1, x, NULL, NULL);
    n->out = tensor_new_of(out, 4, (int[]){x->shape[0], heads, x->shape[1], x->shape[2] / heads});
    return node_run(n);
}

Tensor *op_merge_heads(Tensor *x) { return op_merge_heads_to(x, DTYPE_F32); }

Tensor *op_merge_heads_to(Tensor *x, DType out) {
    SHAPE_CHECK(x->ndim == 4, "merge_heads", "wants [B, H, T, D]", x, NULL);
    Node *n = node_with(OP_MERGE_HEADS, 1, x, NULL, NULL);
    n->out = tensor_new_of(out, 3, (int[]){x->shape[0], x->shape[2], x->shape[1] * x->shape[3]});
    return node_run(n);
}

/* Copies between [B, T, H, D] (split = the layout of [B, T, H*D]) and
 * [B, H, T, D] (heads), D floats at a time. to_heads picks the direction;
 * accumulate adds instead of copying. */
static void add_row(float *restrict d, const float *restrict s, int D) {
    #pragma omp simd
    for (int k = 0; k < D; k++) d[k] += s[k];
}

static void permute_bthd(const float *src, float *dst, int B, int T, int H, int D, bool to_heads, bool accumulate) {
    #pragma omp parallel for collapse(2) if ((long)B * T * H * D > PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                long heads_at = (((long)b * H + h) * T + t) * D; /* [b, h, t, :] */
                long split_at = (((long)b * T + t) * H + h) * D; /* [b, t, h*D + :] */
                const float *s = src + (to_heads ? split_at : heads_at);
                float *d = dst + (to_heads ? heads_at : split_at);
                if (accumulate)
                    add_row(d, s, D);
                else
                    memcpy(d, s, (size_t)D * sizeof(float));
            }
}

/* The same copy into bf16 storage, each value rounded to nearest even (the
 * value a bf16 product reads). */
static void permute_bthd16(const float *src, uint16_t *dst, int B, int T, int H, int D, bool to_heads) {
    #pragma omp parallel for collapse(2) if ((long)B * T * H * D > PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                long heads_at = (((long)b * H + h) * T + t) * D;
                long split_at = (((long)b * T + t) * H + h) * D;
                const float *s = src + (to_heads ? split_at : heads_at);
                uint16_t *d = dst + (to_heads ? heads_at : split_at);
                #pragma omp simd
                for (int k = 0; k < D; k++) d[k] = bf16_from_float(s[k]);
            }
}

/* out[b, h, t, d] = x[b, t, h*D + d] */
void op_split_heads_forward(Node *n) {
    const Tensor *o = n->out;
    if (tensor_is16(o))
        permute_bthd16(n->in[0]->data, o->data16, o->shape[0], o->shape[2], o->shape[1], o->shape[3], true);
    else
        permute_bthd(n->in[0]->data, o->data, o->shape[0], o->shape[2], o->shape[1], o->shape[3], true, false);
}

void op_split_heads_backward(Node *n) {
    Tensor *x = n->in[0], *o = n->out;
    if (x->requires_grad)
        permute_bthd(o->grad, tensor_grad(x), o->shape[0], o->shape[2], o->shape[1], o->shape[3], false, true);
}

/* out[b, t, h*D + d] = x[b, h, t, d] */
void op_merge_heads_forward(Node *n) {
    const Tensor *x = n->in[0];
    if (tensor_is16(n->out))
        permute_bthd16(x->data, n->out->data16, x->shape[0], x->shape[2], x->shape[1], x->shape[3], false);
    else
        permute_bthd(x->data, n->out->data, x->shape[0], x->shape[2], x->shape[1], x->shape[3], false, false);
}

void op_merge_heads_backward(Node *n) {
    Tensor *x = n->in[0];
    if (x->requires_grad)
        permute_bthd(n->out->grad, tensor_grad(x), x->shape[0], x->shape[2], x->shape[1], x->shape[3], true, true);
}
