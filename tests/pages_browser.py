"""tests/pages_browser.py: the pages (experiments/outputs/page.h) opened in a real browser.

Debian's chromium, headless, driven by python3-selenium through chromium-driver, opens each
page from file:// and checks what a reader would see:
  - no console error (the browser log at SEVERE level is empty);
  - the page's script ran to its end (body[data-drawn]);
  - the charts have drawn: in a screenshot of the page, the first chart's canvas holds
    coloured pixels (the curves), not only the white and grey of an empty plot;
  - the numbers in the grid page's tables are those of results.csv and summary.csv;
  - a running run's page reloads itself and then shows a later step, and stops reloading
    once the run has stopped;
  - a run folder with metrics.jsonl cut short and a grid with a failed, a missing and an
    unfinished run give pages that say so;
  - a ladder's page (./ablate --ladder) draws each claim's effect against compute in a
    chart of its own, its intervals as bars, with its least-squares line and slope, on an x
    axis over the rungs (not whole decades), and gives ladder.csv's effects in its tables;
  - ./report on grids whose runs all failed (no run folders), on a results.csv of garbage
    and on one naming ".." draws every page; a run whose checkpoint could not be saved
    has a page saying failed and why, which does not reload;
  - without uPlot, the page still has its tables, says how to get the charts, raises no error.

usage: pages_browser.py T TRAIN CORPUS   (T: the folder tests/cli_pages.sh made)
       pages_browser.py --screenshot PAGE OUT.png   (make grid-page-png)
Prints "ok   NAME" or "FAIL NAME: why" per check; exit 0 when all pass, 1 when one fails,
3 (with "skip: ..." on stdout) when chromium, chromium-driver or selenium is missing.
"""
import csv
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib

DRIVER = "/usr/bin/chromedriver"


def browser(height=2400):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        print("skip: browser tests: python3-selenium is not installed (scripts/deps.sh --browser)")
        sys.exit(3)
    if not os.path.exists(DRIVER) or not shutil.which("chromium"):
        print("skip: browser tests: chromium or chromium-driver is not installed (scripts/deps.sh --browser)")
        sys.exit(3)
    o = webdriver.ChromeOptions()
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,%d" % height, "--force-device-scale-factor=1", "--allow-file-access-from-files"]:
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=o, service=Service(DRIVER))


def png_pixels(data):
    """Width, height and rows of (r, g, b) from an 8-bit RGB or RGBA PNG (what chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "PNG of depth %d, colour type %d" % (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, [[tuple(r[x * bpp:x * bpp + 3]) for x in range(w)] for r in rows]


def pixels_in(shot, rect):
    """The screenshot's pixels and rect (x, y, w, h) clipped to it: px, x0, y0, x1, y1."""
    w, h, px = png_pixels(shot)
    return (px, max(0, int(rect["x"])), max(0, int(rect["y"])), min(w, int(rect["x"] + rect["width"])),
            min(h, int(rect["y"] + rect["height"])))


def coloured_pixels(shot, rect):
    """How many pixels inside rect (x, y, w, h) are clearly coloured: a curve, not the grid."""
    px, x0, y0, x1, y1 = pixels_in(shot, rect)
    return sum(1 for y in range(y0, y1) for x in range(x0, x1) if max(px[y][x]) - min(px[y][x]) > 80)


def column_runs(shot, rect):
    """Each column's longest vertical run of coloured pixels inside rect: an interval's bar
    is a long one, where the curves cross a column in a few pixels."""
    px, x0, y0, x1, y1 = pixels_in(shot, rect)
    runs = []
    for x in range(x0, x1):
        best = run = 0
        for y in range(y0, y1):
            run = run + 1 if max(px[y][x]) - min(px[y][x]) > 50 else 0
            best = max(best, run)
        runs.append(best)
    return runs


class Checks:
    def __init__(self):
        self.failed = 0

    def check(self, name, ok, why=""):
        print(("ok   %s" % name) if ok else ("FAIL %s: %s" % (name, why)))
        self.failed += 0 if ok else 1


