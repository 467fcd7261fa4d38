/* params.h: parameters in slabs.
 *
 * A model declares its parameters by name and shape, then params_alloc() makes
 * slabs of the total size: values, gradients, and PARAMS_STATE_SLABS for the
 * optimizer's state (optim/optim.h: each optimizer says how many it uses and
 * names them). Each parameter's Tensor points into the value and gradient
 * slabs at the same offset, and its state lies at that offset too, so the
 * optimizer is one flat loop and a checkpoint is a few writes. */
#ifndef ATTNLAB_PARAMS_H
#define ATTNLAB_PARAMS_H

#include "tensor.h"

/* The most state slabs an optimizer keeps (AdamW: its two moments). */
#define PARAMS_STATE_SLABS 2

typedef struct {
    Tensor **list; /* stb_ds array, in declaration order */
    long *offset;  /* stb_ds array: where each parameter starts in the slabs (set by params_alloc) */
    int *after;    /* stb_ds array: the parameter whose storage this one follows, or -1 */
    long total;    /* elements per slab */
    float *value, *grad;
    float *state[PARAMS_STATE_SLABS]; /* the optimizer's, zeroed by params_alloc */
} ParamSet;

void params_init(ParamSet *p);
/* Declares a parameter. Its data is valid after params_alloc(). Names must be
 * unique (a duplicate is a programming error). */
Tensor *params_add(ParamSet *p, const char *name, int ndim, const int *shape);
/* The same, with the parameter's storage placed right after prev's in the
 * slabs, so that a layer can use several parameters as one block (the q, k
 * and v weights as one [3 d, d] matrix). Declaration order, which is the
 * order initialisation draws in, is unchanged. A parameter can be followed
 * by only one other. */
Tensor *params_add_after(ParamSet *p, const Tensor *prev, const char *name, int ndim, const int *shape);
/* Allocates the slabs, zeroed, and points every parameter into them: in
 * declaration order, each followed by the chain of those declared after it. */
void params_alloc(ParamSet *p);
void params_zero_grad(ParamSet *p);
Tensor *params_find(const ParamSet *p, const char *name);
int params_count(const ParamSet *p);
void params_free(ParamSet *p);

#endif
