/* plot.c: line plots and heatmaps as PNG files, drawn with PLplot's "pngcairo" driver.
 *
 * PLplot details that shape this file:
 *  - plexit() calls exit(), and the driver would call it (after prompting on stdin) when it
 *    cannot open the output file or find the device. So everything that can fail is checked
 *    before plinit(): the device is looked up in PLplot's device list, and we open the
 *    temporary file ourselves and hand it over with plsfile(); the driver closes it.
 *  - plabort() messages (bad arguments) go to a buffer given with plsError(), not to stderr,
 *    and turn into an Err.
 *  - Each figure uses its own stream (plmkstrm ... plend1). We do not call plend(): it would
 *    unload the driver each time, and the fonts the driver loaded through fontconfig are cached
 *    for the life of the process anyway (see tests/lsan.supp).
 *  - Text goes through PLplot's escape character '#', so user text has it doubled. */
#include "plot.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <plplot.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PLOT_DEVICE "pngcairo"
#define DEFAULT_WIDTH 900
#define DEFAULT_HEIGHT 600
#define MAX_SIDE 16384

/* cmap0 slots. */
enum {
    COL_BG = 0,
    COL_FG = 1,
    COL_GRID = 2,
    COL_FRAME = 3,
    COL_SERIES = 4,              /* 8 palette colours */
    N_PALETTE = 8,
    COL_TINT = COL_SERIES + N_PALETTE, /* 8 light tints of them, for faint lines */
    COL_FAINT = COL_TINT + N_PALETTE,  /* faint lines with no series to follow */
    N_COL0 = COL_FAINT + 1
};

/* Okabe & Ito (2008), "Color universal design", ordered for contrast on white;
 * yellow last since it is the hardest to see. */
static const int palette[N_PALETTE][3] = {
    {0x00, 0x72, 0xB2}, /* blue */
    {0xD5, 0x5E, 0x00}, /* vermillion */
    {0x00, 0x9E, 0x73}, /* bluish green */
    {0xCC, 0x79, 0xA7}, /* reddish purple */
    {0xE6, 0x9F, 0x00}, /* orange */
    {0x56, 0xB4, 0xE9}, /* sky blue */
    {0x00, 0x00, 0x00}, /* black */
    {0xF0, 0xE4, 0x42}, /* yellow */
};

/* viridis, sampled at 9 evenly spaced points. */
static const int viridis[9][3] = {
    {68, 1, 84},    {71, 45, 123},  {59, 82, 139},  {44, 114, 142}, {33, 145, 140},
    {40, 174, 128}, {94, 201, 98},  {173, 220, 48}, {253, 231, 37},
};

/* ---- the stream ---------------------------------------------------------------------- */

static PLINT pl_errcode;
static char pl_errmsg[1024];

typedef struct {
    const char *path;
    char *tmp;
    FILE *f;
    int width, height;
} Figure;

static int device_available(void) {
    static int known = -1;
    if (known < 0) {
        const char *menus[128], *names[128];
        const char **pm = menus, **pn = names;
        int n = 128;
        plgDevs(&pm, &pn, &n);
        known = 0;
        for (int i = 0; i < n; i++)
            if (names[i] && strcmp(names[i], PLOT_DEVICE) == 0) known = 1;
    }
    return known;
}

static int figure_size(const char *path, const PlotSpec *spec, int *w, int *h, Err *e) {
    *w = spec && spec->width ? spec->width : DEFAULT_WIDTH;
    *h = spec && spec->height ? spec->height : DEFAULT_HEIGHT;
    if (*w < 64 || *h < 64 || *w > MAX_SIDE || *h > MAX_SIDE)
        return err_set(e, "%s: plot size %d x %d pixels is out of range (64 to %d)", path, *w, *h,
                       MAX_SIDE);
    return 0;
}

/* sqrt(mean side / mean side of the default figure): how much bigger lines and text are
 * drawn than on a default figure. */
static double figure_scale(const Figure *fig) {
    return sqrt(0.5 * (fig->width + fig->height) / (0.5 * (DEFAULT_WIDTH + DEFAULT_HEIGHT)));
}

/* PLplot sizes text in proportion to the page; make it grow only as the square root of the
 * page instead, so small figures stay readable and large ones are not shouty. */
static double text_scale(const Figure *fig) { return 1.15 / figure_scale(fig); }

