/* bench_gemm.c: --gemm: the reference step's matrix products through
 * OpenBLAS's sgemm, oneDNN's fp32 matmul, oneDNN's bf16 matmul and gemm's
 * own bf16 kernel for small products (gemm_small.h), each shape
 * timed alone (docs/speed.md keeps the table), and the timing that
 * bench_train's ceiling uses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "gemm.h"
#include "model.h"
#include "run.h"
#include "util.h"

double bench_product_seconds(int path, int M, int N, int K, bool ta, bool tb) {
    float *A = xmalloc((size_t)M * K * sizeof(float)), *B = xmalloc((size_t)K * N * sizeof(float));
    float *C = xmalloc((size_t)M * N * sizeof(float));
    for (long i = 0; i < (long)M * K; i++) A[i] = (float)(i % 7) * 0.1f;
    for (long i = 0; i < (long)K * N; i++) B[i] = (float)(i % 5) * 0.1f;
    double t[6];
    for (int r = 0; r < 6; r++) {
        double t0 = now_seconds();
        if (path < 0)
            gemm(ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C, N);
        else
            gemm_via((GemmPath)path, ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C, N);
        t[r] = now_seconds() - t0;
    }
    free(A), free(B), free(C);
    return median_of(t + 1, 5);
}

int bench_gemm(const Config *cfg) {
    const ModelConfig *c = &cfg->model;
    int d = c->d_model, H = c->heads, dk = model_key_size(c), r = c->mlp_ratio * d, BT = cfg->train.batch * c->context;
    Err e;
    bool bf16 = gemm_bf16_check(&e) == 0;
    /* each linear layer's forward (x W^T), dX (dY W) and dW (dY^T x), and one attention block (QK^T) */
    struct {
        const char *what;
        int M, N, K, ta, tb;
    } shapes[] = {
        {"qkv forward", BT, 3 * H * dk, d, 0, 1}, {"qkv dX", BT, d, 3 * H * dk, 0, 0}, {"qkv dW", 3 * H * dk, d, BT, 1, 0},
        {"fc forward", BT, r, d, 0, 1},           {"fc dX", BT, d, r, 0, 0},           {"fc dW", r, d, BT, 1, 0},
        {"proj forward", BT, d, r, 0, 1},         {"proj dX", BT, r, d, 0, 0},         {"proj dW", d, r, BT, 1, 0},
        {"head forward", BT, c->vocab, d, 0, 1},  {"QK^T block", 64, c->context, dk, 0, 1},
        {"QK^T, T 8192", 64, 8192, dk, 0, 1},     {"PV, T 8192", 64, dk, 8192, 0, 0},
        {"dV, T 8192", 8192, dk, 64, 1, 0},
    };
    printf("matrix products of the reference step alone, GFLOP/s (median of 5); oneDNN ISA %s\n", gemm_dnnl_isa());
    printf("  %-13s %18s %9s %11s %11s %9s %10s %10s %10s\n", "product", "M x N x K", "sgemm", "oneDNN f32",
           "oneDNN bf16", "own bf16", "f32/sgemm", "bf16/sgemm", "own/sgemm");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        double flop = 2.0 * shapes[i].M * shapes[i].N * shapes[i].K, g[4];
        for (int p = 0; p < 4; p++)
            g[p] = p >= GEMM_PATH_DNNL_BF16 && !bf16
                       ? NAN
                       : flop / bench_product_seconds(p, shapes[i].M, shapes[i].N, shapes[i].K, shapes[i].ta,
                                                      shapes[i].tb) * 1e-9;
        char dims[48];
        snprintf(dims, sizeof dims, "%d x %d x %d", shapes[i].M, shapes[i].N, shapes[i].K);
        printf("  %-13s %18s %9.1f %11.1f %11.1f %9.1f %9.2fx %9.2fx %9.2fx\n", shapes[i].what, dims, g[0], g[1], g[2],
               g[3], g[1] / g[0], g[2] / g[0], g[3] / g[0]);
    }
    if (!bf16) printf("  (bf16: %s)\n", e.msg);
    return 0;
}
