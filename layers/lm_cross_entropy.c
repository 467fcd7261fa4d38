/* lm_cross_entropy.c: the LM head and the cross-entropy as one fused op,
 *
 *   z_r = x_r W^T,   loss = (1 / count) sum over counted r of (logsumexp(z_r) - z_r[t_r]),
 *
 * a row counted when its target t_r is not ignore_index, and loss = 0 when
 * none is: op_cross_entropy(op_matmul(x, W, false, true), t, ignore_index).
 *
 *   x: (rows, d)   W: (V, d)   z, dz: (rows, V), never whole: a group's rows at a time
 *
 * Composed, a step writes the logits z [rows, V] in forward and keeps them
 * until backward, which writes their gradient, another [rows, V]: two
 * tensors of B T V floats, both alive when backward starts, each written and
 * read again outside sgemm. The fused op keeps one float per row, the row's
 * log-sum-exp. Forward makes the logits a block of BLOCK_ROWS rows at a time
 * (one sgemm; 64 x 256 floats is 64 KiB, in L2 for the pass over the rows
 * that follows). Backward makes each block's logits again (the same sgemm on
 * the same rows, so the same bits), turns them in place into
 *   dz_r = dloss / count (softmax(z_r) - onehot(t_r))   (0 on uncounted rows)
 * and adds dx_block += dz_block W. The price is that one product more.
 *
 * Threads and determinism. Blocks are shared out to the OpenMP threads and
 * each block's sgemm is called inside the parallel region, where OpenBLAS's
 * OpenMP build runs it on the calling thread: a product's bits depend on its
 * shape, not on the thread count, and each block writes only its own rows of
 * the scratch and of dx. dW += dz^T x sums over all rows, so blocks cannot
 * add into it concurrently. Rows go in groups of GROUP_ROWS (a fixed count,
 * not a share per thread): once a group's dz are all in the scratch, dW gets
 * the group's dz^T x as sgemms on disjoint slices of DW_SLICE_ROWS of W's
 * rows, each summing the group's rows in one order, and the groups add in
 * row order. Which sum each value goes to, and in which order, follows from
 * the shapes alone, so forward and backward give the same bits on any number
 * of threads, with OpenBLAS's products too (tested). One sgemm over all rows into dW
 * would need every row's dz at once ([rows, V], what the op saves) and would
 * be threaded by OpenBLAS, whose bits may change with the thread count;
 * per-thread partial dW summed at the end would change with it too. The
 * scratch is GROUP_ROWS x V floats (1 MiB at V = 256), in forward (the
 * group's logits) and again in backward (its dz), where the composition
 * holds 2 x rows x V (8 MiB for 4096 rows). */
#include "gemm.h"

#include "fastmath.h"
#include "layers.h"
#include "op_kernel.h"
#include "ops.h"
#include "util.h"

enum {
    BLOCK_ROWS = 64,     /* rows per sgemm, and per task */
    GROUP_ROWS = 1024,   /* rows whose dz are in the scratch together (16 blocks) */
    DW_SLICE_ROWS = 64,  /* W's rows per dW product (narrower slices made sgemm slower) */
};

typedef struct {
    int ignore_index;
    int counted; /* rows whose target is not ignore_index: set by forward, for backward */
} LmCrossEntropyAttrs;
NODE_ATTRS_DECLARE(LmCrossEntropyAttrs);

/* z [rows, V] = x [rows, d] W^T, one sgemm. */
static void block_logits(float *z, const float *x, const Tensor *w, long rows) {
    long V = w->shape[0], d = w->shape[1];
    gemm(false, true, rows, V, d, 1.0f, x, d, w->data, d, 0.0f, z, V);
}

static long min_long(long a, long b) { return a < b ? a : b; }

/* Scratch for one group's logits or dz: GROUP_ROWS rows, or all of them when fewer. */
static long scratch_floats(long M, long V) { return min_long(M, GROUP_ROWS) * V; }

/* per counted row: lse_r = logsumexp(z_r) (kept for backward), and the loss
 * term lse_r - z_r[t_r], summed in row order as op_cross_entropy sums it. */
static void lm_cross_entropy_forward(Node *n) {
    const Tensor *x = n->in[0], *w = n->in[1];
    LmCrossEntropyAttrs *a = NODE_ATTRS(n, LmCrossEntropyAttrs);
    long V = w->shape[0], d = w->shape[1], M = x->n / d;
    const int *t = n->ids, ignore = a->ignore_index;
    for (long r = 0; r < M; r++)
        if (t[r] != ignore && (t[r] < 0 || t[r] >= V))
            DIE("lm_cross_entropy: target %d at row %ld is outside [0, %ld)", t[r], r, V);
    float *lse = n->saved, *z = tensor_scratch(scratch_floats(M, V));
    long count = 0;
    double total = 0.0;
    for (long g0 = 0; g0 < M; g0 += GROUP_ROWS) {
        long group = min_long(GROUP_ROWS, M - g0), blocks = (group + BLOCK_ROWS - 1) / BLOCK_ROWS;
        #pragma omp parallel for schedule(dynamic)
        for (long b = 0; b < blocks; b++) {
            long r0 = g0 + b * BLOCK_ROWS, rows = min_long(BLOCK_ROWS, M - r0);
            float *zb = z + (r0 - g0) * V;
            block_logits(zb, x->data + r0 * d, w, rows);
            for (long i = 0; i < rows; i++) {
                long r = r0 + i;
                if (t[r] == ignore) continue;
                float *zr = zb + i * V;
                lse[r] = logsumexp_row(zr, (int)V);
                zr[0] = lse[r] - zr[t[r]]; /* the row's logits are done with: its first slot keeps its term */
            }
        }
        for (long r = g0; r < g0 + group; r++) {
            if (t[r] == ignore) continue;
            total += z[(r - g0) * V];
            count++;
        }
    }
    tensor_scratch_release(z, scratch_floats(M, V));
    a->counted = (int)count;
    n->out->data[0] = count ? (float)(total / (double)count) : 0.0f;
}

