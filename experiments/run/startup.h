/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* startup.h: what every command does first, and the line naming its threads.
 *
 * Two settings must be in the environment before the OpenMP runtime and
 * OpenBLAS load, which is before main runs, so command_startup sets them and,
 * when it changed any, starts the program again in its place (once):
 *   - GOMP_SPINCOUNT=1000 when neither it nor OMP_WAIT_POLICY is set: an idle
 *     thread spins briefly, then sleeps. libgomp's default spin (300,000
 *     rounds) keeps an idle thread on its core, so with another busy process
 *     on the machine the thread that has work waits for a core, at every
 *     parallel region: 2 threads then ran several times slower than 1.
 *   - OPENBLAS_CORETYPE=SkylakeX when it is unset, the CPU has AVX-512 and
 *     OpenBLAS did not pick an AVX-512 kernel (a CPU newer than the library).
 * A user's own value of either variable is always kept. It also fixes
 * glibc's mmap threshold at 1 MiB (unless MALLOC_MMAP_THRESHOLD_ is set),
 * so that a large block freed goes back to the system at once and a second
 * step or round of one size peaks no higher than the first. The variables it
 * set are listed in ATTNLAB_SET_ENV, for children that want them unset.
 * It also installs the SIGINT and SIGTERM handler (interrupt.h), before the
 * command allocates anything large. Earlier still, from .preinit_array
 * (before any library's constructor), the process is named for the command
 * (prctl(PR_SET_NAME): a restart through /proc/self/exe would name it "exe")
 * and the handler installed; SIGINT and SIGTERM are blocked across the
 * restart, so a signal at any point of start-up after the dynamic loader's
 * own work ends the command with 128 + the signal, not the default action.
 */
#ifndef ATTNLAB_STARTUP_H
#define ATTNLAB_STARTUP_H

#include <stdbool.h>
#include <stdio.h>

#include "util.h"

void command_startup(int argc, char **argv);
/* glibc's mmap threshold for the commands: above the buffers multithreaded
 * OpenBLAS mallocs and frees in every sgemm call (512 KiB), so that those
 * stay on the heap, and below the arena's overflow blocks (4 MiB and up), so
 * that those go back to the system at their free. */
#define STARTUP_MMAP_THRESHOLD ((size_t)1 << 20)
/* Fixes the threshold there, as command_startup does; false (and
 * nothing done) when the user's MALLOC_MMAP_THRESHOLD_ is set. */
bool startup_malloc_policy(void);
/* Sets the threads a command runs with and returns their count: requested
 * (a --threads value; 0 = OpenMP's default), lowered to the CPUs this
 * process may use (sched_getaffinity) with one "note:" line on notes, and
 * refused (-1 with e set) when OpenBLAS's per-thread buffers would not fit
 * in memory (memory_check_threads): OpenBLAS would retry them forever. A
 * checkpoint's thread count is bookkeeping, never a request. */
int command_threads(int requested, FILE *notes, Err *e);
/* A command that runs as one process (spectrum, extrapolate, sample,
 * report) started by mpirun -np N with N > 1: every rank would run the whole
 * command into one folder. Rank 0 prints the error and exits 2, the others
 * exit 0 at once (no MPI call: nothing is started). Nothing when run plainly
 * or under mpirun -np 1. */
void command_one_process(const char *command);
/* The main of a command that also runs under mpirun (train, ablate, bench):
 * command_startup, MPI's start when launched by mpirun (a plain run makes
 * no MPI call), body, MPI's end; body's status. */
int command_main_distributed(int argc, char **argv, int (*body)(int argc, char **argv));

/* "2 threads (OpenMP; OpenBLAS kernel Cooperlake)" for a command's start-up
 * line, followed by a newline and blas_kernel_note's note when that applies
 * (so the note is the next line of the command's output), and by a note
 * suggesting fewer threads when other processes have kept the cores busy
 * (the load average of the last minute and the tasks running now). */
const char *threads_banner(int threads);

#endif
