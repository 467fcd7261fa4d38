/* gemm_small.c: small bf16 products on AVX512-BF16's dot-product instruction.
 *
 * The attention kernels' blocks (64 query rows against a head's keys) and
 * the other products under GEMM_BF16_MIN_MADDS are too small for oneDNN's
 * cost per call. Here they run on vdpbf16ps, which multiplies pairs of bf16
 * values and adds both products into an fp32 lane: twice the multiply-adds
 * of an fp32 FMA per instruction, and the rule of gemm.h (inputs rounded to
 * nearest even, products exact in fp32, sums in fp32). Like every bf16
 * instruction it reads subnormal inputs (below 2^-126) as 0 and flushes a
 * subnormal sum to 0: far below any value a model's products carry.
 *
 * Both operands are packed as bf16 pairs along K: op(A) row by row (pair p
 * of row i holds k = 2p and 2p + 1), op(B) as pair rows of 16-column
 * vectors. Rounding happens while packing (vcvtne2ps2bf16), so the packing
 * replaces the rounding pass it stands in for. The kernel computes an 8 x 32
 * tile of C in 16 registers. Each output is one sum in a fixed order of k,
 * whatever the thread count. The packed buffers are per thread and grow to
 * the largest product, so a training step makes no malloc after its first.
 * Where the CPU has AMX tiles, the same products run on them (gemm_amx.c). */
#include "gemm_small.h"

#include <assert.h>
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "gemm.h"
#include "gemm_epilogue.h"
#include "gemm_small_parts.h"

bool gemm_small_available(void) {
    static int have = -1;
    if (have < 0) {
        __builtin_cpu_init();
        /* ATTNLAB_NO_AVX512BF16 set: as on a CPU without the instructions
         * (make check-no-bf16, with oneDNN's DNNL_MAX_CPU_ISA below them) */
        const char *off = getenv("ATTNLAB_NO_AVX512BF16");
        have = !(off && *off) && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
    }
    return have;
}

static _Thread_local ThreadBuffers *mine;
static pthread_key_t buffers_key;
static pthread_once_t buffers_once = PTHREAD_ONCE_INIT;

static void buffers_free(void *p) {
    ThreadBuffers *b = p;
    free(b->a.p);
    free(b->panel.p);
    free(b->across.p);
    free(b->whole.p);
    free(b);
}

static void buffers_key_make(void) {
    if (pthread_key_create(&buffers_key, buffers_free) != 0) DIE("gemm_small: pthread_key_create failed");
}

ThreadBuffers *small_buffers(void) {
    if (!mine) {
        pthread_once(&buffers_once, buffers_key_make);
        mine = calloc_check(1, sizeof *mine, __FILE__, __LINE__);
        pthread_setspecific(buffers_key, mine);
    }
    return mine;
}

uint32_t *small_buffer(Buffer *b, size_t n) {
    if (n > b->cap) {
        free(b->p);
        b->cap = n + n / 4;
        b->p = malloc_check(b->cap * sizeof *b->p, __FILE__, __LINE__);
    }
    return b->p;
}

uint32_t *small_pack_space(size_t n) { return small_buffer(&small_buffers()->a, n); }

/* Row x (K floats) as Kp = ceil(K / 2) bf16 pairs; a missing last k is 0. */
AVX512_BF16 static void pack_row(uint32_t *out, const float *x, int K) {
    for (int k = 0; k < K; k += 32) {
        int n = K - k;
        __m512 lo = _mm512_maskz_loadu_ps(first(n), x + k), hi = _mm512_maskz_loadu_ps(first(n - 16), x + k + 16);
        __m512i v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        _mm512_mask_storeu_epi32(out + k / 2, first((n + 1) / 2), v);
    }
}

/* The same from a row stored in bf16: a copy. */
static void pack_row16(uint32_t *out, const uint16_t *x, int K) {
    memcpy(out, x, sizeof *x * (size_t)K);
    if (K & 1) ((uint16_t *)out)[K] = 0;
}

void small_pack_row(uint32_t *out, Operand x, long off, int K) {
    if (x.h) pack_row16(out, (const uint16_t *)x.p + off, K);
    else pack_row(out, (const float *)x.p + off, K);
}

/* Two rows x0, x1 of n <= 16 values as n pairs (x0[j], x1[j]); x1 NULL: 0. */
AVX512_BF16 static __m512i pair_rows(const float *x0, const float *x1, int n) {
    static const short interleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                         8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    __m512 a = _mm512_maskz_loadu_ps(first(n), x0);
    __m512 b = x1 ? _mm512_maskz_loadu_ps(first(n), x1) : _mm512_setzero_ps();
    __m512i v = (__m512i)_mm512_cvtne2ps_pbh(b, a);
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(interleave), v);
}

