/* safetensors.c: see safetensors.h for the format and the guarantees. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cJSON.h>

/* Tensor data is copied between the file and float arrays byte for byte, which is only
 * right on a little-endian host with 4-byte IEEE floats. */
_Static_assert(sizeof(float) == 4, "safetensors F32 needs 4-byte floats");
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");
#else
#error "cannot tell the byte order of this host; safetensors I/O assumes little-endian"
#endif

#define META_KEY "__metadata__"

/* ---------------------------------------------------------------------------------------
 * helpers */

char *st_shape_str(char *buf, size_t size, int ndim, const long long *shape) {
    size_t len = 0;
    if (size == 0) return buf;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, size - len, "[");
    for (int i = 0; i < ndim && len < size; i++) {
        len += (size_t)snprintf(buf + len, size - len, i ? ", %lld" : "%lld", shape[i]);
    }
    if (len < size) snprintf(buf + len, size - len, "]");
    return buf;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Returns a name that occurs more than once, or NULL. Sorting keeps this O(n log n),
 * so a hostile header with millions of entries cannot stall the check. */
static const char *find_duplicate(char *const *names, int n) {
    if (n < 2) return NULL;
    const char **sorted = xmalloc((size_t)n * sizeof *sorted);
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_name);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) dup = sorted[i];
    }
    free(sorted);
    return dup;
}

/* A JSON number that is a non-negative integer no larger than max. cJSON keeps numbers
 * as doubles, so anything above 2^53 cannot be trusted to be exact and is refused. */
static int json_uint(const cJSON *j, unsigned long long max, unsigned long long *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double v = j->valuedouble;
    if (!(v >= 0.0 && v <= 9007199254740992.0)) return -1;   /* also rejects NaN */
    unsigned long long u = (unsigned long long)v;
    if ((double)u != v || u > max) return -1;
    *out = u;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * reading */

void st_close(StFile *sf) {
    if (!sf) return;
    if (sf->f) fclose(sf->f);   /* opened read-only: nothing to lose if this fails */
    for (int i = 0; i < sf->n_entries; i++) free(sf->entries[i].name);
    for (int i = 0; i < sf->n_meta; i++) {
        free(sf->meta_keys[i]);
        free(sf->meta_vals[i]);
    }
    free(sf->entries);
    free(sf->meta_keys);
    free(sf->meta_vals);
    free(sf->path);
    memset(sf, 0, sizeof *sf);
}

static int parse_metadata(StFile *s, const cJSON *m, Err *e) {
    if (!cJSON_IsObject(m)) return err_set(e, "%s: " META_KEY " is not a JSON object", s->path);
    int n = cJSON_GetArraySize(m);
    s->meta_keys = xcalloc((size_t)n, sizeof(char *));
    s->meta_vals = xcalloc((size_t)n, sizeof(char *));
    for (const cJSON *kv = m->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv)) {
            return err_set(e, "%s: " META_KEY " value for '%s' is not a string", s->path, kv->string);
        }
        s->meta_keys[s->n_meta] = xstrdup(kv->string);
        s->meta_vals[s->n_meta] = xstrdup(kv->valuestring);
        s->n_meta++;
    }
    const char *dup = find_duplicate(s->meta_keys, s->n_meta);
    if (dup) return err_set(e, "%s: " META_KEY " key '%s' appears more than once", s->path, dup);
    return 0;
}

