/* room outputs/: the plots and pages a run leaves; includes the engine, run/ and outputs/. */
/* plot.h: PNG figures (loss curves, spectra, heatmaps) drawn with PLplot's cairo driver.
 *
 * Every figure is drawn on a fresh PLplot stream into "<path>.tmp", checked to be a PNG,
 * flushed and renamed over path, so a failed or interrupted plot never leaves a half-written
 * file. PLplot is not thread-safe: call these from one thread (the main one). */
#ifndef ATTNLAB_PLOT_H
#define ATTNLAB_PLOT_H

#include "util.h"

typedef struct {
    const char *label;      /* legend text (NULL or "" = no legend entry) */
    const double *x, *y;
    int n;
    int faint;              /* nonzero: thin, light line (e.g. per-head curves under per-layer
                             * means), no legend entry. It takes a light tint of the colour of
                             * the nearest non-faint series before it in the array (grey if
                             * none), and all faint lines are drawn underneath the others. */
} PlotSeries;

typedef struct {
    const char *title, *xlabel, *ylabel;
    int logx, logy;         /* log10 axes; points <= 0 on a log axis are skipped */
    int width, height;      /* pixels; 0 = 900 x 600 */
    int legend_right;       /* plot_lines: the legend in one column right of the plot, outside
                             * it (for many series), instead of in the emptiest corner */
} PlotSpec;

/* Line plot, several series, legend, labelled axes, the Okabe-Ito colour-blind-safe palette
 * (colours repeat with dashed styles after 8 series), white background. Non-finite points are
 * skipped and break the line (a diverged run's NaN tail); an isolated point is drawn as a dot.
 * The legend goes in the corner of the plot with no data under it, or, when every corner has
 * some, top right with the y axis raised to make room (plot_legend_place); its text shrinks
 * (to no less than 0.6) when its labels would make it wider than the plot.
 * Writes to "<path>.tmp" and renames over path; on failure returns -1 with e set and no file left
 * (e.g. "nothing to plot" when no series has a finite point). */
int plot_lines(const char *path, const PlotSpec *spec, const PlotSeries *s, int n_series, Err *e);

/* Several line plots side by side in one PNG: n_panels of them in rows of cols, each its own
 * spec (title, axes, log scales; every panel the same size, spec's width x height, 0 = 900 x
 * 600) and series, drawn as plot_lines draws one, its text the size of a one-panel figure of
 * the panel's size, however the panels are laid out. For plots whose y axes differ (units,
 * ranges). The same atomic write; fails as plot_lines does when a panel has nothing to plot. */
enum { PLOT_MAX_PANELS = 16 };
typedef struct {
    const PlotSpec *spec; /* NULL: the defaults */
    const PlotSeries *s;
    int n_series;
} PlotPanel;
int plot_panels(const char *path, const PlotPanel *panel, int n_panels, int cols, Err *e);

/* Where plot_lines puts its legend. The curves are n_series runs of points, n[i] each, laid
 * end to end in x and y (NaN breaks a line), on axes spanning [xmin, xmax] x [ymin, ymax];
 * the legend is a box of w x h (fractions of the plot's width and height). Returns the
 * corner whose box hides the fewest points of the curves (each segment sampled 8 times), and
 * *ymax_out = ymax. When every corner hides some, it returns PLOT_CORNER_TR and raises the
 * top, *ymax_out > ymax, so that the curves end below the box. */
enum { PLOT_CORNER_TR, PLOT_CORNER_TL, PLOT_CORNER_BR, PLOT_CORNER_BL, PLOT_N_CORNERS };
int plot_legend_place(const double *x, const double *y, const int *n, int n_series, double xmin, double xmax,
                      double ymin, double ymax, double w, double h, double *ymax_out);

/* A heatmap of rows x cols values (row-major), row 0 at the bottom, with a colour bar (viridis),
 * axis labels from spec (xlabel runs along the columns, ylabel along the rows), and integer tick
 * labels at cell centres (e.g. head x layer). Values are coloured on [vmin, vmax] and clamped to
 * it; when !(vmin < vmax) (e.g. both 0 or NaN) the range of the finite values is used.
 * Non-finite cells are left blank. spec->logx/logy are ignored. Same atomic write. */
int plot_heatmap(const char *path, const PlotSpec *spec, const double *values, int rows, int cols,
                 double vmin, double vmax, Err *e);

/* A title that names the run (or grid) a plot shows: "<name>: <what>" into buf; a name of more
 * than 40 characters keeps its first 22 and last 15 around "...". Returns buf. */
const char *plot_title(char *buf, size_t size, const char *name, const char *what);

#endif
