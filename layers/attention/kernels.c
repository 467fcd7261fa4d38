/* kernels.c: the registry of attention kernels: the list (a new kernel is
 * one file beside this one and its line in attn_kernels, or an attn_register
 * call; its presets and options come with it), the attn values, where each
 * kernel's options live in a ModelConfig, the call a layer makes of its
 * kernel (attn_call), and the counters kernels add to (attn_stats). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "attention/kernels.h"
#include "util.h"

AttnStats attn_stats;

void attn_stats_reset(void) { memset(&attn_stats, 0, sizeof attn_stats); }

bool attn_qkv_fp32(const AttnCall *c) {
    (void)c;
    return false;
}

/* Every kernel once, one line each, in the order --help lists them; the
 * first is the default. A kernel's line both declares it and lists it; each
 * ends in a backslash, the list in the line after the last. */
#define ATTN_KERNEL_LIST(X)  \
    X(attn_kernel_softmax)   \
    X(attn_kernel_linear)    \
    X(attn_kernel_linformer) \
    X(attn_kernel_sigmoid)   \
    /* the end of the list */

#define ATTN_DECLARE(k) extern const AttnKernel k;
ATTN_KERNEL_LIST(ATTN_DECLARE)
#define ATTN_ENTRY(k) &k,
const AttnKernel *attn_kernels[ATTN_MAX_KERNELS] = {ATTN_KERNEL_LIST(ATTN_ENTRY)};
const char *const attn_scaling_reference = "cosformer";

static int n_attn_kernels = -1; /* counted when first asked for */

int attn_kernel_count(void) {
    if (n_attn_kernels < 0)
        for (n_attn_kernels = 0; n_attn_kernels < ATTN_MAX_KERNELS && attn_kernels[n_attn_kernels];) n_attn_kernels++;
    return n_attn_kernels;
}

/* Each kernel's rows with their offsets into ModelConfig, and where its
 * options struct starts in ModelConfig.kernel_options; made with the attn
 * values. */
enum { MAX_ROWS = 8 };
static OptDef rows[ATTN_MAX_KERNELS][MAX_ROWS + 1];
static size_t options_at[ATTN_MAX_KERNELS];

/* The attn values, made from attn_kernels when first asked for. */
static AttnChoice choices[2 * ATTN_MAX_KERNELS];
static const char *names[2 * ATTN_MAX_KERNELS + 1];
static int n_choices = -1;

static void build_choices(void) {
    if (n_choices >= 0) return;
    n_choices = 0;
    for (int k = 0; k < attn_kernel_count(); k++) {
        const AttnKernel *kern = attn_kernels[k];
        choices[n_choices++] = (AttnChoice){kern->name, kern, NULL, NULL};
        for (const AttnPreset *p = kern->presets; p && p->name; p++) {
            if (n_choices == 2 * ATTN_MAX_KERNELS) DIE("attention kernels: more than %d attn values", n_choices);
            choices[n_choices++] = (AttnChoice){p->name, kern, p->apply, p->fixes};
        }
    }
    /* each kernel's options struct at its place in ModelConfig.kernel_options, 8-byte aligned */
    size_t at = 0;
    for (int k = 0; k < attn_kernel_count(); k++) {
        const AttnKernel *kern = attn_kernels[k];
        options_at[k] = at;
        at += (kern->options_size + 7) / 8 * 8;
        if (at > MODEL_KERNEL_OPTION_BYTES)
            DIE("attention kernels: their options take more than the %d bytes of ModelConfig.kernel_options",
                MODEL_KERNEL_OPTION_BYTES);
        int n = 0;
        for (const OptDef *r = kern->option_rows; r && r->name; r++) {
            if (n == MAX_ROWS) DIE("attention kernel %s: more than %d options", kern->name, MAX_ROWS);
            if (r->type == OPT_STRING) DIE("attention kernel %s: option %s: text options are not kept", kern->name, r->name);
            size_t width = r->type == OPT_FLOAT  ? sizeof(float)
                           : r->type == OPT_BOOL ? sizeof(bool)
                           : r->type == OPT_INTS ? r->size * sizeof(int)
                           : r->type == OPT_INT64 ? sizeof(int64_t)
                                                 : sizeof(int);
            if (r->offset + width > kern->options_size)
                DIE("attention kernel %s: option %s lies outside its %zu bytes of options", kern->name, r->name,
                    kern->options_size);
            rows[k][n] = *r;
            rows[k][n++].offset = offsetof(ModelConfig, kernel_options) + options_at[k] + r->offset;
        }
        rows[k][n] = (OptDef){0};
    }
    for (int i = 0; i < n_choices; i++) {
        for (int j = 0; j < i; j++)
            if (!strcmp(choices[i].name, choices[j].name)) DIE("attention kernels: attn=%s twice", choices[i].name);
        names[i] = choices[i].name;
    }
    names[n_choices] = NULL;
}

