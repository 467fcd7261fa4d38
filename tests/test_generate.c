/* test_generate.c: the sampler's rules (experiments/training/generate.h), on a small
 * model fresh from its initialisation. Its next-byte distribution is close to
 * uniform over all 256 bytes, the hardest case for both rules: raw, most of
 * its text is not UTF-8, and about one character in four it starts is a
 * multi-byte one.
 *
 *   - The length rule: the text after the prompt is at most `length` bytes,
 *     at most 3 short of it, and never ends inside a character; under the
 *     UTF-8 restriction it is valid UTF-8 at every length, and each piece
 *     handed on is exactly one character (streaming per character).
 *   - Raw bytes: the text is not always valid (so the restriction is what
 *     makes it so), yet never ends in a character the length cut off.
 *   - A prompt that ends inside a character is continued with the right
 *     continuation bytes, the narrow second-byte ranges after E0, ED, F0 and
 *     F4 included.
 *   - The same seed gives the same bytes; generate_text is the stream. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "experiments/training/generate.h"
#include "data/utf8.h"

static Model model;

static void setup(void) {
    Config c;
    config_defaults(&c);
    Err e;
    const char *opts[][2] = {{"layers", "1"}, {"d_model", "32"}, {"heads", "2"}, {"context", "16"}};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        ck_assert_msg(option_set(&c, opts[i][0], opts[i][1], &e) == 0, "%s", e.msg);
    ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
    model_init(&model, &c.model);
    Rng rng;
    rng_seed(&rng, 7);
    model_init_weights(&model, &rng);
}

static void teardown(void) { model_free(&model); }

/* What generate_stream hands on: the bytes, and where each piece starts. */
typedef struct {
    char text[4096];
    size_t len;
    size_t start[4096];
    int pieces;
    int stop_after; /* the emit that returns -1 (0: none) */
} Collected;

static int collect(const char *bytes, size_t n, void *ctx) {
    Collected *c = ctx;
    ck_assert_uint_le(c->len + n, sizeof c->text);
    c->start[c->pieces++] = c->len;
    memcpy(c->text + c->len, bytes, n);
    c->len += n;
    return c->stop_after && c->pieces == c->stop_after ? -1 : 0;
}

static size_t piece_len(const Collected *c, int i) {
    return (i + 1 < c->pieces ? c->start[i + 1] : c->len) - c->start[i];
}

static int run(const char *prompt, int length, float t, int k, bool raw, uint64_t seed, Collected *c) {
    memset(c, 0, sizeof *c);
    GenerateSpec g = {.prompt = prompt, .length = length, .temperature = t, .top_k = k, .raw = raw};
    Rng rng;
    rng_seed(&rng, seed);
    return generate_stream(&model, &g, &rng, collect, c);
}

/* Whether s[0, n) read with the resynchronising rule of raw bytes (a byte
 * that cannot follow restarts at a boundary) ends at a character boundary. */
static bool ends_at_boundary(const unsigned char *s, size_t n) {
    Utf8State u;
    utf8_init(&u);
    for (size_t i = 0; i < n; i++)
        if (utf8_step(&u, s[i]) == UTF8_INVALID) {
            utf8_init(&u);
            utf8_step(&u, s[i]);
        }
    return utf8_at_boundary(&u);
}

static const float temperatures[] = {0.0f, 0.7f, 1.0f, 2.0f, 5.0f};
#define N_TEMPERATURES ((int)(sizeof temperatures / sizeof *temperatures))

/* The restriction on: every length from 1 to 40 and some longer, at every
 * temperature, with and without top-k. */
START_TEST(test_length_rule_valid_utf8) {
    static const char *const prompts[] = {"", "The ", "\xe4\xb8\xad\xe6\x96\x87"};
    int lengths[48], n_lengths = 0;
    for (int n = 1; n <= 40; n++) lengths[n_lengths++] = n;
    lengths[n_lengths++] = 97, lengths[n_lengths++] = 256, lengths[n_lengths++] = 1000;
    long short_runs = 0, multibyte = 0, runs = 0;
    Collected c;
    for (int p = 0; p < 3; p++)
        for (int ti = 0; ti < N_TEMPERATURES; ti++)
            for (int li = 0; li < n_lengths; li++) {
                int N = lengths[li], k = li % 2 ? 0 : 40;
                ck_assert_int_eq(run(prompts[p], N, temperatures[ti], k, false, 100 + li * 7 + ti, &c), GENERATE_DONE);
                size_t plen = strlen(prompts[p]);
                const unsigned char *gen = (const unsigned char *)c.text + plen;
                size_t G = c.len - plen;
                ck_assert_msg(memcmp(c.text, prompts[p], plen) == 0, "the text starts with the prompt");
                ck_assert_msg(G <= (size_t)N && G + 3 >= (size_t)N, "length %d, t %g: %zu bytes", N,
                              (double)temperatures[ti], G);
                size_t valid = utf8_valid_prefix(gen, G);
                ck_assert_msg(valid == G, "length %d, t %g, prompt %d: not valid UTF-8 from byte %zu", N,
                              (double)temperatures[ti], p, valid);
                /* one character per piece after the prompt's */
                for (int i = plen ? 1 : 0; i < c.pieces; i++) {
                    size_t n = piece_len(&c, i);
                    const unsigned char *piece = (const unsigned char *)c.text + c.start[i];
                    ck_assert_msg(n >= 1 && (size_t)utf8_char_bytes(piece[0]) == n && utf8_valid_prefix(piece, n) == n,
                                  "piece %d of %zu bytes is not one character", i, n);
                    multibyte += n > 1;
                }
                short_runs += G < (size_t)N;
                runs++;
            }
    /* the rule was at work: characters of several bytes, and some cut off by the length */
    ck_assert_msg(multibyte > 1000 && short_runs > runs / 10, "%ld multi-byte characters; %ld of %ld runs short",
                  multibyte, short_runs, runs);
}
END_TEST

