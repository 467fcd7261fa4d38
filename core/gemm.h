/* gemm.h: the one entry point for matrix products.
 *
 * Every op and kernel multiplies matrices through gemm(): row-major, the
 * transposes as flags, C = alpha op(A) op(B) + beta C, as cblas_sgemm takes
 * them. The engine's precision decides where a product goes:
 *   - fp32: OpenBLAS's sgemm;
 *   - bf16: A and B are rounded to bfloat16 (round to nearest even), the
 *     products are summed in fp32, and C stays fp32. Most products run in
 *     gemm's own kernel (gemm_small.h: AVX512-BF16's dot products, or AMX
 *     tiles where the CPU has them): every one inside a parallel region
 *     (one thread's block of an attention kernel), every one under
 *     GEMM_BF16_MIN_MADDS multiply-adds (oneDNN's cost per call exceeds
 *     such a product's work), and every one whose K is at most
 *     GEMM_BF16_DNNL_MIN_K, where the kernel was measured faster than
 *     oneDNN (docs/speed.md): every product of the reference step. (Where
 *     oneDNN has AMX and the kernel may not use it, ATTNLAB_NO_AMX, the
 *     large ones go to oneDNN.) The others go to oneDNN's
 *     matmul primitive, one made per shape (sizes, transposes, leading
 *     dimensions, alpha, beta) and kept for the life of the process. On a CPU without AVX512-BF16 (AMX alone) the small ones
 *     run as sgemm on inputs rounded to bf16 and widened again, the same
 *     rule (the products of two bf16 values are exact in fp32, the sums
 *     fp32), and the rest go to oneDNN.
 * gemm() may be called from inside an OpenMP parallel region: each thread
 * has its own oneDNN stream, memory objects and bf16 buffers, and a product
 * made inside a region runs on the calling thread alone. */
#ifndef ATTNLAB_GEMM_H
#define ATTNLAB_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

typedef enum { PRECISION_FP32, PRECISION_BF16 } Precision;

/* C [M, N] = alpha op(A) op(B) + beta C; op(A) is M x K, op(B) K x N; lda,
 * ldb, ldc are the row strides of A, B and C as stored. */
void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
          float beta, float *C, int ldc);

/* What a product's output tile takes while it is in registers, in this
 * order, element by element (v = alpha op(A) op(B) + beta C at first):
 *   bias     v += bias[j] ([N]; beta must be 0: the bias takes C's place);
 *   gelu     v = gelu(v), GELU's tanh form (op_gelu's formula, fastmath.h);
 *            with pre16, v is first written there in bf16 and GELU reads
 *            that rounded value (the pre-activation a backward reads);
 *   slope16  v *= gelu'(x), x the bf16 value at the same place of slope16
 *            (GELU's gradient taken into a product dg = dy W2);
 *   colsum   colsum[j] += v, row by row in row order (a bias's gradient as
 *            the column sums of the tile);
 *   out16    v is written there in bf16 (round to nearest even) and not to
 *            C: the value the next product reads. C may then be NULL
 *            when K takes one block of gemm's kernel (GEMM_SMALL_KC), and is
 *            scratch otherwise (it holds partial sums).
 * pre16, slope16 and out16 are [M, N] with row strides ld_pre, ld_slope,
 * ld_out. NULL/false fields do nothing. */
typedef struct {
    const float *bias;
    bool gelu;
    uint16_t *pre16;
    int ld_pre;
    const uint16_t *slope16;
    int ld_slope;
    float *colsum;
    uint16_t *out16;
    int ld_out;
} GemmEpilogue;

/* gemm() with an epilogue (ep may be NULL), and operands that may be stored
 * in bf16 already (a16, b16: A or B is uint16_t, read as is; a bf16 operand
 * is exact, so the product is the one gemm() makes of its widened values).
 * In bf16 on gemm's own kernel (gemm_small.c) the epilogue runs on each
 * output tile in registers, and a bf16 operand is packed without rounding;
 * elsewhere (fp32, oneDNN's products, CPUs without AVX512-BF16) the same
 * composition runs unfused: bf16 operands widened into a buffer, the bias
 * copied into C's rows and gemm() with beta 1, then one pass over C for the
 * rest. Both give the same bits: the order of every sum is the same. */
