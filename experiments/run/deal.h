/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* deal.h: which rank trains which run of a grid under mpirun -np N.
 *
 * A grid's runs may take very unequal times (a softmax baseline beside
 * linear kernels at a long context takes twice as long). Dealt by turn, the
 * k-th run to rank k mod N, a rank can sit idle for hours at the grid's end.
 * So when every rank sees the grid's folder as the same folder (one machine,
 * or a shared file system), the ranks take the runs in training order as
 * each frees up: a rank claims the k-th run by creating the file k in the
 * command's claim folder with O_EXCL, and exactly one rank wins it. A run
 * resumed from its checkpoint can then go to any rank: they all read it.
 *
 * When the ranks see different folders under the same name (nodes that each
 * have their own disk), a run's folder, and so its checkpoint, is on the node
 * that trained it: the runs are dealt by turn, the same way every time, so a
 * stopped run resumes where its checkpoint is.
 *
 * Which rank trained a run changes nothing in it: its bits depend on its
 * seed and its thread count only. */
#ifndef ATTNLAB_DEAL_H
#define ATTNLAB_DEAL_H

#include <stdbool.h>

#include "util.h"

typedef struct {
    bool shared;     /* every rank sees dir as one folder: runs are claimed */
    char claims[1100]; /* the claim folder (rank 0 made it; empty when by turn) */
} Deal;

/* Collective. Rank 0 removes the claim folders of earlier commands that
 * stopped without removing theirs (the caller holds the grid's lock, so no
 * other command uses them) and makes this command's, dir/.deal-PID-TIME; the
 * other ranks look for it. 0, or -1 with e set on every rank. */
int deal_open(Deal *d, const char *dir, Err *e);
/* The rank that trains the run at position index when runs are dealt by
 * turn: index mod N. */
int deal_turn(int index);
/* Whether this rank trains the run at position index (0-based, counting the
 * runs that can run, in training order). By turn: index mod N is this
 * rank. Claimed: whether this rank's claim of it won; call it once per run,
 * in order, only for runs to train (a finished run is nobody's). */
bool deal_take(Deal *d, int index);
/* Rank 0 removes the claim folder. Call after every rank is done claiming
 * (dist_wait_idle). */
void deal_close(Deal *d);

#endif
