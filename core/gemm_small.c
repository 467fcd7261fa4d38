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
 * the largest product, so a training step makes no malloc after its first. */
#include "gemm_small.h"

#include <assert.h>
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gemm.h"
#include "gemm_epilogue.h"

#define AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

enum { MR = 8, NR = 32 };

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

/* The packing buffers of each thread: op(A) of the product it makes, and
 * the panel of op(B) it is working on. They are the thread's own (a
 * thread-local pointer), and a pthread key frees them when a thread ends
 * (libgomp ends threads when the thread count falls), so none is lost. */
typedef struct {
    uint32_t *p;
    size_t cap;
} Buffer;
typedef struct {
    Buffer a, panel, across, whole; /* across: op(A)'s pair rows before AMX's transpose; whole: all of op(B) */
} ThreadBuffers;
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

static ThreadBuffers *buffers(void) {
    if (!mine) {
        pthread_once(&buffers_once, buffers_key_make);
        mine = calloc_check(1, sizeof *mine, __FILE__, __LINE__);
        pthread_setspecific(buffers_key, mine);
    }
    return mine;
}

static uint32_t *buffer(Buffer *b, size_t n) {
    if (n > b->cap) {
        free(b->p);
        b->cap = n + n / 4;
        b->p = malloc_check(b->cap * sizeof *b->p, __FILE__, __LINE__);
    }
    return b->p;
}

static uint32_t *pack_space(size_t n) { return buffer(&buffers()->a, n); }

static __mmask16 first(int n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n > 0 ? n : 0)) - 1); }

/* An operand as stored: floats, or bf16 values already rounded (gemm_ex). */
typedef struct {
    const void *p;
    bool h;
} Operand;

static const void *at(Operand x, long off) {
    return x.h ? (const void *)((const uint16_t *)x.p + off) : (const void *)((const float *)x.p + off);
}

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