/* Opens "<path>.tmp" and starts a fresh PLplot stream drawing into it. */
static int figure_begin(Figure *fig, const char *path, int w, int h, Err *e) {
    memset(fig, 0, sizeof *fig);
    fig->path = path;
    fig->width = w;
    fig->height = h;
    if (!device_available()) {
        err_set(e, "%s: PLplot has no \"%s\" device", path, PLOT_DEVICE);
        err_hint(e, "install the distribution package plplot-driver-cairo");
        return -1;
    }
    size_t len = strlen(path);
    fig->tmp = xmalloc(len + 5);
    memcpy(fig->tmp, path, len);
    memcpy(fig->tmp + len, ".tmp", 5);
    fig->f = fopen(fig->tmp, "wb");
    if (!fig->f) {
        err_set(e, "%s: cannot write: %s", path, strerror(errno));
        free(fig->tmp);
        fig->tmp = NULL;
        return -1;
    }

    PLINT strm;
    plmkstrm(&strm);
    if (strm < 0) DIE("plot: PLplot has no free stream (is a figure still open?)");
    pl_errcode = 0;
    pl_errmsg[0] = '\0';
    plsError(&pl_errcode, pl_errmsg);
    plsdev(PLOT_DEVICE);
    plsfile(fig->f); /* the driver closes it in plend1() */
    plspage(0.0, 0.0, w, h, 0, 0);
    plscmap0n(N_COL0);
    plscolbg(255, 255, 255);
    plinit();
    pladv(0);

    plscol0(COL_BG, 255, 255, 255);
    plscol0(COL_FG, 0, 0, 0);
    plscol0(COL_GRID, 225, 225, 225);
    plscol0(COL_FRAME, 160, 160, 160);
    for (int k = 0; k < N_PALETTE; k++) {
        const int *c = palette[k];
        plscol0(COL_SERIES + k, c[0], c[1], c[2]);
        /* 35% colour on white */
        plscol0(COL_TINT + k, (c[0] * 35 + 255 * 65) / 100, (c[1] * 35 + 255 * 65) / 100,
                (c[2] * 35 + 255 * 65) / 100);
    }
    plscol0(COL_FAINT, 200, 200, 200);
    plcol0(COL_FG);
    plschr(0.0, text_scale(fig));
    return 0;
}

/* Ends the stream (the driver writes the PNG and closes the file), checks the result and
 * renames it into place. On failure nothing is left at path or at path.tmp. */
static int figure_end(Figure *fig, Err *e) {
    plend1();
    fig->f = NULL;
    int rc = 0;
    if (pl_errcode) {
        /* PLplot's message ends with a newline. */
        size_t n = strlen(pl_errmsg);
        while (n && (pl_errmsg[n - 1] == '\n' || pl_errmsg[n - 1] == ' ')) pl_errmsg[--n] = '\0';
        const char *m = pl_errmsg;
        while (*m == '\n') m++;
        rc = err_set(e, "%s: PLplot: %s", fig->path, m[0] ? m : "drawing failed");
    }
    if (rc == 0) {
        /* The driver ignores write errors, so check that a whole PNG arrived: its signature
         * at the start and the IEND chunk at the end. */
        static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
        static const unsigned char iend[12] = {0,   0,   0,   0,    'I',  'E',
                                               'N', 'D', 0xAE, 0x42, 0x60, 0x82};
        unsigned char head[8], tail[12];
        FILE *f = fopen(fig->tmp, "rb");
        if (!f) {
            rc = err_set(e, "%s: cannot reopen: %s", fig->tmp, strerror(errno));
        } else {
            int whole = fread(head, 1, sizeof head, f) == sizeof head &&
                        memcmp(head, magic, sizeof magic) == 0 &&
                        fseek(f, -(long)sizeof tail, SEEK_END) == 0 &&
                        fread(tail, 1, sizeof tail, f) == sizeof tail &&
                        memcmp(tail, iend, sizeof iend) == 0;
            if (!whole)
                rc = err_set(e, "%s: the PNG was not completely written (disk full?)", fig->path);
            else if (fsync(fileno(f)) != 0 && errno != EINVAL)
                rc = err_set(e, "%s: cannot flush: %s", fig->tmp, strerror(errno));
            fclose(f);
        }
    }
    if (rc == 0 && rename(fig->tmp, fig->path) != 0)
        rc = err_set(e, "%s: cannot rename %s into place: %s", fig->path, fig->tmp, strerror(errno));
    if (rc != 0) unlink(fig->tmp);
    free(fig->tmp);
    fig->tmp = NULL;
    return rc;
}

/* Copies text, doubling PLplot's escape character; cuts it short (never inside a UTF-8
 * sequence) if out is too small. */
