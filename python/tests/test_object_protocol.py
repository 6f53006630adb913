"""How engines and exceptions behave under Python's object protocols:
pickling and copying, weak references, repr, hashing, subclassing, the
key types a call takes, and the end of an engine left to the garbage
collector."""

import copy
import gc
import os
import pickle
import threading
import time
import weakref

import pytest

import timebloom
from timebloom import Engine, RedisEngine

# ---- pickle and copy -----------------------------------------------------------

COPIES = {
    "pickle": pickle.dumps,
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}


@pytest.mark.parametrize("how", sorted(COPIES))
def test_an_engine_refuses_pickle_and_copy_saying_why(tb_dir, how):
    with Engine.create(tb_dir, tiers="7d", items_per_day=100) as e:
        e.insert("a")
        with pytest.raises(TypeError) as info:
            COPIES[how](e)
        msg = str(info.value)
        assert "Engine" in msg
        assert "lock" in msg
        assert "Engine.open" in msg
        # Nothing was shared or taken away: the engine still works.
        assert e.insert("b") is True
    # And its lock is free once closed.
    Engine.open(tb_dir).close()


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_closed_engine_refuses_pickle_and_copy_too(tb_dir, how):
    e = Engine.create(tb_dir, tiers="7d", items_per_day=100)
    e.close()
    with pytest.raises(TypeError, match="Engine.open"):
        COPIES[how](e)


def _insert_one(engine):
    return engine.insert("from a worker")


def test_an_engine_handed_to_a_pool_task_fails_at_once_saying_why(tb_dir):
    import multiprocessing

    with Engine.create(tb_dir, tiers="7d", items_per_day=100) as e:
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            with pytest.raises(TypeError, match="Engine.open"):
                pool.apply(_insert_one, (e,))
        assert "from a worker" not in e


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_redis_engine_refuses_pickle_and_copy_saying_why(redis_server, prefix, how):
    with RedisEngine.create(redis_server.url, prefix, tiers="7d", items_per_day=100) as e:
        with pytest.raises(TypeError) as info:
            COPIES[how](e)
        msg = str(info.value)
        assert "RedisEngine" in msg
        assert "connection" in msg
        assert "RedisEngine.open" in msg
        assert e.insert("a") is True


EXCEPTIONS = sorted(
    (getattr(timebloom, name) for name in timebloom.__all__ if name.endswith("Error")),
    key=lambda c: c.__name__,
)


def test_every_exception_class_is_listed():
    assert len(EXCEPTIONS) >= 20
    for cls in EXCEPTIONS:
        assert issubclass(cls, timebloom.TimebloomError)


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda c: c.__name__)
def test_every_exception_round_trips_through_pickle(cls):
    err = cls("/data/seen.tb: something failed")
    err.path = "/data/seen.tb"
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert str(back) == str(err)
    assert back.args == err.args
    assert back.path == "/data/seen.tb"


def test_a_raised_error_round_trips_with_its_attributes(tb_dir):
    Engine.create(tb_dir, tiers="7d", items_per_day=100).close()
    with Engine.open(tb_dir):
        with pytest.raises(timebloom.LockedError) as info:
            Engine.open(tb_dir)
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is timebloom.LockedError
    assert str(back) == str(info.value)
    assert back.path == info.value.path == tb_dir


def test_an_incomplete_error_round_trips_with_its_answers(tb_dir):
    keys = [f"k{i}" for i in range(16_384)] + ["\ud800"]
    with Engine.create(tb_dir, tiers="7d", items_per_day=100_000) as e:
        with pytest.raises(timebloom.IncompleteError) as info:
            e.insert_many(keys)
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is timebloom.IncompleteError
    assert str(back) == str(info.value)
    assert back.answers == info.value.answers
    assert len(back.answers) == 16_384
    assert back.path == tb_dir


def _raise_locked(path):
    raise timebloom.LockedError(f"{path}: locked")


def test_an_exception_raised_in_a_pool_worker_reaches_the_parent(tb_dir):
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        with pytest.raises(timebloom.LockedError, match="locked"):
            pool.apply(_raise_locked, (tb_dir,))


# ---- weakref, repr, hash, subclassing ------------------------------------------


def test_an_engine_can_be_weakly_referenced(tb_dir):
    e = Engine.create(tb_dir, tiers="7d", items_per_day=100)
    ref = weakref.ref(e)
    assert ref() is e
    cache = weakref.WeakValueDictionary()
    cache[tb_dir] = e
    e.close()
    del e
    gc.collect()
    assert ref() is None
    assert tb_dir not in cache


def test_a_weakly_referenced_engine_lets_go_of_its_lock_when_dropped(tb_dir):
    e = Engine.create(tb_dir, tiers="7d", items_per_day=100)
    ref = weakref.ref(e)
    del e
    assert ref() is None
    Engine.open(tb_dir).close()


