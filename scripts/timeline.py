#!/usr/bin/env python3
"""Draws docs/timeline.svg: what windows and horizons mean, from a real run.

The script builds the `timebloom` CLI (or uses --bin), creates an engine with
the default tiers (7d,4w,12m) in a temporary directory, records one key a day
(`day-YYYY-MM-DD`, at noon of that day, with `add --now`) for 400 days, then
asks the engine at NOW:
  * `stats --json`: every live window of every tier (start, end, state),
    and each tier's coarseness;
  * `check --within H` for every day key, for a few horizons H, and `check`
    without a horizon: which days each query answers "seen".
Everything drawn comes from those answers; the script checks that each
horizon's "seen" days are exactly the windows of one tier, from the window
holding NOW - H to the open one, and fails otherwise.

    python3 scripts/timeline.py [--bin target/release/timebloom] [--out docs/timeline.svg]
"""

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile

NOW = dt.datetime(2026, 11, 18, 15, 0, tzinfo=dt.timezone.utc)
DAYS = 400
HORIZONS = [("3d", 3), ("20d", 20), ("100d", 100)]
DAY = 86400


def rfc(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def run(cmd, stdin=None, ok=(0,)):
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if p.returncode not in ok:
        sys.exit(f"timeline.py: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def build(bin_arg):
    if bin_arg:
        return bin_arg
    run(["cargo", "build", "--release", "--quiet", "--bin", "timebloom"])
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    return os.path.join(target, "release", "timebloom")


def measure(tb):
    """Fills an engine and returns (stats, {query: set of seen day indexes}, days)."""
    tmp = tempfile.mkdtemp(prefix="timeline-")
    eng = os.path.join(tmp, "t.tb")
    days = [(NOW - dt.timedelta(days=d)).replace(hour=12, minute=0) for d in range(DAYS, -1, -1)]
    run([tb, "create", eng, "--tiers", "7d,4w,12m", "--items-per-day", "100",
         "--now", rfc(days[0])])
    for t in days:
        run([tb, "add", eng, "--now", rfc(t)], stdin=f"day-{t.date()}\n")
    stats = json.loads(run([tb, "stats", eng, "--json", "--now", rfc(NOW)]))
    keys = "".join(f"day-{t.date()}\n" for t in days)
    seen = {}
    for name, _ in HORIZONS + [("contains", None)]:
        args = [tb, "check", eng, "--now", rfc(NOW)]
        if name != "contains":
            args += ["--within", name]
        out = run(args, stdin=keys, ok=(0, 1))
        seen[name] = {i for i, line in enumerate(out.splitlines()) if line.endswith("\tseen")}
    return stats, seen, days


def explain(stats, seen, days):
    """For each query: the tier and windows it read, checked against the answers."""
    now = int(NOW.timestamp())
    result = {}
    for name, hdays in HORIZONS + [("contains", None)]:
        got = seen[name]
        if not got:
            sys.exit(f"timeline.py: {name} saw nothing")
        first = min(got)
        if got != set(range(first, len(days))):
            sys.exit(f"timeline.py: {name}: the seen days are not one run up to today")
        start = int(days[first].timestamp())
        match = None
        for tier in stats["tiers"]:
            segs = tier["segments"]
            if hdays is None:
                if tier["answers_contains"]:
                    match = (tier, segs)
                continue
            since = now - hdays * DAY
            read = [s for s in segs if s["window_end"] > since]
            if read and read[0]["window_start"] <= since and read[0]["window_start"] <= start < read[0]["window_end"]:
                if match is None or tier["window_secs"] < match[0]["window_secs"]:
                    match = (tier, read)
        if match is None:
            sys.exit(f"timeline.py: no tier's windows explain the answers of {name}")
        tier, read = match
        if not read[0]["window_start"] <= start < read[0]["window_start"] + DAY * 2 + tier["window_secs"]:
            sys.exit(f"timeline.py: {name}: first seen day is outside the first window read")
        result[name] = (tier["tier"], read, start, hdays)
    return result


# ---- drawing -----------------------------------------------------------------

W, LEFT, RIGHT = 980, 150, 20
COLORS = {"7d": "#4c78a8", "4w": "#59a14f", "12m": "#e15759"}


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;")


class Panel:
    def __init__(self, t0, t1, top):
        self.t0, self.t1, self.top = t0, t1, top

    def x(self, t):
        t = min(max(t, self.t0), self.t1)
        return LEFT + (W - LEFT - RIGHT) * (t - self.t0) / (self.t1 - self.t0)


def draw(stats, seen, days, expl, out):
    now = int(NOW.timestamp())
    svg = []
    add = svg.append
    oldest = min(s["window_start"] for t in stats["tiers"] for s in t["segments"])
    panels = [
        ("The last five weeks", Panel(now - 36 * DAY, now + 4 * DAY, 40), ["3d", "20d"]),
        ("The year", Panel(oldest - 5 * DAY, now + 16 * DAY, 270), ["100d", "contains"]),
    ]
    height = 585
    add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
        f'viewBox="0 0 {W} {height}" font-family="sans-serif" font-size="12">')
    add(f'<rect width="{W}" height="{height}" fill="white"/>')
    add(f'<text x="10" y="20" font-size="14" font-weight="bold">timebloom windows and horizons '
        f'(tiers 7d,4w,12m; one key a day for {DAYS} days; asked at {rfc(NOW)})</text>')
    for title, p, queries in panels:
        y = p.top
        add(f'<text x="10" y="{y + 12}" font-weight="bold">{esc(title)}</text>')
        y += 22
        # Month and week ticks along the top of the panel.
        d = dt.datetime.fromtimestamp(p.t0, dt.timezone.utc).replace(hour=0, minute=0, second=0)
        while d.timestamp() <= p.t1:
            t = int(d.timestamp())
            if title.startswith("The year") and d.day == 1 or not title.startswith("The year") and d.weekday() == 0:
                add(f'<line x1="{p.x(t):.1f}" y1="{y}" x2="{p.x(t):.1f}" y2="{y + 200}" stroke="#eee"/>')
                add(f'<text x="{p.x(t) + 2:.1f}" y="{y + 8}" font-size="9" fill="#888">{d:%b %d}</text>')
            d += dt.timedelta(days=1)
        y += 14
        rows = {}
        for tier in stats["tiers"]:
            name = tier["tier"]
            rows[name] = y
            add(f'<text x="10" y="{y + 14}">{esc(name)}: {tier["retention"]} windows</text>')
            for s in tier["segments"]:
                x0, x1 = p.x(s["window_start"]), p.x(s["window_end"])
                if x1 - x0 < 0.5:
                    continue
                dash = ' stroke-dasharray="3,2"' if s["state"] == "open" else ""
                add(f'<rect x="{x0:.1f}" y="{y}" width="{x1 - x0:.1f}" height="20" fill="{COLORS.get(name, "#999")}" '
                    f'fill-opacity="0.18" stroke="{COLORS.get(name, "#999")}"{dash}/>')
            y += 26
        for q in queries:
            tier, read, start, hdays = expl[q]
            color = COLORS.get(tier, "#999")
            label = "contains (no horizon)" if q == "contains" else f"within {q}"
            add(f'<text x="10" y="{y + 14}">{esc(label)}</text>')
            # The windows read, outlined on their tier's row.
            for s in read:
                add(f'<rect x="{p.x(s["window_start"]):.1f}" y="{rows[tier]}" '
                    f'width="{p.x(s["window_end"]) - p.x(s["window_start"]):.1f}" height="20" fill="none" '
                    f'stroke="{color}" stroke-width="2.5"/>')
            # The exact horizon, and the older part a whole window adds.
            if hdays is not None:
                since = now - hdays * DAY
                add(f'<rect x="{p.x(start - 12 * 3600):.1f}" y="{y + 4}" width="{p.x(since) - p.x(start - 12 * 3600):.1f}" '
                    f'height="12" fill="{color}" fill-opacity="0.25"/>')
                add(f'<rect x="{p.x(since):.1f}" y="{y + 4}" width="{p.x(now) - p.x(since):.1f}" height="12" fill="{color}"/>')
            # The day keys the engine answered "seen" for.
            for i, t in enumerate(days):
                if p.t0 <= t.timestamp() <= p.t1 and (title != "The year" or t.day % 4 == 1):
                    cx = p.x(int(t.timestamp()))
                    fill = color if i in seen[q] else "white"
                    add(f'<circle cx="{cx:.1f}" cy="{y + 24}" r="2" fill="{fill}" stroke="{color}" stroke-width="0.7"/>')
            note = (f"reads {len(read)} {tier} windows" +
                    ("" if hdays is None else
                     f"; seen back to {dt.datetime.fromtimestamp(start, dt.timezone.utc):%b %d} "
                     f"(horizon {dt.datetime.fromtimestamp(now - hdays * DAY, dt.timezone.utc):%b %d} + coarseness)"))
            add(f'<text x="{p.x(now) - 4:.1f}" y="{y + 40}" text-anchor="end" font-size="10" fill="#444">{esc(note)}</text>')
            y += 46
        add(f'<line x1="{p.x(now):.1f}" y1="{p.top + 30}" x2="{p.x(now):.1f}" y2="{y}" stroke="black"/>')
        add(f'<text x="{p.x(now) + 3:.1f}" y="{p.top + 30}" font-size="10">now</text>')
    legend = ["Boxes: live windows (dashed: the open one). Thick outline: the windows a query reads.",
              "Dark bar: the horizon; light bar: how much older a key counted as seen can be (up to one "
              "window of the tier read). Dots: the day keys, filled when the engine answered seen."]
    for i, line in enumerate(legend):
        add(f'<text x="10" y="{height - 26 + 14 * i}" font-size="10" fill="#444">{esc(line)}</text>')
    add("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", help="the timebloom binary (default: cargo build --release)")
    ap.add_argument("--out", default="docs/timeline.svg")
    a = ap.parse_args()
    tb = build(a.bin)
    stats, seen, days = measure(tb)
    expl = explain(stats, seen, days)
    for q, (tier, read, start, _) in expl.items():
        print(f"{q}: tier {tier}, {len(read)} windows, seen from "
              f"{dt.datetime.fromtimestamp(start, dt.timezone.utc):%Y-%m-%d}")
    draw(stats, seen, days, expl, a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
