/* gemm_small_parts.h: what gemm's vector kernel (gemm_small.c) and its AMX
 * tiles (gemm_amx.c) share: the packing, the threads' buffers, and how a
 * tile's sums are finished. Internal to those two files. */
#ifndef ATTNLAB_GEMM_SMALL_PARTS_H
#define ATTNLAB_GEMM_SMALL_PARTS_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gemm.h"
#include "gemm_epilogue.h"

#define AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

enum { MR = 8, NR = 32 };

/* The packing buffers of each thread: op(A) of the product it makes, the
 * panel of op(B) it is working on, and AMX's (gemm_amx.c). They are the
 * thread's own (a thread-local pointer), and a pthread key frees them when
 * a thread ends (libgomp ends threads when the thread count falls), so none
 * is lost. */
typedef struct {
    uint32_t *p;
    size_t cap;
} Buffer;
typedef struct {
    Buffer a, panel, across, whole; /* across: op(A)'s pair rows before AMX's transpose; whole: all of op(B) */
} ThreadBuffers;
ThreadBuffers *small_buffers(void);
/* b grown to n words at least; its words. */
uint32_t *small_buffer(Buffer *b, size_t n);
/* The thread's buffer for op(A), n words. */
uint32_t *small_pack_space(size_t n);

static inline __mmask16 first(int n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n > 0 ? n : 0)) - 1); }

/* An operand as stored: floats, or bf16 values already rounded (gemm_ex). */
typedef struct {
    const void *p;
    bool h;
} Operand;

static inline const void *at(Operand x, long off) {
    return x.h ? (const void *)((const uint16_t *)x.p + off) : (const void *)((const float *)x.p + off);
}

/* Row off of x (K values) as Kp = ceil(K / 2) bf16 pairs; a missing last k is 0. */
void small_pack_row(uint32_t *out, Operand x, long off, int K);
/* X stored K x cols (row stride ld, from off) as Kp pair rows of width w
 * >= cols, a multiple of 16 (the columns past cols are 0). */
void small_pack_across(uint32_t *out, int w, Operand X, long off, int ld, int K, int cols);
/* X stored cols x K as Kp pair rows of width w (tmp: 16 Kp16 words). */
void small_pack_down(uint32_t *out, int w, Operand X, long off, int ld, int K, int cols, uint32_t *tmp);
/* The transpose of a 16 x 16 block of 32-bit values, rows r[0..15] in place. */
AVX512_BF16 void small_transpose16(__m512i r[16]);

/* How a tile ends: the bias in beta C's place (a product's first block of
 * K), the epilogue (its last block), the deliberate fault (tests). */
typedef struct {
    const float *bias;
    const GemmEpilogue *ep;
    int fault;
} TileEnd;

/* A tile's sums (rows i0 .. i0 + mr - 1 of C, columns j0 .. j0 + nc - 1;
 * mr <= MR, nc <= NR) finished: alpha times them + beta C, or, as end says,
 * the bias in beta C's place, then the epilogue on each row (C NULL: the
 * epilogue writes bf16 alone). Inlined, so that the plain tile (end NULL)
 * keeps its registers to itself. */
AVX512_BF16 static inline __attribute__((always_inline)) void tile_put(__m512 acc[MR][2], int mr, int nc, float alpha,
                                                                        float beta, float *C, int ldc, long i0,
                                                                        int j0, const TileEnd *end) {
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const float *bias = end ? end->bias : NULL;
    const GemmEpilogue *ep = end ? end->ep : NULL;
    float t[NR];
    /* the column sums in registers over the tile's rows, added in row order
     * as gemm_epilogue_run adds them (its own would go through memory at
     * every row: a store and a load in each sum's chain) */
    GemmEpilogue rest;
    __m512 cs[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    bool sums = ep && ep->colsum;
    if (sums) {
        rest = *ep;
        rest.colsum = NULL;
        for (int h = 0; h < 2; h++) cs[h] = _mm512_maskz_loadu_ps(first(nc - 16 * h), ep->colsum + j0 + 16 * h);
        ep = &rest;
    }
    for (int r = 0; r < mr; r++) {
        float *c = C ? C + (long)r * ldc : NULL;
        for (int h = 0; h < 2; h++) {
            __mmask16 m = first(nc - 16 * h);
            if (!m) continue;
            __m512 v = _mm512_mul_ps(va, acc[r][h]);
            if (bias) {
                __m512 bv = _mm512_maskz_loadu_ps(m, bias + j0 + 16 * h);
                v = _mm512_add_ps(bv, v);
                if (end->fault == GEMM_FAULT_BIAS_TWICE) v = _mm512_add_ps(bv, v);
            } else if (beta != 0) {
                v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, c + 16 * h), v);
            }
            if (ep) _mm512_storeu_ps(t + 16 * h, v);
            else _mm512_mask_storeu_ps(c + 16 * h, m, v);
        }
        if (ep) gemm_epilogue_run(ep, end->fault, t, nc < NR ? nc : NR, i0 + r, j0, c);
        if (sums)
            for (int h = 0; h < 2; h++) cs[h] = _mm512_add_ps(cs[h], _mm512_maskz_loadu_ps(first(nc - 16 * h), t + 16 * h));
    }
    if (sums)
        for (int h = 0; h < 2; h++) _mm512_mask_storeu_ps(end->ep->colsum + j0 + 16 * h, first(nc - 16 * h), cs[h]);
}

/* AMX tiles (gemm_amx.c): a thread's tile configuration before its share
 * of a product, and its release after; a product counted as made on tiles;
 * op(A) packed as the tiles read it (*ar its row stride in pairs, or -Kp16
 * when packed as whole tiles of 1 KiB: gemm_amx.c); one
 * panel of C's columns for every row of op(A); and a tall op(A) taken in
 * chunks of rows (false, having done nothing, when op(A) is not tall). */
void amx_begin(void);
void amx_end(void);
void amx_count(void);
const uint32_t *pack_a_rows(bool ta, int M, int K, Operand A, int lda, long *ar);
void amx_panel(int M, int nc, int Kp, const uint32_t *pa, long ar, const uint32_t *pb, float alpha, float beta,
               float *C, int ldc, long row0, int j0, const TileEnd *end);
bool amx_tall(bool ta, bool tb, int M, int N, int K, float alpha, Operand A, int lda, Operand B, int ldb, float beta,
              float *C, int ldc, const TileEnd *end, bool split);

#endif
