/* plot_lines.c: plot_lines (plot.h): line plots, their series' colours and
 * styles, and the legend placed where it hides the fewest points. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "plot_parts.h"

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
    plot_widen(&p->xmin, &p->xmax, spec->logx);
    plot_widen(&p->ymin, &p->ymax, spec->logy);
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
    double text; /* its text's size against the axes' (below 1 for a legend too wide for the plot) */
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
    Legend g = {.corner = PLOT_CORNER_TR, .line_len = 0.06, .text = 1.0};
    size_t maxlen = 0;
    for (int i = 0; i < n_series; i++)
        if (in_legend(&s[i])) {
            g.n++;
            size_t l = plot_utf8_chars(s[i].label);
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
        /* a legend wider than the plot (long labels in a narrow panel) would run over the y
         * axis's numbers: its text shrinks until the box fits, to no less than 0.6 */
        double fixed = 0.04 + g.cols * g.line_len, text = g.cols * (2.0 + 0.6 * (double)maxlen) * ch_ht / vw_mm;
        if (fixed + text > 0.92) g.text = fmax(0.6, (0.92 - fixed) / text);
        double lw = fixed + g.text * text;
        double lh = 0.05 + (2.0 * g.rows + 1.0) * g.text * ch_ht / vh_mm;
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
        plot_text(s[i].label, text[k], l);
        k++;
    }
    static const PLINT where[PLOT_N_CORNERS] = {
        PL_POSITION_TOP | PL_POSITION_RIGHT, PL_POSITION_TOP | PL_POSITION_LEFT,
        PL_POSITION_BOTTOM | PL_POSITION_RIGHT, PL_POSITION_BOTTOM | PL_POSITION_LEFT};
    PLFLT got_w, got_h;
    PLINT position = spec->legend_right ? PL_POSITION_OUTSIDE | PL_POSITION_VIEWPORT | PL_POSITION_RIGHT
                                        : PL_POSITION_INSIDE | PL_POSITION_VIEWPORT | where[g->corner];
    pllegend(&got_w, &got_h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX, position, 0.02, 0.0, g->line_len,
             COL_BG, COL_FRAME, 1, g->rows, g->cols, n, opts, 1.0, g->text * plot_text_scale(fig), 2.0, 0.0, tcol,
             (PLCHAR_MATRIX)text, NULL, NULL, NULL, NULL, lcol, lsty, lwid, NULL, NULL, NULL, NULL);
    for (k = 0; k < n; k++) free(text[k]);
    free(text);
    free(lwid);
    free(lsty);
    free(lcol);
    free(tcol);
    free(opts);
}

/* The title above the plot, as pllab draws it; one too wide for the panel goes on two lines,
 * cut at its " < " (a claim) or else at the space nearest its middle. */
static void draw_title(const char *title) {
    if (!title || !title[0]) return;
    char buf[1024];
    PLFLT def_ht, ch_ht, sx0, sx1, sy0, sy1, vx0, vx1, vy0, vy1;
    plgchr(&def_ht, &ch_ht);
    plgspa(&sx0, &sx1, &sy0, &sy1);
    plgvpd(&vx0, &vx1, &vy0, &vy1);
    /* centred on the plot: room for twice the nearer side's distance to the panel's edge */
    double mid = 0.5 * (vx0 + vx1), room = 2.0 * fmin(mid, 1.0 - mid) * (sx1 - sx0);
    size_t n = strlen(title), cut = 0;
    if (0.72 * (double)plot_utf8_chars(title) * ch_ht > room && n < sizeof buf) {
        const char *lt = strstr(title, " < ");
        if (lt) cut = (size_t)(lt - title) + 1;
        for (size_t i = 1; !cut && i < n / 2; i++) {
            if (title[n / 2 - i] == ' ') cut = n / 2 - i;
            else if (title[n / 2 + i] == ' ') cut = n / 2 + i;
        }
    }
    if (!cut) {
        plmtex("t", 2.0, 0.5, 0.5, plot_text(title, buf, sizeof buf));
        return;
    }
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)cut, title);
    plmtex("t", 3.2, 0.5, 0.5, plot_text(line, buf, sizeof buf));
    plmtex("t", 1.6, 0.5, 0.5, plot_text(title + cut, buf, sizeof buf));
}

