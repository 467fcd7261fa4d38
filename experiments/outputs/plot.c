/* plot.c: PNG figures (heatmaps here, line plots in plot_lines.c), drawn with PLplot's "pngcairo" driver.
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
#include "plot_parts.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <plplot.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interrupt.h"
#include "utf8.h"

#define PLOT_DEVICE "pngcairo"
#define DEFAULT_WIDTH 900
#define DEFAULT_HEIGHT 600

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

int plot_figure_size(const char *path, const PlotSpec *spec, int *w, int *h, Err *e) {
    *w = spec && spec->width ? spec->width : DEFAULT_WIDTH;
    *h = spec && spec->height ? spec->height : DEFAULT_HEIGHT;
    if (*w < 64 || *h < 64 || *w > PLOT_MAX_SIDE || *h > PLOT_MAX_SIDE)
        return err_set(e, "%s: plot size %d x %d pixels is out of range (64 to %d)", path, *w, *h,
                       PLOT_MAX_SIDE);
    return 0;
}

/* sqrt(mean side / mean side of the default figure): how much bigger lines and text are
 * drawn than on a default figure. */
double plot_figure_scale(const Figure *fig) {
    return sqrt(0.5 * (fig->width + fig->height) / (0.5 * (DEFAULT_WIDTH + DEFAULT_HEIGHT)));
}

/* PLplot sizes text in proportion to the page; make it grow only as the square root of the
 * page instead, so small figures stay readable and large ones are not shouty. */
double plot_text_scale(const Figure *fig) { return 1.15 / plot_figure_scale(fig); }

/* Opens "<path>.tmp" and starts a fresh PLplot stream drawing into it, its page cut into
 * cols x rows panels (1 x 1: one plot). */
int plot_figure_begin(Figure *fig, const char *path, int w, int h, int cols, int rows, Err *e) {
    memset(fig, 0, sizeof *fig);
    fig->path = path;
    fig->width = w / cols;
    fig->height = h / rows;
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
    if (fig->f) interrupt_temp_file(fig->tmp); /* the watchdog removes it if it ends the command here */
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
    plssub(cols, rows);
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
    plschr(0.0, plot_text_scale(fig));
    return 0;
}

/* Ends the stream (the driver writes the PNG and closes the file), checks the result and
 * renames it into place. On failure nothing is left at path or at path.tmp. */
int plot_figure_end(Figure *fig, Err *e) {
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
    interrupt_temp_file(NULL);
    free(fig->tmp);
    fig->tmp = NULL;
    return rc;
}

/* Copies text, doubling PLplot's escape character and putting '?' for each byte that is
 * not part of valid UTF-8 (PLplot refuses a malformed string: a run's name made of other
 * bytes must not fail the plot after the work); cuts it short (never inside a UTF-8
 * sequence) if out is too small. */
const char *plot_text(const char *in, char *out, size_t size) {
    size_t i = 0, j = 0, n;
    if (!in) in = "";
    n = strlen(in);
    while (i < n && j + 2 < size) {
        size_t k = utf8_valid_prefix((const unsigned char *)in + i, n - i < 4 ? n - i : 4);
        if (k == 0) { /* a byte no valid sequence starts with */
            out[j++] = '?';
            i++;
            continue;
        }
        if (j + k + (in[i] == '#') + 1 > size) break; /* never cut inside a character */
        for (size_t m = 0; m < k; m++, i++) {
            if (in[i] == '#') out[j++] = '#';
            out[j++] = in[i];
        }
    }
    out[j] = '\0';
    return out;
}

size_t plot_utf8_chars(const char *s) {
    size_t n = 0;
    for (; s && *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) n++;
    return n;
}

