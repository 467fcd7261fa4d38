/* rope.h: what layers/attention/rope.c shares with the linear kernel and the
 * tests: the rotation tables and the op. */
#ifndef ATTNLAB_ROPE_H
#define ATTNLAB_ROPE_H

#include <stdbool.h>

#include "tape.h"

/* XPOS's scale base s (Sun et al. 2023; torchscale's scale_base). */
#define XPOS_SCALE_BASE 512.0

/* The rotated pairs for rope_dims over key size d (rope_dims 0 = d): the
 * leading rope_dims / 2 pairs; an odd last dimension never rotates. */
int rope_pairs(int rope_dims, int d);

/* Tables for positions t = 0..T-1 and pairs i < P (row-major [T, P]):
 *   cs[t, i] = a_{t,i} cos(t theta_i),  sn[t, i] = a_{t,i} sin(t theta_i),
 *   theta_i = 10000^(-2i / D), D = 2P,
 * a = 1 without a decay (pos = rope); with one (PosScheme.decay),
 * a_{t,i} = exp(+-decay(i, D) t') (+ for q, - for k), t' = t + floor(-T/2):
 * for pos = xpos, zeta_i^(+-t'/s), zeta_i = (2i + 0.4 D) / (1.4 D), s = 512.
 * Computed in double, stored as float. */
void rope_tables(int T, int P, double (*decay)(int i, int D), bool key, float *cs, float *sn);

/* The op (pos = rope | xpos on q or k), exported for the tests. */
extern OpDef attn_rope_op;

#endif
