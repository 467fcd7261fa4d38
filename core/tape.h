/* tape.h: the record of what ran, for reverse mode.
 *
 * Every op is a pair of functions on a Node: forward computes node->out from
 * node->in, backward adds (+=) into the inputs' gradients from out->grad. When
 * gradients are on and some input requires one, running an op appends its
 * node to the tape; backward() walks the tape from the newest node to the
 * oldest. Because every backward accumulates, a tensor used twice gets both
 * contributions. */
#ifndef ATTNLAB_TAPE_H
#define ATTNLAB_TAPE_H

#include "tensor.h"

/* q, k, v and both Talking-Heads mixing matrices (layers/attention/softmax.c) */
#define NODE_MAX_IN 5

typedef struct Node Node;

typedef struct {
    const char *name;
    void (*forward)(Node *n);
    void (*backward)(Node *n);
} OpDef;

struct Node {
    const OpDef *def;
    Tensor *out;
    Tensor *in[NODE_MAX_IN];
    int n_in;
    float f[4];      /* scalar attributes (scale, slope, eps ...) */
    int i[4];        /* integer attributes (heads, ignore index ...) */
    const int *ids;  /* token ids or targets; must outlive backward */
    float *saved;    /* what forward keeps for backward (arena memory) */
    Node *prev;      /* the node recorded before this one */
};

/* Gradient mode. grad_set returns the previous mode, for save/restore. */
bool grad_enabled(void);
bool grad_set(bool on);

/* A node for `def` in the current arena, zeroed. */
Node *node_new(const OpDef *def);
/* Runs n's forward and records it when gradients are on and an input needs
 * one. Returns n->out. */
Tensor *node_run(Node *n);

/* The newest recorded node (NULL when the tape is empty). */
Node *tape_last(void);
/* Forgets every record. Call it when the arena holding them is reset. */
void tape_reset(void);

/* Reverse mode from a scalar: loss->grad = 1, then every recorded backward. */
void backward(Tensor *loss);
/* The same from any tensor, with the given seed gradient (out->n values). */
void backward_seeded(Tensor *out, const float *seed);

/* Time per op, for ./bench: while profiling is on, every forward and every
 * backward is timed and added to its op's entry. */
typedef struct {
    const char *name;
    double forward_s, backward_s;
    long calls;
} OpProfile;

void profile_start(void); /* zeroes the entries and turns profiling on */
void profile_stop(void);
/* Copies up to max entries, slowest (forward + backward) first; returns how many. */
int profile_read(OpProfile *out, int max);

#endif
