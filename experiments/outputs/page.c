/* page.c: the pages of run folders (page.h); the grid's and ./report's are
 * in page_grid.c. Each page is its data (JSON, built here with cJSON from
 * the folder's files) with page.js and uPlot around it (page_html). */
#include "page.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "lines.h"
#include "options.h"
#include "page_data.h"
#include "provenance.h"
#include "run.h"

/* page/page.js and page/page.css, built in by page_assets.c */
extern const char page_js[], page_css[];

char *page_read_text(const char *dir, const char *name, size_t max) {
    char path[1200];
    if (path_join(path, sizeof path, dir, name, NULL) != 0) return NULL;
    FILE *f = fopen_regular(path, "r", NULL); /* a FIFO there must not hang the page */
    if (!f) return NULL;
    char *buf = xmalloc(max + 1);
    size_t n = fread(buf, 1, max, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static char *lib_js, *lib_css;
static int lib_state; /* 0 not looked for, 1 found, -1 missing */

const char *page_library(void) {
    if (lib_state) return lib_js;
    char dir[1100] = "", exe[1024];
    const char *env = getenv("ATTNLAB_UPLOT");
    ssize_t n;
    if (env && *env)
        snprintf(dir, sizeof dir, "%s", env);
    else if ((n = readlink("/proc/self/exe", exe, sizeof exe - 1)) > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        snprintf(dir, sizeof dir, "%s/vendor/uplot", exe);
    }
    lib_js = page_read_text(dir, "uPlot.iife.min.js", 1 << 20);
    lib_css = page_read_text(dir, "uPlot.min.css", 1 << 16);
    lib_state = lib_js && lib_css && strlen(lib_js) > 1000 ? 1 : -1;
    if (lib_state < 0) {
        free(lib_js), free(lib_css);
        lib_js = lib_css = NULL;
        fprintf(stderr, "note: index.html pages are written without charts: uPlot is not installed (%s); "
                        "`make uplot` fetches it\n", dir[0] ? dir : "vendor/uplot");
    }
    return lib_js;
}

/* The data as a JSON text safe inside <script>: every '<' (only in strings) as \u003c. */
static void put_json(FILE *f, const cJSON *data) {
    char *json = cJSON_PrintUnformatted(data);
    if (!json) DIE_OOM(0);
    for (const char *p = json; *p; p++)
        if (*p == '<')
            fputs("\\u003c", f);
        else
            fputc(*p, f);
    free(json);
}

static void put_escaped(FILE *f, const char *s) {
    for (; *s; s++)
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
}

int page_html(const char *path, const char *title, cJSON *data, Err *e) {
    const char *lib = page_library();
    cJSON_AddStringToObject(data, "nolib", "charts need uPlot: run `make uplot` in the attnlab folder, then "
                                           "write this page again (./report DIR)");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) DIE_OOM(0);
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    put_escaped(f, title);
    fprintf(f, "</title>\n<style>\n%s\n%s</style>\n</head>\n<body>\n<div id=\"app\"></div>\n", lib ? lib_css : "",
            page_css);
    fputs("<noscript>This page is drawn by its script: allow JavaScript for file:// pages.</noscript>\n"
          "<script id=\"data\" type=\"application/json\">", f);
    put_json(f, data);
    fputs("</script>\n", f);
    if (lib) fprintf(f, "<script>\n%s\n</script>\n", lib);
    fprintf(f, "<script>\n%s</script>\n</body>\n</html>\n", page_js);
    if (fclose(f) != 0) DIE_OOM(len);
    int rc = write_file_atomic(path, text, e);
    free(text);
    return rc;
}

void page_note(cJSON *notes, const char *fmt, ...) {
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cJSON_AddItemToArray(notes, cJSON_CreateString(buf));
}

static void add_num(cJSON *arr, double x) {
    cJSON_AddItemToArray(arr, isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull());
}

static double number(const cJSON *j, const char *key) {
    const cJSON *x = cJSON_GetObjectItem(j, key);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* metrics.jsonl into columns: every logged step's train bpb, time, lr and
 * tok/s, and the validation bpb where the step evaluated. A line that does
 * not parse (one cut short by a killed run) or whose step is not a whole
 * number in range is skipped and noted; a line over the reader's bound or a
 * read error ends the reading there, noted (the lines before it are shown).
 * With !full, the validation columns alone. The last step in *last (0: none). */
cJSON *page_metrics(const char *dir, bool full, long *last, cJSON *notes) {
    static const char *const cols[] = {"step", "train", "time", "lr", "tok_s", "val_step", "val_time", "val"};
    cJSON *m = cJSON_CreateObject();
    cJSON *c[8];
    for (int i = 0; i < 8; i++) cJSON_AddItemToObject(m, cols[i], c[i] = cJSON_CreateArray());
    *last = 0;
    char path[1200];
    LineReader lr;
    Err e;
    if (path_join(path, sizeof path, dir, "metrics.jsonl", NULL) != 0 ||
        line_open(&lr, path, LINE_MAX_BYTES, &e) != 0) {
        page_note(notes, "%s: no metrics.jsonl: nothing logged yet", dir);
        return m;
    }
    long bad = 0, first_bad = 0;
    int got;
    while ((got = line_next(&lr, &e)) > 0) {
        cJSON *j = cJSON_Parse(lr.line);
        long s;
        if (!j || !whole_in_range(number(j, "step"), 0, LONG_MAX, &s)) {
            if (!bad++) first_bad = lr.number;
            cJSON_Delete(j);
            continue;
        }
        double v = number(j, "val_bpb"), t = number(j, "time_s");
        if (full) {
            add_num(c[0], (double)s), add_num(c[1], number(j, "loss") / M_LN2), add_num(c[2], t);
            add_num(c[3], number(j, "lr")), add_num(c[4], number(j, "tok_s"));
        }
        if (isfinite(v)) add_num(c[5], (double)s), add_num(c[6], t), add_num(c[7], v);
        *last = s;
        cJSON_Delete(j);
    }
    long lines = got < 0 ? lr.number - 1 : lr.number;
    line_close(&lr);
    if (got < 0) page_note(notes, "%s; the lines after it are not shown", e.msg);
    if (bad)
        page_note(notes, "%s/metrics.jsonl: %ld line%s not read (from line %ld: cut short, not JSON or no step); "
                         "the %ld other%s shown", dir, bad, bad == 1 ? "" : "s", first_bad, lines - bad,
                  lines - bad == 1 ? " is" : "s are");
    return m;
}

/* config.json into a Config (without the corpus and the data-parallel
 * notes); *json gets the parsed file (the caller deletes it). -1 when it is
 * missing or not a run's config. */
int page_config(const char *dir, Config *cfg, cJSON **json) {
    config_defaults(cfg);
    *json = NULL;
    char *text = page_read_text(dir, "config.json", 1 << 18);
    if (!text) return -1;
    *json = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(*json)) return -1;
    cJSON *copy = cJSON_Duplicate(*json, 1);
    cJSON_DeleteItemFromObject(copy, "corpus");
    cJSON_DeleteItemFromObject(copy, "ranks");
    cJSON_DeleteItemFromObject(copy, "effective_batch");
    Err e;
    int rc = config_from_json(cfg, copy, &e);
    cJSON_Delete(copy);
    return rc;
}

/* The config as rows {name, value, def, group, changed}, changed first. */
static cJSON *config_rows(const Config *cfg, const cJSON *json) {
    static const char *const groups[] = {"model", "train", "sample"};
    Config d;
    config_defaults(&d);
    cJSON *rows = cJSON_CreateArray();
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < option_count(); i++) {
            const OptDef *o = option_at(i);
            char v[320], w[320];
            bool changed = strcmp(option_format(cfg, o, v, sizeof v), option_format(&d, o, w, sizeof w)) != 0;
            if (changed != (pass == 0)) continue;
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "name", o->name);
            cJSON_AddStringToObject(r, "value", v);
            cJSON_AddStringToObject(r, "def", w);
            cJSON_AddStringToObject(r, "group", groups[o->group]);
            cJSON_AddBoolToObject(r, "changed", changed);
            cJSON_AddItemToArray(rows, r);
        }
    static const char *const extra[] = {"corpus", "ranks", "effective_batch"};
    for (int i = 0; i < 3; i++) { /* what config.json holds beside the options */
        const cJSON *x = cJSON_GetObjectItem(json, extra[i]);
        if (!x) continue;
        char v[1100];
        if (cJSON_IsString(x))
            snprintf(v, sizeof v, "%s", x->valuestring);
        else
            snprintf(v, sizeof v, "%g", x->valuedouble);
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "name", extra[i]);
        cJSON_AddStringToObject(r, "value", v);
        cJSON_AddNullToObject(r, "def");
        cJSON_AddStringToObject(r, "group", "run");
        cJSON_AddBoolToObject(r, "changed", i == 0);
        cJSON_AddItemToArray(rows, r);
    }
    return rows;
}

