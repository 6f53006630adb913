"""The Python API of timebloom.Engine over the real engine."""

import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path

import pytest

import timebloom
from timebloom import Engine, ManualClock

from conftest import (  # tests/conftest.py
    close_it,
    drop_it,
    finish_child,
    in_forked_child,
    sigint_when,
)

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=timezone.utc)


def test_insert_reports_new_keys_and_str_equals_utf8_bytes(tb_dir):
    with Engine.create(tb_dir, items_per_day=1000) as e:
        assert e.insert("https://example.com/é") is True
        assert e.insert("https://example.com/é".encode()) is False
        assert e.insert(b"\x00\xff binary") is True
        assert e.contains("https://example.com/é")
        assert "https://example.com/é" in e
        assert not e.contains("https://example.com/other")
        assert e.insert("") is True
        assert e.contains(b"")


def test_a_str_that_is_not_valid_unicode_is_an_error_and_records_nothing(tb_dir):
    bad = "https://example.com/\ud800"  # a lone surrogate has no UTF-8
    with Engine.create(tb_dir, items_per_day=1000) as e:
        with pytest.raises(UnicodeEncodeError):
            e.insert(bad)
        with pytest.raises(UnicodeEncodeError):
            e.insert_many(["https://example.com/ok", bad])
        with pytest.raises(UnicodeEncodeError):
            e.contains(bad)
        assert not e.contains("https://example.com/ok")
        # Non-ASCII text is read as its UTF-8, in batches too.
        assert e.insert_many(["ünïcode", "ünïcode".encode(), "ascii"]) == [True, False, True]


def test_batches_match_single_calls(tb_dir):
    keys = [f"https://example.com/{i % 700}" for i in range(1000)]
    with Engine.create(tb_dir, items_per_day=10_000) as e:
        got = e.insert_many(keys)
        assert got == [i < 700 for i in range(1000)]
        assert e.insert_many(iter(["new", b"new", "https://example.com/3"])) == [True, False, False]
        assert e.contains_many(keys[:5] + ["absent"]) == [True] * 5 + [False]
        assert e.insert_many([]) == []
        assert e.contains_many(x for x in ()) == []


def test_a_joined_batch_reads_each_key_as_its_own_bytes(tb_dir):
    """A batch of str keys is joined by newlines and encoded once a piece;
    the keys must still be told apart exactly: empty keys, keys that are
    prefixes or concatenations of others, str subclasses, non-ASCII keys,
    and keys that hold the separator themselves."""

    class Url(str):
        def __len__(self):  # a subclass may answer len its own way
            return 1

    keys = ["", "ab", "a", "b", "abab", "", "ba", "https://example.com/x?q=1"]
    probe = ["aba", "bab", "abb", "aab", "https://example.com/x?q=", "https://example.com/x?q=12"]
    with Engine.create(tb_dir, items_per_day=1000) as e:
        assert e.insert_many(keys) == [True, True, True, True, True, False, True, True]
        for k in keys:
            assert e.contains(k.encode()), k
        assert e.contains_many(probe) == [False] * len(probe)
        assert not any(e.contains(p) for p in probe)
        assert e.insert_many([Url("zz"), "zz", Url("yy")]) == [True, False, True]
        assert e.contains(b"zz") and e.contains(b"yy") and not e.contains(b"z")
        # One non-ASCII key sends the whole batch key by key: same answers.
        assert e.insert_many(["ab", "é", "c"]) == [False, True, True]
        assert e.contains_many(["é".encode(), b"c", b"abc"]) == [True, True, False]
        # Batches are joined a piece at a time: pieces of ASCII keys around
        # a piece that holds one non-ASCII key and one bytes key.
        many = [f"https://example.com/{i % 2500}" for i in range(5000)]
        many[1500], many[1501] = "https://example.com/ü", b"https://example.com/b"
        seen, want = set(), []
        for k in many:
            b = k if isinstance(k, bytes) else k.encode()
            want.append(b not in seen)
            seen.add(b)
        assert e.insert_many(many) == want
        assert all(e.contains(k if isinstance(k, bytes) else k.encode()) for k in many)
        assert e.contains_many(f"https://example.com/{i}" for i in range(2500, 3500)) == [False] * 1000
        # Keys holding the separator: split at it, they would read as more
        # keys than the piece has (or as other keys); the piece is then
        # encoded key by key.
        # Separators at every place in an 8-byte word of the joined piece,
        # beside bytes one bit away from the newline (UTF-8 0x8a in "Ê" and
        # "Ċ", "\x0b", "J"): each key still its own.
        odd = ["o" + "".join("aÊĊ\x0bJ"[(i * 7 + j) % 5] for j in range(i % 23)) for i in range(300)]
        seen, want = set(), []
        for k in odd:
            want.append(k not in seen)
            seen.add(k)
        assert e.insert_many(odd) == want
        assert all(e.contains(k.encode()) for k in odd)
        assert e.contains_many([k + "a" for k in odd if k + "a" not in seen]) == [
            False
        ] * len([k for k in odd if k + "a" not in seen])
        nl = ["p\nq", "p", "q", "\n", "", "\n\n", "p\n", "\nq"]
        assert e.insert_many(nl) == [True, True, True, True, False, True, True, True]
        assert e.contains_many([b"p\nq", b"p", b"q", b"\n", b"\n\n", b"pq", b"p\n\nq"]) == [
            True, True, True, True, True, False, False,
        ]
        # Split at every newline, "x\n", "", "y" would read as "x", "", "",
        # "y": one key more than given, which is how the piece is caught.
        assert e.insert_many(["x\n", "", "y"]) == [True, False, True]
        assert not e.contains(b"x") and e.contains(b"x\n")
        # Non-ASCII keys are joined too: their UTF-8 never holds the byte.
        assert e.insert_many(["ü/1", "ü/2", "ü/1", "日本/1"]) == [True, True, False, True]
        assert e.contains_many([b"\xc3\xbc/1", "日本/1".encode(), "ü".encode()]) == [True, True, False]


def test_bad_keys_raise_type_errors_not_crashes(tb_dir):
    with Engine.create(tb_dir, items_per_day=1000) as e:
        for bad in (1, None, 2.5, ["a"], bytearray(b"a")):
            with pytest.raises(TypeError):
                e.insert(bad)
        with pytest.raises(TypeError):
            e.insert_many("abc")  # one str, not an iterable of keys
        with pytest.raises(TypeError):
            e.insert_many(["a", 3])
        with pytest.raises(TypeError):
            e.contains_many(5)
        with pytest.raises(TypeError):
            e.contains_within("a", "1d")
        with pytest.raises(ValueError):
            e.contains_within("a", -1)
        # Nothing of the failed batches was recorded.
        assert not e.contains("a")