/* Raw bytes: often not UTF-8, at most N bytes, and never ending in a
 * character the length cut off, as a reader that resynchronises sees it. */
START_TEST(test_length_rule_raw_bytes) {
    long invalid = 0, runs = 0;
    Collected c;
    for (int ti = 1; ti < N_TEMPERATURES; ti++)
        for (int N = 1; N <= 60; N++) {
            ck_assert_int_eq(run("", N, temperatures[ti], 0, true, 900 + N, &c), GENERATE_DONE);
            const unsigned char *s = (const unsigned char *)c.text;
            ck_assert_uint_le(c.len, (size_t)N);
            ck_assert_msg(ends_at_boundary(s, c.len), "raw, length %d: ends inside a character", N);
            /* each piece is handed on at a boundary */
            for (int i = 0; i < c.pieces; i++)
                ck_assert_msg(ends_at_boundary(s, c.start[i] + piece_len(&c, i)), "raw, length %d: piece %d", N, i);
            invalid += utf8_valid_prefix(s, c.len) != c.len;
            runs++;
        }
    ck_assert_msg(invalid > runs / 2, "raw bytes gave invalid UTF-8 in only %ld of %ld runs", invalid, runs);
}
END_TEST

/* A prompt cut inside a character is completed with the bytes its state
 * allows: the second byte after E0 is A0..BF, after ED 80..9F, after F0
 * 90..BF, after F4 80..8F; the range is drawn from, not one byte of it. */
START_TEST(test_prompt_inside_a_character) {
    static const struct {
        const char *prompt;
        int lo, hi, more; /* the next byte's range, and the bytes still to come */
    } cases[] = {
        {"a\xe0", 0xA0, 0xBF, 2}, {"a\xed", 0x80, 0x9F, 2}, {"a\xf0", 0x90, 0xBF, 3},
        {"a\xf4", 0x80, 0x8F, 3}, {"a\xe4\xb8", 0x80, 0xBF, 1}, {"a\xc3", 0x80, 0xBF, 1},
    };
    Collected c;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bool seen[256] = {false};
        int distinct = 0;
        size_t plen = strlen(cases[i].prompt);
        for (int s = 0; s < 200; s++) {
            ck_assert_int_eq(run(cases[i].prompt, cases[i].more, 2.0f, 0, false, 5000 + s, &c), GENERATE_DONE);
            ck_assert_msg(c.len == plen + (size_t)cases[i].more && c.pieces == 2, "case %zu: %zu bytes in %d pieces", i,
                          c.len, c.pieces);
            int b = (unsigned char)c.text[plen];
            ck_assert_msg(b >= cases[i].lo && b <= cases[i].hi, "case %zu: drew %02X", i, b);
            ck_assert_msg(utf8_valid_prefix((const unsigned char *)c.text, c.len) == c.len, "case %zu: not valid", i);
            distinct += !seen[b];
            seen[b] = true;
        }
        ck_assert_msg(distinct * 2 >= cases[i].hi - cases[i].lo + 1, "case %zu: %d distinct bytes", i, distinct);
    }
}
END_TEST

/* The same seed gives the same bytes; another seed other bytes; the
 * collected text of generate_text is the stream's; a prompt longer than the
 * context is fine; a failed emit stops at once. */
START_TEST(test_seed_and_collect) {
    Collected a, b;
    char prompt[200];
    for (int i = 0; i < 199; i++) prompt[i] = (char)('a' + i % 26);
    prompt[199] = '\0';
    ck_assert_int_eq(run(prompt, 300, 1.0f, 40, false, 42, &a), GENERATE_DONE);
    ck_assert_int_eq(run(prompt, 300, 1.0f, 40, false, 42, &b), GENERATE_DONE);
    ck_assert(a.len == b.len && memcmp(a.text, b.text, a.len) == 0);
    ck_assert_int_eq(run(prompt, 300, 1.0f, 40, false, 43, &b), GENERATE_DONE);
    ck_assert(a.len != b.len || memcmp(a.text, b.text, a.len) != 0);

    SampleConfig s = {.temperature = 1.0f, .top_k = 40, .length = 300};
    snprintf(s.prompt, sizeof s.prompt, "%s", prompt);
    Rng rng;
    rng_seed(&rng, 42);
    size_t len;
    char *text = generate_text(&model, &s, &rng, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert(len == a.len && memcmp(text, a.text, len) == 0 && text[len] == '\0');
    free(text);

    memset(&b, 0, sizeof b);
    b.stop_after = 3;
    GenerateSpec g = {.prompt = "x", .length = 100, .temperature = 1.0f};
    rng_seed(&rng, 1);
    ck_assert_int_eq(generate_stream(&model, &g, &rng, collect, &b), GENERATE_STOPPED);
    ck_assert_int_eq(b.pieces, 3);
}
END_TEST

Suite *generate_suite(void) {
    Suite *s = suite_create("generate");
    TCase *tc = tcase_create("generate");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_length_rule_valid_utf8);
    tcase_add_test(tc, test_length_rule_raw_bytes);
    tcase_add_test(tc, test_prompt_inside_a_character);
    tcase_add_test(tc, test_seed_and_collect);
    suite_add_tcase(s, tc);
    return s;
}
