/* train.c: ./train [--key value ...] corpus.txt
 *          ./train --resume RUN_DIR [--steps N ...] */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "checkpoint.h"
#include "run.h"
#include "startup.h"
#include "tensor.h"
#include "trainer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./train [--key value ...] corpus.txt\n"
            "       ./train --resume RUN_DIR [--key value ...] [corpus.txt]\n"
            "\n"
            "Trains a byte-level language model on corpus.txt (any text; the last val_fraction\n"
            "is held out). The run folder gets model.safetensors, config.json, metrics.jsonl,\n"
            "loss.png and samples.txt (under --objective mlm, a fill-in demo: masked\n"
            "validation windows and the model's predictions). Ctrl-C saves a checkpoint and\n"
            "stops; --resume continues the run exactly (training, sampling and threads options\n"
            "may change; model options may not).\n");
    options_print_help(f, 7);
}

/* Options given on the command line, in order, to apply over a resumed config. */
typedef struct {
    Config *cfg;
    const char *keys[128], *values[128];
    int n_set;
} TrainArgs;

static int set_option(const OptDef *o, const char *value, void *ctx) {
    TrainArgs *t = ctx;
    if (t->n_set == 128) {
        fprintf(stderr, "error: too many options\n");
        return -1;
    }
    t->keys[t->n_set] = o->name;
    t->values[t->n_set++] = value;
    Err e;
    if (option_set(t->cfg, o->name, value, &e) != 0) {
        err_print(&e);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    command_startup(argc, argv);
    Config cfg;
    config_defaults(&cfg);
    const char *corpus = NULL, *resume = NULL;
    Err e;
    TrainArgs args = {.cfg = &cfg};
    const ArgFlag flags[] = {{"--resume", .text = &resume, .needs = "a run folder"}};
    const ArgSpec cli = {.command = "train", .usage = usage, .flags = flags,
                         .n_flags = (int)(sizeof flags / sizeof *flags), .option = set_option, .ctx = &args};
    ArgPositional pos;
    int status = args_parse(&cli, argc, argv, &pos);
    if (status != ARGS_OK) return status;
    if (pos.n > 1) {
        fprintf(stderr, "error: more than one corpus given ('%s' and '%s')\n", pos.v[0], pos.v[1]);
        return 2;
    }
    if (pos.n) corpus = pos.v[0];

    char run_dir[1024];
    CheckpointInfo info;
    if (resume) {
        char ckpt[1100];
        StFile st;
        if (path_join(ckpt, sizeof ckpt, resume, "model.safetensors", &e) != 0 || checkpoint_open(&st, ckpt, &info, &e) != 0) {
            err_print(&e);
            return 1;
        }
        st_close(&st);
        Config given = cfg;
        cfg = info.cfg;
        for (int k = 0; k < args.n_set; k++) {
            const OptDef *o = option_find(args.keys[k]);
            if (o->group == GROUP_MODEL) {
                char a[320], b[320];
                if (strcmp(option_format(&given, o, a, sizeof a), option_format(&cfg, o, b, sizeof b)) != 0) {
                    fprintf(stderr, "error: --%s: a model option cannot change when resuming (the run has %s)\n", args.keys[k], b);
                    return 2;
                }
            }
            option_set(&cfg, args.keys[k], args.values[k], NULL);
        }
        if (!corpus) corpus = info.corpus;
        snprintf(run_dir, sizeof run_dir, "%s", resume);
        if (info.step >= cfg.train.steps) {
            fprintf(stderr, "error: %s: already trained for %ld steps (--steps %d)\nhint: raise --steps to train further\n",
                    resume, info.step, cfg.train.steps);
            return 2;
        }
    } else {
        if (!corpus) {
            fprintf(stderr, "error: no corpus given\nhint: ./train corpus.txt (make data fetches data/brown.txt)\n");
            return 2;
        }
        if (cfg.train.out[0]) {
            snprintf(run_dir, sizeof run_dir, "%s", cfg.train.out);
        } else {
            char stamp[32];
            time_t now = time(NULL);
            strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
            snprintf(run_dir, sizeof run_dir, "runs/%s-%s", option_format(&cfg, option_find("attn"), (char[32]){0}, 32), stamp);
        }
    }
    if (config_validate(&cfg, &e) != 0) {
        err_print(&e);
        return 2;
    }
    if (cfg.model.bca == ON) {
        fprintf(stderr, "error: --bca on: blockwise causal attention is an inference-time option\n"
                        "hint: train without it, then evaluate with ./extrapolate CHECKPOINT corpus.txt --bca on\n");
        return 2;
    }
    int threads = engine_set_threads(cfg.train.threads);
    printf("attnlab train: %s%s, %s\n", run_dir, resume ? " (resumed)" : "", threads_banner(threads));

    train_install_signal_handlers();
    TrainJob job = {.cfg = cfg, .corpus = corpus, .run_dir = run_dir, .resume = resume != NULL, .label = "train"};
    TrainResult r;
    if (train_run(&job, &r, &e) != 0) {
        err_print(&e);
        return 1;
    }
    switch (r.status) {
        case TRAIN_DIVERGED: {
            char ckpt[1100];
            fprintf(stderr, "error: step %ld: the loss is not finite; stopped\n", r.diverged_step);
            if (path_join(ckpt, sizeof ckpt, run_dir, "model.safetensors", NULL) == 0 && file_exists(ckpt))
                fprintf(stderr, "hint: the last good checkpoint is %s; try a lower --lr\n", ckpt);
            else
                fprintf(stderr, "hint: no checkpoint was saved before it; try a lower --lr\n");
            return 1;
        }
        case TRAIN_INTERRUPTED:
            printf("interrupted at step %ld; checkpoint saved.\ncontinue with: ./train --resume %s\n", r.step, run_dir);
            return 128 + (train_stop_signal() ? train_stop_signal() : 2); /* the shell's convention: 130 for Ctrl-C */
        default:
            printf("val bpb %.4f (best %.4f)%s after %ld steps, %.0f tok/s\n", r.val_bpb, r.best_val_bpb,
                   cfg.model.objective == OBJECTIVE_MLM ? " on the masked bytes" : "", r.step, r.tok_s);
            printf("run folder: %s (loss plot: %s/loss.png)\n", run_dir, run_dir);
            return 0;
    }
}