def test_long_batches_go_in_chunks_with_the_same_answers(tb_dir):
    """A batch of more than 16,384 keys is copied out of Python and handed
    to the engine a chunk at a time: the answers are those of one call per
    key, repeats across chunks included, and the errors say how far it got."""
    n = 40_000
    keys = [f"https://example.com/{i % 30_000}" for i in range(n)]  # repeats after 30,000
    keys[17_000] = b"https://example.com/17000"  # bytes in the second chunk
    keys[20_000] = "https://example.com/ü\nx"  # a separator in the second chunk
    with Engine.create(tb_dir, items_per_day=100_000, fpr=1e-6) as e:
        seen, want = set(), []
        for k in keys:
            b = k if isinstance(k, bytes) else k.encode()
            want.append(b not in seen)
            seen.add(b)
        assert e.insert_many(iter(keys)) == want  # any iterable
        assert e.contains_many(keys) == [True] * n
        assert e.insert_within_many(keys, 3600) == [False] * n

        # A key of the wrong type anywhere: a TypeError before any key is
        # recorded, as for a short batch.
        fresh = [f"https://fresh.example/{i}" for i in range(n)]
        with pytest.raises(TypeError):
            e.insert_many(fresh[:35_000] + [35] + fresh[35_001:])
        assert sum(e.contains_many(fresh)) == 0

        # A key that cannot be encoded (a lone surrogate) in the third
        # chunk: the chunks before it are recorded and answered.
        bad = list(fresh)
        bad[35_000] = "https://fresh.example/\ud800"
        with pytest.raises(timebloom.IncompleteError) as info:
            e.insert_many(bad)
        done = len(info.value.answers)
        assert 0 < done <= 35_000 and done % 16_384 == 0
        assert info.value.answers == [True] * done
        assert isinstance(info.value.__cause__, UnicodeEncodeError)
        assert f"stopped after recording {done} keys" in str(info.value)
        assert e.contains_many(fresh[:done]) == [True] * done
        assert sum(e.contains_many(fresh[done:])) == 0
        # A lookup stops with the encoding error itself.
        with pytest.raises(UnicodeEncodeError):
            e.contains_many(bad)


def test_ctrl_c_stops_a_long_batch_between_chunks(tb_dir):
    # Ctrl-C during a long `insert_many` used to be raised only after the
    # whole batch returned, its answers lost. It now stops the batch at
    # the end of a chunk, as the KeyboardInterrupt itself (which
    # `except Exception` does not catch), the answers of the chunks
    # recorded in its `answers`.
    keys = [f"https://sigint.example/{i}" for i in range(3_000_000)]
    with Engine.create(tb_dir, tiers="7d", items_per_day=3_000_000, fpr=0.01) as e:
        # Once the batch has recorded its first chunk.
        with sigint_when(lambda: e.contains(keys[0])):
            with pytest.raises(KeyboardInterrupt) as info:
                e.insert_many(keys)
        done = len(info.value.answers)
        assert 0 < done < len(keys) and done % 16_384 == 0, done
        assert info.value.answers == [True] * done
        assert e.contains_many(keys[:done]) == [True] * done
        # The rest were not recorded (up to the 1% false positives).
        assert sum(e.contains_many(keys[done:])) < 0.02 * (len(keys) - done)


def test_reopen_finds_keys_and_config(tb_dir):
    with Engine.create(tb_dir, tiers="3d,2w", items_per_day=500, fpr=0.01) as e:
        e.insert_many([f"k{i}" for i in range(100)])
    with Engine.open(tb_dir, verify=True) as e:
        assert all(e.contains_many([f"k{i}" for i in range(100)]))
        assert e.tiers == "3d,2w"
        s = e.stats()
        assert s["fpr"] == 0.01
        assert s["expected_items_per_day"] == 500
        assert [t["tier"] for t in s["tiers"]] == ["3d", "2w"]
        e.verify()
        e.flush()


def test_pathlike_and_path_attribute(tmp_path):
    p = tmp_path / "eng"
    with Engine.create(p, items_per_day=10) as e:
        assert e.path == str(p)
        assert repr(e).endswith("open>")
    assert e.closed
    assert repr(e).endswith("closed>")


def test_a_path_that_is_not_utf8_round_trips_through_the_path_attributes(tmp_path):
    # A directory named in Latin-1 (b"caf\xe9.tb"), as os.listdir gives it:
    # `path` and the errors' `path` are os.fsdecode's name, which opens the
    # same directory again, not a lossy one with U+FFFD in it.
    p = os.path.join(os.fsdecode(tmp_path), os.fsdecode(b"caf\xe9.tb"))
    e = Engine.create(p, "7d", items_per_day=100)
    try:
        assert e.path == p
        with pytest.raises(timebloom.LockedError) as info:
            Engine.open(e.path)
        assert info.value.path == p
    finally:
        e.close()
    with Engine.open(e.path) as again:
        assert again.path == p


def test_close_is_idempotent_and_later_calls_raise(tb_dir):
    e = Engine.create(tb_dir, items_per_day=10)
    e.close()
    e.close()
    with pytest.raises(timebloom.ClosedError) as info:
        e.insert("a")
    assert tb_dir in str(info.value)
    assert info.value.path == tb_dir
    with pytest.raises(timebloom.ClosedError):
        e.insert_many(["a"])
    with pytest.raises(timebloom.TimebloomError):
        e.stats()


def test_with_on_a_closed_engine_raises_closed_error(tb_dir):
    # `with` on a closed engine used to enter the block, whose first call
    # then failed; it now raises as every other call after close does.
    e = Engine.create(tb_dir, items_per_day=10)
    e.close()
    with pytest.raises(timebloom.ClosedError) as info:
        with e:
            pytest.fail("entered the block of a closed engine")
    assert info.value.path == tb_dir


def test_an_empty_insert_within_many_refuses_a_horizon_too_long(tb_dir):
    # An empty batch answered [] for a horizon no tier keeps (RedisEngine
    # raised): the horizon is refused whatever the batch holds.
    with Engine.create(tb_dir, tiers="7d", items_per_day=10) as e:
        with pytest.raises(timebloom.HorizonTooLongError):
            e.insert_within_many(["a"], timedelta(days=60))
        with pytest.raises(timebloom.HorizonTooLongError):
            e.insert_within_many([], timedelta(days=60))
        assert e.insert_within_many([], timedelta(days=1)) == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
