/* test_utf8.c: the UTF-8 state machine (data/utf8.h) against a reference
 * written another way, by code points rather than by a table of byte ranges.
 *
 * The reference: a lead byte's high bits give the length n of its character
 * (0xxxxxxx 1, 110xxxxx 2, 1110xxxx 3, 11110xxx 4) and every further byte is
 * 10xxxxxx; the character is valid when its code point needs n bytes (not an
 * overlong form), is not a surrogate (D800..DFFF) and is at most 10FFFF. A
 * prefix of k < n bytes can still be completed when some code point in the
 * range its completions cover (the free bits all 0 .. all 1) is valid. The
 * machine must allow, in every state that a valid prefix reaches, exactly the
 * bytes the reference says can follow, end a character exactly where the
 * reference's is complete, and leave its state alone on a byte it refuses. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "data/utf8.h"

/* The length a lead byte announces by its high bits (0: a continuation byte or 11111xxx). */
static int ref_length(int b) {
    if ((b & 0x80) == 0) return 1;
    if ((b & 0xE0) == 0xC0) return 2;
    if ((b & 0xF0) == 0xE0) return 3;
    if ((b & 0xF8) == 0xF0) return 4;
    return 0;
}

static const uint32_t ref_least[5] = {0, 0, 0x80, 0x800, 0x10000}; /* below: an overlong form */