/* The pid written in dir/.lock by the process that holds it (run_lock), or
 * 0 when no other process holds it. */
static long lock_holder(const char *dir) {
    char path[1200];
    if (path_join(path, sizeof path, dir, ".lock", NULL) != 0) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) return 0;
    long pid = 0;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        char text[64];
        ssize_t n = pread(fd, text, sizeof text - 1, 0);
        text[n > 0 ? n : 0] = '\0';
        if (sscanf(text, "%ld", &pid) != 1 || pid <= 0) pid = 0;
    }
    close(fd); /* releases the shared lock, if it was taken */
    return pid;
}

static const char *const run_states[] = {"running", "done", "interrupted", "diverged", "failed"};

int page_record_state(const char *dir, const PageStatus *st, Err *e) {
    char path[1200];
    if (path_join(path, sizeof path, dir, RUN_STATE_FILE, e) != 0) return -1;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "state", st->state);
    cJSON_AddNumberToObject(j, "step", (double)st->step);
    cJSON_AddNumberToObject(j, "steps", (double)st->steps);
    if (st->why && *st->why) cJSON_AddStringToObject(j, "why", st->why);
    cJSON_AddNumberToObject(j, "pid", (double)getpid());
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text) DIE_OOM(0);
    size_t len = strlen(text);
    char *line = xmalloc(len + 2);
    memcpy(line, text, len);
    memcpy(line + len, "\n", 2);
    free(text);
    int rc = write_file_atomic(path, line, e);
    free(line);
    return rc;
}

