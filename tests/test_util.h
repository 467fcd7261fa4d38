/* test_util.h: helpers the test files share. */
#ifndef ATTNLAB_TEST_UTIL_H
#define ATTNLAB_TEST_UTIL_H

#include <stdbool.h>

#include "attention.h"
#include "attention/kernels.h"
#include "ops.h"
#include "rng.h"
#include "safetensors.h"

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

/* Error analysis for two evaluations of one function whose sums run in
 * different orders (a fused product against split ones, a kernel against its
 * composition or against PyTorch in float64). Each float32 sum of K terms
 * computes, exactly, the sum of its terms each moved by at most
 * gamma_K = K u / (1 - K u) (u = 2^-24, the unit roundoff), so evaluating one
 * of the two once more with every input moved by a random relative gamma_K
 * (`moved`, against `base`, that evaluation unmoved) shows how far rounding
 * can carry each output, through whatever conditioning the function has.
 * Within a tensor of n values, got may differ from want by `slack` times the
 * largest move seen in that tensor, plus 8 u |want|; on the first value
 * beyond, fills msg and returns false. */
double rounding_gamma(long K);
/* Each x[i] times (1 + gamma_K r), r uniform in [-1, 1]. */
void move_by_rounding(float *x, long n, long K, Rng *rng);
/* The longest sum in an attention kernel's call: over keys or queries (T),
 * over q.k (key_size), over v (head_size) or over heads (talking heads). */
long kernel_sum_length(const AttnCall *c);
/* The slack of the kernel comparisons: a kernel's sums run in about four
 * levels (scores, normalisation, P v, and backward through them), each with
 * its own rounding, against the one level of moved inputs. */
#define KERNEL_ROUNDING_SLACK 4.0
bool close_to_rounding(const char *what, const float *got, const float *want, const float *moved, const float *base,
                       long n, double slack, char *msg, int msg_size);

/* The same analysis for a test body that evaluates, then compares with
 * rounded_close: ROUNDING_PASSES runs the body twice. The first pass moves
 * every input the body passes to rounding_move_input by a random gamma_K and
 * records what each rounded_close is given; the second runs as written, and
 * each rounded_close then allows `slack` times the largest move its tensor
 * showed (close_to_rounding, about the second pass's values). Outside
 * ROUNDING_PASSES, rounded_close has no bound and fails the test.
 *     ROUNDING_PASSES(K, slack) { ...; rounding_move_input(x, n); ...;
 *                                  ck_assert(rounded_close(...)); }
 * rounding_moving() says whether this is the first pass (for a check that
 * moved inputs may change, such as a count of clamped rows). */
#define ROUNDING_PASSES(K, slack) for (rounding_begin((K), (slack)); rounding_next();)
void rounding_begin(long K, double slack);
bool rounding_next(void);
bool rounding_moving(void);
void rounding_move_input(float *x, long n);
bool rounded_close(const char *what, const float *got, const float *want, long n, char *msg, int size);

/* Opens tests/fixtures/<name> ($ATTNLAB_FIXTURES/<name> when set); a missing
 * or bad fixture fails the test with a hint to remake it. */
StFile fixture_open(const char *name);

/* Reads "<case>/<what>" of a fixture into dst, which has t's shape; false and
 * the reason in msg when it is missing or shaped otherwise. */
bool fixture_read(StFile *sf, const char *c, const char *what, const Tensor *t, float *dst, char *msg, int size);
/* Compares got (t's shape) with "<case>/<what>" by rounded_close (inside
 * ROUNDING_PASSES). */
bool fixture_compare(StFile *sf, const char *c, const char *what, const Tensor *t, const float *got, char *msg,
                     int size);

/* "<case>/<what>" of this shape in a new tensor of the current arena; a
 * missing or misshapen tensor fails the test. */
Tensor *fixture_tensor(StFile *sf, const char *c, const char *what, int ndim, const int *shape);
/* How far a kernel's fixture run got: the first stage that differed, or
 * KERNEL_FX_OK; kernel_fx_stage_names[stage] names it. */