void gemm_ex(bool ta, bool tb, int M, int N, int K, float alpha, const void *A, bool a16, int lda, const void *B,
             bool b16, int ldb, float beta, float *C, int ldc, const GemmEpilogue *ep);

/* op(B) packed once for gemm's own kernel, for an operand that many
 * products read in blocks (an attention head's keys and values, read by
 * every block of queries, which would each pack them again): gemm_pack_b
 * packs op(B) (K x N, stored in bf16, row stride ldb) into `words`
 * (gemm_packed_words(K, N) of them); gemm_packed then makes
 *   C = alpha op(A) op(B)[k0 .. k0 + K', n0 .. n0 + N'] + beta C
 * reading the packing in place: the product gemm_ex makes of the same
 * values, bit for bit (the same pairs, the same order of sums). It returns
 * false, having done nothing, where gemm_ex would not run gemm's kernel
 * (fp32, oneDNN's products, CPUs without AVX512-BF16, the tests' switches)
 * or the block is off the packing's grid (k0 odd, n0 not a multiple of 32,
 * an odd K' that stops short of op(B)'s end): the caller runs gemm_ex. */
typedef struct {
    const uint32_t *p;
    int K, N;
} GemmPackedB;
long gemm_packed_words(int K, int N);
GemmPackedB gemm_pack_b(uint32_t *words, bool tb, const uint16_t *B, int ldb, int K, int N);
bool gemm_packed(bool ta, int M, int N, int K, float alpha, const void *A, bool a16, int lda, const GemmPackedB *b,
                 int k0, int n0, float beta, float *C, int ldc);
/* Whether gemm_packed can run here now (as gemm_ex's kernel could): a
 * caller packs only then. */
bool gemm_packed_usable(void);

/* For the tests: gemm_ex's epilogues made wrong on purpose, to show that the
 * checks catch them (GEMM_FAULT_NONE at start). Returns the previous one. */
typedef enum {
    GEMM_FAULT_NONE,
    GEMM_FAULT_BIAS_TWICE,   /* the bias added twice */
    GEMM_FAULT_SLOPE_OF_OUT, /* GELU's gradient taken at the product's own value, not at slope16's */
    GEMM_FAULT_NO_PRE_ROUND, /* GELU reads the pre-activation unrounded */
} GemmFault;
GemmFault gemm_set_fault(GemmFault f);
/* For the tests: gemm_ex runs its unfused composition even where the kernel
 * could fuse (off at start). Returns the previous setting. */
bool gemm_set_unfused(bool on);

/* The precision of every product from now on (fp32 at start). bf16 must
 * have been checked with gemm_bf16_check() first: setting it otherwise is a
 * programming error. Returns the previous setting. */
Precision gemm_set_precision(Precision p);
Precision gemm_precision(void);

/* Whether the CPU runs bf16 products natively (AVX512-BF16 or AMX-BF16):
 * 0, or -1 with e naming what is missing. Without it oneDNN would emulate
 * bf16, slower than fp32. */
int gemm_bf16_check(Err *e);
/* The oneDNN ISA in use, e.g. "avx512_core_bf16" or "avx512_core_amx". */
const char *gemm_dnnl_isa(void);
/* oneDNN's version, "2.6.3". */
const char *gemm_dnnl_version(void);
/* Where bf16 products go on this CPU, in a few words: "gemm_small
 * avx512_bf16, oneDNN avx512_core_bf16 past K 4096", "oneDNN
 * avx512_core_amx" (what a run's provenance records), or "none" when the CPU
 * cannot run bf16. */
const char *gemm_bf16_route(void);

/* For ./bench --gemm: one product through a path chosen outright: OpenBLAS's
 * sgemm, oneDNN's fp32 matmul, oneDNN's bf16 matmul (rounding its inputs;
 * no small-product shortcut), or gemm's own small-product kernel
 * (gemm_small.h; sgemm on rounded inputs where the CPU lacks AVX512-BF16).
 * The bf16 paths need gemm_bf16_check() first. */
