/* sample.h: text from a model, one byte at a time. */
#ifndef ATTNLAB_SAMPLE_H
#define ATTNLAB_SAMPLE_H

#include "model.h"
#include "options.h"

/* Continues s->prompt by s->length bytes with temperature and top-k. Returns
 * the prompt followed by the sample, malloc'd, NUL-terminated, *len bytes long
 * (a sampled byte may itself be 0). Runs with gradients off in its own arena;
 * the model sees at most its context. */
char *sample_text(Model *m, const SampleConfig *s, Rng *rng, size_t *len);

#endif
