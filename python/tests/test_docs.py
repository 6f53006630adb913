"""What docs/python.md and python/README.md state, checked against the package."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import timebloom
from timebloom import Engine, ManualClock, RedisEngine


def due_after(path, tiers: str, fetched: datetime, horizon: timedelta, step: timedelta) -> timedelta:
    """How long after a first `insert_within` at `fetched` the key is due again."""
    clock = ManualClock(fetched)
    with Engine.create(path, tiers=tiers, items_per_day=1000, clock=clock) as e:
        assert e.insert_within("k", horizon)
        now = fetched
        while e.contains_within("k", horizon):
            now += step
            clock.set(now)
        return now - fetched


def test_recrawl_lateness_of_the_default_tiers(tmp_path):
    """docs/python.md, "Scrapy": with the default tiers, "7d" is answered by
    the weekly tier (a fetch on a Monday at 00:00 is due 14 days later) and
    "30d" by the monthly one (a fetch on the first of a 31-day month is due
    61 days later); a daily tier of N+1 days makes either due on day N+1."""
    monday = datetime(2026, 11, 30, 0, 0, tzinfo=timezone.utc)
    assert monday.weekday() == 0
    hour = timedelta(hours=1)
    assert due_after(tmp_path / "a", "7d,4w,12m", monday, timedelta(days=7), hour) == timedelta(days=14)
    # Half an hour into the Monday: still due at the start of the Monday two weeks on.
    late = monday + timedelta(minutes=30)
    half = timedelta(minutes=30)
    assert due_after(tmp_path / "b", "7d,4w,12m", late, timedelta(days=7), half) == timedelta(days=13, hours=23, minutes=30)
    first = datetime(2026, 12, 1, tzinfo=timezone.utc)
    assert due_after(tmp_path / "c", "7d,4w,12m", first, timedelta(days=30), hour) == timedelta(days=61)
    assert due_after(tmp_path / "d", "8d,4w,12m", monday, timedelta(days=7), hour) == timedelta(days=8)
    assert due_after(tmp_path / "e", "31d,4w,12m", first, timedelta(days=30), hour) == timedelta(days=31)


def test_redis_engine_unsupported_configurations(redis_server, prefix):
    """docs/python.md, "Errors": `UnsupportedError` for counting and
    fingerprint tiers and for an fpr below the lowest the layout plans."""
    for i, kw in enumerate(
        [
            {"tiers": "7d:counting"},
            {"tiers": "7d,365d:fingerprint"},
            {"tiers": "7d", "fpr": 1e-30},
        ]
    ):
        with pytest.raises(timebloom.UnsupportedError):
            RedisEngine.create(redis_server.url, f"{prefix}-{i}", **kw)


def test_wait_replicas_waits_after_the_create_and_every_kind_of_insert(redis_server, prefix):
    """docs/python.md, "A fleet": `wait_replicas` sends `WAIT` after the
    create and after each insert, `insert_at` and `insert_within` included
    (a server with no replica: `NotReplicatedError` with the answers)."""
    with pytest.raises(timebloom.NotReplicatedError) as made:
        RedisEngine.create(redis_server.url, prefix, tiers="7d", items_per_day=1000, wait_replicas=1, wait_timeout=0.05)
    assert made.value.answers == [] and (made.value.acked, made.value.wanted) == (0, 1)
    with RedisEngine.open(redis_server.url, prefix, wait_replicas=1, wait_timeout=0.05) as e:
        now = datetime.now(timezone.utc)
        for call, answers in [
            (lambda: e.insert("a"), [True]),
            (lambda: e.insert_many(["a", "b"]), [False, True]),
            (lambda: e.insert_at("c", now - timedelta(hours=1)), [True]),
            (lambda: e.insert_within("d", 60), [True]),
            (lambda: e.insert_within_many(["d", "e"], 60), [False, True]),
        ]:
            with pytest.raises(timebloom.NotReplicatedError) as nr:
                call()
            assert nr.value.answers == answers
        assert e.contains("a") and e.contains_many(["b", "z"]) == [True, False]


def test_redis_engine_invalid_prefixes_and_shards(redis_server, prefix):
    """docs/python.md, "Errors": `InvalidConfigError` for a prefix that is
    empty, over 128 bytes or holds a brace, a space or a control character,
    and for shards outside 1 to 16,384."""
    for bad in ["", "a" * 129, f"{prefix} x", f"{prefix}{{x}}", f"{prefix}\x01"]:
        with pytest.raises(timebloom.InvalidConfigError):
            RedisEngine.create(redis_server.url, bad, tiers="1d", items_per_day=10)
    for shards in (0, 16_385):
        with pytest.raises(timebloom.InvalidConfigError):
            RedisEngine.create(redis_server.url, prefix, tiers="1d", items_per_day=10, shards=shards)
    RedisEngine.create(redis_server.url, prefix + "a" * (128 - len(prefix)), tiers="1d", items_per_day=10).close()
