/* optimizers.c: the registry of optimizers, the values of the `optimizer`
 * option. Each is its own file here (adamw.c, sgd.c, lion.c); a new one is
 * its file and its line below. The registry also places each optimizer's
 * options struct in the config's OPTIM_OPTION_BYTES, as kernels.c places the
 * kernels' options. */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "optim.h"

/* Every optimizer once, one line each, in the order --help lists them; the
 * first is the default. Each line ends in a backslash, the list in the line
 * after the last. */
#define OPTIM_LIST(X)    \
    X(optimizer_adamw)   \
    X(optimizer_sgd)     \
    X(optimizer_lion)    \
    /* the end of the list */

#define OPTIM_DECLARE(o) extern const Optimizer o;
OPTIM_LIST(OPTIM_DECLARE)
#define OPTIM_ENTRY(o) &o,
const Optimizer *const optimizers[] = {OPTIM_LIST(OPTIM_ENTRY)};
const int n_optimizers = (int)(sizeof optimizers / sizeof optimizers[0]);

#define N_OPTIMIZERS (sizeof optimizers / sizeof optimizers[0])
enum { MAX_ROWS = 8 };
static OptDef rows[N_OPTIMIZERS][MAX_ROWS + 1];
static size_t options_at[N_OPTIMIZERS];
static bool placed;

/* Each optimizer's options struct at its place, 8-byte aligned, and its rows'
 * offsets into the bytes; checks that the states and rows fit. */
static void place(void) {
    if (placed) return;
    size_t at = 0;
    for (int i = 0; i < n_optimizers; i++) {
        const Optimizer *o = optimizers[i];
        if (o->n_state < 0 || o->n_state > PARAMS_STATE_SLABS)
            DIE("optimizer %s: %d state slabs, at most %d", o->name, o->n_state, PARAMS_STATE_SLABS);
        for (int k = 0; k < o->n_state; k++)
            if (!o->state_names[k] || strncmp(o->state_names[k], "optim.", 6))
                DIE("optimizer %s: state slab %d needs a name starting optim.", o->name, k);
        options_at[i] = at;
        at += (o->options_size + 7) / 8 * 8;
        if (at > OPTIM_OPTION_BYTES) DIE("optimizers: their options take more than %d bytes", OPTIM_OPTION_BYTES);
        int n = 0;
        for (const OptDef *r = o->option_rows; r && r->name; r++) {
            if (n == MAX_ROWS) DIE("optimizer %s: more than %d options", o->name, MAX_ROWS);
            size_t width = r->type == OPT_FLOAT ? sizeof(float) : r->type == OPT_BOOL ? sizeof(bool) : sizeof(int);
            if (r->type == OPT_STRING || r->type == OPT_INTS || r->type == OPT_INT64 || r->offset + width > o->options_size)
                DIE("optimizer %s: option %s is not an int, float, bool or choice inside its options", o->name, r->name);
            rows[i][n] = *r;
            rows[i][n++].offset = options_at[i] + r->offset;
        }
        rows[i][n] = (OptDef){0};
    }
    placed = true;
}

const Optimizer *optimizer_at(int i) {
    if (i < 0 || i >= n_optimizers) DIE("optimizer %d: there are %d", i, n_optimizers);
    return optimizers[i];
}

int optim_find(const char *name) {
    for (int i = 0; i < n_optimizers; i++)
        if (!strcmp(optimizers[i]->name, name)) return i;
    return -1;
}

const char *const *optim_names(void) {
    static const char *names[N_OPTIMIZERS + 1];
    for (int i = 0; i < n_optimizers; i++) names[i] = optimizers[i]->name;
    return names;
}

size_t optim_options_at(int i) {
    place();
    optimizer_at(i);
    return options_at[i];
}

const OptDef *optim_rows(int i) {
    place();
    optimizer_at(i);
    return rows[i];
}

const Optimizer *optim_option_owner(const char *name) {
    for (int i = 0; i < n_optimizers; i++)
        for (const OptDef *r = optimizers[i]->option_rows; r && r->name; r++)
            if (!strcmp(r->name, name)) return optimizers[i];
    return NULL;
}

void optim_for_each(ParamSet *p, void (*update)(ParamSet *p, int k, long lo, long hi, const void *ctx),
                    const void *ctx) {
    const long n = p->total;
    const int count = params_count(p);
#pragma omp parallel if (n >= OPTIM_PARALLEL_MIN)
    {
        /* this thread's share of the slab, and the pieces of it each parameter holds */
        const long id = omp_get_thread_num(), threads = omp_get_num_threads();
        const long lo = n * id / threads, hi = n * (id + 1) / threads;
        for (int k = 0; k < count; k++) {
            const long start = p->offset[k], end = start + p->list[k]->n;
            const long from = start > lo ? start : lo, to = end < hi ? end : hi;
            if (from < to) update(p, k, from, to, ctx);
        }
    }
}