static const char *pl_text(const char *in, char *out, size_t size) {
    size_t i = 0, j = 0;
    if (!in) in = "";
    for (; in[i] && j + 2 < size; i++) {
        if (in[i] == '#') out[j++] = '#';
        out[j++] = in[i];
    }
    if (((unsigned char)in[i] & 0xC0) == 0x80) { /* cut inside a multibyte character */
        while (j > 0 && ((unsigned char)out[j - 1] & 0xC0) == 0x80) j--;
        if (j > 0) j--; /* its lead byte */
    }
    out[j] = '\0';
    return out;
}

static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; s && *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) n++;
    return n;
}

/* Pads a degenerate or tiny range so PLplot can draw axes for it. */
static void widen(double *lo, double *hi, int log_axis) {
    double mag = fabs(*lo) > fabs(*hi) ? fabs(*lo) : fabs(*hi);
    if (*hi - *lo > 1e-9 * mag && *hi - *lo > 1e-300) return;
    double mid = 0.5 * (*lo + *hi);
    double d = log_axis ? 0.5 : (mag > 0 ? 0.1 * mag : 1.0);
    *lo = mid - d;
    *hi = mid + d;
}

/* An integer tick step giving at most about 12 ticks over n cells. */
static double int_step(int n) {
    double step = 1;
    while (n / step > 12) {
        if (n / (step * 2) <= 12) return step * 2;
        if (n / (step * 5) <= 12) return step * 5;
        step *= 10;
    }
    return step;
}

/* ---- log axes ------------------------------------------------------------------------ */

/* PLplot's own log axes label decades only, so an axis spanning less than a decade (a loss
 * going from 7 to 1.5) would have no numbers. Log axes get their ticks from here instead. */

typedef struct {
    double pos; /* log10 of the value */
    int prio;   /* 0 = most important */
    char text[40];
} Tick;

enum { MAX_TICKS = 48 };

static double nice_step(double raw) {
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m <= 1.0 ? 1.0 : m <= 2.0 ? 2.0 : m <= 5.0 ? 5.0 : 10.0) * p;
}

static void format_value(double v, char *buf, size_t size) {
    double a = fabs(v);
    if (a >= 1e-3 && a < 1e5) {
        snprintf(buf, size, "%.6g", v);
        return;
    }
    int k = (int)lround(log10(a));
    if (fabs(a - pow(10.0, k)) <= 1e-9 * a)
        snprintf(buf, size, "%s10#u%d#d", v < 0 ? "-" : "", k);
    else
        snprintf(buf, size, "%.3g", v);
}

static int add_tick(Tick *t, int n, double pos, int prio, double value) {
    if (n >= MAX_TICKS) return n;
    t[n].pos = pos;
    t[n].prio = prio;
    format_value(value, t[n].text, sizeof t[n].text);
    return n + 1;
}

static int tick_by_prio(const void *a, const void *b) {
    const Tick *x = a, *y = b;
    if (x->prio != y->prio) return x->prio - y->prio;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int tick_by_pos(const void *a, const void *b) {
    const Tick *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Ticks for a log10 axis over [lo, hi] (in log10 units), at most about 10, not crowded. */
static int log_ticks(double lo, double hi, Tick *out) {
    Tick c[MAX_TICKS];
    int n = 0;
    double span = hi - lo, eps = 1e-9 * (fabs(lo) + fabs(hi) + 1);
    if (span <= 1.0) { /* within a decade: round values, evenly spaced in value */
        double a = pow(10.0, lo), b = pow(10.0, hi);
        double step = nice_step((b - a) / 8.0);
        for (double k = ceil(a / step); k * step <= b * (1 + 1e-12) && n < MAX_TICKS; k++)
            if (k > 0) n = add_tick(c, n, log10(k * step), 0, k * step);
    } else {
        int k0 = (int)floor(lo), k1 = (int)ceil(hi);
        int stride = 1;
        while ((k1 - k0) / stride > 8) stride = stride == 1 ? 2 : stride == 2 ? 5 : stride * 2;
        for (int k = k0; k <= k1; k++) {
            if (k % stride == 0) n = add_tick(c, n, k, 0, pow(10.0, k));
            if (span <= 3.0) {
                n = add_tick(c, n, k + log10(2.0), 1, 2 * pow(10.0, k));
                n = add_tick(c, n, k + log10(5.0), 1, 5 * pow(10.0, k));
            }
        }
    }
    qsort(c, (size_t)n, sizeof *c, tick_by_prio);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].pos < lo - eps || c[i].pos > hi + eps) continue;
        int crowded = 0;
        for (int j = 0; j < m; j++)
            if (fabs(out[j].pos - c[i].pos) < 0.08 * span) crowded = 1;
        if (!crowded) out[m++] = c[i];
    }
    qsort(out, (size_t)m, sizeof *out, tick_by_pos);
    return m;
}

