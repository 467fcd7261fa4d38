/* gemm_amx.c: gemm's kernel (gemm_small.h) on AMX tiles.
 *
 * Where the CPU has AMX-BF16 (Sapphire Rapids and later), the products of
 * gemm_small.c run on tiles: tdpbf16ps multiplies a 16 x 32 block of op(A) (16 rows of 16
 * pairs) by a 32 x 16 block of op(B) (16 pair rows of 16 columns, a half of
 * one of our panels, as it is packed) into a 16 x 16 tile of fp32 sums,
 * 16 times the work of one vdpbf16ps. A block of C of 32 x 32 (four sum
 * tiles, two of op(A), two of op(B)) is summed along K sixteen pairs at a
 * time, in the same fixed order whatever the threads; then its sums go
 * through tile_put as the vector kernel's do (alpha, beta, bias, epilogue).
 * AMX sums each pair in its own order, so its bits are not the vector
 * kernel's: gemm_bf16_route names which one ran. Tiles read whole blocks of
 * 16 pairs and 16 rows, so op(A) is packed zero-padded to both, and a
 * panel's last partial block of pairs is copied into a zero-padded one.
 * gemm_small.c calls in through gemm_small_parts.h. */

#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gemm.h"
#include "gemm_small.h"
#include "gemm_small_parts.h"

static int amx_have = -1;
static bool amx_off;      /* gemm_small_set_amx(false) */
static long amx_products; /* products (blocks of K) made on tiles */

long gemm_small_amx_products(void) { return amx_products; }

void amx_count(void) {
#pragma omp atomic
    amx_products++;
}

/* Linux gives a process AMX's tile state only when asked (arch_prctl). */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

bool gemm_small_amx(void) {
    if (amx_have < 0) {
        /* ATTNLAB_NO_AMX set: as on a CPU without AMX (the vector kernel runs) */
        const char *off = getenv("ATTNLAB_NO_AMX");
        /* CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE (asked directly: clang's
         * __builtin_cpu_supports knows neither) */
        unsigned a, b, c, d;
        bool cpu = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1) && (d >> 24 & 1);
        amx_have = gemm_small_available() && !(off && *off) && cpu &&
                   syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    }
    return amx_have && !amx_off;
}

