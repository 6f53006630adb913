"""Per-key insert and lookup from Python: timebloom against pybloom-live and a set.

    python bench/bench.py [--n 1000000] [--repeat 3] [--only timebloom]

Every structure gets the same N distinct URLs (``str``), sized for N at a
0.1% false-positive rate where it has a size. Reports the best of
``--repeat`` runs in nanoseconds per key, and the false-positive rate each
filter shows on N/2 URLs it never saw. pybloom-live is optional (``pip
install pybloom-live``); its rows are left out without it. ``--only``
runs only the structures whose name contains it.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Protocol, TypeVar

import timebloom

FPR = 0.001


def urls(n: int, tag: str) -> list[str]:
    """N distinct URL-shaped keys."""
    return [f"https://www.example-{i % 997}.com/{tag}/item/{i}?ref=feed&page={i % 50}" for i in range(n)]


_S = TypeVar("_S")


class _Adds(Protocol):
    """A structure that takes keys with ``add`` (pybloom-live's filters, a set)."""

    def add(self, key: str) -> object: ...


_A = TypeVar("_A", bound=_Adds)


def best(repeat: int, setup: Callable[[], _S], run: Callable[[_S], object]) -> float:
    """The shortest of ``repeat`` timed runs (seconds), each on a fresh setup."""
    times = []
    for _ in range(repeat):
        state = setup()
        t = time.perf_counter()
        run(state)
        times.append(time.perf_counter() - t)
        close = getattr(state, "close", None)
        if close:
            close()
    return min(times)


def in_threads(count: int, e: timebloom.Engine, keys: list[str]) -> None:
    """Inserts ``keys`` from ``count`` threads sharing ``e``, each its own
    share in calls of 10,000 (a batch call releases the GIL while the
    engine works)."""

    def work(part: list[str]) -> None:
        for i in range(0, len(part), 10_000):
            e.insert_many(part[i : i + 10_000])

    share = -(-len(keys) // count)
    threads = [threading.Thread(target=work, args=(keys[t * share : (t + 1) * share],)) for t in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    """Runs every row and prints a Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="only the structures whose name contains this")
    args = ap.parse_args()
    n, rep = args.n, args.repeat
    keys, absent = urls(n, "seen"), urls(n // 2, "never")
    tmp = Path(tempfile.mkdtemp(prefix="tb-bench-"))
    rows: list[tuple[str, str, float]] = []  # (structure, operation, ns per key)
    fprs: dict[str, float] = {}

    def wanted(name: str) -> bool:
        return args.only in name

    def row(name: str, op: str, secs: float, count: int) -> None:
        rows.append((name, op, secs / count * 1e9))
        print(f"{name:36} {op:28} {secs / count * 1e9:9.0f} ns/key", flush=True)

    counter = [0]
    for tiers in ("7d,4w,12m", "7d"):

        def engine(tiers: str = tiers) -> timebloom.Engine:
            counter[0] += 1
            return timebloom.Engine.create(tmp / f"e{counter[0]}", tiers, items_per_day=n, fpr=FPR)

        def filled_engine(tiers: str = tiers) -> timebloom.Engine:
            e = engine(tiers)
            e.insert_many(keys)
            return e

        tb = f"timebloom ({tiers})"
        if not wanted(tb):
            continue
        row(tb, "insert, new keys", best(rep, engine, lambda e: [e.insert(k) for k in keys]), n)
        row(tb, "insert_many, new keys", best(rep, engine, lambda e: e.insert_many(keys)), n)
        row(tb, "insert_many 10,000 a call", best(rep, engine, lambda e: [e.insert_many(keys[i : i + 10_000]) for i in range(0, n, 10_000)]), n)
        row(tb, "insert_many 10,000 a call, 2 threads", best(rep, engine, lambda e: in_threads(2, e, keys)), n)
        row(tb, "insert, keys seen before", best(rep, filled_engine, lambda e: [e.insert(k) for k in keys]), n)
        row(tb, "insert_many, keys seen before", best(rep, filled_engine, lambda e: e.insert_many(keys)), n)
        row(tb, "contains, present", best(rep, filled_engine, lambda e: [e.contains(k) for k in keys]), n)
        row(tb, "contains, absent", best(rep, filled_engine, lambda e: [e.contains(k) for k in absent]), n // 2)
        row(tb, "contains_many, present", best(rep, filled_engine, lambda e: e.contains_many(keys)), n)
        row(tb, "contains_many, absent", best(rep, filled_engine, lambda e: e.contains_many(absent)), n // 2)
        e = filled_engine()
        fprs[tb] = sum(e.contains_many(absent)) / len(absent)
        e.close()

    def filled(make: Callable[[], _A]) -> _A:
        f = make()
        for k in keys:
            f.add(k)
        return f

    try:
        # Optional, and without type information: its classes are Any here.
        from pybloom_live import BloomFilter, ScalableBloomFilter  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        print("pybloom-live is not installed: its rows are left out")
    else:
        if wanted("pybloom-live"):
            fixed = f"pybloom-live BloomFilter({n}, {FPR})"

            def bf() -> BloomFilter:
                return BloomFilter(capacity=n, error_rate=FPR)

            def filled_bf() -> BloomFilter:
                return filled(bf)

            row(fixed, "add, new keys", best(rep, bf, lambda b: [b.add(k) for k in keys]), n)
            row(fixed, "in, present", best(rep, filled_bf, lambda b: [k in b for k in keys]), n)
            row(fixed, "in, absent", best(rep, filled_bf, lambda b: [k in b for k in absent]), n // 2)
            b = filled_bf()
            fprs[fixed] = sum(k in b for k in absent) / len(absent)

            # Told the key count, as timebloom is (items_per_day=n): with the
            # default initial_capacity of 100 it would grow through 7-8
            # sub-filters on the way to N, each `add` testing all of them.
            scal = f"pybloom-live ScalableBloomFilter(initial_capacity={n}, error_rate={FPR})"

            def sbf() -> ScalableBloomFilter:
                return ScalableBloomFilter(initial_capacity=n, error_rate=FPR)

            def filled_sbf() -> ScalableBloomFilter:
                return filled(sbf)

            row(scal, "add, new keys", best(rep, sbf, lambda s: [s.add(k) for k in keys]), n)
            row(scal, "in, present", best(rep, filled_sbf, lambda s: [k in s for k in keys]), n)
            s = filled_sbf()
            fprs[scal] = sum(k in s for k in absent) / len(absent)

    st = "Python set"
    if wanted(st):

        def empty_set() -> set[str]:
            return set()

        def add_every_key(s: _Adds) -> list[object]:
            # set.add answers None; through _Adds its answer is an object.
            return [s.add(k) for k in keys]

        row(st, "add, new keys", best(rep, empty_set, add_every_key), n)
        row(st, "in, present", best(rep, lambda: set(keys), lambda s: [k in s for k in keys]), n)
        row(st, "in, absent", best(rep, lambda: set(keys), lambda s: [k in s for k in absent]), n // 2)

    shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(f"N = {n:,} URLs, best of {rep}")
    print()
    print("| structure | operation | ns per key |")
    print("| --- | --- | ---: |")
    for name, op, ns in rows:
        print(f"| {name} | {op} | {ns:,.0f} |")
    print()
    print("| filter | false positives on N/2 unseen URLs (target 0.1%) |")
    print("| --- | ---: |")
    for name, rate in fprs.items():
        print(f"| {name} | {rate:.3%} |")


if __name__ == "__main__":
    main()
