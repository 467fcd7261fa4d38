/* attention/positions.h: the position schemes' shared pieces: RoPE and XPOS
 * as an op, the sinusoidal table, and score biases by distance. */
#ifndef ATTNLAB_ATTENTION_POSITIONS_H
#define ATTNLAB_ATTENTION_POSITIONS_H

#include "attention/kernel.h"

/* RoPE (pos = rope) or XPOS (pos = xpos) on q or k [B, H, T, key_size], as
 * one op with a hand-written backward (layers/attention/rope.c). `key`
 * selects XPOS's k-side decay zeta^(-j/s) instead of q's zeta^(i/s). */
Tensor *attn_rope(const AttnCall *c, Tensor *x, bool key);

/* pos = sinusoidal (layers/attention/sinusoidal.c): the fixed table [T, d],
 * PE[t, 2i] = sin(t w_i), PE[t, 2i + 1] = cos(t w_i), w_i = 10000^(-2i / d). */
float sinusoid_frequency(int i, int d);
void sinusoidal_table(float *pe, int T, int d);
/* x [B, T, d] + the table / sqrt(d), gradients passing to x. */
Tensor *sinusoidal_add(Tensor *x);

/* The built-in schemes' indices, in the order of pos_schemes. */
typedef enum {
    POS_NONE,
    POS_LEARNED,      /* pos_emb.weight added to the token embeddings, up to context */
    POS_SINUSOIDAL,   /* the fixed sin/cos table added to the embeddings */
    POS_ROPE,         /* q and k rotated by position */
    POS_ALIBI,        /* -m_h |i - j| added to the scores */
    POS_KERPLE_POWER, /* -a_h |i - j|^p_h, learned */
    POS_KERPLE_LOG,   /* -r1_h log(1 + r2_h |i - j|), learned */
    POS_SANDWICH,     /* lambda p_i . p_j with sinusoidal p */
    POS_XPOS          /* RoPE times a per-dimension decay, causal only */
} PosKind;

/* A value of the `pos` option: what the rest of the program asks of a
 * position scheme, so that nothing outside this folder names one. The code of
 * each lives in its own file here (sinusoidal.c, rope.c, bias.c; learned
 * positions in layers/model.c). */
typedef struct {
    const char *name;
    const char *help;
    bool bias;    /* adds a bias to every score: needs a kernel with a score matrix (bias.c) */
    bool rotary;  /* rotates q and k (rope.c); rope_dims applies */
    bool bounded; /* defined up to the training context only */
    bool table;   /* a learned [context, d_model] table, pos_emb.weight, added to the embeddings */
    /* A fixed function of position added to the embeddings x [B, T, d] (NULL: none). */
    Tensor *(*embed)(Tensor *x);
    /* The option-table rows only this scheme reads (ended by a NULL name; NULL: none). */
    const OptDef *option_rows;
    /* Refuses combinations the scheme cannot run, with the reason (0 or -1);
     * `scores` says whether the kernel forms a score matrix. NULL: none. */
    int (*validate)(const ModelConfig *m, bool scores, Err *e);
} PosScheme;

/* The pos values, in order (layers/attention/positions.c). */
extern const PosScheme pos_schemes[];
extern const int n_pos_schemes;
/* The default value's index. */
extern const int pos_default;
/* pos_schemes[pos]; aborts out of range. */
const PosScheme *pos_scheme(int pos);
/* The names, NULL-terminated, for the option table. */
const char *const *pos_scheme_names(void);
/* The pos option's value as text ("alibi"). */
const char *pos_name(int pos);

/* Score biases by distance for the softmax kernel (layers/attention/bias.c,
 * which gives the formulas): pos = alibi, kerple_power, kerple_log, sandwich. */
bool pos_has_bias(int pos);
/* Learned [H] parameters of the scheme: 2 for kerple_* (a, p or r1, r2), else 0. */
int pos_bias_n_params(int pos);
/* ALiBi's slopes m[0 .. H). */
void alibi_slopes(int H, float *m);
/* table[h T + delta] = b_h(delta), delta = 0 .. T-1; p0, p1 the [H]
 * parameters (kerple_*; else unused), dk the key size (sandwich). */
void pos_bias_table(int pos, int H, int T, int dk, float lambda, const float *p0, const float *p1, float *table);
/* dp0, dp1 [H] += the parameters' gradients from g[h T + delta], the summed
 * score gradients at each distance (either may be NULL). */
void pos_bias_param_grads(int pos, int H, int T, const float *p0, const float *p1, const double *g, float *dp0,
                          float *dp1);
/* Declares the scheme's [H] parameters under prefix into params[0],
 * params[1], named as the reference model names them: kerple_a, kerple_p
 * (kerple_power) or kerple_r1, kerple_r2 (kerple_log); none for the others. */
void pos_bias_declare(ParamSet *p, const char *prefix, int pos, int H, Tensor **params);
/* The KERPLE reference's initialisation of p0, p1 (kerple_*). */
void pos_bias_init(int pos, Tensor *p0, Tensor *p1, Rng *rng);

#endif
