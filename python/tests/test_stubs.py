"""The type stubs (timebloom/__init__.pyi) against the compiled module:
names, signatures, exception classes, docstrings, and what ``mypy
--strict`` makes of code using them."""

import ast
import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import timebloom

STUB = Path(timebloom.__file__).with_name("__init__.pyi")
CLASSES = ("Engine", "RedisEngine", "ManualClock")


def stub_classes():
    """The stub's classes by name."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    return {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}


def has_mypy():
    try:
        import mypy  # noqa: F401
    except ImportError:
        return False
    return True


needs_mypy = pytest.mark.skipif(not has_mypy(), reason="mypy is not installed")


def run_mypy(args, cwd):
    """Runs mypy (a module of this interpreter) in ``cwd``, which holds
    nothing named timebloom, so that the installed package is checked."""
    env = dict(os.environ)
    env.pop("MYPYPATH", None)
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def mypy_strict(tmp_path, source):
    path = tmp_path / "snippet.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    r = run_mypy(["mypy", "--strict", "--no-incremental", "snippet.py"], tmp_path)
    return r.returncode, r.stdout + r.stderr


@needs_mypy
@pytest.mark.parametrize("module", ["timebloom", "timebloom.scrapy"])
def test_stubtest_finds_no_difference(module, tmp_path):
    # One module a run: given both, mypy reads timebloom/scrapy.py twice.
    r = run_mypy(["mypy.stubtest", module], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_exception_classes_and_bases_match_the_stub():
    stub = {
        name: [b.id for b in c.bases]
        for name, c in stub_classes().items()
        if name not in CLASSES
    }
    runtime = {
        name: [b.__name__ for b in obj.__bases__]
        for name, obj in vars(timebloom._timebloom).items()
        if isinstance(obj, type) and issubclass(obj, BaseException)
    }
    assert stub == runtime
    assert sorted(timebloom.__all__) == sorted(
        n for n, c in stub_classes().items()
    )


def test_every_parameter_of_the_stub_is_named_in_the_runtime_docstring():
    missing = []
    for cname in CLASSES:
        for f in stub_classes()[cname].body:
            if not isinstance(f, ast.FunctionDef) or f.name in ("__exit__", "__contains__"):
                continue
            if any(isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list):
                continue
            a = f.args
            names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
            cls = getattr(timebloom, cname)
            doc = (cls if f.name == "__new__" else getattr(cls, f.name)).__doc__ or ""
            missing += [f"{cname}.{f.name}: {n}" for n in names if f"`{n}`" not in doc and f"`{n}=" not in doc]
    assert missing == []


def test_runtime_signatures_have_the_stub_parameter_names():
    for cname in CLASSES:
        cls = getattr(timebloom, cname)
        for f in stub_classes()[cname].body:
            if not isinstance(f, ast.FunctionDef) or f.name in ("__exit__", "__contains__", "__new__"):
                continue
            if any(isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list):
                assert isinstance(inspect.getattr_static(cls, f.name), type(cls.closed)), f.name
                continue
            a = f.args
            stub_names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
            sig = inspect.signature(getattr(cls, f.name))
            assert [p for p in sig.parameters if p != "self"] == stub_names, f"{cname}.{f.name}"


def test_exit_returns_false_and_lets_the_exception_through(tb_dir):
    # RedisEngine's case is in test_redis.py (it needs a server).
    with pytest.raises(KeyError):
        with timebloom.Engine.create(tb_dir, items_per_day=100) as e:
            raise KeyError("x")
    assert e.closed
    e2 = timebloom.Engine.open(tb_dir)
    assert e2.__exit__(None, None, None) is False


@needs_mypy
def test_mypy_strict_knows_with_does_not_swallow_exceptions(tmp_path):
    # With `__exit__` typed `-> bool`, mypy assumes the block's exception may
    # be swallowed and reports "Missing return statement" here.
    code, out = mypy_strict(
        tmp_path,
        """
        from timebloom import Engine, RedisEngine


        def first(path: str) -> bool:
            with Engine.open(path) as engine:
                return engine.insert("a")


        def first_redis(url: str) -> bool:
            with RedisEngine.open(url, "p") as seen:
                return seen.insert("a")
        """,
    )
    assert code == 0, out


@needs_mypy
def test_mypy_strict_accepts_every_api(tmp_path):
    code, out = mypy_strict(
        tmp_path,
        """
        import os
        from datetime import datetime, timedelta, timezone
        from typing import Any

        from timebloom import (
            ClosedError, Engine, ForkedError, IncompleteError, ManualClock,
            NotReplicatedError, QuarantinedError, RedisEngine, TimebloomError,
        )


        def use(path: str) -> None:
            clock = ManualClock(datetime(2024, 1, 1, tzinfo=timezone.utc))
            clock = ManualClock(now=1_700_000_000)
            clock.set(1_700_000_000.5)
            clock.advance(timedelta(hours=1))
            clock.advance(5)
            t: int = clock.timestamp()
            e = Engine.create(path, "7d:counting", 1000, 0.01, utc_offset_secs=0, clock=clock, sync="always")
            e.close()
            e = Engine.open(os.fsencode(path), verify=True, read_only=False, clock=clock,
                            allow_clock_jump=True, sync="none", degraded=True)
            b: bool = e.insert("a") and e.insert(b"b") and e.contains("a") and ("a" in e)
            bs: list[bool] = e.insert_many(["x", b"y"]) + e.contains_many(iter(["x"]))
            b = e.contains_within("a", 60) or e.insert_within("a", timedelta(days=1))
            bs = e.insert_within_many(("q",), 3600.0)
            b = e.insert_at("z", datetime.now(timezone.utc)) or e.remove("z") or e.remove_at("z", 1_700_000_000)
            m: dict[str, list[str]] = e.maintain() or e.maintain(1_700_000_000)
            s: dict[str, Any] = e.stats()
            e.verify()
            e.flush()
            p: str = e.path
            b = e.closed or e.read_only or e.supports_remove
            st: str = e.sync + e.tiers
            with e as e2:
                e2.insert("k")
            try:
                pass
            except IncompleteError as err:
                bs = err.answers
                p = err.path
            except NotReplicatedError as err2:
                n: int = err2.acked + err2.wanted
                bs = err2.answers
            except QuarantinedError as err3:
                w: str = err3.window
            except ForkedError as f:
                c: ClosedError = f
            except TimebloomError as err4:
                p = err4.path
            r = RedisEngine.create("redis://x", "p", "1d", 10, 0.1, utc_offset_secs=0, shards=4,
                                   exist_ok=True, clock=clock, connect_timeout=1,
                                   io_timeout=timedelta(seconds=1), retries=2, cluster=False,
                                   wait_replicas=1, wait_timeout=1.5)
            r = RedisEngine.open("redis://x", "p", clock=None, connect_timeout=None, io_timeout=None,
                                 retries=None, cluster=True, wait_replicas=0, wait_timeout=None)
            b = r.insert("a") or r.insert_at("a", 0) or r.contains("a") or "a" in r
            b = r.contains_within("a", 1) or r.insert_within("a", 1)
            bs = r.insert_many(["a"]) + r.contains_many(["a"])
            bs = r.contains_within_many(["a"], 1) + r.insert_within_many(["a"], 1)
            s = r.stats()
            st = r.url + r.prefix + r.tiers
            n2: int = r.shards
            b = r.closed or r.is_cluster
            with r as r2:
                r2.close()
        """,
    )
    assert code == 0, out
