/* schedule.c: the learning rate at each step (linear warmup, then cosine or
 * linear decay to min_lr, or constant). The boundaries are spelled out in optim.h. */
#include <assert.h>
#include <math.h>

#include "optim.h"
#include "util.h"

static const char *const schedule_names[] = {
    [SCHEDULE_COSINE] = "cosine",
    [SCHEDULE_LINEAR] = "linear",
    [SCHEDULE_CONSTANT] = "constant",
};
static_assert(sizeof schedule_names / sizeof schedule_names[0] == SCHEDULE_COUNT,
              "schedule_names and Schedule out of step");

const char *schedule_name(Schedule s) {
    if ((unsigned)s >= SCHEDULE_COUNT) DIE("schedule_name: bad schedule %d", (int)s);
    return schedule_names[s];
}

float lr_at(Schedule s, long step, long warmup, long total, float lr, float min_lr) {
    if (step < 0 || warmup < 0 || total < 0)
        DIE("lr_at: step %ld, warmup %ld, total %ld must not be negative", step, warmup, total);
    if ((unsigned)s >= SCHEDULE_COUNT) DIE("lr_at: bad schedule %d", (int)s);
    if (step < warmup) return (float)((double)lr * (double)(step + 1) / (double)warmup);
    if (s == SCHEDULE_CONSTANT) return lr;
    if (step >= total) return min_lr;
    /* here warmup <= step < total, so total - warmup >= 1 and p is in [0, 1) */
    const double p = (double)(step - warmup) / (double)(total - warmup);
    const double coeff = s == SCHEDULE_COSINE ? 0.5 * (1.0 + cos(M_PI * p)) : 1.0 - p;
    return (float)((double)min_lr + coeff * ((double)lr - (double)min_lr));
}
