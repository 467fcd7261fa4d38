/* test_options.c: config_validate (experiments/run/options.h), the one function
 * that refuses combinations of options that cannot work.
 *
 * - Every refusal, one case each: refused, with one line naming the option or
 *   the reason, and the phrase the user needs (tests/cli.sh runs the same
 *   refusals through ./train's command line: exit 2 and "error: ").
 * - The valid combinations are accepted: every attn x phi x reweight x
 *   talking_heads x objective point, and every Linformer share x proj x k
 *   point, judged against the rules written out here independently of
 *   options.c, so that a rule that refuses too much fails as surely as one
 *   that lets too much through.
 * - What validation derives: the vocabulary, 257 under objective = mlm. */
#include <cJSON.h>
#include <check.h>
#include <ctype.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "attention/kernels.h"
#include "attention/positions.h"
#include "options.h"

/* A config at the defaults with up to 8 key=value settings applied. */
static Config config_with(const char *const *kv, int n) {
    Config c;
    config_defaults(&c);
    for (int i = 0; i < n; i++) {
        Err e;
        ck_assert_msg(option_set(&c, kv[2 * i], kv[2 * i + 1], &e) == 0, "%s", e.msg);
    }
    return c;
}

typedef struct {
    const char *kv[16]; /* key, value, ...; NULL-terminated */
    const char *phrase; /* must appear in the error */
} Refusal;