/* Whether s[0, k) (1 <= k <= 4) is the start, or the whole, of a valid character. */
static bool ref_prefix_ok(const unsigned char *s, int k) {
    int n = ref_length(s[0]);
    if (n == 0 || k > n) return false;
    for (int i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return false;
    static const int lead_bits[5] = {0, 7, 5, 4, 3};
    uint32_t cp = s[0] & ((1u << lead_bits[n]) - 1);
    for (int i = 1; i < k; i++) cp = cp << 6 | (s[i] & 0x3F);
    int free_bits = 6 * (n - k);
    uint32_t lo = cp << free_bits, hi = lo | ((1u << free_bits) - 1);
    /* the completions cover [lo, hi]; the valid code points of n bytes are
     * [least, 10FFFF] without the surrogates D800..DFFF */
    if (lo < ref_least[n]) lo = ref_least[n];
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    return lo <= hi && !(lo >= 0xD800 && hi <= 0xDFFF);
}

/* Whether s[0, k) is a whole valid character. */
static bool ref_complete(const unsigned char *s, int k) { return ref_length(s[0]) == k && ref_prefix_ok(s, k); }

/* The first disagreement with the reference, or "" (ck_assert in the inner
 * loop would cost a message to the parent process per check). */
static char why[256];

/* From the state after s[0, k) (a valid, incomplete prefix), every byte: the
 * machine allows it exactly when the reference does, and says CHAR exactly
 * when it completes the character; a refused byte leaves the state as it
 * was. Recurses into every allowed byte that leaves the character open.
 * Returns the states checked. */
static long check_from(const Utf8State *u, unsigned char *s, int k) {
    long states = 1;
    bool mask[256];
    if (utf8_allowed_mask(u, mask) == 0 && !why[0]) snprintf(why, sizeof why, "no byte allowed after %d bytes", k);
    for (int b = 0; b < 256 && !why[0]; b++) {
        s[k] = (unsigned char)b;
        bool want = ref_prefix_ok(s, k + 1), complete = want && ref_complete(s, k + 1);
        Utf8State next = *u;
        Utf8Step st = utf8_step(&next, b);
        Utf8Step want_st = !want ? UTF8_INVALID : complete ? UTF8_CHAR : UTF8_PART;
        if (mask[b] != want || utf8_allows(u, b) != want || st != want_st ||
            (!want && memcmp(&next, u, sizeof next) != 0) || (want && utf8_at_boundary(&next) != complete)) {
            snprintf(why, sizeof why, "after %d bytes (first %02X), byte %02X: %s, step %d; want %s, step %d", k,
                     k ? s[0] : 0, b, mask[b] ? "allowed" : "refused", st, want ? "allowed" : "refused", want_st);
            break;
        }
        if (want && !complete) states += check_from(&next, s, k + 1);
    }
    return states;
}

START_TEST(test_every_state_against_the_reference) {
    Utf8State u;
    utf8_init(&u);
    ck_assert(utf8_at_boundary(&u));
    unsigned char s[5];
    why[0] = '\0';
    long states = check_from(&u, s, 0);
    ck_assert_msg(!why[0], "%s", why);
    /* the boundary; after a lead, 30 + 16 + 5 (C2..DF, E0..EF, F0..F4); after two bytes, 32 (E0 A0..BF)
     * + 32 (ED 80..9F) + 14 * 64 (the other E_) + 48 (F0 90..BF) + 3 * 64 (F1..F3) + 16 (F4 80..8F);
     * after three, 64 for each 4-byte state of two */
    long want = 1 + (30 + 16 + 5) + (32 + 32 + 14 * 64 + 48 + 3 * 64 + 16) + (48 + 3 * 64 + 16) * 64;
    ck_assert_int_eq(states, want);
}
END_TEST

/* utf8_read, the reader of raw bytes: a byte that cannot follow breaks the
 * character in progress and is read afresh; one that can start nothing stands
 * alone, at a boundary. */
START_TEST(test_read_raw_bytes) {
    static const struct {
        const char *bytes;
        const char *steps; /* C = UTF8_CHAR, P = UTF8_PART, I = UTF8_INVALID, per byte */
    } cases[] = {
        {"a\xe4\xb8\xad", "CPPC"},
        {"\xe4\xe4\xb8\xad", "PPPC"},   /* the first E4 is broken by the second */
        {"\xe4" "a", "PC"},
        {"\xe4\x80", "PP"},
        {"\x80\xc0\xff" "b", "IIIC"},
        {"\xed\xa0", "PI"},               /* a surrogate's second byte starts nothing */
        {"\xf0\x9f\x98\x80\xf4\x90", "PPPCPI"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Utf8State u;
        utf8_init(&u);
        for (size_t j = 0; cases[i].bytes[j]; j++) {
            Utf8Step st = utf8_read(&u, (unsigned char)cases[i].bytes[j]);
            char got = st == UTF8_CHAR ? 'C' : st == UTF8_PART ? 'P' : 'I';
            ck_assert_msg(got == cases[i].steps[j], "case %zu, byte %zu: %c, want %c", i, j, got, cases[i].steps[j]);
            ck_assert_int_eq(utf8_at_boundary(&u), got != 'P');
        }
    }
}
END_TEST

/* The ranges the table names, as bytes: the restricted second bytes, and
 * what never occurs. */
START_TEST(test_named_ranges) {
    Utf8State u;
    utf8_init(&u);
    static const int never[] = {0x80, 0xBF, 0xC0, 0xC1, 0xF5, 0xF8, 0xFF};
    for (size_t i = 0; i < sizeof never / sizeof *never; i++) ck_assert(!utf8_allows(&u, never[i]));
    static const int ok[] = {0x00, 0x0A, 0x41, 0x7F, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) ck_assert(utf8_allows(&u, ok[i]));
    bool mask[256];
    ck_assert_int_eq(utf8_allowed_mask(&u, mask), 128 + 30 + 16 + 5);
    static const struct {
        int lead, lo, hi;
    } second[] = {{0xC2, 0x80, 0xBF}, {0xE0, 0xA0, 0xBF}, {0xE1, 0x80, 0xBF}, {0xED, 0x80, 0x9F},
                  {0xEE, 0x80, 0xBF}, {0xF0, 0x90, 0xBF}, {0xF3, 0x80, 0xBF}, {0xF4, 0x80, 0x8F}};
    for (size_t i = 0; i < sizeof second / sizeof *second; i++) {
        Utf8State v;
        utf8_init(&v);
        ck_assert_int_eq(utf8_step(&v, second[i].lead), UTF8_PART);
        int n = utf8_allowed_mask(&v, mask);
        ck_assert_int_eq(n, second[i].hi - second[i].lo + 1);
        for (int b = 0; b < 256; b++) ck_assert_int_eq(mask[b], b >= second[i].lo && b <= second[i].hi);
    }
    ck_assert_int_eq(utf8_char_bytes('a'), 1);
    ck_assert_int_eq(utf8_char_bytes(0xC2), 2);
    ck_assert_int_eq(utf8_char_bytes(0xE4), 3);
    ck_assert_int_eq(utf8_char_bytes(0xF4), 4);
    ck_assert_int_eq(utf8_char_bytes(0xC1), 0);
    ck_assert_int_eq(utf8_char_bytes(0xF5), 0);
    ck_assert_int_eq(utf8_char_bytes(0x9F), 0);
}
END_TEST

/* Where a string stops being valid: at the start of the first bad or cut-off character. */
START_TEST(test_valid_prefix) {
    static const struct {
        const char *s;
        size_t want;
    } cases[] = {
        {"", 0},
        {"plain ASCII", 11},
        {"a\xe4\xb8\xad" "b", 5},              /* a 中 b */
        {"\xf0\x9f\x98\x80", 4},               /* U+1F600 */
        {"\xf4\x8f\xbf\xbf", 4},               /* U+10FFFF */
        {"a\xe4\xb8", 1},                      /* cut off at the end */
        {"ab\xc0\x80", 2},                     /* overlong NUL */
        {"\xed\xa0\x80", 0},                   /* a surrogate */
        {"\xf4\x90\x80\x80", 0},               /* above U+10FFFF */
        {"x\xe0\x9f\xbf", 1},                  /* overlong 3-byte form */
        {"\xe4\xb8\xad\x80", 3},               /* a stray continuation byte */
        {"\xe4\xb8" "a", 0},                   /* a character broken by ASCII */
        {"\xf5\x80\x80\x80", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = strlen(cases[i].s);
        size_t got = utf8_valid_prefix((const unsigned char *)cases[i].s, n);
        ck_assert_msg(got == cases[i].want, "case %zu: got %zu, want %zu", i, got, cases[i].want);
    }
}
END_TEST

Suite *utf8_suite(void) {
    Suite *s = suite_create("utf8");
    TCase *tc = tcase_create("utf8");
    tcase_set_timeout(tc, 30); /* about 1 s under ASan; room for a busy machine */
    tcase_add_test(tc, test_every_state_against_the_reference);
    tcase_add_test(tc, test_named_ranges);
    tcase_add_test(tc, test_read_raw_bytes);
    tcase_add_test(tc, test_valid_prefix);
    suite_add_tcase(s, tc);
    return s;
}