static void pack_row_of(uint32_t *out, Operand x, long off, int K) {
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
AVX512_BF16 static void pack_across(uint32_t *out, int w, Operand X, long off, int ld, int K, int cols) {
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
AVX512_BF16 static void transpose16(__m512i r[16]) {
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
AVX512_BF16 static void pack_down(uint32_t *out, int w, Operand X, long off, int ld, int K, int cols,
                                  uint32_t *tmp) {
    assert(w % 16 == 0 && w >= cols);
    int Kp = (K + 1) / 2, Kp16 = (Kp + 15) & ~15;
    for (int j0 = 0; j0 < w; j0 += 16) {
        for (int j = 0; j < 16; j++) {
            uint32_t *row = tmp + (long)j * Kp16;
            memset(row, 0, sizeof *row * (size_t)Kp16);
            if (j0 + j < cols) pack_row_of(row, X, off + (long)(j0 + j) * ld, K);
        }
        for (int p0 = 0; p0 < Kp; p0 += 16) {
            __m512i r[16];
            for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_si512(tmp + (long)j * Kp16 + p0);
            transpose16(r);
            for (int p = 0; p < 16 && p0 + p < Kp; p++) _mm512_storeu_si512(out + (long)(p0 + p) * w + j0, r[p]);
        }
    }
}

/* How a tile ends: the bias in beta C's place (a product's first block of
 * K), the epilogue (its last block), the deliberate fault (tests). */
typedef struct {
    const float *bias;
    const GemmEpilogue *ep;
    int fault;
} TileEnd;

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
    uint32_t *panel_buf = buffer(&buffers()->panel, (size_t)Kp * NR + (tb ? 16 * (size_t)Kp16 : 0));
    int cols = N - j0 < NR ? N - j0 : NR;
    if (tb) pack_down(panel_buf, NR, B, (long)j0 * ldb, ldb, K, cols, panel_buf + (size_t)Kp * NR);
    else pack_across(panel_buf, NR, B, j0, ldb, K, cols);
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
    uint32_t *buf = pack_space((size_t)Mp * Kp);
    if (!ta) {
        for (int i = 0; i < M; i++) pack_row_of(buf + (long)i * Kp, A, (long)i * lda, K);
        memset(buf + (long)M * Kp, 0, sizeof *buf * (size_t)(Mp - M) * Kp);
        *ar = Kp, *ap = 1;
    } else {
        pack_across(buf, Mp, A, 0, lda, K, M);
        *ar = 1, *ap = Mp;
    }
    return buf;
}

/* ---- AMX tiles -------------------------------------------------------------
 *
 * Where the CPU has AMX-BF16 (Sapphire Rapids and later), the same products
 * run on tiles: tdpbf16ps multiplies a 16 x 32 block of op(A) (16 rows of 16
 * pairs) by a 32 x 16 block of op(B) (16 pair rows of 16 columns, a half of
 * one of our panels, as it is packed) into a 16 x 16 tile of fp32 sums,
 * 16 times the work of one vdpbf16ps. A block of C of 32 x 32 (four sum
 * tiles, two of op(A), two of op(B)) is summed along K sixteen pairs at a
 * time, in the same fixed order whatever the threads; then its sums go
 * through tile_put as the vector kernel's do (alpha, beta, bias, epilogue).
 * AMX sums each pair in its own order, so its bits are not the vector
 * kernel's: gemm_bf16_route names which one ran. Tiles read whole blocks of
 * 16 pairs and 16 rows, so op(A) is packed zero-padded to both, and a
 * panel's last partial block of pairs is copied into a zero-padded one. */

static int amx_have = -1;
static bool amx_off;      /* gemm_small_set_amx(false) */
static long amx_products; /* products (blocks of K) made on tiles */

long gemm_small_amx_products(void) { return amx_products; }

/* Linux gives a process AMX's tile state only when asked (arch_prctl). */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

bool gemm_small_amx(void) {
    if (amx_have < 0) {
        /* ATTNLAB_NO_AMX set: as on a CPU without AMX (the vector kernel runs) */
        const char *off = getenv("ATTNLAB_NO_AMX");
        amx_have = gemm_small_available() && !(off && *off) && __builtin_cpu_supports("amx-tile") &&
                   __builtin_cpu_supports("amx-bf16") &&
                   syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    }
    return amx_have && !amx_off;
}

bool gemm_small_set_amx(bool on) {
    bool was = !amx_off;
    amx_off = !on;
    return was;
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

/* Tiles 0-3 C's sums, 4-5 op(A), 6-7 op(B): each 16 rows of 64 bytes. The
 * configuration is the thread's (oneDNN sets its own between our products),
 * so each thread loads it before its share of a product. */
AMX static void amx_begin(void) {
    TileConfig c = {.palette = 1};
    for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = 16;
    _tile_loadconfig(&c);
}

AMX static void amx_end(void) { _tile_release(); }

enum { AMX_PAIRS = 16, AMX_ROWS = 32 };

/* Whether op(A) (M x K, bf16 rows filling whole blocks of pairs and rows)
 * can be read where it is. */
static bool a_in_place(bool ta, int M, int K, Operand A, int lda) {
    return !ta && A.h && K % (2 * AMX_PAIRS) == 0 && lda % 2 == 0 && M % 16 == 0 && ((uintptr_t)A.p & 3) == 0;
}

/* Rows 16 g .. 16 g + 15 of op(A) (M x K) into out (rows of Kp16 pairs,
 * zero past Kp and past row M). */
AMX static void pack_a_group(uint32_t *out, bool ta, int g, int M, int K, Operand A, int lda) {
    int Kp = (K + 1) / 2, Kp16 = (Kp + AMX_PAIRS - 1) & ~(AMX_PAIRS - 1), i0 = 16 * g;
    int rows = M - i0 < 16 ? M - i0 : 16;
    out += (long)i0 * Kp16;
    if (!ta) {
        for (int i = 0; i < rows; i++) {
            pack_row_of(out + (long)i * Kp16, A, (long)(i0 + i) * lda, K);
            memset(out + (long)i * Kp16 + Kp, 0, sizeof *out * (size_t)(Kp16 - Kp));
        }
        memset(out + (long)rows * Kp16, 0, sizeof *out * (size_t)(16 - rows) * Kp16);
        return;
    }
    /* op(A)'s rows are A's columns: their pair rows, then 16 x 16 transposes */
    uint32_t *across = buffer(&buffers()->across, (size_t)Kp16 * 16);
    pack_across(across, 16, A, i0, lda, K, rows);
    memset(across + (long)Kp * 16, 0, sizeof *across * (size_t)(Kp16 - Kp) * 16);
    for (int p0 = 0; p0 < Kp16; p0 += 16) {
        __m512i r[16];
        for (int p = 0; p < 16; p++) r[p] = _mm512_loadu_si512(across + (long)(p0 + p) * 16);
        transpose16(r);
        for (int i = 0; i < 16; i++) _mm512_storeu_si512(out + (long)i * Kp16 + p0, r[i]);
    }
}

/* op(A) (M x K) as rows of Kp16 pairs, M16 rows, in the thread's buffer, or
 * where it is; *ar = the row stride in pairs. */
AMX static const uint32_t *pack_a_rows(bool ta, int M, int K, Operand A, int lda, long *ar) {
    int Kp = (K + 1) / 2, Kp16 = (Kp + AMX_PAIRS - 1) & ~(AMX_PAIRS - 1);
    if (a_in_place(ta, M, K, A, lda)) {
        *ar = lda / 2;
        return A.p;
    }
    uint32_t *buf = pack_space((size_t)((M + 15) & ~15) * Kp16);
    for (int g = 0; g < (M + 15) / 16; g++) pack_a_group(buf, ta, g, M, K, A, lda);
    *ar = Kp16;
    return buf;
}

/* The sums of op(A)'s rows a (rows of them, at most 32; stride ar pairs)
 * against a panel b (Kp pair rows of NR; its last partial block of pairs
 * read from tail): out[r][j]. */
AMX static void amx_sums(float out[AMX_ROWS][NR], int rows, int Kp, const uint32_t *a, long ar, const uint32_t *b,
                         const uint32_t *tail) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    long sa = ar * 4;
    for (int p = 0; p < Kp; p += AMX_PAIRS) {
        const uint32_t *bp = p + AMX_PAIRS <= Kp ? b + (long)p * NR : tail;
        _tile_loadd(6, bp, NR * 4);
        _tile_loadd(7, bp + 16, NR * 4);
        _tile_loadd(4, a + p, sa);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (rows > 16) {
            _tile_loadd(5, a + 16 * ar + p, sa);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, out[0], NR * 4);
    _tile_stored(1, out[0] + 16, NR * 4);
    if (rows > 16) {
        _tile_stored(2, out[16], NR * 4);
        _tile_stored(3, out[16] + 16, NR * 4);
    }
}

/* C's columns j0 .. (a panel, pb) for every row of op(A) (pa, stride ar),
 * as tile() and tile_end() make them. */
AMX static void amx_panel(int M, int nc, int Kp, const uint32_t *pa, long ar, const uint32_t *pb, float alpha,
                          float beta, float *C, int ldc, long row0, int j0, const TileEnd *end) {
    uint32_t tail[AMX_PAIRS * NR] __attribute__((aligned(64)));
    int full = Kp / AMX_PAIRS * AMX_PAIRS;
    if (full < Kp) {
        memcpy(tail, pb + (long)full * NR, sizeof *tail * (size_t)(Kp - full) * NR);
        memset(tail + (long)(Kp - full) * NR, 0, sizeof *tail * (size_t)(AMX_PAIRS - (Kp - full)) * NR);
    }
    float out[AMX_ROWS][NR] __attribute__((aligned(64)));
    for (int i0 = 0; i0 < M; i0 += AMX_ROWS) {
        int rows = M - i0 < AMX_ROWS ? M - i0 : AMX_ROWS;
        amx_sums(out, rows, Kp, pa + i0 * ar, ar, pb, tail);
        for (int r0 = 0; r0 < rows; r0 += MR) {
            int mr = rows - r0 < MR ? rows - r0 : MR;
            __m512 acc[MR][2];
            for (int r = 0; r < mr; r++)
                acc[r][0] = _mm512_load_ps(out[r0 + r]), acc[r][1] = _mm512_load_ps(out[r0 + r] + 16);
            long i = i0 + r0;
            float *c = C ? C + i * ldc + j0 : NULL;
            if (end) tile_put(acc, mr, nc, alpha, beta, c, ldc, row0 + i, j0, end);
            else tile_put(acc, mr, nc, alpha, beta, c, ldc, 0, 0, NULL);
        }
    }
}

/* Tiles, a tall op(A): every panel sweeps all of op(A)'s rows, so op(A) is
 * taken in chunks of rows that stay in L2 (about AMX_CHUNK_BYTES packed),
 * and op(B) is packed whole first, its panels shared by the threads. The
 * threads take whole chunks (by_rows), each packing its own; or, when the
 * epilogue sums columns, they share each chunk's panels out as small_block
 * does, so that a column's sum stays one thread's, its rows in order (the
 * chunk then packed by the threads together). Either way the sums are the
 * panel-by-panel kernel's, bit for bit. */
#define AMX_CHUNK_BYTES (512 * 1024)

AMX static void amx_tall(bool ta, bool tb, int M, int N, int K, int mc, float alpha, Operand A, int lda, Operand B,
                         int ldb, float beta, float *C, int ldc, const TileEnd *end, bool split, bool by_rows) {
    int Kp = (K + 1) / 2, Kp16 = (Kp + 15) & ~15, tiles_n = (N + NR - 1) / NR, chunks = (M + mc - 1) / mc;
    uint32_t *whole = buffer(&buffers()->whole, (size_t)tiles_n * Kp * NR);
    bool in_place = a_in_place(ta, M, K, A, lda);
    uint32_t *shared = in_place || by_rows ? NULL : pack_space((size_t)mc * Kp16);
#pragma omp parallel if (split)
    {
#pragma omp for schedule(static)
        for (int tj = 0; tj < tiles_n; tj++) {
            int j0 = tj * NR, cols = N - j0 < NR ? N - j0 : NR;
            uint32_t *out = whole + (size_t)tj * Kp * NR;
            if (tb) pack_down(out, NR, B, (long)j0 * ldb, ldb, K, cols, buffer(&buffers()->panel, 16 * (size_t)Kp16));
            else pack_across(out, NR, B, j0, ldb, K, cols);
        }
        amx_begin();
        if (by_rows) {
#pragma omp for schedule(static)
            for (int ch = 0; ch < chunks; ch++) {
                long i0 = (long)ch * mc, ar;
                int m = M - i0 < mc ? (int)(M - i0) : mc;
                const uint32_t *pa = pack_a_rows(ta, m, K, (Operand){at(A, ta ? i0 : i0 * lda), A.h}, lda, &ar);
                for (int tj = 0; tj < tiles_n; tj++)
                    amx_panel(m, N - tj * NR, Kp, pa, ar, whole + (size_t)tj * Kp * NR, alpha, beta,
                              C ? C + i0 * ldc : NULL, ldc, i0, tj * NR, end);
            }
        } else {
            for (int ch = 0; ch < chunks; ch++) {
                long i0 = (long)ch * mc;
                int m = M - i0 < mc ? (int)(M - i0) : mc;
                Operand a = {at(A, ta ? i0 : i0 * lda), A.h};
                if (!in_place) {
#pragma omp for schedule(static)
                    for (int g = 0; g < (m + 15) / 16; g++) pack_a_group(shared, ta, g, m, K, a, lda);
                }
                const uint32_t *pa = in_place ? a.p : shared;
                long ar = in_place ? lda / 2 : Kp16;
                /* the same panels to each thread at every chunk (static, one count) */
#pragma omp for schedule(static)
                for (int tj = 0; tj < tiles_n; tj++)
                    amx_panel(m, N - tj * NR, Kp, pa, ar, whole + (size_t)tj * Kp * NR, alpha, beta,
                              C ? C + i0 * ldc : NULL, ldc, i0, tj * NR, end);
            }
        }
        amx_end();
    }
}

/* One block of K: the whole product when K is short. */
AMX static void small_block(bool ta, bool tb, int M, int N, int K, float alpha, Operand A, int lda, Operand B,
                            int ldb, float beta, float *C, int ldc, const TileEnd *end) {
    int Kp = (K + 1) / 2;
    bool amx = gemm_small_amx();
    bool split = !omp_in_parallel() && (long)M * N * K >= GEMM_SMALL_PARALLEL_MADDS;
    if (amx) {
        /* chunks of rows of at most AMX_CHUNK_BYTES, as even as whole blocks of rows allow; taken by
         * the threads whole, an even count for them, unless the epilogue sums columns */
        bool by_rows = !(end && end->ep && end->ep->colsum);
        int Kp16 = (Kp + 15) & ~15, per = AMX_CHUNK_BYTES / (4 * Kp16), chunks = (M + per - 1) / per;
        int threads = split && by_rows ? omp_get_max_threads() : 1;
        chunks = (chunks + threads - 1) / threads * threads;
        int mc = ((M + chunks - 1) / chunks + 31) & ~31;
        if (M > mc) {
#pragma omp atomic
            amx_products++;
            amx_tall(ta, tb, M, N, K, mc, alpha, A, lda, B, ldb, beta, C, ldc, end, split, by_rows);
            return;
        }
    }
    long ar, ap = 1;
    const uint32_t *pa = amx ? pack_a_rows(ta, M, K, A, lda, &ar) : pack_a(ta, M, K, A, lda, &ar, &ap);
    if (amx) {
#pragma omp atomic
        amx_products++;
    }
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
        if (amx) {
#pragma omp atomic
            amx_products++;
        }
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