/* Checks one tensor entry and fills en (whose name is already set). */
static int parse_entry(const StFile *s, const cJSON *j, StEntry *en, Err *e) {
    const char *p = s->path, *name = en->name;
    if (!cJSON_IsObject(j)) return err_set(e, "%s: tensor '%s': entry is not a JSON object", p, name);

    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    if (!cJSON_IsString(dtype)) return err_set(e, "%s: tensor '%s': missing or non-string dtype", p, name);
    /* dtype first: an F16 tensor would otherwise show up as a confusing size mismatch. */
    if (strcmp(dtype->valuestring, "F32") != 0) {
        return err_set(e, "%s: tensor '%s': dtype %s not supported (only F32)", p, name, dtype->valuestring);
    }

    if (!cJSON_IsArray(shape)) return err_set(e, "%s: tensor '%s': missing or non-array shape", p, name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > ST_MAX_DIMS) {
        return err_set(e, "%s: tensor '%s': shape has %d dims (at most %d supported)", p, name, ndim, ST_MAX_DIMS);
    }
    en->ndim = ndim;
    size_t numel = 1;
    int overflow = 0;
    const cJSON *d = shape->child;
    for (int i = 0; i < ndim; i++, d = d->next) {
        unsigned long long v;
        if (json_uint(d, (unsigned long long)LLONG_MAX, &v) != 0) {
            return err_set(e, "%s: tensor '%s': shape entry %d is not a non-negative integer", p, name, i);
        }
        en->shape[i] = (long long)v;
        /* numel * 4 must fit in size_t; a later zero dim does not excuse an overflow. */
        if (v != 0 && numel > SIZE_MAX / 4 / v) overflow = 1;
        numel *= (size_t)v;
    }
    char sbuf[128];
    st_shape_str(sbuf, sizeof sbuf, en->ndim, en->shape);
    if (overflow) return err_set(e, "%s: tensor '%s': shape %s has too many elements", p, name, sbuf);
    en->numel = numel;

    unsigned long long b, en_;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        json_uint(offs->child, SIZE_MAX, &b) != 0 || json_uint(offs->child->next, SIZE_MAX, &en_) != 0) {
        return err_set(e, "%s: tensor '%s': data_offsets must be two non-negative integers", p, name);
    }
    en->begin = (size_t)b;
    en->end = (size_t)en_;
    if (en->end < en->begin) {
        return err_set(e, "%s: tensor '%s': data_offsets [%zu, %zu] end before begin", p, name, en->begin, en->end);
    }
    if (en->end - en->begin != numel * sizeof(float)) {
        return err_set(e, "%s: tensor '%s': shape %s needs %zu bytes but data_offsets span %zu", p, name, sbuf,
                       numel * sizeof(float), en->end - en->begin);
    }
    size_t data_size = s->file_size - s->data_start;
    if (en->end > data_size) {
        return err_set(e, "%s: tensor '%s': data_offsets [%zu, %zu] out of range (data section has %zu bytes; "
                       "file truncated?)", p, name, en->begin, en->end, data_size);
    }
    return 0;
}