/* Grid lines (grid != 0) or the frame, ticks and numbers of both axes. */
static void draw_axes(const PlotSpec *spec, double x0, double x1, double y0, double y1, int grid) {
    Tick xt[MAX_TICKS], yt[MAX_TICKS];
    int nx = spec->logx ? log_ticks(x0, x1, xt) : 0;
    int ny = spec->logy ? log_ticks(y0, y1, yt) : 0;
    if (grid) {
        plcol0(COL_GRID);
        plbox(spec->logx ? "" : "g", 0.0, 0, spec->logy ? "" : "g", 0.0, 0);
        for (int i = 0; i < nx; i++) pljoin(xt[i].pos, y0, xt[i].pos, y1);
        for (int i = 0; i < ny; i++) pljoin(x0, yt[i].pos, x1, yt[i].pos);
        return;
    }
    plcol0(COL_FG);
    plbox(spec->logx ? "bc" : "bcnst", 0.0, 0, spec->logy ? "bc" : "bcnstv", 0.0, 0);
    /* major ticks as long as PLplot's (3 mm at scale 1), pointing in */
    PLFLT def_ht, ch_ht, sx0, sx1, sy0, sy1, vx0, vx1, vy0, vy1;
    plgchr(&def_ht, &ch_ht);
    plgspa(&sx0, &sx1, &sy0, &sy1);
    plgvpd(&vx0, &vx1, &vy0, &vy1);
    double tick_mm = 3.0 * ch_ht / def_ht;
    double tx = tick_mm * (y1 - y0) / ((vy1 - vy0) * (sy1 - sy0));
    double ty = tick_mm * (x1 - x0) / ((vx1 - vx0) * (sx1 - sx0));
    for (int i = 0; i < nx; i++) {
        double p = xt[i].pos;
        pljoin(p, y0, p, y0 + tx);
        pljoin(p, y1, p, y1 - tx);
        plmtex("b", 1.5, (p - x0) / (x1 - x0), 0.5, xt[i].text);
    }
    for (int i = 0; i < ny; i++) {
        double p = yt[i].pos;
        pljoin(x0, p, x0 + ty, p);
        pljoin(x1, p, x1 - ty, p);
        plmtex("lv", 0.5, (p - y0) / (y1 - y0), 1.0, yt[i].text);
    }
}

/* ---- line plots ---------------------------------------------------------------------- */

static int in_corner(int c, double u, double v, double w, double h) {
    int right = c == PLOT_CORNER_TR || c == PLOT_CORNER_BR;
    int top = c == PLOT_CORNER_TR || c == PLOT_CORNER_TL;
    int in_x = right ? u >= 1 - w : u <= w;
    int in_y = top ? v >= 1 - h : v <= h;
    return in_x && in_y;
}

/* How many of the curves' points (each segment sampled 8 times) a w x h box in each corner
 * hides, with the axes spanning [xmin, xmax] x [ymin, ymax]. */
static void corner_hits(const double *x, const double *y, const int *n, int n_series, double xmin, double xmax,
                        double ymin, double ymax, double w, double h, long hits[PLOT_N_CORNERS]) {
    for (int c = 0; c < PLOT_N_CORNERS; c++) hits[c] = 0;
    size_t off = 0;
    for (int i = 0; i < n_series; i++) {
        int m = n[i] > 0 ? n[i] : 0;
        const double *xs = x + off, *ys = y + off;
        off += (size_t)m;
        for (int j = 0; j < m; j++) {
            if (isnan(xs[j])) continue;
            int seg = j + 1 < m && !isnan(xs[j + 1]);
            for (int t = 0; t < (seg ? 8 : 1); t++) {
                double f = t / 8.0;
                double xx = seg ? xs[j] + f * (xs[j + 1] - xs[j]) : xs[j];
                double yy = seg ? ys[j] + f * (ys[j + 1] - ys[j]) : ys[j];
                double u = (xx - xmin) / (xmax - xmin), v = (yy - ymin) / (ymax - ymin);
                for (int c = 0; c < PLOT_N_CORNERS; c++) hits[c] += in_corner(c, u, v, w, h);
            }
        }
    }
}

