/* attention/kernel.h: what an attention kernel is, and the list of them.
 *
 * A kernel turns per-head q, k, v into per-head outputs (a kernel with
 * forward_qkv takes them as one fused projection gives them). It sees the
 * core (tensors, ops, parameter sets) and this contract; the module that owns
 * the projections around it and calls it, layers/attention.h, stands above
 * and is never included by a kernel. Adding a kernel is one file in
 * layers/attention/ and one line in ATTN_KERNEL_LIST (layers/attention/kernels.c);
 * the built-in kernels' own options are in their own headers (softmax.h,
 * linear.h, linformer.h). */
#ifndef ATTNLAB_ATTENTION_KERNEL_H
#define ATTNLAB_ATTENTION_KERNEL_H

#include "config.h"
#include "option.h"
#include "params.h"
#include "rng.h"
#include "tape.h"
#include "util.h"

/* A kernel's options struct lives inside ModelConfig.kernel_options, bytes
 * the registry hands out, so its type must be allowed to alias them: declare
 * it `typedef struct ATTN_OPTS { ... } MyOpts;`. */
#define ATTN_OPTS __attribute__((may_alias))

/* Counters kernels may add to during forward, read by the trainer per step
 * (e.g. how many linear-attention denominators hit the clamp); defined with
 * the registry (layers/attention/kernels.c). */
typedef struct {
    long den_clamped, den_rows;
} AttnStats;

/* The process-wide counters; attn_stats_reset() zeroes them. */
extern AttnStats attn_stats;
void attn_stats_reset(void);

#define ATTN_MAX_PARAMS 4

/* What a kernel is told about the call. The module makes it once per layer
 * (attn_call) and fills in B, T and the kernel's parameters. */
typedef struct {
    int B, H, T;
    int key_size, head_size;
    bool causal;  /* query i sees keys j <= i */
    int layer;    /* the layer's index, 0 first */
    float scale;  /* logits are scale * q.k; 1 / sqrt(key_size) */
    /* the kernel's parameters for this layer, as its declare() made them */
    Tensor *params[ATTN_MAX_PARAMS];
    /* The layer's config, its attn value's preset applied (attn_effective):
     * the position options (cfg->pos, cfg->window, ...) with
     * layers/attention/positions.h. */
    const ModelConfig *cfg;
    /* The kernel's own options struct inside *cfg (the struct its
     * option_rows describe), found once when the layer is built. */
    const void *opts;
    /* Query rows per block of a kernel that works in blocks of queries (the
     * score-map op): 0 is the kernel's own choice; tests lower it so that a
     * short sequence spans several blocks. */
    int query_block;
} AttnCall;

/* A preset of a kernel: another value of the `attn` option that runs the
 * kernel with some of its options fixed (cosformer: linear attention with
 * phi = relu and reweight = cos). */
typedef struct {
    const char *name;
    void (*apply)(ModelConfig *m);  /* sets the options it fixes... */
    const char *const *fixes;       /* ...named here, NULL-terminated: setting one otherwise is refused */
} AttnPreset;

