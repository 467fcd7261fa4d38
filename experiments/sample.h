/* sample.h: text from a model, one byte at a time. */
#ifndef ATTNLAB_SAMPLE_H
#define ATTNLAB_SAMPLE_H

#include "corpus.h"
#include "model.h"
#include "options.h"

/* Continues s->prompt by s->length bytes with temperature and top-k. Returns
 * the prompt followed by the sample, malloc'd, NUL-terminated, *len bytes long
 * (a sampled byte may itself be 0). Runs with gradients off in its own arena;
 * the model sees at most its context. NULL when a signal (interrupt.h) stops
 * it part-way. */
char *sample_text(Model *m, const SampleConfig *s, Rng *rng, size_t *len);

/* One byte from logits z [V] (V <= 256): the argmax at temperature t <= 0,
 * otherwise a draw from softmax(z / t) over the k largest (all when k is 0
 * or >= V). */
int sample_draw(const float *z, int V, float t, int k, Rng *rng);

/* The samples of an objective = mlm model, which cannot be sampled left to
 * right: a fill-in demo. k = ceil(s->length / context) validation windows,
 * evenly spaced over the validation split (corpus_val_window with max_windows
 * k; at most as many as fit), each with the positions data/mlm.h's validation
 * masking chooses for it all replaced by the mask id, and predicted at once
 * (argmax over the 256 bytes). The text, malloc'd and NUL-terminated, *len
 * bytes long, is a short header, then per window
 *
 *   window 1 of 4, bytes 52051..52178: 15 of 19 masked bytes right
 *   original | The jury further said in term-end presentments that ...
 *   masked   | The j_ry further s_id in term-end pres_ntments that ...
 *   filled   | The jury further said in term-end presentments that ...
 *
 * and a total. One column per byte: '_' is a masked byte, a control byte
 * (newline, tab ...) is shown as '~', and other bytes as they are (so UTF-8
 * text reads as text). Gradients off, in its own arena. NULL when a signal
 * stops it part-way. */
char *sample_fill_in(Model *m, const Corpus *c, const SampleConfig *s, size_t *len);

#endif
