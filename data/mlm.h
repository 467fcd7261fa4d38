/* mlm.h: masked-LM batches (objective = mlm), on top of corpus.h.
 *
 * A window is T consecutive bytes, used as they are (no shift: the model sees the whole window
 * and reconstructs the corrupted positions, BERT-style, Devlin et al. 2019). In each window
 *     n = max(1, round(0.15 T))
 * positions are chosen, uniformly among the C(T, n) subsets (selection sampling, Knuth's
 * Algorithm S: one rng_below per position). Exactly n, not a Bernoulli draw per position, so
 * every window weighs the same in a mean and no window is left without a target. Each chosen
 * position is then corrupted with one rng_below(10): 0..7 (80%) -> MLM_MASK_ID, 8 (10%) -> a
 * byte drawn uniformly from 0..255 (one more rng_below(256); it may equal the original), 9 (10%)
 * -> left unchanged. targets[t] = the original byte at chosen positions, -1 elsewhere, so the
 * loss and bits per byte are taken on the chosen positions only.
 *
 * Training windows come from corpus_train_batch (the same offsets, drawn with the same rng),
 * and the masks from the same rng after them, so the data RNG's state is all a checkpoint needs
 * to resume exactly. Validation uses corpus_val_window's fixed windows, masked with an RNG seeded
 * from the window index alone (MLM_VAL_SEED + i): every run and every variant is scored on the
 * same bytes at the same positions with the same corruption. */
#ifndef ATTNLAB_MLM_H
#define ATTNLAB_MLM_H

#include "corpus.h"

/* The input id of a masked position: one past the bytes (layers/config.h's MASK_ID). */
#define MLM_MASK_ID 256
#define MLM_VAL_SEED 0x6d6c6d5f76616cULL /* "mlm_val" */

/* Positions chosen in a window of T bytes: max(1, round(0.15 T)). */
int mlm_count(int T);

/* Chooses and corrupts the positions of one window in place: on entry inputs[0..T) holds the
 * bytes; on return the chosen positions are corrupted and targets[0..T) is set (the rule above). */
void mlm_mask_row(Rng *rng, int *inputs, int *targets, int T);

/* B masked training windows: corpus_train_batch's windows (its first T bytes), then one
 * mlm_mask_row per row in row order, all drawn from rng. */
void mlm_train_batch(const Corpus *c, Rng *rng, int B, int T, int *inputs, int *targets);
/* Rows [first, first + rows) of the batch mlm_train_batch(c, rng, B, ...) would draw, rng
 * advancing as for the whole batch (corpus_train_rows); scratch holds 2 T ints. */
void mlm_train_rows(const Corpus *c, Rng *rng, int B, int first, int rows, int T, int *inputs, int *targets,
                    int *scratch);

/* Validation window i (corpus_val_window's), masked with the RNG seeded from i alone. */
void mlm_val_window(const Corpus *c, int T, long max_windows, long i, int *inputs, int *targets);

#endif
