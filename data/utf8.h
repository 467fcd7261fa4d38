/* utf8.h: where a byte stream stands in UTF-8, one byte at a time.
 *
 * The well-formed byte sequences (Unicode 15, table 3-7), as a state machine:
 *
 *   first byte   then
 *   00..7F       -                       (ASCII, one byte)
 *   C2..DF       80..BF
 *   E0           A0..BF  80..BF          (no overlong forms)
 *   E1..EC       80..BF  80..BF
 *   ED           80..9F  80..BF          (no surrogates D800..DFFF)
 *   EE..EF       80..BF  80..BF
 *   F0           90..BF  80..BF  80..BF  (no overlong forms)
 *   F1..F3       80..BF  80..BF  80..BF
 *   F4           80..8F  80..BF  80..BF  (nothing above U+10FFFF)
 *
 * C0, C1 and F5..FF never occur; 80..BF never starts a character. At a
 * character boundary the next byte may be any first byte of the table;
 * inside a character, only the one range its column gives. The sampler
 * (experiments/training/generate.h) uses this to keep generated text valid, and to
 * tell where a character ends. */
#ifndef ATTNLAB_UTF8_H
#define ATTNLAB_UTF8_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int need;               /* continuation bytes still to come; 0 at a boundary */
    unsigned char lo, hi;   /* the range of the next one, when need > 0 */
} Utf8State;

typedef enum {
    UTF8_CHAR,    /* the byte ends a character (an ASCII byte, or a last continuation) */
    UTF8_PART,    /* the byte starts or continues a character not yet complete */
    UTF8_INVALID, /* the byte cannot come here; the state is unchanged */
} Utf8Step;

/* At a character boundary. */
void utf8_init(Utf8State *u);
static inline bool utf8_at_boundary(const Utf8State *u) { return u->need == 0; }
/* Whether byte b (0..255) may come next. */
bool utf8_allows(const Utf8State *u, int b);
/* allowed[b] = utf8_allows(u, b) for every byte; returns how many are
 * allowed (never 0). */
int utf8_allowed_mask(const Utf8State *u, bool allowed[256]);
/* Takes byte b: what it does, and the state after it. */
Utf8Step utf8_step(Utf8State *u, int b);
/* Takes byte b as a reader of any bytes does: like utf8_step, except that a
 * byte that cannot come here ends the character in progress (its bytes so far
 * are then not UTF-8) and is read again from a boundary, where a byte that
 * can start nothing (80..BF, C0, C1, F5..FF) stands alone. Returns what
 * utf8_step returned the last time (UTF8_INVALID for such a lone byte, which
 * leaves u at a boundary). */
Utf8Step utf8_read(Utf8State *u, int b);
/* The bytes of the character that the first byte b starts (1..4), or 0
 * when b cannot start one. */
int utf8_char_bytes(int b);
/* Where s[0, n) stops being valid UTF-8: the offset of the first byte of
 * the first sequence that is malformed or cut off at the end, or n when the
 * whole of it is valid. */
size_t utf8_valid_prefix(const unsigned char *s, size_t n);

#endif
