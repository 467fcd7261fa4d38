/* talking.c: Talking-Heads attention (Shazeer et al. 2020), the softmax
 * kernel under talking_heads = pre, post or both, as one fused op with its
 * hand-written backward, and its parameters. */
#include "attention/talking.h"

#include "gemm.h"
#include <omp.h>
#include <string.h>

#include "attention/softmax.h"
#include "layers.h"
#include "op_kernel.h"
#include "softmax_parts.h"
#include "util.h"

/* ---- Talking-Heads attention (Shazeer et al. 2020) --------------------------
 *
 * With talking_heads = pre, post or both, the H heads of a batch element
 * exchange information through learned H x H matrices, the layer parameters
 *   blocks.{i}.attn.talking_pre.weight   [H, H]  (pre, both)
 *   blocks.{i}.attn.talking_post.weight  [H, H]  (post, both)
 * Each is what nn.Linear(H, H, bias=False) applied over the head axis holds:
 * W[h, h'] weighs input head h' in output head h. They start as the identity,
 * so training starts from plain attention. Per batch element:
 *   S_h  = s Q_h K_h^T
 *   A_h  = sum_h' Wpre[h, h'] S_h'      (pre; else A = S)
 *   P_h  = softmax(A_h + mask)          (the causal mask comes after the mix)
 *   P'_h = sum_h' Wpost[h, h'] P_h'     (post; else P' = P; keeps causal zeros)
 *   O_h  = P'_h V_h
 * Viewing S and P as [H, T*T] matrices, each mix is one sgemm. Forward keeps P;
 * backward computes S and P' again (one product each) rather than keep three
 * [B, H, T, T] tensors:
 *   dV_h = P'_h^T dO_h,   dP'_h = dO_h V_h^T
 *   dWpost = dP' P^T,     dP = Wpost^T dP'       (over [H, T*T])
 *   dA = P * (dP - rowsum(dP * P))
 *   dWpre = dA S^T,       dS = Wpre^T dA
 *   dQ_h = s dS_h K_h,    dK_h = s dS_h^T Q_h
 * Heads interact, so threads split the batch, not the heads (with fewer batch
 * elements than threads, only B threads start). Each batch element's dW goes
 * to its own slot, and the slots are summed in order afterwards, so the result
 * does not depend on the thread count. */

/* S_h = scale Q_h K_h^T for the H heads of one batch element: q, k [H, T, dk]
 * -> S [H, T, T]. */
static void head_scores(const float *q, const float *k, float *S, int H, int T, int dk, float scale) {
    for (int h = 0; h < H; h++)
        gemm(false, true, T, T, dk, scale, q + (long)h * T * dk, dk,
                    k + (long)h * T * dk, dk, 0.0f, S + (long)h * T * T, T);
}

/* Y = W X, or W^T X when `transpose`, with X, Y [H, T*T]: mixes the heads. */
static void mix_heads(const float *W, bool transpose, const float *X, float *Y, int H, int T) {
    int TT = T * T;
    gemm(transpose, false, H, TT, H, 1.0f, W, H, X, TT, 0.0f,
                Y, TT);
}

/* P [H, T, T] of one batch element, before any post-mixing: the scores, mixed
 * by wpre when given, then the masked softmax of every row. X is [H, T, T]
 * scratch. */
static void talking_probs(const float *q, const float *k, const float *wpre, float *P, float *X, int H, int T, int dk,
                          float scale, bool causal) {
    if (!wpre) {
        for (int h = 0; h < H; h++)
            attn_head_probs(q + (long)h * T * dk, k + (long)h * T * dk, P + (long)h * T * T, T, dk, scale, causal);
        return;
    }
    head_scores(q, k, X, H, T, dk, scale);
    mix_heads(wpre, false, X, P, H, T);
    for (long r = 0; r < (long)H * T; r++) attn_softmax_prefix(P + r * T, causal ? (int)(r % T) + 1 : T, T);
}

typedef struct {
    float scale;
    bool causal;
    bool pre, post; /* which mixing matrices the node has */
} TalkingAttrs;
NODE_ATTRS_DECLARE(TalkingAttrs);

/* Node layout: in = {q, k, v, then Wpre when pre, then Wpost when post}. */
static Tensor *node_wpre(const Node *n) { return NODE_ATTRS(n, TalkingAttrs)->pre ? n->in[3] : NULL; }
static Tensor *node_wpost(const Node *n) {
    const TalkingAttrs *a = NODE_ATTRS(n, TalkingAttrs);
    return a->post ? n->in[3 + a->pre] : NULL;
}

/* Threads for a loop over B batch elements: no more than there are elements. */
static int batch_threads(int B) {
    int t = omp_get_max_threads();
    return t < B ? t : B;
}

