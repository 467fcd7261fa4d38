/* precision.c: --precision for training and for the commands that evaluate. */
#include "precision.h"

#include <stdio.h>

const char *const precision_choices[] = {"fp32", "bf16", NULL};

int precision_begin(int precision, const ParamSet *p, bool strict, Err *e) {
    precision_end();
    if (precision != PRECISION_BF16) return 0;
    Err why = {0};
    if (gemm_bf16_check(&why) != 0) {
        if (strict) return *e = why, -1;
        fprintf(stderr, "note: the model trained with precision=bf16 runs in fp32 here (%s)\n", why.msg);
        return 0;
    }
    gemm_set_precision(PRECISION_BF16);
    gemm_bind_weights(p->value, p->total);
    return 0;
}

void precision_end(void) {
    gemm_bind_weights(NULL, 0);
    gemm_set_precision(PRECISION_FP32);
}
