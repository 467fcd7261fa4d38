/* gemm_small.h: gemm's own kernel for bf16 products (AVX512-BF16, and AMX
 * tiles where the CPU has them).
 *
 * gemm() sends here, in bf16, the products gemm.h's rule gives it (those
 * made inside a parallel region, the small ones, and those of K up to
 * GEMM_BF16_DNNL_MIN_K), when the CPU has AVX512-BF16; where it has not,
 * the small ones run as sgemm on inputs rounded to bf16, the same rule at
 * fp32's rate. */
#ifndef ATTNLAB_GEMM_SMALL_H
#define ATTNLAB_GEMM_SMALL_H

#include <stdbool.h>
#include <stdint.h>

#include "gemm.h"

/* Whether the CPU has the instructions (checked once). */
bool gemm_small_available(void);
/* Whether the kernel runs on AMX tiles here (AMX-BF16, the OS's leave, and
 * not turned off by ATTNLAB_NO_AMX or gemm_small_set_amx). */
bool gemm_small_amx(void);
/* For the tests and ./bench: AMX tiles used where the CPU has them (on at
 * start), or the vector kernel. Returns the previous setting. */
bool gemm_small_set_amx(bool on);
/* For the tests: the products (blocks of K) made on AMX tiles so far. */
long gemm_small_amx_products(void);

/* C = alpha op(A) op(B) + beta C as gemm() takes it, inputs rounded to bf16
 * (nearest even), sums in fp32; C is not read when beta is 0. Called outside
 * a parallel region with at least GEMM_SMALL_PARALLEL_MADDS multiply-adds,
 * it splits C's tiles over the threads; the bits do not depend on how. */
void gemm_small(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc);

/* gemm_small with gemm_ex's epilogue (gemm.h) applied to each output tile
 * (in the last block of a long K; a bias takes beta C's place in the first),
 * and operands that may be stored in bf16 already (a16, b16). */
void gemm_small_ex(bool ta, bool tb, int M, int N, int K, float alpha, const void *A, bool a16, int lda,
                   const void *B, bool b16, int ldb, float beta, float *C, int ldc, const GemmEpilogue *ep,
                   int fault);

/* op(B) packed once as the kernel reads it (gemm.h, GemmPackedB): words
 * for op(B) K x N, the packing from bf16 values, and a product that reads
 * the block op(B)[k0 .., n0 ..] of it in place (k0 even, n0 a multiple of
 * 32; the caller checks). */
long gemm_small_packed_words(int K, int N);
void gemm_small_pack_b(uint32_t *out, bool tb, const uint16_t *B, int ldb, int K, int N);
void gemm_small_packed(bool ta, int M, int N, int K, float alpha, const void *A, bool a16, int lda,
                       const uint32_t *packed, int packed_K, int k0, int n0, float beta, float *C, int ldc);

#define GEMM_SMALL_PARALLEL_MADDS (1L << 18)

/* The values of k a block of a long product sums before adding into C (even;
 * 1024 measured best of 256, 512 and 1024 on the weight gradients). */
#define GEMM_SMALL_KC 1024

#endif
