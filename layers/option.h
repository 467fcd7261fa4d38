/* option.h: a row of the one option table (experiments/run/options.c).
 *
 * The table is the rows experiments/run/options.c declares, with the rows each
 * attention kernel declares for the options only it reads
 * (AttnKernel.option_rows), in its own file. A kernel's row stores into the
 * ModelConfig (offset from offsetof(ModelConfig, field)); the table's own rows
 * into the whole Config. Rows are written with designated initializers
 * ({.name = "heads", .type = OPT_INT, ...}); a field left out is 0 or NULL. */
#ifndef ATTNLAB_OPTION_H
#define ATTNLAB_OPTION_H

#include <stddef.h>

/* OPT_INT: an int; OPT_INT64: an int64_t (the seed), an integer in [min, max]
 * all the same. OPT_INTS: one integer per layer, "64,32" (layers past the
 * list take its last value): `size` ints, the unused ones 0. */
typedef enum { OPT_INT, OPT_FLOAT, OPT_CHOICE, OPT_BOOL, OPT_STRING, OPT_INTS, OPT_INT64 } OptType;
typedef enum { GROUP_MODEL, GROUP_TRAIN, GROUP_SAMPLE } OptGroup;

typedef struct {
    const char *name;
    OptType type;
    OptGroup group;
    size_t offset; /* into Config; a kernel's rows: into ModelConfig */
    const char *def;
    double min, max;             /* OPT_INT, OPT_INT64, OPT_INTS and OPT_FLOAT */
    const char *const *choices;  /* OPT_CHOICE: NULL-terminated, index = stored int */
    size_t size;                 /* OPT_STRING: buffer size; OPT_INTS: how many ints */
    const char *help;
    const char *const *(*choices_of)(void); /* OPT_CHOICE: the values from a registry, when choices is NULL */
} OptDef;

#endif
