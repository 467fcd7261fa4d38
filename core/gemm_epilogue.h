/* gemm_epilogue.h: gemm_ex's epilogue on a run of one output row, shared by
 * gemm's kernel (gemm_small.c, on a tile's row in registers) and gemm_ex's
 * unfused composition (gemm.c, on C's rows after the product), so both give
 * the same bits. Internal to core/gemm*.c. */
#ifndef ATTNLAB_GEMM_EPILOGUE_H
#define ATTNLAB_GEMM_EPILOGUE_H

#include "fastmath.h"
#include "gemm.h"

/* v: n values of output row i from column j (bias already in), finished as
 * gemm.h says: GELU (through pre16), GELU's gradient (slope16), the column
 * sums, then out16 or c (c: C's place of v[0]). fault: a GemmFault. */
static inline void gemm_epilogue_run(const GemmEpilogue *ep, int fault, float *v, int n, long i, int j,
                                     float *c) {
    if (ep->gelu) {
        if (ep->pre16) {
            uint16_t *p = ep->pre16 + i * ep->ld_pre + j;
            bool keep = fault == GEMM_FAULT_NO_PRE_ROUND;
#pragma omp simd
            for (int k = 0; k < n; k++) {
                uint16_t h = bf16_from_float(v[k]);
                p[k] = h;
                v[k] = keep ? v[k] : bf16_to_float(h);
            }
        }
#pragma omp simd
        for (int k = 0; k < n; k++) v[k] = fm_gelu(v[k]);
    }
    if (ep->slope16) {
        const uint16_t *s = ep->slope16 + i * ep->ld_slope + j;
        if (fault == GEMM_FAULT_SLOPE_OF_OUT) {
#pragma omp simd
            for (int k = 0; k < n; k++) v[k] *= fm_gelu_slope(v[k]);
        } else {
#pragma omp simd
            for (int k = 0; k < n; k++) v[k] *= fm_gelu_slope(bf16_to_float(s[k]));
        }
    }
    if (ep->colsum) {
        float *cs = ep->colsum + j;
#pragma omp simd
        for (int k = 0; k < n; k++) cs[k] += v[k];
    }
    if (ep->out16) {
        uint16_t *o = ep->out16 + i * ep->ld_out + j;
#pragma omp simd
        for (int k = 0; k < n; k++) o[k] = bf16_from_float(v[k]);
    } else {
        for (int k = 0; k < n; k++) c[k] = v[k];
    }
}

/* Whether the epilogue has anything past the bias. */
static inline bool gemm_epilogue_rest(const GemmEpilogue *ep) {
    return ep && (ep->gelu || ep->slope16 || ep->colsum || ep->out16);
}

#endif
