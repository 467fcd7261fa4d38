/* positions.c: the registry of position schemes, the values of the `pos`
 * option. Each scheme is its own file here (sinusoidal.c, rope.c for rope
 * and xpos, alibi.c, kerple.c for both KERPLE forms, sandwich.c); a new
 * scheme is its file and its line below. `none` and `learned` have no code
 * of their own: learned's table is the model's (layers/model.c). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "attention/positions.h"
#include "layers.h"
#include "util.h"

static const PosScheme pos_scheme_none = {.name = "none", .help = "no positions"};
static const PosScheme pos_scheme_learned = {
    .name = "learned", .help = "a learned table added to the embeddings", .table = true, .bounded = true};

/* Every scheme once, one line each, in the order --help lists them (the
 * index a config holds). A scheme's line both declares it and lists it; each
 * ends in a backslash, the list in the line after the last. */
#define POS_SCHEME_LIST(X)     \
    X(pos_scheme_none)         \
    X(pos_scheme_learned)      \
    X(pos_scheme_sinusoidal)   \
    X(pos_scheme_rope)         \
    X(pos_scheme_alibi)        \
    X(pos_scheme_kerple_power) \
    X(pos_scheme_kerple_log)   \
    X(pos_scheme_sandwich)     \
    X(pos_scheme_xpos)         \
    X(pos_scheme_alibi_log)    \
    /* the end of the list */

#define POS_DECLARE(s) extern const PosScheme s;
POS_SCHEME_LIST(POS_DECLARE)
#define POS_ENTRY(s) &s,
const PosScheme *const pos_schemes[] = {POS_SCHEME_LIST(POS_ENTRY)};
const int n_pos_schemes = (int)(sizeof pos_schemes / sizeof pos_schemes[0]);
/* GPT-2's learned positions */
const char *const pos_default_name = "learned";

const PosScheme *pos_scheme(int pos) {
    if (pos < 0 || pos >= n_pos_schemes) DIE("pos value %d: there are %d", pos, n_pos_schemes);
    return pos_schemes[pos];
}

int pos_find(const char *name) {
    for (int i = 0; i < n_pos_schemes; i++)
        if (!strcmp(pos_schemes[i]->name, name)) return i;
    return -1;
}

const char *const *pos_scheme_names(void) {
    static const char *names[sizeof pos_schemes / sizeof pos_schemes[0] + 1];
    for (int i = 0; i < n_pos_schemes; i++) names[i] = pos_schemes[i]->name;
    return names;
}

const char *pos_name(int pos) { return pos >= 0 && pos < n_pos_schemes ? pos_schemes[pos]->name : "?"; }

int pos_param_count(int pos) {
    const PosScheme *s = pos_scheme(pos);
    int n = 0;
    while (s->params && s->params[n]) n++;
    if (n > POS_MAX_PARAMS) DIE("pos=%s: %d parameters, at most %d", s->name, n, POS_MAX_PARAMS);
    if (n && (!s->bias || !s->param_grads || !s->param_init)) DIE("pos=%s: learned parameters need its bias, param_grads and param_init", s->name);
    return n;
}

void pos_params_declare(ParamSet *p, const char *prefix, int pos, int H, Tensor **params) {
    char buf[128];
    for (int i = 0; i < pos_param_count(pos); i++)
        params[i] = params_add(p, param_name(buf, prefix, pos_scheme(pos)->params[i]), 1, (int[]){H});
}
