/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* dist.h: the commands' data parallelism, over Open MPI.
 *
 * A command started by mpirun (or another MPI launcher: its environment names
 * the process's rank) calls MPI_Init in dist_init; one started plainly makes
 * no MPI call at all and is a world of one rank, so that every function below
 * is then a no-op and the command behaves, prints and starts as without MPI.
 *
 * Rank 0 speaks for the world: dist_init sends the other ranks' stdout and
 * stderr to /dev/null, and an error seen by any rank reaches rank 0 through
 * dist_agree, which every rank calls at the same point. A rank that fails
 * where the others cannot hear of it exits without MPI_Finalize, and mpirun
 * then stops the job: no rank is left waiting.
 *
 * Collectives (every rank calls them, in the same order): dist_agree,
 * dist_any, dist_allreduce_mean, dist_sum, dist_bcast, dist_same,
 * dist_barrier, dist_wait_idle. */
#ifndef ATTNLAB_DIST_H
#define ATTNLAB_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Whether an MPI launcher started this process (its environment says so). */
bool dist_launched(void);
/* Before MPI's start, from the launcher's environment (Open MPI, PMI, PMIx):
 * the world's size (1 when not launched or not said) and this process's
 * rank (0 when not launched). */
int dist_launched_size(void);
int dist_launched_rank(void);
/* MPI_Init when launched; then quiets the ranks other than 0 (above). */
void dist_init(int *argc, char ***argv);
/* MPI_Finalize, when dist_init called MPI_Init. Every rank calls it. */
void dist_finalize(void);
int dist_rank(void); /* 0 when not launched */
int dist_size(void); /* 1 when not launched */
/* Ranks on this host (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE), 1 when unknown. */
int dist_local_size(void);
/* Threads per rank when --threads is 0: the cores this rank is bound to when
 * the launcher bound it, else the host's cores shared among its ranks; at
 * least 1. */
int dist_default_threads(void);
/* Rank r > 0 gets its stdout back (ablate shows every rank's runs). */
void dist_show_output(void);

/* rc is this rank's 0 or -1 (e set). All ranks return 0 when every rc was
 * 0; otherwise -1, with e the message of the lowest failing rank ("rank r:
 * ..." when r is not 0). */
int dist_agree(int rc, Err *e);
/* Whether flag is true on any rank. */
bool dist_any(bool flag);
/* The largest x over the ranks. */
int dist_max(int x);
/* x <- the mean over the ranks of x, elementwise, in place: the sum
 * (MPI_Allreduce) divided by the rank count. */
void dist_allreduce_mean(float *x, long n);
/* x <- the sum over the ranks of x, elementwise, in place. */
void dist_sum(double *x, int n);
/* root's bytes to every rank. */
void dist_bcast(void *buf, size_t bytes, int root);
/* Whether x is the same on every rank; if not, *differs is the first rank
 * whose x is not rank 0's. */
bool dist_same(uint64_t x, int *differs);
/* MPI_Barrier: for short waits (it polls, holding a core while it waits). */
void dist_barrier(void);
/* Every rank reaches this point; one that arrives early sleeps between tests
 * instead of polling (a rank done with its share of a grid's runs may wait an
 * hour for another's). *waited_s is the time it waited, *cpu_s the CPU time
 * this process spent meanwhile (its other threads' too); both 0 without MPI. */
void dist_wait_idle(double *waited_s, double *cpu_s);

/* The exit status of a command that every rank refuses alike (its usage
 * under mpirun): 2 on rank 0, which prints the error, and 0 on the others,
 * so that mpirun does not stop rank 0 before its message (the job's status
 * is rank 0's). */
int dist_refused(void);

/* A 64-bit hash of n floats' bits (for dist_same: the ranks' parameters). */
uint64_t dist_hash_floats(const float *x, long n, uint64_t h);

#endif
