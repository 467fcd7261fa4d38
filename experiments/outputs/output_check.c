/* output_check.c: the checks on output names (output_check.h). */
#include "output_check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"
#include "utf8.h"

const char *const RUN_OWN_FILES[] = {"config.json",  "model.safetensors", "metrics.jsonl", "provenance.json",
                                     "state.json",   "result.json",       "samples.txt",   "loss.png",
                                     "index.html",   ".lock",             NULL};

bool output_is_run_file(const char *name) {
    for (int i = 0; RUN_OWN_FILES[i]; i++)
        if (!strcmp(name, RUN_OWN_FILES[i])) return true;
    return false;
}

int output_name_check(const char *what, const char *name, Err *e) {
    size_t n = strlen(name), ok = utf8_valid_prefix((const unsigned char *)name, n);
    if (ok < n)
        return err_set(e, "%s %s: not valid UTF-8 (byte %zu): the plots and pages print it", what, name, ok + 1),
               err_hint(e, "pick a name of UTF-8 text");
    return 0;
}

/* The folder path names, "." for a bare name; into buf. */
static void folder_of(const char *path, char *buf, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, size, ".");
    else if (slash == path)
        snprintf(buf, size, "/");
    else
        snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

int output_dir_check(const char *what, const char *dir, const char *hint_flag, Err *e) {
    char at[1100];
    if (snprintf(at, sizeof at, "%s", dir) >= (int)sizeof at) return err_set(e, "%s %.60s...: path too long", what, dir);
    /* the nearest part of the path that exists: it must be a writable folder */
    for (;;) {
        struct stat st;
        if (stat(at, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) return err_set(e, "%s %s: %s is a file, not a folder", what, dir, at);
            if (access(at, W_OK | X_OK) != 0) {
                if (!strcmp(at, dir))
                    err_set(e, "%s %s: cannot write in it: %s", what, dir, strerror(errno));
                else
                    err_set(e, "%s %s: cannot write in %s: %s", what, dir, at, strerror(errno));
                return hint_flag ? err_hint(e, "give %s a folder you can write in", hint_flag) : -1;
            }
            return 0;
        }
        if (errno != ENOENT) return err_set(e, "%s %s: %s", what, dir, strerror(errno));
        char up[1100];
        size_t n = strlen(at);
        while (n > 1 && at[n - 1] == '/') at[--n] = '\0'; /* "a/b/" is a/b */
        folder_of(at, up, sizeof up);
        if (!strcmp(up, at)) return 0; /* "." or "/" missing: let the write say so */
        snprintf(at, sizeof at, "%s", up);
    }
}

/* Whether the file at path starts as a page does. */
static bool is_page(const char *path) {
    FILE *f = fopen_regular(path, "r", NULL);
    if (!f) return false;
    char head[64] = "";
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    return !strncmp(head, "<!DOCTYPE html>", 15) || !strncasecmp(head, "<html", 5);
}

int output_page_check(const char *what, const char *path, bool force, Err *e) {
    size_t n = strlen(path);
    if (!n) return err_set(e, "%s: an empty name", what);
    if (path[n - 1] == '/' || is_directory(path))
        return err_set(e, "%s %s: a folder, not a file name", what, path),
               err_hint(e, "name the page's file, e.g. %s%sreport.html", path, path[n - 1] == '/' ? "" : "/");
    char folder[1100];
    folder_of(path, folder, sizeof folder);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char config[1200];
    if (output_is_run_file(base) && path_join(config, sizeof config, folder, "config.json", NULL) == 0 &&
        file_exists(config))
        return err_set(e, "%s %s: one of the run's own files in %s", what, path, folder),
               err_hint(e, "name another file: a run's files are never replaced by a page");
    struct stat st;
    if (lstat(path, &st) == 0 && !force && (!S_ISREG(st.st_mode) || !is_page(path)))
        return err_set(e, "%s %s: exists and is not a page", what, path),
               err_hint(e, "name another file, or add --force to replace it");
    if (!is_directory(folder)) return err_set(e, "%s %s: no such folder: %s", what, path, folder);
    if (access(folder, W_OK | X_OK) != 0) return err_set(e, "%s %s: cannot write in %s: %s", what, path, folder, strerror(errno));
    return 0;
}
