/* gemm.c: matrix products, fp32 through OpenBLAS and bf16 through oneDNN.
 *
 * bf16, large products: each operand is rounded into a per-thread buffer in
 * its own layout (or read from the bound weights' bf16 copy) and described
 * to oneDNN by strides, so a transpose costs nothing. alpha is the
 * primitive's output scale and beta a sum post-op, so C = alpha A B + beta C
 * is one primitive as in sgemm. The primitives live in a table filled on
 * first use of a shape; the table is read without a lock (an entry is
 * complete before the count that publishes it is raised) and written under
 * one. Memory objects, streams and scratchpads are per thread, so any thread
 * may run any primitive. Small products (gemm.h) go to gemm_small.c's
 * AVX512-BF16 kernel, or, without it, round their operands into a per-thread
 * float buffer and go to sgemm. */
#include "gemm.h"
#include "gemm_epilogue.h"
#include "gemm_small.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static Precision precision = PRECISION_FP32;
static bool bf16_ok;   /* gemm_bf16_check passed */
static bool dnnl_amx;  /* oneDNN runs bf16 on AMX tiles (Sapphire Rapids and later) */
static int dnnl_min_k = GEMM_BF16_DNNL_MIN_K; /* gemm_bf16_to_dnnl's K rule */

/* One shape's primitive. */
typedef struct {
    int M, N, K, ta, tb, lda, ldb, ldc;
    int f32; /* inputs in fp32 (./bench's comparison), not bf16 */
    float alpha, beta;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t md[4]; /* src, weights, dst, scratchpad */
} Entry;

#define GEMM_MAX_SHAPES 1024
enum { MEM_SRC, MEM_WEI, MEM_DST, MEM_SCRATCH, MEM_COUNT };
static Entry shapes[GEMM_MAX_SHAPES];
static int n_shapes; /* read with acquire, raised with release */
static dnnl_engine_t engine;

/* What each thread keeps. */
typedef struct {
    dnnl_stream_t stream;
    dnnl_memory_t (*mem)[MEM_COUNT]; /* [GEMM_MAX_SHAPES], made on first use */
    uint16_t *buf;                    /* A's and B's bf16 copies */
    size_t buf_cap;                   /* in elements */
    void *scratch;
    size_t scratch_cap; /* in bytes */
} ThreadState;
static _Thread_local ThreadState tls;

static long bf16_calls;
static double bf16_madds, bf16_sgemm_madds;

Precision gemm_set_precision(Precision p) {
    if (p == PRECISION_BF16 && !bf16_ok) DIE("gemm_set_precision: bf16 before gemm_bf16_check() passed");
    Precision was = precision;
    precision = p;
    return was;
}

Precision gemm_precision(void) { return precision; }

void gemm_bf16_count_clear(void) {
    bf16_calls = 0;
    bf16_madds = 0;
    bf16_sgemm_madds = 0;
}
long gemm_bf16_calls(void) { return bf16_calls; }
double gemm_bf16_madds(void) { return bf16_madds; }
double gemm_bf16_sgemm_madds(void) { return bf16_sgemm_madds; }

void bf16_from_floats(uint16_t *out, const float *x, long n) {
#pragma omp parallel for simd schedule(static) if (n >= (1L << 17) && !omp_in_parallel())
    for (long i = 0; i < n; i++) out[i] = bf16_from_float(x[i]);
}

