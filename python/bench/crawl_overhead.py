"""The duplicate filter's cost in a Scrapy crawl: TimebloomDupeFilter against
Scrapy's RFPDupeFilter.

    python bench/crawl_overhead.py [--pages 2000] [--repeat 3]

Two measurements over the loopback site of the tests (``tests/loopback_site.py``:
every page links to 8 others, each in 3 spellings):

1. ``request_seen`` alone: every link of every page as a fresh
   ``scrapy.Request``, fed to each filter in crawl order; once with the
   fingerprint computed inside (as in a crawl), once with it computed
   beforehand (Scrapy's fingerprinter caches it per request), which leaves
   the filter's own cost.
2. Whole crawls of the site (``tests/crawl.py``, one process each), wall
   time from process start to exit.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable
from urllib.parse import urljoin

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
sys.path.insert(0, str(TESTS))

# Found through the sys.path entry above, which mypy does not follow.
from loopback_site import Site, links  # type: ignore[import-not-found, unused-ignore]  # noqa: E402

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.dupefilters import BaseDupeFilter


def requests_of(n: int, port: int) -> list[Request]:
    """Every link of every page, as the crawl would request them."""
    from scrapy import Request

    out: list[Request] = []
    for i in range(n):
        base = f"http://127.0.0.1:{port}/page?id={i}&lang=en"
        out.extend(Request(urljoin(base, h)) for h in links(i, n, port))
    return out


def time_filter(make: Callable[[], BaseDupeFilter], reqs: list[Request]) -> tuple[float, int]:
    """Seconds for ``request_seen`` over ``reqs`` on a new filter, and the
    count of requests let through."""
    df = make()
    t = time.perf_counter()
    new = sum(not df.request_seen(r) for r in reqs)
    secs = time.perf_counter() - t
    df.close("finished")
    return secs, new


def main() -> None:
    """Runs both measurements and prints Markdown tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from scrapy.dupefilters import RFPDupeFilter
    from scrapy.utils.request import RequestFingerprinter

    from timebloom.scrapy import TimebloomDupeFilter

    n, port = args.pages, 8000
    tmp = Path(tempfile.mkdtemp(prefix="tb-crawl-bench-"))
    filters = {
        "RFPDupeFilter (no JOBDIR: a set)": lambda d, f: RFPDupeFilter(fingerprinter=f),
        "RFPDupeFilter (JOBDIR: set + requests.seen)": lambda d, f: RFPDupeFilter(str(d), fingerprinter=f),
        "TimebloomDupeFilter": lambda d, f: TimebloomDupeFilter(d / "tb", items_per_day=100_000, fingerprinter=f),
        "TimebloomDupeFilter, RECRAWL_AFTER=7d": lambda d, f: TimebloomDupeFilter(
            d / "tb", items_per_day=100_000, recrawl_after="7d", fingerprinter=f
        ),
    }
    # Repeats go round the filters (not one filter's repeats in a row), and
    # each row keeps its fastest run: the machine's noise only adds time.
    full: dict[str, list[float]] = {name: [] for name in filters}
    own: dict[str, list[float]] = {name: [] for name in filters}
    through: dict[str, int] = {}
    count = 0
    for r in range(args.repeat):
        for name, make in filters.items():
            for cache, out in ((False, full), (True, own)):
                fingerprinter = RequestFingerprinter()
                reqs = requests_of(n, port)  # fresh objects: no cached fingerprints
                if cache:
                    for q in reqs:  # the fingerprinter caches per request object
                        fingerprinter.fingerprint(q)
                d = tmp / f"{len(out[name])}-{r}-{time.monotonic_ns()}"
                d.mkdir()
                secs, through[name] = time_filter(lambda: make(d, fingerprinter), reqs)
                out[name].append(secs)
                count = len(reqs)
    print(f"{count:,} requests ({n} pages x 24 links), best of {args.repeat}")
    print()
    print("| filter | let through | us per request_seen | us per request_seen, fingerprint already computed |")
    print("| --- | ---: | ---: | ---: |")
    for name in filters:
        print(f"| {name} | {through[name]:,} | {min(full[name]) / count * 1e6:.2f} | {min(own[name]) / count * 1e6:.2f} |")

    site = Site(n)
    try:
        print()
        print(f"| whole crawl of {n} pages | wall seconds (median of {args.repeat}) | pages fetched |")
        print("| --- | ---: | ---: |")
        for name, cls in (
            ("RFPDupeFilter", "scrapy.dupefilters.RFPDupeFilter"),
            ("TimebloomDupeFilter", "timebloom.scrapy.TimebloomDupeFilter"),
        ):
            walls = []
            for r in range(args.repeat):
                site.reset()
                settings = {
                    "DUPEFILTER_CLASS": cls,
                    "TIMEBLOOM_DIR": str(tmp / f"crawl-{r}-{time.monotonic_ns()}"),
                    "TIMEBLOOM_ITEMS_PER_DAY": 100_000,
                    "LOG_LEVEL": "WARNING",
                }
                t = time.perf_counter()
                subprocess.run(
                    [sys.executable, str(TESTS / "crawl.py"), site.start_url, json.dumps(settings)],
                    check=True,
                    capture_output=True,
                )
                walls.append(time.perf_counter() - t)
            print(f"| {name} | {statistics.median(walls):.2f} | {sum(site.hits.values())} |", flush=True)
    finally:
        site.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