static void attn_talking_forward(Node *n) {
    const Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *wpre = node_wpre(n), *wpost = node_wpost(n);
    int B = q->shape[0], H = q->shape[1], T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    long TT = (long)T * T, HTT = H * TT;
    const TalkingAttrs *a = NODE_ATTRS(n, TalkingAttrs);
    int nt = batch_threads(B);
    float *scratch = arena_alloc(engine_arena(), (size_t)nt * HTT * sizeof(float));
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) {
        float *X = scratch + omp_get_thread_num() * HTT, *P = n->saved + b * HTT;
        talking_probs(q->data + (long)b * H * T * dk, k->data + (long)b * H * T * dk, wpre ? wpre->data : NULL, P, X,
                      H, T, dk, a->scale, a->causal);
        const float *Pm = P; /* P', the matrix that multiplies V */
        if (wpost) {
            mix_heads(wpost->data, false, P, X, H, T);
            Pm = X;
        }
        for (int h = 0; h < H; h++) {
            long bh = (long)b * H + h;
            gemm(false, false, T, dv, T, 1.0f, Pm + h * TT, T,
                        v->data + bh * T * dv, dv, 0.0f, n->out->data + bh * T * dv, dv);
        }
    }
}

static void attn_talking_backward(Node *n) {
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *wpre = node_wpre(n), *wpost = node_wpost(n);
    int B = q->shape[0], H = q->shape[1], T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    long TT = (long)T * T, HTT = H * TT, HH = (long)H * H;
    float scale = NODE_ATTRS(n, TalkingAttrs)->scale;
    const float *dO = n->out->grad;
    float *dq = q->requires_grad ? tensor_grad(q) : NULL;
    float *dk_ = k->requires_grad ? tensor_grad(k) : NULL;
    float *dvv = v->requires_grad ? tensor_grad(v) : NULL;
    bool d_pre = wpre && wpre->requires_grad, d_post = wpost && wpost->requires_grad;
    bool need_dA = dq || dk_ || d_pre, need_dP = need_dA || d_post;
    int nt = batch_threads(B);
    /* Two [H, T, T] buffers per thread; per batch element its dWpre and dWpost. */
    float *scratch = arena_alloc(engine_arena(), (size_t)nt * 2 * HTT * sizeof(float));
    float *dw = arena_calloc(engine_arena(), (size_t)B * 2 * HH * sizeof(float));
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) {
        float *X = scratch + omp_get_thread_num() * 2 * HTT, *Y = X + HTT;
        const float *P = (const float *)n->saved + b * HTT;
        const float *qb = q->data + (long)b * H * T * dk, *kb = k->data + (long)b * H * T * dk;
        const float *vb = v->data + (long)b * H * T * dv, *dOb = dO + (long)b * H * T * dv;
        if (dvv) { /* dV_h += P'_h^T dO_h, P' = Wpost P again */
            const float *Pm = P;
            if (wpost) {
                mix_heads(wpost->data, false, P, X, H, T);
                Pm = X;
            }
            for (int h = 0; h < H; h++)
                gemm(true, false, T, dv, T, 1.0f, Pm + h * TT, T,
                            dOb + h * T * (long)dv, dv, 1.0f, dvv + ((long)b * H + h) * T * dv, dv);
        }
        if (!need_dP) continue;
        for (int h = 0; h < H; h++) /* dP'_h = dO_h V_h^T */
            gemm(false, true, T, T, dv, 1.0f, dOb + h * T * (long)dv, dv,
                        vb + h * T * (long)dv, dv, 0.0f, Y + h * TT, T);
        float *D = Y, *F = X; /* D: the gradient on its way back; F: free */
        if (wpost) {
            if (d_post) /* dWpost = dP' P^T */
                gemm(false, true, H, H, (int)TT, 1.0f, Y, (int)TT, P, (int)TT, 0.0f,
                            dw + (2L * b + 1) * HH, H);
            if (!need_dA) continue;
            mix_heads(wpost->data, true, Y, X, H, T); /* dP = Wpost^T dP' */
            D = X;
            F = Y;
        }
        attn_softmax_rows_backward(P, D, (long)H * T, T); /* dA */
        if (wpre) {
            head_scores(qb, kb, F, H, T, dk, scale); /* S again */
            if (d_pre) /* dWpre = dA S^T */
                gemm(false, true, H, H, (int)TT, 1.0f, D, (int)TT, F, (int)TT, 0.0f,
                            dw + 2L * b * HH, H);
            if (!dq && !dk_) continue;
            mix_heads(wpre->data, true, D, F, H, T); /* dS = Wpre^T dA */
            D = F;
        }
        for (int h = 0; h < H; h++) {
            long bh = (long)b * H + h;
            if (dq) /* dQ += s dS K */
                gemm(false, false, T, dk, T, scale, D + h * TT, T,
                            kb + h * T * (long)dk, dk, 1.0f, dq + bh * T * dk, dk);
            if (dk_) /* dK += s dS^T Q */
                gemm(true, false, T, dk, T, scale, D + h * TT, T,
                            qb + h * T * (long)dk, dk, 1.0f, dk_ + bh * T * dk, dk);
        }
    }
    /* The batch elements' dW, summed in order. */
    float *gpre = d_pre ? tensor_grad(wpre) : NULL, *gpost = d_post ? tensor_grad(wpost) : NULL;
    for (int b = 0; b < B; b++)
        for (long e = 0; e < HH; e++) {
            if (gpre) gpre[e] += dw[2L * b * HH + e];
            if (gpost) gpost[e] += dw[(2L * b + 1) * HH + e];
        }
}

