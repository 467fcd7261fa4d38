/* train_folder.c: a training run's folder (train_folder.h). */
#include "train_folder.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plot.h"
#include "run.h"

static void curves_add(Curves *cv, double step, double loss, double val) {
    if (cv->n == cv->cap) {
        cv->cap = cv->cap ? 2 * cv->cap : 256;
        size_t bytes = (size_t)cv->cap * sizeof(double);
        cv->step = realloc(cv->step, bytes);
        cv->loss_bits = realloc(cv->loss_bits, bytes);
        cv->val_step = realloc(cv->val_step, bytes);
        cv->val_bits = realloc(cv->val_bits, bytes);
        if (!cv->step || !cv->loss_bits || !cv->val_step || !cv->val_bits) DIE_OOM(bytes);
    }
    cv->step[cv->n] = step;
    cv->loss_bits[cv->n++] = loss / M_LN2;
    if (isfinite(val)) {
        cv->val_step[cv->n_val] = step;
        cv->val_bits[cv->n_val++] = val / M_LN2;
    }
}

static void curves_free(Curves *cv) {
    free(cv->step), free(cv->loss_bits), free(cv->val_step), free(cv->val_bits);
    memset(cv, 0, sizeof *cv);
}

int train_folder_paths(TrainFolder *f, const char *dir, Err *e) {
    memset(f, 0, sizeof *f);
    f->dir = dir;
    f->lock = -1;
    return path_join(f->ckpt, sizeof f->ckpt, dir, "model.safetensors", e) ||
                   path_join(f->metrics_path, sizeof f->metrics_path, dir, "metrics.jsonl", e) ||
                   path_join(f->plot_path, sizeof f->plot_path, dir, "loss.png", e) ||
                   path_join(f->config_path, sizeof f->config_path, dir, "config.json", e) ||
                   path_join(f->samples_path, sizeof f->samples_path, dir, "samples.txt", e)
               ? -1
               : 0;
}

int train_folder_taken(const TrainFolder *f, bool resume, Err *e) {
    if (resume || !file_exists(f->ckpt)) return 0;
    return err_set(e, "%s: a run is already there", f->dir),
           err_hint(e, "continue it with --resume %s, or pick another --out", f->dir);
}

int train_folder_lock(TrainFolder *f, bool resume, Err *e) {
    if (!resume && make_dirs(f->dir, e) != 0) return -1;
    if ((f->lock = run_lock(f->dir, e)) < 0) return -1;
    /* under the lock: another run may have saved here since the first look */
    return train_folder_taken(f, resume, e);
}

/* Why line `text` (n bytes, its newline included when it has one) is not a
 * metrics line following step *last, or NULL when it is one: then *j holds it
 * parsed and *last its step. */
static const char *metrics_line_fault(const char *text, size_t n, cJSON **j, double *last) {
    *j = NULL;
    if (strlen(text) != n) return "a NUL byte: not text";
    if (text[n - 1] != '\n') return "cut short: no newline at its end";
    if (!(*j = cJSON_Parse(text))) return "not JSON";
    const cJSON *s = cJSON_GetObjectItem(*j, "step");
    if (!cJSON_IsObject(*j) || !cJSON_IsNumber(s)) return "not a metrics line: no \"step\" number";
    if (!(s->valuedouble > *last) || s->valuedouble != floor(s->valuedouble)) return "its step does not follow the last";
    *last = s->valuedouble;
    return NULL;
}

/* Keeps the original of a broken metrics.jsonl beside it, under a new name
 * (a hard link: the original is never rewritten): its path in aside. */
static int metrics_set_aside(const char *path, char *aside, size_t size, Err *e) {
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    for (int i = 0; i < 100; i++) {
        int n = i ? snprintf(aside, size, "%s.broken-%s-%d", path, stamp, i) : snprintf(aside, size, "%s.broken-%s", path, stamp);
        if (n < 0 || (size_t)n >= size) return err_set(e, "%s: path too long", path);
        if (link(path, aside) == 0) return 0;
        if (errno != EEXIST) return err_set(e, "%s: cannot keep the original as %s: %s", path, aside, strerror(errno));
    }
    return err_set(e, "%s: cannot keep the original: too many broken copies beside it", path);
}

/* On resume: keeps the metrics lines up to the checkpoint's step, rewrites
 * the file, and refills the curves and the best validation bpb among the
 * kept lines (*best, NAN if none). Every line must be whole: one that is
 * cut short, binary or garbage stops the resume with its line number (the
 * history after it would be lost), unless `repair`: then the lines before
 * it are kept and the original is kept beside, as metrics.jsonl.broken-<time>. */
