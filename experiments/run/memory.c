/* memory.c: see memory.h for what is counted. */
#include "memory.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "model.h"
#include "tensor.h"

long model_param_count(const ModelConfig *c) {
    Model m;
    model_declare(&m, c);
    long n = m.params.total;
    model_free(&m);
    return n;
}

/* Parameters that take part in matmuls: 6 flops per parameter per token
 * (forward 2, backward 4), plus 12 L T d per token for the attention scores
 * and their product with v (the usual estimate, as in llm.c / nanoGPT). */
double model_flops_per_token(const ModelConfig *c) {
    double d = c->d_model, H = c->heads, dk = model_key_size(c), dv = model_head_size(c);
    double per_layer = d * H * dk * 2 + d * H * dv * 2 + 2 * d * c->mlp_ratio * d;
    double matmul_params = c->layers * per_layer + (double)c->vocab * d;
    return 6 * matmul_params + 12.0 * c->layers * c->context * d;
}

double memory_need(const ModelConfig *c, int B, int T, MemoryUse use, int threads) {
    const AttnKernel *kern = attn_kernel_for(c->attn);
    ModelConfig m = attn_effective(c);
    double params = (double)model_param_count(c), tokens = (double)B * T, L = c->layers, d = c->d_model;
    double per_token = L * (30.0 * d + 4.0 * c->mlp_ratio * d) + 6.0 * c->vocab; /* floats */
    double quadratic = kern->quadratic_bytes ? kern->quadratic_bytes(&m, T, threads) : 0.0;
    switch (use) {
        case MEMORY_TRAIN: /* values, gradients, m and v; the arena; what the kernel keeps that grows faster than T */
            return 16.0 * params + 4.0 * tokens * per_token + L * B * quadratic;
        case MEMORY_EVAL: /* the values are read, the other slabs never touched */
            return 4.0 * params + 2.0 * tokens * per_token;
        case MEMORY_PROBS: /* every layer's P at once, and a copy for LAPACK */
            return 4.0 * params + 2.0 * tokens * per_token + 4.0 * (L * c->heads + 1) * B * (double)T * T;
    }
    return 0.0;
}

/* OpenBLAS's buffer per thread: 128 MiB of address space. Measured on
 * Debian's 0.3.21 OpenMP build: raising its thread count from n to n + k
 * maps k x 128 MiB at once (its BUFFER_SIZE on x86-64, 32 << 22 bytes), and
 * the first product maps one more for the calling thread. A build with
 * another BUFFERSIZE maps less: the estimate errs on the safe side. */
#define BLAS_BUFFER_BYTES (128.0 * 1024 * 1024)

/* Each OpenMP thread beyond the first has a stack: the pthread default,
 * which glibc takes from `ulimit -s` (8 MiB when unset). */
static double thread_stack_bytes(void) {
    pthread_attr_t a;
    size_t size = 0;
    if (pthread_getattr_default_np(&a) == 0) {
        pthread_attr_getstacksize(&a, &size);
        pthread_attr_destroy(&a);
    }
    return size ? (double)size : 8.0 * 1024 * 1024;
}

/* A thread that allocates gets its own malloc arena from glibc, which
 * reserves 64 MiB of address space for it (its HEAP_MAX_SIZE on 64-bit). */
#define THREAD_ARENA_BYTES (64.0 * 1024 * 1024)

/* Drawing a plot loads cairo, pango and fontconfig and starts pango's
 * thread: measured, the peak address space of a tiny ./train rose by 225
 * MiB at loss.png. Under a `ulimit -v` too tight for it, those libraries
 * abort or crash the process after the work is done, so it is counted,
 * with room for the small allocations around it (at 225 MiB, one tiny run
 * in twenty still hung). */
#define PLOT_BYTES (288.0 * 1024 * 1024)

static double per_thread_bytes(void) { return BLAS_BUFFER_BYTES + thread_stack_bytes() + THREAD_ARENA_BYTES; }

double memory_threads_need(int threads) {
    int held = engine_blas_buffers();
    double buffers = (threads > held ? threads - held : 0) + 1; /* + the first product's */
    return buffers * BLAS_BUFFER_BYTES + (threads > 1 ? threads - 1 : 0) * (thread_stack_bytes() + THREAD_ARENA_BYTES) +
           PLOT_BYTES;
}

