/* alibi_log.c: pos = alibi_log, the example scheme (docs/positions.md): ALiBi
 * with a logarithmic distance,
 *   b_h(delta) = -m_h log(1 + delta),
 * m_h ALiBi's slopes (alibi.c), delta = i - j (causal) or |i - j|. Like
 * kerple_log with its factor fixed to ALiBi's slopes and r2 = 1: a penalty
 * that grows ever more slowly with distance. No parameters. */
#include <math.h>

#include "attention/positions.h"

static void alibi_log_bias(const PosBias *b, float *table) {
    int H = b->H, T = b->T;
    float m[H];
    alibi_slopes(H, m);
    for (int h = 0; h < H; h++)
        for (int d = 0; d < T; d++) table[(long)h * T + d] = (float)(-m[h] * log1p((double)d));
}

const PosScheme pos_scheme_alibi_log = {
    .name = "alibi_log",
    .help = "-m_h log(1 + |i - j|) added to the scores",
    .bias = alibi_log_bias,
};
