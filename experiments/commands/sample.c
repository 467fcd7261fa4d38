/* sample.c: ./sample RUN_OR_CHECKPOINT [corpus.txt] [--prompt TEXT] [--length N] [--temperature T]
 *                    [--top_k K] [--seed S] [--count C] [--utf8 on|off] [--threads N]
 *
 * Text from a trained model, streamed to stdout a character at a time
 * (experiments/training/generate.h: the length rule and the UTF-8 restriction). The
 * defaults are the run's own sampling options and seed, so that
 * `./sample RUN` prints the text of its samples.txt. A masked LM
 * (objective = mlm) cannot be sampled left to right: it gets the fill-in
 * demo of samples.txt instead, on the validation windows of a corpus. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "checkpoint.h"
#include "corpus.h"
#include "generate.h"
#include "interrupt.h"
#include "memory.h"
#include "open.h"
#include "run.h"
#include "startup.h"
#include "utf8.h"

/* --length's bound: the token ids of the prompt and the text are one array. */
#define SAMPLE_MAX_LENGTH 10000000
#define SAMPLE_MAX_COUNT 100000
/* The length when the run sampled nothing (--sample_length 0): the table's default. */
#define SAMPLE_DEFAULT_LENGTH 400

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./sample RUN_OR_CHECKPOINT [--prompt TEXT] [--length N] [--temperature T] [--top_k K]\n"
            "                [--seed S] [--count C] [--utf8 on|off] [--threads N]\n"
            "       ./sample MLM_RUN_OR_CHECKPOINT [corpus.txt] [--length N] [--threads N]\n"
            "\n"
            "Generates text from a trained model (a run folder or its model.safetensors) and streams\n"
            "it to stdout as it is made, a character at a time: the prompt, then the sample, then a\n"
            "newline. With --count C > 1, each sample comes after a line '--- sample i of C (seed S) ---'.\n"
            "Notes (the model, the settings) go to stderr, so stdout holds only the text.\n"
            "\n"
            "Length. At most N bytes are generated after the prompt. Bytes are printed only once the\n"
            "text reaches a character boundary, so if the N bytes run out inside a character, that\n"
            "character is dropped: the sample is at most N bytes and never ends inside a UTF-8\n"
            "character.\n"
            "\n"
            "UTF-8. With --utf8 on (the default), each byte is drawn only among the bytes that keep\n"
            "the text valid UTF-8 at that point (a first byte or ASCII at a character boundary, the\n"
            "right continuation bytes inside a character; never C0, C1 or F5..FF), the model's\n"
            "probabilities renormalised over them, and top-k keeps the k likeliest of those; the prompt\n"
            "must be valid UTF-8. The output is then valid UTF-8, printed a character at a time, and\n"
            "the sample is at most 3 bytes short of N. With --utf8 off, raw bytes are drawn and any\n"
            "prompt is taken: the output may be invalid UTF-8 (a byte that cannot continue a character\n"
            "leaves it broken and starts afresh), but it still never ends in the first bytes of a\n"
            "character it could complete; it may then end more than 3 bytes short of N.\n"
            "\n"
            "Options default to the run's own sampling options, so that ./sample RUN prints its\n"
            "samples.txt:\n"
            "  --prompt TEXT      text to continue (default: the run's --prompt); may be empty (the\n"
            "                     model then starts from a newline); the model sees its last\n"
            "                     `context` bytes and the text so far\n"
            "  --length N         bytes to generate, 1 to %d (default: the run's --sample_length,\n"
            "                     or %d)\n"
            "  --temperature T    0 (the likeliest byte each time) to 100 (default: the run's)\n"
            "  --top_k K          draw among the K likeliest bytes, 0 = all (default: the run's)\n"
            "  --seed S           the same seed gives the same bytes (default: the run's --seed);\n"
            "                     sample i of --count uses seed S + i - 1\n"
            "  --count C          samples to generate, 1 to %d (default 1)\n"
            "  --utf8 on|off      draw only bytes that keep the text valid UTF-8 (default on)\n"
            "  --threads N        threads, at most the CPUs this process may use; 0 = all of them\n"
            "                     (default 0: the run's thread count is not a request)\n"
            "\n"
            "A masked LM (objective=mlm) is not sampled left to right: ./sample prints its fill-in demo\n"
            "instead (validation windows of corpus.txt, their scored bytes masked and predicted; the\n"
            "samples.txt of such a run), over ceil(N / context) windows. corpus.txt defaults to the one\n"
            "the checkpoint names; only --length and --threads apply.\n"
            "\n"
            "Ctrl-C stops at once (the character in progress is dropped); the exit status is then 130.\n",
            SAMPLE_MAX_LENGTH, SAMPLE_DEFAULT_LENGTH, SAMPLE_MAX_COUNT);
}

/* The command line. The flags whose values the option table checks
 * ("--temperature: expected a number in [0, 100], got 'nan'") go into a
 * scratch config until the checkpoint's is loaded. */
