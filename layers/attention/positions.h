/* attention/positions.h: what a position scheme is, and the list of them.
 *
 * A scheme is a value of the `pos` option: how a model knows where a byte is.
 * It does one or more of four things, each a hook below, and the rest of the
 * program asks only the hooks, never a scheme's name or number:
 *   - adds something to the token embeddings (a learned table, or a fixed
 *     function of position: `table`, `embed`);
 *   - rotates q and k by position before the scores (`rotary`, with an
 *     optional per-pair decay);
 *   - adds a bias b_h(delta) to every score, delta = i - j (or |i - j|),
 *     fixed or with learned [H] parameters per layer (`bias`, `params`);
 *   - says how it runs past its training length (`bounded`).
 * Window, log-n and blockwise causal masks act on the scores of any scheme
 * (softmax_op.c); a bias depends on the distance only, so it needs nothing
 * more under them.
 *
 * Adding a scheme is one file in layers/attention/ (its PosScheme, its
 * option rows and validate hook) and one line in POS_SCHEME_LIST
 * (layers/attention/positions.c), plus its cases (docs/positions.md). A
 * scheme whose hook is forgotten trains the same model as pos=none, which
 * tests/test_model.c's walk of the list refuses. */
#ifndef ATTNLAB_ATTENTION_POSITIONS_H
#define ATTNLAB_ATTENTION_POSITIONS_H

#include "attention/kernel.h"

/* The most learned [H] parameters a bias declares per layer. */
#define POS_MAX_PARAMS 2

/* What a bias hook is told: H heads, distances 0 .. T-1, key size dk, the
 * config (the scheme's own options), and the values of its learned [H]
 * parameters, as `params` names them (NULL when it has none). */
typedef struct {
    int H, T, dk;
    const ModelConfig *cfg;
    const float *params[POS_MAX_PARAMS];
} PosBias;

typedef struct PosScheme {
    const char *name;
    const char *help; /* for --help, a few words */

    /* ---- embeddings -------------------------------------------------------- */
    /* A learned [context, d_model] table, pos_emb.weight, added to the token
     * embeddings (the model holds it, layers/model.c). */
    bool table;
    /* A fixed function of position added to the embeddings x [B, T, d]
     * (NULL: none). */
    Tensor *(*embed)(Tensor *x);

    /* ---- rotation of q and k (rope.c's op) ------------------------------------ */
    /* q and k rotated by position, pairs (2i, 2i + 1) by t theta_i (RoPE);
     * rope_dims applies. */
    bool rotary;
    /* With rotary, a per-pair decay: q at position t is scaled by
     * exp(+decay(i, D) t'), k by exp(-decay(i, D) t'), t' the position
     * centred on the sequence, D the rotated dimensions (NULL: none).
     * Kernels that rotate inside (rope_inside) take plain rotations only. */
    double (*decay)(int i, int D);

    /* ---- a bias on the scores (softmax_op.c, scoremap.c) ---------------------- */
    /* table[h T + delta] = b_h(delta) for delta = 0 .. T-1 (NULL: no bias). A
     * bias needs a kernel with a score matrix (AttnKernel.scores). */
    void (*bias)(const PosBias *b, float *table);
    /* Its learned [H] parameters per layer, named as the reference model
     * names them (blocks.{i}.attn.<name>), NULL-terminated (NULL: none). */
    const char *const *params;
    /* With params: dp[i][h] += d loss / d params[i][h] from g[h T + delta],
     * the score gradients summed by distance (dp[i] NULL: not wanted). */
    void (*param_grads)(const PosBias *b, const double *g, float *const *dp);
    /* With params: their values at initialisation (after the generic rule). */
    void (*param_init)(Tensor *const *params, Rng *rng);

    /* ---- lengths and inference ------------------------------------------------ */
    /* Defined up to the training context only: a longer length is refused
     * (./extrapolate scores it n/a). */
    bool bounded;

    /* ---- the command line ------------------------------------------------------ */
    /* The option-table rows only this scheme reads (ended by a NULL name;
     * NULL: none). Their values are fields of ModelConfig; a row another
     * scheme also lists is one option they share. */
    const OptDef *option_rows;
    /* Refuses combinations the scheme cannot run, with the reason (0 or -1);
     * `scores` says whether the kernel forms a score matrix. NULL: none. */
    int (*validate)(const ModelConfig *m, bool scores, Err *e);
} PosScheme;

/* Every scheme once, in the order of POS_SCHEME_LIST (positions.c); the
 * stored config holds the index, checkpoints and config.json the name. */
extern const PosScheme *const pos_schemes[];
extern const int n_pos_schemes;
/* The default value's name. */
extern const char *const pos_default_name;
/* pos_schemes[pos]; aborts out of range. */
const PosScheme *pos_scheme(int pos);
/* The index of the named scheme, or -1. */
int pos_find(const char *name);
/* The names, NULL-terminated, for the option table. */
const char *const *pos_scheme_names(void);
/* The pos option's value as text ("alibi"). */
const char *pos_name(int pos);
/* How many learned [H] parameters scheme `pos` declares per layer. */
int pos_param_count(int pos);
/* Declares them under prefix ("blocks.0.attn") into params[0 ..). */
void pos_params_declare(ParamSet *p, const char *prefix, int pos, int H, Tensor **params);

/* ---- the built-in schemes' shared pieces ------------------------------------ */

/* RoPE or XPOS (a rotary scheme) on q or k [B, H, T, key_size], as one op
 * with a hand-written backward (layers/attention/rope.c). `key` selects the
 * k side of a decay, exp(-decay t'). */
Tensor *attn_rope(const AttnCall *c, Tensor *x, bool key);

/* The sinusoidal table (layers/attention/sinusoidal.c): [T, d],
 * PE[t, 2i] = sin(t w_i), PE[t, 2i + 1] = cos(t w_i), w_i = 10000^(-2i / d). */
float sinusoid_frequency(int i, int d);
void sinusoidal_table(float *pe, int T, int d);

/* ALiBi's slopes m[0 .. H) (layers/attention/alibi.c). */
void alibi_slopes(int H, float *m);

#endif
