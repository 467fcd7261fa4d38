/* bench_mpi.c: ./bench --mpi, data-parallel scaling.
 *
 * Run plainly, ./bench --mpi starts `mpirun -np N` of itself for N = 1 and 2
 * (one thread per rank unless --threads says otherwise) and prints their
 * figures side by side: global tok/s, the scaling efficiency tok/s(N) /
 * (N tok/s(1)), and how much of a step the gradient allreduce takes. Under
 * mpirun (mpirun -np 8 ./bench --mpi on a cluster), it measures that N and
 * prints its figures.
 *
 * Each rank trains the reference configuration (or the model options given)
 * on its own random tokens with a per-rank batch of --batch, exactly as
 * trainer.c's data-parallel step does: forward, backward, the allreduce of
 * the gradient slab, clipping, AdamW. The allreduce is timed twice: inside
 * the step (where it also waits for the slowest rank's backward) and alone,
 * after a barrier (the communication itself, which is what grows with the
 * host count). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "dist.h"
#include "mlm.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "rng.h"
#include "run.h"
#include "stats.h"
#include "util.h"

#define BENCH_MPI_LINE "bench-mpi:"

/* The measurement under mpirun; rank 0 prints its figures, last a line for
 * the parent to read. */
static int bench_mpi_ranks(const BenchOptions *o, const Config *cfg) {
    BenchStep b;
    uint64_t batch_seed = 2 + (uint64_t)dist_rank(); /* each rank its own tokens */
    bench_step_init(&b, cfg, &batch_seed);
    int B = b.B, T = b.T, N = dist_size();
    const int warm = 3;
    double *reduce_s = xmalloc((size_t)o->steps * sizeof(double)), *alone_s = xmalloc((size_t)o->steps * sizeof(double));
    double t_start = 0;
    for (int s = 0; s < warm + o->steps; s++) {
        if (s == warm) {
            dist_barrier();
            t_start = now_seconds();
        }
        bench_step_grad(&b);
        double t0 = now_seconds();
        dist_allreduce_mean(b.m.params.grad, b.m.params.total);
        double t1 = now_seconds();
        bench_step_update(&b, s);
        if (s >= warm) reduce_s[s - warm] = t1 - t0;
    }
    dist_barrier();
    double wall = now_seconds() - t_start;
    /* the allreduce alone: every rank ready, nothing else running */
    for (int s = 0; s < o->steps; s++) {
        dist_barrier();
        double t0 = now_seconds();
        dist_allreduce_mean(b.m.params.grad, b.m.params.total);
        alone_s[s] = now_seconds() - t0;
    }
    double step_ms = wall / o->steps * 1e3, tok_s = (double)N * B * T * o->steps / wall;
    double reduce_ms = median_of(reduce_s, o->steps) * 1e3, alone_ms = median_of(alone_s, o->steps) * 1e3;
    double mib = (double)b.m.params.total * sizeof(float) / (1 << 20);
    if (dist_rank() == 0) {
        printf("%d rank%s x batch %d x T %d, %d thread%s per rank, %.1f MiB of gradients per step\n", N,
               N == 1 ? "" : "s", B, T, engine_threads(), engine_threads() == 1 ? "" : "s", mib);
        printf("  %d timed steps after %d warm-up: %.1f ms/step, %.0f tok/s (all ranks)\n", o->steps, warm, step_ms,
               tok_s);
        printf("  allreduce in the step %.2f ms (%.1f%% of it; with the wait for the slowest rank), alone %.2f ms\n",
               reduce_ms, 100 * reduce_ms / step_ms, alone_ms);
        printf("%s %d %.6g %.6g %.6g %.6g %.6g\n", BENCH_MPI_LINE, N, tok_s, step_ms, reduce_ms, alone_ms, mib);
        fflush(stdout);
    }
    free(reduce_s);
    free(alone_s);
    bench_step_free(&b);
    return 0;
}

typedef struct {
    int np;
    double tok_s, step_ms, reduce_ms, alone_ms, mib;
} MpiFigures;

