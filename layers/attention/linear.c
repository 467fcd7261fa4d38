/* linear.c: the linear attention kernel, attn=linear, and its preset
 * attn=cosformer (= linear with phi = relu and cos re-weighting): its options,
 * the combinations it refuses, and its entry in the kernel registry. The
 * fused op it runs, forward and backward, is linear_op.c. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "attention/linear.h"
#include "attention/linear_op.h"
#include "attention/positions.h"
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
static const AttnPreset linear_presets[] = {
    {.name = "cosformer", .apply = cosformer_preset, .fixes = cosformer_fixes},
    {.name = NULL},
};

#define M(field) offsetof(LinearOpts, field)
static const OptDef linear_options[] = {
    {.name = "phi",
     .type = OPT_CHOICE,
     .group = GROUP_MODEL,
     .offset = M(phi),
     .def = "relu",
     .choices = phi_names,
     .help = "linear attention's feature map (elu means elu + 1)"},
    {.name = "leaky_slope",
     .type = OPT_FLOAT,
     .group = GROUP_MODEL,
     .offset = M(leaky_slope),
     .def = "0.01",
     .min = 0,
     .max = 1,
     .help = "slope of phi = leakyrelu"},
    {.name = "reweight",
     .type = OPT_CHOICE,
     .group = GROUP_MODEL,
     .offset = M(reweight),
     .def = "none",
     .choices = reweight_names,
     .help = "cosFormer's cos re-weighting of linear attention"},
    {.name = "chunk",
     .type = OPT_INT,
     .group = GROUP_MODEL,
     .offset = M(chunk),
     .def = "64",
     .min = 1,
     .max = 65536,
     .help = "chunk length of causal linear attention"},
    {.name = NULL},
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
    /* a plain rotation: the kernel rotates the features itself (rope_inside) */
    const PosScheme *pos = pos_scheme(m->pos);
    bool rotates = pos->rotary && !pos->decay;
    if (rotates && attn_choice(m->attn)->preset == cosformer_preset)
        return err_set(e, "--pos %s: attn=cosformer already encodes relative positions with its cos re-weighting",
                       pos->name),
               err_hint(e, "use --attn linear --phi relu --pos %s", pos->name);
    if (rotates && o->reweight == REWEIGHT_COS)
        return err_set(e, "--pos %s: reweight=cos already encodes relative positions", pos->name),
               err_hint(e, "drop --reweight cos");
    return 0;
}

static void linear_describe(const ModelConfig *m, char *buf, size_t size) {
    const LinearOpts *o = linear_opts(m);
    snprintf(buf, size, " phi=%s%s", phi_names[o->phi], o->reweight == REWEIGHT_COS ? " reweight=cos" : "");
}

/* The products of linear_op.c's algorithm per head, forward and backward
 * (dq, dk and dv), 2 flops a multiply-add, with F features (2 dk under cos
 * re-weighting), dv1 = dv + 1 (dv with RoPE) and chunks of C rows. Causal,
 * per chunk of c rows: forward's A = phi(Q) phi(K)^T (c c dk), [Num, den]
 * (c dv1 (F + c), c dv1 c for the first chunk) and the state update
 * (F dv1 c, none after the last); the forward sweep of backward: D (c c dv1),
 * D phi(K) (c dk c), G' S'^T (c F dv1, not the first) and the state again
 * (not the last); the backward sweep: D, D^T phi(Q), V' U'^T (not the last),
 * A again, A^T G (c dv c), K~ U (c dv F, not the last) and U' (not the
 * first). Bidirectional: S' = K~^T V' twice (forward, and again for dq),
 * Num = Q~ S', G' S'^T, U' = Q~^T G', V' U'^T and K~ U, each T F dv1 (K~ U
 * T F dv). RoPE's denominator is a running sum, not counted. */
static double linear_flops(const ModelConfig *m, int T) {
    const LinearOpts *o = linear_opts(m);
    double dk = model_key_size(m), dv = model_head_size(m), F = o->reweight == REWEIGHT_COS ? 2 * dk : dk;
    double dv1 = pos_scheme(m->pos)->rotary ? dv : dv + 1, madd = 0;
    if (m->objective != OBJECTIVE_CLM) {
        madd = T * F * (6 * dv1 + dv);
    } else {
        int C = o->chunk < T ? o->chunk : T;
        for (int p0 = 0; p0 < T; p0 += C) {
            double c = T - p0 < C ? T - p0 : C;
            bool first = p0 == 0, last = p0 + C >= T;
            madd += c * c * dk + (first ? c * dv1 * c : c * dv1 * (F + c)) + (last ? 0 : F * dv1 * c);
            madd += c * c * dv1 + c * dk * c + (first ? 0 : c * F * dv1) + (last ? 0 : F * dv1 * c);
            madd += c * c * dv1 + c * c * dk + (last ? 0 : c * F * dv1) + c * c * dk + c * dv * c +
                    (last ? 0 : c * dv * F) + (first ? 0 : F * dv1 * c);
        }
    }
    return 2.0 * m->heads * madd;
}

const AttnKernel attn_kernel_linear = {
    .name = "linear",
    .forward = attn_linear,
    .probs = attn_linear_probs,
    .ops = {&attn_linear_op},
    .rope_inside = true,
    .qkv16 = attn_qkv_fp32, /* phi and the re-weighting read q, k elementwise */
    .forward_qkv = attn_linear_qkv,
    .presets = linear_presets,
    .title = "linear attention",
    .option_rows = linear_options,
    .options_size = sizeof(LinearOpts),
    .validate = linear_validate,
    .describe = linear_describe,
    .flops = linear_flops,
};