/* The same from rows stored in bf16. */
AVX512_BF16 static __m512i pair_rows16(const uint16_t *x0, const uint16_t *x1, int n) {
    __m512i a = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(first(n), x0));
    if (!x1) return a;
    __m512i b = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(first(n), x1));
    return _mm512_or_si512(a, _mm512_slli_epi32(b, 16));
}

/* X stored K x cols (row stride ld) as Kp pair rows of width w >= cols, a
 * multiple of 16 (the columns past cols are 0): out[p w + j] = (X[2p][j],
 * X[2p + 1][j]). */
AVX512_BF16 void small_pack_across(uint32_t *out, int w, Operand X, long off, int ld, int K, int cols) {
    assert(w % 16 == 0 && w >= cols);
    for (int p = 0; p < (K + 1) / 2; p++) {
        long r0 = off + (long)2 * p * ld;
        bool two = 2 * p + 1 < K;
        for (int j = 0; j < w; j += 16) {
            __m512i v;
            if (X.h) {
                const uint16_t *x0 = (const uint16_t *)X.p + r0 + j;
                v = pair_rows16(x0, two ? x0 + ld : NULL, cols - j);
            } else {
                const float *x0 = (const float *)X.p + r0 + j;
                v = pair_rows(x0, two ? x0 + ld : NULL, cols - j);
            }
            _mm512_storeu_si512(out + (long)p * w + j, v);
        }
    }
}

/* The transpose of a 16 x 16 block of 32-bit values, rows r[0..15] in place. */
AVX512_BF16 void small_transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* now each 128-bit lane q of row i holds 4 values of column group q */
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

/* X stored cols x K (each column of op(X) a stored row; row stride ld) as
 * Kp pair rows of width w: the rows' pairs, transposed 16 x 16 at a time. */
AVX512_BF16 void small_pack_down(uint32_t *out, int w, Operand X, long off, int ld, int K, int cols,
                                   uint32_t *tmp) {
    assert(w % 16 == 0 && w >= cols);
    int Kp = (K + 1) / 2, Kp16 = (Kp + 15) & ~15;
    for (int j0 = 0; j0 < w; j0 += 16) {
        for (int j = 0; j < 16; j++) {
            uint32_t *row = tmp + (long)j * Kp16;
            memset(row, 0, sizeof *row * (size_t)Kp16);
            if (j0 + j < cols) small_pack_row(row, X, off + (long)(j0 + j) * ld, K);
        }
        for (int p0 = 0; p0 < Kp; p0 += 16) {
            __m512i r[16];
            for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_si512(tmp + (long)j * Kp16 + p0);
            small_transpose16(r);
            for (int p = 0; p < 16 && p0 + p < Kp; p++) _mm512_storeu_si512(out + (long)(p0 + p) * w + j0, r[p]);
        }
    }
}

/* The sums of a tile: acc[r][h] = sum_p a(r, p) . b(p, 16 h ..), a(r, p) at
 * a[r ar + p ap], b's pair row p at b + p w. Inlined into each of the two
 * tiles below, so that the plain one keeps its registers to itself. */
AVX512_BF16 static inline __attribute__((always_inline)) void tile_sums(__m512 acc[MR][2], int Kp, const uint32_t *a,
                                                                         long ar, long ap, const uint32_t *b, int w) {
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int p = 0; p < Kp; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + (long)p * w), b1 = (__m512bh)_mm512_loadu_si512(b + (long)p * w + 16);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[r * ar + p * ap]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
    }
}

/* C's rows i0 .. i0 + mr - 1, columns j0 .. j0 + nc - 1: alpha times the
 * sums + beta C. */
AVX512_BF16 static void tile(int mr, int nc, int Kp, const uint32_t *a, long ar, long ap, const uint32_t *b, int w,
                             float alpha, float beta, float *C, int ldc) {
    /* C's lines on their way while the sums run: read back when beta is not
     * 0, written in any case (a product's C is seldom in cache: a step's
     * dX and dW tiles were last touched a whole product ago) */
    if (Kp >= 16)
        for (int r = 0; r < mr; r++) {
            _mm_prefetch((const char *)(C + (long)r * ldc), _MM_HINT_T0);
            if (nc > 16) _mm_prefetch((const char *)(C + (long)r * ldc + 16), _MM_HINT_T0);
        }
    __m512 acc[MR][2];
    tile_sums(acc, Kp, a, ar, ap, b, w);
    tile_put(acc, mr, nc, alpha, beta, C, ldc, 0, 0, NULL);
}

