/* softmax.c: the softmax kernel, attn=softmax: which op a call runs, its
 * parameters, its options and what the rest of the program asks of it.
 *
 * A call runs the plain op with positions (softmax_op.c: scaled dot-product
 * attention with masks and score biases), or, under talking_heads = pre,
 * post or both, Talking-Heads attention (Shazeer et al. 2020; talking.c).
 * The kernel's own parameters are either KERPLE's score-bias parameters
 * (a position scheme's learned bias: kerple_*, layers/attention/kerple.c) or the talking-heads matrices
 * (talking.c); config_validate refuses both at once. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "attention/positions.h"
#include "attention/softmax.h"
#include "attention/talking.h"
#include "softmax_parts.h"
#include "util.h"

/* ---- the kernel ---------------------------------------------------------- */

static bool talking(const AttnCall *c) { return ((const SoftmaxOpts *)c->opts)->talking_heads != TALKING_NONE; }

static Tensor *attn_softmax(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    return talking(c) ? attn_talking(c, q, k, v) : attn_softmax_plain(c, q, k, v);
}

/* The plain op's key tiles (precision bf16) read q, k, v through products
 * alone (softmax_op.c); talking heads reads them as floats. */
static bool attn_softmax_qkv16(const AttnCall *c) { return !talking(c); }

static Tensor *attn_softmax_probs(const AttnCall *c, Tensor *q, Tensor *k) {
    return talking(c) ? attn_talking_probs(c, q, k) : attn_softmax_plain_probs(c, q, k);
}

/* The position scheme's learned [H] parameters (pos = kerple_*); or the
 * talking-heads matrices. */
static void attn_softmax_declare(ParamSet *p, const char *prefix, int layer, const ModelConfig *c, Tensor **params) {
    int talking_heads = softmax_opts(c)->talking_heads;
    (void)layer;
    if (pos_param_count(c->pos)) {
        if (talking_heads != TALKING_NONE) DIE("talking_heads with pos=%s (config_validate refuses it)", pos_name(c->pos));
        pos_params_declare(p, prefix, c->pos, c->heads, params);
    } else {
        talking_declare(p, prefix, talking_heads, c->heads, params);
    }
}

static void attn_softmax_init(Tensor **params, int layer, const ModelConfig *c, Rng *rng) {
    (void)layer;
    if (pos_param_count(c->pos))
        pos_scheme(c->pos)->param_init(params, rng);
    else
        talking_init(params);
}

/* ---- what the rest of the program asks of this kernel ------------------------ */

static const char *const talking_names[] = {"none", "pre", "post", "both", NULL};
static const OptDef softmax_options[] = {
    {.name = "talking_heads",
     .type = OPT_CHOICE,
     .group = GROUP_MODEL,
     .offset = offsetof(SoftmaxOpts, talking_heads),
     .def = "none",
     .choices = talking_names,
     .help = "mix heads before and/or after the softmax"},
    {.name = NULL},
};

static int softmax_validate(const ModelConfig *m, bool (*changed)(const char *name, const void *ctx), const void *ctx,
                            Err *e) {
    const SoftmaxOpts *o = softmax_opts(m);
    (void)changed, (void)ctx;
    if (o->talking_heads == TALKING_NONE) return 0;
    if (pos_scheme(m->pos)->bias)
        return err_set(e, "--pos %s: score biases are added in the plain softmax kernel, and talking_heads=%s mixes whole score matrices",
                       pos_name(m->pos), talking_names[o->talking_heads]),
               err_hint(e, "use --pos rope, sinusoidal or learned with talking heads");
    if (m->window > 0 || m->bca == ON || m->logn == ON)
        return err_set(e, "--%s is done in the plain softmax kernel, and talking_heads=%s mixes whole score matrices",
                       m->window > 0 ? "window" : m->bca == ON ? "bca" : "logn", talking_names[o->talking_heads]);
    return 0;
}

/* The plain kernel keeps nothing T x T (forward's row statistics, one block
 * per thread); talking heads mixes whole score matrices: P of every head, and
 * two per head per thread. */
static double softmax_quadratic_bytes(const ModelConfig *m, int T, int threads) {
    if (softmax_opts(m)->talking_heads == TALKING_NONE) return 0;
    return 4.0 * (double)T * T * (m->heads + 2.0 * m->heads * threads);
}

/* The plain kernel's products over the keys each row sees, per head:
 * forward's q.k and P v, backward's q.k again, dP = dO V^T, dV, dQ and dK,
 * 2 sum_i n_i (4 key_size + 3 head_size) in all. Talking heads runs whole
 * T x T matrices and its head mixing; it is not counted. */
static double softmax_flops(const ModelConfig *m, int T) {
    return softmax_opts(m)->talking_heads != TALKING_NONE ? NAN : attn_masked_flops(m, T);
}

static void softmax_describe(const ModelConfig *m, char *buf, size_t size) {
    const SoftmaxOpts *o = softmax_opts(m);
    if (o->talking_heads != TALKING_NONE) snprintf(buf, size, " talking_heads=%s", talking_names[o->talking_heads]);
    else if (m->window > 0) snprintf(buf, size, " window=%d", m->window);
    else buf[0] = '\0';
}

const AttnKernel attn_kernel_softmax = {
    .name = "softmax",
    .declare = attn_softmax_declare,
    .init = attn_softmax_init,
    .forward = attn_softmax,
    .probs = attn_softmax_probs,
    .ops = {&attn_softmax_op, &attn_talking_op},
    .qkv16 = attn_softmax_qkv16,
    .title = "attn=softmax",
    .option_rows = softmax_options,
    .options_size = sizeof(SoftmaxOpts),
    .validate = softmax_validate,
    .describe = softmax_describe,
    .quadratic_bytes = softmax_quadratic_bytes,
    .flops = softmax_flops,
    .scores = true,
};