OpDef attn_talking_op = {"attn_talking", attn_talking_forward, attn_talking_backward, 0};

/* The mixing matrices of a call: c->params holds them in declaration order,
 * talking_pre's (pre, both) then talking_post's (post, both). */
static void talking_matrices(const AttnCall *c, const Tensor *q, Tensor **pre, Tensor **post) {
    const SoftmaxOpts *o = c->opts;
    bool has_pre = o->talking_heads == TALKING_PRE || o->talking_heads == TALKING_BOTH;
    bool has_post = o->talking_heads == TALKING_POST || o->talking_heads == TALKING_BOTH;
    int i = 0;
    *pre = has_pre ? c->params[i++] : NULL;
    *post = has_post ? c->params[i++] : NULL;
    if ((has_pre && !*pre) || (has_post && !*post))
        DIE("%s: talking_heads %d without its mixing matrices in AttnCall.params", attn_talking_op.name,
            o->talking_heads);
    int H = q->shape[1];
    for (int j = 0; j < 2; j++) {
        const Tensor *w = j ? *post : *pre;
        if (w)
            SHAPE_CHECK(w->ndim == 2 && w->shape[0] == H && w->shape[1] == H, attn_talking_op.name,
                        "a mixing matrix must be [H, H] for q [B, H, T, d]", w, q);
    }
}

Tensor *attn_talking(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    attn_check_qkv(attn_talking_op.name, q, k, v);
    Tensor *pre, *post;
    talking_matrices(c, q, &pre, &post);
    Node *n = node_new(&attn_talking_op);
    n->n_in = 3;
    n->in[0] = q;
    n->in[1] = k;
    n->in[2] = v;
    if (pre) n->in[n->n_in++] = pre;
    if (post) n->in[n->n_in++] = post;
    *NODE_ATTRS(n, TalkingAttrs) =
        (TalkingAttrs){.scale = c->scale, .causal = c->causal, .pre = pre != NULL, .post = post != NULL};
    int T = q->shape[2];
    n->saved = arena_alloc(engine_arena(), (size_t)q->shape[0] * q->shape[1] * T * T * sizeof(float));
    n->out = tensor_4d(q->shape[0], q->shape[1], T, v->shape[3]);
    return node_run(n);
}

/* P' [B, H, T, T]: the post-mixed matrix when there is one, as it multiplies V. */
Tensor *attn_talking_probs(const AttnCall *c, Tensor *q, Tensor *k) {
    Tensor *pre, *post;
    talking_matrices(c, q, &pre, &post);
    int B = q->shape[0], H = q->shape[1], T = q->shape[2], dk = q->shape[3];
    long HTT = (long)H * T * T;
    Tensor *out = tensor_4d(B, H, T, T);
    int nt = batch_threads(B);
    float *scratch = arena_alloc(engine_arena(), (size_t)nt * HTT * sizeof(float));
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) {
        float *X = scratch + omp_get_thread_num() * HTT, *Pb = out->data + b * HTT;
        const float *qb = q->data + (long)b * H * T * dk, *kb = k->data + (long)b * H * T * dk;
        if (post) { /* P into the scratch, then P' = Wpost P */
            talking_probs(qb, kb, pre ? pre->data : NULL, X, Pb, H, T, dk, c->scale, c->causal);
            mix_heads(post->data, false, X, Pb, H, T);
        } else {
            talking_probs(qb, kb, pre->data, Pb, X, H, T, dk, c->scale, c->causal);
        }
    }
    return out;
}

/* ---- the parameters ---------------------------------------------------------- */

void talking_declare(ParamSet *p, const char *prefix, int talking_heads, int H, Tensor **params) {
    char buf[128];
    int i = 0;
    if (talking_heads == TALKING_PRE || talking_heads == TALKING_BOTH)
        params[i++] = params_add(p, param_name(buf, prefix, "talking_pre.weight"), 2, (int[]){H, H});
    if (talking_heads == TALKING_POST || talking_heads == TALKING_BOTH)
        params[i++] = params_add(p, param_name(buf, prefix, "talking_post.weight"), 2, (int[]){H, H});
}

void talking_init(Tensor **params) {
    for (int i = 0; i < ATTN_MAX_PARAMS && params[i]; i++) {
        Tensor *w = params[i];
        for (long e = 0; e < w->n; e++) w->data[e] = e / w->shape[1] == e % w->shape[1] ? 1.0f : 0.0f;
    }
}