@pytest.mark.parametrize("let_go", [close_it, drop_it])
def test_fork_a_child_cannot_use_an_inherited_engine_and_keeps_no_lock(tb_dir, let_go):
    """A child made by ``fork`` must not write what the parent writes: its
    calls raise ``ForkedError``. Letting go of the engine there (``close``,
    or dropping the last reference) writes nothing and closes the child's
    copy of the directory lock: the parent, still running beside the
    child, closes and opens the directory again."""
    held = [Engine.create(tb_dir, "7d", items_per_day=1000)]
    assert held[0].insert("https://example.com/parent")
    pid, to_parent_r, to_child_w = in_forked_child(held, let_go)
    try:
        assert os.read(to_parent_r, 1) == b"x"
        # The parent's engine is unaffected by the child.
        assert held[0].insert("https://example.com/after-fork")
        held[0].close()
        # The child, still alive, no longer holds the lock.
        with Engine.open(tb_dir) as again:
            assert again.contains("https://example.com/parent")
            assert again.contains("https://example.com/after-fork")
            assert not again.contains("https://example.com/child")
    finally:
        finish_child(pid, to_child_w)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_fork_while_other_threads_are_inside_calls_a_child_still_lets_go_of_the_lock(tb_dir):
    """A child forked while other threads of the parent were inside a call
    (GIL released) cannot take the engine out (those calls never end in
    the child), yet its ``close`` still closes its copy of the directory
    lock: the parent closes and opens the directory again while every
    child lives."""
    e = Engine.create(tb_dir, "7d,4w,12m", items_per_day=1_000_000, sync="none")
    keys = [f"https://example.com/{i}" for i in range(100_000)]
    stop = threading.Event()

    def work():
        while not stop.is_set():
            e.insert_many(keys)

    workers = [threading.Thread(target=work) for _ in range(2)]
    for t in workers:
        t.start()
    children = []
    try:
        for _ in range(8):  # most forks land inside a worker's call
            to_parent_r, to_parent_w = os.pipe()
            to_child_r, to_child_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    e.close()
                    os.write(to_parent_w, b"x")
                    os.read(to_child_r, 1)
                finally:
                    os._exit(0)
            os.close(to_parent_w)
            os.close(to_child_r)
            children.append((pid, to_child_w))
            assert os.read(to_parent_r, 1) == b"x"
            os.close(to_parent_r)
        stop.set()
        for t in workers:
            t.join()
        e.close()
        # Every child is alive, and none holds the lock.
        with Engine.open(tb_dir) as again:
            assert again.contains(keys[-1])
    finally:
        stop.set()
        for pid, to_child_w in children:
            finish_child(pid, to_child_w)


def test_errors_are_typed_and_name_the_path(tb_dir, tmp_path):
    with pytest.raises(timebloom.NotFoundError) as info:
        Engine.open(tb_dir)
    assert tb_dir in str(info.value) and info.value.path == tb_dir

    with pytest.raises(timebloom.InvalidConfigError) as info:
        Engine.create(tb_dir, tiers="7x")
    assert tb_dir in str(info.value)
    with pytest.raises(timebloom.InvalidConfigError):
        Engine.create(tb_dir, fpr=1.5)
    with pytest.raises(timebloom.InvalidConfigError):
        Engine.create(tb_dir, items_per_day=0)
    with pytest.raises(OverflowError):
        Engine.create(tb_dir, items_per_day=-1)
    assert not os.path.exists(tb_dir), "a refused create leaves nothing behind"

    e = Engine.create(tb_dir, items_per_day=10)
    with pytest.raises(timebloom.LockedError) as info:
        Engine.open(tb_dir)
    assert tb_dir in str(info.value)
    with pytest.raises(timebloom.AlreadyExistsError):
        Engine.create(tb_dir)
    with pytest.raises(timebloom.RemoveUnsupportedError) as info:
        e.remove("a")
    assert tb_dir in str(info.value)
    with pytest.raises(timebloom.HorizonTooLongError):
        e.contains_within("a", timedelta(days=5000))
    with pytest.raises(timebloom.WindowUnavailableError):
        e.insert_at("a", datetime(2001, 1, 1, tzinfo=timezone.utc))
    with pytest.raises(ValueError):
        e.insert_at("a", datetime(2001, 1, 1))  # naive: ambiguous
    e.close()
    for cls in (
        timebloom.NotFoundError,
        timebloom.LockedError,
        timebloom.CorruptError,
        timebloom.RemoveUnsupportedError,
        timebloom.ClosedError,
    ):
        assert issubclass(cls, timebloom.TimebloomError)


def test_corrupt_segment_is_a_corrupt_error_naming_the_file(tb_dir):
    clock = ManualClock(T0)
    with Engine.create(tb_dir, tiers="2d", items_per_day=1000, clock=clock) as e:
        e.insert("a")
        clock.advance(timedelta(days=1))
        e.insert("b")  # rotates: yesterday's segment is sealed
    seg = Path(tb_dir) / "seg"
    quarantined = Path(tb_dir) / "quarantine"
    files = sorted(seg.iterdir())
    assert files
    victim = files[0]
    good = victim.read_bytes()
    data = bytearray(good)
    data[-1] ^= 0xFF  # the last byte of the body: a sealed body's checksum fails
    victim.write_bytes(bytes(data))
    e = Engine.open(tb_dir, clock=clock)  # opening reads only headers
    with pytest.raises(timebloom.CorruptError) as info:
        e.verify()
    assert victim.name in str(info.value)
    e.close()
    # Checked at open, the file is moved aside and the open refused.
    with pytest.raises(timebloom.QuarantinedError) as info:
        Engine.open(tb_dir, verify=True, clock=clock)
    assert isinstance(info.value, timebloom.CorruptError)
    assert info.value.path == str(quarantined / victim.name)
    assert info.value.window == "2d 20260310"
    assert victim.name in str(info.value) and not victim.exists()
    with pytest.raises(timebloom.QuarantinedError):
        Engine.open(tb_dir, clock=clock)  # until the file is back
    (quarantined / victim.name).unlink()
    victim.write_bytes(good)  # restored from a backup
    data = bytearray(good)
    data[0] ^= 0xFF  # the magic of the first header copy (offset 0)
    victim.write_bytes(bytes(data))
    # A read-only open changes nothing (a writer's open may rewrite the copy).
    with Engine.open(tb_dir, clock=clock, read_only=True) as e:  # the second copy serves
        assert e.contains("a")
        with pytest.raises(timebloom.CorruptError) as info:
            e.verify()  # and verify names the damaged copy's file
        assert victim.name in str(info.value)
    data[2048] ^= 0xFF  # the magic of the second copy
    victim.write_bytes(bytes(data))
    with pytest.raises(timebloom.CorruptError) as info:
        Engine.open(tb_dir, clock=clock)
    assert victim.name in str(info.value)
    # degraded=True goes on without the window, and says so.
    with Engine.open(tb_dir, clock=clock, degraded=True) as e:
        assert e.stats()["lost_windows"] == ["2d 20260310"]
        assert e.stats()["log_damage"] is None  # no log damage gone past
        assert "b" in e and "a" not in e
    with Engine.open(tb_dir, clock=clock) as e:  # the manifest dropped it
        assert e.stats()["lost_windows"] == []
        assert "b" in e


