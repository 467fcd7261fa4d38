/* test_plot.c: PNG figures (real PNGs of the asked size, written atomically, clear errors
 * for nothing to plot or a bad path, quiet on stderr) and the progress display (durations,
 * plain lines for logs that do not flood, an in-place bar on a terminal). */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stb_image.h>

#include "plot.h"
#include "progress.h"
#include "run.h"
#include "test_util.h"

static char tmp_dir[512];

static void setup(void) {
    test_tmpdir(tmp_dir, sizeof tmp_dir, "plot");
}

static void teardown(void) { test_rmtree(tmp_dir); }

/* A path inside the test's temporary directory (one of four rotating buffers). */
static const char *tpath(const char *name) {
    static char bufs[4][1024];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", tmp_dir, name);
    return b;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

static int tmp_exists(const char *path) {
    char t[1100];
    snprintf(t, sizeof t, "%s.tmp", path);
    return exists(t);
}

/* Checks the PNG signature, the IHDR size, and that the file is more than a blank page. */
static void assert_png(const char *path, int width, int height) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s was not written", path);
    unsigned char h[24];
    ck_assert_int_eq(fread(h, 1, sizeof h, f), sizeof h);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    ck_assert_msg(memcmp(h, magic, 8) == 0, "%s is not a PNG", path);
    ck_assert_msg(memcmp(h + 12, "IHDR", 4) == 0, "%s has no IHDR first", path);
    uint32_t w = (uint32_t)h[16] << 24 | (uint32_t)h[17] << 16 | (uint32_t)h[18] << 8 | h[19];
    uint32_t ht = (uint32_t)h[20] << 24 | (uint32_t)h[21] << 16 | (uint32_t)h[22] << 8 | h[23];
    ck_assert_int_eq(w, width);
    ck_assert_int_eq(ht, height);
    ck_assert_msg(size > 4000, "%s is only %ld bytes", path, size);
    f = fopen(path, "rb");
    unsigned char t[12];
    fseek(f, -12, SEEK_END);
    ck_assert_int_eq(fread(t, 1, sizeof t, f), sizeof t);
    fclose(f);
    ck_assert_msg(memcmp(t + 4, "IEND", 4) == 0, "%s does not end with IEND", path);
    ck_assert_msg(!tmp_exists(path), "%s.tmp was left behind", path);
}

