/* attention/linformer.h: the Linformer kernel (attn=linformer): its options,
 * for its file (linformer.c) and the tests. */
#ifndef ATTNLAB_ATTENTION_LINFORMER_H
#define ATTNLAB_ATTENTION_LINFORMER_H

#include "attention/kernel.h"

/* Its option rows' choices, in order. */
typedef enum { LF_SHARE_NONE, LF_SHARE_HEADWISE, LF_SHARE_KV, LF_SHARE_LAYERWISE } LinformerShare;
typedef enum { LF_PROJ_LINEAR, LF_PROJ_MEAN, LF_PROJ_MAX, LF_PROJ_CONV } LinformerProj;

/* Its options struct (option_rows' offsets are into it). */
#define LF_MAX_LAYERS 64
typedef struct ATTN_OPTS {
    int linformer_k[LF_MAX_LAYERS]; /* the projected length per layer (lf_k), 0 past the list */
    int linformer_share; /* LinformerShare */
    int linformer_proj;  /* LinformerProj */
} LinformerOpts;

extern const AttnKernel attn_kernel_linformer;

/* The kernel's options in m (a registry look-up: a kernel's forward reads
 * AttnCall.opts instead). */
static inline LinformerOpts *linformer_opts(const ModelConfig *m) { return attn_options(m, &attn_kernel_linformer); }

/* Linformer's k of layer `layer`: its entry of the list, or the list's last. */
static inline int lf_k(const LinformerOpts *o, int layer) {
    int k = o->linformer_k[0];
    for (int i = 1; i <= layer && i < LF_MAX_LAYERS && o->linformer_k[i]; i++) k = o->linformer_k[i];
    return k;
}

#endif