def test_contains_within_and_expiry_with_a_manual_clock(tb_dir):
    clock = ManualClock(T0)
    assert clock.timestamp() == int(T0.timestamp())
    with Engine.create(tb_dir, tiers="7d,4w", items_per_day=1000, clock=clock) as e:
        assert e.insert("old")
        clock.advance(timedelta(days=3))
        assert e.insert("recent")
        assert e.contains_within("recent", timedelta(days=1))
        assert e.contains_within("recent", 86_400)
        assert not e.contains_within("old", timedelta(days=1))
        assert e.contains_within("old", timedelta(days=5))
        assert e.contains("old")
        for _ in range(6):  # a week at a time: windows expire in turn
            clock.advance(timedelta(weeks=1))
            e.insert("tick")
        assert not e.contains("old"), "expired with its windows"
        assert e.insert("old")


def test_insert_within_claims_a_key_once_it_is_due(tb_dir):
    clock = ManualClock(T0)
    with Engine.create(tb_dir, tiers="7d,4w", items_per_day=1000, clock=clock) as e:
        assert e.insert_within("a", timedelta(days=3))  # first sight
        assert not e.insert_within(b"a", 3 * 86_400)  # str and bytes: one key
        clock.advance(timedelta(days=2))
        assert not e.insert_within("a", timedelta(days=3))  # not recorded again
        clock.advance(timedelta(days=2))
        assert e.insert_within("a", timedelta(days=3))  # 4 days since the record
        assert e.insert_within_many(["a", "b", "b"], timedelta(days=3)) == [False, True, False]
        with pytest.raises(timebloom.HorizonTooLongError):
            e.insert_within("c", timedelta(days=400))
        assert "c" not in e, "a refused call records nothing"


def test_of_many_threads_one_claims_each_due_key(tb_dir):
    clock = ManualClock(T0)
    keys = [f"https://example.com/{i}" for i in range(3000)]
    with Engine.create(tb_dir, tiers="7d,4w", items_per_day=10_000, fpr=1e-6, clock=clock) as e:
        e.insert_many(keys)
        clock.advance(timedelta(days=5))
        claims: list = [None] * 6

        def work(t: int) -> None:
            mine = keys[t * 500 :] + keys[: t * 500]
            if t % 2:
                claims[t] = list(zip(mine, e.insert_within_many(mine, timedelta(days=2))))
            else:
                claims[t] = [(k, e.insert_within(k, timedelta(days=2))) for k in mine]

        threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        won: dict = {}
        for c in claims:
            for k, due in c:
                won[k] = won.get(k, 0) + due
        assert sorted(set(won.values())) == [1], "every due key claimed exactly once"


def test_a_fingerprint_tier_answers_horizons_by_day_and_removes(tb_dir):
    clock = ManualClock(T0)
    with Engine.create(tb_dir, tiers="7d,365d:fingerprint", items_per_day=1000, clock=clock) as e:
        assert e.tiers == "7d,365d:fingerprint"
        assert e.insert("old") and not e.insert("old")
        clock.advance(timedelta(days=40))
        assert e.insert("recent")
        # Past the 7-day tier, the table answers at day precision.
        assert e.contains_within("old", timedelta(days=41))
        assert not e.contains_within("old", timedelta(days=39))
        assert e.contains("old") and e.contains("recent")
        assert e.insert_within("old", timedelta(days=30))  # due: 40 days since
        assert not e.insert_within("old", timedelta(days=30))
        tiers = {t["tier"]: t for t in e.stats()["tiers"]}
        assert "365d:fingerprint" in tiers
    with Engine.open(tb_dir, clock=clock) as e:
        assert e.contains("old") and e.contains_within("recent", timedelta(days=1))
        with pytest.raises(timebloom.RemoveUnsupportedError):
            e.remove("recent")  # the 7d tier is a plain Bloom tier
    with Engine.create(str(tb_dir) + "-t", tiers="365d:fingerprint", items_per_day=1000, clock=clock) as e:
        assert e.insert_many(["a", "b", "a"]) == [True, True, False]
        assert e.remove("a") and not e.contains("a") and e.contains("b")


def test_a_clock_stepped_back_days_keeps_every_key_of_a_table(tb_dir):
    # A VM restored from a snapshot: the clock reads four days earlier than
    # the newest keys. The table keeps its newest day until the clock
    # catches up, in this process and after a reopen.
    clock = ManualClock(T0)
    urls = [f"https://example.com/{d}/{i}" for d in range(2) for i in range(200)]
    with Engine.create(tb_dir, tiers="30d:fingerprint", items_per_day=1000, clock=clock) as e:
        first = e.insert_many(urls[:200])
        clock.advance(timedelta(days=4))
        second = e.insert_many(urls[200:])
        clock.set(T0)
        new = first + second
        assert sum(new) >= 390
        assert all(e.contains_many([u for u, n in zip(urls, new) if n]))
    with Engine.open(tb_dir, clock=clock) as e:
        assert all(e.contains_many([u for u, n in zip(urls, new) if n]))
        # "Within a day" counts back from the newest day, not the clock's.
        recent = [u for u, n in zip(urls[200:], second) if n]
        assert all(e.contains_within(u, timedelta(days=1)) for u in recent)


def test_a_clock_jump_past_every_window_is_refused_until_maintain(tb_dir):
    clock = ManualClock(T0)
    with Engine.create(tb_dir, tiers="7d", items_per_day=1000, clock=clock) as e:
        e.insert("a")
        clock.advance(timedelta(days=30))
        with pytest.raises(timebloom.ClockJumpError) as info:
            e.insert("b")
        assert tb_dir in str(info.value)
        changes = e.maintain()
        assert changes["expired"] and changes["opened"]
        assert not e.contains("a")
        assert e.insert("b")
        assert e.maintain(clock.timestamp()) == {"opened": [], "sealed": [], "expired": []}
    clock.advance(timedelta(days=30))
    with pytest.raises(timebloom.ClockJumpError):
        Engine.open(tb_dir, clock=clock)
    with Engine.open(tb_dir, clock=clock, allow_clock_jump=True) as e:
        assert not e.contains("b")


