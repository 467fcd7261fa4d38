/* rope.c: placeholder until the RoPE/XPOS op lands. */
#include "attention.h"
#include "util.h"

Tensor *attn_rope(const AttnCall *c, Tensor *x, bool key) {
    (void)c, (void)x, (void)key;
    DIE("pos=rope is not built yet");
}
