#!/usr/bin/env python3
"""Turns one benchmark run into the tables and plots of docs/benchmarks.md.

    TIMEBLOOM_BENCH_SIZES=1e6,1e7 cargo bench --bench filters
    python3 scripts/filter_new_bench.py
    python3 scripts/report.py > target/timebloom-bench/tables.md

Reads criterion's estimates (target/criterion/*/new/), the rates, sizes and
open times the bench wrote (target/timebloom-bench/results.json), and the
whole-process results (target/timebloom-bench/filter_new.json). Prints
Markdown tables with every target's ratio and PASS/MISS, and writes
docs/fpr-vs-load.svg and docs/lookup-vs-segments.svg (hand-written SVG, no
plotting library).

Per-key times are criterion's median time per iteration divided by the
iteration's keys (1024): medians, because the machine is shared and noisy.

Every measured false-positive rate is shown with its 95% Wilson score
interval, and a rate counts as missed only when the whole interval lies above
the configured rate (the same rule for timebloom and every peer).

A run made with TIMEBLOOM_BENCH_TIMINGS=off (rates, sizes and open times
only) is reported without criterion's estimates, whatever target/criterion
still holds from earlier runs:

    TIMEBLOOM_BENCH_TIMINGS=off TIMEBLOOM_BENCH_PARTS=single,load \
        TIMEBLOOM_BENCH_OUT=target/timebloom-bench/rates.json cargo bench --bench filters
    python3 scripts/report.py --results target/timebloom-bench/rates.json
"""

import argparse
import glob
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSIC = lambda p: -math.log(p) / math.log(2) ** 2


def wilson95(fp, n):
    """The 95% Wilson score interval of fp false positives among n negatives."""
    z = 1.96
    p = fp / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - half) / scale), (centre + half) / scale


def count(rate, n, fp=None):
    """The false-positive count behind a rate (results of older runs kept only the rate)."""
    return fp if fp is not None else round(rate * n)


def pct(v):
    return "%.4g%%" % (100 * v)


def rate_text(fp, n):
    """`rate [lower, upper]` in percent."""
    lo, hi = wilson95(fp, n)
    return "%s [%s, %s]" % (pct(fp / n), pct(lo), pct(hi))


def missed(fp, n, p):
    """Missed only when the whole 95% interval lies above the configured rate."""
    return wilson95(fp, n)[0] > p


def load_criterion(target):
    """{(group, function, value): (median ns/key, lower, upper)}"""
    out = {}
    for bj in glob.glob(os.path.join(target, "criterion", "**", "new", "benchmark.json"),
                        recursive=True):
        with open(bj) as f:
            b = json.load(f)
        with open(os.path.join(os.path.dirname(bj), "estimates.json")) as f:
            e = json.load(f)
        per = (b.get("throughput") or {}).get("Elements", 1)
        m = e["median"]
        out[(b["group_id"], b["function_id"], b.get("value_str"))] = (
            m["point_estimate"] / per,
            m["confidence_interval"]["lower_bound"] / per,
            m["confidence_interval"]["upper_bound"] / per,
        )
    return out


def fmt_n(n):
    e = math.log10(n)
    return "1e%d" % round(e) if n >= 1000 and abs(e - round(e)) < 1e-9 else str(n)


def ns(v):
    return "—" if v is None else ("%.0f" % v if v >= 100 else "%.1f" % v)


def verdict(ok):
    return "**PASS**" if ok else "**MISS**"


class Report:
    def __init__(self, crit):
        self.crit = crit
        self.targets = []  # (target, configuration, ratio text, ok)

    def t(self, group, func, op):
        v = self.crit.get((group, func, op))
        return v[0] if v else None

    def target(self, what, conf, ratio, ok):
        self.targets.append((what, conf, ratio, ok))