/* Every combination config_validate refuses. */
static const Refusal refusals[] = {
    /* the list */
    {{"attn", "linformer", "linformer_k", "32"}, "cannot be causal"},
    {{"attn", "linformer", "objective", "clm", "linformer_k", "32"}, "cannot be causal"},
    {{"phi", "elu"}, "--phi applies to linear attention, not attn=softmax"},
    {{"phi", "identity", "attn", "linformer", "objective", "mlm"}, "--phi applies to linear attention, not attn=linformer"},
    {{"reweight", "cos"}, "--reweight applies to linear attention, not attn=softmax"},
    {{"reweight", "cos", "attn", "linformer", "objective", "mlm"}, "--reweight applies to linear attention"},
    {{"phi", "leakyrelu", "leaky_slope", "0.2"}, "--phi applies to linear attention"},
    {{"attn", "cosformer", "phi", "elu"}, "attn=cosformer fixes phi=relu"},
    {{"attn", "cosformer", "phi", "identity"}, "attn=cosformer fixes phi=relu"},
    {{"attn", "cosformer", "leaky_slope", "0.2"}, "--leaky_slope applies to phi=leakyrelu, not phi=relu"},
    {{"attn", "linear", "talking_heads", "pre"}, "--talking_heads applies to attn=softmax, not attn=linear"},
    {{"attn", "cosformer", "talking_heads", "post"}, "--talking_heads applies to attn=softmax, not attn=cosformer"},
    {{"attn", "linear", "phi", "elu", "talking_heads", "both"}, "--talking_heads applies to attn=softmax, not attn=linear"},
    {{"attn", "linformer", "objective", "mlm", "talking_heads", "pre", "linformer_k", "32"}, "--talking_heads applies to attn=softmax, not attn=linformer"},
    /* and the rest */
    {{"chunk", "32"}, "--chunk applies to linear attention, not attn=softmax"},
    {{"attn", "linear", "phi", "relu", "leaky_slope", "0.2"}, "--leaky_slope applies to phi=leakyrelu, not phi=relu"},
    {{"attn", "linear", "objective", "mlm", "chunk", "32"}, "--chunk: chunks are how causal linear attention runs"},
    {{"attn", "cosformer", "objective", "mlm", "chunk", "16"}, "objective=mlm is bidirectional"},
    {{"linformer_k", "32"}, "--linformer_k applies to attn=linformer, not attn=softmax"},
    {{"attn", "linear", "linformer_share", "kv"}, "--linformer_share applies to attn=linformer, not attn=linear"},
    {{"attn", "cosformer", "linformer_proj", "mean"}, "--linformer_proj applies to attn=linformer"},
    {{"attn", "linformer", "objective", "mlm", "context", "32"}, "--linformer_k 64 is longer than --context 32"},
    {{"attn", "linformer", "objective", "mlm", "linformer_k", "48", "linformer_proj", "mean"}, "must divide --context 128"},
    {{"attn", "linformer", "objective", "mlm", "linformer_k", "48", "linformer_proj", "max"}, "kernel = stride = context / k"},
    {{"attn", "linformer", "objective", "mlm", "linformer_k", "48", "linformer_proj", "conv"}, "--linformer_k 48 must divide"},
    {{"attn", "linformer", "objective", "mlm", "linformer_proj", "mean", "linformer_share", "headwise"},
     "pools without parameters, so there is nothing to share"},
    {{"attn", "linformer", "objective", "mlm", "linformer_proj", "max", "linformer_share", "layerwise"},
     "--linformer_share layerwise"},
    {{"heads", "3"}, "--heads 3 does not divide --d_model 128"},
    {{"heads", "3", "key_size", "16"}, "--heads 3 does not divide"},
    {{"heads", "3", "head_size", "16"}, "--heads 3 does not divide"},
    {{"heads", "256"}, "--heads 256 does not divide --d_model 128"},
    {{"objective", "mlm", "prompt", "Once"}, "--prompt: objective=mlm is not sampled left to right"},
    {{"objective", "mlm", "temperature", "1"}, "--temperature: objective=mlm"},
    {{"objective", "mlm", "top_k", "0"}, "--top_k: objective=mlm"},
    {{"lr", "1e-4", "min_lr", "1e-3"}, "--min_lr 0.001 is above --lr 0.0001"},
    /* positions */
    {{"pos", "alibi", "attn", "linear"}, "--pos alibi adds a bias to every score, so it needs an explicit score matrix"},
    {{"pos", "kerple_power", "attn", "cosformer"}, "needs an explicit score matrix: attn=softmax"},
    {{"pos", "kerple_log", "attn", "linformer", "objective", "mlm"}, ", not linformer"},
    {{"pos", "sandwich", "attn", "linear", "phi", "elu"}, "--pos sandwich adds a bias"},
    {{"pos", "alibi", "talking_heads", "pre"}, "talking_heads=pre mixes whole score matrices"},
    {{"pos", "xpos", "objective", "mlm"}, "--pos xpos: its decay is defined for causal attention only"},
    {{"pos", "xpos", "attn", "linear"}, "it needs a kernel with an explicit score matrix"},
    {{"pos", "rope", "attn", "cosformer"}, "attn=cosformer already encodes relative positions"},
    {{"pos", "rope", "attn", "linear", "reweight", "cos"}, "reweight=cos already encodes relative positions"},
    {{"rope_dims", "8"}, "--rope_dims applies to pos=rope or xpos, not pos=learned"},
    {{"pos", "rope", "rope_dims", "7"}, "--rope_dims 7: rotations act on pairs"},
    {{"pos", "xpos", "rope_dims", "64"}, "at most key_size 32"},
    {{"sandwich_lambda", "2"}, "--sandwich_lambda applies to pos=sandwich, not pos=learned"},
    {{"window", "16", "attn", "linear"}, "--window acts on an explicit score matrix, so it needs attn=softmax"},
    {{"logn", "on", "attn", "cosformer"}, "--logn acts on an explicit score matrix"},
    {{"bca", "on", "attn", "linear", "pos", "rope"}, "--bca acts on an explicit score matrix"},
    {{"window", "16", "talking_heads", "both"}, "--window is done in the plain softmax kernel"},
    {{"logn", "on", "talking_heads", "post"}, "--logn is done in the plain softmax kernel"},
    {{"bca", "on", "objective", "mlm"}, "--bca is a causal mask, and objective=mlm is bidirectional"},
    {{"bca", "on", "objective", "mlm"}, "--bca is a causal mask"},
    {{"window", "16", "bca", "on"}, "--window and --bca are two different masks"},
};
#define N_REFUSALS ((int)(sizeof refusals / sizeof refusals[0]))

