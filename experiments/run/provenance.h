/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* provenance.h: where a run ran, kept in its folder as provenance.json.
 *
 * A run's bits depend on more than its options: the matrix products' path
 * (OpenBLAS's kernel in fp32; gemm's own AVX512-BF16 kernel or oneDNN's ISA
 * in bf16), the thread count, the CPU and the code the compiler made of this
 * commit for it. Each time a run trains (its start, and each resume) the
 * trainer records one segment: the step it starts from and this process's
 * answers (docs/formats.md lists the fields). Segments past the step a resume
 * starts from are dropped with the steps they made, so the file describes
 * exactly the steps the checkpoint holds.
 *
 * The segment's `kernel` is what two runs must share for their difference to
 * be the options' alone: precision, products' path, OpenBLAS kernel, threads,
 * CPU model and the ISA the build targets. ./ablate's tables, the pages and
 * ./report show it, and a seed pair whose runs differ in it is flagged and
 * kept out of the paired intervals and verdicts (grid_report.h). */
#ifndef ATTNLAB_PROVENANCE_H
#define ATTNLAB_PROVENANCE_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define PROVENANCE_FILE "provenance.json"

/* This process, now: a cJSON object (caller deletes) with cpu, cpu_isa,
 * compiled_for, compiler, openblas, openblas_kernel, openblas_coretype,
 * onednn, onednn_isa, products, precision, threads, ranks, commit, dirty
 * and kernel. precision is a Precision value (gemm.h). */
struct cJSON;
struct cJSON *provenance_now(int precision, int threads, int ranks);

/* The kernel line of this process (what provenance_now puts under "kernel"). */
void provenance_kernel(int precision, int threads, char *out, size_t size);

/* Records the segment that starts at step `start` in dir/provenance.json:
 * the segments before it are kept (those from `start` on are dropped), this
 * process's is appended. Written atomically. -1 with e set on a write error;
 * a file there that is not one of ours is replaced (a note on stderr). */
int provenance_record(const char *dir, long start, int precision, int threads, int ranks, Err *e);

/* What a run folder says of where it ran: its kernel line (the segments'
 * one, or the first when they differ: *mixed is then true) and the commit of
 * its last segment with "+dirty" when built from changed files. 0 when the
 * folder has the file, 1 when it has none (a run made before provenance was
 * recorded: kernel and commit are ""), -1 when the file is not ours. */
int provenance_read(const char *dir, char *kernel, size_t ksize, char *commit, size_t csize, bool *mixed);

#endif