/* of loss = (1 / count) sum_r (lse_r - z_r[t_r]), z_r = x_r W^T:
 * dz_r = dloss / count (exp(z_r - lse_r) - onehot(t_r)) on counted rows, 0 on
 * the others; dx += dz W, dW += dz^T x. */
static void lm_cross_entropy_backward(Node *n) {
    Tensor *x = n->in[0], *w = n->in[1];
    const LmCrossEntropyAttrs *a = NODE_ATTRS(n, LmCrossEntropyAttrs);
    if (a->counted == 0 || (!x->requires_grad && !w->requires_grad)) return;
    long V = w->shape[0], d = w->shape[1], M = x->n / d;
    const int *t = n->ids, ignore = a->ignore_index;
    const float *lse = n->saved, scale = n->out->grad[0] / (float)a->counted;
    /* dW first: when x is W itself, its gradient is then zeroed and dx adds to it */
    float *dw = w->requires_grad ? tensor_grad(w) : NULL;
    bool fresh = false;
    float *dx = x->requires_grad ? tensor_grad_unset(x, &fresh) : NULL;
    float dx_beta = fresh ? 0.0f : 1.0f; /* a fresh dx is written whole by its blocks' sgemms */
    float *dz = tensor_scratch(scratch_floats(M, V));
    long slices = (V + DW_SLICE_ROWS - 1) / DW_SLICE_ROWS;
    for (long g0 = 0; g0 < M; g0 += GROUP_ROWS) {
        long group = min_long(GROUP_ROWS, M - g0), blocks = (group + BLOCK_ROWS - 1) / BLOCK_ROWS;
        #pragma omp parallel for schedule(dynamic)
        for (long b = 0; b < blocks; b++) {
            long r0 = g0 + b * BLOCK_ROWS, rows = min_long(BLOCK_ROWS, M - r0);
            float *zb = dz + (r0 - g0) * V;
            block_logits(zb, x->data + r0 * d, w, rows); /* forward's z, bit for bit */
            for (long i = 0; i < rows; i++) {
                long r = r0 + i;
                float *restrict zr = zb + i * V;
                if (t[r] == ignore) {
                    for (long v = 0; v < V; v++) zr[v] = 0.0f;
                    continue;
                }
                float l = lse[r];
                #pragma omp simd
                for (long v = 0; v < V; v++) zr[v] = scale * fm_expf(zr[v] - l);
                zr[t[r]] -= scale;
            }
            if (dx)
                gemm(false, false, rows, d, V, 1.0f, zb, V, w->data, d, dx_beta,
                            dx + r0 * d, d);
        }
        if (!dw) continue;
        #pragma omp parallel for schedule(dynamic)
        for (long s = 0; s < slices; s++) {
            long v0 = s * DW_SLICE_ROWS, nv = min_long(DW_SLICE_ROWS, V - v0);
            /* dW[v0 .. v0 + nv) += dz[:, v0 .. v0 + nv)^T x_group */
            gemm(true, false, nv, d, group, 1.0f, dz + v0, V, x->data + g0 * d, d,
                        1.0f, dw + v0 * d, d);
        }
    }
    tensor_scratch_release(dz, scratch_floats(M, V));
}

OpDef lm_cross_entropy_op = {"lm_cross_entropy", lm_cross_entropy_forward, lm_cross_entropy_backward, 0};

Tensor *op_lm_cross_entropy(Tensor *x, Tensor *w, const int *targets, int ignore_index) {
    const char *name = lm_cross_entropy_op.name;
    SHAPE_CHECK(w->ndim == 2 && w->shape[0] > 0 && w->shape[1] > 0, name, "W must be [V, d], neither 0", w, x);
    SHAPE_CHECK(x->ndim >= 1 && x->shape[x->ndim - 1] == w->shape[1], name, "x's last dim must be W's d", x, w);
    Node *n = node_new(&lm_cross_entropy_op);
    n->n_in = 2;
    n->in[0] = x, n->in[1] = w;
    n->ids = targets;
    NODE_ATTRS(n, LmCrossEntropyAttrs)->ignore_index = ignore_index;
    long rows = x->n / w->shape[1];
    n->saved = arena_alloc(engine_arena(), (size_t)rows * sizeof(float)); /* log-sum-exp per row */
    n->out = tensor_new(0, NULL);
    return node_run(n);
}
