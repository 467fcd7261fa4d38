/* config.h: what a model is made of. The option table (experiments/run/options.c)
 * fills this struct from the command line and from checkpoints; layers only
 * read it. */
#ifndef ATTNLAB_CONFIG_H
#define ATTNLAB_CONFIG_H

#include <stdbool.h>

/* Enum values are indices into the option table's choice lists (the attn
 * option's are the kernel registry's, layers/attention/kernel.h). */
typedef enum { OFF, ON } OnOff;
typedef enum { NORM_LAYERNORM, NORM_RMSNORM } NormKind;
typedef enum { OBJECTIVE_CLM, OBJECTIVE_MLM } Objective;

/* The byte vocabulary, and the extra input id that marks a masked position
 * under objective = mlm (the vocabulary is then 257). */
#define VOCAB_BYTES 256
#define MASK_ID 256

/* Room for every kernel's options struct (the registry checks it). */
#define MODEL_KERNEL_OPTION_BYTES 512

typedef struct {
    int vocab;        /* 256 bytes (plus a mask id under MLM) */
    int layers;
    int d_model;
    int heads;
    int key_size;     /* per head, for q and k; 0 = d_model / heads */
    int head_size;    /* per head, for v and the output; 0 = d_model / heads */
    int mlp_ratio;    /* hidden width of the MLP = mlp_ratio * d_model */
    int context;      /* training length T */
    int norm;         /* NormKind */
    bool tie_embeddings;
    int attn;         /* index of the attn value (attn_choice, layers/attention/kernel.h) */
    int pos;          /* index of the pos value (pos_scheme, layers/attention/positions.h) */
    int rope_dims;    /* pos = rope | xpos: rotated dimensions of q and k; 0 = key_size */
    float sandwich_lambda; /* pos = sandwich: the bias scale lambda */
    int window;       /* 0 = full; otherwise each query sees keys at distance < window (causal: the last window) */
    int logn;         /* OnOff: logits scaled by max(1, log n_i / log context) */
    int bca;          /* OnOff: xpos's blockwise causal attention (inference only) */
    int objective;    /* Objective */
    /* The attention kernels' own options (AttnKernel.option_rows): each
     * kernel keeps its options in a struct of its own, at the place of this
     * block the registry gives it (attn_options, layers/attention/kernel.h). */
    _Alignas(8) unsigned char kernel_options[MODEL_KERNEL_OPTION_BYTES];
} ModelConfig;

/* key_size / head_size with the 0 = d_model / heads default applied. */
int model_key_size(const ModelConfig *c);
int model_head_size(const ModelConfig *c);

#endif
