/* alibi.c: pos = alibi (Press et al. 2022, "Train Short, Test Long:
 * Attention with Linear Biases"), a fixed bias on the scores:
 *   b_h(delta) = -m_h delta,
 * delta = i - j (causal) or |i - j| (bidirectional), head h = 0 .. H-1. For H
 * a power of two, m_h = 2^(-8(h+1)/H); otherwise the slopes of the nearest
 * lower power of two n, then every other slope of 2n (m_0, m_2, ...) until
 * there are H. No parameters. */
#include <math.h>

#include "attention/positions.h"

void alibi_slopes(int n, float *m) {
    int p2 = 1;
    while (p2 * 2 <= n) p2 *= 2;
    for (int h = 0; h < p2; h++) m[h] = (float)pow(2.0, -8.0 * (h + 1) / p2);
    /* every other slope of 2 p2 heads: 2^(-8(2i+1) / (2 p2)), i = 0, 1, ... */
    for (int h = p2; h < n; h++) m[h] = (float)pow(2.0, -8.0 * (2 * (h - p2) + 1) / (2.0 * p2));
}

static void alibi_bias(const PosBias *b, float *table) {
    int H = b->H, T = b->T;
    float m[H];
    alibi_slopes(H, m);
    for (int h = 0; h < H; h++)
        for (int d = 0; d < T; d++) table[(long)h * T + d] = -m[h] * (float)d;
}

const PosScheme pos_scheme_alibi = {
    .name = "alibi",
    .help = "-m_h |i - j| added to the scores",
    .bias = alibi_bias,
};
