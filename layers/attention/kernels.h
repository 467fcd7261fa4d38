/* attention/kernels.h: the built-in kernels of the registry
 * (layers/attention/kernels.c), for the registry and the tests. A new kernel
 * needs nothing here: it is found by name. */
#ifndef ATTNLAB_ATTENTION_KERNELS_H
#define ATTNLAB_ATTENTION_KERNELS_H

#include "attention/kernel.h"
#include "attention/linear.h"
#include "attention/linformer.h"
#include "attention/softmax.h"

/* The built-in attn values' indices, in the order of attn_kernels and their
 * presets; a test holds them to attn_choices. */
enum { ATTN_SOFTMAX, ATTN_LINEAR, ATTN_COSFORMER, ATTN_LINFORMER };

#endif
