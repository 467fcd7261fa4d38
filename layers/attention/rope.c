/* rope.c: pos = rope and pos = xpos, rotations of q and k by position, as one
 * op with a hand-written backward.
 *
 * RoPE (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position
 * Embedding"): at position t = 0..T-1 the adjacent pairs (x_2i, x_2i+1),
 * i < P = rope_dims / 2, turn by the angle t theta_i,
 *   theta_i = 10000^(-2i / D),  D = rope_dims,
 *   (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos),
 * so that R_i q . R_j k depends on i - j only. Dimensions from rope_dims on
 * pass unchanged (partial rotary).
 *
 * XPOS (Sun et al. 2023, "A Length-Extrapolatable Transformer"): RoPE times a
 * per-pair decay, following the torchscale reference
 * (torchscale/component/xpos_relative_position.py, offset 0):
 *   zeta_i = (2i + 0.4 D) / (1.4 D), D = the rotated dimensions (torchscale's
 *     head_dim, here rope_dims),
 *   q at position t is scaled by zeta_i^(t' / s), k by zeta_i^(-t' / s), s = 512,
 *   t' = t + min_pos, min_pos = floor(-T / 2) (torchscale's -(length) // 2),
 *     the centred position; both elements of pair i get zeta_i's factor;
 *   the angles use the uncentred t, as torchscale's do.
 * So q_i . k_j = sum over pairs of zeta^((i - j) / s) times RoPE's pair term:
 * a decay with the distance, independent of where the window starts.
 *
 * With a = 1 (rope) or the decay (xpos), forward is y = a R_t x, and backward
 * the transpose: dx += a R_t^T dy, i.e. with c = a cos, s = a sin
 *   dx1 += c dy1 + s dy2,  dx2 += -s dy1 + c dy2.
 * No parameters. The tables [T, P] of a cos and a sin come from the arena per
 * call (in node->saved, for backward); rows run on OpenMP threads. */
#include "rope.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "attention/positions.h"
#include "op_kernel.h"
#include "util.h"

int rope_pairs(int rope_dims, int d) {
    int r = rope_dims > 0 && rope_dims <= d ? rope_dims : d;
    return r / 2;
}

void rope_tables(int T, int P, double (*decay)(int i, int D), bool key, float *cs, float *sn) {
    double D = 2.0 * P;
    int min_pos = -((T + 1) / 2); /* floor(-T / 2) */
    #pragma omp parallel for if ((long)T * P >= 16384)
    for (int i = 0; i < P; i++) {
        double theta = pow(10000.0, -2.0 * i / D);
        /* zeta_i^(+-t' / s) = exp(+-t' log(zeta_i) / s) */
        double rate = decay ? decay(i, (int)D) * (key ? -1 : 1) : 0.0;
        for (int t = 0; t < T; t++) {
            double angle = t * theta, a = decay ? exp(rate * (t + min_pos)) : 1.0;
            cs[(long)t * P + i] = (float)(a * cos(angle));
            sn[(long)t * P + i] = (float)(a * sin(angle));
        }
    }
}

/* node: in[0] = x [B, H, T, d]; saved = [cs: T P][sn: T P]. */
typedef struct {
    int pairs; /* P, the rotated pairs */
    double (*decay)(int i, int D); /* the scheme's (NULL: none) */
    bool key;  /* x is k (XPOS's decay inverted), not q */
} RopeAttrs;
NODE_ATTRS_DECLARE(RopeAttrs);

static void attn_rope_forward(Node *n) {
    const Tensor *x = n->in[0];
    const RopeAttrs *a = NODE_ATTRS(n, RopeAttrs);
    int T = x->shape[2], d = x->shape[3], P = a->pairs;
    float *cs = n->saved, *sn = cs + (long)T * P;
    rope_tables(T, P, a->decay, a->key, cs, sn);
    long rows = x->n / d;
    #pragma omp parallel for if (x->n >= PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *restrict xr = x->data + r * d, *restrict c = cs + (r % T) * P, *restrict s = sn + (r % T) * P;
        float *restrict y = n->out->data + r * d;
        /* y = a R_t x on the pairs, x elsewhere */
        #pragma omp simd
        for (int i = 0; i < P; i++) {
            float x1 = xr[2 * i], x2 = xr[2 * i + 1];
            y[2 * i] = c[i] * x1 - s[i] * x2;
            y[2 * i + 1] = s[i] * x1 + c[i] * x2;
        }
        for (int e = 2 * P; e < d; e++) y[e] = xr[e];
    }
}

