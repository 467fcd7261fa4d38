/* fuzz_checkpoint.c: libFuzzer harness for the checkpoint and config loader
 * (experiments/run/checkpoint.c, the option table's config_from_json and
 * config_validate, and experiments/run/memory.h's sizing).
 *
 * An input that starts with '{' is a config as config.json holds it: it is
 * parsed, read over the defaults, validated and sized. Any other input is a
 * whole checkpoint file: it is opened with checkpoint_open as the commands
 * do; when that accepts it and its model is small, the model is made and
 * every parameter (and the optimizer state, when there is some) is loaded.
 * A bad input must give an error, never a crash, a hang, a leak or undefined
 * behaviour. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checkpoint.h"
#include "memory.h"

/* Models up to this many parameters are made and loaded; larger ones only sized. */
#define FUZZ_MAX_PARAMS 200000

static int fd = -1;
static char path[64];

static void write_input(const uint8_t *data, size_t size) {
    if (fd < 0) {
        fd = memfd_create("fuzz_input", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) abort();
}

static void one_line(const Err *e) {
    if (!e->msg[0] || strchr(e->msg, '\n')) abort();
}

/* A config.json: parsed, read, validated and sized. */
static void load_config(const uint8_t *data, size_t size) {
    cJSON *json = cJSON_ParseWithLength((const char *)data, size);
    if (!json) return;
    Config c;
    config_defaults(&c);
    Err e;
    if (config_from_json(&c, json, &e) != 0 || config_validate(&c, &e) != 0)
        one_line(&e);
    else if (memory_need(&c.model, c.train.batch, c.model.context, MEMORY_TRAIN, 1) <= 0)
        abort();
    cJSON_Delete(json);
}

/* A checkpoint: opened, and loaded when its model is small. */
static void load_checkpoint(const uint8_t *data, size_t size) {
    write_input(data, size);
    StFile st;
    CheckpointInfo info;
    Err e;
    if (checkpoint_open(&st, path, &info, &e) != 0) {
        one_line(&e);
        return;
    }
    if (!rng_state_valid(&info.data_rng)) abort();
    if (model_param_count(&info.cfg.model) <= FUZZ_MAX_PARAMS) {
        Model m;
        model_init(&m, &info.cfg.model);
        if (checkpoint_load(&st, &m, info.has_optim, &e) != 0) one_line(&e);
        model_free(&m);
    }
    st_close(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size && data[0] == '{')
        load_config(data, size);
    else
        load_checkpoint(data, size);
    return 0;
}
