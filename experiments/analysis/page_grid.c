/* page_grid.c: the page of a grid folder and ./report's page (page.h). */
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grid.h"
#include "page_data.h"
#include "provenance.h"
#include "run.h"

/* dir/name exists */
static bool has_file(const char *dir, const char *name) {
    char path[1200];
    return path_join(path, sizeof path, dir, name, NULL) == 0 && file_exists(path);
}

/* The run folders directly under dir (those with a config.json), sorted; the count. */
static int run_folders(const char *dir, char ***out) {
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    *out = NULL;
    if (!d) return 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        char sub[1200];
        if (ent->d_name[0] == '.' || path_join(sub, sizeof sub, dir, ent->d_name, NULL) != 0 || !is_directory(sub) ||
            !has_file(sub, "config.json"))
            continue;
        if (n == cap && !(*out = realloc(*out, (size_t)(cap = cap ? 2 * cap : 32) * sizeof **out))) DIE_OOM(0);
        (*out)[n++] = xstrdup(ent->d_name);
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort: a few hundred names at most */
        for (int j = i; j > 0 && strcmp((*out)[j], (*out)[j - 1]) < 0; j--) {
            char *t = (*out)[j];
            (*out)[j] = (*out)[j - 1], (*out)[j - 1] = t;
        }
    return n;
}

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

int page_kind(const char *dir, char *why, size_t size) {
    if (!is_directory(dir)) {
        snprintf(why, size, file_exists(dir) ? "a file, not a folder" : "no such folder");
        return PAGE_NONE;
    }
    if (has_file(dir, "config.json")) {
        Config cfg;
        cJSON *json;
        int rc = page_config(dir, &cfg, &json);
        cJSON_Delete(json);
        if (rc == 0) return PAGE_RUN;
        snprintf(why, size, "its config.json is not a run's config");
        return PAGE_NONE;
    }
    if (has_file(dir, "results.csv")) return PAGE_GRID;
    char **names;
    int n = run_folders(dir, &names);
    free_names(names, n);
    if (n) return PAGE_GRID;
    snprintf(why, size, "no config.json (a run's), results.csv (a grid's) nor run folders in it");
    return PAGE_NONE;
}

/* A link from a page in folder `from` to target, relative, with the bytes a
 * URL cannot hold escaped; target as given when either path cannot be resolved. */
static void href_of(const char *from, const char *target, char *out, size_t size) {
    char a[PATH_MAX], b[PATH_MAX], rel[PATH_MAX * 2] = "";
    if (!realpath(from, a) || !realpath(target, b)) {
        snprintf(rel, sizeof rel, "%s", target);
    } else {
        size_t i = 0; /* common: where the folders both paths share end, at a '/' */
        while (a[i] && a[i] == b[i]) i++;
        size_t common = i;
        if (a[i] || b[i] != '/') /* unless from is a folder above target */
            while (common > 0 && a[common] != '/') common--;
        size_t k = 0;
        for (const char *p = a + common; *p && k < sizeof rel; p++)
            if (*p == '/') k += (size_t)snprintf(rel + k, sizeof rel - k, "../");
        snprintf(rel + k, sizeof rel - k, "%s", b + common + 1);
    }
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)rel; *p && k + 4 < size; p++)
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/=,+", *p))
            out[k++] = (char)*p;
        else
            k += (size_t)snprintf(out + k, size - k, "%%%02X", *p);
    out[k] = '\0';
}

/* The fields of one CSV line as ./ablate writes them (quoted where they hold
 * a comma or a quote); the count, at most max. */
static int csv_fields(const char *line, char fields[][256], int max) {
    int n = 0;
    const char *p = line;
    while (n < max) {
        size_t k = 0;
        bool quoted = *p == '"';
        if (quoted) p++;
        for (; *p && (quoted || (*p != ',' && *p != '\n' && *p != '\r')); p++) {
            if (quoted && *p == '"') {
                if (p[1] != '"') {
                    quoted = false;
                    continue;
                }
                p++;
            }
            if (k + 1 < 256) fields[n][k++] = *p;
        }
        fields[n++][k] = '\0';
        if (*p != ',') break;
        p++;
    }
    return n;
}