def test_a_redis_engine_can_be_weakly_referenced(redis_server, prefix):
    with RedisEngine.create(redis_server.url, prefix, tiers="7d", items_per_day=100) as e:
        assert weakref.ref(e)() is e


def test_repr_names_the_path_and_state(tb_dir):
    e = Engine.create(tb_dir, tiers="7d", items_per_day=100)
    assert repr(e) == f"<timebloom.Engine {tb_dir!r} open>"
    e.close()
    assert repr(e) == f"<timebloom.Engine {tb_dir!r} closed>"


def test_repr_names_a_path_that_is_not_utf8_as_the_path_attribute_does(tmp_path):
    # The byte 0xff is kept as the surrogate escape "\udcff" (os.fsdecode),
    # not replaced by U+FFFD, which names another directory.
    raw = os.fsencode(tmp_path) + b'/seen\xff"q.tb'
    with Engine.create(raw, tiers="7d", items_per_day=100) as e:
        assert e.path == os.fsdecode(raw)
        assert repr(e) == f"<timebloom.Engine {e.path!r} open>"
        assert "\ufffd" not in repr(e)


def test_hash_and_equality_are_identity(tb_dir):
    with Engine.create(tb_dir, tiers="7d", items_per_day=100) as e:
        assert e == e
        assert e != object()
        assert {e: 1}[e] == 1
        assert hash(e) == hash(e)
        r = Engine.open(tb_dir, read_only=True)
        assert r != e
        assert len({e, r}) == 2
        r.close()


@pytest.mark.parametrize("cls", [Engine, RedisEngine, timebloom.ManualClock])
def test_subclassing_is_a_clear_type_error(cls):
    # The stubs mark the classes @final.
    with pytest.raises(TypeError, match="base type"):
        type("My", (cls,), {})


@pytest.mark.parametrize("cls", [Engine, RedisEngine])
@pytest.mark.parametrize(
    "args, kwargs",
    [((), {}), (("some/dir",), {}), (("redis://127.0.0.1", "p"), {"tiers": "7d"})],
    ids=["no-args", "a-path", "args-and-keywords"],
)
def test_calling_the_class_is_a_type_error_naming_its_constructors(cls, args, kwargs):
    # Engine() or RedisEngine(url, prefix) is a guess a reader makes; the
    # answer names the two static methods instead of PyO3's "No constructor
    # defined", and nothing is created or opened.
    name = cls.__name__
    with pytest.raises(TypeError) as info:
        cls(*args, **kwargs)
    msg = str(info.value)
    assert "No constructor" not in msg
    assert f"{name}.create(" in msg
    assert f"{name}.open(" in msg


# ---- key types -----------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [bytearray(b"k"), memoryview(b"k"), memoryview(b"kxkx")[::2], 1, None, 1.5],
    ids=["bytearray", "memoryview", "memoryview-strided", "int", "None", "float"],
)
def test_a_key_of_another_type_is_a_type_error_naming_the_accepted_ones(tb_dir, key):
    with Engine.create(tb_dir, tiers="7d", items_per_day=100) as e:
        for call in (e.insert, e.contains, e.remove, lambda k: k in e):
            with pytest.raises(TypeError, match="str or bytes, not"):
                call(key)
        for many in (e.insert_many, e.contains_many):
            with pytest.raises(TypeError, match="str or bytes, not"):
                many(["a", key])
        assert e.contains_many(["a"]) == [False]  # nothing recorded


def test_a_lone_surrogate_is_a_unicode_encode_error(tb_dir):
    with Engine.create(tb_dir, tiers="7d", items_per_day=100) as e:
        for call in (e.insert, e.contains, lambda k: k in e, lambda k: e.insert_within(k, 60)):
            with pytest.raises(UnicodeEncodeError):
                call("\ud800")
        for many in (e.insert_many, e.contains_many):
            with pytest.raises(UnicodeEncodeError):
                many(["a", "b\ud800c"])
        # Neither "a" nor a lossy form of the key was recorded.
        assert e.contains_many(["a", "b?c", "b\ufffdc", b"b\xed\xa0\x80c"]) == [False] * 4


def _gen():
    yield "g1"
    yield b"g2"


@pytest.mark.parametrize(
    "make",
    [
        lambda: ("t1", b"t2"),
        lambda: {"s1", b"s2"},
        lambda: dict.fromkeys(["d1", b"d2"]).keys(),
        lambda: iter(["i1", b"i2"]),
        _gen,
        lambda: ["m1", b"m2", "m1".encode(), "m3"],
    ],
    ids=["tuple", "set", "dict-keys", "iterator", "generator", "mixed-list"],
)
def test_batches_take_any_iterable_of_str_and_bytes(tb_dir, make):
    with Engine.create(tb_dir, tiers="7d", items_per_day=100) as e:
        keys = list(make())
        raw = [k.encode() if isinstance(k, str) else k for k in keys]
        assert e.insert_many(make()) == [k not in raw[:i] for i, k in enumerate(raw)]
        assert e.contains_many(make()) == [True] * len(keys)
        for k in keys:
            assert k in e


