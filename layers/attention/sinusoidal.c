/* sinusoidal.c: pos = sinusoidal, the fixed position table of Vaswani et al.
 * 2017 ("Attention Is All You Need"), added to the token embeddings. Defined
 * for any length, so nothing stops a model at its training length:
 *   PE[t, 2i] = sin(t / 10000^(2i / d)),  PE[t, 2i + 1] = cos(t / 10000^(2i / d)).
 * The model adds PE / sqrt(d): Vaswani et al. multiply the token embeddings
 * by sqrt(d) instead, which is the same up to a global scale that the first
 * pre-norm removes; with tokens drawn at N(0, 0.02), a table of amplitude 1
 * would swamp them and slow training badly (x-transformers scales its
 * sinusoidal embedding by d^-0.5 for the same reason). It has no parameters;
 * gradients flow through the addition to the tokens.
 * pos = sandwich (layers/attention/sandwich.c) uses the same frequencies. */
#include <math.h>

#include "attention/positions.h"
#include "ops.h"

float sinusoid_frequency(int i, int d) { return (float)pow(10000.0, -2.0 * i / d); }

void sinusoidal_table(float *pe, int T, int d) {
    for (int t = 0; t < T; t++)
        for (int c = 0; c < d; c++) {
            double a = (double)t * sinusoid_frequency(c / 2, d);
            pe[(long)t * d + c] = (float)(c % 2 == 0 ? sin(a) : cos(a));
        }
}

/* x [B, T, d] + the table / sqrt(d), gradients passing to x. */
static Tensor *sinusoidal_add(Tensor *x) {
    int T = x->shape[x->ndim - 2], d = x->shape[x->ndim - 1];
    Tensor *pe = tensor_2d(T, d); /* from the arena, no gradient */
    sinusoidal_table(pe->data, T, d);
    float s = 1.0f / sqrtf((float)d);
    for (long i = 0; i < pe->n; i++) pe->data[i] *= s;
    return op_add(x, pe);
}

const PosScheme pos_scheme_sinusoidal = {
    .name = "sinusoidal",
    .help = "the fixed sin/cos table added to the embeddings",
    .embed = sinusoidal_add,
};
