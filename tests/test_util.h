/* test_util.h: helpers the test files share. */
#ifndef ATTNLAB_TEST_UTIL_H
#define ATTNLAB_TEST_UTIL_H

#include <stdbool.h>

#include "ops.h"

/* Ways to break a backward, to prove that a check catches them. */
typedef enum {
    MUTATION_SCALE, /* every gradient the op passes back is 10% too large */
    MUTATION_DROP,  /* the op passes nothing back */
    MUTATION_COUNT
} Mutation;

void mutation_install(int op, Mutation m);
void mutation_remove(int op);
const char *mutation_name(Mutation m);
/* The same for a fused kernel's op (an OpDef outside op_defs); one at a time. */
void kernel_mutation_install(OpDef *op, Mutation m);
void kernel_mutation_remove(OpDef *op);

/* Whether case k of op_cases puts `op` on the tape. */
bool case_covers(int k, int op);
/* Index of the named case in op_cases; aborts when there is none. */
int case_find(const char *name);

/* Compares n floats; on the first element outside atol + rtol |want|, fills
 * msg and returns false. */
bool close_enough(const float *got, const float *want, long n, float atol, float rtol, char *msg, int msg_size);

#endif
