#include "blas_stub.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "tensor.h"

void __real_cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                        const blasint M, const blasint N, const blasint K, const float alpha, const float *A,
                        const blasint lda, const float *B, const blasint ldb, const float beta, float *C,
                        const blasint ldc);
void __real_cblas_sgemv(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE trans, const blasint m,
                        const blasint n, const float alpha, const float *a, const blasint lda, const float *x,
                        const blasint incx, const float beta, float *y, const blasint incy);

static bool stub_on, record_on;

typedef struct {
    bool ta, tb;
    int M, N, K;
} Shape;

enum { MAX_SHAPES = 64 };
static Shape shapes[MAX_SHAPES];
static int n_shapes;
static double madds;

bool blas_stub_set(bool on) {
    bool was = stub_on;
    stub_on = on;
    return was;
}

void blas_record_set(bool on) {
    record_on = on;
    if (on) n_shapes = 0, madds = 0;
}

double blas_recorded_madds(void) { return madds; }

static void record(bool ta, bool tb, int M, int N, int K) {
    #pragma omp critical(blas_stub_record)
    {
        bool seen = false;
        madds += (double)M * N * K;
        for (int i = 0; i < n_shapes && !seen; i++)
            seen = shapes[i].ta == ta && shapes[i].tb == tb && shapes[i].M == M && shapes[i].N == N &&
                   shapes[i].K == K;
        if (!seen && n_shapes < MAX_SHAPES) shapes[n_shapes++] = (Shape){ta, tb, M, N, K};
    }
}

/* C = alpha op(A) op(B) + beta C, row-major, summed in k order. */
void __wrap_cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                        const blasint M, const blasint N, const blasint K, const float alpha, const float *A,
                        const blasint lda, const float *B, const blasint ldb, const float beta, float *C,
                        const blasint ldc) {
    if (record_on) record(ta == CblasTrans, tb == CblasTrans, M, N, K);
    if (!stub_on) {
        __real_cblas_sgemm(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (order != CblasRowMajor) abort();
    for (blasint i = 0; i < M; i++)
        for (blasint j = 0; j < N; j++) {
            float s = 0.0f;
            for (blasint k = 0; k < K; k++) {
                float a = ta == CblasTrans ? A[(long)k * lda + i] : A[(long)i * lda + k];
                float b = tb == CblasTrans ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
                s += a * b;
            }
            float *c = &C[(long)i * ldc + j];
            *c = beta == 0.0f ? alpha * s : alpha * s + beta * *c;
        }
}

/* y = alpha op(A) x + beta y, row-major. */
void __wrap_cblas_sgemv(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE trans, const blasint m,
                        const blasint n, const float alpha, const float *a, const blasint lda, const float *x,
                        const blasint incx, const float beta, float *y, const blasint incy) {
    if (!stub_on) {
        __real_cblas_sgemv(order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
        return;
    }
    if (order != CblasRowMajor) abort();
    blasint rows = trans == CblasTrans ? n : m, cols = trans == CblasTrans ? m : n;
    for (blasint i = 0; i < rows; i++) {
        float s = 0.0f;
        for (blasint k = 0; k < cols; k++)
            s += (trans == CblasTrans ? a[(long)k * lda + i] : a[(long)i * lda + k]) * x[(long)k * incx];
        float *yi = &y[(long)i * incy];
        *yi = beta == 0.0f ? alpha * s : alpha * s + beta * *yi;
    }
}

long blas_thread_variance(int threads, char *msg, int size) {
    int before = engine_threads();
    Rng rng;
    rng_seed(&rng, 77);
    long worst = 0;
    msg[0] = '\0';
    for (int s = 0; s < n_shapes && worst == 0; s++) {
        Shape sh = shapes[s];
        long na = (long)sh.M * sh.K, nb = (long)sh.K * sh.N, nc = (long)sh.M * sh.N;
        float *a = malloc((size_t)(na + nb + 2 * nc) * sizeof(float));
        if (!a) abort();
        float *b = a + na, *c1 = b + nb, *c2 = c1 + nc;
        rng_fill_normal(&rng, a, na + nb, 0.0f, 1.0f);
        int lda = sh.ta ? sh.M : sh.K, ldb = sh.tb ? sh.K : sh.N;
        for (int run = 0; run < 2; run++) {
            engine_set_threads(run ? threads : 1);
            __real_cblas_sgemm(CblasRowMajor, sh.ta ? CblasTrans : CblasNoTrans, sh.tb ? CblasTrans : CblasNoTrans,
                               sh.M, sh.N, sh.K, 1.0f, a, lda, b, ldb, 0.0f, run ? c2 : c1, sh.N);
        }
        long differ = 0;
        for (long i = 0; i < nc; i++) differ += memcmp(&c1[i], &c2[i], sizeof(float)) != 0;
        if (differ)
            snprintf(msg, (size_t)size, "OpenBLAS's %s kernel gives different bits on 1 and %d threads: %ld of %ld "
                     "values of a %s%dx%d by %s%dx%d product", blas_kernel_name(), threads, differ, nc,
                     sh.ta ? "transposed " : "", sh.ta ? sh.K : sh.M, sh.ta ? sh.M : sh.K, sh.tb ? "transposed " : "",
                     sh.tb ? sh.N : sh.K, sh.tb ? sh.K : sh.N);
        worst = differ;
        free(a);
    }
    engine_set_threads(before);
    return worst;
}

const char *blas_kernel_name(void) { return openblas_get_corename(); }
