/* kernels.c: the table of attention kernels, indexed by AttnKind. A new
 * kernel is one file beside this one and one line here (and its name in the
 * `attn` option's choices). */
#include "attention.h"

extern const AttnKernel attn_kernel_softmax;

const AttnKernel *const attn_kernels[] = {
    [ATTN_SOFTMAX] = &attn_kernel_softmax,
};
const int n_attn_kernels = (int)(sizeof attn_kernels / sizeof attn_kernels[0]);
