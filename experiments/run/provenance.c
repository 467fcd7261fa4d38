/* provenance.c: where a run ran (provenance.h). */
#include "provenance.h"

#include <cJSON.h>
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "run.h"
#include "tensor.h"

/* The commit this binary was built from and whether the tracked files
 * differed from it, as the Makefile found them when it compiled this file. */
#ifndef ATTNLAB_COMMIT
#define ATTNLAB_COMMIT "unknown"
#endif
#ifndef ATTNLAB_DIRTY
#define ATTNLAB_DIRTY 0
#endif

/* /proc/cpuinfo's "model name" of the first CPU, with its family and model
 * numbers (a cloud's "AMD EPYC" names no generation; family 25 is Zen 3 and
 * 4, 26 Zen 5); "unknown" without one. */
static void cpu_model(char *out, size_t size) {
    snprintf(out, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[1024], name[256] = "";
    int family = -1, model = -1;
    while (fgets(line, sizeof line, f) && (!name[0] || family < 0 || model < 0)) {
        const char *v = strchr(line, ':');
        if (!v) {
            if (line[0] == '\n' && name[0]) break; /* the first CPU's block ends */
            continue;
        }
        v += strspn(v + 1, " \t") + 1;
        if (!strncmp(line, "model name", 10)) {
            size_t n = strcspn(v, "\n");
            while (n && v[n - 1] == ' ') n--;
            snprintf(name, sizeof name, "%.*s", (int)n, v);
        } else if (!strncmp(line, "cpu family", 10)) {
            family = atoi(v);
        } else if (!strncmp(line, "model\t", 6) || !strncmp(line, "model ", 6)) {
            model = atoi(v);
        }
    }
    fclose(f);
    if (!name[0]) return;
    if (family >= 0 && model >= 0)
        snprintf(out, size, "%s, family %d model %d", name, family, model);
    else
        snprintf(out, size, "%s", name);
}

/* The instruction sets the products and our loops can use that this CPU has
 * (__builtin_cpu_supports takes a string literal only, hence the macro). */
static void cpu_isa(char *out, size_t size) {
    size_t len = 0;
    out[0] = '\0';
    __builtin_cpu_init();
#define ISA(gcc, name)                                                                                   \
    if (__builtin_cpu_supports(gcc) && len + 16 < size)                                                    \
    len += (size_t)snprintf(out + len, size - len, "%s%s", len ? " " : "", name)
    ISA("avx2", "avx2");
    ISA("fma", "fma");
    ISA("avx512f", "avx512f");
    ISA("avx512bw", "avx512bw");
    ISA("avx512vl", "avx512vl");
    ISA("avx512vnni", "avx512_vnni");
    ISA("avx512bf16", "avx512_bf16");
#undef ISA
    if (!strcmp(gemm_dnnl_isa(), "avx512_core_amx") && len + 16 < size)
        snprintf(out + len, size - len, "%samx_bf16", len ? " " : "");
}

/* The vector extensions the compiler was allowed for this build (-march):
 * the code our own loops became depends on them. */
static const char *compiled_for(void) {
    return "x86-64"
#ifdef __AVX2__
           " avx2"
#endif
#ifdef __FMA__
           " fma"
#endif
#ifdef __AVX512F__
           " avx512f"
#endif
#ifdef __AVX512BW__
           " avx512bw"
#endif
#ifdef __AVX512VL__
           " avx512vl"
#endif
#ifdef __AVX512BF16__
           " avx512_bf16"
#endif
#ifdef __AMX_TILE__
           " amx_tile"
#endif
        ;
}

static const char *compiler(void) {
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#else
    return "unknown";
#endif
}

/* The products' path in the given precision. */
static void products(int precision, char *out, size_t size) {
    if (precision == PRECISION_BF16)
        snprintf(out, size, "bf16: %s; bias sums OpenBLAS %s", gemm_bf16_route(), engine_blas_kernel());
    else
        snprintf(out, size, "fp32: OpenBLAS %s", engine_blas_kernel());
}

void provenance_kernel(int precision, int threads, char *out, size_t size) {
    char cpu[128], path[224];
    cpu_model(cpu, sizeof cpu);
    products(precision, path, sizeof path);
    snprintf(out, size, "%s; %d thread%s; %s (%s)", path, threads, threads == 1 ? "" : "s", cpu, compiled_for());
}

cJSON *provenance_now(int precision, int threads, int ranks) {
    char buf[640];
    cJSON *j = cJSON_CreateObject();
    cpu_model(buf, sizeof buf);
    cJSON_AddStringToObject(j, "cpu", buf);
    cpu_isa(buf, sizeof buf);
    cJSON_AddStringToObject(j, "cpu_isa", buf);
    cJSON_AddStringToObject(j, "compiled_for", compiled_for());
    cJSON_AddStringToObject(j, "compiler", compiler());
    cJSON_AddStringToObject(j, "openblas", openblas_get_config());
    cJSON_AddStringToObject(j, "openblas_kernel", engine_blas_kernel());
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    if (coretype && *coretype)
        cJSON_AddStringToObject(j, "openblas_coretype", coretype);
    else
        cJSON_AddNullToObject(j, "openblas_coretype");
    cJSON_AddStringToObject(j, "onednn", gemm_dnnl_version());
    cJSON_AddStringToObject(j, "onednn_isa", gemm_dnnl_isa());
    products(precision, buf, sizeof buf);
    cJSON_AddStringToObject(j, "products", buf);
    cJSON_AddStringToObject(j, "precision", precision == PRECISION_BF16 ? "bf16" : "fp32");
    cJSON_AddNumberToObject(j, "threads", threads);
    cJSON_AddNumberToObject(j, "ranks", ranks);
    cJSON_AddStringToObject(j, "commit", ATTNLAB_COMMIT);
    cJSON_AddBoolToObject(j, "dirty", ATTNLAB_DIRTY);
    provenance_kernel(precision, threads, buf, sizeof buf);
    cJSON_AddStringToObject(j, "kernel", buf);
    return j;
}

/* dir/provenance.json parsed; NULL when missing or not ours (*ours false). */
static cJSON *read_file_json(const char *dir, bool *ours) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, PROVENANCE_FILE);
    *ours = true;
    FILE *f = fopen_regular(path, "r", NULL);
    if (!f) {
        *ours = errno == ENOENT;
        return NULL;
    }
    static char buf[1 << 18];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    bool whole = feof(f) && !ferror(f);
    fclose(f);
    buf[n] = '\0';
    cJSON *j = whole ? cJSON_Parse(buf) : NULL;
    if (!j || !cJSON_IsArray(cJSON_GetObjectItem(j, "segments"))) {
        cJSON_Delete(j);
        *ours = false;
        return NULL;
    }
    return j;
}

