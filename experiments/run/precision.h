/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* precision.h: the precision a run's matrix products use (--precision).
 *
 * fp32, or bf16: every matrix product's inputs rounded to bfloat16 (round to
 * nearest even) and summed in fp32 (core/gemm.h). The weights, AdamW's state,
 * the gradients, norms, softmax, GELU and the loss stay fp32, so checkpoints
 * are the fp32 master weights whatever the precision. */
#ifndef ATTNLAB_PRECISION_H
#define ATTNLAB_PRECISION_H

#include <stdbool.h>

#include "gemm.h"
#include "params.h"
#include "util.h"

/* The values of the precision option, in its order (PRECISION_FP32, _BF16). */
extern const char *const precision_choices[];

/* Sets the products' precision for a model whose parameters are p (bf16:
 * their bf16 copy is made now; call gemm_weights_changed() whenever they
 * change). On a CPU that cannot run bf16: -1 with e set when strict (a run
 * asked to train so), else a note on stderr and fp32 (a command evaluating a
 * model trained in bf16). */
int precision_begin(int precision, const ParamSet *p, bool strict, Err *e);
/* Back to fp32, the weights unbound. */
void precision_end(void);

#endif