def open_page(d, path):
    d.get("file://" + os.path.abspath(path))
    for _ in range(50):
        if d.execute_script("return document.body && document.body.getAttribute('data-drawn')"):
            break
        time.sleep(0.1)
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def first_chart(d):
    """The first chart's canvas, scrolled into view: its rect on the screen, or None."""
    return d.execute_script("var c = document.querySelector('.chart canvas'); if (!c) return null;"
                            "c.scrollIntoView(); var r = c.getBoundingClientRect();"
                            "return {x: r.x, y: r.y, width: r.width, height: r.height};")


def page_basics(c, d, name, path, chart=True):
    errors = open_page(d, path)
    c.check("%s: no console error" % name, not errors, "; ".join(e["message"] for e in errors)[:300])
    drawn = d.execute_script("return document.body.getAttribute('data-drawn')")
    c.check("%s: the script ran to its end" % name, drawn == "1", "body[data-drawn] is %r" % drawn)
    if not chart:
        return
    rect = first_chart(d)
    if not rect:
        c.check("%s: a chart has drawn" % name, False, "no canvas on the page")
        return
    n = coloured_pixels(d.get_screenshot_as_png(), rect)
    c.check("%s: a chart has drawn (%d coloured pixels in its canvas)" % (name, n), n > 300,
            "the canvas is blank in the screenshot")


def cells(d, table_class, cols):
    return d.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('table.%s tbody tr'), function (r) {"
        "return [%s]; });" % (table_class, ",".join(("r.cells[%d].textContent" % k) if k >= 0 else
                                                   ("r.cells[r.cells.length - %d].textContent" % -k) for k in cols)))


