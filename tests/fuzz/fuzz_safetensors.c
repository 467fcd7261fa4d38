/* fuzz_safetensors.c: libFuzzer harness for the safetensors reader (core/safetensors.c).
 *
 * Each input is a whole file: it is written to an in-memory file and opened
 * with st_open, and every tensor it accepts is read back and every metadata
 * key looked up. A bad file must give an error, never a crash, a leak or
 * undefined behaviour; a file st_open accepts must read without error (the
 * tensors tile the data section, so each read is inside the file). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "safetensors.h"

static int fd = -1;
static char path[64];

/* The input as a file: an in-memory one, reopened by path as st_open wants. */
static void write_input(const uint8_t *data, size_t size) {
    if (fd < 0) {
        fd = memfd_create("fuzz_input", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_input(data, size);
    StFile sf;
    Err e;
    if (st_open(&sf, path, &e) != 0) {
        if (!e.msg[0] || strchr(e.msg, '\n')) abort(); /* one line, always */
        return 0;
    }
    for (int i = 0; i < sf.n_entries; i++) {
        const StEntry *en = &sf.entries[i];
        if (en->end > sf.file_size - sf.data_start || st_find(&sf, en->name) == NULL) abort();
        float *x = malloc(en->numel ? en->numel * sizeof(float) : 1);
        if (!x || st_read(&sf, en, x, &e) != 0) abort();
        free(x);
    }
    for (int i = 0; i < sf.n_meta; i++)
        if (st_meta(&sf, sf.meta_keys[i]) == NULL) abort();
    st_close(&sf);
    return 0;
}