typedef struct {
    const char *name;

    /* ---- Running it: what the module calls. The hooks get a layer's place
     * and config, never the module. ---- */
    /* Declares the kernel's own parameters of layer `layer` (NULL when it has
     * none) into params[0 .. ATTN_MAX_PARAMS), named under `prefix` (e.g.
     * "blocks.0.attn") so that they match a PyTorch module's state_dict; c has
     * its preset applied (attn_effective). The module hands them to every call
     * in AttnCall.params. */
    void (*declare)(ParamSet *p, const char *prefix, int layer, const ModelConfig *c, Tensor **params);
    /* Draws the kernel's own parameters of layer `layer` (params as declare
     * made them; c as declare got it) after model_init_weights' generic rule
     * has filled them (NULL: that rule stands). */
    void (*init)(Tensor **params, int layer, const ModelConfig *c, Rng *rng);
    /* q, k [B, H, T, key_size], v [B, H, T, head_size] -> [B, H, T, head_size] */
    Tensor *(*forward)(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v);
    /* Optional: q, k, v as one fused projection makes them, side by side in
     * qkv [B, T, H key_size | H key_size | H head_size] (head h of q in
     * columns [h dk, (h + 1) dk), and so on), -> [B, T, H head_size], the
     * gradient going to qkv in the same layout. When it is set the module
     * runs q, k and v as one product and calls this, without splitting and
     * merging the heads; such a kernel must be rope_inside. probs still gets
     * [B, H, T, d]. */
    Tensor *(*forward_qkv)(const AttnCall *c, Tensor *qkv);
    /* The attention matrix P [B, H, T, T] for the same q, k, with gradients
     * off (for ./spectrum): the kernel's output is P v. Linformer's is
     * [B, H, T, k'] and its output P (F v). */
    Tensor *(*probs)(const AttnCall *c, Tensor *q, Tensor *k);
    /* The kernel's fused ops, so the tests can find and check them
     * (NULL-terminated; empty when the kernel is made of primitive ops). */
    OpDef *ops[4];
    /* The kernel has no causal form (Linformer mixes positions): the model
     * refuses it under a causal objective and the tests ask for no causal
     * case. */
    bool bidirectional_only;
    /* The kernel applies pos = rope itself (linear kernels rotate the
     * features after phi); otherwise the module rotates q and k before the
     * kernel. */
    bool rope_inside;
    /* Whether this call reads q, k and v through bf16 products alone
     * (forward and backward), so that under precision bf16 the module may
     * hand them over stored in bf16 (tensor.h): half their memory, and no
     * rounding of them at each product; the kernel's ops then declare them
     * in OpDef.in16. A kernel that reads them elementwise (feature maps,
     * pooling, head mixing) sets attn_qkv_fp32 and gets fp32; q and k
     * rotated by the module (pos = rope, xpos) are fp32 whatever it says.
     * Every kernel sets it: a NULL one fails the registry's test, and the
     * module refuses it. */
    bool (*qkv16)(const AttnCall *c);

    /* ---- Planning and the command line: what the rest of the program asks
     * of a kernel, so that nothing outside this folder names one. ---- */
    /* How errors name it: "linear attention", "attn=softmax". */
    const char *title;
    /* Its options: the option-table rows only this kernel reads, declared in
     * its file (ended by a row with a NULL name; NULL: none): --help lists
     * them, and giving one with another kernel is refused. The values live in
     * a struct of the kernel's own, options_size bytes, declared ATTN_OPTS,
     * which the registry places in ModelConfig.kernel_options; a row's offset
     * is into that struct (offsetof(MyOpts, power)). A call finds it in
     * AttnCall.opts; declare, init and the hooks here with
     * attn_options(c, &my_kernel). */
    const OptDef *option_rows;
    size_t options_size;
    /* Its presets, each another value of the attn option (NULL-terminated
     * by a NULL name; NULL: none). */
    const AttnPreset *presets;
    /* Refuses this kernel's combinations that cannot work, with the reason:
     * 0, or -1 with e set; m has its preset applied (attn_effective).
     * `changed(name, ctx)` says whether an option was set away from its
     * default. NULL: every combination works. */
    int (*validate)(const ModelConfig *m, bool (*changed)(const char *name, const void *ctx), const void *ctx,
                    Err *e);
    /* The kernel's options in a few words, for labels (" phi=relu"); NULL:
     * nothing beyond its name. */
    void (*describe)(const ModelConfig *m, char *buf, size_t size);
    /* Whether a length T other than the training context works (Linformer's
     * pooling needs multiples of its stride): 0, or -1 with e set. NULL: any. */
    int (*check_length)(const ModelConfig *m, int T, Err *e);
    /* The floating-point operations (2 per multiply-add) of the kernel's
     * products, forward and backward, at B 1 over length T, as its algorithm
     * needs them: ./bench --scaling sets the layer's time against what they
     * and the projections would take at sgemm's rate; m has its preset
     * applied (attn_effective). NULL, or NAN for some options: not counted. */
    double (*flops)(const ModelConfig *m, int T);
    /* Bytes of the kernel's memory that grow faster than T at B 1, for a
     * length cap (./bench --scaling); NULL: none. */
    double (*quadratic_bytes)(const ModelConfig *m, int T, int threads);
    /* The kernel forms an explicit score matrix: score biases (pos = alibi,
     * kerple_*, sandwich, xpos) and the score masks (window, logn, bca) need it. */
    bool scores;
    /* probs is not T x T (Linformer's is T x k), so it has no eigenvalues. */
    bool projected_probs;
} AttnKernel;

