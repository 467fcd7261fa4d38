#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
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
    /* a fresh file: whatever was left at tmp (a file from a killed run, a
     * FIFO, a symlink) is replaced, never written through */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int err = errno;
        if (fd >= 0) close(fd);
        return err_set(e, "%s: cannot write: %s", tmp, strerror(err));
    }
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

FILE *fopen_regular(const char *path, const char *mode, Err *e) {
    int flags = mode[0] == 'r' ? O_RDONLY : O_WRONLY | O_CREAT | (mode[0] == 'a' ? O_APPEND : O_TRUNC);
    int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0) {
        int err = errno;
        if (!(mode[0] == 'r' && err == ENOENT)) err_set(e, "%s: cannot open: %s", path, strerror(err));
        errno = err;
        return NULL;
    }
    struct stat st;
    FILE *f = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        err_set(e, "%s: not a regular file", path);
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, mode)))
        err_set(e, "%s: cannot open: %s", path, strerror(errno));
    if (!f) {
        close(fd);
        errno = EINVAL;
    }
    return f;
}

int run_lock(const char *dir, Err *e) {
    char path[1100];
    if (path_join(path, sizeof path, dir, ".lock", e) != 0) return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0666);
    if (fd < 0) return err_set(e, "%s: cannot make the folder's lock: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        char holder[64] = "";
        ssize_t got = pread(fd, holder, sizeof holder - 1, 0);
        close(fd);
        holder[got > 0 ? got : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        if (err != EWOULDBLOCK) return err_set(e, "%s: cannot lock: %s", path, strerror(err));
        /* "123 train": the holder's pid and command, as it wrote them below */
        long pid = 0;
        char command[32] = "";
        if (sscanf(holder, "%ld %31s", &pid, command) < 1 || pid <= 0) pid = 0;
        if (pid && command[0])
            err_set(e, "%s: in use by another command (./%s, pid %ld)", dir, command, pid);
        else if (pid)
            err_set(e, "%s: in use by another command (pid %ld)", dir, pid);
        else
            err_set(e, "%s: in use by another command", dir);
        return err_hint(e, "wait for it to finish, or pick another folder");
    }
    /* who holds it, for the message above; the lock is what counts */
    char holder[64];
    int n = snprintf(holder, sizeof holder, "%ld %.30s\n", (long)getpid(), program_invocation_short_name);
    bool noted = ftruncate(fd, 0) == 0 && pwrite(fd, holder, (size_t)n, 0) == n;
    (void)noted; /* when it is not, only the message above loses the pid */
    return fd;
}

void run_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing releases the flock */
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

void run_name_of(const char *path, char *out, size_t size) {
    char t[1100];
    snprintf(t, sizeof t, "%s", path);
    for (size_t n = strlen(t); n > 1 && t[n - 1] == '/'; n--) t[n - 1] = '\0';
    const char *slash = strrchr(t, '/');
    const char *base = slash && slash[1] ? slash + 1 : t;
    if (!is_directory(t) && !strcmp(base, "model.safetensors") && slash && slash > t) {
        /* runs/NAME/model.safetensors is named for its run folder */
        const char *start = slash;
        while (start > t && start[-1] != '/') start--;
        snprintf(out, size, "%.*s", (int)(slash - start), start);
        return;
    }
    size_t n = strlen(base);
    if (!is_directory(t) && n > strlen(".safetensors") && !strcmp(base + n - strlen(".safetensors"), ".safetensors"))
        n -= strlen(".safetensors");
    snprintf(out, size, "%.*s", (int)n, base);
}
