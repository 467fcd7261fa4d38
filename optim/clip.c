/* clip.c: gradient clipping by the global L2 norm (torch.nn.utils.clip_grad_norm_).
 *
 * The norm is a pass of its own, since the clipping factor must be known
 * before any gradient is used; the scaling by it happens inside adamw_step's
 * pass (adamw.c), not as a pass here.
 *
 * The sum of squares is split into a fixed number of chunks, each summed in
 * double, and the chunk sums are added in order: the result does not depend on
 * the thread count (an OpenMP reduction would add in whatever order threads finish). */
#include <math.h>

#include "optim.h"
#include "util.h"

#define CLIP_CHUNKS 64
#define CLIP_PARALLEL_MIN (1L << 16)

double grad_norm(const ParamSet *p) {
    const long n = p->total;
    const float *g = p->grad;
    if (n > 0 && !g) DIE("grad_norm: the parameter slabs are not allocated (params_alloc)");
    double partial[CLIP_CHUNKS];
    const long chunk = (n + CLIP_CHUNKS - 1) / CLIP_CHUNKS;
#pragma omp parallel for schedule(static) if (n >= CLIP_PARALLEL_MIN)
    for (int c = 0; c < CLIP_CHUNKS; c++) {
        const long lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        double s = 0.0;
        for (long i = lo; i < hi; i++) s += (double)g[i] * (double)g[i];
        partial[c] = s;
    }
    double sum = 0.0;
    for (int c = 0; c < CLIP_CHUNKS; c++) sum += partial[c];
    return sqrt(sum);
}

float clip_scale(double norm, float max_norm) {
    if (!(max_norm > 0.0f && isfinite(norm) && norm > (double)max_norm)) return 1.0f;
    /* torch: clip_coef = max_norm / (total_norm + 1e-6), clamped to at most 1 */
    return (float)((double)max_norm / (norm + 1e-6));
}