static int count_kv(const char *const *kv) {
    int n = 0;
    while (n < 8 && kv[2 * n]) n++;
    return n;
}

static void describe(const char *const *kv, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < 8 && kv[2 * i] && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s--%s %s", i ? " " : "", kv[2 * i], kv[2 * i + 1]);
}

START_TEST(test_refusals) {
    const Refusal *r = &refusals[_i];
    Config c = config_with(r->kv, count_kv(r->kv));
    char what[256];
    describe(r->kv, what, sizeof what);
    Err e;
    memset(&e, 0, sizeof e);
    ck_assert_msg(config_validate(&c, &e) == -1, "%s: accepted, want refused (%s)", what, r->phrase);
    ck_assert_msg(strstr(e.msg, r->phrase) != NULL, "%s: error '%s' lacks '%s'", what, e.msg, r->phrase);
    ck_assert_msg(strchr(e.msg, '\n') == NULL && strchr(e.hint, '\n') == NULL, "%s: not one line: %s", what, e.msg);
}
END_TEST

/* The rules of docs/attention.md and docs/positions.md, restated: what a
 * valid model combination is, for the options the grids below walk. */
static bool valid_attention(int attn, int phi, int reweight, int talking, int objective) {
    if (attn > ATTN_LINFORMER) { /* a kernel added to the registry: the rules every kernel has */
        const AttnKernel *k = attn_kernel_for(attn);
        if (phi != PHI_RELU && attn_option_owner("phi") != k) return false;
        if (reweight != REWEIGHT_NONE && attn_option_owner("reweight") != k) return false;
        if (talking != TALKING_NONE && attn_option_owner("talking_heads") != k) return false;
        return !(k->bidirectional_only && objective == OBJECTIVE_CLM);
    }
    bool linear = attn == ATTN_LINEAR, cosformer = attn == ATTN_COSFORMER;
    if (phi != PHI_RELU && !linear) return false;              /* phi needs attn=linear (cosformer fixes relu) */
    if (reweight != REWEIGHT_NONE && !linear && !cosformer) return false; /* cos re-weighting is linear attention's */
    if (talking != TALKING_NONE && attn != ATTN_SOFTMAX) return false;   /* talking heads mix softmax logits/probs */
    if (attn == ATTN_LINFORMER && objective != OBJECTIVE_MLM) return false; /* Linformer is not causal */
    return true;
}

START_TEST(test_attention_grid) {
    int accepted = 0, refused = 0;
    for (int attn = 0; attn < attn_choice_count(); attn++)
        for (int phi = 0; phi < 4; phi++)
            for (int rw = 0; rw < 2; rw++)
                for (int th = 0; th < 4; th++)
                    for (int obj = 0; obj < 2; obj++) {
                        Config c;
                        config_defaults(&c);
                        c.model.attn = attn, linear_opts(&c.model)->phi = phi, linear_opts(&c.model)->reweight = rw, softmax_opts(&c.model)->talking_heads = th;
                        c.model.objective = obj;
                        if (attn_option_owner("linformer_k") == attn_kernel_for(attn)) linformer_opts(&c.model)->linformer_k[0] = 32;
                        Err e;
                        memset(&e, 0, sizeof e);
                        bool want = valid_attention(attn, phi, rw, th, obj);
                        bool got = config_validate(&c, &e) == 0;
                        ck_assert_msg(got == want, "attn %d phi %d reweight %d talking_heads %d objective %d: %s%s", attn,
                                      phi, rw, th, obj, got ? "accepted, want refused" : "refused, want accepted: ",
                                      got ? "" : e.msg);
                        if (got) {
                            accepted++;
                            ck_assert_int_eq(c.model.vocab, obj == OBJECTIVE_MLM ? 257 : 256);
                        } else {
                            refused++;
                        }
                    }
    /* linear: 4 phi x 2 reweight x 2 objectives; cosformer: 2 reweight x 2;
     * softmax: 4 talking x 2; linformer: mlm only; a value added to the
     * registry: the values it owns of phi, reweight and talking_heads (else
     * the default alone) x its objectives */
    int added = 0;
    for (int attn = ATTN_LINFORMER + 1; attn < attn_choice_count(); attn++) {
        const AttnKernel *k = attn_kernel_for(attn);
        added += (attn_option_owner("phi") == k ? 4 : 1) * (attn_option_owner("reweight") == k ? 2 : 1) *
                 (attn_option_owner("talking_heads") == k ? 4 : 1) * (k->bidirectional_only ? 1 : 2);
    }
    ck_assert_int_eq(accepted, 16 + 4 + 8 + 1 + added);
    ck_assert_int_eq(accepted + refused, attn_choice_count() * 4 * 2 * 4 * 2);
}
END_TEST

