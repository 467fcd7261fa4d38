/* op_cases.h: one or more small cases per primitive op. The gradient check
 * (tests/test_ops.c) draws random leaves for them; the PyTorch comparison
 * (tests/test_reference.c) takes its leaves from tests/fixtures/ops.safetensors,
 * made by tests/reference/ops.py, which builds the same cases in PyTorch. */
#ifndef ATTNLAB_OP_CASES_H
#define ATTNLAB_OP_CASES_H

#include "gradcheck.h"

extern const GradCase op_cases[];
extern const int n_op_cases;

/* Integer inputs shared with tests/reference/ops.py. */
#define CASE_VOCAB 7
#define CASE_IGNORE (-1)

#endif