/* Runs fn with stderr sent to a file; returns how many bytes it wrote there. */
static long stderr_bytes_of(void (*fn)(void)) {
    fflush(stderr);
    int saved = dup(2);
    FILE *cap = tmpfile();
    ck_assert(saved >= 0 && cap != NULL);
    dup2(fileno(cap), 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fseek(cap, 0, SEEK_END);
    long n = ftell(cap);
    fclose(cap);
    return n;
}

enum { N = 200 };
static double xs[N], ys[4][N];

static void fill_curves(void) {
    for (int i = 0; i < N; i++) {
        xs[i] = 10.0 * (i + 1);
        for (int k = 0; k < 4; k++) ys[k][i] = 1.0 + 4.0 * exp(-i / (20.0 + 10.0 * k)) + 0.1 * k;
    }
}

/* ---- plot_lines ---------------------------------------------------------------------- */

static void draw_typical(void) {
    fill_curves();
    for (int i = 150; i < N; i++) ys[3][i] = NAN; /* a diverged run */
    PlotSeries s[] = {
        {"softmax", xs, ys[0], N, 0},
        {"head 0", xs, ys[1], N, 1},
        {"head 1", xs, ys[2], N, 1},
        {"linear #phi=relu", xs, ys[3], N, 0},
    };
    PlotSpec spec = {.title = "validation loss", .xlabel = "step", .ylabel = "loss (nats)"};
    Err e = {0};
    int rc = plot_lines(tpath("loss.png"), &spec, s, 4, &e);
    ck_assert_msg(rc == 0, "plot_lines: %s", e.msg);
}

START_TEST(test_lines_png) {
    draw_typical();
    assert_png(tpath("loss.png"), 900, 600);
}
END_TEST

START_TEST(test_lines_quiet) {
    /* Normal plots print nothing (PLplot and its driver included). */
    ck_assert_int_eq(stderr_bytes_of(draw_typical), 0);
    assert_png(tpath("loss.png"), 900, 600);
}
END_TEST

START_TEST(test_lines_size_and_log_axes) {
    fill_curves();
    double x[5] = {256, 512, 1024, 2048, 4096}, y[5] = {1.3, 1.4, 2.0, 3.5, 6.0};
    double y0[5] = {0, -1, 1.2, 1.25, 1.3}; /* points <= 0 are skipped on the log axis */
    PlotSeries s[] = {{"rope", x, y, 5, 0}, {"alibi", x, y0, 5, 0}};
    PlotSpec spec = {.title = "extrapolation", .xlabel = "length", .ylabel = "bpb",
                     .logx = 1, .logy = 1, .width = 640, .height = 400};
    Err e = {0};
    ck_assert_msg(plot_lines(tpath("len.png"), &spec, s, 2, &e) == 0, "%s", e.msg);
    assert_png(tpath("len.png"), 640, 400);
    /* Many decades, and a range inside one decade. */
    double big[4] = {1e-6, 1e-2, 10, 1e5}, narrow[4] = {1.50, 1.52, 1.55, 1.51};
    PlotSeries t[] = {{"wide", big, narrow, 4, 0}};
    ck_assert_msg(plot_lines(tpath("decades.png"), &spec, t, 1, &e) == 0, "%s", e.msg);
    assert_png(tpath("decades.png"), 640, 400);
}
END_TEST

START_TEST(test_lines_degenerate) {
    Err e = {0};
    /* a single point */
    double x1[1] = {3}, y1[1] = {2.5};
    PlotSeries one = {"one", x1, y1, 1, 0};
    ck_assert_msg(plot_lines(tpath("one.png"), NULL, &one, 1, &e) == 0, "%s", e.msg);
    assert_png(tpath("one.png"), 900, 600);
    /* all y equal, and all x equal */
    double x[3] = {1, 2, 3}, y[3] = {0.5, 0.5, 0.5}, xe[3] = {7, 7, 7}, z[3] = {0, 0, 0};
    PlotSeries flat[] = {{"flat", x, y, 3, 0}, {"zero", x, z, 3, 0}};
    ck_assert_msg(plot_lines(tpath("flat.png"), NULL, flat, 2, &e) == 0, "%s", e.msg);
    assert_png(tpath("flat.png"), 900, 600);
    PlotSeries vert = {"vertical", xe, x, 3, 0};
    ck_assert_msg(plot_lines(tpath("vert.png"), NULL, &vert, 1, &e) == 0, "%s", e.msg);
    assert_png(tpath("vert.png"), 900, 600);
    /* NaN between points, infinities, an empty series, no labels, and a lot of series */
    double g[6] = {1, NAN, 3, INFINITY, 5, 6};
    PlotSeries gaps[12] = {{NULL, x, y, 3, 0}, {"gaps", g, g, 6, 0}, {"empty", NULL, NULL, 0, 0}};
    for (int k = 3; k < 12; k++) gaps[k] = (PlotSeries){"more", g, g, 6, 0};
    ck_assert_msg(plot_lines(tpath("gaps.png"), NULL, gaps, 12, &e) == 0, "%s", e.msg);
    assert_png(tpath("gaps.png"), 900, 600);
    /* labels with UTF-8 and PLplot's escape character */
    PlotSpec spec = {.title = "# of tokens — 中文", .xlabel = "#", .ylabel = "é"};
    ck_assert_msg(plot_lines(tpath("text.png"), &spec, flat, 2, &e) == 0, "%s", e.msg);
    assert_png(tpath("text.png"), 900, 600);
}
END_TEST

START_TEST(test_lines_nothing_to_plot) {
    Err e = {0};
    double nan3[3] = {NAN, NAN, NAN}, x[3] = {1, 2, 3}, neg[3] = {-1, 0, -2};
    PlotSeries all_nan = {"diverged", x, nan3, 3, 0};
    ck_assert_int_eq(plot_lines(tpath("a.png"), NULL, &all_nan, 1, &e), -1);
    ck_assert_msg(strstr(e.msg, "nothing to plot") != NULL, "message: %s", e.msg);
    ck_assert_msg(strstr(e.msg, "a.png") != NULL, "message: %s", e.msg);
    PlotSeries empty = {"empty", x, x, 0, 0};
    ck_assert_int_eq(plot_lines(tpath("a.png"), NULL, &empty, 1, &e), -1);
    ck_assert_int_eq(plot_lines(tpath("a.png"), NULL, NULL, 0, &e), -1);
    ck_assert_msg(strstr(e.msg, "nothing to plot") != NULL, "message: %s", e.msg);
    PlotSeries nonpos = {"loss", x, neg, 3, 0};
    PlotSpec logy = {.logy = 1};
    ck_assert_int_eq(plot_lines(tpath("a.png"), &logy, &nonpos, 1, &e), -1);
    ck_assert_msg(strstr(e.msg, "nothing to plot") != NULL, "message: %s", e.msg);
    ck_assert(!exists(tpath("a.png")));
    ck_assert(!tmp_exists(tpath("a.png")));
    /* and bad arguments */
    PlotSeries no_data = {"x", NULL, NULL, 3, 0};
    ck_assert_int_eq(plot_lines(tpath("a.png"), NULL, &no_data, 1, &e), -1);
    PlotSpec tiny = {.width = 10, .height = 10};
    PlotSeries ok = {"ok", x, x, 3, 0};
    ck_assert_int_eq(plot_lines(tpath("a.png"), &tiny, &ok, 1, &e), -1);
    ck_assert(!exists(tpath("a.png")));
}
END_TEST

START_TEST(test_lines_bad_path) {
    Err e = {0};
    double x[3] = {1, 2, 3};
    PlotSeries s = {"s", x, x, 3, 0};
    /* a directory that does not exist: an error, not PLplot's exit() */
    const char *p = tpath("missing/loss.png");
    ck_assert_int_eq(plot_lines(p, NULL, &s, 1, &e), -1);
    ck_assert_msg(strstr(e.msg, "missing/loss.png") != NULL, "message: %s", e.msg);
    /* the path is a directory: the rename fails and the temporary file goes */
    ck_assert_int_eq(mkdir(tpath("dir.png"), 0755), 0);
    ck_assert_int_eq(plot_lines(tpath("dir.png"), NULL, &s, 1, &e), -1);
    ck_assert_msg(strstr(e.msg, "dir.png") != NULL, "message: %s", e.msg);
    ck_assert(!tmp_exists(tpath("dir.png")));
}
END_TEST

START_TEST(test_lines_disk_full) {
    /* Writes past 3000 bytes fail (EFBIG), as on a full disk: an error, no file left. */
    struct rlimit saved, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = saved;
    lim.rlim_cur = 3000;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    fill_curves();
    PlotSeries s = {"softmax", xs, ys[0], N, 0};
    Err e = {0};
    int rc = plot_lines(tpath("full.png"), NULL, &s, 1, &e);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, old_handler);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(e.msg, "full.png") != NULL, "message: %s", e.msg);
    ck_assert(!exists(tpath("full.png")) && !tmp_exists(tpath("full.png")));
}
END_TEST