START_TEST(test_linformer_grid) {
    static const int ks[] = {1, 8, 32, 48, 128, 129};
    int accepted = 0;
    for (int share = 0; share < 4; share++)
        for (int proj = 0; proj < 4; proj++)
            for (int ki = 0; ki < 6; ki++) {
                Config c;
                config_defaults(&c);
                c.model.attn = ATTN_LINFORMER, c.model.objective = OBJECTIVE_MLM;
                linformer_opts(&c.model)->linformer_share = share, linformer_opts(&c.model)->linformer_proj = proj, linformer_opts(&c.model)->linformer_k[0] = ks[ki];
                int n = c.model.context, k = ks[ki];
                bool pooled = proj == LF_PROJ_MEAN || proj == LF_PROJ_MAX;
                bool want = k <= n && (proj == LF_PROJ_LINEAR || n % k == 0) && !(pooled && share != LF_SHARE_NONE);
                Err e;
                memset(&e, 0, sizeof e);
                bool got = config_validate(&c, &e) == 0;
                ck_assert_msg(got == want, "linformer share %d proj %d k %d: %s %s", share, proj, k,
                              got ? "accepted, want refused" : "refused, want accepted:", got ? "" : e.msg);
                accepted += got;
            }
    /* k <= context: 1, 8, 32, 48, 128. linear: any of them with any share;
     * conv: the four that divide 128, any share; mean and max: those four,
     * share none only */
    ck_assert_int_eq(accepted, 4 * 5 + 4 * 4 + 2 * 4);
}
END_TEST

/* The position rules, restated: which pos x attn x objective x talking
 * points are valid, and which inference options go with them. */
static bool valid_positions(int pos, int attn, int objective, int talking, bool masks) {
    /* softmax: the built-in kernel with a score matrix, or any added kernel that has one */
    bool softmax = attn == ATTN_SOFTMAX || (attn > ATTN_LINFORMER && attn_kernel_for(attn)->scores);
    bool linear = attn == ATTN_LINEAR || attn == ATTN_COSFORMER;
    bool bias = pos == POS_ALIBI || pos == POS_KERPLE_POWER || pos == POS_KERPLE_LOG || pos == POS_SANDWICH;
    if (!valid_attention(attn, PHI_RELU, attn == ATTN_COSFORMER, talking, objective)) return false;
    if (bias && (!softmax || talking != TALKING_NONE)) return false; /* a score matrix of the plain kernel */
    if (pos == POS_XPOS && (!softmax || objective != OBJECTIVE_CLM)) return false;
    if (pos == POS_ROPE && attn == ATTN_COSFORMER) return false; /* cos re-weighting is its own scheme */
    (void)linear;
    /* window (a mask on the plain softmax kernel's scores, causal or bidirectional) */
    if (masks && (!softmax || talking != TALKING_NONE)) return false;
    return true;
}

static bool nothing_changed(const char *name, const void *ctx) { return (void)name, (void)ctx, false; }

/* A kernel added to the registry may refuse more by its own validate hook. */
static bool own_rule_accepts(const ModelConfig *m) {
    const AttnKernel *k = attn_kernel_for(m->attn);
    Err e;
    return m->attn <= ATTN_LINFORMER || !k->validate || k->validate(m, nothing_changed, NULL, &e) == 0;
}