int plot_legend_place(const double *x, const double *y, const int *n, int n_series, double xmin, double xmax,
                      double ymin, double ymax, double w, double h, double *ymax_out) {
    long hits[PLOT_N_CORNERS];
    corner_hits(x, y, n, n_series, xmin, xmax, ymin, ymax, w, h, hits);
    int best = 0;
    for (int c = 1; c < PLOT_N_CORNERS; c++)
        if (hits[c] < hits[best]) best = c;
    *ymax_out = ymax;
    if (hits[best] == 0 || !(h > 0 && h < 0.6)) return best;
    /* every corner hides data: raise the top so the curves end below the box */
    *ymax_out = ymin + (ymax - ymin) / (1.0 - h - 0.03);
    return PLOT_CORNER_TR;
}

/* The points of a line plot, transformed (log10 where asked; NaN where a point is skipped),
 * laid end to end, and the range of the finite ones. */
typedef struct {
    PLFLT *x, *y;
    double xmin, xmax, ymin, ymax;
} Points;

static void points_free(Points *p) {
    free(p->x);
    free(p->y);
}

static int points_make(Points *p, const char *path, const PlotSpec *spec, const PlotSeries *s, int n_series, Err *e) {
    size_t total = 0;
    for (int i = 0; i < n_series; i++) {
        if (s[i].n > 0 && (!s[i].x || !s[i].y))
            return err_set(e, "%s: series %d (%s) has %d points but no data", path, i,
                           s[i].label ? s[i].label : "unnamed", s[i].n);
        if (s[i].n > 0) total += (size_t)s[i].n;
    }
    p->x = xmalloc((total ? total : 1) * sizeof *p->x);
    p->y = xmalloc((total ? total : 1) * sizeof *p->y);
    p->xmin = p->ymin = INFINITY;
    p->xmax = p->ymax = -INFINITY;
    size_t n_finite = 0, off = 0;
    for (int i = 0; i < n_series; i++) {
        for (int j = 0; j < s[i].n; j++, off++) {
            double x = s[i].x[j], y = s[i].y[j];
            if (spec->logx) x = x > 0 ? log10(x) : NAN;
            if (spec->logy) y = y > 0 ? log10(y) : NAN;
            if (!isfinite(x) || !isfinite(y)) x = y = NAN;
            p->x[off] = x;
            p->y[off] = y;
            if (isnan(x)) continue;
            n_finite++;
            if (x < p->xmin) p->xmin = x;
            if (x > p->xmax) p->xmax = x;
            if (y < p->ymin) p->ymin = y;
            if (y > p->ymax) p->ymax = y;
        }
    }
    if (n_finite == 0) {
        points_free(p);
        return err_set(e, "%s: nothing to plot: no series has a finite point%s", path,
                       spec->logx || spec->logy ? " (points <= 0 are skipped on a log axis)" : "");
    }
    if (!isfinite(p->xmax - p->xmin) || !isfinite(p->ymax - p->ymin)) {
        points_free(p);
        return err_set(e, "%s: values too large to plot", path);
    }
    widen(&p->xmin, &p->xmax, spec->logx);
    widen(&p->ymin, &p->ymax, spec->logy);
    double ypad = 0.04 * (p->ymax - p->ymin);
    p->ymin -= ypad;
    p->ymax += ypad;
    return 0;
}

/* The legend: one entry per labelled, non-faint series, in a grid of rows x cols. */
typedef struct {
    int n, rows, cols;
    int corner; /* PLOT_CORNER_*, unless the legend is right of the plot */
    double line_len;
} Legend;

static bool in_legend(const PlotSeries *s) { return !s->faint && s->label && s->label[0]; }

/* The viewport, with room on the right for the legend when spec->legend_right; otherwise
 * the legend goes in the corner where it hides the least data (its size estimated from the
 * text), which may raise p->ymax. */