START_TEST(test_lines_replaces_atomically) {
    FILE *f = fopen(tpath("loss.png"), "wb");
    ck_assert(f != NULL);
    fputs("old contents", f);
    fclose(f);
    draw_typical();
    assert_png(tpath("loss.png"), 900, 600);
    /* a failed plot leaves the old file alone */
    Err e = {0};
    double nan1[1] = {NAN};
    PlotSeries s = {"s", nan1, nan1, 1, 0};
    ck_assert_int_eq(plot_lines(tpath("loss.png"), NULL, &s, 1, &e), -1);
    assert_png(tpath("loss.png"), 900, 600);
    /* many plots in a row, each on a fresh stream */
    for (int i = 0; i < 5; i++) draw_typical();
    assert_png(tpath("loss.png"), 900, 600);
}
END_TEST

/* ---- plot_heatmap -------------------------------------------------------------------- */

START_TEST(test_heatmap_png) {
    enum { L = 4, H = 8 };
    double v[L * H];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) v[l * H + h] = 0.1 * l + 0.05 * h;
    v[3] = NAN;
    v[9] = 99; /* above vmax: clamped */
    PlotSpec spec = {.title = "effective rank", .xlabel = "head", .ylabel = "layer"};
    Err e = {0};
    ck_assert_msg(plot_heatmap(tpath("heat.png"), &spec, v, L, H, 0.0, 1.0, &e) == 0, "%s", e.msg);
    assert_png(tpath("heat.png"), 900, 600);
    /* automatic range, more cells than tick labels */
    double big[12 * 64];
    for (int i = 0; i < 12 * 64; i++) big[i] = sin(i * 0.1);
    spec.width = 1200;
    ck_assert_msg(plot_heatmap(tpath("big.png"), &spec, big, 12, 64, 0, 0, &e) == 0, "%s", e.msg);
    assert_png(tpath("big.png"), 1200, 600);
}
END_TEST

