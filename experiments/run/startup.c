#include "dist.h"
#include "startup.h"

#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "interrupt.h"
#include "memory.h"
#include "tensor.h"

static bool unset(const char *name) {
    const char *v = getenv(name);
    return !v || !*v;
}

/* As soon as the program's code can run, once the dynamic loader has
 * placed the libraries and before their own set-up (OpenBLAS's, Open MPI's
 * and oneDNN's take tens of milliseconds on a busy machine): the process is
 * named for the command, and a SIGINT or SIGTERM is recorded rather than
 * killing it (interrupt.h), so that a signal during start-up ends the
 * command with its usual status. .preinit_array runs before every library's
 * constructor; only the dynamic loader's own work comes before it. */
static void startup_early(int argc, char **argv, char **envp) {
    (void)argc, (void)envp;
    /* a re-exec through /proc/self/exe would leave it named "exe": pgrep, pkill and top look for the command */
    const char *name = argv && argv[0] ? strrchr(argv[0], '/') : NULL;
    prctl(PR_SET_NAME, name ? name + 1 : argv && argv[0] ? argv[0] : "attnlab", 0, 0, 0);
    interrupt_install();
}
/* Under AddressSanitizer its runtime sets itself up from .preinit_array too,
 * and code it instruments cannot run before that: there the hook is the
 * program's first constructor instead, after the libraries' set-up. */
#if defined(__SANITIZE_ADDRESS__)
#define ATTNLAB_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTNLAB_SANITIZED 1
#endif
#endif
#ifdef ATTNLAB_SANITIZED
__attribute__((constructor(101))) static void startup_early_sanitized(void) {
    char *argv[] = {program_invocation_name, NULL};
    startup_early(1, argv, NULL);
}
#else
__attribute__((section(".preinit_array"), used)) static void (*const startup_early_hook)(int, char **,
                                                                                        char **) = startup_early;
#endif

/* glibc raises its mmap threshold to the largest block freed (up to 32 MiB);
 * blocks below it then come from the heap, where freed memory stays
 * resident, so a second step or round of the same size peaked higher than the
 * first (./bench --rounds 3 --precision bf16: 228, 358, 392 MiB). A fixed
 * threshold returns each large block at its free. It is 1 MiB, not glibc's
 * starting 128 KiB: multithreaded OpenBLAS (0.3.21) mallocs and frees three
 * 512 KiB buffers in every sgemm call, and at 128 KiB each became an mmap and
 * a munmap (72 of each in a step of ./bench at 2 threads, whose fp32 step ran
 * 3-5% slower for it). */
bool startup_malloc_policy(void) {
    if (!unset("MALLOC_MMAP_THRESHOLD_")) return false;
    mallopt(M_MMAP_THRESHOLD, STARTUP_MMAP_THRESHOLD);
    return true;
}

void command_startup(int argc, char **argv) {
    (void)argc;
    prctl(PR_SET_NAME, program_invocation_short_name, 0, 0, 0);
    sigset_t stop, was;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    char set[64] = "";
    if (unset("GOMP_SPINCOUNT") && unset("OMP_WAIT_POLICY")) {
        setenv("GOMP_SPINCOUNT", "1000", 1);
        strcat(set, " GOMP_SPINCOUNT");
    }
    if (unset("OPENBLAS_CORETYPE") && cpu_has_avx512() && !blas_kernel_is_avx512(engine_blas_kernel())) {
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
        strcat(set, " OPENBLAS_CORETYPE");
    }
    startup_malloc_policy();
    /* before any library allocates more: a signal during a long allocation or
     * a product is seen (interrupt.h) */
    interrupt_install();
    /* a signal that came before the re-exec (or after it, while the new
     * image loads) stays pending, blocked, until the new image's handler is
     * installed: the mask survives exec, the handler does not */
    sigprocmask(SIG_BLOCK, &stop, &was);
    if (*set && !interrupt_pending()) {
        setenv("ATTNLAB_SET_ENV", set + 1, 1);
        fflush(NULL);
        execv("/proc/self/exe", argv);
        /* Not restarted (no /proc, say): go on as we are; only speed differs. */
    }
    sigdelset(&was, SIGINT);
    sigdelset(&was, SIGTERM);
    sigprocmask(SIG_SETMASK, &was, NULL); /* a pending signal reaches the handler here */
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

void command_one_process(const char *command) {
    if (!dist_launched() || dist_launched_size() <= 1) return;
    /* the other ranks end quietly and first, with 0, so that mpirun does not
     * stop rank 0 before its message: the job's status is rank 0's */
    if (dist_launched_rank() != 0) exit(0);
    fprintf(stderr,
            "error: ./%s under mpirun -np %d: it runs as one process, and each rank would run it whole\n"
            "hint: run it without mpirun (mpirun is for ./train, ./ablate and ./bench)\n",
            command, dist_launched_size());
    exit(2);
}

int command_main_distributed(int argc, char **argv, int (*body)(int argc, char **argv)) {
    command_startup(argc, argv);
    dist_init(&argc, &argv);
    int status = body(argc, argv);
    dist_finalize();
    return status;
}
