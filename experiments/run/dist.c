/* dist.c: see dist.h. */
#include "dist.h"
#include "run.h"

#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static bool on;        /* MPI_Init was called */
static int rank, size = 1;
static int saved_stdout = -1;

bool dist_launched(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return true;
    }
    return false;
}

/* The first of vars set to a whole number in [0, INT_MAX], or fallback. */
static int env_number(const char *const *vars, int fallback) {
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long x = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && x >= 0 && x <= INT_MAX) return (int)x;
    }
    return fallback;
}

int dist_launched_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL};
    int n = env_number(vars, 1);
    return n > 0 ? n : 1;
}

int dist_launched_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL};
    return env_number(vars, 0);
}

int dist_refused(void) { return dist_rank() == 0 ? 2 : 0; }

void dist_init(int *argc, char ***argv) {
    if (on || !dist_launched()) return;
    int provided;
    /* OpenMP threads never call MPI: only the main thread does */
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "error: MPI_Init failed\n");
        exit(1);
    }
    on = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* a failed collective (a rank gone, a broken link) ends the whole job
     * with Open MPI's message: no rank is left waiting */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    if (rank > 0) {
        fflush(NULL);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            saved_stdout = dup(STDOUT_FILENO);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
            close(null);
        }
    }
}

void dist_finalize(void) {
    if (!on) return;
    fflush(NULL);
    MPI_Finalize();
    on = false;
}

int dist_rank(void) { return rank; }
int dist_size(void) { return size; }

int dist_local_size(void) {
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int n = v ? atoi(v) : 0;
    return n > 0 ? n : 1;
}

int dist_default_threads(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    int bound = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (cores < 1) cores = 1;
    if (bound > 0 && bound < cores) return bound; /* the launcher bound this rank */
    long n = cores / dist_local_size();
    return n > 0 ? (int)n : 1;
}

void dist_show_output(void) {
    if (saved_stdout < 0) return;
    fflush(stdout);
    dup2(saved_stdout, STDOUT_FILENO);
    close(saved_stdout);
    saved_stdout = -1;
}

int dist_agree(int rc, Err *e) {
    if (size == 1) return rc;
    int mine = rc != 0 ? rank : size, first;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == size) return 0;
    Err got;
    if (rank == first) got = *e;
    MPI_Bcast(&got, (int)sizeof got, MPI_BYTE, first, MPI_COMM_WORLD);
    if (first == 0) {
        *e = got;
    } else {
        err_set(e, "rank %d: %s", first, got.msg);
        memcpy(e->hint, got.hint, sizeof e->hint);
    }
    return -1;
}

bool dist_any(bool flag) {
    if (size == 1) return flag;
    int mine = flag, any;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any != 0;
}

int dist_max(int x) {
    if (size == 1) return x;
    int max;
    MPI_Allreduce(&x, &max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

void dist_allreduce_mean(float *x, long n) {
    if (size == 1) return;
    /* MPI counts are ints: a slab past 2^31 elements goes in pieces */
    for (long at = 0; at < n; at += INT_MAX) {
        int count = n - at < INT_MAX ? (int)(n - at) : INT_MAX;
        MPI_Allreduce(MPI_IN_PLACE, x + at, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    /* the sum of the ranks' mean-loss gradients over the rank count: the
     * gradient of the mean loss over all N B rows (exactly, up to rounding) */
    const float inv = 1.0f / (float)size;
    const bool power_of_two = (size & (size - 1)) == 0; /* then x * inv is x / size exactly */
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (long i = 0; i < n; i++) x[i] = power_of_two ? x[i] * inv : x[i] / (float)size;
}

void dist_sum(double *x, int n) {
    if (size == 1) return;
    MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

void dist_bcast(void *buf, size_t bytes, int root) {
    if (size == 1) return;
    for (size_t at = 0; at < bytes; at += INT_MAX) {
        size_t count = bytes - at < INT_MAX ? bytes - at : INT_MAX;
        MPI_Bcast((char *)buf + at, (int)count, MPI_BYTE, root, MPI_COMM_WORLD);
    }
}

bool dist_same(uint64_t x, int *differs) {
    *differs = -1;
    if (size == 1) return true;
    uint64_t *all = xmalloc((size_t)size * sizeof *all);
    MPI_Allgather(&x, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 1; r < size && *differs < 0; r++)
        if (all[r] != all[0]) *differs = r;
    free(all);
    return *differs < 0;
}

void dist_barrier(void) {
    if (size > 1) MPI_Barrier(MPI_COMM_WORLD);
}

/* the CPU time of this process, its threads together */
static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void dist_wait_idle(double *waited_s, double *cpu_s) {
    *waited_s = *cpu_s = 0;
    if (size == 1) return;
    const double t0 = now_seconds(), c0 = cpu_seconds();
    /* Open MPI's blocking collectives poll without sleeping: a rank waiting
     * an hour for another's last run would hold a core all that time. A
     * nonblocking barrier tested between naps (50 us, doubling to 20 ms)
     * costs at most a nap's latency and no core. */
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    long nap_ns = 50000;
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL);
        if (nap_ns < 20000000) nap_ns *= 2;
    }
    *waited_s = now_seconds() - t0;
    *cpu_s = cpu_seconds() - c0;
}

uint64_t dist_hash_floats(const float *x, long n, uint64_t h) {
    /* FNV-1a's step over 32-bit words instead of bytes: any flipped bit of
     * any value changes the hash */
    for (long i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, &x[i], sizeof w);
        h = (h ^ w) * 0x100000001b3ULL;
    }
    return h;
}