static int cmp_offsets(const void *a, const void *b) {
    const StEntry *x = *(const StEntry *const *)a, *y = *(const StEntry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* The format requires the tensors, in the order of their offsets, to tile the
 * data section exactly: each starts where the previous one ended, the first at
 * 0 and the last ending at the end of the file. A gap or an overlap means a
 * forged or shifted header (a header length one byte short moves every tensor
 * by a byte), so it is refused rather than read as garbage. */
static int check_coverage(const StFile *s, Err *e) {
    const char *p = s->path;
    size_t data_size = s->file_size - s->data_start, at = 0;
    const StEntry **order = xmalloc((size_t)(s->n_entries ? s->n_entries : 1) * sizeof *order);
    for (int i = 0; i < s->n_entries; i++) order[i] = &s->entries[i];
    qsort(order, (size_t)s->n_entries, sizeof *order, cmp_offsets);
    int rc = 0;
    for (int i = 0; i < s->n_entries && rc == 0; i++) {
        const StEntry *en = order[i];
        if (en->begin < at)
            rc = err_set(e, "%s: tensors '%s' and '%s' overlap (data_offsets [%zu, %zu] and [%zu, %zu])", p,
                         order[i - 1]->name, en->name, order[i - 1]->begin, order[i - 1]->end, en->begin, en->end);
        else if (en->begin > at)
            rc = err_set(e, "%s: data section bytes [%zu, %zu) belong to no tensor (before '%s')", p, at, en->begin,
                         en->name);
        at = en->end;
    }
    if (rc == 0 && at != data_size)
        rc = err_set(e, "%s: data section bytes [%zu, %zu) belong to no tensor (after the last one)", p, at,
                     data_size);
    free(order);
    return rc;
}

/* Everything after the file is open: header length, JSON, entries, and that
 * the entries cover the data section. Fills s as it goes; the caller frees s
 * on failure. */
static int parse_file(StFile *s, Err *e) {
    const char *p = s->path;
    if (s->file_size < 8) {
        return err_set(e, "%s: file is %zu bytes, too short for a safetensors header", p, s->file_size);
    }

    unsigned char lenbuf[8];
    if (fread(lenbuf, 1, 8, s->f) != 8) return err_set(e, "%s: cannot read the header length", p);
    unsigned long long n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | lenbuf[i];
    /* Both checks come before the allocation, so a corrupt length cannot ask for exabytes. */
    if (n > ST_MAX_HEADER_BYTES) {
        return err_set(e, "%s: not a safetensors file (its first 8 bytes give a header length of %llu, which exceeds "
                       "the %llu-byte limit)", p, n, ST_MAX_HEADER_BYTES);
    }
    if (n > s->file_size - 8) {
        return err_set(e, "%s: not a safetensors file, or a truncated one (header length %llu runs past the end of "
                       "the file, %zu bytes)", p, n, s->file_size);
    }
    s->data_start = 8 + (size_t)n;

    char *hdr = xmalloc((size_t)n + 1);
    if (fread(hdr, 1, (size_t)n, s->f) != (size_t)n) {
        free(hdr);
        return err_set(e, "%s: cannot read the %llu-byte header", p, n);
    }
    hdr[n] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)n, &end, 0);
    if (!root) {
        size_t at = end ? (size_t)(end - hdr) : 0;
        free(hdr);
        return err_set(e, "%s: header is not valid JSON (near byte %zu)", p, at);
    }
    /* Writers pad the header with spaces; anything else after the JSON is corruption. */
    for (const char *c = end; c < hdr + n; c++) {
        if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r') {
            size_t at = (size_t)(c - hdr);
            cJSON_Delete(root);
            free(hdr);
            return err_set(e, "%s: header has stray bytes after the JSON (at byte %zu)", p, at);
        }
    }
    free(hdr);

    int rc = 0;
    if (!cJSON_IsObject(root)) {
        rc = err_set(e, "%s: header is not a JSON object", p);
        goto done;
    }
    int n_items = cJSON_GetArraySize(root);
    s->entries = xcalloc((size_t)n_items, sizeof(StEntry));
    int seen_meta = 0;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, META_KEY) == 0) {
            if (seen_meta++) {
                rc = err_set(e, "%s: " META_KEY " appears more than once", p);
                goto done;
            }
            if ((rc = parse_metadata(s, it, e)) != 0) goto done;
            continue;
        }
        StEntry *en = &s->entries[s->n_entries++];
        en->name = xstrdup(it->string);
        if ((rc = parse_entry(s, it, en, e)) != 0) goto done;
    }

    /* st_find returns the first match, so a repeated name would silently hide a tensor. */
    char **names = xmalloc((size_t)(s->n_entries ? s->n_entries : 1) * sizeof *names);
    for (int i = 0; i < s->n_entries; i++) names[i] = s->entries[i].name;
    const char *dup = find_duplicate(names, s->n_entries);
    if (dup) rc = err_set(e, "%s: tensor '%s' appears more than once in the header", p, dup);
    free(names);
    if (rc == 0) rc = check_coverage(s, e);
done:
    cJSON_Delete(root);
    return rc;
}

/* Opens path for reading if it is a regular file. O_NONBLOCK so that a FIFO
 * named by mistake is refused instead of blocking the open until a writer
 * comes; then the descriptor is made blocking again for the reads. */
static int open_regular(StFile *s, const char *path, Err *e) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return err_set(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = err_set(e, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        rc = err_set(e, "%s: is a directory, not a safetensors file", path);
    else if (!S_ISREG(st.st_mode))
        rc = err_set(e, "%s: not a regular file (a safetensors file is one)", path);
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(s->f = fdopen(fd, "rb")))
        rc = err_set(e, "%s: cannot open: %s", path, strerror(errno));
    if (rc != 0) {
        close(fd);
        return -1;
    }
    s->file_size = (size_t)st.st_size;
    return 0;
}

int st_open(StFile *sf, const char *path, Err *e) {
    StFile s = {0};
    memset(sf, 0, sizeof *sf);
    s.path = xstrdup(path);
    if (open_regular(&s, path, e) != 0 || parse_file(&s, e) != 0) {
        st_close(&s);
        return -1;
    }
    *sf = s;
    return 0;
}