static Legend legend_layout(const PlotSpec *spec, const PlotSeries *s, int n_series, int width, Points *p) {
    if (spec->legend_right) {
        /* room on the right for the longest label: about 14 px a character at this font,
         * plus the line sample and margins */
        size_t longest = 0;
        for (int i = 0; i < n_series; i++)
            if (!s[i].faint && s[i].label && strlen(s[i].label) > longest) longest = strlen(s[i].label);
        double right = 1.0 - (130.0 + 14.0 * (double)longest) / (double)width;
        plvpor(0.09, right < 0.45 ? 0.45 : right > 0.75 ? 0.75 : right, 0.15, 0.90);
    } else {
        plvsta();
    }
    Legend g = {.corner = PLOT_CORNER_TR, .line_len = 0.06};
    size_t maxlen = 0;
    for (int i = 0; i < n_series; i++)
        if (in_legend(&s[i])) {
            g.n++;
            size_t l = utf8_chars(s[i].label);
            if (l > maxlen) maxlen = l;
        }
    g.cols = g.n > 12 && !spec->legend_right ? 2 : 1;
    g.rows = (g.n + g.cols - 1) / g.cols;
    if (g.n > 0 && !spec->legend_right) {
        PLFLT def_ht, ch_ht, sx0, sx1, sy0, sy1, vx0, vx1, vy0, vy1;
        plgchr(&def_ht, &ch_ht);
        plgspa(&sx0, &sx1, &sy0, &sy1);
        plgvpd(&vx0, &vx1, &vy0, &vy1);
        double vw_mm = (vx1 - vx0) * (sx1 - sx0), vh_mm = (vy1 - vy0) * (sy1 - sy0);
        double lw = 0.04 + g.cols * (g.line_len + (2.0 + 0.6 * (double)maxlen) * ch_ht / vw_mm);
        double lh = 0.05 + (2.0 * g.rows + 1.0) * ch_ht / vh_mm;
        int *counts = xmalloc((size_t)(n_series ? n_series : 1) * sizeof *counts);
        for (int i = 0; i < n_series; i++) counts[i] = s[i].n;
        g.corner = plot_legend_place(p->x, p->y, counts, n_series, p->xmin, p->xmax, p->ymin, p->ymax, lw, lh,
                                     &p->ymax);
        free(counts);
    }
    return g;
}

/* Series colours and line styles: non-faint series take the palette in order (dashed after
 * N_PALETTE); faint ones the tint of the last non-faint series before them. */
static void series_styles(const PlotSeries *s, int n_series, int *colour, int *style) {
    int n_main = 0, last = -1;
    for (int i = 0; i < n_series; i++) {
        if (s[i].faint) {
            colour[i] = last < 0 ? COL_FAINT : COL_TINT + last % N_PALETTE;
            style[i] = 1;
        } else {
            last = n_main++;
            colour[i] = COL_SERIES + last % N_PALETTE;
            style[i] = 1 + (last / N_PALETTE) % 8;
        }
    }
}

/* One series' n points: lines through the runs of finite points, a dot for an isolated
 * one, and a mark on every point when there are few. */
static void draw_series(const PLFLT *x, const PLFLT *y, int n, bool faint, int style) {
    int sparse = 0; /* few points: mark each one */
    for (int j = 0; j < n; j++) sparse += !isnan(x[j]);
    sparse = sparse <= 30;
    for (int a = 0; a < n;) {
        if (isnan(x[a])) {
            a++;
            continue;
        }
        int b = a;
        while (b < n && !isnan(x[b])) b++;
        if (b - a >= 2) plline(b - a, x + a, y + a);
        if (b - a == 1 || sparse) {
            pllsty(1);
            plssym(0.0, (faint ? 0.6 : 1.0) * (b - a == 1 ? 2.5 : 1.6));
            plpoin(b - a, x + a, y + a, 17);
            pllsty(style);
        }
        a = b;
    }
}

static void draw_legend(const Figure *fig, const PlotSpec *spec, const Legend *g, const PlotSeries *s, int n_series,
                        const int *colour, const int *style, double main_width) {
    int n = g->n;
    PLINT *opts = xmalloc((size_t)n * sizeof *opts);
    PLINT *tcol = xmalloc((size_t)n * sizeof *tcol);
    PLINT *lcol = xmalloc((size_t)n * sizeof *lcol);
    PLINT *lsty = xmalloc((size_t)n * sizeof *lsty);
    PLFLT *lwid = xmalloc((size_t)n * sizeof *lwid);
    char **text = xmalloc((size_t)n * sizeof *text);
    int k = 0;
    for (int i = 0; i < n_series; i++) {
        if (!in_legend(&s[i])) continue;
        opts[k] = PL_LEGEND_LINE;
        tcol[k] = COL_FG;
        lcol[k] = colour[i];
        lsty[k] = style[i];
        lwid[k] = main_width;
        size_t l = 2 * strlen(s[i].label) + 1;
        text[k] = xmalloc(l);
        pl_text(s[i].label, text[k], l);
        k++;
    }
    static const PLINT where[PLOT_N_CORNERS] = {
        PL_POSITION_TOP | PL_POSITION_RIGHT, PL_POSITION_TOP | PL_POSITION_LEFT,
        PL_POSITION_BOTTOM | PL_POSITION_RIGHT, PL_POSITION_BOTTOM | PL_POSITION_LEFT};
    PLFLT got_w, got_h;
    PLINT position = spec->legend_right ? PL_POSITION_OUTSIDE | PL_POSITION_VIEWPORT | PL_POSITION_RIGHT
                                        : PL_POSITION_INSIDE | PL_POSITION_VIEWPORT | where[g->corner];
    pllegend(&got_w, &got_h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX, position, 0.02, 0.0, g->line_len,
             COL_BG, COL_FRAME, 1, g->rows, g->cols, n, opts, 1.0, text_scale(fig), 2.0, 0.0, tcol,
             (PLCHAR_MATRIX)text, NULL, NULL, NULL, NULL, lcol, lsty, lwid, NULL, NULL, NULL, NULL);
    for (k = 0; k < n; k++) free(text[k]);
    free(text);
    free(lwid);
    free(lsty);
    free(lcol);
    free(tcol);
    free(opts);
}

