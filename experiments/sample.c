#include "sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tape.h"

/* Draws a byte from logits z[256] at temperature t (0 = argmax) among the top k (0 = all). */
static int draw(const float *z, int V, float t, int k, Rng *rng) {
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
            int j = n < k ? n++ : k - 1;
            if (j == k - 1 && n == k && z[i] <= top[k - 1]) continue;
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

char *sample_text(Model *m, const SampleConfig *s, Rng *rng, size_t *len) {
    size_t plen = strlen(s->prompt), total = plen + (size_t)s->length;
    int *ids = xmalloc((total + 1) * sizeof(int));
    char *text = xmalloc(total + 1);
    memcpy(text, s->prompt, plen);
    for (size_t i = 0; i < plen; i++) ids[i] = (unsigned char)s->prompt[i];
    size_t n = plen;
    if (n == 0) ids[n++] = '\n'; /* an empty prompt starts from a newline */
    Arena arena, *outer = engine_arena_or_null();
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    bool was = grad_set(false);
    int V = m->cfg.vocab, T_max = m->cfg.context;
    for (int step = 0; step < s->length; step++) {
        arena_reset(&arena);
        int T = n < (size_t)T_max ? (int)n : T_max;
        Tensor *logits = model_forward(m, ids + n - T, 1, T);
        int next = draw(logits->data + (long)(T - 1) * logits->shape[2], V < 256 ? V : 256, s->temperature, s->top_k, rng);
        ids[n++] = next;
    }
    /* the bytes after the prompt */
    size_t first = plen == 0 ? 1 : plen;
    for (size_t i = first; i < n; i++) text[plen + i - first] = (char)ids[i];
    *len = plen + (n - first);
    text[*len] = '\0';
    grad_set(was);
    engine_set_arena(outer);
    arena_free(&arena);
    free(ids);
    return text;
}
