/* progress.c: see progress.h. */
#include "progress.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

#define TTY_INTERVAL 0.1    /* seconds between redraws on a terminal */
#define PLAIN_INTERVAL 30.0 /* seconds between plain lines at most */
#define BAR_WIDTH 20
#define LINE_MAX_LEN 400

const char *format_duration(double seconds, char *buf, size_t size) {
    if (!buf || size == 0) return buf;
    if (!isfinite(seconds) || seconds > 3.6e9) {
        snprintf(buf, size, "--");
        return buf;
    }
    long s = seconds > 0 ? (long)(seconds + 0.5) : 0;
    if (s < 60)
        snprintf(buf, size, "%lds", s);
    else if (s < 3600)
        snprintf(buf, size, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(buf, size, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
    return buf;
}

/* The next 10% mark after done. */
static long next_mark(long total, long done) {
    long tenth = total / 10 > 0 ? total / 10 : 1;
    return (done / tenth + 1) * tenth;
}

void progress_init(Progress *p, const char *label, long total, FILE *out) {
    memset(p, 0, sizeof *p);
    p->out = out;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->total = total;
    p->tty = out && isatty(fileno(out));
    p->columns = 80;
    if (p->tty) {
        struct winsize ws;
        if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) p->columns = ws.ws_col;
    }
    if (p->columns > LINE_MAX_LEN) p->columns = LINE_MAX_LEN;
    p->start = now_seconds();
    p->last_draw = -1e30;
    p->last_print = p->start;
    p->next_print = total > 0 ? next_mark(total, 0) : -1;
}

void progress_from(Progress *p, long done) {
    p->done = p->first = done;
    if (p->total > 0) p->next_print = next_mark(p->total, done);
}

/* Appends to line at *len (never past cap), printf-style. */
static void put(char *line, int *len, int cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *line, int *len, int cap, const char *fmt, ...) {
    if (*len >= cap - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + *len, (size_t)(cap - *len), fmt, ap);
    va_end(ap);
    if (n > 0) *len = *len + n < cap - 1 ? *len + n : cap - 1;
}

/* Elapsed and (when known and not final) the ETA: " elapsed 12s eta 48s". */
static void put_times(const Progress *p, char *line, int *len, int cap, double elapsed, int final) {
    char a[32], b[32];
    put(line, len, cap, "%selapsed %s", p->tty ? "| " : "", format_duration(elapsed, a, sizeof a));
    if (!final && p->total > 0 && p->done > p->first && p->done < p->total && elapsed > 0) {
        double rate = (double)(p->done - p->first) / elapsed;
        put(line, len, cap, " eta %s", format_duration((double)(p->total - p->done) / rate, b, sizeof b));
    }
}

static int percent(const Progress *p) {
    if (p->total <= 0) return 0;
    long d = p->done < 0 ? 0 : p->done > p->total ? p->total : p->done;
    return (int)(100.0 * (double)d / (double)p->total);
}

/* extra's fields (tab-separated) joined by two spaces into out, as many
 * whole fields as fit in room characters: a narrow terminal drops the last
 * fields rather than cutting one. Returns the length. */
static int fit_fields(const char *extra, char *out, int room) {
    int len = 0;
    out[0] = '\0';
    for (const char *f = extra; *f;) {
        const char *end = strchr(f, '\t');
        int n = end ? (int)(end - f) : (int)strlen(f), sep = len ? 2 : 0;
        if (len + sep + n > room) break;
        len += snprintf(out + len, (size_t)(room - len + 1), "%s%.*s", sep ? "  " : "", n, f);
        if (!end) break;
        f = end + 1;
    }
    return len;
}

static void emit(Progress *p, const char *extra, double now, int final) {
    char line[LINE_MAX_LEN + 1];
    char tail[96];
    int len = 0, tail_len = 0;
    double elapsed = now - p->start;
    put_times(p, tail, &tail_len, (int)sizeof tail, elapsed, final);
    if (!extra) extra = "";

    if (!p->tty) {
        int cap = (int)sizeof line;
        put(line, &len, cap, "%s%sstep %ld", p->label, p->label[0] ? ": " : "", p->done);
        if (p->total > 0) put(line, &len, cap, "/%ld (%d%%)", p->total, percent(p));
        char fields[LINE_MAX_LEN + 1];
        if (extra[0] && fit_fields(extra, fields, LINE_MAX_LEN)) put(line, &len, cap, " %s", fields);
        put(line, &len, cap, " %s", tail);
        fprintf(p->out, "%s\n", line);
        fflush(p->out);
        return;
    }

    /* One line that fits the terminal. What must show: the count, the
     * percentage and the times; a long label is cut to leave room for them.
     * Then the fields, as many whole ones as fit, and the bar if room is left. */
    int cap = p->columns - 1; /* the last column free, so the cursor does not wrap */
    char count[64];
    if (p->total > 0)
        snprintf(count, sizeof count, "%ld/%ld %3d%%", p->done, p->total, percent(p));
    else
        snprintf(count, sizeof count, "%ld", p->done);
    int label_len = (int)strlen(p->label), need = (int)strlen(count) + 1 + tail_len;
    int label_room = cap - need - 2; /* ": " after it */
    if (label_len > label_room) label_len = label_room > 2 ? label_room - 2 : 0;
    if (label_len) put(line, &len, (int)sizeof line, "%.*s%s: ", label_len, p->label, label_len < (int)strlen(p->label) ? ".." : "");
    int room = cap - len - need - 1;
    char fields[LINE_MAX_LEN + 1];
    int fields_len = extra[0] && room > 3 ? fit_fields(extra, fields, room) : 0;
    bool bar = p->total > 0 && room - fields_len - (fields_len ? 1 : 0) >= BAR_WIDTH + 3;
    if (bar) {
        char b[BAR_WIDTH + 1];
        int filled = (int)((long)percent(p) * BAR_WIDTH / 100);
        for (int i = 0; i < BAR_WIDTH; i++) b[i] = i < filled ? '#' : '.';
        b[BAR_WIDTH] = '\0';
        char *slash = strchr(count, '/'), *space = slash ? strchr(slash, ' ') : NULL;
        put(line, &len, (int)sizeof line, "%.*s [%s]%s", space ? (int)(space - count) : 0, count, b, space ? space : "");
    } else {
        put(line, &len, (int)sizeof line, "%s", count);
    }
    if (fields_len) put(line, &len, (int)sizeof line, " %s", fields);
    put(line, &len, (int)sizeof line, " %s", tail);
    int pad = p->last_len > len ? p->last_len - len : 0;
    fprintf(p->out, "\r%s%*s", line, pad, "");
    if (pad) fprintf(p->out, "\r%s", line); /* cursor back to the end of the text */
    if (final) fputc('\n', p->out);
    fflush(p->out);
    p->last_len = len;
}

void progress_update(Progress *p, long done, const char *extra) {
    if (!p->out || p->finished) return;
    p->done = done;
    double now = now_seconds();
    if (p->tty) {
        if (now - p->last_draw < TTY_INTERVAL) return;
        p->last_draw = now;
        emit(p, extra, now, 0);
        return;
    }
    /* Plain lines: the 100% line is left to progress_finish. */
    if (p->total > 0 && done >= p->total) return;
    int due_mark = p->total > 0 && done >= p->next_print;
    int due_time = now - p->last_print >= PLAIN_INTERVAL;
    if (!due_mark && !due_time) return;
    if (p->total > 0) p->next_print = next_mark(p->total, done);
    p->last_print = now;
    emit(p, extra, now, 0);
}

void progress_finish(Progress *p, const char *extra) {
    if (!p->out || p->finished) return;
    p->finished = 1;
    emit(p, extra, now_seconds(), 1);
}
