/* tape.h: the record of what ran, for reverse mode.
 *
 * Every op is a pair of functions on a Node: forward computes node->out from
 * node->in, backward adds (+=) into the inputs' gradients from out->grad. When
 * gradients are on and some input requires one, running an op appends its
 * node to the tape; backward() walks the tape from the newest node to the
 * oldest. Because every backward accumulates, a tensor used twice gets both
 * contributions.
 *
 * An op's attributes (a scale, an eps, flags ...) are a struct of its own, in
 * the op's .c file, kept in the node's attrs bytes as ggml keeps op_params:
 *   typedef struct { float eps; } NormAttrs;
 *   NODE_ATTRS_DECLARE(NormAttrs);              (checks that it fits)
 *   NODE_ATTRS(n, NormAttrs)->eps = eps;        (the constructor)
 *   float eps = NODE_ATTRS(n, NormAttrs)->eps;  (forward, backward) */
#ifndef ATTNLAB_TAPE_H
#define ATTNLAB_TAPE_H

#include <stddef.h>

#include "tensor.h"

/* q, k, v and both Talking-Heads mixing matrices (layers/attention/talking.c) */
#define NODE_MAX_IN 5
/* Room for an op's attribute struct (ggml's op_params are 64 bytes too). */
#define NODE_ATTR_BYTES 64

typedef struct Node Node;

typedef struct {
    const char *name;
    void (*forward)(Node *n);
    void (*backward)(Node *n);
    /* Bit k set: input k may be stored in bf16 (tensor.h), because the op
     * reads it, forward and backward, only as a bf16 product's operand
     * (gemm_ex). node_run aborts when an input stored in bf16 lacks its bit. */
    unsigned in16;
} OpDef;

struct Node {
    const OpDef *def;
    Tensor *out;
    Tensor *in[NODE_MAX_IN];
    int n_in;
    /* the op's attribute struct, zeroed by node_new (NODE_ATTRS) */
    _Alignas(max_align_t) unsigned char attrs[NODE_ATTR_BYTES];
    const int *ids;  /* token ids or targets; must outlive backward */
    float *saved;    /* what forward keeps for backward (arena memory) */
    long saved_n;    /* > 0: saved is a tensor_scratch buffer of that many floats, handed back
                      * with the output when the output is made again in backward */
    Node *rerun_from; /* the last node of a checkpointed span: its first (tape_checkpoint) */
    bool view;       /* out shares in[0]'s data (a reshape, the identity): checkpointing and
                      * recompute point it at the input again instead of running forward */
    Node *prev;      /* the node recorded before this one */
};

/* Asserts at compile time that the attribute struct Type fits in a node's
 * attrs, and defines the name NODE_ATTRS uses, so that NODE_ATTRS does not
 * compile for a type that has not been checked. At file scope. */
#define NODE_ATTRS_DECLARE(Type)                                                                    \
    _Static_assert(sizeof(Type) <= NODE_ATTR_BYTES, #Type " does not fit in Node.attrs");             \
    _Static_assert(_Alignof(Type) <= _Alignof(max_align_t), #Type " is over-aligned for Node.attrs"); \
    typedef Type Type##_NodeAttrs

/* Node n's attributes as a Type * (a const Type * for a const Node *). */
#define NODE_ATTRS(n, Type) \
    _Generic((n), const Node *: (const Type##_NodeAttrs *)(n)->attrs, default: (Type##_NodeAttrs *)(n)->attrs)

/* Gradient mode. grad_set returns the previous mode, for save/restore. */
bool grad_enabled(void);
bool grad_set(bool on);

/* A node for `def` in the current arena, zeroed. */
Node *node_new(const OpDef *def);
/* Runs n's forward and records it when gradients are on and an input needs
 * one. Returns n->out. Aborts, naming the op, when an input is stored in
 * bf16 and the op's in16 has no bit for it. */
Tensor *node_run(Node *n);
/* Two nodes made by one pass over memory: runs forward(n) once, in place of
 * both nodes' own forwards (it makes first's output as well as n's; timed as
 * n's op), then records first and n as node_run does, in that order. Each
 * node's own forward still makes its output alone, for recompute and
 * tape_checkpoint. Returns n->out. */
Tensor *node_run_fused(Node *first, Node *n, void (*forward)(Node *n));

/* The newest recorded node (NULL when the tape is empty). */
Node *tape_last(void);
/* Forgets every record. Call it when the arena holding them is reset. */
void tape_reset(void);

/* Hands t's data back once forward has no more use for it, when t's producer
 * is a recorded node whose forward gives the same bits again from its inputs
 * (a norm, say): backward makes it again, from the producer's inputs, before
 * the first backward that reads it, and hands it back after the producer's
 * own backward. Memory for time: the producer's forward runs twice. */
void tensor_release_recomputable(Tensor *t);

/* Activation checkpointing: the nodes recorded after `before` (NULL: from the
 * start) up to the one that made `keep` (the span's result, which later nodes
 * read; nodes recorded after it belong to the next span) hand their outputs
 * back, all but keep; when backward reaches the span, it runs the span's
 * forwards again, oldest first, from the inputs it kept, and hands each output
 * back after its node's backward. The forwards must give the same bits again
 * (every op here does, at a fixed thread count). Memory for time: a span's
 * activations are alive only while backward is in it. */
void tape_checkpoint(Node *before, Tensor *keep);

/* Reverse mode from a scalar: loss->grad = 1, then every recorded backward. */
void backward(Tensor *loss);
/* The same from any tensor, with the given seed gradient (out->n values). */
void backward_seeded(Tensor *out, const float *seed);

/* Watches every op run (core/profile.c times them with it): once set, each
 * forward and each backward is timed and reported with its op and phase.
 * NULL turns it off (nothing is timed). */
typedef void (*TapeWatcher)(const OpDef *def, bool backward, double seconds);
void tape_watch(TapeWatcher w);

#endif