# ---- SVG -------------------------------------------------------------------------

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def svg_panel(x0, y0, w, h, title, xlabel, ylabel, series, logy=False, hlines=(),
              xticks=None, ymin=None, ymax=None):
    """series: [(name, color, dash, [(x, y)])]; returns SVG elements."""
    pts = [p for s in series for p in s[3] if p[1] is not None and (p[1] > 0 or not logy)]
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts] + [v for v, _, _ in hlines]
    xmin, xmax = min(xs), max(xs)
    if logy:
        lo = math.floor(math.log10(ymin if ymin else min(ys)))
        hi = math.ceil(math.log10(ymax if ymax else max(ys)))
        fy = lambda v: (math.log10(max(v, 10 ** lo)) - lo) / (hi - lo)
        yt = [(10 ** k, "1e%d" % k) for k in range(lo, hi + 1)]
    else:
        lo, hi = (ymin if ymin is not None else 0), (ymax if ymax else max(ys) * 1.1)
        fy = lambda v: (v - lo) / (hi - lo)
        step = 10 ** math.floor(math.log10((hi - lo) / 4))
        while (hi - lo) / step > 8:
            step *= 2
        yt = [(lo + k * step, "%g" % (lo + k * step)) for k in range(int((hi - lo) / step) + 1)]
    L, R, T, B = 62, 12, 28, 42
    pw, ph = w - L - R, h - T - B
    X = lambda v: x0 + L + (v - xmin) / (xmax - xmin) * pw
    Y = lambda v: y0 + T + (1 - fy(v)) * ph
    el = ['<text x="%.1f" y="%.1f" font-size="13" text-anchor="middle" font-weight="bold">%s</text>'
          % (x0 + L + pw / 2, y0 + 17, title)]
    el.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>'
              % (x0 + L, y0 + T, pw, ph))
    for v, lab in yt:
        y = Y(v)
        el.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>'
                  % (x0 + L, y, x0 + L + pw, y))
        el.append('<text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s</text>'
                  % (x0 + L - 4, y + 4, lab))
    for v in (xticks or sorted(set(xs))):
        x = X(v)
        el.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>'
                  % (x, y0 + T, x, y0 + T + ph))
        el.append('<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%g</text>'
                  % (x, y0 + T + ph + 14, v))
    el.append('<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle">%s</text>'
              % (x0 + L + pw / 2, y0 + h - 8, xlabel))
    el.append('<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle" '
              'transform="rotate(-90 %.1f %.1f)">%s</text>'
              % (x0 + 14, y0 + T + ph / 2, x0 + 14, y0 + T + ph / 2, ylabel))
    for v, color, label in hlines:
        y = Y(v)
        el.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" '
                  'stroke-dasharray="2,3"/>' % (x0 + L, y, x0 + L + pw, y, color))
        el.append('<text x="%.1f" y="%.1f" font-size="10" fill="%s">%s</text>'
                  % (x0 + L + 4, y - 3, color, label))
    for i, (name, color, dash, data) in enumerate(series):
        d = [(X(x), Y(y)) for x, y in data if y is not None and (y > 0 or not logy)]
        if d:
            el.append('<polyline fill="none" stroke="%s" stroke-width="2" %s points="%s"/>'
                      % (color, 'stroke-dasharray="%s"' % dash if dash else "",
                         " ".join("%.1f,%.1f" % p for p in d)))
            for px, py in d:
                el.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>' % (px, py, color))
        ly = y0 + T + 14 + 15 * i
        lx = x0 + L + 10
        el.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" %s/>'
                  % (lx, ly - 4, lx + 20, ly - 4, color,
                     'stroke-dasharray="%s"' % dash if dash else ""))
        el.append('<text x="%.1f" y="%.1f" font-size="11">%s</text>' % (lx + 25, ly, name))
    return el


def svg_doc(w, h, elements, note):
    """The panels (h high) and a strip below them for `note`."""
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'viewBox="0 0 %d %d" font-family="sans-serif">\n'
            '<rect width="100%%" height="100%%" fill="white"/>\n%s\n'
            '<text x="%d" y="%d" font-size="10" fill="#666" text-anchor="end">%s</text>\n</svg>\n'
            % (w, h + 16, w, h + 16, "\n".join(elements), w - 6, h + 11, note))