/* The state of a run as words for the page, "done" or "running, step 40 of 100". */
static void state_words(const cJSON *st, char *buf, size_t size) {
    const char *s = cJSON_GetObjectItem(st, "state")->valuestring;
    long step = (long)cJSON_GetObjectItem(st, "step")->valuedouble;
    long steps = (long)cJSON_GetObjectItem(st, "steps")->valuedouble;
    if (!strcmp(s, "done"))
        snprintf(buf, size, "done");
    else
        snprintf(buf, size, "%s, step %ld of %ld", s, step, steps);
}

/* One run of a grid or a report: its name, link, state, validation curve,
 * and (for ./report) its options; what is missing goes to notes. */
static cJSON *run_entry(const char *name, const char *folder, const char *from, bool options, const char *status,
                        cJSON *notes) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "name", name);
    char href[2400], words[200] = "failed";
    if (!has_file(folder, "config.json")) {
        page_note(notes, "%s: %s", name, status && !strcmp(status, "failed") ? "failed, no run folder (results.md "
                                                                                 "says why)" : "no run folder");
        cJSON_AddStringToObject(r, "state", status && !strcmp(status, "failed") ? "failed" : "missing");
        cJSON_AddNullToObject(r, "href");
        cJSON_AddItemToObject(r, "val_step", cJSON_CreateArray());
        cJSON_AddItemToObject(r, "val", cJSON_CreateArray());
        return r;
    }
    cJSON *scratch = cJSON_CreateArray(), *json;
    long last;
    cJSON *m = page_metrics(folder, false, &last, scratch);
    Config cfg;
    page_config(folder, &cfg, &json);
    cJSON *st = page_folder_status(folder, last, cfg.train.steps);
    if (status && !strcmp(status, "failed"))
        page_note(notes, "%s: failed (results.md says why)", name);
    else if (strcmp(cJSON_GetObjectItem(st, "state")->valuestring, "done")) {
        state_words(st, words, sizeof words);
        page_note(notes, "%s: %s", name, words);
    } else {
        snprintf(words, sizeof words, "done");
    }
    for (int i = 0; i < cJSON_GetArraySize(scratch); i++) /* a metrics file cut short */
        page_note(notes, "%s", cJSON_GetArrayItem(scratch, i)->valuestring);
    cJSON_AddStringToObject(r, "state", words);
    char page[1200];
    snprintf(page, sizeof page, "%s/index.html", folder);
    if (file_exists(page)) href_of(from, page, href, sizeof href);
    cJSON_AddItemToObject(r, "href", file_exists(page) ? cJSON_CreateString(href) : cJSON_CreateNull());
    cJSON_AddItemToObject(r, "val_step", cJSON_DetachItemFromObject(m, "val_step"));
    cJSON_AddItemToObject(r, "val", cJSON_DetachItemFromObject(m, "val"));
    char kernel[320], commit[24];
    bool mixed;
    if (provenance_read(folder, kernel, sizeof kernel, commit, sizeof commit, &mixed) != 0) kernel[0] = commit[0] = '\0';
    cJSON_AddStringToObject(r, "kernel", mixed ? "mixed" : kernel);
    cJSON_AddStringToObject(r, "commit", commit);
    if (options) { /* what the report groups by: the options that change what a run computes */
        cJSON *o = cJSON_CreateObject();
        for (int i = 0; i < option_count(); i++) {
            const OptDef *d = option_at(i);
            char v[320];
            if (!option_bookkeeping(d)) cJSON_AddStringToObject(o, d->name, option_format(&cfg, d, v, sizeof v));
        }
        const cJSON *corpus = cJSON_GetObjectItem(json, "corpus");
        if (cJSON_IsString(corpus)) cJSON_AddStringToObject(o, "corpus", corpus->valuestring);
        cJSON_AddItemToObject(r, "config", o);
    }
    cJSON_Delete(m), cJSON_Delete(st), cJSON_Delete(json), cJSON_Delete(scratch);
    return r;
}

