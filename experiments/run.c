#include "run.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int make_dirs(const char *path, Err *e) {
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return err_set(e, "%s: path too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return err_set(e, "%s: cannot create folder: %s", buf, strerror(errno));
        if (!is_directory(buf)) return err_set(e, "%s: exists and is not a folder", buf);
        *p = saved;
        if (!saved) break;
    }
    return 0;
}

int write_file_atomic(const char *path, const char *text, Err *e) { return write_bytes_atomic(path, text, strlen(text), e); }

int write_bytes_atomic(const char *path, const void *text, size_t n, Err *e) {
    char tmp[1100];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return err_set(e, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return err_set(e, "%s: cannot write: %s", tmp, strerror(errno));
    bool ok = fwrite(text, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved_errno = errno;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        if (ok) saved_errno = errno;
        remove(tmp);
        return err_set(e, "%s: cannot write: %s", path, strerror(saved_errno));
    }
    return 0;
}

bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

bool is_directory(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median_of(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int path_join(char *buf, size_t size, const char *dir, const char *name, Err *e) {
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size) return err_set(e, "%s/%s: path too long", dir, name);
    return 0;
}

int parse_int_arg(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "error: %s: expected an integer in [%d, %d], got '%s'\n", flag, lo, hi, v ? v : "");
        return -1;
    }
    *out = (int)x;
    return 0;
}