typedef struct {
    Config given;
    bool raw, utf8_given;
    const char *prompt;
    int length, count;
    bool temperature_given, top_k_given, seed_given, threads_given, length_given, count_given, prompt_given;
    const char *target, *corpus_path; /* the positionals */
} SampleArgs;

static int table_value(const char *flag, const char *value, void *ctx) {
    SampleArgs *a = ctx;
    Err e;
    if (option_set(&a->given, flag + 2, value, &e) != 0) {
        err_print(&e);
        return -1;
    }
    return 0;
}

static int utf8_value(const char *flag, const char *value, void *ctx) {
    SampleArgs *a = ctx;
    if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0) {
        fprintf(stderr, "error: %s: '%s' is not one of: on, off\n", flag, value);
        return -1;
    }
    a->raw = !strcmp(value, "off");
    return 0;
}

/* ARGS_OK, or the status to exit with (the error printed). */
static int parse_args(SampleArgs *a, int argc, char **argv) {
    *a = (SampleArgs){.raw = false, .count = 1};
    config_defaults(&a->given);
    const ArgFlag flags[] = {
        {"--prompt", .text = &a->prompt, .needs = "a text (\"\" for none)", .given = &a->prompt_given},
        {"--length", .integer = &a->length, .lo = 1, .hi = SAMPLE_MAX_LENGTH, .given = &a->length_given},
        {"--temperature", .call = table_value, .ctx = a, .given = &a->temperature_given},
        {"--top_k", .call = table_value, .ctx = a, .given = &a->top_k_given},
        {"--seed", .call = table_value, .ctx = a, .given = &a->seed_given},
        {"--count", .integer = &a->count, .lo = 1, .hi = SAMPLE_MAX_COUNT, .given = &a->count_given},
        {"--utf8", .call = utf8_value, .ctx = a, .needs = "on or off", .given = &a->utf8_given},
        {"--threads", .call = table_value, .ctx = a, .given = &a->threads_given},
    };
    const ArgSpec cli = {.command = "sample", .usage = usage, .flags = flags,
                         .n_flags = (int)(sizeof flags / sizeof *flags), .missing_hint = "./sample --help"};
    ArgPositional pos;
    int status = args_parse(&cli, argc, argv, &pos);
    if (status != ARGS_OK) return status;
    if (pos.n == 0) {
        fprintf(stderr, "error: no run folder or checkpoint given\nhint: ./sample runs/NAME --prompt 'The '\n");
        return 2;
    }
    if (pos.n > 2) {
        fprintf(stderr, "error: too many arguments ('%s')\nhint: ./sample --help\n", pos.v[2]);
        return 2;
    }
    a->target = pos.v[0];
    a->corpus_path = pos.n > 1 ? pos.v[1] : NULL;
    return ARGS_OK;
}

/* What applies to which objective, then the flags over the run's own
 * settings in cfg. 0, or the status to exit with (the error printed). */
static int settle(SampleArgs *a, Config *cfg) {
    bool mlm = cfg->model.objective == OBJECTIVE_MLM;
    const char *left_to_right = a->prompt_given        ? "--prompt"
                                : a->temperature_given ? "--temperature"
                                : a->top_k_given       ? "--top_k"
                                : a->seed_given        ? "--seed"
                                : a->count_given       ? "--count"
                                : a->utf8_given        ? "--utf8"
                                                       : NULL;
    if (mlm && left_to_right) {
        fprintf(stderr, "error: %s: %s is a masked LM (objective=mlm), which is not sampled left to right\n"
                        "hint: ./sample shows its fill-in demo; only --length and --threads apply\n",
                left_to_right, a->target);
        return 2;
    }
    if (!mlm && a->corpus_path) {
        fprintf(stderr, "error: %s: a corpus is only for the fill-in demo of objective=mlm models; %s is a causal LM\n"
                        "hint: ./sample %s --prompt TEXT\n",
                a->corpus_path, a->target, a->target);
        return 2;
    }
    if (a->temperature_given) cfg->sample.temperature = a->given.sample.temperature;
    if (a->top_k_given) cfg->sample.top_k = a->given.sample.top_k;
    if (a->seed_given) cfg->train.seed = a->given.train.seed;
    if (!a->length_given) a->length = cfg->sample.length > 0 ? cfg->sample.length : SAMPLE_DEFAULT_LENGTH;
    if (!a->prompt) a->prompt = cfg->sample.prompt;
    if (!mlm && !a->raw) {
        size_t n = strlen(a->prompt), valid = utf8_valid_prefix((const unsigned char *)a->prompt, n);
        if (valid != n) {
            fprintf(stderr, "error: %s: not valid UTF-8 (from byte %zu of %zu)\n"
                            "hint: give valid UTF-8, or --utf8 off to sample raw bytes\n",
                    a->prompt_given ? "--prompt" : "the run's prompt", valid + 1, n);
            return 2;
        }
    }
    return 0;
}

/* Where the text goes: stdout, flushed after every character. */
typedef struct {
    int error; /* errno of the first failed write, or 0 */
} Out;

static int emit_stdout(const char *bytes, size_t n, void *ctx) {
    Out *o = ctx;
    if (fwrite(bytes, 1, n, stdout) != n || fflush(stdout) != 0) {
        o->error = errno ? errno : EIO;
        return -1;
    }
    return 0;
}

