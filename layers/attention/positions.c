/* positions.c: the position schemes, the values of the `pos` option. Each
 * scheme's code is in its own file (sinusoidal.c, rope.c, bias.c; learned
 * positions are layers/model.c's table); a new scheme is its file and its
 * line below. */
#include <stddef.h>
#include <stdio.h>

#include "attention/positions.h"
#include "util.h"

#define M(field) offsetof(ModelConfig, field)
static const OptDef rotary_options[] = {
    {.name = "rope_dims",
     .type = OPT_INT,
     .group = GROUP_MODEL,
     .offset = M(rope_dims),
     .def = "0",
     .min = 0,
     .max = 4096,
     .help = "pos=rope|xpos: dimensions of q and k that rotate (even); 0 = all"},
    {.name = NULL},
};
static const OptDef sandwich_options[] = {
    {.name = "sandwich_lambda",
     .type = OPT_FLOAT,
     .group = GROUP_MODEL,
     .offset = M(sandwich_lambda),
     .def = "1",
     .min = 0,
     .max = 1000,
     .help = "pos=sandwich: scale of the p_i . p_j bias"},
    {.name = NULL},
};
#undef M

int rope_validate(const ModelConfig *m, bool scores, Err *e);
int xpos_validate(const ModelConfig *m, bool scores, Err *e);

const PosScheme pos_schemes[] = {
    [POS_NONE] = {.name = "none", .help = "no positions"},
    [POS_LEARNED] = {.name = "learned", .help = "a learned table added to the embeddings", .bounded = true,
                     .table = true},
    [POS_SINUSOIDAL] = {.name = "sinusoidal", .help = "the fixed sin/cos table added to the embeddings",
                        .embed = sinusoidal_add},
    [POS_ROPE] = {.name = "rope", .help = "q and k rotated by position", .rotary = true, .option_rows = rotary_options,
                  .validate = rope_validate},
    [POS_ALIBI] = {.name = "alibi", .help = "-m_h |i - j| added to the scores", .bias = true},
    [POS_KERPLE_POWER] = {.name = "kerple_power", .help = "-a_h |i - j|^p_h, learned", .bias = true},
    [POS_KERPLE_LOG] = {.name = "kerple_log", .help = "-r1_h log(1 + r2_h |i - j|), learned", .bias = true},
    [POS_SANDWICH] = {.name = "sandwich", .help = "lambda p_i . p_j with sinusoidal p", .bias = true,
                      .option_rows = sandwich_options},
    [POS_XPOS] = {.name = "xpos", .help = "RoPE times a decay, causal only", .rotary = true,
                  .option_rows = rotary_options, .validate = xpos_validate},
};
const int n_pos_schemes = (int)(sizeof pos_schemes / sizeof pos_schemes[0]);
/* GPT-2's learned positions */
const int pos_default = POS_LEARNED;

const PosScheme *pos_scheme(int pos) {
    if (pos < 0 || pos >= n_pos_schemes) DIE("pos value %d: there are %d", pos, n_pos_schemes);
    return &pos_schemes[pos];
}

const char *const *pos_scheme_names(void) {
    static const char *names[sizeof pos_schemes / sizeof pos_schemes[0] + 1];
    for (int i = 0; i < n_pos_schemes; i++) names[i] = pos_schemes[i].name;
    return names;
}

const char *pos_name(int pos) { return pos >= 0 && pos < n_pos_schemes ? pos_schemes[pos].name : "?"; }
