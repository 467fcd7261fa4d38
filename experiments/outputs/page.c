/* page.c: the pages of run folders (page.h); the grid's and ./report's are
 * in page_grid.c. Each page is its data (JSON, built here with cJSON from
 * the folder's files) with page.js and uPlot around it (page_html). */
#include "page.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

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
 * not parse (one cut short by a killed run) is skipped and noted. With
 * !full, the validation columns alone. The last step in *last (0: none). */
cJSON *page_metrics(const char *dir, bool full, long *last, cJSON *notes) {
    static const char *const cols[] = {"step", "train", "time", "lr", "tok_s", "val_step", "val_time", "val"};
    cJSON *m = cJSON_CreateObject();
    cJSON *c[8];
    for (int i = 0; i < 8; i++) cJSON_AddItemToObject(m, cols[i], c[i] = cJSON_CreateArray());
    *last = 0;
    char path[1200];
    FILE *f = path_join(path, sizeof path, dir, "metrics.jsonl", NULL) == 0 ? fopen_regular(path, "r", NULL) : NULL;
    if (!f) {
        page_note(notes, "%s: no metrics.jsonl: nothing logged yet", dir);
        return m;
    }
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, bad = 0, first_bad = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        cJSON *j = cJSON_Parse(line);
        double s = number(j, "step");
        if (!j || !isfinite(s)) {
            if (!bad++) first_bad = lineno;
            cJSON_Delete(j);
            continue;
        }
        double v = number(j, "val_bpb"), t = number(j, "time_s");
        if (full) {
            add_num(c[0], s), add_num(c[1], number(j, "loss") / M_LN2), add_num(c[2], t);
            add_num(c[3], number(j, "lr")), add_num(c[4], number(j, "tok_s"));
        }
        if (isfinite(v)) add_num(c[5], s), add_num(c[6], t), add_num(c[7], v);
        *last = (long)s;
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    if (bad)
        page_note(notes, "%s/metrics.jsonl: %ld line%s not read (from line %ld: cut short or not JSON); the %ld "
                         "other%s shown", dir, bad, bad == 1 ? "" : "s", first_bad, lineno - bad,
                  lineno - bad == 1 ? " is" : "s are");
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

/* Whether another process holds the run folder's lock: a run is training there. */
static bool folder_locked(const char *dir) {
    char path[1200];
    if (path_join(path, sizeof path, dir, ".lock", NULL) != 0) return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases the shared lock, if it was taken */
    return held;
}

/* A run folder's state, read from it: result.json (./ablate's), then the
 * lock, then its last logged step against its steps. */
cJSON *page_folder_status(const char *dir, long last, long steps) {
    cJSON *st = cJSON_CreateObject();
    const char *state = last >= steps && steps > 0 ? "done" : "stopped";
    long step = last;
    char *text = page_read_text(dir, "result.json", 1 << 16);
    cJSON *res = text ? cJSON_Parse(text) : NULL;
    const cJSON *s = cJSON_GetObjectItem(res, "status");
    if (folder_locked(dir))
        state = "running";
    else if (cJSON_IsString(s) && !strcmp(s->valuestring, "diverged")) {
        state = "diverged";
        if (isfinite(number(res, "diverged_step"))) step = (long)number(res, "diverged_step");
    } else if (cJSON_IsString(s) && !strcmp(s->valuestring, "done"))
        state = "done";
    cJSON_AddStringToObject(st, "state", state);
    cJSON_AddNumberToObject(st, "step", (double)step);
    cJSON_AddNumberToObject(st, "steps", (double)steps);
    cJSON_Delete(res);
    free(text);
    return st;
}

int page_write_run(const char *dir, const PageStatus *given, Err *e) {
    char name[256], path[1200];
    if (path_join(path, sizeof path, dir, "index.html", e) != 0) return -1;
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
    cJSON *st;
    if (given) {
        st = cJSON_CreateObject();
        cJSON_AddStringToObject(st, "state", given->state);
        cJSON_AddNumberToObject(st, "step", (double)given->step);
        cJSON_AddNumberToObject(st, "steps", (double)given->steps);
    } else {
        st = page_folder_status(dir, last, cfg.train.steps);
    }
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