START_TEST(test_position_grid) {
    int accepted = 0;
    for (int pos = 0; pos <= POS_XPOS; pos++)
        for (int attn = 0; attn < attn_choice_count(); attn++)
            for (int obj = 0; obj < 2; obj++)
                for (int th = 0; th < 4; th += 3)
                    for (int masks = 0; masks < 2; masks++) {
                        Config c;
                        config_defaults(&c);
                        c.model.pos = pos, c.model.attn = attn, c.model.objective = obj, softmax_opts(&c.model)->talking_heads = th;
                        if (attn_option_owner("linformer_k") == attn_kernel_for(attn)) linformer_opts(&c.model)->linformer_k[0] = 32;
                        if (attn == ATTN_COSFORMER) linear_opts(&c.model)->reweight = REWEIGHT_COS;
                        if (masks) c.model.window = 16;
                        Err e;
                        memset(&e, 0, sizeof e);
                        bool want = valid_positions(pos, attn, obj, th, masks) && own_rule_accepts(&c.model);
                        bool got = config_validate(&c, &e) == 0;
                        ck_assert_msg(got == want, "pos %d attn %d objective %d talking %d window %d: %s%s", pos, attn, obj,
                                      th, masks ? 16 : 0, got ? "accepted, want refused" : "refused, want accepted: ",
                                      got ? "" : e.msg);
                        accepted += got;
                    }
    ck_assert_int_gt(accepted, 40);
}
END_TEST

/* Accepted as given: the combinations the integration test trains. */
START_TEST(test_valid_combinations) {
    static const char *const valid[][16] = {
        {NULL},
        {"attn", "linear"},
        {"attn", "linear", "phi", "identity", "reweight", "cos", "chunk", "16"},
        {"attn", "linear", "phi", "leakyrelu", "leaky_slope", "0.2"},
        {"attn", "linear", "phi", "elu", "objective", "mlm"},
        {"attn", "cosformer"},
        {"attn", "cosformer", "reweight", "cos", "chunk", "8"},
        {"attn", "cosformer", "objective", "mlm"},
        {"attn", "linformer", "objective", "mlm"},
        {"attn", "linformer", "objective", "mlm", "linformer_k", "128", "linformer_proj", "conv", "linformer_share", "layerwise"},
        {"attn", "linformer", "objective", "mlm", "linformer_k", "16", "linformer_proj", "max"},
        {"talking_heads", "both", "objective", "mlm"},
        {"heads", "3", "key_size", "16", "head_size", "8"},
        {"heads", "8", "key_size", "64", "head_size", "4", "attn", "linear"},
        {"key_size", "8", "attn", "linformer", "objective", "mlm"},
        {"objective", "mlm", "sample_length", "50", "pos", "none", "tie_embeddings", "false"},
        {"pos", "sinusoidal"},
        {"pos", "rope", "rope_dims", "16"},
        {"pos", "rope", "attn", "linear", "phi", "elu"},
        {"pos", "rope", "attn", "linformer", "objective", "mlm"},
        {"pos", "rope", "talking_heads", "both"},
        {"pos", "alibi", "objective", "mlm"},
        {"pos", "kerple_power", "window", "32", "logn", "on"},
        {"pos", "kerple_log", "objective", "mlm", "logn", "on"},
        {"pos", "sandwich", "sandwich_lambda", "0.5"},
        {"pos", "xpos", "bca", "on"},
        {"pos", "xpos", "rope_dims", "32"},
        {"pos", "sinusoidal", "attn", "cosformer"},
    };
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        Config c = config_with(valid[i], count_kv(valid[i]));
        char what[256];
        describe(valid[i], what, sizeof what);
        Err e;
        ck_assert_msg(config_validate(&c, &e) == 0, "%s: refused: %s", what[0] ? what : "(defaults)", e.msg);
        ck_assert_int_eq(c.model.vocab, c.model.objective == OBJECTIVE_MLM ? VOCAB_BYTES + 1 : VOCAB_BYTES);
    }
}
END_TEST