int plot_lines(const char *path, const PlotSpec *spec, const PlotSeries *s, int n_series, Err *e) {
    if (!path || !path[0]) return err_set(e, "plot: no output path");
    if (n_series < 0 || (n_series > 0 && !s)) return err_set(e, "%s: no series to plot", path);
    static const PlotSpec no_spec;
    if (!spec) spec = &no_spec;
    int w, h;
    if (figure_size(path, spec, &w, &h, e)) return -1;
    Points p;
    if (points_make(&p, path, spec, s, n_series, e) != 0) return -1;
    Figure fig;
    if (figure_begin(&fig, path, w, h, e)) {
        points_free(&p);
        return -1;
    }
    Legend legend = legend_layout(spec, s, n_series, w, &p);
    plwind(p.xmin, p.xmax, p.ymin, p.ymax);
    plwidth(1.0);
    draw_axes(spec, p.xmin, p.xmax, p.ymin, p.ymax, 1);

    int *colour = xmalloc((size_t)(n_series ? n_series : 1) * sizeof *colour);
    int *style = xmalloc((size_t)(n_series ? n_series : 1) * sizeof *style);
    series_styles(s, n_series, colour, style);
    double main_width = 2.2 * figure_scale(&fig);
    for (int pass = 0; pass < 2; pass++) { /* faint lines first, underneath */
        size_t off = 0;
        for (int i = 0; i < n_series; i++) {
            int n = s[i].n > 0 ? s[i].n : 0;
            const PLFLT *x = p.x + off, *y = p.y + off;
            off += (size_t)n;
            if ((pass == 0) != (s[i].faint != 0)) continue;
            plcol0(colour[i]);
            pllsty(style[i]);
            plwidth(s[i].faint ? 0.5 * main_width : main_width);
            draw_series(x, y, n, s[i].faint, style[i]);
        }
    }
    pllsty(1);
    plwidth(1.0);

    char buf[3][1024];
    draw_axes(spec, p.xmin, p.xmax, p.ymin, p.ymax, 0);
    pllab(pl_text(spec->xlabel, buf[0], sizeof buf[0]), pl_text(spec->ylabel, buf[1], sizeof buf[1]),
          pl_text(spec->title, buf[2], sizeof buf[2]));
    if (legend.n > 0) draw_legend(&fig, spec, &legend, s, n_series, colour, style, main_width);
    free(style);
    free(colour);
    points_free(&p);
    return figure_end(&fig, e);
}

/* ---- heatmaps ------------------------------------------------------------------------ */

/* Cell (i, j) of the image spans [i - 0.5, i + 0.5] x [j - 0.5, j + 0.5]: ticks at integers. */
static void cell_centres(PLFLT x, PLFLT y, PLFLT *tx, PLFLT *ty, PLPointer data) {
    (void)data;
    *tx = x - 0.5;
    *ty = y - 0.5;
}

/* Each cell's value in it, while the cells are big enough to read: white on viridis' dark
 * half, black on its light half. */
static void heatmap_values(const double *values, int rows, int cols, double vmin, double vmax) {
    if ((long)rows * cols > 256) return;
    plschr(0.0, cols <= 8 && rows <= 8 ? 0.7 : 0.5);
    for (int j = 0; j < rows; j++)
        for (int i = 0; i < cols; i++) {
            double v = values[(size_t)j * cols + i];
            if (!isfinite(v)) continue;
            char text[32];
            snprintf(text, sizeof text, fabs(v) >= 1000 || (v != 0 && fabs(v) < 0.01) ? "%.1e" : "%.2f", v);
            plcol0((v - vmin) / (vmax - vmin) < 0.55 ? COL_BG : COL_FG);
            plptex(i, j, 1.0, 0.0, 0.5, text);
        }
    plschr(0.0, 1.0);
}

