/* kernels.c: the attention kernels. A new kernel is one file beside this one,
 * its line in attn_kernels and in attn_kernel_for, and its name in the `attn`
 * option's choices (experiments/options.c). */
#include "attention.h"
#include "util.h"

extern const AttnKernel attn_kernel_softmax;
extern const AttnKernel attn_kernel_linformer;
extern const AttnKernel attn_kernel_linear;

/* Every kernel once; the tests walk this list. */
const AttnKernel *const attn_kernels[] = {
    &attn_kernel_softmax,
    &attn_kernel_linformer,
    &attn_kernel_linear,
};
const int n_attn_kernels = (int)(sizeof attn_kernels / sizeof attn_kernels[0]);

const AttnKernel *attn_kernel_for(int attn) {
    switch (attn) {
        case ATTN_SOFTMAX: return &attn_kernel_softmax;
        case ATTN_LINFORMER: return &attn_kernel_linformer;
        case ATTN_LINEAR:
        case ATTN_COSFORMER: return &attn_kernel_linear;
        default: DIE("attention kind %d has no kernel", attn);
    }
}
