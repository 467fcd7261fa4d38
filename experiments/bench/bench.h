/* room bench/: ./bench's measurements, linked into ./bench alone; includes the engine and any room but commands/. */
/* bench.h: what the parts of ./bench share; private to experiments/bench/ and its main.
 *
 *   bench.c          main (experiments/commands/): the command line, the start-up line, which measurement runs
 *   bench_ops.c      --ops: each op's time, matmul against raw cblas_sgemm
 *   bench_gemm.c     --gemm: the step's products through sgemm, oneDNN fp32 and bf16
 *   bench_train.c    training throughput and where a step's time goes (the default)
 *   bench_scaling.c  --scaling: one attention layer against the length, its table and plots
 *   bench_torch.c    --vs-torch: the same model, or the cosformer layer, in PyTorch
 *   bench_mpi.c      --mpi: data-parallel scaling over Open MPI ranks
 *
 * They are linked into ./bench alone; what they export is named bench_*.
 *
 * Everything about a kernel comes from the registry (layers/attention/
 * kernel.h), but for one name: the scaling study's linear-attention kernel,
 * which experiments/bench/torch_scaling.py implements in PyTorch. */
#ifndef ATTNLAB_BENCH_H
#define ATTNLAB_BENCH_H

#include <stdbool.h>

#include "attention/kernel.h"
#include "model.h"
#include "optim.h"
#include "step.h"
#include "options.h"

#define BENCH_MAX_LENGTHS 32

/* --scaling's rows: the default kernel and attn_scaling_reference
 * (layers/attention/kernel.h), the one experiments/bench/torch_scaling.py
 * implements in PyTorch. */

typedef struct {
    int reps;
    bool reps_given;
    int threads;
    bool threads_given;
    int steps;
    bool ops, vs_torch, scaling, mpi, gemm;
    bool attn_given;
    int lengths[BENCH_MAX_LENGTHS], n_lengths; /* --scaling */
    int rounds;                                /* --scaling: sweeps over the lengths */
} BenchOptions;

/* --scaling's figures for one kernel at one length. */
typedef struct {
    double step_s, best_s; /* median and fastest step */
    double arena_mib;      /* the arena's peak over the steps */
} Timing;

typedef struct {
    int attn, T;
    int kernel_i; /* which of bench_scaling's kernels */
    Timing layer, kernel;
    double sgemm_ms, sgemm_gflop; /* the projections' products as raw sgemm calls (median), and their work */
    double kernel_gflop;          /* the kernel's products' work (AttnKernel.flops), NAN if not counted */
    double rss_mib;
    /* --vs-torch (cosformer rows), else NAN: PyTorch's median and fastest step,
     * and its peak RSS above the RSS at the length's start */
    double torch_ms, torch_best_ms, torch_growth_mib;
} ScalingRow;

/* --ops: the matmul products of a training step through op_matmul against
 * raw cblas_sgemm, then the other ops. */
void bench_ops(const BenchOptions *o);
/* --gemm: the reference step's products through sgemm, oneDNN fp32 and oneDNN
 * bf16 (bench_gemm.c); and one product's seconds alone through GemmPath
 * `path`, or through gemm() at the precision in effect when path < 0. */
int bench_gemm(const Config *cfg);
double bench_product_seconds(int path, int M, int N, int K, bool ta, bool tb);

/* Training throughput on cfg with the per-op breakdown, printed; returns the
 * tokens per second. */
double bench_train(const BenchOptions *o, const Config *cfg);
/* A training step to time, the same in bench_train and bench_mpi, and
 * ./train's (experiments/training/step.h): cfg's model with weights drawn
 * from seed 1, one batch of B x T random byte ids (masked under objective =
 * mlm), the step's arena in use, gradients on, AdamW with cfg's options. */
typedef struct {
    Model m;
    int B, T;
    int *ids, *targets;
    TrainStep step;
    int precision; /* the step's Precision */
} BenchStep;

/* batch_seed: the batch's seed, or NULL to draw it on from the weights'
 * generator. */
void bench_step_init(BenchStep *b, const Config *cfg, const uint64_t *batch_seed);
/* Forward and backward: the gradients of the batch's loss. */
void bench_step_grad(BenchStep *b);
/* Step s's update: the clip's norm, then the optimizer's step, which zeroes the gradients. */
void bench_step_update(BenchStep *b, int s);
void bench_step_free(BenchStep *b);

/* The process's peak RSS in MiB since the last bench_rss_reset (VmHWM, Linux),
 * else its lifetime peak. */
double bench_rss_peak_mib(void);
/* Returns free heap to the system, then sets the peak to the current RSS
 * (writing 5 to /proc/self/clear_refs, Linux >= 4.0), so that an earlier
 * round's or row's memory does not count in the next one's; false where the
 * peak cannot be reset. */
bool bench_rss_reset(void);

/* --mpi: run plainly, mpirun -np 1 and 2 of this program (argv, with
 * --threads 1 added unless given) and their scaling; under mpirun, that
 * rank count's figures. Returns the exit status. */
int bench_mpi(const BenchOptions *o, const Config *cfg, int argc, char **argv);

/* --scaling; returns the exit status. */
int bench_scaling(const BenchOptions *o, const Config *cfg, int threads);

/* --vs-torch without --scaling: PyTorch's fastest setting here, then
 * --rounds paired rounds; returns the exit status. */
int bench_vs_torch(const BenchOptions *o, const Config *cfg, int threads);

/* --scaling --vs-torch: the causal cosformer rows again in PyTorch, filling
 * their torch_* fields and printing the comparison; 0, or -1 (said). */
int bench_scaling_vs_torch(const BenchOptions *o, const ModelConfig *m, int threads, ScalingRow *rows, int n_rows);

/* A kernel's row label: its attn value, what its describe hook says, and
 * causal or bidirectional ("linear phi=elu reweight=cos causal"). */
const char *bench_kernel_label(const ModelConfig *m, char *buf, size_t size);

#endif