/* The colour bar right of the plot, from vmin to vmax. */
static void heatmap_colour_bar(double vmin, double vmax) {
    PLFLT cb_w, cb_h;
    PLFLT range[2] = {vmin, vmax};
    const PLFLT *range_rows[1] = {range};
    PLINT n_values[1] = {2};
    PLCHAR_VECTOR axis_opts[1] = {"bcvtm"};
    PLFLT ticks[1] = {0.0};
    PLINT sub_ticks[1] = {0};
    plcolorbar(&cb_w, &cb_h, PL_COLORBAR_IMAGE | PL_COLORBAR_ORIENT_TOP,
               PL_POSITION_RIGHT | PL_POSITION_OUTSIDE | PL_POSITION_VIEWPORT, 0.03, 0.0, 0.04, 1.0,
               COL_BG, COL_FG, 1, 0.0, 1.0, 0, 0.0, 0, NULL, NULL, 1, axis_opts, ticks, sub_ticks,
               n_values, (PLFLT_MATRIX)range_rows);
}

int plot_heatmap(const char *path, const PlotSpec *spec, const double *values, int rows, int cols,
                 double vmin, double vmax, Err *e) {
    if (!path || !path[0]) return err_set(e, "plot: no output path");
    static const PlotSpec no_spec;
    if (!spec) spec = &no_spec;
    if (rows <= 0 || cols <= 0 || !values)
        return err_set(e, "%s: nothing to plot: the heatmap is %d x %d", path, rows, cols);
    if ((long)rows * cols > 4096L * 4096L)
        return err_set(e, "%s: heatmap of %d x %d cells is too large", path, rows, cols);
    int w, h;
    if (figure_size(path, spec, &w, &h, e)) return -1;

    double lo = INFINITY, hi = -INFINITY;
    long n = (long)rows * cols, n_finite = 0;
    for (long i = 0; i < n; i++) {
        if (!isfinite(values[i])) continue;
        n_finite++;
        if (values[i] < lo) lo = values[i];
        if (values[i] > hi) hi = values[i];
    }
    if (n_finite == 0) return err_set(e, "%s: nothing to plot: no finite value", path);
    if (!(isfinite(vmin) && isfinite(vmax) && vmin < vmax)) {
        vmin = lo;
        vmax = hi;
    }
    widen(&vmin, &vmax, 0);
    if (!isfinite(vmax - vmin)) return err_set(e, "%s: values too large to plot", path);

    Figure fig;
    if (figure_begin(&fig, path, w, h, e)) return -1;
    char buf[3][1024];

    PLFLT r[9], g[9], b[9], pos[9];
    for (int k = 0; k < 9; k++) {
        pos[k] = k / 8.0;
        r[k] = viridis[k][0] / 255.0;
        g[k] = viridis[k][1] / 255.0;
        b[k] = viridis[k][2] / 255.0;
    }
    plscmap1n(256);
    plscmap1l(1, 9, pos, r, g, b, NULL);

    plvsta();
    PLFLT vx0, vx1, vy0, vy1;
    plgvpd(&vx0, &vx1, &vy0, &vy1);
    plvpor(vx0, vx1 - 0.13, vy0, vy1);
    plwind(-0.5, cols - 0.5, -0.5, rows - 0.5);

    PLFLT *data = xmalloc((size_t)n * sizeof *data);
    PLFLT **z = xmalloc((size_t)cols * sizeof *z);
    for (int i = 0; i < cols; i++) {
        z[i] = data + (size_t)i * rows;
        for (int j = 0; j < rows; j++) {
            double v = values[(size_t)j * cols + i];
            z[i][j] = isfinite(v) ? v : NAN;
        }
    }
    plimagefr((PLFLT_MATRIX)z, cols, rows, -0.5, cols - 0.5, -0.5, rows - 0.5, -DBL_MAX, DBL_MAX,
              vmin, vmax, cell_centres, NULL);
    free(z);
    free(data);

    heatmap_values(values, rows, cols, vmin, vmax);

    plcol0(COL_FG);
    plwidth(1.0);
    plbox("bnti", int_step(cols), 1, "bntiv", int_step(rows), 1); /* ticks outside, at cells */
    plbox("c", 0.0, 0, "c", 0.0, 0);
    pllab(pl_text(spec->xlabel, buf[0], sizeof buf[0]), pl_text(spec->ylabel, buf[1], sizeof buf[1]),
          pl_text(spec->title, buf[2], sizeof buf[2]));

    heatmap_colour_bar(vmin, vmax);
    return figure_end(&fig, e);
}

const char *plot_title(char *buf, size_t size, const char *name, const char *what) {
    size_t n = strlen(name);
    if (n > 40)
        snprintf(buf, size, "%.22s...%s: %s", name, name + n - 15, what);
    else
        snprintf(buf, size, "%s: %s", name, what);
    return buf;
}