static int metrics_truncate(const char *path, long step, bool repair, Curves *cv, double *best, Err *e) {
    *best = NAN;
    FILE *f = fopen_regular(path, "r", e);
    if (!f) return errno == ENOENT ? 0 : -1;
    size_t cap = 1 << 16, len = 0, line_cap = 0;
    char *kept = xmalloc(cap), *line = NULL;
    ssize_t n;
    long number = 0;
    double last = 0;
    const char *fault = NULL;
    while (!fault && (n = getline(&line, &line_cap, f)) > 0) {
        number++;
        cJSON *j;
        if ((fault = metrics_line_fault(line, (size_t)n, &j, &last)) == NULL && last <= (double)step) {
            if (len + (size_t)n + 1 > cap) kept = realloc(kept, cap = 2 * (len + (size_t)n + 1));
            if (!kept) DIE_OOM(cap);
            memcpy(kept + len, line, (size_t)n + 1);
            len += (size_t)n;
            const cJSON *loss = cJSON_GetObjectItem(j, "loss"), *val = cJSON_GetObjectItem(j, "val_loss");
            const cJSON *time_s = cJSON_GetObjectItem(j, "time_s");
            double v = cJSON_IsNumber(val) ? val->valuedouble : NAN;
            if (cJSON_IsNumber(time_s) && isfinite(time_s->valuedouble)) cv->time_s = time_s->valuedouble;
            curves_add(cv, last, cJSON_IsNumber(loss) ? loss->valuedouble : NAN, v);
            if (isfinite(v) && !(*best <= v / M_LN2)) *best = v / M_LN2;
        }
        cJSON_Delete(j);
    }
    fclose(f);
    free(line);
    kept[len] = '\0';
    int rc = 0;
    char aside[1200];
    if (fault && !repair) {
        err_set(e, "%s: line %ld: %s", path, number, fault);
        rc = err_hint(e, "resume with --repair to keep the %ld line%s before it (the file stays beside, renamed)",
                      number - 1, number == 2 ? "" : "s");
    } else if (fault && (rc = metrics_set_aside(path, aside, sizeof aside, e)) == 0) {
        printf("note: --repair: %s: kept lines 1-%ld (line %ld: %s); the original is %s\n", path, number - 1, number,
               fault, aside);
    } else if (repair) {
        printf("note: --repair: %s is whole; nothing to repair\n", path);
    }
    if (rc == 0) rc = write_file_atomic(path, kept, e);
    free(kept);
    return rc;
}

/* config.json: the config, the corpus, and the ranks when data parallel. */
static int write_config(const TrainFolder *f, const Config *cfg, const char *corpus, int ranks, Err *e) {
    cJSON *json = config_to_json(cfg);
    cJSON_AddStringToObject(json, "corpus", corpus);
    if (ranks > 1) { /* the batch is per rank; a step takes ranks x batch windows */
        cJSON_AddNumberToObject(json, "ranks", ranks);
        cJSON_AddNumberToObject(json, "effective_batch", (double)ranks * cfg->train.batch);
    }
    char *text = cJSON_Print(json);
    cJSON_Delete(json);
    size_t len = strlen(text);
    text = realloc(text, len + 2);
    if (!text) DIE_OOM(len + 2);
    strcpy(text + len, "\n");
    int rc = write_file_atomic(f->config_path, text, e);
    free(text);
    return rc;
}

int train_folder_files(TrainFolder *f, const Config *cfg, const char *corpus, int ranks, long start, bool repair,
                       double *best, Err *e) {
    double kept_best = NAN;
    /* the history first: a broken one stops the resume before anything is written */
    if (start > 0 && metrics_truncate(f->metrics_path, start, repair, &f->cv, &kept_best, e) != 0) return -1;
    if (write_config(f, cfg, corpus, ranks, e) != 0) return -1;
    if (!isfinite(*best)) *best = kept_best;
    f->metrics = fopen_regular(f->metrics_path, start ? "a" : "w", e);
    f->t0 = now_seconds();
    return f->metrics ? 0 : -1;
}

void train_folder_log(TrainFolder *f, const StepLog *l) {
    FILE *m = f->metrics;
    fprintf(m, "{\"step\": %ld, \"loss\": %.6f, \"val_loss\": ", l->step, l->loss);
    if (isfinite(l->val))
        fprintf(m, "%.6f, \"val_bpb\": %.6f", l->val, l->val / M_LN2);
    else
        fprintf(m, "null, \"val_bpb\": null");
    fprintf(m, ", \"lr\": %.6g, \"grad_norm\": %.6f", l->lr, l->grad_norm);
    if (isfinite(l->den_clamped))
        fprintf(m, ", \"den_clamped\": %.6g", l->den_clamped);
    else
        fprintf(m, ", \"den_clamped\": null");
    fprintf(m, ", \"tok_s\": %.0f, \"time_s\": %.3f}\n", l->tok_s, f->cv.time_s + (now_seconds() - f->t0));
    fflush(m);
    curves_add(&f->cv, (double)l->step, l->loss, l->val);
}

void train_folder_progress_text(const TrainFolder *f, const StepLog *l, char *buf, size_t size) {
    /* the fields, most important first; a narrow terminal drops the last ones */
    char shown[48] = "";
    const Curves *cv = &f->cv;
    if (cv->n_val)
        snprintf(shown, sizeof shown, "\tval %.3f bpb @%.0f", cv->val_bits[cv->n_val - 1], cv->val_step[cv->n_val - 1]);
    snprintf(buf, size, "loss %.3f bpb%s\tlr %.1e\t%.0f tok/s", l->loss / M_LN2, shown, l->lr, l->tok_s);
}

int train_folder_plot(TrainFolder *f, Err *e) {
    if (f->metrics) fclose(f->metrics);
    f->metrics = NULL;
    const Curves *cv = &f->cv;
    if (!cv->n) return 0;
    PlotSeries s[2] = {{"train", cv->step, cv->loss_bits, cv->n, 0},
                       {"validation", cv->val_step, cv->val_bits, cv->n_val, 0}};
    char name[256], title[320];
    run_name_of(f->dir, name, sizeof name);
    PlotSpec spec = {plot_title(title, sizeof title, name, "loss"), "step", "bits per byte", 0, 0, 0, 0, 0};
    return plot_lines(f->plot_path, &spec, s, cv->n_val ? 2 : 1, e);
}

void train_folder_close(TrainFolder *f) {
    if (f->metrics) fclose(f->metrics);
    f->metrics = NULL;
    curves_free(&f->cv);
    run_unlock(f->lock);
    f->lock = -1;
}