def grid_numbers(c, d, grid):
    with open(os.path.join(grid, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    head = rows[0].keys() if rows else []
    col = list(head).index("final_val_bpb")
    shown = {r[0]: r[1] for r in cells(d, "runs", [0, col])}
    want = {r["run"]: ("%.4f" % float(r["final_val_bpb"])) if r["final_val_bpb"] else "-" for r in rows}
    c.check("grid: the runs table's final val bpb equal results.csv", shown == want,
            "page %s, results.csv %s" % (sorted(shown.items())[:3], sorted(want.items())[:3]))
    with open(os.path.join(grid, "summary.csv")) as f:
        rows = list(csv.DictReader(f))
    k = list(rows[0].keys()).index("mean")  # the page's columns start as summary.csv's do
    shown = {r[0]: (r[1], r[2]) for r in cells(d, "summary", [0, k, k + 1])}
    want = {r["point"]: ("%.4f" % float(r["mean"]), "%.4f" % float(r["sd"])) for r in rows}
    c.check("grid: the summary table's mean and sd equal summary.csv", shown == want,
            "page %s, summary.csv %s" % (sorted(shown.items())[:2], sorted(want.items())[:2]))
    # sorting by mean puts the smallest mean first
    d.execute_script("Array.prototype.filter.call(document.querySelectorAll('table.summary th'),"
                     "function (h) { return h.textContent === 'mean'; })[0].click();")
    first = cells(d, "summary", [0])[0][0]
    best = min(rows, key=lambda r: float(r["mean"]))["point"]
    c.check("grid: the summary sorts by mean", first == best, "first row %s, smallest mean %s" % (first, best))


def links_resolve(c, d, name, base):
    hrefs = d.execute_script("return Array.prototype.map.call(document.querySelectorAll('a'), function (a) {"
                             "return decodeURIComponent(a.href); });")
    bad = [h for h in hrefs if not (h.startswith("file://") and os.path.isfile(h[len("file://"):]))]
    c.check("%s: %d links, each to a page that exists" % (name, len(hrefs)), hrefs and not bad, "broken: %s" % bad[:3])


def text_of(d, css):
    return d.execute_script("var e = document.querySelector(%r); return e ? e.textContent : '';" % css)


def running(c, d, T, train, corpus):
    """A run trained now: its page says running, reloads, shows a later step; then stops reloading."""
    out = os.path.join(T, "live")
    page = os.path.join(out, "index.html")
    p = subprocess.Popen([train, "--steps", "1000000", "--eval_every", "100", "--eval_batches", "1", "--log_every",
                          "100", "--layers", "1", "--d_model", "32", "--heads", "2", "--context", "32", "--threads",
                          "1", "--sample_length", "0", "--out", out, corpus],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if os.path.exists(page):
                break
            time.sleep(0.1)
        open_page(d, page)
        first = text_of(d, "#status")
        c.check("live: the page says running, step N of M", first.startswith("running, step ")
                and first.endswith(" of 1000000"), "status %r" % first)
        d.execute_script("window.notReloaded = true;")
        later = first
        for _ in range(120):  # the page reloads every 4 s
            time.sleep(0.1)
            if d.execute_script("return window.notReloaded !== true && document.body.getAttribute('data-drawn')"):
                later = text_of(d, "#status")
                break
        step = lambda s: int(s.split()[2]) if s.startswith("running, step ") else -1
        c.check("live: the page reloaded itself and shows a later step", step(later) > step(first) >= 0,
                "before %r, after %r" % (first, later))
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
    open_page(d, page)
    stopped = text_of(d, "#status")
    d.execute_script("window.notReloaded = true;")
    time.sleep(5)
    still = d.execute_script("return window.notReloaded === true")
    c.check("live: once stopped, the page says so and no longer reloads", stopped.startswith("interrupted at step")
            and still, "status %r, reloaded: %s" % (stopped, not still))


def main():
    if sys.argv[1] == "--screenshot":
        d = browser(1500)
        try:
            open_page(d, sys.argv[2])
            d.save_screenshot(sys.argv[3])
        finally:
            d.quit()
        return 0
    T, train, corpus = sys.argv[1:4]
    c = Checks()
    d = browser()
    try:
        page_basics(c, d, "run", os.path.join(T, "run/index.html"))
        conf = cells(d, "config", [0, 1])
        c.check("run: the config table starts with the options that differ",
                conf[:2] == [["layers", "1"], ["d_model", "32"]], "first rows %s" % conf[:2])
        c.check("run: the samples are shown", len(text_of(d, "#samples")) > 50, "no sample text")
        c.check("run: the spectrum's chart is on the page", "Spectrum" in text_of(d, "body"), "no spectrum section")
        prov = cells(d, "provenance", [0, 1, 2])
        c.check("run: where it ran (provenance.json's segment, from step 0, its products and threads)",
                len(prov) == 1 and prov[0][0] == "0" and prov[0][1].startswith(("fp32: OpenBLAS ", "bf16: "))
                and prov[0][2].isdigit(), "rows %s" % prov)
        page_basics(c, d, "grid", os.path.join(T, "grid/index.html"))
        grid_numbers(c, d, os.path.join(T, "grid"))
        kernels = text_of(d, "ul.kernels")
        labels = set(r[0] for r in cells(d, "runs", [-2]))
        c.check("grid: the runs table names where each run ran, with the legend",
                labels == {"K1"} and kernels.startswith("K1: ") and "thread" in kernels, "cells %s, legend %r" % (labels, kernels[:120]))
        links_resolve(c, d, "grid", T)
        page_basics(c, d, "report", os.path.join(T, "report.html"))
        links_resolve(c, d, "report", T)
        groups = set(r[0] for r in cells(d, "report", [0]))
        c.check("report: runs grouped by the options that differ", groups == {"d_model=32", "d_model=48"},
                "groups %s" % groups)
        where = set(r[0] for r in cells(d, "report", [-1]))
        c.check("report: each run's kernel (provenance.json), with the legend",
                where == {"K1"} and text_of(d, "ul.kernels").startswith("K1: "), "cells %s" % where)
        page_basics(c, d, "cut", os.path.join(T, "cut/index.html"))
        notes = text_of(d, "#notes")
        c.check("cut: the page says metrics.jsonl was cut short", "metrics.jsonl: 1 line not read" in notes,
                "notes %r" % notes[:200])
        page_basics(c, d, "broken grid", os.path.join(T, "broken/index.html"))
        notes = text_of(d, "#notes")
        c.check("broken grid: the page names the failed, missing and unfinished runs",
                "failed" in notes and "no run folder" in notes and "stopped, step" in notes, "notes %r" % notes[:300])
        page_basics(c, d, "odd report", os.path.join(T, "odd-report.html"))
        states = [r[0] for r in cells(d, "report", [3])]
        c.check("odd report: the failed runs are listed as failed", states.count("failed") >= 3,
                "states %s" % states[:6])
        for g in ("allfailed", "garbage-grid", "dots-grid"):
            page_basics(c, d, g, os.path.join(T, g, "index.html"), chart=False)
        c.check("dots-grid: the rows naming .. and . are left out and said",
                "not a run's name" in text_of(d, "#notes"), "notes %r" % text_of(d, "#notes")[:200])
        page_basics(c, d, "failed run", os.path.join(T, "failed/index.html"))
        st = text_of(d, "#status")
        c.check("failed run: the page says failed, and why", st.startswith("failed at step ") and "cannot create" in st,
                "status %r" % st)
        d.execute_script("window.notReloaded = true;")
        time.sleep(5)
        c.check("failed run: the page does not reload", d.execute_script("return window.notReloaded === true"),
                "it reloaded")
        page_basics(c, d, "ladder", os.path.join(T, "ladder/index.html"))
        with open(os.path.join(T, "ladder", "ladder.csv")) as f:
            rows = list(csv.DictReader(f))
        body = text_of(d, "body")
        want = ["%+.4f" % float(r["effect"]) for r in rows]
        claims = sorted(set(r["claim"] for r in rows))
        c.check("ladder: the page's tables give ladder.csv's effects, a rung each", len(rows) == 2 * len(claims)
                and all(w in body for w in want) and "slope:" in body, "effects %s, rows %d" % (want, len(rows)))
        titles = d.execute_script("return Array.prototype.map.call(document.querySelectorAll('.chart'),"
                                  "function (c) { return c.querySelector('h3').textContent; });")
        c.check("ladder: a chart per claim, each titled by it", len(claims) == 2 and sorted(titles) == claims,
                "claims %s, charts %s" % (claims, titles))
        legends = d.execute_script("var o = {}; Array.prototype.forEach.call(document.querySelectorAll('.chart'),"
                                   "function (c) { o[c.querySelector('h3').textContent] = c.textContent; }); return o;")
        lines = {}
        for r in rows:
            if r["fit"]:
                lines[r["claim"]] = "least squares: slope %+.4f [%+.4f, %+.4f] per decade" % (
                    float(r["slope"]), float(r["slope_low"]), float(r["slope_high"]))
        runs = column_runs(d.get_screenshot_as_png(), first_chart(d))
        c.check("ladder: each interval is a vertical bar at its rung (%d pixels)" % max(runs), max(runs) >= 40,
                "no column holds a run of 40 coloured pixels")
        # the rungs (FLOPs 2x apart) spread over the chart: a log axis over whole decades put
        # them within a third of its width
        bars = [x / len(runs) for x, r in enumerate(runs) if r >= 15]
        lo, hi = (min(bars), max(bars)) if bars else (1, 0)
        c.check("ladder: the x axis spans the rungs, not whole decades (bars from %.2f to %.2f of the width)" % (
                lo, hi), lo < 0.3 and hi > 0.75, "the rungs sit in a corner")
        c.check("ladder: each chart draws its claim's least-squares line, the slope and interval as ladder.csv's",
                len(lines) == 2 and all(w in legends.get(k, "") for k, w in lines.items()),
                "lines %s, legends %s" % (lines, legends))
        page_basics(c, d, "no uPlot", os.path.join(T, "nolib/index.html"), chart=False)
        c.check("no uPlot: the page has its tables and says how to get the charts",
                "make uplot" in text_of(d, "#nolib") and len(cells(d, "config", [0])) > 10, "no notice or table")
        running(c, d, T, train, corpus)
    finally:
        d.quit()
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
