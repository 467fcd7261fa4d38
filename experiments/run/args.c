/* args.c: the commands' command-line parser (args.h has the rules). */
#include "args.h"

#include <assert.h>
#include <string.h>

#include "run.h"

static const ArgFlag *find_flag(const ArgSpec *spec, const char *name) {
    for (int i = 0; i < spec->n_flags; i++)
        if (!strcmp(spec->flags[i].name, name)) return &spec->flags[i];
    return NULL;
}

/* An unknown --name: the error, and the flag or option it most likely mistypes. */
static int unknown(const ArgSpec *spec, const char *name, size_t len) {
    fprintf(stderr, "error: unknown option '%.*s'\n", (int)len, name);
    const char *cands[ARGS_MAX_FLAGS + 256 + 2] = {"--help", "--version"};
    char opts[256][64];
    int n = 2;
    for (int i = 0; i < spec->n_flags; i++) cands[n++] = spec->flags[i].name;
    for (int i = 0; spec->option && i < option_count() && i < 256; i++) {
        const OptDef *o = option_at(i);
        if (spec->takes && !spec->takes(o)) continue;
        snprintf(opts[i], sizeof opts[i], "--%s", o->name);
        cands[n++] = opts[i];
    }
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)(len < 63 ? len : 63), name);
    const char *near = closest_word(word, cands, n);
    if (near)
        fprintf(stderr, "hint: did you mean %s? (./%s --help lists the options)\n", near, spec->command);
    else
        fprintf(stderr, "hint: ./%s --help lists the options\n", spec->command);
    return 2;
}

/* The value of flag f: stored, range-checked or handed to its callback. */
static int take_value(const ArgFlag *f, const char *value) {
    if (f->text) {
        *f->text = value;
        return 0;
    }
    if (f->integer) return parse_int_arg(f->name, value, f->lo, f->hi, f->integer) == 0 ? 0 : -1;
    return f->call(f->name, value, f->ctx) == 0 ? 0 : -1;
}

int args_parse(const ArgSpec *spec, int argc, char **argv, ArgPositional *pos) {
    assert(spec->n_flags <= ARGS_MAX_FLAGS);
    for (int i = 0; i < spec->n_flags; i++) /* "--name", and one place for its value */
        assert(!strncmp(spec->flags[i].name, "--", 2) &&
               !!spec->flags[i].on + !!spec->flags[i].text + !!spec->flags[i].integer + !!spec->flags[i].call == 1);
    const char *first[ARGS_MAX_FLAGS]; /* each flag's first value ("" for a switch), NULL until given */
    for (int i = 0; i < spec->n_flags; i++) first[i] = NULL;
    pos->n = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 && strcmp(a, "-h") != 0) {
            if (pos->n == ARGS_MAX_POSITIONAL) {
                fprintf(stderr, "error: too many arguments\n");
                return 2;
            }
            /* ablate's key=value given to another command */
            const char *eq = strchr(a, '=');
            char key[64];
            if (!spec->key_values && eq && (size_t)(eq - a) < sizeof key) {
                snprintf(key, sizeof key, "%.*s", (int)(eq - a), a);
                const OptDef *o = spec->option ? option_find(key) : NULL;
                if (o && (!spec->takes || spec->takes(o))) {
                    fprintf(stderr, "error: '%s': ./%s takes options as --%s %s (key=value is ./ablate's grid syntax)\n",
                            a, spec->command, key, eq + 1);
                    return 2;
                }
            }
            pos->v[pos->n++] = a;
            continue;
        }
        /* "--name" or "--name=value": the name, with its dashes */
        const char *eq = strchr(a, '=');
        char name[64];
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof name) return unknown(spec, a, len);
        memcpy(name, a, len);
        name[len] = '\0';
        const char *inline_value = eq ? eq + 1 : NULL;

        const ArgFlag *f = find_flag(spec, name);
        bool help = !strcmp(name, "--help") || !strcmp(name, "-h"), version = !f && !strcmp(name, "--version");
        const OptDef *o = NULL;
        if (!f && !help && !version && spec->option) {
            o = option_find(name + 2);
            if (o && spec->takes && !spec->takes(o)) o = NULL; /* not one this command has */
        }
        if (!f && !help && !version && !o) return unknown(spec, name, len);
        bool is_switch = help || version || (f && f->on);
        if (is_switch && inline_value) {
            fprintf(stderr, "error: %s: takes no value, got '%s'\n", name, a);
            return 2;
        }
        if (help) {
            spec->usage(stdout);
            return 0;
        }
        if (version) {
            printf("attnlab %s (./%s)\n", ATTNLAB_VERSION, spec->command);
            return 0;
        }
        const char *value = inline_value;
        if (!is_switch && !value) {
            if (i + 1 >= argc) {
                fprintf(stderr, "error: %s: needs %s\n", name, f && f->needs ? f->needs : "a value");
                if (spec->missing_hint) fprintf(stderr, "hint: %s\n", spec->missing_hint);
                return 2;
            }
            value = argv[++i];
        }
        if (o) {
            if (spec->option(o, value, spec->ctx) != 0) return 2;
            continue;
        }
        int k = (int)(f - spec->flags);
        if (first[k] && !f->repeat) {
            if (is_switch) fprintf(stderr, "error: %s: given twice\n", name);
            else fprintf(stderr, "error: %s: given twice ('%s', then '%s')\n", name, first[k], value);
            return 2;
        }
        if (!first[k]) first[k] = is_switch ? "" : value;
        if (f->given) *f->given = true;
        if (is_switch) *f->on = true;
        else if (take_value(f, value) != 0) return 2;
    }
    return ARGS_OK;
}
