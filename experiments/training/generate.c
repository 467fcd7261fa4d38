#include "generate.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interrupt.h"
#include "mlm.h"
#include "tape.h"
#include "utf8.h"

/* Draws a byte from logits z[256] at temperature t (0 = argmax) among the top k (0 = all). */
int generate_draw(const float *z, int V, float t, int k, Rng *rng) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (z[i] > z[best]) best = i;
    if (t <= 0.0f) return best;
    /* the k-th largest logit is the cut */
    float cut = -INFINITY;
    if (k > 0 && k < V) {
        float top[256];
        int n = 0;
        for (int i = 0; i < V; i++) {
            /* top[0, n) holds the largest so far, in descending order */
            bool full = n == k;
            int j = full ? k - 1 : n++;
            if (full && z[i] <= top[k - 1]) continue;
            while (j > 0 && top[j - 1] < z[i]) {
                top[j] = top[j - 1];
                j--;
            }
            top[j] = z[i];
        }
        cut = top[k - 1];
    }
    double p[256], sum = 0.0;
    for (int i = 0; i < V; i++) {
        p[i] = z[i] >= cut ? exp((double)(z[i] - z[best]) / t) : 0.0;
        sum += p[i];
    }
    double u = rng_uniform(rng) * sum;
    for (int i = 0; i < V; i++) {
        u -= p[i];
        if (u < 0.0 && p[i] > 0.0) return i;
    }
    return best;
}

void generate_seed(Rng *rng, int64_t seed) { rng_seed(rng, (uint64_t)seed * 3 + 2); }

int generate_stream(Model *m, const GenerateSpec *g, Rng *rng, GenerateEmit emit, void *ctx) {
    size_t plen = strlen(g->prompt);
    int *ids = xmalloc((plen + (size_t)g->length + 1) * sizeof(int));
    char *out = xmalloc((size_t)g->length + 1); /* the bytes drawn */
    for (size_t i = 0; i < plen; i++) ids[i] = (unsigned char)g->prompt[i];
    size_t n = plen;
    if (n == 0) ids[n++] = '\n'; /* an empty prompt starts from a newline */
    int rc = plen && emit(g->prompt, plen, ctx) != 0 ? GENERATE_STOPPED : GENERATE_DONE;
    /* where the prompt leaves the text: a character it ends inside is continued */
    Utf8State u;
    utf8_init(&u);
    for (size_t i = 0; i < plen; i++) utf8_read(&u, ids[i]);
    Arena arena, *outer = engine_arena_or_null();
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    bool was = grad_set(false);
    int V = m->cfg.vocab < 256 ? m->cfg.vocab : 256, T_max = m->cfg.context;
    size_t drawn = 0, handed = 0; /* out[handed, drawn) waits for a character boundary */
    float z[256];
    bool allowed[256];
    while (drawn < (size_t)g->length && rc == GENERATE_DONE) {
        if (interrupt_signal()) {
            rc = GENERATE_INTERRUPTED;
            break;
        }
        arena_reset(&arena);
        int T = n < (size_t)T_max ? (int)n : T_max;
        Tensor *logits = model_forward(m, ids + n - T, 1, T);
        memcpy(z, logits->data + (long)(T - 1) * logits->shape[2], (size_t)V * sizeof(float));
        if (!g->raw) {
            /* renormalised over the bytes valid here: the others get probability 0 */
            utf8_allowed_mask(&u, allowed);
            for (int b = 0; b < V; b++)
                if (!allowed[b]) z[b] = -INFINITY;
        }
        int next = generate_draw(z, V, g->temperature, g->top_k, rng);
        ids[n++] = next;
        out[drawn++] = (char)next;
        utf8_read(&u, next);
        if (utf8_at_boundary(&u)) {
            if (emit(out + handed, drawn - handed, ctx) != 0) rc = GENERATE_STOPPED;
            handed = drawn;
        }
    }
    /* the length rule: out[handed, drawn), a character the length cut off, is dropped */
    if (rc == GENERATE_DONE && interrupt_signal()) rc = GENERATE_INTERRUPTED; /* during the last byte */
    grad_set(was);
    engine_set_arena(outer);
    arena_free(&arena);
    free(out);
    free(ids);
    return rc;
}

/* A growing text buffer. */
typedef struct {
    char *p;
    size_t len, cap;
} Text;

