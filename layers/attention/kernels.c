/* kernels.c: the attention kernels. A new kernel is one file beside this one,
 * its line in attn_kernels and in attn_kernel_for, and its name in the `attn`
 * option's choices (experiments/options.c). */
#include "attention.h"
#include "util.h"

extern const AttnKernel attn_kernel_softmax;

/* Every kernel once; the tests walk this list. */
const AttnKernel *const attn_kernels[] = {
    &attn_kernel_softmax,
};
const int n_attn_kernels = (int)(sizeof attn_kernels / sizeof attn_kernels[0]);

const AttnKernel *attn_kernel_for(int attn) {
    switch (attn) {
        case ATTN_SOFTMAX: return &attn_kernel_softmax;
        default: DIE("attention kind %d has no kernel", attn);
    }
}