static void attn_rope_backward(Node *n) {
    Tensor *x = n->in[0];
    if (!x->requires_grad) return;
    int T = x->shape[2], d = x->shape[3], P = NODE_ATTRS(n, RopeAttrs)->pairs;
    const float *cs = n->saved, *sn = cs + (long)T * P;
    float *dx = tensor_grad(x);
    long rows = x->n / d;
    #pragma omp parallel for if (x->n >= PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *restrict g = n->out->grad + r * d, *restrict c = cs + (r % T) * P, *restrict s = sn + (r % T) * P;
        float *restrict dxr = dx + r * d;
        /* dx += a R_t^T dy */
        #pragma omp simd
        for (int i = 0; i < P; i++) {
            float g1 = g[2 * i], g2 = g[2 * i + 1];
            dxr[2 * i] += c[i] * g1 + s[i] * g2;
            dxr[2 * i + 1] += c[i] * g2 - s[i] * g1;
        }
        for (int e = 2 * P; e < d; e++) dxr[e] += g[e];
    }
}

OpDef attn_rope_op = {"attn_rope", attn_rope_forward, attn_rope_backward, 0};

Tensor *attn_rope(const AttnCall *c, Tensor *x, bool key) {
    const char *name = attn_rope_op.name;
    SHAPE_CHECK(x->ndim == 4, name, "x must be [B, H, T, d]", x, NULL);
    const PosScheme *scheme = pos_scheme(c->cfg->pos);
    if (!scheme->rotary) DIE("%s: pos=%s does not rotate", name, scheme->name);
    int T = x->shape[2], d = x->shape[3];
    /* an odd key size (the default rope_dims = key_size) keeps its last dimension */
    if (c->cfg->rope_dims < 0 || c->cfg->rope_dims > d || (c->cfg->rope_dims % 2 && c->cfg->rope_dims != d))
        DIE("%s: rope_dims %d must be even and at most the key size %d", name, c->cfg->rope_dims, d);
    int P = rope_pairs(c->cfg->rope_dims, d);
    Node *n = node_new(&attn_rope_op);
    n->n_in = 1;
    n->in[0] = x;
    *NODE_ATTRS(n, RopeAttrs) = (RopeAttrs){.pairs = P, .decay = scheme->decay, .key = key};
    n->saved = arena_alloc(engine_arena(), (2 * (size_t)T * P + 1) * sizeof(float));
    n->out = tensor_new(x->ndim, x->shape);
    return node_run(n);
}

/* ---- the schemes: rope and xpos ----------------------------------------------- */

/* XPOS's decay per position of pair i: log(zeta_i) / s. */
static double xpos_decay(int i, int D) { return log((2.0 * i + 0.4 * D) / (1.4 * D)) / XPOS_SCALE_BASE; }

static int rope_validate(const ModelConfig *m, bool scores, Err *e) {
    (void)scores;
    int dk = m->key_size ? m->key_size : m->d_model / m->heads;
    if (m->rope_dims % 2 != 0 || m->rope_dims > dk)
        return err_set(e, "--rope_dims %d: rotations act on pairs, so it must be even and at most key_size %d",
                       m->rope_dims, dk);
    return 0;
}

static int xpos_validate(const ModelConfig *m, bool scores, Err *e) {
    if (m->objective != OBJECTIVE_CLM)
        return err_set(e, "--pos xpos: its decay is defined for causal attention only, not objective=mlm"),
               err_hint(e, "use --pos rope for a bidirectional model");
    if (!scores)
        return err_set(e, "--pos xpos scales q and k by a decay that grows along the sequence; it needs a kernel with "
                          "an explicit score matrix"),
               err_hint(e, "kernels without a score matrix take --pos rope");
    return rope_validate(m, scores, e);
}

#define M(field) offsetof(ModelConfig, field)
static const OptDef rotary_options[] = {
    {.name = "rope_dims",
     .type = OPT_INT,
     .group = GROUP_MODEL,
     .offset = M(rope_dims),
     .def = "0",
     .min = 0,
     .max = 4096,
     .help = "pos=rope|xpos: dimensions of q and k that rotate (even); 0 = all"},
    {.name = NULL},
};
#undef M

const PosScheme pos_scheme_rope = {
    .name = "rope",
    .help = "q and k rotated by position",
    .rotary = true,
    .option_rows = rotary_options,
    .validate = rope_validate,
};

const PosScheme pos_scheme_xpos = {
    .name = "xpos",
    .help = "RoPE times a decay, causal only",
    .rotary = true,
    .decay = xpos_decay,
    .option_rows = rotary_options,
    .validate = xpos_validate,
};
