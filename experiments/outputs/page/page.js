/* page.js: what draws a run's, a grid's and ./report's index.html
 * (experiments/outputs/page.h). The page holds its data as JSON in
 * <script id="data">, written by the commands; this script turns it into
 * tables and, when uPlot is inlined before it, charts. It needs no network
 * and works from file://. */
"use strict";
(function () {
  var D = JSON.parse(document.getElementById("data").textContent);
  var app = document.getElementById("app");
  var charts = typeof uPlot !== "undefined";
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                "#bcbd22", "#7f7f7f"];
  /* what the reader chose (x axis, log-x, toggles) survives the reloads of a running run */
  var KEY = "attnlab:" + location.pathname;
  var ui = {};
  try { ui = JSON.parse(sessionStorage.getItem(KEY) || "{}") || {}; } catch (err) { ui = {}; }
  function save() { try { sessionStorage.setItem(KEY, JSON.stringify(ui)); } catch (err) { /* private mode */ } }

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === "text") e.textContent = attrs[k];
      else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  function add(parent, e) { parent.appendChild(e); return e; }
  function fmt(x, digits) {
    if (x === null || x === undefined || x === "" || isNaN(+x)) return "-";
    return (+x).toFixed(digits === undefined ? 4 : digits);
  }
  function signed(x) { return x === "" || isNaN(+x) ? "-" : (+x >= 0 ? "+" : "") + fmt(x); }
  function color(i) { return COLORS[i % COLORS.length]; }
  function fade(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  /* CSV as ./ablate writes it: quoted fields may hold commas and quotes */
  function parseCSV(text) {
    var rows = [], row = [], f = "", q = false;
    for (var i = 0; i < (text || "").length; i++) {
      var c = text[i];
      if (q) {
        if (c === '"' && text[i + 1] === '"') { f += '"'; i++; }
        else if (c === '"') q = false;
        else f += c;
      } else if (c === '"') q = true;
      else if (c === ",") { row.push(f); f = ""; }
      else if (c === "\n") { row.push(f); rows.push(row); row = []; f = ""; }
      else if (c !== "\r") f += c;
    }
    if (f !== "" || row.length) { row.push(f); rows.push(row); }
    if (!rows.length) return [];
    var head = rows[0];
    return rows.slice(1).map(function (r) {
      var o = {};
      head.forEach(function (h, j) { o[h] = r[j] === undefined ? "" : r[j]; });
      return o;
    });
  }

  /* A chart. series: [{label, x, y, color, width, dash, faint, show, band: [loIdx, hiIdx]}]
   * on one x axis (joined, gaps spanned). opts: xlabel, ylabel, logx, logy, legend, height. */
  /* an x tick's number: large ones (FLOPs, tokens) as 4.7e13, not fourteen digits */
  function axisNumber(v) {
    if (v === null || v === undefined) return "";
    return Math.abs(v) >= 1e5 ? (+v.toPrecision(2)).toExponential().replace("e+", "e") : String(+v.toPrecision(6));
  }

  /* A log x axis over the data, not over whole decades (rungs within one decade would sit
   * in a corner): padded by a tenth of the data's span in decades, at least 0.05 of one. */
  function logRange(u, lo, hi) {
    if (!(lo > 0) || !(hi > 0)) return [1, 10];
    var pad = Math.pow(10, Math.max(0.05, 0.1 * Math.log10(hi / lo)));
    return [lo / pad, hi * pad];
  }

  /* the log axis's ticks at 1 to 9 times a power of ten inside the range, each with its grid
   * line; labels at 1, 2 and 5 times one (at 1 alone where those would crowd the axis, at
   * every tick where they leave fewer than two) */
  function logSplits(u, axis, lo, hi) {
    var out = [];
    for (var e = Math.floor(Math.log10(lo)); Math.pow(10, e) <= hi; e++)
      for (var m = 1; m <= 9; m++) {
        var v = +(m * Math.pow(10, e)).toPrecision(12);
        if (v >= lo && v <= hi) out.push(v);
      }
    return out;
  }
  function logTicks(u, splits) {
    function labelled(keep) {
      return splits.map(function (v) {
        return keep.indexOf(Math.round(v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9)))) >= 0 ? v : null;
      });
    }
    function count(vs) { return vs.filter(function (v) { return v !== null; }).length; }
    var shown = labelled([1, 2, 5]);
    if (count(shown) > u.width / 70) shown = labelled([1]);
    return count(shown) >= 2 ? shown : splits;
  }

  function chart(box, title, series, opts) {
    opts = opts || {};
    var wrap = add(box, el("div", {"class": "chart"}, [el("h3", {text: title})]));
    if (!charts) { add(wrap, el("p", {"class": "note", text: D.nolib})); return null; }
    var pairs = series.map(function (s) { return [s.x, s.y.map(function (v) { return v === null || isNaN(v) ? null : v; })]; });
    var data = pairs.length ? uPlot.join(pairs) : [[]];
    if (opts.logx) {
      /* a log axis takes positive x only */
      var keep = data[0].map(function (x) { return x > 0; });
      data = data.map(function (col) { return col.filter(function (v, i) { return keep[i]; }); });
    }
    var s = [{label: opts.xlabel || "step"}];
    series.forEach(function (x, i) {
      s.push({label: x.label, stroke: x.faint ? fade(x.color || color(i), 0.35) : (x.color || color(i)),
              width: x.width || (x.faint ? 1 : 2), dash: x.dash, spanGaps: true, show: x.show !== false,
              points: {show: x.points === true}, value: function (u, v) { return v === null ? "-" : fmt(v, opts.digits); }});
      /* an interval's end: a mark, no line joining it to the next x's (the whisker below) */
      if (x.whisker) s[s.length - 1].paths = function () { return null; };
    });
    /* each interval (a pair of series marked whisker: [low, high] by index) as a vertical bar
     * at its x, as the PNGs draw it */
    function whiskers(u) {
      series.forEach(function (x, i) {
        if (!x.whisker || x.whisker[0] !== i || !u.series[i + 1].show) return;
        var lo = u.data[i + 1], hi = u.data[x.whisker[1] + 1], ctx = u.ctx;
        ctx.save();
        ctx.strokeStyle = s[i + 1].stroke;
        ctx.lineWidth = 2 * (window.devicePixelRatio || 1);
        ctx.setLineDash([]);
        for (var j = 0; j < u.data[0].length; j++) {
          if (lo[j] == null || hi[j] == null) continue; /* null or undefined: no interval at this x */
          var px = u.valToPos(u.data[0][j], "x", true);
          ctx.beginPath();
          ctx.moveTo(px, u.valToPos(lo[j], "y", true));
          ctx.lineTo(px, u.valToPos(hi[j], "y", true));
          ctx.stroke();
        }
        ctx.restore();
      });
    }
    var bands = [];
    series.forEach(function (x) {
      if (x.band) bands.push({series: [x.band[1] + 1, x.band[0] + 1], fill: fade(x.color, 0.15)});
    });
    var width = opts.width || Math.max(360, Math.min(1100, box.clientWidth || 900));
    var u = new uPlot({
      width: width, height: opts.height || 320, series: s, bands: bands,
      legend: {show: opts.legend !== false},
      scales: {x: opts.logx ? {time: false, distr: 3, range: logRange} : {time: false, distr: 1}, y: {distr: opts.logy ? 3 : 1}},
      axes: [{label: opts.xlabel || "step", values: function (u, vs) { return vs.map(axisNumber); },
              splits: opts.logx ? logSplits : undefined, filter: opts.logx ? logTicks : undefined},
             {label: opts.ylabel || "", size: 70, values: function (u, vs) { return vs.map(function (v) { return String(+v.toPrecision(3)); }); }}],
      hooks: {setCursor: [function (u) { if (opts.onCursor) opts.onCursor(u); }], draw: [whiskers]}
    }, data, wrap);
    return u;
  }

  function table(rows, head, opts) {
    opts = opts || {};
    var t = el("table", {"class": opts.cls || ""});
    var thead = add(t, el("thead")), tr = add(thead, el("tr"));
    var body = add(t, el("tbody"));
    var dir = {};
    head.forEach(function (h, j) {
      var th = add(tr, el("th", {text: h.label || h}));
      if (opts.sortable && !h.nosort) {
        th.className = "sortable";
        th.title = "sort";
        th.addEventListener("click", function () {
          dir[j] = -(dir[j] || -1);
          var rs = Array.prototype.slice.call(body.rows);
          rs.sort(function (a, b) {
            var x = a.cells[j].getAttribute("data-v"), y = b.cells[j].getAttribute("data-v");
            var nx = parseFloat(x), ny = parseFloat(y);
            if (!isNaN(nx) && !isNaN(ny)) return dir[j] * (nx - ny);
            if (isNaN(nx) !== isNaN(ny)) return isNaN(nx) ? 1 : -1;
            return dir[j] * String(x).localeCompare(String(y));
          });
          rs.forEach(function (r) { body.appendChild(r); });
        });
      }
    });
    rows.forEach(function (r) {
      var row = add(body, el("tr", r.cls ? {"class": r.cls} : {}));
      r.cells.forEach(function (c) {
        var td = add(row, el("td"));
        if (c && typeof c === "object" && c.node) td.appendChild(c.node);
        else td.textContent = c && typeof c === "object" ? c.text : (c === undefined || c === null ? "-" : c);
        var v = c && typeof c === "object" ? c.v : c;
        td.setAttribute("data-v", v === undefined || v === null ? "" : v);
        if (c && typeof c === "object" && c.cls) td.className = c.cls;
      });
    });
    return t;
  }

  /* an interval as a bar on a shared scale [lo, hi], a line at ref */
  function bar(low, high, mid, scale, ref) {
    var W = 110, H = 14;
    var x = function (v) { return (v - scale[0]) / (scale[1] - scale[0] || 1) * (W - 8) + 4; };
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("class", "bar");
    function line(x1, y1, x2, y2, stroke, w) {
      var l = document.createElementNS(ns, "line");
      l.setAttribute("x1", x1); l.setAttribute("y1", y1); l.setAttribute("x2", x2); l.setAttribute("y2", y2);
      l.setAttribute("stroke", stroke); l.setAttribute("stroke-width", w);
      svg.appendChild(l);
    }
    if (ref !== null && !isNaN(ref)) line(x(ref), 0, x(ref), H, "#888", 1);
    if (!isNaN(low) && !isNaN(high)) line(x(low), H / 2, x(high), H / 2, "#1f77b4", 4);
    if (!isNaN(mid)) line(x(mid), 2, x(mid), H - 2, "#000", 2);
    return svg;
  }
  function scaleOf(vals) {
    var v = vals.filter(function (x) { return !isNaN(x); });
    if (!v.length) return [0, 1];
    var lo = Math.min.apply(null, v), hi = Math.max.apply(null, v), pad = (hi - lo) * 0.05 || 0.01;
    return [lo - pad, hi + pad];
  }
  function num(x) { return x === "" || x === undefined || x === null ? NaN : +x; }

  /* markdown tables and lines, as results.md holds them, into HTML */
  function markdown(text, box) {
    var lines = (text || "").split("\n"), i = 0;
    while (i < lines.length) {
      var l = lines[i];
      if (l.charAt(0) === "|") {
        var rows = [];
        for (; i < lines.length && lines[i].charAt(0) === "|"; i++)
          if (!/^\|[-|]+\|?$/.test(lines[i])) rows.push(lines[i].slice(1, -1).split("|").map(function (c) { return c.trim(); }));
        box.appendChild(table(rows.slice(1).map(function (r) { return {cells: r}; }), rows[0] || [], {sortable: true, cls: "md"}));
        continue;
      }
      if (l.slice(0, 2) === "- ") {
        var ul = add(box, el("ul"));
        for (; i < lines.length && lines[i].slice(0, 2) === "- "; i++) add(ul, el("li", {text: lines[i].slice(2)}));
        continue;
      }
      if (l.slice(0, 3) === "## ") add(box, el("h3", {text: l.slice(3)}));
      else if (l.trim()) add(box, el("p", {text: l}));
      i++;
    }
  }

  function header(title, sub) {
    add(app, el("h1", {text: title}));
    if (sub) add(app, el("p", {"class": "sub", text: sub}));
    if (!charts) add(app, el("p", {"class": "warn", id: "nolib", text: D.nolib}));
    if (D.notes && D.notes.length) {
      var box = add(app, el("div", {"class": "warn", id: "notes"}, [el("strong", {text: "Missing or incomplete:"})]));
      var ul = add(box, el("ul"));
      D.notes.forEach(function (n) { add(ul, el("li", {text: n})); });
    }
  }
  function section(title) {
    var s = add(app, el("section"));
    add(s, el("h2", {text: title}));
    return s;
  }
  function toggle(box, label, on, change) {
    var id = "t" + Math.random().toString(36).slice(2);
    var c = el("input", {type: "checkbox", id: id});
    c.checked = on;
    c.addEventListener("change", function () { change(c.checked); });
    add(box, el("label", {"for": id, "class": "toggle"}, [c, " " + label]));
    return c;
  }

  /* ------------------------------------------------------------ run page */
  function statusText(st) {
    if (!st) return "";
    if (st.state === "running") return "running, step " + st.step + " of " + st.steps;
    if (st.state === "done") return "done, " + st.step + " steps";
    if (st.state === "diverged") return "diverged at step " + st.step + " of " + st.steps;
    if (st.state === "interrupted") return "interrupted at step " + st.step + " of " + st.steps;
    if (st.state === "failed") return "failed at step " + st.step + " of " + st.steps + (st.why ? ": " + st.why : "");
    return "stopped at step " + st.step + " of " + st.steps + (st.why ? ": " + st.why : "");
  }

  function lossCharts(box, M, name) {
    var controls = add(box, el("div", {"class": "controls"}));
    var holder = add(box, el("div"));
    var wall = !!ui.wall, logx = !!ui.logx;
    function draw() {
      holder.textContent = "";
      var key = wall ? "time" : "step", vkey = wall ? "val_time" : "val_step";
      chart(holder, (name ? name + ": " : "") + "bits per byte", [
        {label: "train", x: M[key], y: M.train, color: color(0)},
        {label: "validation", x: M[vkey], y: M.val, color: color(1), points: true}
      ], {xlabel: wall ? "wall time (s)" : "step", ylabel: "bpb", logx: logx});
    }
    toggle(controls, "against wall time", wall, function (v) { ui.wall = wall = v; save(); draw(); });
    toggle(controls, "log x", logx, function (v) { ui.logx = logx = v; save(); draw(); });
    add(controls, el("span", {"class": "hint", text: "drag to zoom, double-click to reset"}));
    draw();
  }

  function spectrumChart(box, csv) {
    /* c(k) per layer: the mean over the heads of each layer */
    var rows = parseCSV(csv), layers = {};
    rows.forEach(function (r) {
      var L = r.layer, k = num(r.k), c = num(r.c);
      if (isNaN(k) || isNaN(c)) return;
      layers[L] = layers[L] || {};
      var a = layers[L][k] = layers[L][k] || [0, 0];
      a[0] += c; a[1]++;
    });
    var series = Object.keys(layers).map(function (L, i) {
      var ks = Object.keys(layers[L]).map(Number).sort(function (a, b) { return a - b; });
      return {label: "layer " + L, x: ks, y: ks.map(function (k) { return layers[L][k][0] / layers[L][k][1]; }), color: color(i)};
    });
    chart(box, "spectrum: c(k), the normalised cumulative singular values (mean over heads)", series,
          {xlabel: "k", ylabel: "c(k)", digits: 3});
  }

  function extrapolateChart(box, csv) {
    var rows = parseCSV(csv), by = {}, order = [];
    rows.forEach(function (r) {
      if (!by[r.label]) { by[r.label] = []; order.push(r.label); }
      by[r.label].push([num(r.length), num(r.bpb)]);
    });
    var series = order.map(function (l, i) {
      return {label: l, x: by[l].map(function (p) { return p[0]; }), y: by[l].map(function (p) { return p[1]; }), color: color(i), points: true};
    });
    chart(box, "extrapolation: bpb against length", series, {xlabel: "length (bytes)", ylabel: "bpb", logx: true});
  }

  function runPage() {
    var st = D.status || {};
    document.title = D.name + " - " + statusText(st);
    header(D.name, null);
    add(app, el("p", {id: "status", "class": "status " + (st.state || ""), text: statusText(st)}));
    var M = D.metrics;
    var s = section("Loss");
    if (!M.step.length) add(s, el("p", {"class": "note", text: "no metrics yet"}));
    else lossCharts(s, M, null);
    var last = M.val.length ? M.val[M.val.length - 1] : null;
    if (last !== null) add(s, el("p", {id: "lastval", text: "last validation: " + fmt(last) + " bpb at step " + M.val_step[M.val_step.length - 1]}));
    s = section("Learning rate and throughput");
    var row = add(s, el("div", {"class": "row"}));
    if (M.step.length) {
      chart(row, "learning rate", [{label: "lr", x: M.step, y: M.lr, color: color(2)}], {ylabel: "lr", digits: 6, height: 220, width: 520});
      chart(row, "tokens per second", [{label: "tok/s", x: M.step, y: M.tok_s, color: color(3)}], {ylabel: "tok/s", digits: 0, height: 220, width: 520});
    }
    s = section("Config");
    add(s, el("p", {"class": "hint", text: "options that differ from the defaults first"}));
    add(s, table(D.config.map(function (c) {
      return {cls: c.changed ? "changed" : "", cells: [c.name, c.value, c.def === null ? "-" : c.def, c.group]};
    }), ["option", "value", "default", "group"], {sortable: true, cls: "config"}));
    s = section("Samples");
    if (D.samples === null) add(s, el("p", {"class": "note", text: st.state === "running" ? "written at the end of the run" : "no samples.txt"}));
    else add(s, el("pre", {id: "samples", text: D.samples}));
    s = section("Where it ran");
    if (!D.provenance) add(s, el("p", {"class": "note", text: "not recorded (provenance.json: runs record it since it was added)"}));
    else add(s, table(D.provenance.map(function (g) {
      return {cells: [String(g.from_step), g.products || "-", String(g.threads), g.cpu || "-", g.compiled_for || "-",
                      g.compiler || "-", (g.onednn || "-") + " " + (g.onednn_isa || ""), (g.commit || "-").slice(0, 12) + (g.dirty ? "+dirty" : "")]};
    }), ["from step", "products", "threads", "CPU", "compiled for", "compiler", "oneDNN", "commit"], {cls: "provenance"}));
    if (D.spectrum) spectrumChart(section("Spectrum (./spectrum)"), D.spectrum);
    if (D.extrapolate) extrapolateChart(section("Extrapolation (./extrapolate)"), D.extrapolate);
    if (st.state === "running") setTimeout(function () { location.reload(); }, D.reload_ms || 5000);
  }

  /* ------------------------------------------------------------ grid page */
  function pointOf(name) { return name.replace(/,seed=[0-9]+$/, ""); }

  /* a point's mean curve and +-1 sd, over the steps all its curves reach */
  function meanCurve(runs) {
    var cs = runs.filter(function (r) { return r.val.length; });
    if (!cs.length) return null;
    var len = cs.reduce(function (a, r) { return Math.min(a, r.val.length); }, Infinity);
    var out = {x: [], mean: [], lo: [], hi: []};
    for (var j = 0; j < len; j++) {
      var v = cs.map(function (r) { return r.val[j]; }), m = v.reduce(function (a, b) { return a + b; }, 0) / v.length;
      var sd = v.length > 1 ? Math.sqrt(v.reduce(function (a, b) { return a + (b - m) * (b - m); }, 0) / (v.length - 1)) : NaN;
      out.x.push(cs[0].val_step[j]); out.mean.push(m);
      out.lo.push(isNaN(sd) ? null : m - sd); out.hi.push(isNaN(sd) ? null : m + sd);
    }
    return out;
  }

  function summaryTable(box, G) {
    var sum = parseCSV(G.summary_csv), axes = G.axes;
    var base = sum.filter(function (r) { return /^baseline/.test(r.point); })[0];
    var ref = base ? num(base.mean) : NaN;
    var sc = scaleOf(sum.map(function (r) { return num(r.low); }).concat(sum.map(function (r) { return num(r.high); })));
    var dsc = scaleOf(sum.map(function (r) { return num(r.diff_low); }).concat(sum.map(function (r) { return num(r.diff_high); }), [0]));
    var psc = scaleOf(sum.map(function (r) { return num(r.paired_low); }).concat(sum.map(function (r) { return num(r.paired_high); }), [0]));
    var paired = sum.some(function (r) { return r.paired_diff !== ""; });
    var head = ["point"].concat(axes, ["runs", "mean", "sd", {label: "95% interval (line: baseline)", nosort: true},
                "minus baseline", {label: "Welch 95%", nosort: true}]);
    var against = (sum.filter(function (r) { return r.paired_against; })[0] || {}).paired_against;
    if (paired) head = head.concat(["paired, minus " + against, {label: "paired 95%", nosort: true}, "pairs"]);
    var rows = sum.map(function (r) {
      var cells = [r.point].concat(axes.map(function (a) { return r[a]; }), [
        r.runs, {text: fmt(r.mean), v: r.mean, cls: "num mean"}, {text: fmt(r.sd), v: r.sd, cls: "num"},
        {node: bar(num(r.low), num(r.high), num(r.mean), sc, ref), v: r.low},
        {text: signed(r.minus_baseline), v: r.minus_baseline, cls: "num"},
        {node: bar(num(r.diff_low), num(r.diff_high), num(r.minus_baseline), dsc, 0), v: r.diff_low}]);
      if (paired) cells = cells.concat([{text: signed(r.paired_diff), v: r.paired_diff, cls: "num"},
        {node: bar(num(r.paired_low), num(r.paired_high), num(r.paired_diff), psc, 0), v: r.paired_low},
        r.pairs + (num(r.apart) ? " (" + r.apart + " apart)" : "")]);
      return {cells: cells};
    });
    add(box, table(rows, head, {sortable: true, cls: "summary"}));
  }

  function runsTable(box, G) {
    var res = parseCSV(G.results_csv), byName = {};
    G.runs.forEach(function (r) { byName[r.name] = r; });
    var head = ["run"].concat(G.axes, ["final val bpb", "best val bpb", "status", "tok/s", "params", "kernel", {label: "page", nosort: true}]);
    var K = kernelLabels(G.runs);
    var rows = res.map(function (r) {
      var run = byName[r.run], link = run && run.href ? el("a", {href: run.href, text: "open"}) : null;
      return {cls: r.status !== "done" ? "bad" : "", cells: [r.run].concat(G.axes.map(function (a) { return r[a]; }), [
        {text: fmt(r.final_val_bpb), v: r.final_val_bpb, cls: "num final"}, {text: fmt(r.best_val_bpb), v: r.best_val_bpb, cls: "num"},
        r.status, {text: r.tok_s || "-", v: r.tok_s, cls: "num"}, r.params, K.cell(run), link ? {node: link, v: ""} : "-"])};
    });
    add(box, table(rows, head, {sortable: true, cls: "runs"}));
    K.legend(box);
  }

  /* where runs ran (provenance.json): K1, K2, ... in order of first use, a
   * cell per run and the legend; "mixed" a run resumed under another kernel */
  function kernelLabels(runs) {
    var kinds = [];
    runs.forEach(function (r) { if (r && r.kernel && r.kernel !== "mixed" && kinds.indexOf(r.kernel) < 0) kinds.push(r.kernel); });
    return {
      cell: function (r) {
        if (!r || !r.kernel) return {text: "-", v: ""};
        if (r.kernel === "mixed") return {text: "mixed", v: "mixed", cls: "bad"};
        var k = "K" + (kinds.indexOf(r.kernel) + 1);
        return {text: k, v: k};
      },
      legend: function (box) {
        if (!kinds.length) return;
        var ul = add(box, el("ul", {"class": "kernels"}));
        kinds.forEach(function (k, i) { add(ul, el("li", {text: "K" + (i + 1) + ": " + k})); });
        if (kinds.length > 1) add(box, el("p", {"class": "note", text: "runs ran under " + kinds.length + " kernels: a seed pair across two is left out of the paired intervals unless ./ablate --mixed-kernels"}));
      }
    };
  }

  /* the curves: a mean and band per point, each run faint, a toggle for each */
  function gridCurves(box, runs) {
    var points = [], by = {};
    runs.forEach(function (r) {
      var p = pointOf(r.name);
      if (!by[p]) { by[p] = []; points.push(p); }
      by[p].push(r);
    });
    var series = [], handles = {};
    points.forEach(function (p, i) {
      var m = meanCurve(by[p]);
      if (!m) return;
      var c = color(i), first = series.length;
      var hidden = ui.hide && ui.hide[p];
      series.push({label: p, x: m.x, y: m.mean, color: c, show: !hidden});
      if (by[p].length > 1) {
        series.push({label: p + " -1 sd", x: m.x, y: m.lo, color: c, faint: true, show: !hidden});
        series.push({label: p + " +1 sd", x: m.x, y: m.hi, color: c, faint: true, show: !hidden, band: [first + 1, first + 2]});
      }
      handles[p] = {idx: [], color: c};
      for (var k = first; k < series.length; k++) handles[p].idx.push(k + 1);
    });
    runs.forEach(function (r) {
      if (!r.val.length) return;
      var p = pointOf(r.name), c = handles[p] ? handles[p].color : "#888";
      handles["run:" + r.name] = {idx: [series.length + 1]};
      series.push({label: r.name, x: r.val_step, y: r.val, color: c, faint: true, width: 1, dash: [4, 3],
                   show: !!(ui.show && ui.show[r.name])});
    });
    var read = add(box, el("p", {"class": "readout", id: "readout", text: "hover the chart for values"}));
    var u = chart(box, "validation bpb: each point's mean over its seeds, +-1 sd shaded", series, {
      ylabel: "val bpb", legend: false, height: 380,
      onCursor: function (u) {
        var i = u.cursor.idx;
        if (i === null || i === undefined) return;
        var parts = ["step " + u.data[0][i]];
        points.forEach(function (p) {
          var h = handles[p];
          if (h && u.series[h.idx[0]].show && u.data[h.idx[0]][i] !== null) parts.push(p + " " + fmt(u.data[h.idx[0]][i]));
        });
        read.textContent = parts.join("   ");
      }
    });
    var pts = add(box, el("div", {"class": "toggles"}, [el("strong", {text: "points: "})]));
    points.forEach(function (p) {
      if (!handles[p]) { add(pts, el("span", {"class": "note", text: p + " (no curve) "})); return; }
      var lab = toggle(pts, p, !(ui.hide && ui.hide[p]), function (on) {
        ui.hide = ui.hide || {}; ui.hide[p] = !on; save();
        if (u) handles[p].idx.forEach(function (k) { u.setSeries(k, {show: on}); });
      });
      lab.parentNode.style.borderLeft = "4px solid " + handles[p].color;
    });
    var rs = add(box, el("details", {"class": "toggles"}, [el("summary", {text: "runs (each seed's curve, dashed)"})]));
    runs.forEach(function (r) {
      if (!handles["run:" + r.name]) return;
      toggle(rs, r.name, !!(ui.show && ui.show[r.name]), function (on) {
        ui.show = ui.show || {}; ui.show[r.name] = on; save();
        if (u) u.setSeries(handles["run:" + r.name].idx[0], {show: on});
      });
    });
  }

  /* the effects table and the verdicts, from results.md */
  function effects(box, md) {
    var lines = (md || "").split("\n"), out = [], on = false;
    lines.forEach(function (l) {
      if (/^\| axis \| from \|/.test(l)) on = true;
      else if (on && l.charAt(0) !== "|") on = false;
      if (on) out.push(l);
    });
    if (out.length) markdown(out.join("\n"), box);
    else add(box, el("p", {"class": "note", text: "no effects table: results.md has one when every point has several seeds (--seeds) and an axis has two values or more"}));
    var v = lines.filter(function (l) { return /^verdict: /.test(l); });
    if (v.length) {
      var ul = add(box, el("ul", {"class": "verdicts"}));
      v.forEach(function (l) { add(ul, el("li", {text: l})); });
    }
  }

  function gridPage() {
    var G = D;
    /* the axes: results.csv's columns between the run's name and its value */
    var first = (G.results_csv || "").split("\n")[0].split(",");
    G.axes = first.indexOf("final_val_bpb") > 1 ? first.slice(1, first.indexOf("final_val_bpb")) : [];
    header(G.name, G.runs.length + " runs; axes: " + (G.axes.join(", ") || "-"));
    if (G.summary_csv) summaryTable(section("Summary (sortable: click a column)"), G);
    gridCurves(section("Curves"), G.runs);
    if (G.results_md) effects(section("Effects"), G.results_md);
    var s = section("Every run");
    if (G.results_csv) runsTable(s, G);
    var listed = {};
    parseCSV(G.results_csv).forEach(function (r) { listed[r.run] = true; });
    var ul = add(s, el("ul", {"class": "links"}));
    G.runs.forEach(function (r) {
      if (listed[r.name]) return; /* in the table above */
      add(ul, el("li", {}, [r.href ? el("a", {href: r.href, text: r.name}) : el("span", {text: r.name}), " " + r.state]));
    });
    if (G.results_md) {
      var d = add(app, el("details", {}, [el("summary", {text: "results.md"})]));
      markdown(G.results_md, d);
    }
  }

  /* ------------------------------------------------------------ report page */
  function reportPage() {
    var runs = D.runs;
    header("report: " + runs.length + " runs" + (D.grids.length ? ", " + D.grids.length + " grids" : ""), null);
    /* the options whose values differ between the runs group them */
    /* a run without a folder (failed, missing) has no options: it is grouped by what it has */
    runs.forEach(function (r) { r.config = r.config || {}; r.val = r.val || []; r.val_step = r.val_step || []; });
    var keys = [], seen = {};
    runs.forEach(function (r) { Object.keys(r.config).forEach(function (k) { if (!seen[k]) { seen[k] = 1; keys.push(k); } }); });
    keys = keys.filter(function (k) {
      return runs.some(function (r) { return String(r.config[k]) !== String(runs[0].config[k]); });
    });
    runs.forEach(function (r) {
      r.group = keys.filter(function (k) { return k in r.config; })
                    .map(function (k) { return k + "=" + r.config[k]; }).join(", ") || "(all alike)";
    });
    runs.sort(function (a, b) { return a.group < b.group ? -1 : a.group > b.group ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0; });
    var groups = [], groupIndex = {};
    runs.forEach(function (r) { if (!(r.group in groupIndex)) { groupIndex[r.group] = groups.length; groups.push(r.group); } });
    if (D.grids.length) {
      var gs = section("Grids");
      var ul = add(gs, el("ul", {"class": "links"}));
      D.grids.forEach(function (g) { add(ul, el("li", {}, [el("a", {href: g.href, text: g.name}), " " + g.runs + " runs"])); });
    }
    var s = section("Runs, grouped by the options that differ: " + (keys.join(", ") || "none"));
    var K = kernelLabels(runs);
    add(s, table(runs.map(function (r) {
      var last = r.val.length ? r.val[r.val.length - 1] : null;
      return {cells: [{text: r.group, v: r.group}, r.href ? {node: el("a", {href: r.href, text: r.name}), v: r.name} : r.name,
                      {text: fmt(last), v: last, cls: "num final"}, r.state, K.cell(r)]};
    }), ["group", "run", "last val bpb", "state", "kernel"], {sortable: true, cls: "report"}));
    K.legend(s);
    var series = [];
    runs.forEach(function (r) {
      var g = groupIndex[r.group];
      if (r.val.length) series.push({label: r.name, x: r.val_step, y: r.val, color: color(g), run: r, points: true});
    });
    var c = section("Validation bpb");
    var u = chart(c, "validation bpb, one colour per group", series, {ylabel: "val bpb"});
    var t = add(c, el("div", {"class": "toggles"}, [el("strong", {text: "groups: "})]));
    groups.forEach(function (g, gi) {
      var lab = toggle(t, g, true, function (on) {
        series.forEach(function (x, i) { if (x.run.group === g && u) u.setSeries(i + 1, {show: on}); });
      });
      lab.parentNode.style.borderLeft = "4px solid " + color(gi);
    });
  }

  /* ------------------------------------------------------------ ladder page */
  function ladderPage() {
    header("ladder: " + D.name, null);
    var rows = D.ladder_csv ? parseCSV(D.ladder_csv) : [];
    var claims = [];
    rows.forEach(function (r) { if (claims.indexOf(r.claim) < 0) claims.push(r.claim); });
    var s = section("Effect against compute");
    add(s, el("p", {"class": "hint", text: "a chart per claim, in its unit (bpb for ./ablate --ladder; c(T/4) or " +
                                            "singular values for ./spectrum --ladder): the effect A - B (below 0 " +
                                            "the claim holds) with its interval, and the least-squares line of the " +
                                            "pairs (dashed, its slope per decade in the legend), against training FLOPs"}));
    claims.forEach(function (c, i) {
      var mine = rows.filter(function (x) { return x.claim === c && !isNaN(num(x.flops)) && !isNaN(num(x.effect)); });
      mine.sort(function (a, b) { return num(a.flops) - num(b.flops); });
      var x = mine.map(function (r) { return num(r.flops); });
      var col = function (key) { return mine.map(function (r) { return num(r[key]); }); };
      if (!x.length) return;
      var series = [{label: "effect", x: x, y: col("effect"), color: color(i), points: true},
                    {label: "interval low", x: x, y: col("low"), color: fade(color(i), 0.5), points: true, whisker: [1, 2]},
                    {label: "interval high", x: x, y: col("high"), color: fade(color(i), 0.5), points: true, whisker: [1, 2]},
                    {label: "no effect", x: x, y: x.map(function () { return 0; }), color: "#999"}];
      /* the least-squares line of the pairs against log10 FLOPs (straight on the log axis),
       * its slope and 95% interval in the label, as ladder.png draws it */
      var fit = col("fit"), sl = mine[0];
      if (fit.some(function (v) { return !isNaN(v); }))
        series.push({label: "least squares: slope " + signed(sl.slope) + " [" + signed(sl.slope_low) + ", " +
                            signed(sl.slope_high) + "] per decade", x: x, y: fit, color: color(i), dash: [6, 4], width: 1});
      chart(s, c, series, {xlabel: "training FLOPs (log scale)", ylabel: "effect A - B", logx: true});
    });
    if (!rows.length) add(s, el("p", {"class": "note", text: "no rung has pairs yet"}));
    if (D.ladder_md) {
      var d = section("Tables");
      markdown(D.ladder_md, d);
    }
  }

  try {
    if (D.kind === "run") runPage();
    else if (D.kind === "ladder") ladderPage();
    else if (D.kind === "grid") gridPage();
    else reportPage();
    document.body.setAttribute("data-drawn", "1");
  } catch (err) {
    add(app, el("pre", {"class": "warn", text: "the page could not be drawn: " + err}));
    throw err;
  }
})();
