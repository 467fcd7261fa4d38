/* rng.h: a seeded, reproducible random number generator.
 *
 * xoshiro256** (Blackman & Vigna), seeded through splitmix64. The whole state
 * is four 64-bit words, so a checkpoint can store it and resume bit for bit.
 * The same seed gives the same stream on every machine. */
#ifndef ATTNLAB_RNG_H
#define ATTNLAB_RNG_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    uint64_t s[4];
} Rng;

void rng_seed(Rng *r, uint64_t seed);
/* Whether a state can come from rng_seed: xoshiro's state must not be all
 * zero (from there it gives zeros forever). Checked on every state loaded
 * from a file. */
bool rng_state_valid(const Rng *r);
uint64_t rng_u64(Rng *r);
/* Uniform in [0, 1), 24 random bits: every value is an exact float. */
float rng_uniform(Rng *r);
/* Uniform integer in [0, n), without modulo bias. n > 0. */
uint32_t rng_below(Rng *r, uint32_t n);
/* Standard normal by Box-Muller. Uses two uniforms per call and keeps no cached
 * second value, so the state stays the four words above. */
float rng_normal(Rng *r);
/* Fills x[0..n) with mean + std * N(0, 1). */
void rng_fill_normal(Rng *r, float *x, long n, float mean, float std);

#endif