/* Pads a degenerate or tiny range so PLplot can draw axes for it. */
void plot_widen(double *lo, double *hi, int log_axis) {
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
    if (!(a > 0) || !isfinite(a)) { /* no power of ten to name */
        snprintf(buf, size, "%.3g", v);
        return;
    }
    int k = (int)lround(log10(a)); /* within [-324, 309] */
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

/* Ticks for a log10 axis over [lo, hi] (in log10 units), at most about 10, not crowded: two
 * labels at least 8% of the axis apart, and far enough apart on the page for their text
 * (ch: a character's height in axis units; across: labels side by side, as on the x axis,
 * need about their widths, stacked ones about a line). */
static int log_ticks(double lo, double hi, double ch, int across, Tick *out) {
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
        for (int j = 0; j < m; j++) {
            double chars = 0.5 * (double)(plot_utf8_chars(out[j].text) + plot_utf8_chars(c[i].text));
            double room = across ? (0.75 * chars + 1.0) * ch : 1.6 * ch;
            if (fabs(out[j].pos - c[i].pos) < fmax(0.08 * span, room)) crowded = 1;
        }
        if (!crowded) out[m++] = c[i];
    }
    qsort(out, (size_t)m, sizeof *out, tick_by_pos);
    return m;
}

/* Grid lines (grid != 0) or the frame, ticks and numbers of both axes. */
void plot_draw_axes(const PlotSpec *spec, double x0, double x1, double y0, double y1, int grid) {
    PLFLT def_ht, ch_ht, sx0, sx1, sy0, sy1, vx0, vx1, vy0, vy1;
    plgchr(&def_ht, &ch_ht);
    plgspa(&sx0, &sx1, &sy0, &sy1);
    plgvpd(&vx0, &vx1, &vy0, &vy1);
    double x_per_mm = (x1 - x0) / ((vx1 - vx0) * (sx1 - sx0)), y_per_mm = (y1 - y0) / ((vy1 - vy0) * (sy1 - sy0));
    Tick xt[MAX_TICKS], yt[MAX_TICKS];
    int nx = spec->logx ? log_ticks(x0, x1, ch_ht * x_per_mm, 1, xt) : 0;
    int ny = spec->logy ? log_ticks(y0, y1, ch_ht * y_per_mm, 0, yt) : 0;
    if (grid) {
        plcol0(COL_GRID);
        plbox(spec->logx ? "" : "g", 0.0, 0, spec->logy ? "" : "g", 0.0, 0);
        for (int i = 0; i < nx; i++) pljoin(xt[i].pos, y0, xt[i].pos, y1);
        for (int i = 0; i < ny; i++) pljoin(x0, yt[i].pos, x1, yt[i].pos);
        return;
    }
    plcol0(COL_FG);
    /* fixed-point numbers on a linear y axis: PLplot's "(x10^-2)" would sit on the title */
    plbox(spec->logx ? "bc" : "bcnst", 0.0, 0, spec->logy ? "bc" : "bcfnstv", 0.0, 0);
    /* major ticks as long as PLplot's (3 mm at scale 1), pointing in */
    double tick_mm = 3.0 * ch_ht / def_ht;
    double tx = tick_mm * y_per_mm, ty = tick_mm * x_per_mm;
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
    if (plot_figure_size(path, spec, &w, &h, e)) return -1;

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
    plot_widen(&vmin, &vmax, 0);
    if (!isfinite(vmax - vmin)) return err_set(e, "%s: values too large to plot", path);

    Figure fig;
    if (plot_figure_begin(&fig, path, w, h, 1, 1, e)) return -1;
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
    pllab(plot_text(spec->xlabel, buf[0], sizeof buf[0]), plot_text(spec->ylabel, buf[1], sizeof buf[1]),
          plot_text(spec->title, buf[2], sizeof buf[2]));

    heatmap_colour_bar(vmin, vmax);
    return plot_figure_end(&fig, e);
}

const char *plot_title(char *buf, size_t size, const char *name, const char *what) {
    size_t n = strlen(name);
    if (n > 40) { /* the head and the tail, cut between characters */
        size_t head = 22, tail = n - 15;
        while (head > 0 && ((unsigned char)name[head] & 0xC0) == 0x80) head--;
        while (tail < n && ((unsigned char)name[tail] & 0xC0) == 0x80) tail++;
        snprintf(buf, size, "%.*s...%s: %s", (int)head, name, name + tail, what);
    } else {
        snprintf(buf, size, "%s: %s", name, what);
    }
    return buf;
}