#define DNNL_TRY(call)                                                                                 \
    do {                                                                                               \
        dnnl_status_t s_ = (call);                                                                     \
        if (s_ != dnnl_success) DIE("oneDNN: %s failed (status %d)", #call, (int)s_);                 \
    } while (0)

static void engine_once(void) {
    if (engine) return;
#pragma omp critical(gemm_engine)
    if (!engine) DNNL_TRY(dnnl_engine_create(&engine, dnnl_cpu, 0));
}

const char *gemm_dnnl_isa(void) {
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    static const struct {
        dnnl_cpu_isa_t isa;
        const char *name;
    } names[] = {
        {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
        {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
        {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
        {dnnl_cpu_isa_avx512_core, "avx512_core"},
        {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
        {dnnl_cpu_isa_avx2, "avx2"},
        {dnnl_cpu_isa_avx, "avx"},
        {dnnl_cpu_isa_sse41, "sse41"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if ((isa & names[i].isa) == names[i].isa) return names[i].name;
    return "none";
}

const char *gemm_dnnl_version(void) {
    static char text[32];
    const dnnl_version_t *v = dnnl_version();
    snprintf(text, sizeof text, "%d.%d.%d", v->major, v->minor, v->patch);
    return text;
}

const char *gemm_bf16_route(void) {
    static char text[128];
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    bool bf16 = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
    bool amx = (isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
    if (!bf16) return "none";
    if (!gemm_small_available())
        snprintf(text, sizeof text, "oneDNN %s, small products in sgemm on rounded inputs", gemm_dnnl_isa());
    else if (amx && !gemm_small_amx())
        snprintf(text, sizeof text, "oneDNN %s, small products in gemm_small avx512_bf16", gemm_dnnl_isa());
    else
        snprintf(text, sizeof text, "gemm_small %s, oneDNN %s past K %d", gemm_small_amx() ? "amx" : "avx512_bf16",
                 gemm_dnnl_isa(), dnnl_min_k);
    return text;
}

int gemm_bf16_check(Err *e) {
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if ((isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16) {
        err_set(e, "precision=bf16: this CPU has neither AVX512-BF16 nor AMX-BF16 (oneDNN's ISA here: %s)",
                gemm_dnnl_isa());
        return err_hint(e, "oneDNN would emulate bf16 more slowly than fp32; use --precision fp32");
    }
    engine_once();
    bf16_ok = true;
    dnnl_amx = (isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
    return 0;
}

/* The md of the logical r x c matrix op(X), X stored with row stride ld
 * (transposed when t). */
static void operand_md(dnnl_memory_desc_t *md, int r, int c, bool t, int ld, bool f32) {
    dnnl_dims_t dims = {r, c};
    dnnl_dims_t strides = {t ? 1 : ld, t ? ld : 1};
    DNNL_TRY(dnnl_memory_desc_init_by_strides(md, 2, dims, f32 ? dnnl_f32 : dnnl_bf16, strides));
}

static void entry_make(Entry *s) {
    operand_md(&s->md[MEM_SRC], s->M, s->K, s->ta, s->lda, s->f32);
    operand_md(&s->md[MEM_WEI], s->K, s->N, s->tb, s->ldb, s->f32);
    dnnl_dims_t dims = {s->M, s->N}, strides = {s->ldc, 1};
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&s->md[MEM_DST], 2, dims, dnnl_f32, strides));
    dnnl_matmul_desc_t desc;
    DNNL_TRY(dnnl_matmul_desc_init(&desc, &s->md[MEM_SRC], &s->md[MEM_WEI], NULL, &s->md[MEM_DST]));
    dnnl_primitive_attr_t attr;
    DNNL_TRY(dnnl_primitive_attr_create(&attr));
    DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (s->alpha != 1.0f) DNNL_TRY(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &s->alpha));
    if (s->beta != 0.0f) {
        dnnl_post_ops_t po;
        DNNL_TRY(dnnl_post_ops_create(&po));
        DNNL_TRY(dnnl_post_ops_append_sum(po, s->beta));
        DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
    DNNL_TRY(dnnl_primitive_desc_create(&s->pd, &desc, attr, engine, NULL));
    dnnl_primitive_attr_destroy(attr);
    DNNL_TRY(dnnl_primitive_create(&s->prim, s->pd));
    s->md[MEM_SCRATCH] = *dnnl_primitive_desc_query_md(s->pd, dnnl_query_scratchpad_md, 0);
}

/* The entry of this shape, made when new. */
static bool same_shape(const Entry *s, const Entry *k) {
    return s->M == k->M && s->N == k->N && s->K == k->K && s->ta == k->ta && s->tb == k->tb && s->f32 == k->f32 &&
           s->lda == k->lda && s->ldb == k->ldb && s->ldc == k->ldc && s->alpha == k->alpha && s->beta == k->beta;
}

static int entry_find(const Entry *key) {
    int n = __atomic_load_n(&n_shapes, __ATOMIC_ACQUIRE);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++)
            if (same_shape(&shapes[i], key)) return i;
        if (round) break;
        int found = -1;
#pragma omp critical(gemm_shapes)
        {
            int now = __atomic_load_n(&n_shapes, __ATOMIC_ACQUIRE);
            for (int i = n; i < now && found < 0; i++)
                if (same_shape(&shapes[i], key)) found = i;
            if (found < 0) {
                if (now == GEMM_MAX_SHAPES) DIE("gemm: more than %d bf16 product shapes", GEMM_MAX_SHAPES);
                shapes[now] = *key;
                entry_make(&shapes[now]);
                __atomic_store_n(&n_shapes, now + 1, __ATOMIC_RELEASE);
                found = now;
            }
        }
        return found;
    }
    return -1;
}

/* OpenBLAS's sgemm, row-major, the transposes as flags. */
static void sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
                lda, B, ldb, beta, C, ldc);
}

/* Elements from the first to the last of a rows x cols block with row stride ld. */
static size_t span(int rows, int cols, int ld) { return (size_t)(rows - 1) * ld + cols; }

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    free(p);
    size_t c = need + need / 4;
    p = malloc_check(c * elem, __FILE__, __LINE__);
    *cap = c;
    return p;
}

/* The bound weights' bf16 mirror (gemm_bind_weights). It is made, and
 * remade after a change, when a oneDNN product first reads it: where every
 * product runs in gemm_small (which rounds a weight as it packs it), no
 * mirror is kept at all. oneDNN products are made outside parallel
 * regions, so one thread at a time reaches it. */
static const float *w_base;
static long w_count;
static uint16_t *w_mirror;
static bool w_stale;

void gemm_bind_weights(const float *base, long n) {
    free(w_mirror);
    w_mirror = NULL;
    w_base = base;
    w_count = base ? n : 0;
    w_stale = true;
}

void gemm_weights_changed(void) { w_stale = true; }

/* The bf16 copy of the stored operand x (rows x cols, row stride ld): the
 * weights' mirror when x lies in it, else x rounded into *buf at the same
 * layout. */
static const uint16_t *operand_bf16(const float *x, int rows, int cols, int ld, uint16_t *buf) {
    long n = (long)span(rows, cols, ld);
    if (w_count && x >= w_base && x + n <= w_base + w_count) {
        if (!w_mirror) w_mirror = malloc_check(sizeof *w_mirror * (size_t)w_count, __FILE__, __LINE__);
        if (w_stale) bf16_from_floats(w_mirror, w_base, w_count);
        w_stale = false;
        return w_mirror + (x - w_base);
    }
    if (ld == cols) {
        bf16_from_floats(buf, x, n);
    } else {
        for (int r = 0; r < rows; r++) bf16_from_floats(buf + (long)r * ld, x + (long)r * ld, cols);
    }
    return buf;
}

static dnnl_memory_t thread_mem(int e, int which) {
    if (!tls.mem) tls.mem = calloc_check(GEMM_MAX_SHAPES, sizeof *tls.mem, __FILE__, __LINE__);
    dnnl_memory_t *m = &tls.mem[e][which];
    if (!*m) DNNL_TRY(dnnl_memory_create(m, &shapes[e].md[which], engine, DNNL_MEMORY_NONE));
    return *m;
}

/* The product of key's shape in oneDNN. A and B are fp32, rounded here (or
 * read from the weights' mirror), unless a16 or b16 says they are stored in
 * bf16 already: oneDNN then reads them as they are, the same bits as
 * widening them and rounding them again, without the two passes. */
static void gemm_bf16(const Entry *key, const void *A, bool a16, const void *B, bool b16, float *C) {
    int e = entry_find(key);
    const Entry *s = &shapes[e];
    if (s->f32 && (a16 || b16)) DIE("gemm_bf16: an operand stored in bf16 for an fp32 product");
    int ra = s->ta ? s->K : s->M, ca = s->ta ? s->M : s->K, rb = s->tb ? s->N : s->K, cb = s->tb ? s->K : s->N;
    size_t na = s->f32 || a16 ? 0 : span(ra, ca, s->lda), nb = s->f32 || b16 ? 0 : span(rb, cb, s->ldb);
    if (na + nb) tls.buf = grow(tls.buf, &tls.buf_cap, na + nb, sizeof *tls.buf);
    const void *a = s->f32 || a16 ? A : operand_bf16(A, ra, ca, s->lda, tls.buf);
    const void *b = s->f32 || b16 ? B : operand_bf16(B, rb, cb, s->ldb, tls.buf + na);
    size_t sbytes = dnnl_memory_desc_get_size(&s->md[MEM_SCRATCH]);
    tls.scratch = grow(tls.scratch, &tls.scratch_cap, sbytes ? sbytes : 1, 1);
    if (!tls.stream) DNNL_TRY(dnnl_stream_create(&tls.stream, engine, dnnl_stream_default_flags));
    void *handles[MEM_COUNT] = {(void *)a, (void *)b, C, tls.scratch};
    static const int args[MEM_COUNT] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD};
    dnnl_exec_arg_t exec[MEM_COUNT];
    for (int i = 0; i < MEM_COUNT; i++) {
        dnnl_memory_t m = thread_mem(e, i);
        DNNL_TRY(dnnl_memory_set_data_handle(m, handles[i]));
        exec[i] = (dnnl_exec_arg_t){args[i], m};
    }
    DNNL_TRY(dnnl_primitive_execute(s->prim, tls.stream, MEM_COUNT, exec));
    DNNL_TRY(dnnl_stream_wait(tls.stream));
    if (s->f32) return;
#pragma omp atomic
    bf16_calls++;
#pragma omp atomic
    bf16_madds += (double)s->M * s->N * s->K;
}

long gemm_bf16_thread_variance(int threads, char *msg, int size) {
    int before = omp_get_max_threads(), n = __atomic_load_n(&n_shapes, __ATOMIC_ACQUIRE);
    uint64_t z = 77;
    long worst = 0;
    msg[0] = '\0';
    for (int e = 0; e < n && worst == 0; e++) {
        const Entry *s = &shapes[e];
        if (s->f32) continue;
        size_t na = span(s->ta ? s->K : s->M, s->ta ? s->M : s->K, s->lda);
        size_t nb = span(s->tb ? s->N : s->K, s->tb ? s->K : s->N, s->ldb), nc = span(s->M, s->N, s->ldc);
        float *a = malloc_check(sizeof(float) * (na + nb + 2 * nc), __FILE__, __LINE__);
        float *b = a + na, *c1 = b + nb, *c2 = c1 + nc;
        for (size_t i = 0; i < na + nb; i++) {
            z = z * 6364136223846793005ULL + 1442695040888963407ULL;
            a[i] = (float)((double)(z >> 11) * 0x1p-53 * 2 - 1);
        }
        memset(c1, 0, sizeof(float) * 2 * nc);
        for (int run = 0; run < 2; run++) {
            omp_set_num_threads(run ? threads : 1);
            gemm_bf16(s, a, false, b, false, run ? c2 : c1);
        }
        long differ = 0;
        for (size_t i = 0; i < nc; i++) differ += memcmp(&c1[i], &c2[i], sizeof(float)) != 0;
        if (differ)
            snprintf(msg, (size_t)size, "oneDNN (%s) gives different bits on 1 and %d threads: %ld of %zu values of "
                     "a bf16 %dx%dx%d product", gemm_dnnl_isa(), threads, differ, nc, s->M, s->N, s->K);
        worst = differ;
        free(a);
    }
    omp_set_num_threads(before);
    return worst;
}

static double jitter;
static uint64_t jitter_seed, jitter_count;

void gemm_set_jitter(double rel, uint64_t seed) {
    jitter = rel;
    jitter_seed = seed;
    jitter_count = 0;
}

static float jittered(float x, uint64_t key) {
    uint64_t z = key + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    double r = (double)(z >> 11) * 0x1p-53 * 2 - 1;
    return (float)(x * (1 + jitter * r));
}

/* op(X)'s stored rows x cols (row stride ld), each element moved. */
static float *jitter_copy(const float *x, int rows, int cols, int ld, uint64_t key) {
    float *y = malloc_check(sizeof(float) * (size_t)rows * ld, __FILE__, __LINE__);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) y[(long)r * ld + c] = jittered(x[(long)r * ld + c], key + (uint64_t)r * ld + c);
    return y;
}

static void gemm_jittered(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                          int ldb, float beta, float *C, int ldc) {
    uint64_t call;
#pragma omp atomic capture
    call = jitter_count++;
    uint64_t key = jitter_seed ^ (call << 40);
    float *a = jitter_copy(A, ta ? K : M, ta ? M : K, lda, key);
    float *b = jitter_copy(B, tb ? N : K, tb ? K : N, ldb, key ^ (1ULL << 39));
    sgemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, C, ldc);
    free(a);
    free(b);
}