def test_read_only_open_answers_lookups_beside_a_writer(tb_dir):
    with Engine.create(tb_dir, items_per_day=1000) as w:
        w.insert("a")
        w.flush()
        with Engine.open(tb_dir, read_only=True) as r:  # no lock taken
            assert r.read_only and not w.read_only
            assert r.contains("a")
            assert r.contains_many(["a", "zz"]) == [True, False]
            for write in (lambda: r.insert("b"), lambda: r.insert_many(["b"])):
                with pytest.raises(timebloom.ReadOnlyError) as info:
                    write()
                assert tb_dir in str(info.value)
            w.insert("c")
            assert r.contains("c"), "sees the writer's inserts into mapped segments"


def test_create_refuses_a_directory_with_other_files(tmp_path):
    d = tmp_path / "busy"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    with pytest.raises(timebloom.NotEmptyError) as info:
        Engine.create(d)
    assert str(d) in str(info.value)
    assert (d / "notes.txt").read_text() == "mine"


def test_insert_at_backfills_into_the_past(tb_dir):
    clock = ManualClock(T0)
    with Engine.create(tb_dir, tiers="7d,4w", items_per_day=1000, clock=clock) as e:
        assert e.insert_at("backfilled", T0 - timedelta(days=4)) is True
        assert e.insert_at("backfilled", (T0 - timedelta(days=2)).timestamp()) is False
        assert e.contains("backfilled")
        assert not e.contains_within("backfilled", timedelta(days=1))
        assert e.contains_within("backfilled", timedelta(days=5))
        with pytest.raises(timebloom.WindowUnavailableError):
            e.insert_at("future", T0 + timedelta(days=2))


def test_remove_on_counting_tiers(tb_dir):
    with Engine.create(tb_dir, tiers="7d:counting", items_per_day=1000) as e:
        assert e.supports_remove
        e.insert("a")
        assert e.remove("a") is True
        assert not e.contains("a")
        assert e.remove("a") is False
        e.insert_at("b", datetime.now(timezone.utc) - timedelta(days=2))
        e.insert("b")
        assert e.remove_at("b", datetime.now(timezone.utc) - timedelta(days=2)) is True
        assert e.contains("b"), "today's insert stays"
        assert e.remove("b") is True
        assert not e.contains("b")


def test_remove_at_needs_counting_tiers(tb_dir):
    with Engine.create(tb_dir, items_per_day=1000) as e:
        with pytest.raises(timebloom.RemoveUnsupportedError):
            e.remove_at("a", datetime.now(timezone.utc))


def test_stats_is_a_plain_dict(tb_dir):
    with Engine.create(tb_dir, items_per_day=1000) as e:
        e.insert_many([str(i) for i in range(500)])
        s = e.stats()
    assert isinstance(s, dict)
    daily = s["tiers"][0]
    assert daily["answers_contains"] in (True, False)
    est = sum(seg["estimated_items"] for seg in daily["segments"])
    assert 450 <= est <= 550


def test_threads_share_one_engine(tb_dir):
    """Of many threads inserting overlapping keys, each key is new exactly once."""
    n_threads, per = 8, 4000
    results = [None] * n_threads
    with Engine.create(tb_dir, items_per_day=100_000) as e:

        def work(t):
            keys = [f"k{(t * per // 2) + i}" for i in range(per)]  # half overlaps the next thread
            if t % 2:
                results[t] = list(zip(keys, e.insert_many(keys)))
            else:
                results[t] = [(k, e.insert(k)) for k in keys]

        threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        new = {}
        for r in results:
            for k, was_new in r:
                new[k] = new.get(k, 0) + was_new
        distinct = {k for r in results for k, _ in r}
        assert all(new[k] == 1 for k in distinct), "every key new exactly once"
        assert all(e.contains_many(sorted(distinct)))


def longest_stall(call) -> tuple:
    """Runs ``call`` while another Python thread ticks; returns how long the
    call took and the longest time the other thread went without a tick
    meanwhile (about the whole call when the call held the GIL)."""
    stamps: list = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            stamps.append(time.perf_counter())

    th = threading.Thread(target=tick)
    th.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    call()
    t1 = time.perf_counter()
    stop.set()
    th.join()
    inside = [t0] + [t for t in stamps if t0 < t < t1] + [t1]
    return t1 - t0, max(b - a for a, b in zip(inside, inside[1:]))


def test_single_writes_that_create_windows_let_other_threads_run(tb_dir):
    """A single-key write normally keeps the GIL (it takes well under a
    microsecond). One that first rotates the windows (a boundary passed:
    new window files, the manifest synced) or a backfill that creates a
    past window's file takes far longer: other Python threads run
    meanwhile, as they do during a batch."""
    clock = ManualClock(datetime(2026, 3, 31, 12, 0, tzinfo=timezone.utc))
    with Engine.create(tb_dir, items_per_day=1_000_000, clock=clock) as e:
        e.insert("warm")
        checked = 0
        for name, before, call in [
            ("insert across a month's boundary", lambda: clock.advance(timedelta(days=1)), lambda: e.insert("a")),
            ("insert_within across a month's boundary", lambda: clock.advance(timedelta(days=31)), lambda: e.insert_within("b", 3600)),
            ("insert_at into a window not yet made", lambda: None, lambda: e.insert_at("c", clock.timestamp() - 3 * 86_400)),
        ]:  # fmt: skip
            before()
            took, stall = longest_stall(call)
            if took < 0.05:
                continue  # too fast here to tell
            checked += 1
            assert stall < took / 2, f"{name}: {took:.3f} s, the other thread stalled {stall:.3f} s"
        assert e.contains_many(["a", "b", "c"]) == [True] * 3
        assert checked, "every call was too fast to tell (the test needs windows that take time to make)"


def test_close_while_other_threads_insert(tb_dir):
    e = Engine.create(tb_dir, items_per_day=100_000)
    errors = []
    stop = threading.Event()

    def work():
        i = 0
        while not stop.is_set():
            try:
                e.insert_many([f"{threading.get_ident()}-{i}-{j}" for j in range(200)])
            except timebloom.ClosedError:
                return
            except BaseException as x:  # noqa: BLE001 - any other error fails the test
                errors.append(x)
                return
            i += 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    e.close()
    stop.set()
    for th in threads:
        th.join()
    assert not errors
    with Engine.open(tb_dir) as again:
        again.verify()