bool gemm_small_set_amx(bool on) {
    bool was = !amx_off;
    amx_off = !on;
    return was;
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

/* Tiles 0-3 C's sums, 4-5 op(A), 6-7 op(B): each 16 rows of 64 bytes. The
 * configuration is the thread's (oneDNN sets its own between our products),
 * so each thread loads it before its share of a product. */
AMX void amx_begin(void) {
    TileConfig c = {.palette = 1};
    for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = 16;
    /* not _tile_loadconfig: GCC 12's names 8 bytes as the instruction's
     * operand, so the compiler may drop the stores to the rest (it did) */
    __asm__ volatile("ldtilecfg %0" : : "m"(c));
}

AMX void amx_end(void) { _tile_release(); }

enum { AMX_PAIRS = 16, AMX_ROWS = 32 };

/* Whether op(A) (M x K, bf16 rows filling whole blocks of pairs and rows)
 * can be read where it is. */
static bool a_in_place(bool ta, int M, int K, Operand A, int lda) {
    return !ta && A.h && K % (2 * AMX_PAIRS) == 0 && lda % 2 == 0 && M % 16 == 0 && ((uintptr_t)A.p & 3) == 0;
}

/* Rows 16 g .. 16 (g + ng) - 1 of op(A) (M x K) into out as tiles: the
 * rows of group g, pairs 16 q .. 16 q + 15, are the 1 KiB at out + (g
 * nq + q) 256 (nq = Kp16 / 16 tiles along K), zero past Kp and past row M,
 * so that a tile load reads 1 KiB in a row rather than 64 bytes of each of
 * 16 rows (its row stride 64 bytes). Rows of A are packed 16 at a time as
 * rows of pairs, then cut into tiles. A transposed op(A)'s rows are A's
 * columns, read across A's rows: ng groups at once, so that each row of A
 * is visited once for 16 ng of its values (one group at a time read 32 or
 * 64 bytes a row, a page apart, four times over). */
AMX static void pack_a_groups(uint32_t *out, bool ta, int g, int ng, int M, int K, Operand A, int lda) {
    int Kp = (K + 1) / 2, Kp16 = (Kp + AMX_PAIRS - 1) & ~(AMX_PAIRS - 1), i0 = 16 * g, w = 16 * ng;
    int rows = M - i0 < w ? M - i0 : w;
    out += (long)i0 * Kp16;
    uint32_t *across = small_buffer(&small_buffers()->across, (size_t)Kp16 * w);
    if (!ta) {
        for (int i = 0; i < w; i++) {
            uint32_t *row = across + (long)i * Kp16;
            if (i < rows) small_pack_row(row, A, (long)(i0 + i) * lda, K);
            memset(row + (i < rows ? Kp : 0), 0, sizeof *row * (size_t)(Kp16 - (i < rows ? Kp : 0)));
        }
        for (int i = 0; i < w; i++)
            for (int p0 = 0; p0 < Kp16; p0 += 16)
                _mm512_storeu_si512(out + (long)(i / 16) * 16 * Kp16 + (long)p0 * 16 + (i % 16) * 16,
                                    _mm512_loadu_si512(across + (long)i * Kp16 + p0));
        return;
    }
    /* op(A)'s rows are A's columns: their pair rows, w wide, then 16 x 16 transposes */
    small_pack_across(across, w, A, i0, lda, K, rows);
    memset(across + (long)Kp * w, 0, sizeof *across * (size_t)(Kp16 - Kp) * w);
    for (int q = 0; q < ng; q++)
        for (int p0 = 0; p0 < Kp16; p0 += 16) {
            __m512i r[16];
            for (int p = 0; p < 16; p++) r[p] = _mm512_loadu_si512(across + (long)(p0 + p) * w + 16 * q);
            small_transpose16(r);
            uint32_t *tile = out + (long)q * 16 * Kp16 + (long)p0 * 16;
            for (int i = 0; i < 16; i++) _mm512_storeu_si512(tile + i * 16, r[i]);
        }
}

/* Groups of 16 rows that pack_a_rows packs at once (64 rows: 128 bytes of a
 * bf16 A's row, 256 of an fp32 one). */
enum { AMX_A_GROUPS = 4 };

/* op(A) (M x K) as tiles (pack_a_groups), M16 rows, in the thread's buffer,
 * *ar = -Kp16; or where it is, as rows, *ar = their stride in pairs. */
AMX const uint32_t *pack_a_rows(bool ta, int M, int K, Operand A, int lda, long *ar) {
    int Kp = (K + 1) / 2, Kp16 = (Kp + AMX_PAIRS - 1) & ~(AMX_PAIRS - 1);
    if (a_in_place(ta, M, K, A, lda)) {
        *ar = lda / 2;
        return A.p;
    }
    uint32_t *buf = small_pack_space((size_t)((M + 15) & ~15) * Kp16);
    int groups = (M + 15) / 16;
    for (int g = 0; g < groups; g += AMX_A_GROUPS)
        pack_a_groups(buf, ta, g, groups - g < AMX_A_GROUPS ? groups - g : AMX_A_GROUPS, M, K, A, lda);
    *ar = -Kp16;
    return buf;
}

/* The sums of op(A)'s rows a (rows of them, at most 32; stride ar pairs, or
 * tiles when ar = -Kp16) against a panel b (Kp pair rows of NR; its last
 * partial block of pairs read from tail): out[r][j]. */
AMX static void amx_sums(float out[AMX_ROWS][NR], int rows, int Kp, const uint32_t *a, long ar, const uint32_t *b,
                         const uint32_t *tail) {
    /* GCC 12's tile intrinsics are asm that names no memory: barriers, so
     * that the stores of op(A), op(B) and tail come before the loads, and
     * out is read only after the stores */
    __asm__ volatile("" : : : "memory");
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    /* a block of 16 pairs of the rows' first and second 16: a + step p (+ down) */
    bool tiles = ar < 0;
    long sa = tiles ? 64 : ar * 4, step = tiles ? 16 : 1, down = tiles ? -16 * ar : 16 * ar;
    for (int p = 0; p < Kp; p += AMX_PAIRS) {
        const uint32_t *bp = p + AMX_PAIRS <= Kp ? b + (long)p * NR : tail;
        _tile_loadd(6, bp, NR * 4);
        _tile_loadd(7, bp + 16, NR * 4);
        _tile_loadd(4, a + step * p, sa);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (rows > 16) {
            _tile_loadd(5, a + down + step * p, sa);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, out[0], NR * 4);
    _tile_stored(1, out[0] + 16, NR * 4);
    if (rows > 16) {
        _tile_stored(2, out[16], NR * 4);
        _tile_stored(3, out[16] + 16, NR * 4);
    }
    __asm__ volatile("" : : : "memory");
}

/* C's columns j0 .. (a panel, pb) for every row of op(A) (pa, stride ar),
 * as tile() and tile_end() make them. */
AMX void amx_panel(int M, int nc, int Kp, const uint32_t *pa, long ar, const uint32_t *pb, float alpha,
                   float beta, float *C, int ldc, long row0, int j0, const TileEnd *end) {
    uint32_t tail[AMX_PAIRS * NR] __attribute__((aligned(64)));
    int full = Kp / AMX_PAIRS * AMX_PAIRS;
    if (full < Kp) {
        memcpy(tail, pb + (long)full * NR, sizeof *tail * (size_t)(Kp - full) * NR);
        memset(tail + (long)(Kp - full) * NR, 0, sizeof *tail * (size_t)(AMX_PAIRS - (Kp - full)) * NR);
    }
    float out[AMX_ROWS][NR] __attribute__((aligned(64)));
    for (int i0 = 0; i0 < M; i0 += AMX_ROWS) {
        int rows = M - i0 < AMX_ROWS ? M - i0 : AMX_ROWS;
        amx_sums(out, rows, Kp, pa + i0 * (ar < 0 ? -ar : ar), ar, pb, tail);
        for (int r0 = 0; r0 < rows; r0 += MR) {
            int mr = rows - r0 < MR ? rows - r0 : MR;
            __m512 acc[MR][2];
            for (int r = 0; r < mr; r++)
                acc[r][0] = _mm512_load_ps(out[r0 + r]), acc[r][1] = _mm512_load_ps(out[r0 + r] + 16);
            long i = i0 + r0;
            float *c = C ? C + i * ldc + j0 : NULL;
            if (end) tile_put(acc, mr, nc, alpha, beta, c, ldc, row0 + i, j0, end);
            else tile_put(acc, mr, nc, alpha, beta, c, ldc, 0, 0, NULL);
        }
    }
}

/* Tiles, a tall op(A): every panel sweeps all of op(A)'s rows, so op(A) is
 * taken in chunks of rows that stay in L2 (about AMX_CHUNK_BYTES packed),
 * and op(B) is packed whole first, its panels shared by the threads. The
 * threads take whole chunks (by_rows), each packing its own; or, when the
 * epilogue sums columns, they share each chunk's panels out as small_block
 * does, so that a column's sum stays one thread's, its rows in order (the
 * chunk then packed by the threads together). Either way the sums are the
 * panel-by-panel kernel's, bit for bit. */
#define AMX_CHUNK_BYTES (512 * 1024)

AMX static void tall(bool ta, bool tb, int M, int N, int K, int mc, float alpha, Operand A, int lda, Operand B,
                         int ldb, float beta, float *C, int ldc, const TileEnd *end, bool split, bool by_rows) {
    int Kp = (K + 1) / 2, Kp16 = (Kp + 15) & ~15, tiles_n = (N + NR - 1) / NR, chunks = (M + mc - 1) / mc;
    uint32_t *whole = small_buffer(&small_buffers()->whole, (size_t)tiles_n * Kp * NR);
    bool in_place = a_in_place(ta, M, K, A, lda);
    uint32_t *shared = in_place || by_rows ? NULL : small_pack_space((size_t)mc * Kp16);
#pragma omp parallel if (split)
    {
#pragma omp for schedule(static)
        for (int tj = 0; tj < tiles_n; tj++) {
            int j0 = tj * NR, cols = N - j0 < NR ? N - j0 : NR;
            uint32_t *out = whole + (size_t)tj * Kp * NR;
            if (tb) small_pack_down(out, NR, B, (long)j0 * ldb, ldb, K, cols, small_buffer(&small_buffers()->panel, 16 * (size_t)Kp16));
            else small_pack_across(out, NR, B, j0, ldb, K, cols);
        }
        amx_begin();
        if (by_rows) {
#pragma omp for schedule(static)
            for (int ch = 0; ch < chunks; ch++) {
                long i0 = (long)ch * mc, ar;
                int m = M - i0 < mc ? (int)(M - i0) : mc;
                const uint32_t *pa = pack_a_rows(ta, m, K, (Operand){at(A, ta ? i0 : i0 * lda), A.h}, lda, &ar);
                for (int tj = 0; tj < tiles_n; tj++)
                    amx_panel(m, N - tj * NR, Kp, pa, ar, whole + (size_t)tj * Kp * NR, alpha, beta,
                              C ? C + i0 * ldc : NULL, ldc, i0, tj * NR, end);
            }
        } else {
            for (int ch = 0; ch < chunks; ch++) {
                long i0 = (long)ch * mc;
                int m = M - i0 < mc ? (int)(M - i0) : mc;
                Operand a = {at(A, ta ? i0 : i0 * lda), A.h};
                if (!in_place) {
#pragma omp for schedule(static)
                    for (int g = 0; g < (m + 15) / 16; g++) pack_a_groups(shared, ta, g, 1, m, K, a, lda);
                }
                const uint32_t *pa = in_place ? a.p : shared;
                long ar = in_place ? lda / 2 : -Kp16;
                /* the same panels to each thread at every chunk (static, one count) */
#pragma omp for schedule(static)
                for (int tj = 0; tj < tiles_n; tj++)
                    amx_panel(m, N - tj * NR, Kp, pa, ar, whole + (size_t)tj * Kp * NR, alpha, beta,
                              C ? C + i0 * ldc : NULL, ldc, i0, tj * NR, end);
            }
        }
        amx_end();
    }
}

/* gemm_small_parts.h */
AMX bool amx_tall(bool ta, bool tb, int M, int N, int K, float alpha, Operand A, int lda, Operand B, int ldb, float beta,
                  float *C, int ldc, const TileEnd *end, bool split) {
    /* chunks of rows of at most AMX_CHUNK_BYTES, as even as whole blocks of rows allow; taken by
     * the threads whole, an even count for them, unless the epilogue sums columns */
    int Kp = (K + 1) / 2;
    bool by_rows = !(end && end->ep && end->ep->colsum);
    int Kp16 = (Kp + 15) & ~15, per = AMX_CHUNK_BYTES / (4 * Kp16), chunks = (M + per - 1) / per;
    int threads = split && by_rows ? omp_get_max_threads() : 1;
    chunks = (chunks + threads - 1) / threads * threads;
    int mc = ((M + chunks - 1) / chunks + 31) & ~31;
    if (M <= mc) return false;
    amx_count();
    tall(ta, tb, M, N, K, mc, alpha, A, lda, B, ldb, beta, C, ldc, end, split, by_rows);
    return true;
}