int provenance_record(const char *dir, long start, int precision, int threads, int ranks, Err *e) {
    bool ours;
    cJSON *j = read_file_json(dir, &ours);
    if (!ours) fprintf(stderr, "note: %s/%s is not a provenance record; it is written anew\n", dir, PROVENANCE_FILE);
    if (!j) {
        j = cJSON_CreateObject();
        cJSON_AddItemToObject(j, "segments", cJSON_CreateArray());
    }
    cJSON *segs = cJSON_GetObjectItem(j, "segments");
    /* the segments whose steps the checkpoint no longer holds go with them */
    for (int i = cJSON_GetArraySize(segs) - 1; i >= 0; i--) {
        const cJSON *from = cJSON_GetObjectItem(cJSON_GetArrayItem(segs, i), "from_step");
        if (!cJSON_IsNumber(from) || from->valuedouble >= (double)start) cJSON_DeleteItemFromArray(segs, i);
    }
    cJSON *seg = provenance_now(precision, threads, ranks);
    /* first, for a reader's eye */
    cJSON *from = cJSON_CreateNumber((double)start);
    seg->child->prev = from, from->next = seg->child, seg->child = from;
    from->string = strdup("from_step");
    if (!from->string) DIE_OOM(16);
    cJSON_AddItemToArray(segs, seg);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) DIE_OOM(1 << 12);
    size_t len = strlen(text);
    char *line = realloc(text, len + 2);
    if (!line) DIE_OOM(len + 2);
    strcpy(line + len, "\n");
    char path[1100];
    int rc = path_join(path, sizeof path, dir, PROVENANCE_FILE, e);
    if (rc == 0) rc = write_file_atomic(path, line, e);
    free(line);
    return rc;
}

int provenance_read(const char *dir, char *kernel, size_t ksize, char *commit, size_t csize, bool *mixed) {
    kernel[0] = commit[0] = '\0';
    *mixed = false;
    bool ours;
    cJSON *j = read_file_json(dir, &ours);
    if (!j) return ours ? 1 : -1;
    const cJSON *seg;
    int n = 0;
    cJSON_ArrayForEach(seg, cJSON_GetObjectItem(j, "segments")) {
        const cJSON *k = cJSON_GetObjectItem(seg, "kernel"), *c = cJSON_GetObjectItem(seg, "commit");
        const cJSON *d = cJSON_GetObjectItem(seg, "dirty");
        if (!cJSON_IsString(k)) continue;
        if (!n++)
            snprintf(kernel, ksize, "%s", k->valuestring);
        else if (strcmp(kernel, k->valuestring))
            *mixed = true;
        if (cJSON_IsString(c)) snprintf(commit, csize, "%.12s%s", c->valuestring, cJSON_IsTrue(d) ? "+dirty" : "");
    }
    cJSON_Delete(j);
    return n ? 0 : -1;
}
