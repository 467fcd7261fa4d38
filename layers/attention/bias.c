/* bias.c: score biases by distance, added to the softmax kernel's logits
 * (layers/attention/softmax_op.c) after the scale and after log-n scaling:
 *   z_ij = lambda_i s q_i . k_j + b_h(delta),
 * delta = i - j (causal) or |i - j| (bidirectional). Each depends on delta
 * only, so a call makes one table b_h[delta], delta = 0 .. T-1, per head h
 * (0-based, H heads), and backward hands back g_h[delta], the sum of dz over
 * the entries at that distance, from which the parameters' gradients follow.
 *
 * pos = alibi (Press et al. 2022, "Train Short, Test Long: Attention with
 * Linear Biases"): b_h = -m_h delta. For H a power of two, m_h = 2^(-8(h+1)/H);
 * otherwise the slopes of the nearest lower power of two n, then every other
 * slope of 2n (m_0, m_2, ...) until there are H. No parameters.
 *
 * pos = kerple_power (Chi et al. 2022, "KERPLE: Kernelized Relative
 * Positional Embedding for Length Extrapolation"): b_h = -a_h delta^(p_h)
 * with learned a_h, p_h, used as a_h' = max(a_h, 0.01) and
 * p_h' = min(max(p_h, 0.01), 2). As torch.clamp, a clamped value passes no
 * gradient; 0^p = 0 and its p-derivative is taken as 0 (no log 0). Gradients:
 *   da_h = -sum_delta g_h[delta] delta^p',  dp_h = -a' sum_delta g_h[delta] delta^p' ln delta.
 * pos = kerple_log: b_h = -r1_h log(1 + r2_h delta), r1', r2' = max(., 0.01):
 *   dr1_h = -sum g_h log(1 + r2' delta),  dr2_h = -r1' sum g_h delta / (1 + r2' delta).
 * Both start as the KERPLE reference code (chijames/KERPLE,
 * megatron/mpu/layers.py) starts them: the factor in front of the kernel
 * (a, r1) and the exponent or inner scale (p, r2) uniform, a in [0, 1),
 * p in [0, 2), r1 in [0, 2), r2 in [0, 1), then clamped into range as the
 * reference clamps its parameters' data in place before each use (a draw
 * left below 0.01 would get no gradient here and never move).
 *
 * pos = sandwich (Chi et al. 2023, "Dissecting Transformer Length
 * Extrapolation via the Lens of Receptive Field Analysis"): the inner product
 * of sinusoidal embeddings p_i . p_j = sum_k cos(delta w_k), k = 0 .. d/2 - 1,
 * w_k = sinusoid_frequency(k, d) (layers/attention/sinusoidal.c), with
 * d = H * key_size (the model width at the default key_size), scaled per head
 * as in the authors' code, whose heads divide the bias by 8(h+1)/H, ALiBi's
 * slopes in linear rather than geometric steps:
 *   b_h = lambda sum_k cos(delta w_k) * H / (8 (h+1)),  lambda = sandwich_lambda.
 * (The reference also subtracts d/2, a constant per row that the softmax
 * ignores; we leave it out.) No parameters. */
#include <math.h>

#include "attention/positions.h"
#include "layers.h"

#define KERPLE_EPS 0.01f

bool pos_has_bias(int pos) {
    return pos == POS_ALIBI || pos == POS_KERPLE_POWER || pos == POS_KERPLE_LOG || pos == POS_SANDWICH;
}

int pos_bias_n_params(int pos) { return pos == POS_KERPLE_POWER || pos == POS_KERPLE_LOG ? 2 : 0; }

/* ALiBi's slopes for n heads (n >= 1) into m[0 .. n). */
void alibi_slopes(int n, float *m) {
    int p2 = 1;
    while (p2 * 2 <= n) p2 *= 2;
    for (int h = 0; h < p2; h++) m[h] = (float)pow(2.0, -8.0 * (h + 1) / p2);
    /* every other slope of 2 p2 heads: 2^(-8(2i+1) / (2 p2)), i = 0, 1, ... */
    for (int h = p2; h < n; h++) m[h] = (float)pow(2.0, -8.0 * (2 * (h - p2) + 1) / (2.0 * p2));
}

static float clamp_lo(float x) { return x < KERPLE_EPS ? KERPLE_EPS : x; }
static float clamp_p(float x) { return x < KERPLE_EPS ? KERPLE_EPS : x > 2.0f ? 2.0f : x; }