static void text_put(Text *t, const char *s, size_t n) {
    if (t->len + n + 1 > t->cap) {
        t->cap = 2 * (t->len + n + 1);
        t->p = realloc(t->p, t->cap);
        if (!t->p) DIE_OOM(t->cap);
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void text_printf(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_printf(Text *t, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    text_put(t, buf, n < (int)sizeof buf ? (size_t)n : sizeof buf - 1);
}

static int text_emit(const char *bytes, size_t n, void *ctx) {
    text_put(ctx, bytes, n);
    return 0;
}

char *generate_text(Model *m, const SampleConfig *s, Rng *rng, size_t *len) {
    GenerateSpec g = {.prompt = s->prompt, .length = s->length, .temperature = s->temperature, .top_k = s->top_k};
    Text t = {0};
    text_put(&t, "", 0); /* the text is never NULL, even when empty */
    if (generate_stream(m, &g, rng, text_emit, &t) != GENERATE_DONE) {
        free(t.p);
        return NULL;
    }
    *len = t.len;
    return t.p;
}

/* One line of a window: label, then one column per id. */
static void text_row(Text *t, const char *label, const int *ids, int T) {
    text_printf(t, "%-8s | ", label);
    for (int i = 0; i < T; i++) {
        int b = ids[i];
        char ch = b == MASK_ID ? '_' : (b < 0x20 || b == 0x7f) ? '~' : (char)b;
        text_put(t, &ch, 1);
    }
    text_put(t, "\n", 1);
}

char *generate_fill_in(Model *m, const Corpus *c, const SampleConfig *s, size_t *len) {
    int T = m->cfg.context, V = m->cfg.vocab < VOCAB_BYTES ? m->cfg.vocab : VOCAB_BYTES;
    long fit = corpus_val_count(c, T, 0), k = ((long)s->length + T - 1) / T;
    if (k > fit) k = fit;
    Text t = {0};
    text_printf(&t,
                "fill-in demo (objective = mlm: the model reads the whole window, so it is not sampled left to right).\n"
                "In each validation window, the positions validation scores are all masked and predicted at once\n"
                "(argmax over the 256 bytes). '_' is a masked byte, '~' a control byte such as a newline.\n");
    int *orig = xmalloc((size_t)T * sizeof(int)), *ids = xmalloc((size_t)T * sizeof(int));
    int *targets = xmalloc((size_t)T * sizeof(int)), *filled = xmalloc((size_t)T * sizeof(int));
    Arena arena, *outer = engine_arena_or_null();
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    bool was = grad_set(false);
    long right_all = 0, masked_all = 0;
    for (long w = 0; w < k && !interrupt_signal(); w++) {
        corpus_val_window(c, T, k, w, orig, targets);
        mlm_val_window(c, T, k, w, ids, targets);
        for (int i = 0; i < T; i++)
            if (targets[i] >= 0) ids[i] = MASK_ID; /* every chosen position, not 80% of them */
        arena_reset(&arena);
        Tensor *logits = model_forward(m, ids, 1, T);
        int right = 0, masked = 0;
        for (int i = 0; i < T; i++) {
            filled[i] = ids[i];
            if (ids[i] != MASK_ID) continue;
            const float *z = logits->data + (long)i * logits->shape[2];
            int best = 0;
            for (int j = 1; j < V; j++)
                if (z[j] > z[best]) best = j;
            filled[i] = best;
            masked++;
            right += best == orig[i];
        }
        size_t off = corpus_val_offset(c, T, k, w);
        text_printf(&t, "\nwindow %ld of %ld, bytes %zu..%zu: %d of %d masked bytes right\n", w + 1, k, off,
                    off + (size_t)T - 1, right, masked);
        text_row(&t, "original", orig, T);
        text_row(&t, "masked", ids, T);
        text_row(&t, "filled", filled, T);
        right_all += right;
        masked_all += masked;
    }
    if (masked_all)
        text_printf(&t, "\nall windows: %ld of %ld masked bytes right (%.1f%%)\n", right_all, masked_all,
                    100.0 * (double)right_all / (double)masked_all);
    grad_set(was);
    engine_set_arena(outer);
    arena_free(&arena);
    free(orig), free(ids), free(targets), free(filled);
    if (interrupt_signal()) {
        free(t.p);
        return NULL;
    }
    *len = t.len;
    return t.p;
}