START_TEST(test_heatmap_degenerate) {
    Err e = {0};
    double one[1] = {0.7};
    ck_assert_msg(plot_heatmap(tpath("one.png"), NULL, one, 1, 1, NAN, NAN, &e) == 0, "%s", e.msg);
    assert_png(tpath("one.png"), 900, 600);
    double same[6] = {2, 2, 2, 2, 2, 2};
    ck_assert_msg(plot_heatmap(tpath("same.png"), NULL, same, 2, 3, 0, 0, &e) == 0, "%s", e.msg);
    assert_png(tpath("same.png"), 900, 600);
    double nans[4] = {NAN, NAN, INFINITY, NAN};
    ck_assert_int_eq(plot_heatmap(tpath("nan.png"), NULL, nans, 2, 2, 0, 1, &e), -1);
    ck_assert_msg(strstr(e.msg, "nothing to plot") != NULL, "message: %s", e.msg);
    ck_assert_int_eq(plot_heatmap(tpath("nan.png"), NULL, nans, 0, 2, 0, 1, &e), -1);
    ck_assert_int_eq(plot_heatmap(tpath("missing/h.png"), NULL, same, 2, 3, 0, 1, &e), -1);
    ck_assert(!exists(tpath("nan.png")) && !tmp_exists(tpath("nan.png")));
}
END_TEST

/* The legend's place: the empty corner when there is one; when the curves reach every
 * corner, top right with the top raised just enough that no point is under the box. */
START_TEST(test_legend_place) {
    /* a falling curve: it passes the top left and bottom right; the first free corner wins */
    double x[] = {0, 1, 2, 3, 4}, y[] = {4, 3, 2, 1, 0};
    int n[] = {5};
    double top;
    int c = plot_legend_place(x, y, n, 1, 0, 4, 0, 4, 0.3, 0.3, &top);
    ck_assert_msg(c == PLOT_CORNER_TR && top == 4, "corner %d top %g", c, top);
    /* a rising curve and a falling one: every corner has data */
    double x2[] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4}, y2[] = {0, 1, 2, 3, 4, 4, 3, 2, 1, 0};
    int n2[] = {5, 5};
    c = plot_legend_place(x2, y2, n2, 2, 0, 4, 0, 4, 0.3, 0.3, &top);
    ck_assert_int_eq(c, PLOT_CORNER_TR);
    /* with the new top, the box over the top (v >= 1 - h) holds no point, and little room is lost */
    ck_assert_msg(4.0 / top < 1.0 - 0.3, "highest point at %g of the height", 4.0 / top);
    ck_assert_msg(4.0 / top > 1.0 - 0.3 - 0.1, "room wasted: highest point at %g", 4.0 / top);
    /* A line round the left, top and right that ends at (2, 0), and a point at (4, 2): only the
     * bottom right is free, unless the two series are wrongly joined through it. */
    double x3[] = {0, 0, 4, 2, 4}, y3[] = {0, 4, 4, 0, 2};
    int n3[] = {4, 1};
    c = plot_legend_place(x3, y3, n3, 2, 0, 4, 0, 4, 0.3, 0.3, &top);
    ck_assert_msg(c == PLOT_CORNER_BR && top == 4, "series joined? corner %d top %g", c, top);
    /* the same with NaN breaking one series: no segment is counted across it */
    double x4[] = {0, 0, 4, 2, NAN, 4}, y4[] = {0, 4, 4, 0, NAN, 2};
    int n4[] = {6};
    c = plot_legend_place(x4, y4, n4, 1, 0, 4, 0, 4, 0.3, 0.3, &top);
    ck_assert_msg(c == PLOT_CORNER_BR && top == 4, "NaN joined? corner %d top %g", c, top);
    /* joined, the last segment does cross the bottom right: all four are taken */
    double x5[] = {0, 0, 4, 2, 4}, y5[] = {0, 4, 4, 0, 2};
    int n5[] = {5};
    c = plot_legend_place(x5, y5, n5, 1, 0, 4, 0, 4, 0.3, 0.3, &top);
    ck_assert_msg(c == PLOT_CORNER_TR && top > 4, "corner %d top %g", c, top);
}
END_TEST

/* ---- progress ------------------------------------------------------------------------ */