typedef enum { GEMM_PATH_SGEMM, GEMM_PATH_DNNL_F32, GEMM_PATH_DNNL_BF16, GEMM_PATH_SMALL_BF16 } GemmPath;
void gemm_via(GemmPath path, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);

/* The weights: n floats from base (a model's parameter slab; NULL to
 * unbind). A oneDNN bf16 product reads an operand that lies inside them
 * from a bf16 copy, instead of rounding it at each product; the copy is made
 * when such a product first needs it after gemm_weights_changed(): call that
 * whenever they change (after each optimizer step, a load, an
 * initialisation). gemm's own kernel rounds them as it packs them. */
void gemm_bind_weights(const float *base, long n);
void gemm_weights_changed(void);

/* float -> bfloat16, round to nearest even (NaN stays NaN), and back. */
static inline uint16_t bf16_from_float(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40u);
    v.u += 0x7fffu + ((v.u >> 16) & 1u);
    return (uint16_t)(v.u >> 16);
}
static inline float bf16_to_float(uint16_t h) {
    union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16};
    return v.f;
}
/* x rounded to bf16 and widened again: the value a bf16 product reads. */
static inline float bf16_round(float x) { return bf16_to_float(bf16_from_float(x)); }
/* n floats to bf16 (round to nearest even). */
void bf16_from_floats(uint16_t *out, const float *x, long n);

/* For the tests' error analysis: every fp32 product from now on multiplies
 * each element of its inputs by (1 + rel r), r uniform in [-1, 1] from a
 * hash of seed, the product's number and the element's place (0 turns it
 * off). With rel = 2^-8, bf16's unit roundoff, a computation shows how far
 * rounding every product's inputs to bf16 could move its results. */
void gemm_set_jitter(double rel, uint64_t seed);

/* The bf16 products since the count was last cleared, and their
 * multiply-adds (M N K summed), for the tests and ./bench; of them, the
 * multiply-adds of the small ones (gemm_small(), or sgemm on rounded inputs
 * where the CPU lacks AVX512-BF16). */
void gemm_bf16_count_clear(void);
long gemm_bf16_calls(void);
double gemm_bf16_madds(void);
double gemm_bf16_sgemm_madds(void);

/* For the tests: every bf16 primitive made so far, run on random inputs on 1
 * and on `threads` threads. The number of output values whose bits differ
 * for the first shape where any do (0: none), described in msg. oneDNN does
 * not promise the same bits on every thread count; this measures whether it
 * gives them here. */
long gemm_bf16_thread_variance(int threads, char *msg, int size);

/* For the tests: whether small bf16 products run as sgemm on rounded inputs
 * even where gemm_small() could run them (off at start). Returns the
 * previous setting. */
bool gemm_small_set_fallback(bool on);

/* Whether a bf16 product of these sizes, made here, goes to oneDNN (the rule
 * above); false inside a parallel region. */
bool gemm_bf16_to_dnnl(int M, int N, int K);
/* For the tests: the K above which large products go to oneDNN
 * (GEMM_BF16_DNNL_MIN_K at start), so that moderate sizes reach it. Returns
 * the previous value. */
int gemm_bf16_set_dnnl_min_k(int k);

/* bf16 products with a longer K than this go to oneDNN (when they are large
 * and outside a parallel region): on the reference step's shapes gemm's
 * kernel, which takes a long K 1024 values at a time, beat oneDNN 1.0-1.5x
 * up to K 4096, the weight gradients' sums over a step's tokens (./bench
 * --gemm on AVX512-BF16, docs/speed.md); longer sums were not measured.
 * Where oneDNN runs bf16 on AMX tiles, every large product goes to oneDNN
 * whatever its K: on an Intel Xeon with AMX, oneDNN ran the step's products
 * at 1.5-2.4x sgemm and gemm's kernel at 0.4-0.8x (docs/speed.md, "On a CPU
 * with AMX"). */
#define GEMM_BF16_DNNL_MIN_K 4096

/* Products with fewer multiply-adds than this, in bf16, run as sgemm on
 * rounded inputs (measured on the model's attention blocks: oneDNN's
 * fixed cost per call is several microseconds). */
#define GEMM_BF16_MIN_MADDS (1L << 21)

#endif