/* The runs of grid folder dir: results.csv's rows in their order, then the
 * run folders it does not name (a grid not finished). Links from `from`;
 * prefix goes before each name (./report's "grid/"). */
static cJSON *grid_runs(const char *dir, const char *results, const char *from, const char *prefix, bool options,
                        cJSON *notes) {
    cJSON *runs = cJSON_CreateArray();
    char **folders;
    int n_folders = run_folders(dir, &folders);
    bool *named = xcalloc((size_t)n_folders + 1, sizeof *named);
    int status_col = -1;
    char (*f)[256] = xmalloc(64 * sizeof *f), name[600], sub[1200], folder[256];
    for (const char *line = results; line && *line;) {
        int n = csv_fields(line, f, 64);
        if (status_col < 0) { /* the header */
            for (int i = 0; i < n; i++)
                if (!strcmp(f[i], "status")) status_col = i;
            if (status_col < 0) status_col = 64;
        } else if (f[0][0]) {
            grid_folder_name(f[0], folder, sizeof folder);
            for (int i = 0; i < n_folders; i++) named[i] |= !strcmp(folders[i], folder);
            snprintf(name, sizeof name, "%s%s", prefix, f[0]);
            snprintf(sub, sizeof sub, "%s/%s", dir, folder);
            const char *status = status_col < n ? f[status_col] : NULL;
            cJSON_AddItemToArray(runs, run_entry(name, sub, from, options, status, notes));
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
    for (int i = 0; i < n_folders; i++)
        if (!named[i]) {
            snprintf(name, sizeof name, "%s%s", prefix, folders[i]);
            snprintf(sub, sizeof sub, "%s/%s", dir, folders[i]);
            cJSON_AddItemToArray(runs, run_entry(name, sub, from, options, NULL, notes));
        }
    free(f);
    free(named);
    free_names(folders, n_folders);
    return runs;
}

/* Writes the page of every run folder under dir that has none. */
static int write_missing_run_pages(const char *dir, Err *e) {
    char **folders, sub[1200];
    int n = run_folders(dir, &folders), rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, folders[i]);
        if (!has_file(sub, "index.html")) rc = page_write_run(sub, NULL, e);
    }
    free_names(folders, n);
    return rc;
}

int page_write_ladder(const char *dir, Err *e) {
    char path[1200], name[256];
    if (path_join(path, sizeof path, dir, "index.html", e) != 0) return -1;
    run_name_of(dir, name, sizeof name);
    cJSON *data = cJSON_CreateObject(), *notes = cJSON_CreateArray();
    cJSON_AddStringToObject(data, "kind", "ladder");
    cJSON_AddStringToObject(data, "name", name);
    static const char *const files[][2] = {{"ladder_csv", "ladder.csv"}, {"ladder_md", "ladder.md"}};
    for (int i = 0; i < 2; i++) {
        char *text = page_read_text(dir, files[i][1], 4 << 20);
        if (!text) page_note(notes, "%s: no %s", dir, files[i][1]);
        cJSON_AddItemToObject(data, files[i][0], text ? cJSON_CreateString(text) : cJSON_CreateNull());
        free(text);
    }
    cJSON_AddItemToObject(data, "notes", notes);
    int rc = page_html(path, name, data, e);
    cJSON_Delete(data);
    return rc;
}