/* `mpirun -np np` of this program with args; its figures, or -1 (said). */
static int run_mpirun(int np, int argc, char **argv, MpiFigures *f) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return fprintf(stderr, "error: --mpi: cannot find this program's path\n"), -1;
    exe[n] = '\0';
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char *cmd = NULL;
    size_t len = 0;
    FILE *c = open_memstream(&cmd, &len);
    if (!c) DIE("out of memory");
    fprintf(c, "mpirun %s-np %d '%s'", np > cores ? "--oversubscribe " : "", np, exe);
    for (int i = 1; i < argc; i++) {
        fputs(" '", c);
        for (const char *p = argv[i]; *p; p++) /* single-quoted for the shell */
            *p == '\'' ? fputs("'\\''", c) : fputc(*p, c);
        fputc('\'', c);
    }
    fputs(" 2>&1", c);
    fclose(c);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p) return fprintf(stderr, "error: --mpi: cannot start mpirun\n"), -1;
    char line[1024], last[1024] = "";
    bool got = false, banner = true; /* its start-up lines, up to the first empty one: ours said the same */
    while (fgets(line, sizeof line, p)) {
        if (banner) {
            banner = line[0] != '\n';
            snprintf(last, sizeof last, "%s", line);
            continue;
        }
        if (!strncmp(line, BENCH_MPI_LINE, strlen(BENCH_MPI_LINE))) {
            got = sscanf(line + strlen(BENCH_MPI_LINE), "%d %lf %lf %lf %lf %lf", &f->np, &f->tok_s, &f->step_ms,
                         &f->reduce_ms, &f->alone_ms, &f->mib) == 6;
            continue;
        }
        fputs(line, stdout);
        snprintf(last, sizeof last, "%s", line);
    }
    int status = pclose(p);
    if (status != 0 || !got) {
        fprintf(stderr, "error: --mpi: mpirun -np %d failed (%s)\n", np, last[0] ? "its output is above" : "no output");
        if (getuid() == 0 && !getenv("OMPI_ALLOW_RUN_AS_ROOT"))
            fprintf(stderr, "hint: as root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n");
        return -1;
    }
    return 0;
}

int bench_mpi(const BenchOptions *o, const Config *cfg, int argc, char **argv) {
    if (dist_launched()) return bench_mpi_ranks(o, cfg);
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        fprintf(stderr, "error: --mpi: mpirun not found\nhint: scripts/deps.sh installs Open MPI (openmpi-bin)\n");
        return 1;
    }
    /* the children get --threads 1 unless the command line set it */
    char **args = xmalloc(((size_t)argc + 3) * sizeof *args);
    int k = 0;
    for (int i = 0; i < argc; i++) args[k++] = argv[i];
    if (!o->threads_given) args[k++] = "--threads", args[k++] = "1";
    args[k] = NULL;
    MpiFigures f[2];
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        printf("mpirun -np %d:\n", i + 1);
        rc = run_mpirun(i + 1, k, args, &f[i]);
    }
    free(args);
    if (rc != 0) return 1;
    printf("\ndata-parallel scaling on this machine (%ld cores):\n", sysconf(_SC_NPROCESSORS_ONLN));
    printf("  %5s %10s %10s %11s %14s %15s %10s\n", "ranks", "tok/s", "ms/step", "efficiency", "allreduce ms",
           "share of step", "alone ms");
    for (int i = 0; i < 2; i++)
        printf("  %5d %10.0f %10.1f %10.0f%% %14.2f %14.1f%% %10.2f\n", f[i].np, f[i].tok_s, f[i].step_ms,
               100 * f[i].tok_s / (f[i].np * f[0].tok_s), f[i].reduce_ms, 100 * f[i].reduce_ms / f[i].step_ms,
               f[i].alone_ms);
    printf("  efficiency = tok/s(N) / (N x tok/s(1)); the allreduce alone moves %.1f MiB per rank per step\n",
           f[1].mib);
    return 0;
}
