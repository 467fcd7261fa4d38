/* room training/: one training run, and text from a model; includes the engine, run/, outputs/, training/. */
/* generate.h: text from a model, one byte at a time (./sample, and ./train's
 * samples.txt), and the fill-in demo of masked LMs.
 *
 * The length rule. Generation draws at most `length` bytes after the prompt.
 * Bytes are handed on only when the text drawn so far ends at a character
 * boundary, so when the length runs out inside a character, the bytes of it
 * drawn so far are dropped: the generated text is at most `length` bytes and
 * never ends inside a UTF-8 character.
 *
 * The UTF-8 restriction (on unless raw is set). At each step the model's
 * distribution over the next byte is renormalised over the bytes that keep
 * the text valid UTF-8 at that point (data/utf8.h: a first byte at a
 * character boundary, the right continuation bytes inside a character; never
 * C0, C1 or F5..FF); top-k then keeps the k likeliest of those. The text
 * after a valid prompt is then valid UTF-8, handed on one character at a
 * time, and at most 3 bytes short of `length`.
 *
 * Raw bytes (raw set): any byte may be drawn, and the text is read as
 * utf8_read reads it: a byte that cannot continue the character in progress
 * leaves that character's bytes as they are (not UTF-8) and starts afresh. A
 * character boundary is then wherever that reading is at one, and the length
 * rule is the same: the text never ends in the first bytes of a character
 * that it could still complete (only ever in a complete character, or a byte
 * that can start none), though it may drop more than 3 bytes (a run of first
 * bytes, each breaking the last, has no boundary before its end).
 *
 * A prompt that ends inside a character is continued from there. The model
 * sees the last `context` bytes of the prompt and the text so far; an empty
 * prompt starts from a newline (not part of the text). */
#ifndef ATTNLAB_GENERATE_H
#define ATTNLAB_GENERATE_H

#include <stdbool.h>

#include "corpus.h"
#include "model.h"
#include "options.h"

typedef struct {
    const char *prompt; /* NUL-terminated; may be empty */
    int length;         /* bytes to draw at most (>= 0) */
    float temperature;  /* 0 = the argmax */
    int top_k;          /* 0 = all */
    bool raw;           /* false: only bytes that keep the text valid UTF-8 */
} GenerateSpec;

/* Where the text goes as it is made: the prompt first, then the bytes drawn
 * each time the text reaches a character boundary (under the restriction, one
 * character each time). Returns 0 to go on, -1 to stop (a failed write). */
typedef int (*GenerateEmit)(const char *bytes, size_t n, void *ctx);

enum { GENERATE_DONE = 0, GENERATE_INTERRUPTED = 1, GENERATE_STOPPED = -1 };

/* Continues g->prompt by at most g->length bytes, by the rules above, handing
 * the text to emit. Gradients off, in its own arena. GENERATE_DONE, or
 * GENERATE_INTERRUPTED when a signal (interrupt.h) stops it (the character in
 * progress is dropped), or GENERATE_STOPPED when emit returned -1. */
int generate_stream(Model *m, const GenerateSpec *g, Rng *rng, GenerateEmit emit, void *ctx);

/* generate_stream with the UTF-8 restriction on and s's prompt, temperature,
 * top-k and length, collected: the prompt followed by the sample, malloc'd,
 * NUL-terminated, *len bytes long (a sampled byte may itself be 0). NULL when
 * a signal stops it part-way. ./train's samples.txt. */
char *generate_text(Model *m, const SampleConfig *s, Rng *rng, size_t *len);

/* The generator of samples drawn with seed `seed`: the stream ./train's
 * samples.txt uses (trainer.c seeds stream 2 of the run's seed so), so that
 * ./sample RUN with the run's own options reproduces samples.txt. */
void generate_seed(Rng *rng, int64_t seed);

/* One byte from logits z [V] (V <= 256): the argmax at temperature t <= 0,
 * otherwise a draw from softmax(z / t) over the k largest (all when k is 0
 * or >= V). A logit of -INFINITY is never drawn. */
int generate_draw(const float *z, int V, float t, int k, Rng *rng);

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
char *generate_fill_in(Model *m, const Corpus *c, const SampleConfig *s, size_t *len);

#endif
