#include "mlm.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

int mlm_count(int T) {
    int n = (int)floor(0.15 * T + 0.5);
    return n < 1 ? 1 : n;
}

void mlm_mask_row(Rng *rng, int *inputs, int *targets, int T) {
    if (T < 1) DIE("mlm_mask_row: T %d must be at least 1", T);
    int need = mlm_count(T);
    for (int t = 0; t < T; t++) {
        /* Algorithm S: choose t with probability need / (positions left) */
        if ((int)rng_below(rng, (uint32_t)(T - t)) >= need) {
            targets[t] = -1;
            continue;
        }
        need--;
        targets[t] = inputs[t];
        uint32_t r = rng_below(rng, 10);
        if (r < 8)
            inputs[t] = MLM_MASK_ID;
        else if (r == 8)
            inputs[t] = (int)rng_below(rng, 256);
        /* else: unchanged */
    }
}

void mlm_train_rows(const Corpus *c, Rng *rng, int B, int first, int rows, int T, int *inputs, int *targets,
                    int *scratch) {
    corpus_train_rows(c, rng, B, first, rows, T, inputs, targets);
    for (int b = 0; b < B; b++) {
        bool mine = b >= first && b < first + rows;
        /* another rank's row: its draws, on any bytes (they do not depend on them) */
        int *in = mine ? inputs + (size_t)(b - first) * T : scratch, *tg = mine ? targets + (size_t)(b - first) * T : scratch + T;
        if (!mine) memset(scratch, 0, (size_t)T * sizeof *scratch);
        mlm_mask_row(rng, in, tg, T);
    }
}

void mlm_train_batch(const Corpus *c, Rng *rng, int B, int T, int *inputs, int *targets) {
    corpus_train_batch(c, rng, B, T, inputs, targets);
    for (int b = 0; b < B; b++) mlm_mask_row(rng, inputs + (size_t)b * T, targets + (size_t)b * T, T);
}

void mlm_val_window(const Corpus *c, int T, long max_windows, long i, int *inputs, int *targets) {
    corpus_val_window(c, T, max_windows, i, inputs, targets);
    Rng rng;
    rng_seed(&rng, MLM_VAL_SEED + (uint64_t)i);
    mlm_mask_row(&rng, inputs, targets, T);
}