/* config.json keeps floats as they were typed, and they come back bit for bit. */
START_TEST(test_floats_as_typed) {
    const char *typed[] = {"2e-3", "0.1", "1e-4", "0.01", "0.00123456789", "9.99999975e-05", "1e-6"};
    const char *shown[] = {"0.002", "0.1", "0.0001", "0.01", "0.0012345678", "0.0001", "1e-06"};
    for (int i = 0; i < 7; i++) {
        Config c, back;
        config_defaults(&c);
        config_defaults(&back);
        Err e;
        ck_assert_msg(option_set(&c, "lr", typed[i], &e) == 0, "%s", e.msg);
        char buf[64];
        ck_assert_str_eq(option_format(&c, option_find("lr"), buf, sizeof buf), shown[i]);
        cJSON *j = config_to_json(&c);
        ck_assert_int_eq(config_from_json(&back, j, &e), 0);
        cJSON_Delete(j);
        ck_assert_int_eq(memcmp(&c.train.lr, &back.train.lr, sizeof c.train.lr), 0);
    }
}
END_TEST

/* The seed is an OPT_INT64: every integer up to 2^53 - 1 (the largest a JSON
 * number keeps exactly) is stored whole, shown, and read back from
 * config.json; one past it is refused. The neighbours of the field keep
 * their values (a store of the wrong width would spill into them). */
START_TEST(test_int64_seed) {
    ck_assert_int_eq(option_find("seed")->type, OPT_INT64);
    const char *seeds[] = {"0", "2147483648", "4294967297", "9007199254740991"};
    for (int i = 0; i < 4; i++) {
        Config c, back;
        config_defaults(&c);
        config_defaults(&back);
        int eval_every = c.train.eval_every;
        Err e;
        ck_assert_msg(option_set(&c, "seed", seeds[i], &e) == 0, "%s", e.msg);
        ck_assert_int_eq(c.train.seed, strtoll(seeds[i], NULL, 10));
        ck_assert_int_eq(c.train.eval_every, eval_every);
        char buf[64];
        ck_assert_str_eq(option_format(&c, option_find("seed"), buf, sizeof buf), seeds[i]);
        cJSON *j = config_to_json(&c);
        ck_assert_int_eq(config_from_json(&back, j, &e), 0);
        cJSON_Delete(j);
        ck_assert_int_eq(back.train.seed, c.train.seed);
    }
    Config c;
    config_defaults(&c);
    Err e;
    ck_assert_int_eq(option_set(&c, "seed", "9007199254740992", &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "expected an integer in [0, 9007199254740991]"));
    ck_assert_int_eq(option_set(&c, "seed", "1.5", &e), -1);
}
END_TEST

/* --help prints the groups asked for, by name, and every row of each. */
START_TEST(test_help_groups) {
    char *text;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    options_print_help(f, HELP_TRAIN | HELP_SAMPLE);
    fclose(f);
    ck_assert_ptr_null(strstr(text, "model options:"));
    ck_assert_ptr_nonnull(strstr(text, "training options:"));
    ck_assert_ptr_nonnull(strstr(text, "sampling options:"));
    ck_assert_ptr_nonnull(strstr(text, "--seed "));
    ck_assert_ptr_null(strstr(text, "--heads "));
    free(text);
    f = open_memstream(&text, &len);
    options_print_help_without(f, HELP_ALL, "out");
    fclose(f);
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "\n  --")); p++) lines++;
    ck_assert_int_eq(lines, option_count() - 1);
    free(text);
}
END_TEST

/* An option given on the command line that the model does not use is
 * refused even at its default value; the same value from a default or a
 * loaded config is not "given". */
