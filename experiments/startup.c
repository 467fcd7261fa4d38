#include "startup.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    if (!*set) return;
    setenv("ATTNLAB_SET_ENV", set + 1, 1);
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* Not restarted (no /proc, say): go on as we are; only speed differs. */
}

const char *threads_banner(int threads) {
    static char line[512];
    const char *kernel = engine_blas_kernel();
    int len = snprintf(line, sizeof line, "%d thread%s (OpenMP; OpenBLAS kernel %s)", threads, threads == 1 ? "" : "s",
                       kernel);
    char note[320];
    if (blas_kernel_note(cpu_has_avx512(), getenv("OPENBLAS_CORETYPE"), kernel, note, sizeof note))
        snprintf(line + len, sizeof line - (size_t)len, "\n%s", note);
    return line;
}
