/* blas_stub.h: the test binary's hold on BLAS (linked with
 * -Wl,--wrap=cblas_sgemm,--wrap=cblas_sgemv).
 *
 * Whether OpenBLAS gives the same bits on 1 and 2 threads is a property of
 * its kernel on the CPU at hand (on an AMD AVX-512 host its AVX2 code does
 * not), so the tests keep two questions apart:
 *   - our own kernels' thread invariance: with the stand-in on, every BLAS
 *     call the project makes runs a plain, fixed-order loop instead, so a
 *     difference between thread counts can only come from our code;
 *   - BLAS's: the shapes a step used are recorded, and blas_thread_variance
 *     measures each of them on 1 and on 2 threads. */
#ifndef ATTNLAB_BLAS_STUB_H
#define ATTNLAB_BLAS_STUB_H

#include <stdbool.h>

/* Routes the project's sgemm and sgemv calls to the fixed-order loops (on)
 * or to OpenBLAS (off, the default). Returns the previous setting. */
bool blas_stub_set(bool on);

/* Starts (clears) or stops the record of the sgemm shapes called. */
void blas_record_set(bool on);
/* The multiply-adds (M N K summed) of the sgemm calls since the record
 * started. */
double blas_recorded_madds(void);

/* Runs every recorded shape through OpenBLAS on random data with 1 and with
 * `threads` threads. Returns the number of output values that differ in the
 * first shape that shows any (0 when all agree) and describes it in msg. */
long blas_thread_variance(int threads, char *msg, int size);

/* The OpenBLAS kernel in use, e.g. "Haswell" or "Cooperlake". */
const char *blas_kernel_name(void);

#endif
