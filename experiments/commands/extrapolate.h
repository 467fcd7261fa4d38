/* room commands/: the commands' mains, and what one command alone links (the Makefile's <command>_OBJ). */
/* extrapolate.h: what the parts of ./extrapolate share, private to them:
 * extrapolate.c (the command line, the plan and the scoring),
 * extrapolate_variants.c (a variant's grammar: CHECKPOINT@key=v,..., the
 * overrides, --lengths, the groups of seeds) and extrapolate_report.c (the
 * tables, the CSV files and the plot). */
#ifndef ATTNLAB_EXTRAPOLATE_H
#define ATTNLAB_EXTRAPOLATE_H

#include "args.h"
#include "corpus.h"
#include "model.h"
#include "options.h"

#define MAX_LENGTHS 64
#define MAX_OVERRIDES 3

typedef struct {
    char key[16], value[64];
} Override;

typedef struct {
    const char *spec; /* as given on the command line */
    char path[1100];  /* the checkpoint file */
    char name[1100];  /* the run folder's name, or the file's stem */
    Override ov[MAX_OVERRIDES];
    int n_ov;
    char label[1200];
    int group;        /* its group: the variants whose label is the same up to a _seed-N */
    Config cfg;
    Corpus corpus;
    Model model;
    bool loaded;
    char beyond[256]; /* the lengths beyond the learned positions, for the note */
    double bpb[MAX_LENGTHS]; /* NAN: n/a */
    long windows[MAX_LENGTHS], bytes[MAX_LENGTHS];
} Variant;

/* The option table's --key value: inference-time overrides for every
 * variant; any other option is refused with the reason. */
typedef struct {
    Override ov[MAX_OVERRIDES];
    int n;
} GlobalOverrides;

/* The command: its arguments, then the variants and what is planned for
 * them, filled in by the steps of main in turn. */
typedef struct {
    int threads, max_windows, max_bytes;
    const char *out_arg, *labels_arg, *lengths_arg, *corpus_arg;
    GlobalOverrides overrides;
    ArgPositional pos;
    int n_pos; /* the positionals that are checkpoints */
    Variant *vs;
    int nv;
    int lengths[MAX_LENGTHS], nl;
    long total_bytes; /* what scoring every variant at every length reads */
    int max_T;
    char out_dir[1100], csv_path[1200], png_path[1200], sum_path[1200];
    int lock; /* out_dir's lock (run.h), -1 until taken: at once when it exists, else when it is made */
} Job;

/* ---- extrapolate_variants.c ---- */
bool xp_ends_with(const char *s, const char *suffix);
/* "runs/rope@logn=on,window=128": the path, then the overrides. */
int xp_parse_variant(Variant *v, const char *spec, Err *e);
/* A positional is a checkpoint when it names a folder, a .safetensors file
 * or carries @overrides. */
bool xp_looks_like_checkpoint(const char *a);
/* "256,512,1024": sorted, each in [2, 2^20], no repeats. */
int xp_parse_lengths(const char *s, int *out, int *n, Err *e);
/* The option table's --key value (args.h's option hook; ctx a GlobalOverrides). */
int xp_set_option(const OptDef *o, const char *value, void *ctx);
/* Sets each variant's group; returns the number of groups, with runs[g]
 * the variants of group g and keys[g] its key. */
int xp_make_groups(Variant *vs, int nv, int *runs, char (*keys)[1200]);

/* ---- extrapolate_report.c ---- */
/* The tables, then the CSV(s) and the plot. The exit status. */
int xp_report(Job *j);

#endif