# ---- sections ------------------------------------------------------------------------

PEERS = [("timebloom", "timebloom (1d, one segment)"),
         ("fastbloom-sip", "fastbloom 0.17 (default SipHash-1-3)"),
         ("fastbloom-xxh3", "fastbloom 0.17 (xxh3 via insert_hash)"),
         ("sbbf-xxh3", "sbbf-rs-safe 0.3 (xxh3)"),
         ("bloomfilter", "bloomfilter 3"),
         ("growable", "growable-bloom-filter 2"),
         ("hashset", "HashSet<u128> of xxh3-128"),
         ("floor", "floor (xxh3-128 + one 64-byte touch; batch: 16 hashed and prefetched first)"),
         ("floor-xxh3_64", "floor with xxh3-64 (reference)")]
ROWNAMES = {"timebloom": "timebloom", "fastbloom-sip": "fastbloom (SipHash-1-3)",
            "fastbloom-xxh3": "fastbloom (xxh3)", "sbbf-xxh3": "sbbf-rs-safe (xxh3)",
            "bloomfilter": "bloomfilter", "growable": "growable-bloom-filter",
            "hashset": "HashSet<u128> (xxh3-128)"}


def single(rep, res, out):
    for r in res:
        n, p = r["n"], r["fpr"]
        g = "single n=%s p=%s" % (fmt_n(n), p)
        rows = {x["filter"]: x for x in r["rows"]}
        t = lambda f, op: rep.t(g, f, op)
        out.append("\n#### One window, n = %s, configured rate %s\n" % (fmt_n(n), p))
        out.append("ns per key (criterion median, keys in cache, filter holding exactly n keys). "
                   "Rates over %d disjoint negatives.\n" % r["rows"][0]["negatives"])
        out.append("| filter | insert | positive lookup | negative lookup | insert (batch) "
                   "| positive (batch) | negative (batch) | bits/item | measured rate "
                   "[95% interval] | missed |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
        for key, label in PEERS:
            row = rows.get(ROWNAMES.get(key, ""), None)
            if key.startswith("floor"):
                look, lb = t(key, "lookup"), t(key, "lookup_batch")
                cells = [ns(t(key, "insert")), ns(look), ns(look), "",
                         ns(lb) if lb else "", ns(lb) if lb else ""]
            else:
                cells = [ns(t(key, "insert")), ns(t(key, "pos")), ns(t(key, "neg")),
                         ns(t(key, "insert_batch")) if key == "timebloom" else "",
                         ns(t(key, "pos_batch")) if key == "timebloom" else "",
                         ns(t(key, "neg_batch")) if key == "timebloom" else ""]
            if row:
                fp, neg = row["false_positives"], row["negatives"]
                rate = rate_text(fp, neg)
                okr = "**yes**" if missed(fp, neg, p) else "no"
                bits = "%.2f" % row["bits_per_item"]
            else:
                rate, okr, bits = "", "", ""
            out.append("| %s | %s | %s | %s | %s |" % (label, " | ".join(cells), bits, rate, okr))
        sys_neg = t("timebloom-sysclock", "neg")
        if sys_neg:
            out.append("\ntimebloom negative lookup through the system clock (what the CLI "
                       "uses): %s ns (manual clock: %s ns).\n" % (ns(sys_neg), ns(t("timebloom", "neg"))))
        seg = r["timebloom_segments"]
        out.append("timebloom segment: %d sub-filter(s), %s cells; sbbf-rs-safe built with %d "
                   "bits/key.\n" % (seg[0]["subfilters"], seg[0]["cells"], r["sbbf_bits_per_key"]))

        conf = "n=%s p=%s" % (fmt_n(n), p)
        fl_i, fl_l, fl_b = t("floor", "insert"), t("floor", "lookup"), t("floor", "lookup_batch")
        for op, fl in (("insert", fl_i), ("pos", fl_l), ("neg", fl_l)):
            for suffix in ("", "_batch"):
                v = t("timebloom", op + suffix)
                if v and fl:
                    rep.target("one window %s%s ≤ 1.5× floor" % (op, " (batch)" if suffix else ""),
                               conf, "%.2f×" % (v / fl), v <= 1.5 * fl)
                if suffix and op != "insert" and v and fl_b:
                    rep.target("one window %s (batch) ≤ 1.5× prefetching floor" % op, conf,
                               "%.2f×" % (v / fl_b), v <= 1.5 * fl_b)
        for op in ("insert", "pos", "neg"):
            fb = [x for x in (t("fastbloom-sip", op), t("fastbloom-xxh3", op)) if x]
            sb = t("sbbf-xxh3", op)
            for suffix in ("", "_batch"):
                v = t("timebloom", op + suffix)
                if v and fb:
                    rep.target("one window %s%s ≥ 2× faster than fastest fastbloom"
                               % (op, " (batch)" if suffix else ""), conf,
                               "%.2f×" % (min(fb) / v), min(fb) >= 2 * v)
                if v and sb:
                    rep.target("one window %s%s no slower than sbbf-rs-safe"
                               % (op, " (batch)" if suffix else ""), conf,
                               "%.2f× sbbf's time" % (v / sb), v <= sb)
        tb = rows["timebloom"]
        cl = CLASSIC(tb["measured_fpr"])
        rep.target("bits/item ≤ 1.1× classic at the measured rate", conf,
                   "%.2f / %.2f = %.3f×" % (tb["bits_per_item"], cl, tb["bits_per_item"] / cl),
                   tb["bits_per_item"] <= 1.1 * cl)
        for x in r["rows"]:
            fp, neg = x["false_positives"], x["negatives"]
            rep.target("measured rate not above configured (95%% interval): %s" % x["filter"],
                       conf, "%s vs %g%%" % (rate_text(fp, neg), 100 * p), not missed(fp, neg, p))
        if n >= 10_000_000:
            for op in ("insert", "pos", "neg"):
                a, b = t("timebloom", op), t("timebloom", op + "_batch")
                if a and b:
                    rep.target("batch ≥ 1.5× faster per key than single: one window %s" % op,
                               conf, "%.2f×" % (a / b), a >= 1.5 * b)


def windowed(rep, res, out):
    if not res:
        return
    out.append("\n#### Default tiers 7d/4w/12m, every segment populated\n")
    out.append("n = keys per monthly window (`expected_items_per_day` = ⌈n/31⌉, all of it "
               "inserted each day for 365 days of 2025); `contains` reads the 12 monthly "
               "segments; the floors read one line in each of the 12 monthly arrays (and of all "
               "23 arrays), each the size of the engine's segment. ns per key.\n")
    out.append("| n/month | keys | MiB | insert | insert (batch) | positive | positive (batch) "
               "| negative | negative (batch) | floor 12 | floor 12 (batch) | floor 23 | floor insert "
               "| measured rate [95% interval], configured 0.1% |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in res:
        n = r["n_per_month"]
        g = "windowed n=%s" % fmt_n(n)
        t = lambda f, op: rep.t(g, f, op)
        segs = len(r["segments"])
        f12 = t("floor", "lookup12")
        f12b = t("floor", "lookup12_batch")
        fall = t("floor", "lookup%d" % segs)
        fp, neg = r["false_positives"], r["negatives"]
        out.append("| %s | %d | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            fmt_n(n), r["keys"], r["bytes"] / 2 ** 20, ns(t("timebloom", "insert")),
            ns(t("timebloom", "insert_batch")), ns(t("timebloom", "pos")),
            ns(t("timebloom", "pos_batch")), ns(t("timebloom", "neg")),
            ns(t("timebloom", "neg_batch")), ns(f12), ns(f12b), ns(fall), ns(t("floor", "insert")),
            rate_text(fp, neg)))
        conf = "7d/4w/12m n=%s/month" % fmt_n(n)
        for suffix in ("", "_batch"):
            v = t("timebloom", "neg" + suffix)
            if v and f12:
                rep.target("23-segment negative lookup%s ≤ 2× floor (12 touches)"
                           % (" (batch)" if suffix else ""), conf, "%.2f×" % (v / f12), v <= 2 * f12)
            if suffix and v and f12b:
                rep.target("23-segment negative lookup (batch) ≤ 2× prefetching floor (12 touches)",
                           conf, "%.2f×" % (v / f12b), v <= 2 * f12b)
            if v and fall:
                rep.target("23-segment negative lookup%s ≤ 2× floor (23 touches)"
                           % (" (batch)" if suffix else ""), conf, "%.2f×" % (v / fall),
                           v <= 2 * fall)
        rep.target("measured rate not above configured (95% interval): timebloom 7d/4w/12m", conf,
                   "%s vs %g%%" % (rate_text(fp, neg), 100 * r["fpr"]),
                   not missed(fp, neg, r["fpr"]))
        if n >= 10_000_000:
            for op in ("insert", "pos", "neg"):
                a, b = t("timebloom", op), t("timebloom", op + "_batch")
                if a and b:
                    rep.target("batch ≥ 1.5× faster per key than single: 7d/4w/12m %s" % op,
                               conf, "%.2f×" % (a / b), a >= 1.5 * b)
    for r in res:
        grown = [s for s in r["segments"] if s["subfilters"] > 1]
        out.append("\nn = %s: %d segments, %d with a grown chain, populated in %.0f s."
                   % (fmt_n(r["n_per_month"]), len(r["segments"]), len(grown), r["populate_secs"]))


def segments(rep, res, out, svg_dir, note):
    if not res:
        return
    per = res[0]["per_segment"]
    g = "segments per=%s" % fmt_n(per)
    out.append("\n#### Negative lookup cost against segments read\n")
    out.append("Engines with one tier of R daily windows (`Tier::daily(R)`), %s keys planned per "
               "window (all inserted), rate 0.1%% per query; every segment populated. ns per "
               "negative lookup.\n" % fmt_n(per))
    out.append("| segments | MiB | timebloom | timebloom (batch) | floor | floor (batch) "
               "| timebloom / floor | batch / batch floor | measured rate [95% interval] |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    S = {"tb": [], "tbb": [], "fl": [], "flb": []}
    for r in res:
        R = r["segments"]
        a, b, f = (rep.t(g, "timebloom neg", str(R)), rep.t(g, "timebloom neg_batch", str(R)),
                   rep.t(g, "floor", str(R)))
        S["tb"].append((R, a))
        S["tbb"].append((R, b))
        fb = rep.t(g, "floor batch", str(R))
        S["fl"].append((R, f))
        S["flb"].append((R, fb))
        fp = count(r["measured_fpr"], r["negatives"], r.get("false_positives"))
        out.append("| %d | %.1f | %s | %s | %s | %s | %s | %s | %s |" % (
            R, r["bytes"] / 2 ** 20, ns(a), ns(b), ns(f), ns(fb),
            "%.2f×" % (a / f) if a and f else "", "%.2f×" % (b / fb) if b and fb else "",
            rate_text(fp, r["negatives"])))
    if not any(v for _, v in S["tb"]):
        return  # nothing timed: the plot stays that of the last timed run
    el = svg_panel(0, 0, 640, 400, "Negative lookup cost against segments read", "segments read",
                   "ns per negative lookup",
                   [("timebloom contains", COLORS[0], None, S["tb"]),
                    ("timebloom contains_batch", COLORS[0], "6,4", S["tbb"]),
                    ("floor: xxh3-128 + one touch per segment", COLORS[2], None, S["fl"]),
                    ("floor, 16 keys hashed and prefetched first", COLORS[2], "6,4", S["flb"])],
                   xticks=[x for x, _ in S["tb"]])
    path = os.path.join(svg_dir, "lookup-vs-segments.svg")
    with open(path, "w") as f:
        f.write(svg_doc(640, 400, el, note))
    out.append("\n![lookup cost against segments](lookup-vs-segments.svg)\n")


def load(rep, res, out, svg_dir, note):
    if not res:
        return
    fprs = sorted({r["fpr"] for r in res}, reverse=True)
    out.append("\n#### False-positive rate against load\n")
    planned = res[0]["planned"]
    out.append("One `1d` window planned for %s keys, filled step by step past its plan; "
               "fastbloom and sbbf-rs-safe sized for the same %s keys at the same rate "
               "(fixed size). Measured over %d negatives at each step.\n"
               % (fmt_n(planned), fmt_n(planned), res[0]["negatives"]))
    out.append("Rates in percent, each with its 95% interval.\n")
    out.append("| configured | load | timebloom | timebloom model | sub-filters | timebloom "
               "bits/item | fastbloom (xxh3) | sbbf-rs-safe |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    panels = []
    for i, p in enumerate(fprs):
        rows = [r for r in res if r["fpr"] == p]
        for r in rows:
            fps = r.get("false_positives", {})
            neg = r["negatives"]
            shown = {k: rate_text(count(r[k], neg, fps.get(k)), neg)
                     for k in ("timebloom", "fastbloom_xxh3", "sbbf_xxh3")}
            out.append("| %g | %.2f | %s | %s | %d | %.1f | %s | %s |" % (
                p, r["load"], shown["timebloom"], pct(r["timebloom_model"]), r["subfilters"],
                r["timebloom_bits_per_item"], shown["fastbloom_xxh3"], shown["sbbf_xxh3"]))
        series = [("timebloom (measured)", COLORS[0], None,
                   [(r["load"], r["timebloom"]) for r in rows]),
                  ("timebloom (model)", COLORS[0], "3,3",
                   [(r["load"], r["timebloom_model"]) for r in rows]),
                  ("fastbloom (xxh3)", COLORS[1], None, [(r["load"], r["fastbloom_xxh3"]) for r in rows]),
                  ("sbbf-rs-safe", COLORS[3], None, [(r["load"], r["sbbf_xxh3"]) for r in rows])]
        panels += svg_panel(460 * i, 0, 460, 400, "configured rate %g" % p,
                            "load (keys inserted / keys planned)", "false-positive rate",
                            series, logy=True, hlines=[(p, "#000", "configured %g" % p)],
                            xticks=[0, 0.5, 1, 1.5, 2, 3, 4], ymin=1e-6, ymax=1)
    path = os.path.join(svg_dir, "fpr-vs-load.svg")
    with open(path, "w") as f:
        f.write(svg_doc(460 * len(fprs), 400, panels, note))
    out.append("\n![false-positive rate against load](fpr-vs-load.svg)\n")


def open_time(rep, res, out):
    if not res:
        return
    r = res[0]
    out.append("\n#### Opening a large engine\n")
    out.append("Default tiers, %d keys/day planned, all %d segments present (%.2f GiB of segment "
               "files). Cold: the files' pages dropped from the page cache "
               "(`posix_fadvise(DONTNEED)`) first.\n" % (r["per_day"], r["segments"],
                                                         r["bytes"] / 2 ** 30))
    out.append("| run | open (ms) | KiB read by open | resident KiB added by open | first "
               "`contains` (ms) | KiB read by it | next `contains` (µs) |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for x in r["runs"]:
        out.append("| %s | %.2f | %d | %d | %.3f | %d | %.1f |" % (
            "cold" if x["cold"] else "warm", x["open_ms"], x["read_kib_by_open"],
            x["rss_kib_added_by_open"], x["first_contains_ms"], x["read_kib_by_first_contains"],
            x["second_contains_us"]))
    worst = max(x["open_ms"] for x in r["runs"])
    rep.target("open a %.1f GiB engine < 100 ms" % (r["bytes"] / 2 ** 30), "worst of %d runs"
               % len(r["runs"]), "%.1f ms" % worst, worst < 100)


def filter_new(rep, fn, out):
    if not fn:
        return
    out.append("\n#### `filter-new` on a duplicate-heavy stream (whole process)\n")
    out.append("%d distinct URLs, each repeated 5-20 times, shuffled: %d lines, %.0f MiB. "
               "LC_ALL=C. Times: %s (mean ± sd of %d runs, engine directory removed before each); "
               "peak RSS: `/usr/bin/time -v`. Binary's own RSS on an empty input: %.1f MiB.\n"
               % (fn["distinct"], fn["lines"], fn["bytes"] / 2 ** 20, fn["timer"], fn["runs"],
                  fn["baseline_rss_kib"] / 1024))
    out.append("| command | time (s) | vs awk | peak RSS (MiB) | segment files (MiB) | lines out |")
    out.append("|---|---:|---:|---:|---:|---:|")
    awk = next(r for r in fn["results"] if r["name"].startswith("awk"))
    for r in fn["results"]:
        out.append("| `%s` | %.2f ± %.2f | %.2f× | %.1f | %s | %d |" % (
            r["name"], r["mean_secs"], r["stddev_secs"], awk["mean_secs"] / r["mean_secs"],
            r["peak_rss_kib"] / 1024,
            "%.1f" % (r["engine_bytes"] / 2 ** 20) if "engine_bytes" in r else "",
            r["output_lines"]))
    for r in fn["results"]:
        if "engine_bytes" in r:
            sp = awk["mean_secs"] / r["mean_secs"]
            rep.target("filter-new ≥ 3× faster than awk", r["name"], "%.2f×" % sp, sp >= 3)
            bound = r["engine_bytes"] / 1024 + fn["baseline_rss_kib"] + 16 * 1024
            rep.target("filter-new RSS bounded by the segments (+ binary + 16 MiB)", r["name"],
                       "%.0f MiB RSS, %.0f MiB segments" % (r["peak_rss_kib"] / 1024,
                                                            r["engine_bytes"] / 2 ** 20),
                       r["peak_rss_kib"] <= bound)
            lost = awk["output_lines"] - r["output_lines"]
            rep.target("filter-new output: new URLs dropped as false positives", r["name"],
                       "%d of %d (%.3g%%)" % (lost, awk["output_lines"],
                                              100 * lost / max(1, awk["output_lines"])),
                       lost / max(1, awk["output_lines"]) <= 0.001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default=os.path.join(ROOT, "target"))
    ap.add_argument("--svg-dir", default=os.path.join(ROOT, "docs"))
    ap.add_argument("--results", help="the bench's JSON (default "
                    "TARGET/timebloom-bench/results.json)")
    args = ap.parse_args()
    bench_dir = os.path.join(args.target, "timebloom-bench")
    with open(args.results or os.path.join(bench_dir, "results.json")) as f:
        doc = json.load(f)
    # A rates-only run timed nothing: criterion's files are another run's.
    crit = load_criterion(args.target) if doc.get("timings", True) else {}
    fnp = os.path.join(bench_dir, "filter_new.json")
    fn = json.load(open(fnp)) if os.path.exists(fnp) else None
    res = doc["results"]
    part = lambda name: [r for r in res if r["part"] == name]
    rep = Report(crit)
    out = []
    note = "timebloom benches/filters.rs + scripts/report.py"
    single(rep, part("single"), out)
    windowed(rep, part("windowed"), out)
    segments(rep, part("segments"), out, args.svg_dir, note)
    load(rep, part("load"), out, args.svg_dir, note)
    open_time(rep, part("open"), out)
    filter_new(rep, fn, out)
    print("### Targets\n")
    print("| target | configuration | measured | verdict |")
    print("|---|---|---:|:---:|")
    for what, conf, ratio, ok in rep.targets:
        print("| %s | %s | %s | %s |" % (what, conf, ratio, verdict(ok)))
    passed = sum(1 for x in rep.targets if x[3])
    print("\n%d of %d PASS.\n" % (passed, len(rep.targets)))
    print("### Tables\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
