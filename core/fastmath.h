/* fastmath.h: exp that the compiler can vectorise.
 *
 * libm's expf and tanhf are calls the vectoriser cannot inline, and they made
 * gelu and softmax cost more than the matmuls around them. fm_expf is the
 * classic scheme (Cody-Waite range reduction x = n ln2 + r, a degree-6
 * polynomial for e^r on |r| <= ln2/2, 2^n built in the exponent bits), branch
 * free so a loop over it becomes AVX-512. Relative error is below 2e-7 (about
 * 2 ulp) over the whole float range; exp(-inf) is exactly 0, which keeps masked
 * attention weights exactly zero, and exp(NaN) is NaN. We do not use
 * -ffast-math for this: it would change every other float expression in the
 * program. */
#ifndef ATTNLAB_FASTMATH_H
#define ATTNLAB_FASTMATH_H

#include <stdint.h>

static inline float fm_expf(float x) {
    const float hi = 88.3762626647949f, lo = -87.3365447505531f; /* e^hi ~ FLT_MAX, e^lo ~ FLT_MIN */
    /* Clamped so that NaN lands on hi too: n below then always fits an int32
     * (converting NaN to an integer is undefined behaviour); the NaN comes
     * back through the last select. */
    float xc = x < hi ? x : hi;
    xc = xc > lo ? xc : lo;
    /* n = round(x / ln2) by the 1.5 * 2^23 trick (round to nearest, no libm
     * call), r = x - n ln2 in two parts for accuracy */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    /* e^r = 1 + r + r^2 (c2 + r (c3 + ...)) (minimax coefficients, Cephes expf) */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float er = p * r * r + r + 1.0f;
    /* 2^n from its exponent bits; a union (valid C) rather than memcpy, which
     * the vectoriser does not see through. */
    union {
        int32_t i;
        float f;
    } scale = {.i = ((int32_t)n + 127) << 23};
    float y = er * scale.f;
    y = x > hi ? __builtin_inff() : y;
    y = x < lo ? 0.0f : y;
    return x == x ? y : x;
}

/* tanh(u) = 1 - 2 / (e^{2u} + 1): exact limits +-1, absolute error ~1e-7. */
static inline float fm_tanhf(float u) { return 1.0f - 2.0f / (fm_expf(2.0f * u) + 1.0f); }

/* sigmoid(x) = 1 / (1 + e^{-x}): exact limits 0 and 1. */
static inline float fm_sigmoidf(float x) { return 1.0f / (1.0f + fm_expf(-x)); }

/* GELU, tanh form: 0.5 x (1 + tanh u), u = c (x + a x^3); op_gelu's formula,
 * shared with gemm's epilogues (gemm.h) so a fused GELU gives its bits. */
#define FM_GELU_C 0.7978845608028654f /* sqrt(2 / pi) */
#define FM_GELU_A 0.044715f
static inline float fm_gelu(float x) { return 0.5f * x * (1.0f + fm_tanhf(FM_GELU_C * (x + FM_GELU_A * x * x * x))); }

/* d/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 a x^2) */
static inline float fm_gelu_slope(float x) {
    float t = fm_tanhf(FM_GELU_C * (x + FM_GELU_A * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * FM_GELU_C * (1.0f + 3.0f * FM_GELU_A * x * x);
}

#endif