START_TEST(test_format_duration) {
    char b[32];
    ck_assert_str_eq(format_duration(0, b, sizeof b), "0s");
    ck_assert_str_eq(format_duration(42, b, sizeof b), "42s");
    ck_assert_str_eq(format_duration(42.4, b, sizeof b), "42s");
    ck_assert_str_eq(format_duration(59.6, b, sizeof b), "1m00s");
    ck_assert_str_eq(format_duration(185, b, sizeof b), "3m05s");
    ck_assert_str_eq(format_duration(3599, b, sizeof b), "59m59s");
    ck_assert_str_eq(format_duration(3600, b, sizeof b), "1h00m");
    ck_assert_str_eq(format_duration(3720, b, sizeof b), "1h02m");
    ck_assert_str_eq(format_duration(100 * 3600 + 59, b, sizeof b), "100h00m");
    ck_assert_str_eq(format_duration(-3, b, sizeof b), "0s");
    ck_assert_str_eq(format_duration(NAN, b, sizeof b), "--");
    ck_assert_str_eq(format_duration(INFINITY, b, sizeof b), "--");
    char small[4];
    ck_assert_str_eq(format_duration(3720, small, sizeof small), "1h0");
}
END_TEST

/* Reads the whole file into buf; returns the number of lines. */
static int slurp(FILE *f, char *buf, size_t size) {
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    return lines;
}

static const char *last_line(const char *buf) {
    size_t n = strlen(buf);
    ck_assert(n > 0 && buf[n - 1] == '\n');
    const char *p = buf + n - 1;
    while (p > buf && p[-1] != '\n') p--;
    return p;
}

/* On an 80-column terminal the fields that do not fit are dropped whole,
 * never cut; a plain line keeps them all, two spaces apart. */
START_TEST(test_progress_fields_at_80_columns) {
    const char *extra = "loss 1.781 bpb\tval 2.449 bpb @2000\tlr 3.0e-04\t19412 tok/s";
    for (int width = 40; width <= 160; width += 4) {
        FILE *f = tmpfile();
        Progress p;
        progress_init(&p, "run 12/27 phi=leakyrelu,reweight=cos", 2500, f);
        p.tty = 1, p.columns = width; /* as a terminal of this width */
        progress_update(&p, 1234, extra);
        progress_finish(&p, extra);
        char buf[4096];
        slurp(f, buf, sizeof buf);
        fclose(f);
        const char *line = strrchr(buf, '\r') + 1;
        size_t n = strcspn(line, "\n");
        ck_assert_msg(n < (size_t)width, "width %d: %zu characters: %s", width, n, line);
        /* each field is there whole or not at all */
        const char *fields[] = {"loss 1.781 bpb", "val 2.449 bpb @2000", "lr 3.0e-04", "19412 tok/s"};
        bool gone = false;
        for (int i = 0; i < 4; i++) {
            bool whole = strstr(line, fields[i]) != NULL;
            ck_assert_msg(!(gone && whole), "width %d: field %d after a dropped one: %s", width, i, line);
            gone |= !whole;
        }
        /* between the percentage and the times: the first k fields, whole */
        const char *from = strstr(line, "% ") ? strstr(line, "% ") + 2 : NULL, *to = strstr(line, " | elapsed");
        ck_assert_msg(to != NULL, "width %d: no times: %s", width, line);
        char shown[512] = "", joined[512] = "";
        if (from && from < to) snprintf(shown, sizeof shown, "%.*s", (int)(to - from), from);
        bool prefix = !shown[0];
        for (int i = 0; i < 4 && !prefix; i++) {
            size_t k = strlen(joined);
            snprintf(joined + k, sizeof joined - k, "%s%s", i ? "  " : "", fields[i]);
            prefix = !strcmp(shown, joined);
        }
        ck_assert_msg(prefix, "width %d: '%s' is not whole fields", width, shown);
        if (width == 160) ck_assert_msg(!gone, "all fields fit in 160 columns: %s", line);
    }
    FILE *f = tmpfile();
    Progress p;
    progress_init(&p, "train", 10, f);
    progress_finish(&p, extra);
    char buf[1024];
    slurp(f, buf, sizeof buf);
    fclose(f);
    ck_assert_msg(strstr(buf, "loss 1.781 bpb  val 2.449 bpb @2000  lr 3.0e-04  19412 tok/s"), "%s", buf);
}
END_TEST