const StEntry *st_find(const StFile *sf, const char *name) {
    /* Linear: checkpoints hold a few hundred tensors and each is looked up once. */
    for (int i = 0; i < sf->n_entries; i++) {
        if (strcmp(sf->entries[i].name, name) == 0) return &sf->entries[i];
    }
    return NULL;
}

const char *st_meta(const StFile *sf, const char *key) {
    for (int i = 0; i < sf->n_meta; i++) {
        if (strcmp(sf->meta_keys[i], key) == 0) return sf->meta_vals[i];
    }
    return NULL;
}

int st_read(StFile *sf, const StEntry *en, float *dst, Err *e) {
    if (!sf->f) DIE("st_read on a closed StFile");
    if (en->numel == 0) return 0;
    /* Offsets were checked against the size at open time; the file may have shrunk since. */
    if (fseeko(sf->f, (off_t)(sf->data_start + en->begin), SEEK_SET) != 0) {
        return err_set(e, "%s: tensor '%s': cannot seek: %s", sf->path, en->name, strerror(errno));
    }
    clearerr(sf->f);
    size_t got = fread(dst, sizeof(float), en->numel, sf->f);
    if (got != en->numel) {
        if (ferror(sf->f)) {
            return err_set(e, "%s: tensor '%s': read failed: %s", sf->path, en->name, strerror(errno));
        }
        return err_set(e, "%s: tensor '%s': short read (%zu of %zu values); file truncated since it was opened?",
                       sf->path, en->name, got, en->numel);
    }
    return 0;
}

int st_read_expect(StFile *sf, const char *name, int ndim, const int *shape, float *dst, Err *e) {
    if (ndim < 0 || ndim > ST_MAX_DIMS) DIE("st_read_expect: ndim %d out of range for '%s'", ndim, name);
    const StEntry *en = st_find(sf, name);
    if (!en) return err_set(e, "%s: tensor '%s' not found", sf->path, name);
    long long want[ST_MAX_DIMS];
    int same = en->ndim == ndim;
    for (int i = 0; i < ndim; i++) {
        want[i] = shape[i];
        if (same && en->shape[i] != want[i]) same = 0;
    }
    if (!same) {
        char have_s[128], want_s[128];
        return err_set(e, "%s: tensor '%s': shape %s in file, expected %s", sf->path, name,
                       st_shape_str(have_s, sizeof have_s, en->ndim, en->shape),
                       st_shape_str(want_s, sizeof want_s, ndim, want));
    }
    return st_read(sf, en, dst, e);
}

/* ---------------------------------------------------------------------------------------
 * writing */

static cJSON *json_check(cJSON *j) {
    if (!j) DIE_OOM(0);
    return j;
}

/* Integers go in as raw text: cJSON would print them via a double ("%1.15g"). */
static cJSON *json_raw_size(size_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%zu", v);
    return json_check(cJSON_CreateRaw(buf));
}

