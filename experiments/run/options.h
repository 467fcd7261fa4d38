/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* options.h: the one option table.
 *
 * Every model, training and sampling option is defined once, below in
 * options.c: name, type, default, range or choices, and help. --help, the
 * parsing of `--key value`, validation, the config stored in checkpoints and
 * the columns of ablation tables all come from it. */
#ifndef ATTNLAB_OPTIONS_H
#define ATTNLAB_OPTIONS_H

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "option.h"
#include "optim.h"
#include "util.h"

typedef struct {
    int batch;
    int steps;
    float lr, min_lr;
    int warmup;
    int schedule; /* Schedule */
    float weight_decay;
    float clip;
    int64_t seed;
    int eval_every, eval_batches;
    int save_every;
    int threads;
    int precision; /* Precision (core/gemm.h) */
    int recompute; /* RECOMPUTE_AUTO, _OFF, _ON */
    float val_fraction;
    int log_every;
    char out[256];
} TrainConfig;

typedef struct {
    char prompt[256];
    float temperature;
    int top_k;
    int length;
} SampleConfig;

enum { RECOMPUTE_AUTO, RECOMPUTE_OFF, RECOMPUTE_ON };

#define OPTIONS_MAX 256

typedef struct {
    ModelConfig model;
    TrainConfig train;
    SampleConfig sample;
    /* The options given on the command line (option_give), by their index in
     * option_at: validation refuses one that the model does not use even when
     * it equals its default. Not saved: a loaded config has none. */
    unsigned char given[OPTIONS_MAX / 8];
} Config;


/* The table: row i of option_count(), this file's rows and the kernels'. */
int option_count(void);
const OptDef *option_at(int i);

const OptDef *option_find(const char *name);
/* An OPT_CHOICE or OPT_BOOL option's values, NULL-terminated. */
const char *const *option_choices(const OptDef *o);
/* Every option at its default. */
void config_defaults(Config *c);
/* The one of cands[0..n) (NULL entries skipped) that word most likely
 * mistypes, by edit distance (at most 1 for a word of up to 4 letters, 2 up
 * to 8, else 3), or NULL. */
const char *closest_word(const char *word, const char *const *cands, int n);
/* Parses and range-checks one value. Errors name the option and what is allowed:
 * "--heads: expected an integer in [1, 64], got 'x'". */
int option_set(Config *c, const char *name, const char *value, Err *e);
/* option_set, and marks the option as given on the command line. */
int option_give(Config *c, const char *name, const char *value, Err *e);
/* Forgets that option `name` was given (it goes back to "changed only if it
 * differs from its default"). */
void option_forget(Config *c, const char *name);
/* The value as text, as --help and ablation tables show it. */
const char *option_format(const Config *c, const OptDef *o, char *buf, size_t size);
/* Refuses combinations that cannot work, with the reason, and derives what
 * follows from the options (the vocabulary: 257 under objective = mlm). */
int config_validate(Config *c, Err *e);
/* Options that do not change what a run computes (threads, logging,
 * checkpointing, the run folder, sampling). */
bool option_bookkeeping(const OptDef *o);
/* A run folder's default name: the attn value, then each option that
 * differs from its default and changes what the run computes, as
 * "_key-value" (values made folder-safe), e.g. "softmax_pos-rope_steps-2000";
 * "_etc" ends it when they would not fit in about 100 characters. */
void config_run_name(const Config *c, char *buf, size_t size);
/* The groups of options --help prints, as a mask of these. */
enum {
    HELP_MODEL = 1 << GROUP_MODEL,
    HELP_TRAIN = 1 << GROUP_TRAIN,
    HELP_SAMPLE = 1 << GROUP_SAMPLE,
    HELP_ALL = HELP_MODEL | HELP_TRAIN | HELP_SAMPLE,
};
/* Prints the table for --help: the groups given (HELP_*), one line per option. */
void options_print_help(FILE *f, int groups);
/* The same without option `skip` (a command's own flag of that name: ablate's --out). */
void options_print_help_without(FILE *f, int groups, const char *skip);
/* The whole config as a JSON object of option name -> value. */
cJSON *config_to_json(const Config *c);
/* Reads such an object (unknown keys are an error; missing keys keep their
 * current value). */
int config_from_json(Config *c, const cJSON *json, Err *e);

#endif
