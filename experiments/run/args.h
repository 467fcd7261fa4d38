/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* args.h: the one command-line parser of the commands.
 *
 * A command describes its own flags in a small table of ArgFlag, says whether
 * it takes the option table's `--key value` (options.h) and which, and gets its
 * positional arguments back, in order. The rules are the same for every command:
 *   - `--key value` and `--key=value` are the same (`--key=` is the empty value).
 *     A flag that takes a value takes the next argument, whatever it is.
 *   - --help or -h prints the usage to stdout, and the command exits 0;
 *     --version prints the version.
 *   - An unknown --name is refused with the flag or option it most likely
 *     mistypes ("did you mean --attn?"), by edit distance.
 *   - A positional key=value that names an option is refused, with the
 *     --key value form, unless the command takes such words (./ablate).
 *   - Arguments are read in order and the first error stops the parse: one line
 *     on stderr, "error: <what>: <why>" (and a hint where one helps), exit 2:
 *         error: unknown option '--bogus'
 *         hint: ./train --help lists the options
 *         error: --resume: needs a run folder
 *         error: --ops: takes no value, got '--ops=1'
 *         error: --out: given twice ('a', then 'b')
 *   - An option of the option table may be given again and the last value
 *     wins, so that a script can append an override to a shared set of
 *     options; the command's callback sees each one, in order. A command's own
 *     flag may be given once, unless it is marked .repeat (then the last value
 *     wins too: bench's --threads and --steps, named like the table's).
 *   - Every argument that does not start with "--" is positional ("-x" too). */
#ifndef ATTNLAB_ARGS_H
#define ATTNLAB_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "options.h"

#define ARGS_MAX_FLAGS 32
#define ARGS_MAX_POSITIONAL 256
/* What --version prints, on every command. */
#define ATTNLAB_VERSION "0.5.0"

/* args_parse's result when the command goes on; anything else is its exit status. */
#define ARGS_OK (-1)

/* Takes a flag's value: 0, or -1 after printing the error (the command exits 2). */
typedef int (*ArgCall)(const char *flag, const char *value, void *ctx);

/* One of a command's own flags. Exactly one of on, text, integer and call
 * says where it goes; a flag with `on` is a switch and takes no value. */
typedef struct {
    const char *name;  /* with its dashes: "--resume" */
    bool *on;          /* a switch: set to true */
    const char **text; /* the value, as given (a pointer into argv) */
    int *integer;      /* the value, an integer in [lo, hi] */
    int lo, hi;
    ArgCall call; /* the value, handed to call with ctx */
    void *ctx;
    const char *needs; /* what a missing value is called: "a run folder"; NULL: "a value" */
    bool repeat;       /* may be given again, the last value wins */
    bool *given;       /* if not NULL, set to true when the flag is given */
} ArgFlag;

typedef struct {
    const char *command; /* "train": the hints name ./train */
    void (*usage)(FILE *f);
    const ArgFlag *flags;
    int n_flags;
    /* The option table's --key value: `option` takes one (0, or -1 after
     * printing the error); NULL when the command takes none. `takes` says
     * which options the command has (NULL: all); the others are unknown. */
    int (*option)(const OptDef *o, const char *value, void *ctx);
    bool (*takes)(const OptDef *o);
    void *ctx;
    const char *missing_hint; /* a hint after "needs a value", or NULL */
    bool key_values;          /* positional key=value words are the command's own (./ablate's grid);
                                 otherwise one naming an option is refused with the --key value form */
} ArgSpec;

typedef struct {
    char *v[ARGS_MAX_POSITIONAL]; /* pointers into argv, in order */
    int n;
} ArgPositional;

/* Reads argv[1..argc) by spec's rules, taking each flag and option as it
 * comes, and puts the positional arguments in *pos. Returns ARGS_OK, or the
 * status to exit with: 0 after --help, 2 after an error (printed). */
int args_parse(const ArgSpec *spec, int argc, char **argv, ArgPositional *pos);

#endif