START_TEST(test_progress_plain_lines) {
    FILE *f = tmpfile();
    ck_assert(f != NULL);
    Progress p;
    progress_init(&p, "train", 1000, f);
    char extra[64];
    for (long i = 1; i <= 1000; i++) {
        snprintf(extra, sizeof extra, "loss %.3f", 5.0 - i * 0.001);
        progress_update(&p, i, extra);
    }
    progress_finish(&p, "loss 4.000");
    progress_finish(&p, "again"); /* only once */
    static char buf[1 << 16];
    int lines = slurp(f, buf, sizeof buf);
    fclose(f);
    ck_assert_msg(lines >= 10 && lines <= 11, "%d lines:\n%s", lines, buf);
    ck_assert_msg(strstr(buf, "train: step 100/1000 (10%) loss 4.900 elapsed ") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "train: step 500/1000 (50%) loss 4.500 elapsed ") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, " eta ") != NULL, "%s", buf);
    ck_assert_msg(strchr(buf, '\r') == NULL, "no carriage returns in logs");
    const char *last = last_line(buf);
    ck_assert_msg(strncmp(last, "train: step 1000/1000 (100%) loss 4.000 elapsed ", 48) == 0, "%s", last);
    ck_assert_msg(strstr(last, "eta") == NULL, "%s", last);
    ck_assert(strstr(buf, "again") == NULL);
}
END_TEST

/* A long label (ablate's "run i/n NAME (all runs: eta T)") shows whole on a
 * plain line: it was once cut at 63 characters, eta and all. */
START_TEST(test_progress_long_label_whole) {
    const char *label = "run 12/12 linformer_share=layerwise,linformer_k=64,16,seed=1339 (all runs: eta 2m10s)";
    FILE *f = tmpfile();
    ck_assert(f != NULL);
    Progress p;
    progress_init(&p, label, 10, f);
    progress_update(&p, 10, NULL);
    progress_finish(&p, "loss 1.000");
    char buf[1024];
    slurp(f, buf, sizeof buf);
    fclose(f);
    char want[256];
    snprintf(want, sizeof want, "%s: step 10/10 (100%%) loss 1.000 elapsed ", label);
    ck_assert_msg(strncmp(buf, want, strlen(want)) == 0, "%s", buf);
}
END_TEST

START_TEST(test_progress_not_flooded) {
    FILE *f = tmpfile();
    ck_assert(f != NULL);
    Progress p;
    progress_init(&p, "run 3/9", 2000000, f);
    for (long i = 0; i <= 2000000; i++) progress_update(&p, i, NULL);
    progress_finish(&p, NULL);
    static char buf[1 << 16];
    int lines = slurp(f, buf, sizeof buf);
    fclose(f);
    ck_assert_msg(lines <= 11, "%d lines", lines);
    const char *last = last_line(buf);
    ck_assert_msg(strncmp(last, "run 3/9: step 2000000/2000000 (100%) elapsed ", 45) == 0, "%s", last);
    /* A run stopped early ends on its last step. */
    f = tmpfile();
    progress_init(&p, "train", 10, f);
    progress_update(&p, 0, "starting"); /* no ETA before the first unit */
    progress_update(&p, 3, "loss nan");
    progress_finish(&p, "diverged");
    lines = slurp(f, buf, sizeof buf);
    fclose(f);
    ck_assert_msg(strstr(buf, "step 0/10") == NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "train: step 3/10 (30%) loss nan elapsed ") != NULL, "%s", buf);
    ck_assert_msg(strncmp(last_line(buf), "train: step 3/10 (30%) diverged elapsed ", 40) == 0, "%s", buf);
    /* unknown total, and no output at all */
    f = tmpfile();
    progress_init(&p, "", 0, f);
    progress_update(&p, 5, NULL);
    progress_finish(&p, "done");
    slurp(f, buf, sizeof buf);
    fclose(f);
    ck_assert_msg(strncmp(buf, "step 5 done elapsed ", 20) == 0, "%s", buf);
    progress_init(&p, "quiet", 10, NULL);
    progress_update(&p, 5, "x");
    progress_finish(&p, "x");
}
END_TEST

/* A run resumed from its checkpoint counts on from there, and its ETA is
 * that of the steps trained since: 500 of 4000 done in 100 s after resuming
 * at 3000 leave 500 more, 100 s (a rate over all 3500 said 14 s). */
