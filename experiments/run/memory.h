/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* memory.h: what a model needs in memory, checked before it is allocated.
 *
 * A config that asks for more than the machine can give (by mistake, or from a
 * forged checkpoint) is refused with one line,
 *     error: <what>: the model (N parameters) in training needs X GiB, Y GiB available
 * instead of an allocation failing part-way or the kernel killing the process.
 *
 * What a model needs:
 *   - its parameters: model_init allocates four slabs of them (values,
 *     gradients, AdamW's m and v), counted by declaring the model without
 *     allocating it (model_declare), so every kernel's own parameters count;
 *   - training: the arena's peak, about 4 B T (L (30 d + 4 mlp_ratio d) + 6 V)
 *     bytes (measured on the built-in kernels: within 15% of the peak, above
 *     it) plus, per layer and window, what the kernel keeps that grows faster
 *     than T (AttnKernel.quadratic_bytes: softmax's P);
 *   - evaluation (gradients off, one window at a time): about half of that
 *     per token, and no T x T matrix;
 *   - ./spectrum: every layer's P [H, T, T] at once.
 *   - the libraries: OpenBLAS's buffer per thread (128 MiB of address
 *     space each, which `ulimit -v` counts), each thread's stack and malloc
 *     arena, and what plotting maps (cairo, pango). OpenBLAS retries a
 *     buffer it cannot map forever, and the plotting libraries abort, so
 *     what does not fit is refused before it is asked for.
 * Available: MemAvailable (/proc/meminfo), or less when a cgroup's memory
 * limit or RLIMIT_AS (less what is already mapped) leaves less. */
#ifndef ATTNLAB_MEMORY_H
#define ATTNLAB_MEMORY_H

#include <stdbool.h>

#include "config.h"
#include "util.h"

typedef enum { MEMORY_TRAIN, MEMORY_EVAL, MEMORY_PROBS } MemoryUse;

/* The parameters of the model c makes. */
long model_param_count(const ModelConfig *c);
/* The floating-point operations of one training token of model c: 3 x (2 x
 * the multiply-adds of its linear layers and LM head) + 12 x layers x
 * context x d_model for the score matrix counted whole (what ./bench and
 * ./ablate --ladder report, the same for every kernel at a size). */
double model_flops_per_token(const ModelConfig *c);
/* Bytes a model of config c needs for windows of B x T used so (threads:
 * the kernels' per-thread scratch). */
double memory_need(const ModelConfig *c, int B, int T, MemoryUse use, int threads);
/* Bytes the libraries will still map with `threads` threads: OpenBLAS's
 * buffers beyond those it holds (engine_blas_buffers), the one the first
 * product maps, the threads' stacks and malloc arenas, and a plot's
 * libraries (each counted until it exists: an estimate on the safe side). */
double memory_threads_need(int threads);
/* Bytes this process can still allocate; a huge number when nothing says. */
double memory_available(void);
/* Refuses (-1 with e set: "<what>: the model (N parameters) ... needs X GiB,
 * Y GiB available", and the hint if not NULL) when memory_need is above
 * memory_available; 0 otherwise. */
int memory_check(const char *what, const char *hint, const ModelConfig *c, int B, int T, MemoryUse use, int threads,
                 Err *e);
/* Refuses a pool of `threads` threads that memory_threads_need says does not
 * fit: "<what>: N threads need X MiB for OpenBLAS's buffers ..., Y
 * available", with a hint naming the count that fits. */
int memory_check_threads(const char *what, int threads, Err *e);

#endif
