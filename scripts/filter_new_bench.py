#!/usr/bin/env python3
"""Whole-process benchmark of `timebloom filter-new` against `awk '!seen[$0]++'`
and `sort -u` on a duplicate-heavy stream of crawl-like URLs.

    cargo build --release
    python3 scripts/filter_new_bench.py            # 1e6 distinct URLs, 3 runs

The stream: N distinct URLs (60-120 bytes), each repeated 5 to 20 times
(uniformly), shuffled, so most lines are repeats, as when a crawler meets the
same navigation links on every page. Generated once (deterministic, seed 42)
and kept in the output directory.

Each command reads the file and writes its output to /dev/null. Wall times
come from hyperfine (`--runs`, one warm-up run, the engine directory removed
before every run) or, without hyperfine, from repeated runs timed here. Peak
resident memory comes from one `/usr/bin/time -v` run of each command, whose
output is also kept to count lines: filter-new may drop a new URL that is a
false positive, never print a repeat.

Results go to <out>/filter_new.json; scripts/report.py turns them into tables.

    python3 scripts/filter_new_bench.py --canonical-cost --runs 5

measures only what `--canonical` costs: plain `filter-new --tiers 1d
--items-per-day N --sync none` and the same with `--canonical`, interleaved,
`--runs` times each, the engine directory removed before every run. It
prints the medians of wall time and of CPU time (user + system, from the
kernel's accounting of each child), their ratios and the load average, and
writes <out>/canonical_cost.json. CPU time is the steadier measure on a
shared machine: wall time also counts the time spent waiting for a core.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORDS = ["news", "shop", "blog", "wiki", "docs", "forum", "media", "store", "video",
         "travel", "sports", "cloud", "music", "games", "photos", "health", "market",
         "press", "daily", "local", "books", "recipes", "jobs", "auto"]
TLDS = ["com", "org", "net", "io", "de", "co.uk", "fr", "jp", "com.br", "nl", "es", "info"]
SECTIONS = ["article", "category", "product", "tag", "page", "search", "user", "2025",
            "2026", "item", "view", "en", "archive", "static", "post", "topic"]
SLUG = "abcdefghijklmnopqrstuvwxyz0123456789-"


def url(i, rnd):
    """A crawl-like URL of 60 to 120 bytes, unique per i (the id comes last)."""
    target = rnd.randint(60, 120)
    host = rnd.randrange(300_000)
    head = "https://%s%s%d.%s/" % ("www." if rnd.random() < 0.75 else "",
                                   WORDS[host % 24], host // 24, rnd.choice(TLDS))
    tail = "?id=%x" % i
    parts = []
    room = target - len(head) - len(tail)
    while room > 0:
        if rnd.random() < 0.5:
            seg = rnd.choice(SECTIONS)
        else:
            seg = "".join(rnd.choice(SLUG) for _ in range(rnd.randint(3, 14)))
        seg = seg[:room]
        parts.append(seg)
        room -= len(seg) + 1
    return head + "/".join(parts) + tail


def make_stream(path, distinct, seed=42):
    rnd = random.Random(seed)
    urls = [url(i, rnd) for i in range(distinct)]
    order = []
    for i in range(distinct):
        order.extend([i] * rnd.randint(5, 20))
    rnd.shuffle(order)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for start in range(0, len(order), 100_000):
            f.write("\n".join(urls[i] for i in order[start:start + 100_000]))
            f.write("\n")
    os.replace(tmp, path)
    return len(order)


def count_lines(path):
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 24)
            if not b:
                return n
            n += b.count(b"\n")


def time_v(cmd, out_path, env):
    """Runs cmd once under /usr/bin/time -v; returns (seconds, peak KiB)."""
    with open(out_path, "wb") as out:
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=out,
                           stderr=subprocess.PIPE, env=env)
        secs = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr.decode(errors="replace")))
    rss = 0
    for line in p.stderr.decode(errors="replace").splitlines():
        if "Maximum resident set size" in line:
            rss = int(line.split(":")[1])
    return secs, rss


def dir_bytes(d):
    total = 0
    for root, _, files in os.walk(d):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def run_cpu(cmd, env):
    """Runs cmd with its output to /dev/null; returns (wall s, user+sys s)."""
    with open(os.devnull, "wb") as null:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=null, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit("failed (exit %d): %s" % (p.returncode, " ".join(cmd)))
    return wall, usage.ru_utime + usage.ru_stime


def canonical_cost(tb, stream, distinct, runs, out, env):
    """Plain filter-new against --canonical: interleaved runs, medians."""
    d = os.path.join(out, "canonical-cost.tb")
    base = [tb, "filter-new", "--tiers", "1d", "--items-per-day", str(distinct),
            "--sync", "none"]
    modes = [("plain", base + [d, stream]),
             ("--canonical", base + ["--canonical", d, stream])]
    load_before = os.getloadavg()
    samples = {name: [] for name, _ in modes}
    for _ in range(runs):
        for name, cmd in modes:
            shutil.rmtree(d, ignore_errors=True)
            samples[name].append(run_cpu(cmd, env))
    shutil.rmtree(d, ignore_errors=True)
    load_after = os.getloadavg()
    med = {name: (statistics.median(w for w, _ in xs), statistics.median(c for _, c in xs))
           for name, xs in samples.items()}
    for name, xs in samples.items():
        print("%-12s wall %5.2f s (%s)  cpu %5.2f s (%s)" % (
            name, med[name][0], " ".join("%.2f" % w for w, _ in xs),
            med[name][1], " ".join("%.2f" % c for _, c in xs)))
    ratio = (med["--canonical"][0] / med["plain"][0], med["--canonical"][1] / med["plain"][1])
    print("--canonical / plain: wall %.2fx, cpu %.2fx; load average %s before, %s after" % (
        ratio[0], ratio[1], "/".join("%.2f" % x for x in load_before),
        "/".join("%.2f" % x for x in load_after)))
    doc = {"stream": stream, "runs": runs, "commands": {n: c for n, c in modes},
           "samples": {n: [{"wall_secs": w, "cpu_secs": c} for w, c in xs]
                       for n, xs in samples.items()},
           "median_wall_secs": {n: m[0] for n, m in med.items()},
           "median_cpu_secs": {n: m[1] for n, m in med.items()},
           "ratio_wall": ratio[0], "ratio_cpu": ratio[1],
           "loadavg_before": load_before, "loadavg_after": load_after}
    path = os.path.join(out, "canonical_cost.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    print("written", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--distinct", type=float, default=1e6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/timebloom"))
    ap.add_argument("--out", default=os.path.join(ROOT, "target/timebloom-bench"))
    ap.add_argument("--canonical-cost", action="store_true",
                    help="only compare plain filter-new with --canonical (see above)")
    args = ap.parse_args()
    distinct = int(args.distinct)
    os.makedirs(args.out, exist_ok=True)
    stream = os.path.join(args.out, "stream-%d.txt" % distinct)
    if not os.path.exists(stream):
        t = time.perf_counter()
        lines = make_stream(stream, distinct)
        print("generated %s: %d lines in %.1f s" % (stream, lines, time.perf_counter() - t))
    env = dict(os.environ, LC_ALL="C")
    if args.canonical_cost:
        canonical_cost(args.bin, stream, distinct, args.runs, args.out, env)
        return
    lines = count_lines(stream)
    size = os.path.getsize(stream)
    work = os.path.join(args.out, "filter-new-work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    tb = args.bin
    d_def, d_1d = os.path.join(work, "default.tb"), os.path.join(work, "1d.tb")
    commands = [
        ("timebloom filter-new (7d,4w,12m)", [tb, "filter-new", d_def, stream], d_def),
        ("timebloom filter-new (1d)", [tb, "filter-new", "--tiers", "1d", "--items-per-day",
                                       str(distinct), "--fpr", "0.001", d_1d, stream], d_1d),
        ("awk '!seen[$0]++' (mawk)", ["awk", "!seen[$0]++", stream], None),
        ("sort -u", ["sort", "-u", stream], None),
    ]
    shq = lambda c: " ".join("'%s'" % a.replace("'", "'\\''") for a in c)

    results = []
    for name, cmd, d in commands:
        if d:
            shutil.rmtree(d, ignore_errors=True)
        out_path = os.path.join(work, "out-%d.txt" % len(results))
        secs, rss = time_v(cmd, out_path, env)
        r = {"name": name, "command": shq(cmd), "time_v_secs": secs, "peak_rss_kib": rss,
             "output_lines": count_lines(out_path)}
        if d:
            r["engine_bytes"] = dir_bytes(d)
            st = subprocess.run([tb, "stats", "--json", d], capture_output=True, env=env)
            if st.returncode == 0:
                s = json.loads(st.stdout)
                r["segments"] = sum(len(t["segments"]) for t in s["tiers"])
                r["subfilters"] = sum(g["subfilters"] for t in s["tiers"] for g in t["segments"])
        results.append(r)
        print("%-36s %7.2f s  peak RSS %8.1f MiB  %d lines out" %
              (name, secs, rss / 1024, r["output_lines"]))
        os.remove(out_path)
    # Baseline resident memory of the binary itself: an empty input.
    empty = os.path.join(work, "empty.txt")
    open(empty, "w").close()
    d0 = os.path.join(work, "empty.tb")
    _, rss0 = time_v([tb, "filter-new", d0, empty], os.devnull, env)
    shutil.rmtree(d0, ignore_errors=True)

    hyperfine = shutil.which("hyperfine")
    if hyperfine:
        export = os.path.join(args.out, "filter_new_hyperfine.json")
        hcmd = [hyperfine, "--runs", str(args.runs), "--warmup", "1", "--export-json", export,
                "--prepare", "rm -rf %s %s" % (d_def, d_1d)]
        for name, cmd, _ in commands:
            hcmd += ["-n", name, shq(cmd)]
        subprocess.run(hcmd, check=True, env=env)
        with open(export) as f:
            for r, h in zip(results, json.load(f)["results"]):
                r["mean_secs"], r["stddev_secs"] = h["mean"], h["stddev"]
                r["min_secs"], r["times"] = h["min"], h["times"]
        timer = subprocess.run([hyperfine, "--version"], capture_output=True,
                               text=True).stdout.strip()
    else:
        for r, (name, cmd, d) in zip(results, commands):
            times = []
            for _ in range(args.runs + 1):
                if d:
                    shutil.rmtree(d, ignore_errors=True)
                t = time.perf_counter()
                subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, env=env)
                times.append(time.perf_counter() - t)
            times = times[1:]
            r["mean_secs"], r["min_secs"], r["times"] = statistics.mean(times), min(times), times
            r["stddev_secs"] = statistics.stdev(times) if len(times) > 1 else 0.0
        timer = "python time.perf_counter, %d runs after one warm-up" % args.runs
    shutil.rmtree(work, ignore_errors=True)
    doc = {"distinct": distinct, "lines": lines, "bytes": size, "runs": args.runs,
           "timer": timer, "baseline_rss_kib": rss0, "results": results}
    path = os.path.join(args.out, "filter_new.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    print("written", path)


if __name__ == "__main__":
    main()