START_TEST(test_progress_resumed) {
    FILE *f = tmpfile();
    ck_assert(f != NULL);
    Progress p;
    progress_init(&p, "run 5/9", 4000, f);
    progress_from(&p, 3000);
    p.start -= 100; /* as if resumed 100 s ago */
    progress_update(&p, 3100, NULL); /* short of the next 10% mark (3200) */
    progress_update(&p, 3500, "loss 2.000");
    progress_finish(&p, "done");
    char buf[1024];
    int lines = slurp(f, buf, sizeof buf);
    fclose(f);
    ck_assert_msg(lines == 2, "%d lines:\n%s", lines, buf);
    ck_assert_msg(strstr(buf, "run 5/9: step 3500/4000 (87%) loss 2.000 elapsed 1m40s eta 1m40s\n"), "%s", buf);
    /* a finished run opened again: its last step, done */
    f = tmpfile();
    progress_init(&p, "run 1/2", 20, f);
    progress_from(&p, 20);
    progress_finish(&p, "done");
    slurp(f, buf, sizeof buf);
    fclose(f);
    ck_assert_msg(!strncmp(buf, "run 1/2: step 20/20 (100%) done elapsed ", 40), "%s", buf);
}
END_TEST

START_TEST(test_progress_terminal) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
        if (master >= 0) close(master);
        return; /* no pseudo-terminals here: nothing to test */
    }
    FILE *tty = fopen(ptsname(master), "w");
    ck_assert(tty != NULL);
    fcntl(master, F_SETFL, O_NONBLOCK);
    static char buf[1 << 16];
    size_t got = 0;
    Progress p;
    progress_init(&p, "train", 100000, tty);
    ck_assert(p.tty);
    for (long i = 1; i <= 100000; i++) {
        progress_update(&p, i, i < 50000 ? "loss 1.234 lr 3.0e-4 tok/s 9876" : "short");
        ssize_t r = read(master, buf + got, sizeof buf - 1 - got);
        if (r > 0) got += (size_t)r;
    }
    progress_finish(&p, "loss 1.000");
    fclose(tty);
    for (int tries = 0; tries < 100; tries++) {
        ssize_t r = read(master, buf + got, sizeof buf - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(master);
    buf[got] = '\0';
    int redraws = 0;
    for (size_t i = 0; i < got; i++) redraws += buf[i] == '\r';
    /* at most ~10 redraws a second (two \r each when a shorter line blanks a longer one) */
    ck_assert_msg(redraws >= 2 && redraws < 200, "%d redraws", redraws);
    ck_assert_msg(strstr(buf, "train: 100000/100000 [####################] 100% loss 1.000") != NULL,
                  "%s", buf);
    ck_assert_msg(strstr(buf, "elapsed") != NULL, "%s", buf);
}
END_TEST

/* Titles name the run: run_name_of finds the name in a folder or checkpoint
 * path, plot_title puts it first and shortens a long one. */
START_TEST(test_plot_title_names_run) {
    char name[256], title[320];
    run_name_of("runs/softmax_pos-rope-20261123-101500/", name, sizeof name);
    ck_assert_str_eq(name, "softmax_pos-rope-20261123-101500");
    run_name_of("runs/abc/model.safetensors", name, sizeof name);
    ck_assert_str_eq(name, "abc");
    run_name_of("ckpt/best.safetensors", name, sizeof name);
    ck_assert_str_eq(name, "best");
    ck_assert_str_eq(plot_title(title, sizeof title, "abc", "loss"), "abc: loss");
    const char *longname = "linformer_linformer_k-32+16_layers-2_d_model-32-20261123-101500";
    plot_title(title, sizeof title, longname, "loss");
    ck_assert_str_eq(title, "linformer_linformer_k-...20261123-101500: loss");
}
END_TEST

/* ---- plot_panels --------------------------------------------------------------------- */

/* The share of pixels that are not white in the quadrant (qx, qy) of a 2 x 2 PNG. */
static double ink_in_quadrant(const char *path, int qx, int qy) {
    int w, h, ch;
    unsigned char *px = stbi_load(path, &w, &h, &ch, 3);
    ck_assert_msg(px != NULL, "%s: %s", path, stbi_failure_reason());
    long ink = 0, all = 0;
    for (int y = qy * h / 2; y < (qy + 1) * h / 2; y++)
        for (int x = qx * w / 2; x < (qx + 1) * w / 2; x++, all++) {
            const unsigned char *p = px + 3 * ((size_t)y * w + x);
            ink += p[0] < 250 || p[1] < 250 || p[2] < 250;
        }
    stbi_image_free(px);
    return (double)ink / (double)all;
}

START_TEST(test_panels) {
    Err e = {0};
    double x[3] = {1e13, 3e13, 1e14}, a[3] = {0.05, 0.04, 0.045}, b[3] = {47, 53, 60}, nan3[3] = {NAN, NAN, NAN};
    PlotSeries sa = {NULL, x, a, 3, 0}, sb = {NULL, x, b, 3, 0}, sn = {NULL, x, nan3, 3, 0};
    PlotSpec log_x = {.title = "heads=16,talking_heads=both < heads=16,talking_heads=none", .ylabel = "bpb",
                      .logx = 1};
    PlotSpec small = {.logx = 1, .width = 400, .height = 300};
    PlotPanel three[] = {{&log_x, &sa, 1}, {NULL, &sb, 1}, {&log_x, &sb, 1}};
    /* rows of two, each panel its spec's size */
    ck_assert_msg(plot_panels(tpath("panels.png"), three, 3, 2, &e) == 0, "%s", e.msg);
    assert_png(tpath("panels.png"), 1800, 1200);
    /* each panel in its own place, left to right, then down; the fourth place empty */
    for (int q = 0; q < 3; q++)
        ck_assert_msg(ink_in_quadrant(tpath("panels.png"), q % 2, q / 2) > 0.02, "panel %d not drawn", q + 1);
    ck_assert_msg(ink_in_quadrant(tpath("panels.png"), 1, 1) == 0, "ink where no panel is");
    PlotPanel one[] = {{&small, &sa, 1}};
    ck_assert_msg(plot_panels(tpath("one.png"), one, 1, 4, &e) == 0, "%s", e.msg);
    assert_png(tpath("one.png"), 400, 300);
    /* nothing to plot in one panel, panels of two sizes, none, too many: no file */
    PlotPanel bad[] = {{NULL, &sa, 1}, {NULL, &sn, 1}};
    ck_assert_int_eq(plot_panels(tpath("bad.png"), bad, 2, 2, &e), -1);
    ck_assert_msg(strstr(e.msg, "nothing to plot") != NULL, "message: %s", e.msg);
    PlotPanel sizes[] = {{NULL, &sa, 1}, {&small, &sa, 1}};
    ck_assert_int_eq(plot_panels(tpath("bad.png"), sizes, 2, 2, &e), -1);
    ck_assert_msg(strstr(e.msg, "panel 2") != NULL, "message: %s", e.msg);
    ck_assert_int_eq(plot_panels(tpath("bad.png"), three, 0, 2, &e), -1);
    PlotPanel many[PLOT_MAX_PANELS + 1];
    for (int i = 0; i <= PLOT_MAX_PANELS; i++) many[i] = (PlotPanel){&small, &sa, 1};
    ck_assert_int_eq(plot_panels(tpath("bad.png"), many, PLOT_MAX_PANELS + 1, 4, &e), -1);
    ck_assert(!exists(tpath("bad.png")));
    ck_assert(!tmp_exists(tpath("bad.png")));
}
END_TEST

Suite *plot_suite(void) {
    Suite *s = suite_create("plot");
    TCase *tc = tcase_create("plot");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_lines_png);
    tcase_add_test(tc, test_lines_quiet);
    tcase_add_test(tc, test_lines_size_and_log_axes);
    tcase_add_test(tc, test_lines_degenerate);
    tcase_add_test(tc, test_lines_nothing_to_plot);
    tcase_add_test(tc, test_lines_bad_path);
    tcase_add_test(tc, test_lines_disk_full);
    tcase_add_test(tc, test_lines_replaces_atomically);
    tcase_add_test(tc, test_panels);
    tcase_add_test(tc, test_heatmap_png);
    tcase_add_test(tc, test_plot_title_names_run);
    tcase_add_test(tc, test_heatmap_degenerate);
    suite_add_tcase(s, tc);
    tc = tcase_create("progress");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_format_duration);
    tcase_add_test(tc, test_progress_plain_lines);
    tcase_add_test(tc, test_progress_fields_at_80_columns);
    tcase_add_test(tc, test_progress_not_flooded);
    tcase_add_test(tc, test_progress_long_label_whole);
    tcase_add_test(tc, test_progress_resumed);
    tcase_add_test(tc, test_legend_place);
    tcase_add_test(tc, test_progress_terminal);
    suite_add_tcase(s, tc);
    return s;
}