int page_write_grid(const char *dir, Err *e) {
    char path[1200], name[256];
    if (path_join(path, sizeof path, dir, "index.html", e) != 0 || write_missing_run_pages(dir, e) != 0) return -1;
    run_name_of(dir, name, sizeof name);
    cJSON *data = cJSON_CreateObject(), *notes = cJSON_CreateArray();
    cJSON_AddStringToObject(data, "kind", "grid");
    cJSON_AddStringToObject(data, "name", name);
    static const char *const files[][2] = {{"results_csv", "results.csv"}, {"summary_csv", "summary.csv"},
                                           {"results_md", "results.md"}};
    char *text[3];
    for (int i = 0; i < 3; i++) {
        text[i] = page_read_text(dir, files[i][1], 4 << 20);
        cJSON_AddItemToObject(data, files[i][0], text[i] ? cJSON_CreateString(text[i]) : cJSON_CreateNull());
    }
    if (!text[0])
        page_note(notes, "%s: no results.csv: the grid has not finished (the same ./ablate command resumes it)", dir);
    cJSON_AddItemToObject(data, "runs", grid_runs(dir, text[0], dir, "", false, notes));
    cJSON_AddItemToObject(data, "notes", notes);
    int rc = page_html(path, name, data, e);
    for (int i = 0; i < 3; i++) free(text[i]);
    cJSON_Delete(data);
    return rc;
}

/* ./report's entry for one folder: a run, or a grid's runs (and a link to
 * the grid's page); either's page written first when it has none. */
static int report_add(const char *dir, const char *from, cJSON *runs, cJSON *grids, cJSON *notes, Err *e) {
    char why[200], name[256], page[1200], href[2400];
    int kind = page_kind(dir, why, sizeof why);
    if (kind == PAGE_NONE) return err_set(e, "%s: not a run folder or grid: %s", dir, why);
    run_name_of(dir, name, sizeof name);
    if (path_join(page, sizeof page, dir, "index.html", e) != 0) return -1;
    if (!file_exists(page) && (kind == PAGE_RUN ? page_write_run(dir, NULL, e) : page_write_grid(dir, e)) != 0)
        return -1;
    if (kind == PAGE_RUN) {
        cJSON_AddItemToArray(runs, run_entry(name, dir, from, true, NULL, notes));
        return 0;
    }
    char *results = page_read_text(dir, "results.csv", 4 << 20), prefix[300];
    snprintf(prefix, sizeof prefix, "%s/", name);
    cJSON *mine = grid_runs(dir, results, from, prefix, true, notes);
    free(results);
    cJSON *g = cJSON_CreateObject();
    href_of(from, page, href, sizeof href);
    cJSON_AddStringToObject(g, "name", name);
    cJSON_AddStringToObject(g, "href", href);
    cJSON_AddNumberToObject(g, "runs", cJSON_GetArraySize(mine));
    cJSON_AddItemToArray(grids, g);
    while (cJSON_GetArraySize(mine)) cJSON_AddItemToArray(runs, cJSON_DetachItemFromArray(mine, 0));
    cJSON_Delete(mine);
    return 0;
}

int page_write_report(const char *out, char *const *dirs, int n, Err *e) {
    char from[1200];
    const char *slash = strrchr(out, '/');
    snprintf(from, sizeof from, "%.*s", slash ? (int)(slash - out) + (slash == out) : 1, slash ? out : ".");
    if (!is_directory(from)) return err_set(e, "--out %s: no such folder: %s", out, from);
    char why[200];
    for (int i = 0; i < n; i++) /* every folder checked before anything is written */
        if (page_kind(dirs[i], why, sizeof why) == PAGE_NONE)
            return err_set(e, "%s: not a run folder or grid: %s", dirs[i], why);
    cJSON *data = cJSON_CreateObject(), *notes = cJSON_CreateArray(), *runs = cJSON_CreateArray(),
          *grids = cJSON_CreateArray();
    cJSON_AddStringToObject(data, "kind", "report");
    cJSON_AddItemToObject(data, "runs", runs);
    cJSON_AddItemToObject(data, "grids", grids);
    cJSON_AddItemToObject(data, "notes", notes);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = report_add(dirs[i], from, runs, grids, notes, e);
    if (rc == 0) rc = page_html(out, "attnlab report", data, e);
    cJSON_Delete(data);
    return rc;
}