/* One line plot from its points, on the current panel of fig. */
static void lines_draw(const Figure *fig, const PlotSpec *spec, const PlotSeries *s, int n_series, Points *p) {
    Legend legend = legend_layout(spec, s, n_series, fig->width, p);
    plwind(p->xmin, p->xmax, p->ymin, p->ymax);
    plwidth(1.0);
    plot_draw_axes(spec, p->xmin, p->xmax, p->ymin, p->ymax, 1);

    int *colour = xmalloc((size_t)(n_series ? n_series : 1) * sizeof *colour);
    int *style = xmalloc((size_t)(n_series ? n_series : 1) * sizeof *style);
    series_styles(s, n_series, colour, style);
    double main_width = 2.2 * plot_figure_scale(fig);
    for (int pass = 0; pass < 2; pass++) { /* faint lines first, underneath */
        size_t off = 0;
        for (int i = 0; i < n_series; i++) {
            int n = s[i].n > 0 ? s[i].n : 0;
            const PLFLT *x = p->x + off, *y = p->y + off;
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

    char buf[2][1024];
    plot_draw_axes(spec, p->xmin, p->xmax, p->ymin, p->ymax, 0);
    pllab(plot_text(spec->xlabel, buf[0], sizeof buf[0]), plot_text(spec->ylabel, buf[1], sizeof buf[1]), "");
    draw_title(spec->title);
    if (legend.n > 0) draw_legend(fig, spec, &legend, s, n_series, colour, style, main_width);
    free(style);
    free(colour);
}

static const PlotSpec no_spec;

static int check_series(const char *path, const PlotSeries *s, int n_series, Err *e) {
    if (n_series < 0 || (n_series > 0 && !s)) return err_set(e, "%s: no series to plot", path);
    return 0;
}

int plot_lines(const char *path, const PlotSpec *spec, const PlotSeries *s, int n_series, Err *e) {
    if (!path || !path[0]) return err_set(e, "plot: no output path");
    if (check_series(path, s, n_series, e)) return -1;
    if (!spec) spec = &no_spec;
    int w, h;
    if (plot_figure_size(path, spec, &w, &h, e)) return -1;
    Points p;
    if (points_make(&p, path, spec, s, n_series, e) != 0) return -1;
    Figure fig;
    if (plot_figure_begin(&fig, path, w, h, 1, 1, e)) {
        points_free(&p);
        return -1;
    }
    lines_draw(&fig, spec, s, n_series, &p);
    points_free(&p);
    return plot_figure_end(&fig, e);
}

int plot_panels(const char *path, const PlotPanel *panel, int n_panels, int cols, Err *e) {
    if (!path || !path[0]) return err_set(e, "plot: no output path");
    if (n_panels < 1 || !panel || cols < 1) return err_set(e, "%s: no panels to plot", path);
    if (n_panels > PLOT_MAX_PANELS) return err_set(e, "%s: %d panels, at most %d", path, n_panels, PLOT_MAX_PANELS);
    if (cols > n_panels) cols = n_panels;
    int rows = (n_panels + cols - 1) / cols, w = 0, h = 0;
    Points p[PLOT_MAX_PANELS];
    const PlotSpec *spec[PLOT_MAX_PANELS];
    for (int i = 0; i < n_panels; i++) {
        int pw, ph;
        spec[i] = panel[i].spec ? panel[i].spec : &no_spec;
        int rc = check_series(path, panel[i].s, panel[i].n_series, e);
        if (rc == 0) rc = plot_figure_size(path, spec[i], &pw, &ph, e);
        if (rc == 0 && i > 0 && (pw != w || ph != h))
            rc = err_set(e, "%s: panel %d is %d x %d pixels, the first %d x %d", path, i + 1, pw, ph, w, h);
        if (rc == 0) rc = points_make(&p[i], path, spec[i], panel[i].s, panel[i].n_series, e);
        if (rc != 0) {
            while (i-- > 0) points_free(&p[i]);
            return -1;
        }
        w = pw, h = ph;
    }
    Figure fig;
    int rc = (long)w * cols > PLOT_MAX_SIDE || (long)h * rows > PLOT_MAX_SIDE
                 ? err_set(e, "%s: %d x %d panels of %d x %d pixels are too large a figure", path, cols, rows, w, h)
                 : plot_figure_begin(&fig, path, w * cols, h * rows, cols, rows, e);
    if (rc == 0) {
        /* PLplot sizes text by the whole page (its mean side over sqrt(rows)), so a row of
         * panels would have larger text than a grid of them: give each panel the text of a
         * one-panel figure of its size */
        PLFLT def, ht;
        plgchr(&def, &ht);
        plschr(def * (w + h) * sqrt((double)rows) / (double)(w * cols + h * rows), plot_text_scale(&fig));
    }
    for (int i = 0; i < n_panels; i++) {
        if (rc == 0) {
            if (i > 0) pladv(0);
            lines_draw(&fig, spec[i], panel[i].s, panel[i].n_series, &p[i]);
        }
        points_free(&p[i]);
    }
    return rc == 0 ? plot_figure_end(&fig, e) : -1;
}