/* AttnKernel.qkv16 of a kernel that reads q, k, v as floats: false. */
bool attn_qkv_fp32(const AttnCall *c);

/* Every kernel once (layers/attention/kernels.c: the built-in ones, then any
 * added with attn_register); the tests walk this list. */
#define ATTN_MAX_KERNELS 32
extern const AttnKernel *attn_kernels[ATTN_MAX_KERNELS];
/* How many there are. */
int attn_kernel_count(void);
/* Adds a kernel after the built-in ones (a kernel of one's own, or of a
 * test), with its presets; its name must be new. */
void attn_register(const AttnKernel *k);
/* Takes k off the list again (it must be the last one added). */
void attn_unregister(const AttnKernel *k);

/* A value of the `attn` option: a kernel, or one of its presets. The stored
 * config holds the index of the value; checkpoints and config.json hold the
 * name. The values are each kernel's name followed by its presets' names, in
 * the order of attn_kernels. */
typedef struct {
    const char *name;
    const AttnKernel *kernel;
    void (*preset)(ModelConfig *m); /* NULL for the kernel itself */
    const char *const *fixes;
} AttnChoice;

/* The kernel whose option_rows declare option `name`, or NULL. */
const AttnKernel *attn_option_owner(const char *name);
/* Kernel k's rows (attn_kernels[k]) with their offsets into ModelConfig. */
const OptDef *attn_kernel_rows(int k);
/* Kernel kern's options struct in m (inside m, so const only as m is): a
 * search of the registry, for building a layer and for the planning hooks. */
void *attn_options(const ModelConfig *m, const AttnKernel *kern);
/* The call of kernel kern on layer `layer` of config c (its preset applied,
 * attn_effective; c must outlive the call): sizes, causality (objective),
 * scale and c's options resolved once; B, T and params are the caller's. */
AttnCall attn_call(const AttnKernel *kern, const ModelConfig *c, int layer);
/* The value of kernel kern's option `name` in m (an OPT_INT or OPT_CHOICE
 * row, or an OPT_FLOAT one); aborts when kern declares no such row. */
int attn_option_int(const ModelConfig *m, const AttnKernel *kern, const char *name);
float attn_option_float(const ModelConfig *m, const AttnKernel *kern, const char *name);

/* How many values there are, and value `attn` (aborts out of range: a
 * programming error). */
int attn_choice_count(void);
const AttnChoice *attn_choice(int attn);
/* The names, NULL-terminated, for the option table. */
const char *const *attn_choice_names(void);
/* The index of the named value, or -1. */
int attn_find(const char *name);
/* The kernel that value `attn` runs. */
const AttnKernel *attn_kernel_for(int attn);
/* m with its attn value's preset applied. */
ModelConfig attn_effective(const ModelConfig *m);

/* The attn value that ./bench --scaling measures beside the default kernel,
 * and experiments/bench/torch_scaling.py mirrors in PyTorch: causal, linear in time
 * and memory. */
extern const char *const attn_scaling_reference;

#endif
