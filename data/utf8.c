/* utf8.c: the UTF-8 state machine of utf8.h. */
#include "utf8.h"

void utf8_init(Utf8State *u) {
    u->need = 0;
    u->lo = u->hi = 0;
}

int utf8_char_bytes(int b) {
    if (b < 0x80) return 1;
    if (b < 0xC2) return 0; /* a continuation byte, or C0/C1 (overlong) */
    if (b < 0xE0) return 2;
    if (b < 0xF0) return 3;
    if (b < 0xF5) return 4;
    return 0;
}

bool utf8_allows(const Utf8State *u, int b) {
    if (u->need > 0) return b >= u->lo && b <= u->hi;
    return utf8_char_bytes(b) > 0;
}

int utf8_allowed_mask(const Utf8State *u, bool allowed[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) n += allowed[b] = utf8_allows(u, b);
    return n;
}

Utf8Step utf8_step(Utf8State *u, int b) {
    if (!utf8_allows(u, b)) return UTF8_INVALID;
    if (u->need > 0) {
        /* every continuation after the second byte is 80..BF */
        u->lo = 0x80, u->hi = 0xBF;
        return --u->need == 0 ? UTF8_CHAR : UTF8_PART;
    }
    u->need = utf8_char_bytes(b) - 1;
    if (u->need == 0) return UTF8_CHAR;
    /* the second byte's range: narrower after E0, ED, F0 and F4 */
    u->lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    u->hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    return UTF8_PART;
}

Utf8Step utf8_read(Utf8State *u, int b) {
    Utf8Step st = utf8_step(u, b);
    if (st != UTF8_INVALID) return st;
    utf8_init(u);
    return utf8_step(u, b);
}

size_t utf8_valid_prefix(const unsigned char *s, size_t n) {
    Utf8State u;
    utf8_init(&u);
    size_t start = 0; /* where the current character began */
    for (size_t i = 0; i < n; i++) {
        if (utf8_at_boundary(&u)) start = i;
        if (utf8_step(&u, s[i]) == UTF8_INVALID) return start;
    }
    return utf8_at_boundary(&u) ? n : start;
}
