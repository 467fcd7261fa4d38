#include "precision.h"
#include "open.h"

#include <stdio.h>
#include <string.h>

#include "run.h"

int open_run(OpenRun *o, const char *target, Err *e) {
    memset(o, 0, sizeof *o);
    if (is_directory(target)) {
        if (path_join(o->path, sizeof o->path, target, "model.safetensors", e) != 0) return 2;
        snprintf(o->dir, sizeof o->dir, "%s", target);
    } else {
        if (snprintf(o->path, sizeof o->path, "%s", target) >= (int)sizeof o->path)
            return err_set(e, "%.60s...: path too long", target), 2;
        const char *slash = strrchr(target, '/');
        snprintf(o->dir, sizeof o->dir, "%.*s", slash ? (int)(slash - target) : 1, slash ? target : ".");
    }
    if (checkpoint_open(&o->st, o->path, &o->info, e) != 0) return 1;
    o->st_open = true;
    return 0;
}

int open_run_load(OpenRun *o, Model *m, const OpenMemory *need, bool with_optim, Err *e) {
    if (need && memory_check(need->what, need->hint, &o->info.cfg.model, 1, need->T, need->use, need->threads, e) != 0) {
        open_run_close(o);
        return 1;
    }
    model_init(m, &o->info.cfg.model);
    int rc = checkpoint_load(&o->st, m, with_optim, e);
    open_run_close(o);
    if (rc != 0) {
        model_free(m);
        return 1;
    }
    precision_begin(o->info.cfg.train.precision, &m->params, false, e); /* never refuses when not strict */
    return 0;
}

void open_run_close(OpenRun *o) {
    if (o->st_open) st_close(&o->st);
    o->st_open = false;
}

const char *open_run_corpus(const OpenRun *o) {
    return o->info.corpus[0] && file_exists(o->info.corpus) ? o->info.corpus : NULL;
}

const char *open_run_corpus_said(const OpenRun *o) { return o->info.corpus[0] ? o->info.corpus : "none recorded"; }
