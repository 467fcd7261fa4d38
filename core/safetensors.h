/* safetensors.h: reading and writing F32 safetensors files (checkpoints, test fixtures).
 *
 * Layout: an 8-byte little-endian u64 N, N bytes of JSON, then the data section.
 * The JSON maps each tensor name to {"dtype":"F32","shape":[...],"data_offsets":[begin,end]}
 * (offsets relative to the data section) plus an optional "__metadata__" string map.
 *
 * st_open checks the whole header (length, JSON, dtypes, shapes, offsets inside the file,
 * and that the tensors tile the data section exactly, without gaps or overlaps, as the
 * format requires) before any tensor data is read, so a bad file is one clear error,
 * never a crash. Anything but a regular file (a FIFO, a device) is refused without
 * blocking.
 * st_save writes "<path>.tmp", syncs it and renames it over the target, so a reader
 * never sees a half-written checkpoint. */
#ifndef ATTNLAB_SAFETENSORS_H
#define ATTNLAB_SAFETENSORS_H

#include <stddef.h>
#include <stdio.h>

#include "util.h"

#define ST_MAX_DIMS 4
/* Largest header st_open accepts; the same cap the reference safetensors library uses. */
#define ST_MAX_HEADER_BYTES 100000000ULL

typedef struct {
    char *name;
    int ndim;
    long long shape[ST_MAX_DIMS];
    size_t numel;
    size_t begin, end;      /* byte offsets relative to the start of the data section */
} StEntry;

typedef struct {
    char *path;
    FILE *f;
    size_t data_start;      /* 8 + header length */
    size_t file_size;
    StEntry *entries;       /* n_entries, in header order */
    int n_entries;
    char **meta_keys, **meta_vals;  /* the "__metadata__" string map */
    int n_meta;
} StFile;

/* Opens and validates a file. 0, or -1 with e set; on failure sf holds nothing to free
 * (it is zeroed, so st_close on it is harmless). */
int st_open(StFile *sf, const char *path, Err *e);
/* Frees everything and zeroes sf; safe to call twice. */
void st_close(StFile *sf);
const StEntry *st_find(const StFile *sf, const char *name);   /* NULL if absent */
const char *st_meta(const StFile *sf, const char *key);       /* NULL if absent */
/* Reads en->numel floats into dst. A short read (file truncated after open) is an error. */
int st_read(StFile *sf, const StEntry *en, float *dst, Err *e);
/* Finds `name`, checks it has exactly this shape, reads it. Errors name the tensor and both shapes. */
int st_read_expect(StFile *sf, const char *name, int ndim, const int *shape, float *dst, Err *e);

/* Formats a shape as "[2, 3]" into buf (always NUL-terminated); returns buf. Used in errors. */
char *st_shape_str(char *buf, size_t size, int ndim, const long long *shape);

typedef struct { const char *name; int ndim; const int *shape; const float *data; } StTensor;
typedef struct { const char *key; const char *value; } StMeta;
/* Writes n tensors (in this order) and nmeta metadata pairs. Names must be unique and
 * non-empty, metadata keys unique. 0, or -1 with e set and the target left untouched. */
int st_save(const char *path, const StTensor *t, int n, const StMeta *meta, int nmeta, Err *e);

#endif
