#include "dist.h"
#include "startup.h"

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interrupt.h"
#include "memory.h"
#include "tensor.h"

static bool unset(const char *name) {
    const char *v = getenv(name);
    return !v || !*v;
}

void command_startup(int argc, char **argv) {
    (void)argc;
    char set[64] = "";
    if (unset("GOMP_SPINCOUNT") && unset("OMP_WAIT_POLICY")) {
        setenv("GOMP_SPINCOUNT", "1000", 1);
        strcat(set, " GOMP_SPINCOUNT");
    }
    if (unset("OPENBLAS_CORETYPE") && cpu_has_avx512() && !blas_kernel_is_avx512(engine_blas_kernel())) {
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
        strcat(set, " OPENBLAS_CORETYPE");
    }
    /* before any library allocates more: a signal during a long allocation or
     * a product is seen (interrupt.h) */
    interrupt_install();
    if (!*set) return;
    setenv("ATTNLAB_SET_ENV", set + 1, 1);
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* Not restarted (no /proc, say): go on as we are; only speed differs. */
}

/* The CPUs this process may run on (its affinity mask: taskset, a
 * container's cpuset, a launcher's binding); the online ones when unknown. */
static int cpus_allowed(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int command_threads(int requested, FILE *notes, Err *e) {
    /* 0: OpenMP's default, the CPUs allowed unless OMP_NUM_THREADS says otherwise */
    int n = requested > 0 ? requested : engine_threads(), allowed = cpus_allowed();
    if (n > allowed) {
        /* more threads than CPUs only wait for each other, and each maps its own buffers */
        fprintf(notes, "note: %s %d: this process may use %d CPU%s, so %d thread%s\n",
                requested > 0 ? "--threads" : "OMP_NUM_THREADS", n, allowed, allowed == 1 ? "" : "s", allowed,
                allowed == 1 ? "" : "s");
        n = allowed;
    }
    char what[48];
    snprintf(what, sizeof what, "--threads %d", n);
    if (memory_check_threads(what, n, e) != 0) return -1;
    return engine_set_threads(n);
}

/* Processes other than this one that want a core, when the machine has been
 * busy for a while too (/proc/loadavg: the 1-minute load and the tasks
 * running at this moment, this one among them); 0 when unknown. The running
 * count is the least of a few readings 2 ms apart, so that a task passing
 * through does not count. */
static int other_busy(int cores) {
    double load1 = 0;
    int others = -1;
    for (int i = 0; i < 5; i++) {
        FILE *f = fopen("/proc/loadavg", "r");
        if (!f) return 0;
        int running = 0, total = 0;
        int got = fscanf(f, "%lf %*f %*f %d/%d", &load1, &running, &total);
        fclose(f);
        if (got != 3 || running < 1) return 0;
        if (others < 0 || running - 1 < others) others = running - 1;
        if (!others) return 0;
        usleep(2000);
    }
    /* the minute's average too, so that a passing compile does not count */
    return load1 >= others - 0.5 && others <= cores * 64 ? others : 0;
}

const char *threads_banner(int threads) {
    static char line[768];
    const char *kernel = engine_blas_kernel();
    int len = snprintf(line, sizeof line, "%d thread%s (OpenMP; OpenBLAS kernel %s)", threads, threads == 1 ? "" : "s",
                       kernel);
    char note[320];
    if (blas_kernel_note(cpu_has_avx512(), getenv("OPENBLAS_CORETYPE"), kernel, note, sizeof note))
        len += snprintf(line + len, sizeof line - (size_t)len, "\n%s", note);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int others = threads > 1 && cores > 0 ? other_busy((int)cores) : 0;
    if (others && others + threads > cores) {
        int free_cores = others < cores ? (int)cores - others : 1;
        snprintf(line + len, sizeof line - (size_t)len,
                 "\nnote: %d other process%s running on %ld cores, so some of the %d threads wait for a core; "
                 "--threads %d may be faster",
                 others, others == 1 ? " is" : "es are", cores, threads, free_cores);
    }
    return line;
}

int command_main_distributed(int argc, char **argv, int (*body)(int argc, char **argv)) {
    command_startup(argc, argv);
    dist_init(&argc, &argv);
    int status = body(argc, argv);
    dist_finalize();
    return status;
}