typedef enum { KERNEL_FX_OUTPUT, KERNEL_FX_PROBS, KERNEL_FX_GRADS, KERNEL_FX_OK } KernelFxStage;
extern const char *const kernel_fx_stage_names[];
/* Runs kernel `kern` with call c on leaves q, k, v and up to two parameters
 * (leaf[3], leaf[4]; NULL when absent, already in c->params) against fixture
 * variant `variant`: "<variant>/out", then "<variant>/probs" [B, H, T, T]
 * with gradients off, then backward from "<variant>/dout" and every
 * "<variant>/grad_<names[i]>". The leaves must be in the current arena. */
KernelFxStage kernel_fixture_run(StFile *sf, const char *variant, const AttnKernel *kern, const AttnCall *c,
                                 Tensor *const leaf[5], const char *const names[5], double slack, char *msg,
                                 int size);

/* Draws the leaves q, k, v [B, H, T, d] (requires_grad) of a kernel test from
 * rng and puts the kernel's inputs, made from them on the tape, in in[3]. */
typedef void (*DrawLeaves)(Rng *rng, const AttnCall *c, const void *ctx, Tensor **leaves, Tensor **in);
/* A reference made of primitive ops: the output for q, k, v, and its
 * attention matrix P [B, H, T, T] in *probs. */
typedef Tensor *(*ComposeRef)(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs);
/* Kernel `kern` and `compose` on the same inputs, drawn twice from `seed`:
 * output and leaf gradients for one random output gradient; then, gradients
 * off, the kernel's probs against the reference's P, P v against the output,
 * and (causal) zeros above the diagonal. In a fresh arena; false and the
 * first difference in msg. */
bool kernel_against_composition(const AttnKernel *kern, const AttnCall *c, uint64_t seed, DrawLeaves draw,
                                const void *ctx, ComposeRef compose, double slack, char *msg, int size);

/* A case of a kernel's own fixture file, run as PyTorch ran it and compared
 * stage by stage inside ROUNDING_PASSES: its leaves "<name>/<leaf>" (moved
 * by their rounding, requires_grad), forward, "<name>/out", a check of the
 * test's own, "<name>/probs" with gradients off, then backward from
 * "<name>/R" and every "<name>/grad_<leaf>". fixture_case_run returns the
 * first stage that differed, or FX_OK, with the difference in msg. */
typedef enum { FX_READ, FX_OUT, FX_CHECK, FX_PROBS, FX_GRADS, FX_OK } FxStage;
extern const char *const fx_stage_names[];
typedef struct {
    const char *name; /* the case: its tensors are "<name>/..." */
    long sum_length;  /* its longest sum, the K of ROUNDING_PASSES */
    void *ctx;        /* the test's own state, handed to the hooks */
    /* Makes the leaves (shapes only, at most 5) in the current arena, names
     * them in names[], and puts what forward needs (a call) in ctx. Returns
     * how many. */
    int (*leaves)(void *ctx, Tensor **leaf, const char **names);
    /* Whether the fixture's metadata is this case's (NULL: not checked). */
    bool (*matches)(StFile *sf, void *ctx, char *msg, int size);
    Tensor *(*forward)(void *ctx, Tensor **leaf);
    bool (*check)(void *ctx, char *msg, int size); /* after forward (NULL: none) */
    Tensor *(*probs)(void *ctx, Tensor **leaf);    /* NULL: the case has none */
} FixtureCase;
FxStage fixture_case_run(StFile *sf, const FixtureCase *fc, char *msg, int size);

/* Whether this CPU runs bf16 products (core/gemm.h); when it does not, prints
 * "<who>: bf16 tests skipped: <why>" and the caller's test passes. */
bool bf16_runs_here(const char *who);

/* A fresh folder under $TMPDIR (or /tmp) named attnlab_<tag>_XXXXXX, written
 * into dir; fails the test when it cannot be made. */
void test_tmpdir(char *dir, size_t size, const char *tag);
/* Removes a folder and everything in it. */
void test_rmtree(const char *dir);

/* The index of position scheme `name` (layers/attention/positions.h); a
 * name the registry does not hold is a mistake of the test. */
static inline int pos_of(const char *name) {
    int i = pos_find(name);
    if (i < 0) DIE("no position scheme %s", name);
    return i;
}

#endif