/* Checks the arguments and builds the header JSON; NULL with e set on bad input. */
static char *build_header(const char *path, const StTensor *t, int n, const StMeta *meta, int nmeta, Err *e) {
    if (n < 0 || nmeta < 0) DIE("st_save: negative count");
    char **names = xmalloc((size_t)(n + nmeta + 1) * sizeof *names);
    char *json = NULL;
    cJSON *root = json_check(cJSON_CreateObject());
    size_t offset = 0;

    for (int i = 0; i < nmeta; i++) {
        if (!meta[i].key || !meta[i].value) DIE("st_save: metadata %d has a NULL key or value", i);
        names[i] = (char *)meta[i].key;
    }
    const char *dup = find_duplicate(names, nmeta);
    if (dup) {
        err_set(e, "%s: metadata key '%s' given more than once", path, dup);
        goto done;
    }
    if (nmeta > 0) {
        cJSON *m = json_check(cJSON_CreateObject());
        cJSON_AddItemToObject(root, META_KEY, m);
        for (int i = 0; i < nmeta; i++) {
            cJSON_AddItemToObject(m, meta[i].key, json_check(cJSON_CreateString(meta[i].value)));
        }
    }

    for (int i = 0; i < n; i++) {
        const StTensor *x = &t[i];
        if (!x->name || !x->name[0]) {
            err_set(e, "%s: tensor %d has an empty name", path, i);
            goto done;
        }
        if (strcmp(x->name, META_KEY) == 0) {
            err_set(e, "%s: tensor name '" META_KEY "' is reserved", path);
            goto done;
        }
        if (x->ndim < 0 || x->ndim > ST_MAX_DIMS) {
            err_set(e, "%s: tensor '%s' has %d dims (at most %d supported)", path, x->name, x->ndim, ST_MAX_DIMS);
            goto done;
        }
        names[i] = (char *)x->name;
        size_t numel = 1;
        int too_big = 0;
        cJSON *shape = json_check(cJSON_CreateArray());
        cJSON *ent = json_check(cJSON_CreateObject());
        cJSON_AddItemToObject(root, x->name, ent);
        json_check(cJSON_AddStringToObject(ent, "dtype", "F32"));
        cJSON_AddItemToObject(ent, "shape", shape);
        for (int d = 0; d < x->ndim; d++) {
            if (x->shape[d] < 0) {
                err_set(e, "%s: tensor '%s' has a negative dim %d", path, x->name, x->shape[d]);
                goto done;
            }
            size_t dim = (size_t)x->shape[d];
            if (dim != 0 && numel > SIZE_MAX / sizeof(float) / dim) too_big = 1;   /* same rule as st_open */
            numel *= dim;
            cJSON_AddItemToArray(shape, json_raw_size(dim));
        }
        if (too_big || numel * sizeof(float) > SIZE_MAX - offset) {
            err_set(e, "%s: tensor '%s' is too large to save", path, x->name);
            goto done;
        }
        if (numel > 0 && !x->data) DIE("st_save: tensor '%s' has no data", x->name);
        cJSON *offs = json_check(cJSON_CreateArray());
        cJSON_AddItemToObject(ent, "data_offsets", offs);
        cJSON_AddItemToArray(offs, json_raw_size(offset));
        offset += numel * sizeof(float);
        cJSON_AddItemToArray(offs, json_raw_size(offset));
    }
    dup = find_duplicate(names, n);
    if (dup) {
        err_set(e, "%s: tensor name '%s' given more than once", path, dup);
        goto done;
    }
    json = cJSON_PrintUnformatted(root);
    if (!json) DIE_OOM(0);
done:
    cJSON_Delete(root);
    free(names);
    return json;
}

/* Makes the rename itself durable. Best effort: some file systems refuse to sync a directory. */
static void sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? xstrdup(path) : xstrdup(".");
    if (slash) dir[slash == path ? 1 : (size_t)(slash - path)] = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

int st_save(const char *path, const StTensor *t, int n, const StMeta *meta, int nmeta, Err *e) {
    char *json = build_header(path, t, n, meta, nmeta, e);
    if (!json) return -1;

    /* Pad with spaces so the data section starts 8-byte aligned, as the reference writer does. */
    size_t json_len = strlen(json);
    size_t hdr_len = (json_len + 7) & ~(size_t)7;
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (unsigned char)((unsigned long long)hdr_len >> (8 * i));

    size_t tmp_size = strlen(path) + 5;
    char *tmp = xmalloc(tmp_size);
    snprintf(tmp, tmp_size, "%s.tmp", path);

    int rc = -1;
    /* A fresh file: whatever a killed run left at tmp (or a FIFO, or a
     * symlink put there) is replaced, never written through. */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        err_set(e, "%s: cannot create %s: %s", path, tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        goto out;   /* nothing was left */
    }
    static const char spaces[8] = "        ";
    int ok = fwrite(lenbuf, 1, 8, f) == 8 && fwrite(json, 1, json_len, f) == json_len &&
             fwrite(spaces, 1, hdr_len - json_len, f) == hdr_len - json_len;
    for (int i = 0; ok && i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= (size_t)t[i].shape[d];
        ok = numel == 0 || fwrite(t[i].data, sizeof(float), numel, f) == numel;
    }
    /* fflush and fsync before fclose, so a full disk shows up here and not after the rename. */
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved_errno = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved_errno = errno;
    }
    if (!ok) {
        err_set(e, "%s: writing %s failed: %s", path, tmp, strerror(saved_errno));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        err_set(e, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
        unlink(tmp);
        goto out;
    }
    sync_parent_dir(path);
    rc = 0;
out:
    free(tmp);
    cJSON_free(json);
    return rc;
}