/* What each thread keeps for the small products: the rounded inputs. */
static _Thread_local float *small_buf;
static _Thread_local size_t small_cap;

/* rows x cols of x (row stride ld) rounded to bf16 into out, same layout. */
static void round_rows(float *out, const float *x, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (long)r * ld;
        float *o = out + (long)r * ld;
#pragma omp simd
        for (int c = 0; c < cols; c++) o[c] = bf16_round(xr[c]);
    }
}

/* For the tests and ./bench: small products as sgemm on rounded inputs even
 * where gemm_small() could run them. */
static bool force_rounded_sgemm;
bool gemm_small_set_fallback(bool on) {
    bool was = force_rounded_sgemm;
    force_rounded_sgemm = on;
    return was;
}

/* A small bf16 product: gemm_small() on AVX512-BF16, else sgemm on its
 * inputs rounded to bf16. */
static void gemm_bf16_small(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C, int ldc) {
    if (gemm_small_available() && !force_rounded_sgemm) {
        gemm_small(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    } else {
        int ra = ta ? K : M, ca = ta ? M : K, rb = tb ? N : K, cb = tb ? K : N;
        size_t na = span(ra, ca, lda), nb = span(rb, cb, ldb);
        small_buf = grow(small_buf, &small_cap, na + nb, sizeof *small_buf);
        round_rows(small_buf, A, ra, ca, lda);
        round_rows(small_buf + na, B, rb, cb, ldb);
        sgemm(ta, tb, M, N, K, alpha, small_buf, lda, small_buf + na, ldb, beta, C, ldc);
    }
#pragma omp atomic
    bf16_calls++;
#pragma omp atomic
    bf16_madds += (double)M * N * K;
#pragma omp atomic
    bf16_sgemm_madds += (double)M * N * K;
}

int gemm_bf16_set_dnnl_min_k(int k) {
    int was = dnnl_min_k;
    dnnl_min_k = k;
    return was;
}

bool gemm_bf16_to_dnnl(int M, int N, int K) {
    if (omp_in_parallel() || (long)M * N * K < GEMM_BF16_MIN_MADDS) return false;
    return !gemm_small_available() || (dnnl_amx && !gemm_small_amx()) || K > dnnl_min_k;
}

void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
          float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (jitter > 0 && precision == PRECISION_FP32 && K > 0) {
        gemm_jittered(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (precision == PRECISION_BF16 && K > 0 && !gemm_bf16_to_dnnl(M, N, K)) {
        gemm_bf16_small(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (precision == PRECISION_BF16 && K > 0) {
        Entry key = {.M = M, .N = N, .K = K, .ta = ta, .tb = tb, .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = alpha,
                     .beta = beta};
        gemm_bf16(&key, A, false, B, false, C);
        return;
    }
    sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_via(GemmPath path, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc) {
    if (path == GEMM_PATH_SMALL_BF16 && M > 0 && N > 0 && K > 0) {
        gemm_bf16_small(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (path == GEMM_PATH_SGEMM || M <= 0 || N <= 0 || K <= 0) {
        sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    engine_once();
    Entry key = {.M = M, .N = N, .K = K, .ta = ta, .tb = tb, .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = alpha,
                 .beta = beta, .f32 = path == GEMM_PATH_DNNL_F32};
    gemm_bf16(&key, A, false, B, false, C);
}

/* ---- gemm_ex: epilogues, and operands stored in bf16 --------------------- */

static GemmFault fault;
static bool force_unfused;

GemmFault gemm_set_fault(GemmFault f) {
    GemmFault was = fault;
    fault = f;
    return was;
}

bool gemm_set_unfused(bool on) {
    bool was = force_unfused;
    force_unfused = on;
    return was;
}

/* Each thread's buffers for the unfused composition: widened operands, and
 * C when the epilogue writes bf16 alone. They grow to the largest product
 * and stay, so a step makes no malloc after its first. */
static _Thread_local float *ex_buf;
static _Thread_local size_t ex_cap;

static void widen_rows(float *out, const uint16_t *x, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++) {
        const uint16_t *xr = x + (long)r * ld;
        float *o = out + (long)r * ld;
#pragma omp simd
        for (int c = 0; c < cols; c++) o[c] = bf16_to_float(xr[c]);
    }
}

/* The bias added once more to C's rows: GEMM_FAULT_BIAS_TWICE, for the tests. */
static void bias_again(float *C, int ldc, int M, int N, const float *bias) {
    for (int r = 0; r < M; r++)
        for (int j = 0; j < N; j++) C[(long)r * ldc + j] += bias[j];
}

/* The composition gemm_ex's kernel fuses, one step at a time. */
static void gemm_ex_unfused(bool ta, bool tb, int M, int N, int K, float alpha, const void *A, bool a16, int lda,
                            const void *B, bool b16, int ldb, float beta, float *C, int ldc, const GemmEpilogue *ep) {
    int ra = ta ? K : M, ca = ta ? M : K, rb = tb ? N : K, cb = tb ? K : N;
    /* a product for oneDNN reads the stored bf16 operands as they are */
    bool dnnl = precision == PRECISION_BF16 && K > 0 && gemm_bf16_to_dnnl(M, N, K);
    size_t na = a16 && !dnnl ? span(ra, ca, lda) : 0, nb = b16 && !dnnl ? span(rb, cb, ldb) : 0;
    size_t nc = C ? 0 : (size_t)M * N;
    if (na + nb + nc) ex_buf = grow(ex_buf, &ex_cap, na + nb + nc, sizeof *ex_buf);
    const float *a = A, *b = B;
    if (na) widen_rows(ex_buf, A, ra, ca, lda), a = ex_buf;
    if (nb) widen_rows(ex_buf + na, B, rb, cb, ldb), b = ex_buf + na;
    if (!C) C = ex_buf + na + nb, ldc = N;
    /* the bias copied into C's rows for the sum (beta 1): oneDNN's bias argument, a primitive of
     * its own, need not give the bits of the sum post-op (on AMX, for an op(A) transposed, it did
     * not), nor did it make the step faster */
    if (ep && ep->bias) {
        for (int r = 0; r < M; r++) memcpy(C + (long)r * ldc, ep->bias, sizeof(float) * (size_t)N);
        if (fault == GEMM_FAULT_BIAS_TWICE) bias_again(C, ldc, M, N, ep->bias);
        beta = 1.0f;
    }
    if (dnnl) {
        Entry key = {.M = M, .N = N, .K = K, .ta = ta, .tb = tb, .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = alpha,
                     .beta = beta};
        gemm_bf16(&key, A, a16, B, b16, C);
    } else if (K > 0)
        gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, C, ldc);
    else if (!(ep && ep->bias))
        for (int r = 0; r < M; r++)
            for (int j = 0; j < N; j++) C[(long)r * ldc + j] = beta == 0 ? 0 : beta * C[(long)r * ldc + j];
    if (!gemm_epilogue_rest(ep)) return;
    for (int r = 0; r < M; r++) gemm_epilogue_run(ep, fault, C + (long)r * ldc, N, r, 0, C + (long)r * ldc);
}

bool gemm_packed_usable(void) {
    return precision == PRECISION_BF16 && jitter == 0 && !force_unfused && !force_rounded_sgemm &&
           gemm_small_available();
}

long gemm_packed_words(int K, int N) { return gemm_small_packed_words(K, N); }

GemmPackedB gemm_pack_b(uint32_t *words, bool tb, const uint16_t *B, int ldb, int K, int N) {
    if (!gemm_small_available()) DIE("gemm_pack_b: gemm's kernel cannot run on this CPU (gemm_packed_usable)");
    gemm_small_pack_b(words, tb, B, ldb, K, N);
    return (GemmPackedB){words, K, N};
}

bool gemm_packed(bool ta, int M, int N, int K, float alpha, const void *A, bool a16, int lda, const GemmPackedB *b,
                 int k0, int n0, float beta, float *C, int ldc) {
    if (k0 < 0 || n0 < 0 || k0 + K > b->K || n0 + N > b->N) DIE("gemm_packed: a block outside the packed op(B)");
    if (M <= 0 || N <= 0 || K <= 0 || !C || !gemm_packed_usable() || gemm_bf16_to_dnnl(M, N, K)) return false;
    if (k0 % 2 || n0 % 32 || (K % 2 && k0 + K != b->K)) return false;
    gemm_small_packed(ta, M, N, K, alpha, A, a16, lda, b->p, b->K, k0, n0, beta, C, ldc);
#pragma omp atomic
    bf16_calls++;
#pragma omp atomic
    bf16_madds += (double)M * N * K;
#pragma omp atomic
    bf16_sgemm_madds += (double)M * N * K;
    return true;
}

void gemm_ex(bool ta, bool tb, int M, int N, int K, float alpha, const void *A, bool a16, int lda, const void *B,
             bool b16, int ldb, float beta, float *C, int ldc, const GemmEpilogue *ep) {
    if (M <= 0 || N <= 0) return;
    if (ep && ep->bias && beta != 0) DIE("gemm_ex: a bias with beta %g (the bias takes beta C's place)", beta);
    if (!C && (beta != 0 || !ep || !ep->out16)) DIE("gemm_ex: no C, and no out16 to take it");
    bool fused = precision == PRECISION_BF16 && K > 0 && jitter == 0 && !force_unfused && !force_rounded_sgemm &&
                 gemm_small_available() && !gemm_bf16_to_dnnl(M, N, K) && (C || K <= GEMM_SMALL_KC);
    if (!fused) {
        gemm_ex_unfused(ta, tb, M, N, K, alpha, A, a16, lda, B, b16, ldb, beta, C, ldc, ep);
        return;
    }
    gemm_small_ex(ta, tb, M, N, K, alpha, A, a16, lda, B, b16, ldb, beta, C, ldc, ep, fault);
#pragma omp atomic
    bf16_calls++;
#pragma omp atomic
    bf16_madds += (double)M * N * K;
#pragma omp atomic
    bf16_sgemm_madds += (double)M * N * K;
}
