#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rng_seed(Rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

bool rng_state_valid(const Rng *r) { return (r->s[0] | r->s[1] | r->s[2] | r->s[3]) != 0; }

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_u64(Rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float rng_uniform(Rng *r) { return (float)(rng_u64(r) >> 40) * 0x1.0p-24f; }

uint32_t rng_below(Rng *r, uint32_t n) {
    /* Lemire's multiply-shift with rejection of the biased low range. */
    uint64_t m = (uint64_t)(uint32_t)(rng_u64(r) >> 32) * n;
    uint32_t lo = (uint32_t)m;
    if (lo < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (lo < threshold) {
            m = (uint64_t)(uint32_t)(rng_u64(r) >> 32) * n;
            lo = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

float rng_normal(Rng *r) {
    /* u1 in (0, 1] so the log is finite. Computed in double: the tails matter
     * for initialisation statistics and the cost is negligible. */
    double u1 = 1.0 - (double)(rng_u64(r) >> 11) * 0x1.0p-53;
    double u2 = (double)(rng_u64(r) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

void rng_fill_normal(Rng *r, float *x, long n, float mean, float std) {
    for (long i = 0; i < n; i++) x[i] = mean + std * rng_normal(r);
}