def test_long_batches_from_threads_and_a_close_between_their_chunks(tb_dir):
    """Batches of several chunks each (more than 16,384 keys) from two
    threads meeting in the middle of the same keys: each key is new exactly
    once. A close while such batches run stops each one between two chunks
    at the latest: what an IncompleteError's answers say was recorded is
    there after a reopen, and the keys after them are not."""
    n = 40_000
    keys = [f"https://long.example/{i}" for i in range(n)]
    with Engine.create(tb_dir, items_per_day=200_000, fpr=1e-6) as e:
        results = [{}, {}]

        def meet(t):
            ks = keys if t == 0 else keys[::-1]
            results[t] = dict(zip(ks, e.insert_many(ks)))

        threads = [threading.Thread(target=meet, args=(t,)) for t in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert all(results[0][k] + results[1][k] == 1 for k in keys), "every key new exactly once"

    e = Engine.open(tb_dir)
    outcomes = []
    started = threading.Barrier(3)

    def late(t):
        fresh = [f"https://late.example/{t}/{i}" for i in range(3 * 16_384)]
        started.wait()
        try:
            outcomes.append((fresh, e.insert_many(fresh)))
        except timebloom.IncompleteError as x:
            assert isinstance(x.__cause__, timebloom.ClosedError), x
            outcomes.append((fresh, x.answers))
        except timebloom.ClosedError:
            outcomes.append((fresh, []))

    threads = [threading.Thread(target=late, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    started.wait()
    e.close()
    for th in threads:
        th.join()
    assert len(outcomes) == 2
    with Engine.open(tb_dir) as again:
        for fresh, answers in outcomes:
            done = len(answers)
            assert answers == [True] * done
            assert again.contains_many(fresh[:done]) == [True] * done
            assert sum(again.contains_many(fresh[done:])) == 0


SCRIPT = """
import os, sys, timebloom
e = timebloom.Engine.{how}
e.insert_many([f"k{{i}}" for i in range(1000)])
{ending}
"""


@pytest.mark.parametrize(
    "ending",
    [
        "",  # the interpreter exits with the engine open
        "sys.stdout.flush(); os._exit(0)",  # no destructor runs at all
        "e2 = e; del e; import gc; gc.collect()",
    ],
)
def test_reopen_after_the_interpreter_exits_with_the_engine_open(tb_dir, ending):
    code = SCRIPT.format(how=f"create({tb_dir!r}, items_per_day=10_000)", ending=ending)
    subprocess.run([sys.executable, "-c", code], check=True)
    with Engine.open(tb_dir) as e:
        assert all(e.contains_many([f"k{i}" for i in range(1000)]))
        assert not any(e.contains_many([f"x{i}" for i in range(100)]))
        e.verify()


def test_the_lock_is_released_when_the_process_dies(tb_dir):
    code = SCRIPT.format(
        how=f"create({tb_dir!r}, items_per_day=10_000)",
        ending="print('ready', flush=True); sys.stdin.read()",
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        with pytest.raises(timebloom.LockedError):
            Engine.open(tb_dir)
    finally:
        p.kill()
        p.wait()
    with Engine.open(tb_dir) as e:
        assert e.contains("k999")


def stored_sync(path) -> object:
    """The sync policy in the MANIFEST's JSON body (docs/format.md), read
    without the binding: bytes 12..16 are its length, the body starts at 20."""
    raw = (Path(path) / "MANIFEST").read_bytes()
    n = int.from_bytes(raw[12:16], "little")
    return json.loads(raw[20 : 20 + n])["config"]["sync"]


@pytest.mark.parametrize(
    "policy, in_manifest",
    [
        ("always", "always"),
        ("interval=1s", {"interval": {"secs": 1, "nanos": 0}}),
        ("interval=250ms", {"interval": {"secs": 0, "nanos": 250_000_000}}),
        ("none", "none"),
    ],
)
def test_sync_is_stored_at_create_and_replaced_for_one_open(tb_dir, policy, in_manifest):
    with Engine.create(tb_dir, tiers="7d", items_per_day=1000, sync=policy) as e:
        assert e.sync == policy
        assert e.insert("k")
    assert stored_sync(tb_dir) == in_manifest
    # The write-ahead log exists under the logged policies only.
    assert os.path.isdir(os.path.join(tb_dir, "wal")) == (policy != "none")
    with Engine.open(tb_dir) as e:
        assert e.sync == policy
        assert "k" in e
    other = "none" if policy != "none" else "always"
    with Engine.open(tb_dir, sync=other) as e:
        assert e.sync == other
        assert e.insert("k2")
    # This open only: the stored policy is unchanged.
    assert stored_sync(tb_dir) == in_manifest
    with Engine.open(tb_dir) as e:
        assert e.sync == policy
        assert "k2" in e
    with Engine.open(tb_dir, read_only=True) as e:
        assert e.sync == policy


def test_the_default_sync_is_a_one_second_interval(tb_dir):
    with Engine.create(tb_dir, items_per_day=10) as e:
        assert e.sync == "interval=1s"


def test_a_bad_sync_policy_is_an_invalid_config_error(tb_dir):
    for bad in ("sometimes", "Always", "interval=", "interval=0s", "interval=2h", "interval=5", ""):
        with pytest.raises(timebloom.InvalidConfigError) as info:
            Engine.create(tb_dir, items_per_day=10, sync=bad)
        assert tb_dir in str(info.value) and "sync policy" in str(info.value)
    with pytest.raises(TypeError):
        Engine.create(tb_dir, items_per_day=10, sync=1)
    assert not os.path.exists(tb_dir), "a refused create leaves nothing behind"
    Engine.create(tb_dir, items_per_day=10).close()
    with pytest.raises(timebloom.InvalidConfigError):
        Engine.open(tb_dir, sync="fsync")
    with pytest.raises(ValueError):
        Engine.open(tb_dir, read_only=True, sync="always")
    # Nothing was left locked.
    Engine.open(tb_dir, sync="none").close()


POWER_LOSS = """
import os, sys, timebloom
e = timebloom.Engine.open({path!r}, clock=timebloom.ManualClock({now}){sync})
print("ready", flush=True)
sys.stdin.readline()
new = sum(e.insert(f"k{{i}}") for i in range(100))
new += sum(e.insert_many([f"b{{i}}" for i in range(100)]))
print("inserted", new, flush=True)
sys.stdin.readline()
os._exit(0)
"""


def log_bytes(path) -> int:
    """The bytes of the engine's log files (``wal/*.log``)."""
    return sum(f.stat().st_size for f in Path(path, "wal").glob("*.log"))


@pytest.mark.parametrize(
    "stored, this_open, wait, kept",
    [
        ("always", None, 0, True),
        ("none", None, 0, False),
        ("interval=100ms", None, 2, True),  # the interval passed before the crash
        ("none", "always", 0, True),
        ("always", "none", 0, False),
    ],
)
def test_what_each_policy_keeps_when_no_written_page_reaches_the_disk(tb_dir, stored, this_open, wait, kept):
    """A power loss as bad as it gets: a writer inserts and dies, and not one
    segment page it dirtied reaches the disk (the files are put back as they
    were before its inserts, wal/BOOT removed so that the next open recovers
    as after a power loss). What survives is what the policy logged."""
    clock_at = int(T0.timestamp())
    Engine.create(tb_dir, tiers="7d", items_per_day=1000, sync=stored, clock=ManualClock(T0)).close()
    sync = "" if this_open is None else f", sync={this_open!r}"
    code = POWER_LOSS.format(path=tb_dir, now=clock_at, sync=sync)
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        seg = Path(tb_dir, "seg")
        before = {f: f.read_bytes() for f in seg.iterdir()}
        logged = log_bytes(tb_dir) if os.path.isdir(Path(tb_dir, "wal")) else 0
        p.stdin.write("go\n")
        p.stdin.flush()
        word, new = p.stdout.readline().split()
        assert word == "inserted"
        if wait:
            # The interval passes before the crash: at least `wait` seconds,
            # and on until the syncer has moved a record of every new key
            # into the log (40 bytes each, docs/format.md), which on a busy
            # machine may take longer (at most 60 s).
            time.sleep(wait)
            deadline = time.monotonic() + 60
            while log_bytes(tb_dir) < logged + 40 * int(new) and time.monotonic() < deadline:
                time.sleep(0.05)
        p.stdin.write("crash\n")
        p.stdin.flush()
        assert p.wait(timeout=60) == 0
    finally:
        p.kill()
        p.wait()
    assert set(seg.iterdir()) == set(before), "no window rotated or grew"
    for f, body in before.items():
        f.write_bytes(body)
    Path(tb_dir, "wal", "BOOT").unlink(missing_ok=True)
    with Engine.open(tb_dir, clock=ManualClock(T0)) as e:
        assert e.sync == stored
        keys = [f"k{i}" for i in range(100)] + [f"b{i}" for i in range(100)]
        assert e.contains_many(keys) == [kept] * 200


def test_manual_clock_rejects_bad_instants():
    with pytest.raises(ValueError):
        ManualClock(-5)
    with pytest.raises(ValueError):
        ManualClock(datetime(2020, 1, 1))
    with pytest.raises(TypeError):
        ManualClock("2020-01-01")
    c = ManualClock(100)
    c.advance(timedelta(seconds=20))
    c.advance(5)
    assert c.timestamp() == 125
    c.set(T0)
    assert c.timestamp() == int(T0.timestamp())


def test_arguments_out_of_range_are_value_errors_not_panics(tmp_path):
    # Found in review: a path the file system encoding cannot hold made
    # pyo3's path conversion panic (a PanicException, which `except
    # Exception` does not catch); an int horizon too large for a float was
    # a TypeError; a clock advanced past 2**63 seconds wrapped to 1970; a
    # zero Redis timeout failed only at connect, as a RedisError.
    bad = str(tmp_path / "x\ud800")
    for call in (lambda: Engine.create(bad), lambda: Engine.open(bad)):
        with pytest.raises(UnicodeEncodeError):
            call()
    e = Engine.create(tmp_path / "e", clock=ManualClock(T0))
    try:
        for horizon in (2**64, 10**400):
            with pytest.raises(ValueError, match="not a valid duration"):
                e.contains_within("k", horizon)
    finally:
        e.close()
    c = ManualClock(1_700_000_000)
    c.advance(2**63)
    assert c.timestamp() == 2**63 - 1
    # Past an unsigned 64-bit count of seconds: refused, as the docstring says.
    c = ManualClock(1_700_000_000)
    for by in (2**64, 10**400):
        with pytest.raises(ValueError, match="not a valid duration"):
            c.advance(by)
        assert c.timestamp() == 1_700_000_000
    for option in ("connect_timeout", "io_timeout"):
        with pytest.raises(ValueError, match=option):
            timebloom.RedisEngine.create("redis://127.0.0.1:1", "p", **{option: 0})


def test_what_a_horizon_raises_is_what_the_docs_say(tmp_path):
    # docs/python.md, the stubs: another type is a TypeError; negative, NaN,
    # infinite or 2**64 s and more a ValueError; longer than the tiers keep
    # a HorizonTooLongError; nothing is recorded by a refused insert_within.
    with Engine.create(tmp_path / "e", "7d", items_per_day=100, clock=ManualClock(T0)) as e:
        calls = (
            lambda h: e.contains_within("k", h),
            lambda h: e.insert_within("k", h),
            lambda h: e.insert_within_many(["k"], h),
        )
        for call in calls:
            for bad in (True, "7d", None):
                with pytest.raises(TypeError):
                    call(bad)
            huge = Fraction(10**400)
            for bad in (-1, -(10**400), float("nan"), float("inf"), float("-inf"), timedelta.min, 2**64, 1e30, huge, -huge):
                with pytest.raises(ValueError, match="not a valid duration"):
                    call(bad)
            for long in (30 * 86_400, 2**63, timedelta.max):
                with pytest.raises(timebloom.HorizonTooLongError):
                    call(long)
        assert not e.contains("k")


def test_an_int_duration_below_2_64_seconds_is_taken_exactly(tmp_path):
    # docs/python.md: only 2**64 s and more is a ValueError. An int of the
    # last 1,024 below it was rounded through a float to 2**64 and refused
    # as "not a valid duration"; one a little further below was reported
    # with the float's value, not the horizon given.
    with Engine.create(tmp_path / "e", "7d", items_per_day=100, clock=ManualClock(T0)) as e:
        for h in (2**64 - 1, 2**64 - 1024, 2**64 - 1025, 2**53 + 1):
            with pytest.raises(timebloom.HorizonTooLongError, match=f"horizon of {h}s "):
                e.contains_within("k", h)
    c = ManualClock(1_700_000_000)
    c.advance(2**64 - 1)
    assert c.timestamp() == 2**63 - 1


def test_a_generator_that_raises_part_way_records_nothing(tb_dir):
    # docs/python.md: an iterable that is not a list is read whole first.
    def keys():
        yield "g1"
        yield "g2"
        raise RuntimeError("the source failed")

    with Engine.create(tb_dir, "7d", items_per_day=1000) as e:
        with pytest.raises(RuntimeError, match="the source failed"):
            e.insert_many(keys())
        with pytest.raises(RuntimeError, match="the source failed"):
            e.insert_within_many(keys(), 3600)
        assert e.contains_many(["g1", "g2"]) == [False, False]
        assert e.insert_many(k for k in ("g1", "g2", "g1")) == [True, True, False]


def test_an_instant_too_large_for_a_float_is_a_value_error(tmp_path):
    # An int (or a Fraction) instant past what a float holds is a number
    # out of range, as for durations, not a TypeError saying it is not a
    # number.
    c = ManualClock(T0)
    e = Engine.create(tmp_path / "e", clock=c)
    try:
        for call in (
            lambda: ManualClock(10**400),
            lambda: c.set(10**400),
            lambda: e.insert_at("k", 10**400),
            lambda: e.maintain(10**400),
            lambda: e.insert_at("k", Fraction(10**400)),
            lambda: c.set(Fraction(10**400)),
        ):
            with pytest.raises(ValueError, match="out of range"):
                call()
        assert c.timestamp() == int(T0.timestamp())
    finally:
        e.close()


def test_the_calls_that_raise_horizon_and_window_errors(tb_dir):
    # The exceptions' docstrings name these calls.
    with Engine.create(tb_dir, "7d:counting", items_per_day=100) as e:
        for call in (
            lambda: e.contains_within("a", 30 * 86400),
            lambda: e.insert_within("a", 30 * 86400),
            lambda: e.insert_within_many(["a"], 30 * 86400),
        ):
            with pytest.raises(timebloom.HorizonTooLongError):
                call()
        for when in (1000, 4e9):
            with pytest.raises(timebloom.WindowUnavailableError):
                e.remove_at("a", when)
    assert "insert_within" in timebloom.HorizonTooLongError.__doc__
    assert "remove_at" in timebloom.WindowUnavailableError.__doc__


def test_tiers_read_back_in_the_form_create_takes(tmp_path):
    for given, shown in (
        ("7d, 4w", "7d,4w"),
        ("4x360min", "4x6h"),
        ("2x90min", "2x90min"),
        ("365d:fingerprint,7d", "365d:fingerprint,7d"),
    ):
        with Engine.create(tmp_path / given, given, items_per_day=100) as e:
            assert e.tiers == shown
        with Engine.create(tmp_path / ("again " + given), shown, items_per_day=100) as again:
            assert again.tiers == shown
    assert '"4x360min"` reads back as `"4x6h"' in Engine.tiers.__doc__


def test_every_public_item_has_a_docstring():
    for name in timebloom.__all__:
        obj = getattr(timebloom, name)
        assert obj.__doc__, name
    for name in dir(Engine):
        if not name.startswith("_"):
            assert getattr(Engine, name).__doc__, name
    for name in ("set", "advance", "timestamp"):
        assert getattr(ManualClock, name).__doc__, name


def test_a_clock_behind_every_kept_window_is_window_unavailable_for_every_horizon(tb_dir):
    """A daily tier of 2 days rotated to day 3, then the clock set back to
    day 1 noon: no horizon can be answered (the rotation expired the
    windows it reaches), so every `_within` call raises
    WindowUnavailableError saying so, and records nothing; plain calls go
    on. The exception's docstring names the case."""
    day0 = datetime(2026, 3, 10, tzinfo=timezone.utc)
    clock = ManualClock(day0)
    with Engine.create(tb_dir, "2d", items_per_day=1000, clock=clock) as e:
        for d in (1, 2, 3):
            clock.set(day0 + timedelta(days=d))
            e.insert(f"day {d}")
        clock.set(day0 + timedelta(days=1, hours=12))
        for h in (0, 3600, timedelta(days=1)):
            for call in (
                lambda: e.contains_within("day 3", h),
                lambda: e.insert_within("due", h),
                lambda: e.insert_within_many(["due", "day 3"], h),
            ):
                with pytest.raises(timebloom.WindowUnavailableError, match="behind every window") as info:
                    call()
                assert info.value.path == str(tb_dir)
                assert str(tb_dir) in str(info.value)
        assert e.contains("day 3")
        clock.set(day0 + timedelta(days=3))
        assert e.contains_within("day 3", timedelta(days=1))
        assert not e.contains("due"), "a refused insert_within recorded nothing"
    assert "behind every window" in timebloom.WindowUnavailableError.__doc__
    assert "WindowUnavailableError" in Engine.contains_within.__doc__


LOG_CANNOT_GROW = """
import resource, signal, sys, timebloom
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit is EFBIG
e = timebloom.Engine.open(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (20480, resource.RLIM_INFINITY))
keys = [f"k{i}" for i in range(int(sys.argv[2]))]
call = getattr(e, sys.argv[3])
try:
    call(keys) if sys.argv[3] == "insert_many" else call(keys, 3600)
    print("ok")
except timebloom.IncompleteError as x:
    c = x.__cause__
    print(len(x.answers), sum(x.answers), type(c).__name__, "wal" in str(c), x.path == c.path == sys.argv[1])
"""


@pytest.mark.parametrize("call", ["insert_many", "insert_within_many"])
def test_a_failed_closing_sync_is_incomplete_with_the_answers_of_the_whole_batch(tmp_path, call):
    """Under sync="always" a batch whose log cannot grow (a 20 KiB file
    size limit: EFBIG) recorded its keys before the sync that fails: the
    IncompleteError's answers cover them all (3,000 of 3,000, each new),
    and a batch of several chunks stops after its first chunk (16,384),
    every answered key there after a reopen and none after it."""
    for n, done in ((3000, 3000), (40_000, 16_384)):
        d = tmp_path / f"tb-{n}"
        Engine.create(d, "7d", items_per_day=100_000, sync="always").close()
        out = subprocess.run(
            [sys.executable, "-c", LOG_CANNOT_GROW, str(d), str(n), call], capture_output=True, text=True, check=True
        ).stdout.split()
        assert out == [str(done), str(done), "IoError", "True", "True"], out
        keys = [f"k{i}" for i in range(n)]
        with Engine.open(d) as again:
            assert again.contains_many(keys[:done]) == [True] * done
            assert not any(again.contains_many(keys[done:]))
    assert "sync" in timebloom.IncompleteError.__doc__


def test_incomplete_error_doc_names_single_key_writes():
    """A single-key write whose sync failed under sync="always" raises
    IncompleteError with its one answer: help() says so, as the stub does."""
    doc = timebloom.IncompleteError.__doc__
    for call in ("insert_at", "remove_at", "one answer"):
        assert call in doc, doc


def test_read_only_stats_beside_a_writer_let_other_threads_run(tb_dir):
    """`stats` of a read-only engine beside a running writer counts the
    writer's open windows from their bodies (a scan of each, seconds for
    large ones): other Python threads run meanwhile, as during `verify`."""
    with Engine.create(tb_dir, tiers="7d", items_per_day=20_000_000, fpr=1e-5) as w:
        w.insert_many([f"k{i}" for i in range(1000)])
        with Engine.open(tb_dir, read_only=True) as r:
            took, stall = longest_stall(r.stats)
            assert took >= 0.01, f"too fast here to tell ({took:.4f} s)"
            assert stall < took / 2, f"stats took {took:.3f} s, the other thread stalled {stall:.3f} s"