def test_mixed_list_treats_a_str_and_its_utf8_as_one_key(tb_dir):
    with Engine.create(tb_dir, tiers="7d", items_per_day=100) as e:
        assert e.insert_many(["m1", b"m2", b"m1", "m2", "m3"]) == [True, True, False, False, True]


def test_an_iterator_that_raises_part_way_records_nothing(tb_dir):
    def keys():
        yield "r1"
        yield "r2"
        raise RuntimeError("feed broke")

    with Engine.create(tb_dir, tiers="7d", items_per_day=100) as e:
        with pytest.raises(RuntimeError, match="feed broke"):
            e.insert_many(keys())
        assert e.contains_many(["r1", "r2"]) == [False, False]
        with pytest.raises(RuntimeError, match="feed broke"):
            e.contains_many(keys())


def test_one_str_or_bytes_is_not_a_batch(tb_dir):
    with Engine.create(tb_dir, tiers="7d", items_per_day=100) as e:
        for one in ("abc", b"abc"):
            with pytest.raises(TypeError, match="not one str or bytes"):
                e.insert_many(one)


# ---- garbage collection ---------------------------------------------------------


class _Holder:
    pass


def test_an_engine_in_a_reference_cycle_lets_go_of_its_lock_when_collected(tb_dir):
    e = Engine.create(tb_dir, tiers="7d", items_per_day=100)
    e.insert("kept")
    a = _Holder()
    a.e = e
    a.self = a
    ref = weakref.ref(a)
    del a, e
    with pytest.raises(timebloom.LockedError):
        Engine.open(tb_dir)
    gc.collect()
    assert ref() is None
    with Engine.open(tb_dir) as again:
        assert "kept" in again


def test_an_engine_dropped_while_another_thread_is_in_insert_many_does_not_hang(tb_dir):
    e = Engine.create(tb_dir, tiers="7d", items_per_day=1_000_000)
    keys = [f"https://example.com/{i}" for i in range(200_000)]
    started = threading.Event()
    out = []

    def run(engine):
        started.set()
        out.append(len(engine.insert_many(keys)))

    t = threading.Thread(target=run, args=(e,))
    t.start()
    started.wait(10)
    del e
    gc.collect()
    t.join(60)
    assert not t.is_alive()
    assert out == [len(keys)]
    del t
    gc.collect()
    with Engine.open(tb_dir) as again:
        assert again.contains_many(keys[-3:]) == [True] * 3


def test_a_redis_engine_takes_the_same_keys_and_iterables(redis_server, prefix):
    def broken():
        yield "r1"
        raise RuntimeError("feed broke")

    with RedisEngine.create(redis_server.url, prefix, tiers="7d", items_per_day=100) as e:
        for key in (bytearray(b"k"), memoryview(b"k"), 1, None):
            with pytest.raises(TypeError, match="str or bytes, not"):
                e.insert(key)
            with pytest.raises(TypeError, match="str or bytes, not"):
                e.insert_many(["a", key])
        with pytest.raises(UnicodeEncodeError):
            e.insert("\ud800")
        with pytest.raises(UnicodeEncodeError):
            e.insert_many(["a", "\ud800"])
        with pytest.raises(RuntimeError, match="feed broke"):
            e.insert_many(broken())
        assert e.contains_many(("a", "r1")) == [False, False]
        assert e.insert_many(x for x in ["m1", b"m1", "m2"]) == [True, False, True]
        assert e.contains_many({b"m1", "m2"}) == [True, True]
        assert e.contains_many(dict.fromkeys(["m1"]).keys()) == [True]


def _stall_of_other_threads(end) -> tuple[float, float]:
    """How long `end()` took, and the longest another Python thread, waking
    every millisecond, went without running meanwhile."""
    gaps = []
    stop = threading.Event()

    def tick():
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.05)
    gaps.clear()
    t0 = time.perf_counter()
    end()
    took = time.perf_counter() - t0
    time.sleep(0.02)
    stop.set()
    t.join()
    return took, max(gaps)


@pytest.mark.parametrize("how", ["close", "drop"])
def test_other_threads_run_while_an_engine_is_closed_or_dropped(tb_dir, how):
    # The close of an engine syncs and unmaps its files (about half a
    # second here): close() releases the GIL meanwhile, and so must the
    # end of an engine left unclosed, which the garbage collector may
    # reach in any thread at any time.
    holder = [Engine.create(tb_dir, items_per_day=1_000_000)]
    holder[0].insert_many([f"https://example.com/{i}" for i in range(200_000)])
    end = holder[0].close if how == "close" else holder.clear
    took, stall = _stall_of_other_threads(end)
    assert stall < max(0.05, took / 2), f"{how} took {took:.3f} s, other threads stalled {stall:.3f} s"
    Engine.open(tb_dir).close()