/* The first number in a file (a /proc or /sys value), or -1. */
static double read_number(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    size_t klen = key ? strlen(key) : 0;
    while (fgets(line, sizeof line, f)) {
        if (key && strncmp(line, key, klen) != 0) continue;
        if (sscanf(line + klen, "%lf", &v) != 1) v = -1;
        break;
    }
    fclose(f);
    return v;
}

static void lower_to(double *avail, double x) {
    if (x >= 0 && x < *avail) *avail = x;
}

double memory_available(void) {
    double avail = 1e300;
    double kib = read_number("/proc/meminfo", "MemAvailable:");
    if (kib >= 0) avail = kib * 1024.0;
    /* a container's limit: cgroup v2, then v1 ("max" or a huge number: none) */
    double limit = read_number("/sys/fs/cgroup/memory.max", NULL);
    if (limit > 0) lower_to(&avail, limit - read_number("/sys/fs/cgroup/memory.current", NULL));
    limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", NULL);
    if (limit > 0 && limit < 1e18)
        lower_to(&avail, limit - read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", NULL));
    /* ulimit -v: what is mapped already counts against it */
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        double pages = read_number("/proc/self/statm", NULL);
        long page = sysconf(_SC_PAGESIZE);
        lower_to(&avail, (double)rl.rlim_cur - (pages > 0 && page > 0 ? pages * (double)page : 0.0));
    }
    return avail > 0 ? avail : 0;
}

static const char *gib(double bytes, char *buf, size_t size) {
    if (bytes >= (double)(1 << 30))
        snprintf(buf, size, "%.1f GiB", bytes / (1 << 30));
    else
        snprintf(buf, size, "%.0f MiB", bytes / (1 << 20));
    return buf;
}

/* "842.5 thousand", "51.5 billion" */
static const char *count_words(double n, char *buf, size_t size) {
    if (n >= 1e9)
        snprintf(buf, size, "%.1f billion", n / 1e9);
    else if (n >= 1e6)
        snprintf(buf, size, "%.1f million", n / 1e6);
    else
        snprintf(buf, size, "%.1f thousand", n / 1e3);
    return buf;
}

int memory_check_threads(const char *what, int threads, Err *e) {
    double need = memory_threads_need(threads), avail = memory_available();
    if (need <= avail) return 0;
    char a[32], b[32];
    err_set(e, "%s: %d threads need %s for OpenBLAS's buffers, their stacks and the plots' libraries, %s available", what, threads,
            gib(need, a, sizeof a), gib(avail, b, sizeof b));
    long fit = (long)((avail - BLAS_BUFFER_BYTES - PLOT_BYTES + thread_stack_bytes() + THREAD_ARENA_BYTES) /
                      per_thread_bytes());
    if (fit >= threads) fit = threads - 1;
    if (fit >= 1) return err_hint(e, "--threads %ld%s, or a higher ulimit -v", fit, fit > 1 ? " or fewer" : "");
    return err_hint(e, "a higher ulimit -v, or a machine with more memory");
}

int memory_check(const char *what, const char *hint, const ModelConfig *c, int B, int T, MemoryUse use, int threads,
                 Err *e) {
    /* the thread pool's buffers are mapped when first used: until then they count */
    double need = memory_need(c, B, T, use, threads) + memory_threads_need(threads), avail = memory_available();
    if (need <= avail) return 0;
    char a[32], b[32], n[32];
    double params = (double)model_param_count(c);
    char libs[32];
    err_set(e, "%s: the model (%s parameters) %s needs %s (%s of it the libraries' threads and plots), %s available",
            what, count_words(params, n, sizeof n), use == MEMORY_TRAIN ? "in training" : "at this length",
            gib(need, a, sizeof a), gib(memory_threads_need(threads), libs, sizeof libs), gib(avail, b, sizeof b));
    double least = (use == MEMORY_TRAIN ? 16.0 : 4.0) * params;
    if (least > avail) /* no length or batch helps */
        return err_hint(e, "its parameters alone need %s: a smaller model, or a machine with more memory",
                        gib(least, a, sizeof a));
    return hint ? err_hint(e, "%s", hint) : -1;
}
