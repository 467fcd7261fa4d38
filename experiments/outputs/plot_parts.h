/* room outputs/: the plots and pages a run leaves; includes the engine, run/ and outputs/. */
/* plot_parts.h: what plot.c (the stream, the axes, heatmaps) and plot_lines.c
 * (line plots and their legend) share; private to them. */
#ifndef ATTNLAB_PLOT_PARTS_H
#define ATTNLAB_PLOT_PARTS_H

#include <plplot.h>
#include <stdio.h>

#include "plot.h"

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

typedef struct {
    const char *path;
    char *tmp;
    FILE *f;
    int width, height; /* of one panel (the whole figure when it has one) */
} Figure;

#define PLOT_MAX_SIDE 16384 /* pixels, a figure's longest side */

/* The figure's size in pixels from spec (0: the default), checked. */
int plot_figure_size(const char *path, const PlotSpec *spec, int *w, int *h, Err *e);
/* How much bigger lines and text are drawn than on a default figure, and text's own factor. */
double plot_figure_scale(const Figure *fig);
double plot_text_scale(const Figure *fig);
/* Opens "<path>.tmp" and starts a fresh PLplot stream drawing into it, its w x h page cut
 * into cols x rows panels (pladv(i + 1) moves to the i-th; 1, 1 for one plot); and ends it:
 * the stream closed, the file checked and renamed over path. */
int plot_figure_begin(Figure *fig, const char *path, int w, int h, int cols, int rows, Err *e);
int plot_figure_end(Figure *fig, Err *e);
/* Copies text, doubling PLplot's escape character '#'. */
const char *plot_text(const char *in, char *out, size_t size);
size_t plot_utf8_chars(const char *s);
/* Pads a degenerate or tiny range so PLplot can draw axes for it. */
void plot_widen(double *lo, double *hi, int log_axis);
/* Grid lines (grid != 0) or the frame, ticks and numbers of both axes. */
void plot_draw_axes(const PlotSpec *spec, double x0, double x1, double y0, double y1, int grid);

#endif
