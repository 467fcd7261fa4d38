/* sandwich.c: pos = sandwich (Chi et al. 2023, "Dissecting Transformer
 * Length Extrapolation via the Lens of Receptive Field Analysis"), a fixed
 * bias on the scores: the inner product of sinusoidal embeddings
 *   p_i . p_j = sum_k cos(delta w_k),  k = 0 .. d/2 - 1,
 * w_k = sinusoid_frequency(k, d) (layers/attention/sinusoidal.c), with
 * d = H * key_size (the model width at the default key_size), scaled per head
 * as in the authors' code, whose heads divide the bias by 8(h+1)/H, ALiBi's
 * slopes in linear rather than geometric steps:
 *   b_h = lambda sum_k cos(delta w_k) * H / (8 (h+1)),  lambda = sandwich_lambda.
 * (The reference also subtracts d/2, a constant per row that the softmax
 * ignores; we leave it out.) No parameters. */
#include <math.h>
#include <stddef.h>

#include "attention/positions.h"
#include "layers.h"

static void sandwich_bias(const PosBias *b, float *table) {
    int H = b->H, T = b->T, dim = H * b->dk;
    float lambda = b->cfg->sandwich_lambda;
    float *w = arena_alloc(engine_arena(), (size_t)(dim / 2 + 1) * sizeof(float)); /* once, not per distance */
    for (int k = 0; k < dim / 2; k++) w[k] = sinusoid_frequency(k, dim);
    for (int d = 0; d < T; d++) {
        double dot = 0.0;
        for (int k = 0; k < dim / 2; k++) dot += cos((double)d * w[k]);
        for (int h = 0; h < H; h++) table[(long)h * T + d] = (float)(lambda * dot * H / (8.0 * (h + 1)));
    }
}

#define M(field) offsetof(ModelConfig, field)
static const OptDef sandwich_options[] = {
    {.name = "sandwich_lambda",
     .type = OPT_FLOAT,
     .group = GROUP_MODEL,
     .offset = M(sandwich_lambda),
     .def = "1",
     .min = 0,
     .max = 1000,
     .help = "pos=sandwich: scale of the p_i . p_j bias"},
    {.name = NULL},
};
#undef M

const PosScheme pos_scheme_sandwich = {
    .name = "sandwich",
    .help = "lambda p_i . p_j with sinusoidal p",
    .bias = sandwich_bias,
    .option_rows = sandwich_options,
};
