/* kernels.c: the attention kernels and the values of the `attn` option. A new
 * kernel is one file beside this one and its line in each list below. */
#include <string.h>

#include "attention/kernel.h"
#include "util.h"

extern const AttnKernel attn_kernel_softmax;
extern const AttnKernel attn_kernel_linformer;
extern const AttnKernel attn_kernel_linear;
void attn_linear_cosformer(ModelConfig *m);
extern const char *const attn_linear_cosformer_fixes[];

/* Every kernel once; the tests walk this list. */
const AttnKernel *const attn_kernels[] = {
    &attn_kernel_softmax,
    &attn_kernel_linformer,
    &attn_kernel_linear,
};
const int n_attn_kernels = (int)(sizeof attn_kernels / sizeof attn_kernels[0]);

/* The `attn` option's values, in the order --help lists them. */
const AttnChoice attn_choices[] = {
    {"softmax", &attn_kernel_softmax, NULL, NULL},
    {"linear", &attn_kernel_linear, NULL, NULL},
    {"cosformer", &attn_kernel_linear, attn_linear_cosformer, attn_linear_cosformer_fixes},
    {"linformer", &attn_kernel_linformer, NULL, NULL},
};
const int n_attn_choices = (int)(sizeof attn_choices / sizeof attn_choices[0]);

const char *const *attn_choice_names(void) {
    static const char *names[sizeof attn_choices / sizeof attn_choices[0] + 1];
    for (int i = 0; i < n_attn_choices; i++) names[i] = attn_choices[i].name;
    return names;
}

const AttnChoice *attn_choice(int attn) {
    if (attn < 0 || attn >= n_attn_choices) DIE("attn value %d: there are %d", attn, n_attn_choices);
    return &attn_choices[attn];
}

int attn_find(const char *name) {
    for (int i = 0; i < n_attn_choices; i++)
        if (strcmp(attn_choices[i].name, name) == 0) return i;
    return -1;
}

const AttnKernel *attn_kernel_for(int attn) { return attn_choice(attn)->kernel; }

ModelConfig attn_effective(const ModelConfig *m) {
    ModelConfig e = *m;
    const AttnChoice *c = attn_choice(m->attn);
    if (c->preset) c->preset(&e);
    return e;
}