/* A run folder's state, from its own record: state.json (the trainer's,
 * rewritten on every way out of a run), else result.json (./ablate's), else
 * its last logged step against its steps. A record saying "running" is
 * believed only from the process it names: this one, or the one holding the
 * folder's lock; otherwise that process ended without a word (killed). */
cJSON *page_folder_status(const char *dir, long last, long steps) {
    cJSON *st = cJSON_CreateObject();
    const char *state = last >= steps && steps > 0 ? "done" : "stopped", *why = NULL;
    long step = last, n;
    char *text = page_read_text(dir, RUN_STATE_FILE, 1 << 16);
    cJSON *rec = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *s = cJSON_GetObjectItem(rec, "state"), *w = cJSON_GetObjectItem(rec, "why");
    int known = -1;
    for (int i = 0; cJSON_IsString(s) && i < 5; i++)
        if (!strcmp(s->valuestring, run_states[i])) known = i;
    if (known >= 0) {
        state = run_states[known];
        if (whole_in_range(number(rec, "step"), 0, LONG_MAX, &n)) step = n;
        if (whole_in_range(number(rec, "steps"), 0, LONG_MAX, &n)) steps = n;
        if (cJSON_IsString(w)) why = w->valuestring;
        long pid;
        if (known == 0 && !(whole_in_range(number(rec, "pid"), 1, LONG_MAX, &pid) &&
                            (pid == (long)getpid() || pid == lock_holder(dir)))) {
            state = "stopped";
            why = "its process ended without a word (killed?); the same ./train --resume goes on";
            step = last;
        }
    } else {
        text = page_read_text(dir, "result.json", 1 << 16);
        cJSON *res = text ? cJSON_Parse(text) : NULL;
        free(text);
        s = cJSON_GetObjectItem(res, "status");
        if (cJSON_IsString(s) && !strcmp(s->valuestring, "diverged")) {
            state = "diverged";
            if (whole_in_range(number(res, "diverged_step"), 0, LONG_MAX, &n)) step = n;
        } else if (cJSON_IsString(s) && !strcmp(s->valuestring, "done")) {
            state = "done";
        }
        cJSON_Delete(res);
    }
    cJSON_AddStringToObject(st, "state", state);
    cJSON_AddNumberToObject(st, "step", (double)step);
    cJSON_AddNumberToObject(st, "steps", (double)steps);
    if (why) cJSON_AddStringToObject(st, "why", why);
    cJSON_Delete(rec);
    return st;
}