static int put_stdout(Out *o, const char *text) { return emit_stdout(text, strlen(text), o); }

/* The corpus of an mlm model's fill-in demo: corpus_path, or the one the
 * checkpoint names. 0, or the status to exit with (the error printed). */
static int open_corpus(Corpus *corpus, const OpenRun *o, const char *target, const char *corpus_path) {
    Err e;
    if (!corpus_path && !(corpus_path = open_run_corpus(o))) {
        err_set(&e, "%s: objective=mlm: the fill-in demo needs a corpus (it masks validation windows), "
                    "and the checkpoint's (%s) is not there",
                target, open_run_corpus_said(o));
        err_hint(&e, "./sample %s corpus.txt", target);
        err_print(&e);
        return 2;
    }
    if (corpus_open(corpus, corpus_path, o->info.cfg.train.val_fraction, o->info.cfg.model.context, &e) != 0) {
        err_print(&e);
        return 1;
    }
    return 0;
}

/* The fill-in demo of an mlm model, to stdout. */
static int fill_in(Model *m, const Config *cfg, const Corpus *corpus, int length) {
    SampleConfig s = cfg->sample;
    s.length = length;
    size_t len;
    char *text = generate_fill_in(m, corpus, &s, &len);
    if (!text) {
        fprintf(stderr, "interrupted; nothing printed\n");
        return interrupt_exit_status();
    }
    Out out = {0};
    int rc = emit_stdout(text, len, &out);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "error: stdout: cannot write: %s\n", strerror(out.error));
        return 1;
    }
    return 0;
}

/* --count samples left to right, to stdout. */
static int sample_text(Model *m, const SampleArgs *a, const Config *cfg) {
    fprintf(stderr, "length %d, temperature %g, top_k %d, seed %lld, utf8 %s\n", a->length,
            (double)cfg->sample.temperature, cfg->sample.top_k, (long long)cfg->train.seed, a->raw ? "off" : "on");
    GenerateSpec g = {.prompt = a->prompt, .length = a->length, .temperature = cfg->sample.temperature,
                      .top_k = cfg->sample.top_k, .raw = a->raw};
    Out out = {0};
    int status = 0;
    for (int i = 0; i < a->count && status == 0; i++) {
        int64_t seed = cfg->train.seed + i;
        char header[128];
        snprintf(header, sizeof header, "--- sample %d of %d (seed %lld) ---\n", i + 1, a->count, (long long)seed);
        if (a->count > 1 && put_stdout(&out, header) != 0) break;
        Rng rng;
        generate_seed(&rng, seed);
        int rc = generate_stream(m, &g, &rng, emit_stdout, &out);
        if (rc == GENERATE_STOPPED || put_stdout(&out, "\n") != 0) break;
        if (rc == GENERATE_INTERRUPTED) {
            fprintf(stderr, "interrupted in sample %d of %d\n", i + 1, a->count);
            status = interrupt_exit_status();
        }
    }
    if (out.error) {
        fprintf(stderr, "error: stdout: cannot write: %s\n", strerror(out.error));
        return 1;
    }
    return status;
}

int main(int argc, char **argv) {
    command_startup(argc, argv);
    command_one_process("sample");
    interrupt_install();
    SampleArgs a;
    int status = parse_args(&a, argc, argv);
    if (status != ARGS_OK) return status;
    OpenRun o;
    Err e;
    if ((status = open_run(&o, a.target, &e)) != 0) {
        err_print(&e);
        return status;
    }
    Config *cfg = &o.info.cfg;
    bool mlm = cfg->model.objective == OBJECTIVE_MLM;
    Corpus corpus;
    memset(&corpus, 0, sizeof corpus);
    if ((status = settle(&a, cfg)) != 0 || (mlm && (status = open_corpus(&corpus, &o, a.target, a.corpus_path)) != 0)) {
        open_run_close(&o);
        return status;
    }
    /* the run's own thread count is bookkeeping, not a request */
    int threads = command_threads(a.threads_given ? a.given.train.threads : 0, stderr, &e);
    if (threads < 0) {
        if (mlm) corpus_close(&corpus);
        open_run_close(&o);
        err_print(&e);
        return 1;
    }
    char what[1200];
    snprintf(what, sizeof what, "%s: sampling", o.path);
    OpenMemory need = {.what = what, .T = cfg->model.context, .use = MEMORY_EVAL, .threads = threads};
    Model m;
    if (open_run_load(&o, &m, &need, false, &e) != 0) {
        if (mlm) corpus_close(&corpus);
        err_print(&e);
        return 1;
    }
    fprintf(stderr, "sample: %s (step %ld, objective %s, context %d), %s\n", o.path, o.info.step,
            mlm ? "mlm" : "clm", cfg->model.context, threads_banner(threads));
    if (mlm) {
        status = fill_in(&m, cfg, &corpus, a.length);
        corpus_close(&corpus);
    } else {
        status = sample_text(&m, &a, cfg);
    }
    model_free(&m);
    return status;
}
