/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* open.h: what every command does first with a trained model: find the
 * checkpoint of a run folder, read its metadata, check that the model fits
 * in memory, build it and load its parameters.
 *
 *   OpenRun o;
 *   status = open_run(&o, target, &e);              the file and its config
 *   ... the command's own checks; they may change o.info.cfg (an
 *   ... inference-time option such as window) or stop (open_run_close)
 *   status = open_run_load(&o, &m, &need, false, &e);   memory, build, load
 *
 * Both return 0, or the exit status (2: a path the user gave cannot be used;
 * 1: the file or the machine refuses) with e set. */
#ifndef ATTNLAB_OPEN_H
#define ATTNLAB_OPEN_H

#include <stdbool.h>

#include "checkpoint.h"
#include "memory.h"

typedef struct {
    char path[1100]; /* the checkpoint: TARGET/model.safetensors for a run folder, else TARGET */
    char dir[1100];  /* the run folder: TARGET, or the checkpoint file's folder ("." for none) */
    CheckpointInfo info;
    StFile st; /* open from open_run until open_run_load or open_run_close */
    bool st_open;
} OpenRun;

/* The memory check before the model is built: one window of T bytes used so,
 * refused as "<what>: the model ... needs X GiB" (memory.h) with hint. */
typedef struct {
    const char *what, *hint;
    int T;
    MemoryUse use;
    int threads;
} OpenMemory;

/* target: a run folder or a checkpoint file. On success the file is open and
 * o->info holds its metadata. */
int open_run(OpenRun *o, const char *target, Err *e);
/* Checks memory (unless need is NULL), builds m from o->info.cfg.model and
 * loads its parameters (and AdamW's moments when with_optim); closes the
 * file. On failure m is not left allocated. */
int open_run_load(OpenRun *o, Model *m, const OpenMemory *need, bool with_optim, Err *e);
/* Closes the file when a command stops between the two. */
void open_run_close(OpenRun *o);

/* The corpus the checkpoint names when no other is given: NULL when it
 * records none or the file is gone. */
const char *open_run_corpus(const OpenRun *o);
/* That corpus for a message: its path, or "none recorded". */
const char *open_run_corpus_said(const OpenRun *o);

#endif