START_TEST(test_given_at_default_refused) {
    Config c;
    Err e;
    config_defaults(&c);
    ck_assert_int_eq(option_set(&c, "phi", "relu", &e), 0); /* relu is the default */
    ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(option_give(&c, "phi", "relu", &e), 0);
    ck_assert_int_ne(config_validate(&c, &e), 0);
    ck_assert_msg(strstr(e.msg, "--phi applies to linear attention, not attn=softmax"), "%s", e.msg);
    option_forget(&c, "phi");
    ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
    /* a kernel's own rule, and a position scheme's option, alike */
    config_defaults(&c);
    ck_assert_int_eq(option_give(&c, "attn", "linear", &e), 0);
    ck_assert_int_eq(option_give(&c, "leaky_slope", "0.01", &e), 0);
    ck_assert_int_ne(config_validate(&c, &e), 0);
    ck_assert_msg(strstr(e.msg, "--leaky_slope applies to phi=leakyrelu"), "%s", e.msg);
    config_defaults(&c);
    ck_assert_int_eq(option_give(&c, "rope_dims", "0", &e), 0);
    ck_assert_int_ne(config_validate(&c, &e), 0);
    ck_assert_msg(strstr(e.msg, "--rope_dims applies to pos=rope or xpos"), "%s", e.msg);
    /* a preset's own value may be given */
    config_defaults(&c);
    ck_assert_int_eq(option_give(&c, "attn", "cosformer", &e), 0);
    ck_assert_int_eq(option_give(&c, "phi", "relu", &e), 0);
    ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
}
END_TEST

/* --linformer_k per layer: "64,32" parses, prints and goes through
 * config.json; one value stays a number there (as older checkpoints have
 * it); bad lists and impossible ones are refused. */