/* The same tile (C's place i0, j0 in the product) ending as end says. */
AVX512_BF16 static void tile_end(int mr, int nc, int Kp, const uint32_t *a, long ar, long ap, const uint32_t *b, int w,
                                 float alpha, float beta, float *C, int ldc, long i0, int j0, const TileEnd *end) {
    __m512 acc[MR][2];
    tile_sums(acc, Kp, a, ar, ap, b, w);
    tile_put(acc, mr, nc, alpha, beta, C, ldc, i0, j0, end);
}

/* op(B)'s columns j0 .. j0 + NR - 1 (those past N are 0) as Kp pair rows of
 * width NR, into the thread's panel buffer (with pack_down's rows after it). */
AVX512_BF16 static const uint32_t *pack_panel(bool tb, Operand B, int ldb, int K, int N, int j0) {
    int Kp = (K + 1) / 2, Kp16 = (Kp + 15) & ~15;
    uint32_t *panel_buf = small_buffer(&small_buffers()->panel, (size_t)Kp * NR + (tb ? 16 * (size_t)Kp16 : 0));
    int cols = N - j0 < NR ? N - j0 : NR;
    if (tb) small_pack_down(panel_buf, NR, B, (long)j0 * ldb, ldb, K, cols, panel_buf + (size_t)Kp * NR);
    else small_pack_across(panel_buf, NR, B, j0, ldb, K, cols);
    return panel_buf;
}

/* op(A) (M x K) as the tiles read it: rows of Kp pairs (*ar = Kp, *ap = 1),
 * or pair rows of width Mp (*ar = 1, *ap = Mp); bf16 rows of even K and
 * stride that fill whole row tiles are read where they are, as pairs
 * already. */
AVX512_BF16 static const uint32_t *pack_a(bool ta, int M, int K, Operand A, int lda, long *ar, long *ap) {
    /* Mp: M padded to whole vectors of 16, which pack_across writes, and so to row tiles */
    int Kp = (K + 1) / 2, Mp = (M + 15) & ~15;
    if (!ta && A.h && K % 2 == 0 && lda % 2 == 0 && M % MR == 0 && ((uintptr_t)A.p & 3) == 0) {
        *ar = lda / 2, *ap = 1;
        return A.p;
    }
    uint32_t *buf = small_pack_space((size_t)Mp * Kp);
    if (!ta) {
        for (int i = 0; i < M; i++) small_pack_row(buf + (long)i * Kp, A, (long)i * lda, K);
        memset(buf + (long)M * Kp, 0, sizeof *buf * (size_t)(Mp - M) * Kp);
        *ar = Kp, *ap = 1;
    } else {
        small_pack_across(buf, Mp, A, 0, lda, K, M);
        *ar = 1, *ap = Mp;
    }
    return buf;
}

/* One block of K: the whole product when K is short. */
AMX static void small_block(bool ta, bool tb, int M, int N, int K, float alpha, Operand A, int lda, Operand B,
                            int ldb, float beta, float *C, int ldc, const TileEnd *end) {
    int Kp = (K + 1) / 2;
    bool amx = gemm_small_amx();
    bool split = !omp_in_parallel() && (long)M * N * K >= GEMM_SMALL_PARALLEL_MADDS;
    if (amx && amx_tall(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, end, split)) return;
    long ar, ap = 1;
    const uint32_t *pa = amx ? pack_a_rows(ta, M, K, A, lda, &ar) : pack_a(ta, M, K, A, lda, &ar, &ap);
    if (amx) amx_count();
    /* op(B) a panel of NR columns at a time, packed where it is used: the
     * panel stays in L1 while every row tile of A passes over it */
    int tiles_n = (N + NR - 1) / NR;
#pragma omp parallel if (split)
    {
        if (amx) amx_begin();
#pragma omp for schedule(static)
        for (int tj = 0; tj < tiles_n; tj++) {
            int j0 = tj * NR;
            const uint32_t *pb = pack_panel(tb, B, ldb, K, N, j0);
            if (amx) {
                amx_panel(M, N - j0, Kp, pa, ar, pb, alpha, beta, C, ldc, 0, j0, end);
                continue;
            }
            for (int i0 = 0; i0 < M; i0 += MR) {
                int mr = M - i0 < MR ? M - i0 : MR;
                if (end)
                    tile_end(mr, N - j0, Kp, pa + i0 * ar, ar, ap, pb, NR, alpha, beta,
                             C ? C + (long)i0 * ldc + j0 : NULL, ldc, i0, j0, end);
                else
                    tile(mr, N - j0, Kp, pa + i0 * ar, ar, ap, pb, NR, alpha, beta, C + (long)i0 * ldc + j0, ldc);
            }
        }
        if (amx) amx_end();
    }
}

