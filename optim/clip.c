/* clip.c: gradient clipping by the global L2 norm (torch.nn.utils.clip_grad_norm_).
 *
 * The sum of squares is split into a fixed number of chunks, each summed in
 * double, and the chunk sums are added in order: the result does not depend on
 * the thread count (an OpenMP reduction would add in whatever order threads finish). */
#include <math.h>

#include "optim.h"
#include "util.h"

#define CLIP_CHUNKS 64
#define CLIP_PARALLEL_MIN (1L << 16)

float clip_grad_norm(ParamSet *p, float max_norm) {
    const long n = p->total;
    const float *g = p->grad;
    if (n > 0 && !g) DIE("clip_grad_norm: the parameter slabs are not allocated (params_alloc)");
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
    const double norm = sqrt(sum);
    if (max_norm > 0.0f && isfinite(norm) && norm > (double)max_norm) {
        /* torch: clip_coef = max_norm / (total_norm + 1e-6), clamped to at most 1 */
        const float scale = (float)((double)max_norm / (norm + 1e-6));
        float *gw = p->grad;
#pragma omp parallel for schedule(static) if (n >= CLIP_PARALLEL_MIN)
        for (long i = 0; i < n; i++) gw[i] *= scale;
    }
    return (float)norm;
}