void attn_register(const AttnKernel *k) {
    if (attn_kernel_count() == ATTN_MAX_KERNELS) DIE("attn_register: more than %d kernels", ATTN_MAX_KERNELS);
    attn_kernels[n_attn_kernels++] = k;
    n_choices = -1; /* made again when next asked for */
}

void attn_unregister(const AttnKernel *k) {
    int n = attn_kernel_count();
    if (!n || attn_kernels[n - 1] != k) DIE("attn_unregister: %s is not the last kernel added", k->name);
    attn_kernels[--n_attn_kernels] = NULL;
    n_choices = -1;
}

const OptDef *attn_kernel_rows(int k) {
    build_choices();
    if (k < 0 || k >= attn_kernel_count()) DIE("attn_kernel_rows(%d): there are %d kernels", k, attn_kernel_count());
    return rows[k];
}

const AttnKernel *attn_option_owner(const char *name) {
    for (int k = 0; k < attn_kernel_count(); k++)
        for (const OptDef *r = attn_kernels[k]->option_rows; r && r->name; r++)
            if (!strcmp(r->name, name)) return attn_kernels[k];
    return NULL;
}

static int kernel_index(const AttnKernel *kern) {
    build_choices();
    for (int k = 0; k < attn_kernel_count(); k++)
        if (attn_kernels[k] == kern) return k;
    DIE("attention kernel %s is not registered", kern->name);
}

void *attn_options(const ModelConfig *m, const AttnKernel *kern) {
    return (unsigned char *)m->kernel_options + options_at[kernel_index(kern)];
}

AttnCall attn_call(const AttnKernel *kern, const ModelConfig *c, int layer) {
    int key_size = model_key_size(c);
    return (AttnCall){
        .H = c->heads,
        .key_size = key_size,
        .head_size = model_head_size(c),
        .causal = c->objective == OBJECTIVE_CLM,
        .layer = layer,
        .scale = 1.0f / sqrtf((float)key_size),
        .cfg = c,
        .opts = attn_options(c, kern),
    };
}

static const OptDef *row_of(const AttnKernel *kern, const char *name) {
    for (const OptDef *r = rows[kernel_index(kern)]; r->name; r++)
        if (!strcmp(r->name, name)) return r;
    DIE("attention kernel %s has no option %s", kern->name, name);
}

int attn_option_int(const ModelConfig *m, const AttnKernel *kern, const char *name) {
    int v;
    memcpy(&v, (const char *)m + row_of(kern, name)->offset, sizeof v);
    return v;
}

float attn_option_float(const ModelConfig *m, const AttnKernel *kern, const char *name) {
    float v;
    memcpy(&v, (const char *)m + row_of(kern, name)->offset, sizeof v);
    return v;
}

int attn_choice_count(void) {
    build_choices();
    return n_choices;
}

const AttnChoice *attn_choice(int attn) {
    build_choices();
    if (attn < 0 || attn >= n_choices) DIE("attn value %d: there are %d", attn, n_choices);
    return &choices[attn];
}

const char *const *attn_choice_names(void) {
    build_choices();
    return names;
}

int attn_find(const char *name) {
    build_choices();
    for (int i = 0; i < n_choices; i++)
        if (strcmp(choices[i].name, name) == 0) return i;
    return -1;
}

const AttnKernel *attn_kernel_for(int attn) { return attn_choice(attn)->kernel; }

ModelConfig attn_effective(const ModelConfig *m) {
    ModelConfig e = *m;
    const AttnChoice *c = attn_choice(m->attn);
    if (c->preset) c->preset(&e);
    return e;
}
