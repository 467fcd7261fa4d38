/* linear.c: the linear attention kernel, attn=linear, and its preset
 * attn=cosformer (= linear with phi = relu and cos re-weighting): its options,
 * the combinations it refuses, and its entry in the kernel registry. The
 * fused op it runs, forward and backward, is linear_op.c. */
#include <stddef.h>
#include <stdio.h>

#include "attention.h"
#include "attention/linear_op.h"
#include "util.h"

/* ---- what the rest of the program asks of this kernel ------------------------ */

static const char *const phi_names[] = {"identity", "relu", "leakyrelu", "elu", NULL};
static const char *const reweight_names[] = {"none", "cos", NULL};

/* attn = cosformer: this kernel with phi = relu and cos re-weighting. */
static void cosformer_preset(ModelConfig *m) {
    linear_opts(m)->phi = PHI_RELU;
    linear_opts(m)->reweight = REWEIGHT_COS;
}
static const char *const cosformer_fixes[] = {"phi", "reweight", NULL};
static const AttnPreset linear_presets[] = {{"cosformer", cosformer_preset, cosformer_fixes}, {NULL, NULL, NULL}};

#define M(field) offsetof(LinearOpts, field)
static const OptDef linear_options[] = {
    {"phi", OPT_CHOICE, GROUP_MODEL, M(phi), "relu", 0, 0, phi_names, 0,
     "linear attention's feature map (elu means elu + 1)", NULL},
    {"leaky_slope", OPT_FLOAT, GROUP_MODEL, M(leaky_slope), "0.01", 0, 1, NULL, 0, "slope of phi = leakyrelu", NULL},
    {"reweight", OPT_CHOICE, GROUP_MODEL, M(reweight), "none", 0, 0, reweight_names, 0,
     "cosFormer's cos re-weighting of linear attention", NULL},
    {"chunk", OPT_INT, GROUP_MODEL, M(chunk), "64", 1, 65536, NULL, 0, "chunk length of causal linear attention", NULL},
    {NULL, 0, 0, 0, NULL, 0, 0, NULL, 0, NULL, NULL},
};
#undef M

/* m has its preset applied (attn_effective). */
static int linear_validate(const ModelConfig *m, bool (*changed)(const char *name, const void *ctx), const void *ctx,
                           Err *e) {
    const LinearOpts *o = linear_opts(m);
    if (changed("leaky_slope", ctx) && o->phi != PHI_LEAKYRELU)
        return err_set(e, "--leaky_slope applies to phi=leakyrelu, not phi=%s", phi_names[o->phi]);
    if (m->objective == OBJECTIVE_MLM && changed("chunk", ctx))
        return err_set(e, "--chunk: chunks are how causal linear attention runs; objective=mlm is bidirectional and has none"),
               err_hint(e, "drop --chunk, or use --objective clm");
    if (m->pos == POS_ROPE && m->attn == ATTN_COSFORMER)
        return err_set(e, "--pos rope: attn=cosformer already encodes relative positions with its cos re-weighting"),
               err_hint(e, "use --attn linear --phi relu --pos rope");
    if (m->pos == POS_ROPE && o->reweight == REWEIGHT_COS)
        return err_set(e, "--pos rope: reweight=cos already encodes relative positions"), err_hint(e, "drop --reweight cos");
    return 0;
}

static void linear_describe(const ModelConfig *m, char *buf, size_t size) {
    const LinearOpts *o = linear_opts(m);
    snprintf(buf, size, " phi=%s%s", phi_names[o->phi], o->reweight == REWEIGHT_COS ? " reweight=cos" : "");
}

const AttnKernel attn_kernel_linear = {
    .name = "linear",
    .forward = attn_linear,
    .probs = attn_linear_probs,
    .ops = {&attn_linear_op},
    .rope_inside = true,
    .forward_qkv = attn_linear_qkv,
    .presets = linear_presets,
    .title = "linear attention",
    .option_rows = linear_options,
    .options_size = sizeof(LinearOpts),
    .validate = linear_validate,
    .describe = linear_describe,
};