void pos_bias_table(int pos, int H, int T, int dk, float lambda, const float *p0, const float *p1, float *table) {
    if (pos == POS_ALIBI) {
        float m[H];
        alibi_slopes(H, m);
        for (int h = 0; h < H; h++)
            for (int d = 0; d < T; d++) table[(long)h * T + d] = -m[h] * (float)d;
    } else if (pos == POS_KERPLE_POWER) {
        for (int h = 0; h < H; h++) {
            double a = clamp_lo(p0[h]), p = clamp_p(p1[h]);
            for (int d = 0; d < T; d++) table[(long)h * T + d] = d == 0 ? 0.0f : (float)(-a * pow(d, p));
        }
    } else if (pos == POS_KERPLE_LOG) {
        for (int h = 0; h < H; h++) {
            double r1 = clamp_lo(p0[h]), r2 = clamp_lo(p1[h]);
            for (int d = 0; d < T; d++) table[(long)h * T + d] = (float)(-r1 * log1p(r2 * d));
        }
    } else if (pos == POS_SANDWICH) {
        int dim = H * dk;
        float *w = arena_alloc(engine_arena(), (size_t)(dim / 2 + 1) * sizeof(float)); /* once, not per distance */
        for (int k = 0; k < dim / 2; k++) w[k] = sinusoid_frequency(k, dim);
        for (int d = 0; d < T; d++) {
            double dot = 0.0;
            for (int k = 0; k < dim / 2; k++) dot += cos((double)d * w[k]);
            for (int h = 0; h < H; h++) table[(long)h * T + d] = (float)(lambda * dot * H / (8.0 * (h + 1)));
        }
    } else {
        for (long e = 0; e < (long)H * T; e++) table[e] = 0.0f;
    }
}

void pos_bias_param_grads(int pos, int H, int T, const float *p0, const float *p1, const double *g, float *dp0,
                          float *dp1) {
    for (int h = 0; h < H; h++) {
        const double *gh = g + (long)h * T;
        double s0 = 0.0, s1 = 0.0;
        if (pos == POS_KERPLE_POWER) {
            double a = clamp_lo(p0[h]), p = clamp_p(p1[h]);
            for (int d = 1; d < T; d++) { /* delta = 0 adds nothing to either */
                double dp = pow(d, p);
                s0 -= gh[d] * dp;             /* d b / d a = -delta^p */
                s1 -= gh[d] * a * dp * log(d); /* d b / d p = -a delta^p ln delta */
            }
        } else if (pos == POS_KERPLE_LOG) {
            double r1 = clamp_lo(p0[h]), r2 = clamp_lo(p1[h]);
            for (int d = 1; d < T; d++) {
                s0 -= gh[d] * log1p(r2 * d);         /* d b / d r1 */
                s1 -= gh[d] * r1 * d / (1.0 + r2 * d); /* d b / d r2 */
            }
        } else {
            return;
        }
        bool pass0 = p0[h] >= KERPLE_EPS;
        bool pass1 = pos == POS_KERPLE_POWER ? p1[h] >= KERPLE_EPS && p1[h] <= 2.0f : p1[h] >= KERPLE_EPS;
        if (dp0 && pass0) dp0[h] += (float)s0;
        if (dp1 && pass1) dp1[h] += (float)s1;
    }
}

void pos_bias_init(int pos, Tensor *p0, Tensor *p1, Rng *rng) {
    if (!p0 || !p1) return;
    float s0 = pos == POS_KERPLE_POWER ? 1.0f : 2.0f, s1 = pos == POS_KERPLE_POWER ? 2.0f : 1.0f;
    for (long h = 0; h < p0->n; h++) p0->data[h] = clamp_lo(s0 * rng_uniform(rng));
    for (long h = 0; h < p1->n; h++) {
        float x = s1 * rng_uniform(rng);
        p1->data[h] = pos == POS_KERPLE_POWER ? clamp_p(x) : clamp_lo(x);
    }
}

void pos_bias_declare(ParamSet *p, const char *prefix, int pos, int H, Tensor **params) {
    if (!pos_bias_n_params(pos)) return;
    char buf[128];
    bool power = pos == POS_KERPLE_POWER;
    params[0] = params_add(p, param_name(buf, prefix, power ? "kerple_a" : "kerple_r1"), 1, (int[]){H});
    params[1] = params_add(p, param_name(buf, prefix, power ? "kerple_p" : "kerple_r2"), 1, (int[]){H});
}
