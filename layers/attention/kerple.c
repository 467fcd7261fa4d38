/* kerple.c: pos = kerple_power and pos = kerple_log (Chi et al. 2022,
 * "KERPLE: Kernelized Relative Positional Embedding for Length
 * Extrapolation"), learned biases on the scores by distance delta:
 *
 * kerple_power: b_h = -a_h delta^(p_h) with learned a_h, p_h, used as
 * a_h' = max(a_h, 0.01) and p_h' = min(max(p_h, 0.01), 2). As torch.clamp, a
 * clamped value passes no gradient; 0^p = 0 and its p-derivative is taken as 0
 * (no log 0). With g_h[delta] the score gradients summed at each distance:
 *   da_h = -sum_delta g_h[delta] delta^p',  dp_h = -a' sum_delta g_h[delta] delta^p' ln delta.
 * kerple_log: b_h = -r1_h log(1 + r2_h delta), r1', r2' = max(., 0.01):
 *   dr1_h = -sum g_h log(1 + r2' delta),  dr2_h = -r1' sum g_h delta / (1 + r2' delta).
 *
 * Both start as the KERPLE reference code (chijames/KERPLE,
 * megatron/mpu/layers.py) starts them: the factor in front of the kernel
 * (a, r1) and the exponent or inner scale (p, r2) uniform, a in [0, 1),
 * p in [0, 2), r1 in [0, 2), r2 in [0, 1), then clamped into range as the
 * reference clamps its parameters' data in place before each use (a draw
 * left below 0.01 would get no gradient here and never move). Their
 * parameters are blocks.{i}.attn.kerple_a, kerple_p (power) or kerple_r1,
 * kerple_r2 (log), [H] each. */
#include <math.h>

#include "attention/positions.h"

#define KERPLE_EPS 0.01f

static float clamp_lo(float x) { return x < KERPLE_EPS ? KERPLE_EPS : x; }
static float clamp_p(float x) { return x < KERPLE_EPS ? KERPLE_EPS : x > 2.0f ? 2.0f : x; }

/* ---- kerple_power ----------------------------------------------------------- */

static void power_bias(const PosBias *b, float *table) {
    int H = b->H, T = b->T;
    for (int h = 0; h < H; h++) {
        double a = clamp_lo(b->params[0][h]), p = clamp_p(b->params[1][h]);
        for (int d = 0; d < T; d++) table[(long)h * T + d] = d == 0 ? 0.0f : (float)(-a * pow(d, p));
    }
}

static void power_grads(const PosBias *b, const double *g, float *const *dp) {
    int T = b->T;
    const float *p0 = b->params[0], *p1 = b->params[1];
    for (int h = 0; h < b->H; h++) {
        const double *gh = g + (long)h * T;
        double s0 = 0.0, s1 = 0.0;
        double a = clamp_lo(p0[h]), p = clamp_p(p1[h]);
        for (int d = 1; d < T; d++) { /* delta = 0 adds nothing to either */
            double dpw = pow(d, p);
            s0 -= gh[d] * dpw;             /* d b / d a = -delta^p */
            s1 -= gh[d] * a * dpw * log(d); /* d b / d p = -a delta^p ln delta */
        }
        if (dp[0] && p0[h] >= KERPLE_EPS) dp[0][h] += (float)s0;
        if (dp[1] && p1[h] >= KERPLE_EPS && p1[h] <= 2.0f) dp[1][h] += (float)s1;
    }
}

static void power_init(Tensor *const *params, Rng *rng) {
    for (long h = 0; h < params[0]->n; h++) params[0]->data[h] = clamp_lo(1.0f * rng_uniform(rng));
    for (long h = 0; h < params[1]->n; h++) params[1]->data[h] = clamp_p(2.0f * rng_uniform(rng));
}

static const char *const power_params[] = {"kerple_a", "kerple_p", NULL};

const PosScheme pos_scheme_kerple_power = {
    .name = "kerple_power",
    .help = "-a_h |i - j|^p_h, learned",
    .bias = power_bias,
    .params = power_params,
    .param_grads = power_grads,
    .param_init = power_init,
};

/* ---- kerple_log --------------------------------------------------------------- */

static void log_bias(const PosBias *b, float *table) {
    int H = b->H, T = b->T;
    for (int h = 0; h < H; h++) {
        double r1 = clamp_lo(b->params[0][h]), r2 = clamp_lo(b->params[1][h]);
        for (int d = 0; d < T; d++) table[(long)h * T + d] = (float)(-r1 * log1p(r2 * d));
    }
}

static void log_grads(const PosBias *b, const double *g, float *const *dp) {
    int T = b->T;
    const float *p0 = b->params[0], *p1 = b->params[1];
    for (int h = 0; h < b->H; h++) {
        const double *gh = g + (long)h * T;
        double s0 = 0.0, s1 = 0.0;
        double r1 = clamp_lo(p0[h]), r2 = clamp_lo(p1[h]);
        for (int d = 1; d < T; d++) {
            s0 -= gh[d] * log1p(r2 * d);         /* d b / d r1 */
            s1 -= gh[d] * r1 * d / (1.0 + r2 * d); /* d b / d r2 */
        }
        if (dp[0] && p0[h] >= KERPLE_EPS) dp[0][h] += (float)s0;
        if (dp[1] && p1[h] >= KERPLE_EPS) dp[1][h] += (float)s1;
    }
}

static void log_init(Tensor *const *params, Rng *rng) {
    for (long h = 0; h < params[0]->n; h++) params[0]->data[h] = clamp_lo(2.0f * rng_uniform(rng));
    for (long h = 0; h < params[1]->n; h++) params[1]->data[h] = clamp_lo(1.0f * rng_uniform(rng));
}

static const char *const log_params[] = {"kerple_r1", "kerple_r2", NULL};

const PosScheme pos_scheme_kerple_log = {
    .name = "kerple_log",
    .help = "-r1_h log(1 + r2_h |i - j|), learned",
    .bias = log_bias,
    .params = log_params,
    .param_grads = log_grads,
    .param_init = log_init,
};