/* A long K is taken GEMM_SMALL_KC values at a time, each block's product
 * added into C: the packed A of a block stays in L2 and a panel of B in L1,
 * where a whole K (a weight gradient's 4096 tokens) would stream both from
 * memory at every row tile. Blocks start at even k, so the pairs are the
 * whole product's; the sum is taken block by block, in a fixed order. A bias
 * takes beta C's place in the first block, the epilogue runs in the last;
 * an epilogue that does not write C needs the one block. */
void gemm_small_ex(bool ta, bool tb, int M, int N, int K, float alpha, const void *A, bool a16, int lda,
                   const void *B, bool b16, int ldb, float beta, float *C, int ldc, const GemmEpilogue *ep,
                   int fault) {
    Operand a = {A, a16}, b = {B, b16};
    bool rest = gemm_epilogue_rest(ep);
    if (!C && K > GEMM_SMALL_KC) DIE("gemm_small_ex: no C for a K of %d, past one block", K);
    for (int k0 = 0; k0 < K; k0 += GEMM_SMALL_KC) {
        int k = K - k0 < GEMM_SMALL_KC ? K - k0 : GEMM_SMALL_KC;
        Operand ak = {at(a, ta ? (long)k0 * lda : k0), a16}, bk = {at(b, tb ? k0 : (long)k0 * ldb), b16};
        TileEnd end = {.bias = k0 == 0 && ep ? ep->bias : NULL, .ep = k0 + k >= K && rest ? ep : NULL,
                       .fault = fault};
        small_block(ta, tb, M, N, k, alpha, ak, lda, bk, ldb, k0 ? 1.0f : beta, C, ldc,
                    end.bias || end.ep ? &end : NULL);
    }
}

long gemm_small_packed_words(int K, int N) { return (long)((N + NR - 1) / NR) * ((K + 1) / 2) * NR; }

AVX512_BF16 void gemm_small_pack_b(uint32_t *out, bool tb, const uint16_t *B, int ldb, int K, int N) {
    Operand b = {B, true};
    int Kp = (K + 1) / 2;
    for (int j0 = 0; j0 < N; j0 += NR) {
        const uint32_t *panel = pack_panel(tb, b, ldb, K, N, j0);
        memcpy(out + (long)j0 / NR * Kp * NR, panel, sizeof *out * (size_t)Kp * NR);
    }
}

/* The panels of a packed op(B) are read in place: panel (n0 + j0) / NR of
 * the packing, from pair row k0 / 2. Blocks of K as gemm_small_ex takes them,
 * so the sums are its own. */
AMX void gemm_small_packed(bool ta, int M, int N, int K, float alpha, const void *A, bool a16, int lda,
                           const uint32_t *packed, int packed_K, int k0, int n0, float beta, float *C, int ldc) {
    int packed_Kp = (packed_K + 1) / 2;
    bool amx = gemm_small_amx();
    for (int kb = 0; kb < K; kb += GEMM_SMALL_KC) {
        int k = K - kb < GEMM_SMALL_KC ? K - kb : GEMM_SMALL_KC, Kp = (k + 1) / 2;
        Operand a = {at((Operand){A, a16}, ta ? (long)kb * lda : kb), a16};
        long ar, ap = 1;
        const uint32_t *pa = amx ? pack_a_rows(ta, M, k, a, lda, &ar) : pack_a(ta, M, k, a, lda, &ar, &ap);
        if (amx) amx_count();
        float b = kb ? 1.0f : beta;
        int tiles_n = (N + NR - 1) / NR;
        bool split = !omp_in_parallel() && (long)M * N * k >= GEMM_SMALL_PARALLEL_MADDS;
#pragma omp parallel if (split)
        {
            if (amx) amx_begin();
#pragma omp for schedule(static)
            for (int tj = 0; tj < tiles_n; tj++) {
                int j0 = tj * NR;
                const uint32_t *pb = packed + ((long)(n0 + j0) / NR * packed_Kp + (k0 + kb) / 2) * NR;
                if (amx) {
                    amx_panel(M, N - j0, Kp, pa, ar, pb, alpha, b, C, ldc, 0, j0, NULL);
                    continue;
                }
                for (int i0 = 0; i0 < M; i0 += MR)
                    tile(M - i0 < MR ? M - i0 : MR, N - j0, Kp, pa + i0 * ar, ar, ap, pb, NR, alpha, b,
                         C + (long)i0 * ldc + j0, ldc);
            }
            if (amx) amx_end();
        }
    }
}

void gemm_small(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc) {
    gemm_small_ex(ta, tb, M, N, K, alpha, A, false, lda, B, false, ldb, beta, C, ldc, NULL, 0);
}