int page_write_run(const char *dir, const PageStatus *given, Err *e) {
    char name[256], path[1200];
    if (path_join(path, sizeof path, dir, "index.html", e) != 0) return -1;
    if (given && page_record_state(dir, given, e) != 0) return -1;
    run_name_of(dir, name, sizeof name);
    cJSON *data = cJSON_CreateObject(), *notes = cJSON_CreateArray();
    cJSON_AddStringToObject(data, "kind", "run");
    cJSON_AddStringToObject(data, "name", name);
    long last;
    cJSON_AddItemToObject(data, "metrics", page_metrics(dir, true, &last, notes));
    Config cfg;
    cJSON *json;
    if (page_config(dir, &cfg, &json) != 0)
        page_note(notes, "%s/config.json: %s; the defaults are shown", dir, json ? "not a run's config" : "missing");
    cJSON_AddItemToObject(data, "config", config_rows(&cfg, json));
    cJSON_Delete(json);
    cJSON *st = page_folder_status(dir, last, cfg.train.steps);
    cJSON_AddItemToObject(data, "status", st);
    const char *state = cJSON_GetObjectItem(st, "state")->valuestring;
    static const char *const files[][2] = {{"samples", "samples.txt"}, {"spectrum", "spectrum.csv"},
                                           {"extrapolate", "extrapolate.csv"}};
    for (int i = 0; i < 3; i++) {
        char *text = page_read_text(dir, files[i][1], 4 << 20);
        cJSON_AddItemToObject(data, files[i][0], text ? cJSON_CreateString(text) : cJSON_CreateNull());
        free(text);
    }
    /* where it ran: provenance.json's segments, as they are */
    char *prov = page_read_text(dir, PROVENANCE_FILE, 1 << 18);
    cJSON *pj = prov ? cJSON_Parse(prov) : NULL, *segs = cJSON_DetachItemFromObject(pj, "segments");
    bool ok = cJSON_IsArray(segs);
    if (!ok) cJSON_Delete(segs);
    cJSON_AddItemToObject(data, "provenance", ok ? segs : cJSON_CreateNull());
    if (prov && !ok) page_note(notes, "%s/%s: not a provenance record", dir, PROVENANCE_FILE);
    cJSON_Delete(pj);
    free(prov);
    if (!strcmp(state, "done") && cJSON_IsNull(cJSON_GetObjectItem(data, "samples")) && cfg.sample.length > 0)
        page_note(notes, "%s: no samples.txt", dir);
    cJSON_AddNumberToObject(data, "reload_ms", 4000);
    cJSON_AddItemToObject(data, "notes", notes);
    int rc = page_html(path, name, data, e);
    cJSON_Delete(data);
    return rc;
}
