/* config.h: what a model is made of. The option table (experiments/options.c)
 * fills this struct from the command line and from checkpoints; layers only
 * read it. */
#ifndef ATTNLAB_CONFIG_H
#define ATTNLAB_CONFIG_H

#include <stdbool.h>

/* Enum values are indices into the option table's choice lists. */
typedef enum { ATTN_SOFTMAX } AttnKind;
typedef enum { POS_NONE, POS_LEARNED } PosKind;
typedef enum { NORM_LAYERNORM, NORM_RMSNORM } NormKind;
typedef enum { OBJECTIVE_CLM } Objective;

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
    int attn;         /* AttnKind */
    int pos;          /* PosKind */
    int objective;    /* Objective */
} ModelConfig;

/* key_size / head_size with the 0 = d_model / heads default applied. */
int model_key_size(const ModelConfig *c);
int model_head_size(const ModelConfig *c);

#endif