START_TEST(test_per_layer_k) {
    Config c, back;
    Err e;
    config_defaults(&c);
    char buf[320];
    ck_assert_str_eq(option_format(&c, option_find("linformer_k"), buf, sizeof buf), "64");
    cJSON *j = config_to_json(&c);
    char *text = cJSON_PrintUnformatted(j);
    ck_assert_msg(strstr(text, "\"linformer_k\":64,"), "%s", text);
    free(text);
    cJSON_Delete(j);
    ck_assert_int_eq(option_set(&c, "linformer_k", "8,4", &e), 0);
    ck_assert_str_eq(option_format(&c, option_find("linformer_k"), buf, sizeof buf), "8,4");
    j = config_to_json(&c);
    text = cJSON_PrintUnformatted(j);
    ck_assert_msg(strstr(text, "\"linformer_k\":\"8,4\""), "%s", text);
    cJSON_Delete(j);
    j = cJSON_Parse(text);
    free(text);
    config_defaults(&back);
    ck_assert_msg(config_from_json(&back, j, &e) == 0, "%s", e.msg);
    cJSON_Delete(j);
    ck_assert_int_eq(lf_k(linformer_opts(&back.model), 0), 8);
    ck_assert_int_eq(lf_k(linformer_opts(&back.model), 3), 4);
    /* a shorter list after a longer one leaves no stale values */
    ck_assert_int_eq(option_set(&c, "linformer_k", "16", &e), 0);
    ck_assert_int_eq(lf_k(linformer_opts(&c.model), 1), 16);
    const char *bad[] = {"8,", ",8", "8,,4", "8;4", "0", "8,x", "70000"};
    for (int i = 0; i < 7; i++) {
        ck_assert_msg(option_set(&c, "linformer_k", bad[i], &e) != 0, "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(e.msg, "comma-separated integers"), "%s", e.msg);
        ck_assert_int_eq(lf_k(linformer_opts(&c.model), 0), 16); /* untouched */
    }
    /* validation: more values than layers; a value too long for the context; layerwise sharing */
    const char *const refused[][10] = {
        {"attn", "linformer", "objective", "mlm", "layers", "2", "linformer_k", "8,4,2", NULL},
        {"attn", "linformer", "objective", "mlm", "layers", "2", "context", "64", "linformer_k", "32,128"},
        {"attn", "linformer", "objective", "mlm", "linformer_k", "32,16", "linformer_share", "layerwise", NULL},
    };
    const char *why[] = {"--linformer_k: 3 values for 2 layers", "--linformer_k 128 is longer than --context 64",
                         "one --linformer_k, not 2"};
    for (int r = 0; r < 3; r++) {
        config_defaults(&c);
        for (int i = 0; i < 10 && refused[r][i]; i += 2)
            ck_assert_msg(option_set(&c, refused[r][i], refused[r][i + 1], &e) == 0, "%s", e.msg);
        ck_assert_int_ne(config_validate(&c, &e), 0);
        ck_assert_msg(strstr(e.msg, why[r]), "%s", e.msg);
    }
    config_defaults(&c);
    const char *ok[] = {"attn", "linformer", "objective", "mlm", "layers", "4", "linformer_k", "64,32"};
    for (int i = 0; i < 8; i += 2) ck_assert_int_eq(option_set(&c, ok[i], ok[i + 1], &e), 0);
    ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
}
END_TEST

/* A run folder's default name: the attn value, then the options that differ
 * from their defaults and change what is computed, in table order. */
START_TEST(test_run_name) {
    Config c;
    char name[128];
    config_defaults(&c);
    config_run_name(&c, name, sizeof name);
    ck_assert_str_eq(name, "softmax");
    /* bookkeeping options (threads, logging, sampling) do not name a run */
    ck_assert_int_eq(option_set(&c, "threads", "1", NULL), 0);
    ck_assert_int_eq(option_set(&c, "sample_length", "10", NULL), 0);
    ck_assert_int_eq(option_set(&c, "steps", "2000", NULL), 0);
    ck_assert_int_eq(option_set(&c, "pos", "rope", NULL), 0);
    config_run_name(&c, name, sizeof name);
    ck_assert_str_eq(name, "softmax_pos-rope_steps-2000");
    /* a preset is its attn value alone; a list is folder-safe */
    config_defaults(&c);
    ck_assert_int_eq(option_set(&c, "attn", "cosformer", NULL), 0);
    config_run_name(&c, name, sizeof name);
    ck_assert_str_eq(name, "cosformer");
    config_defaults(&c);
    ck_assert_int_eq(option_set(&c, "attn", "linformer", NULL), 0);
    ck_assert_int_eq(option_set(&c, "linformer_k", "32,16", NULL), 0);
    config_run_name(&c, name, sizeof name);
    ck_assert_str_eq(name, "linformer_linformer_k-32+16");
    /* too many to name: cut at a whole field, and said so */
    config_defaults(&c);
    static const char *const many[][2] = {{"layers", "2"}, {"d_model", "64"}, {"heads", "8"}, {"context", "64"},
                                          {"batch", "3"}, {"steps", "7"}, {"lr", "0.005"}, {"warmup", "1"},
                                          {"weight_decay", "0.2"}, {"clip", "0.5"}, {"seed", "9"}};
    for (size_t k = 0; k < sizeof many / sizeof *many; k++) ck_assert_int_eq(option_set(&c, many[k][0], many[k][1], NULL), 0);
    config_run_name(&c, name, sizeof name);
    size_t n = strlen(name);
    ck_assert_msg(n <= 100 && n > 4 && !strcmp(name + n - 4, "_etc"), "%s", name);
    ck_assert_msg(!strncmp(name, "softmax_layers-2_d_model-64_heads-8_", 36), "%s", name);
    for (const char *p = name; *p; p++) ck_assert_msg(isalnum((unsigned char)*p) || strchr("-._+", *p), "%s", name);
}
END_TEST

Suite *options_suite(void) {
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("config_validate");
    tcase_add_loop_test(tc, test_refusals, 0, N_REFUSALS);
    tcase_add_test(tc, test_attention_grid);
    tcase_add_test(tc, test_linformer_grid);
    tcase_add_test(tc, test_position_grid);
    tcase_add_test(tc, test_valid_combinations);
    tcase_add_test(tc, test_floats_as_typed);
    tcase_add_test(tc, test_int64_seed);
    tcase_add_test(tc, test_help_groups);
    tcase_add_test(tc, test_given_at_default_refused);
    tcase_add_test(tc, test_per_layer_k);
    tcase_add_test(tc, test_run_name);
    suite_add_tcase(s, tc);
    return s;
}
