"""The Python API of timebloom.RedisEngine against a real redis-server on loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone, tzinfo

import pytest

import timebloom
from timebloom import ManualClock, RedisEngine

from conftest import (  # tests/conftest.py; pytest puts tests/ on sys.path
    RedisServer,
    close_it,
    finish_child,
    free_port,
    in_forked_child,
    sigint_when,
)

# Noon UTC today: windows named by this clock expire (EXPIREAT, Redis's own
# clock) days from now, however the tests move it forward.
T0 = datetime.now(timezone.utc).replace(hour=12, minute=0, second=0, microsecond=0)
DAY = timedelta(days=1)


def test_with_on_a_closed_engine_raises_closed_error(redis_server, prefix):
    # `with` on a closed engine used to enter the block; it now raises as
    # every other call after close does.
    e = RedisEngine.create(redis_server.url, prefix, items_per_day=10)
    e.close()
    with pytest.raises(timebloom.ClosedError) as info:
        with e:
            pytest.fail("entered the block of a closed engine")
    assert prefix in str(info.value)


def test_exit_returns_false_and_lets_the_exception_through(redis_server, prefix):
    with pytest.raises(KeyError):
        with RedisEngine.create(redis_server.url, prefix, tiers="7d", items_per_day=100) as e:
            raise KeyError("x")
    assert e.closed
    e2 = RedisEngine.open(redis_server.url, prefix)
    assert e2.__exit__(None, None, None) is False
    assert e2.closed


def test_ctrl_c_stops_a_long_lookup_between_chunks(redis_server, prefix):
    # `contains_many` and `contains_within_many` went to Redis as one call,
    # so Ctrl-C was raised only once the whole lookup returned. A lookup has
    # nothing to resume: it goes in chunks of 16,384 keys, as `Engine`'s,
    # and Ctrl-C stops it between two, the answers of the chunks done in
    # the KeyboardInterrupt's `answers`.
    keys = [f"https://sigint.example/{i}" for i in range(2_000_000)]
    with RedisEngine.create(redis_server.url, prefix, tiers="7d", items_per_day=1000) as e:
        e.insert_many(keys[:1000])
        for lookup in (e.contains_many, lambda k: e.contains_within_many(k, DAY)):
            # 0.3 s into a lookup of 3 to 4 s here.
            at = time.monotonic() + 0.3
            with sigint_when(lambda: time.monotonic() > at):
                with pytest.raises(KeyboardInterrupt) as info:
                    lookup(keys)
            done = len(info.value.answers)
            assert 0 < done < len(keys) and done % 16_384 == 0, done
            assert info.value.answers[:1000] == [True] * 1000


def test_an_empty_insert_within_many_refuses_a_horizon_too_long(redis_server, prefix):
    # As Engine's: the horizon is refused whatever the batch holds.
    with RedisEngine.create(redis_server.url, prefix, tiers="7d", items_per_day=10) as e:
        with pytest.raises(timebloom.HorizonTooLongError):
            e.insert_within_many([], timedelta(days=60))
        assert e.insert_within_many([], timedelta(days=1)) == []


def test_insert_and_lookups(redis_server, prefix):
    with RedisEngine.create(redis_server.url, prefix, items_per_day=10_000) as e:
        assert e.insert("https://example.com/é") is True
        assert e.insert("https://example.com/é".encode()) is False
        assert e.contains("https://example.com/é") and "https://example.com/é" in e
        assert not e.contains("https://example.com/other")
        keys = [f"https://example.com/{i % 70}" for i in range(100)]
        assert e.insert_many(keys) == [i < 70 for i in range(100)]
        assert e.insert_many(iter(["new", b"new", keys[3]])) == [True, False, False]
        assert e.contains_many(keys[:5] + ["absent"]) == [True] * 5 + [False]
        assert e.insert_many([]) == [] and e.contains_many(x for x in ()) == []
        assert (e.url, e.prefix, e.tiers, e.shards, e.is_cluster) == (redis_server.url, prefix, "7d,4w,12m", 16, False)


def test_bad_keys_are_type_errors_and_record_nothing(redis_server, prefix):
    with RedisEngine.create(redis_server.url, prefix, items_per_day=1000) as e:
        for bad in (1, None, ["a"], bytearray(b"a")):
            with pytest.raises(TypeError):
                e.insert(bad)
        with pytest.raises(TypeError):
            e.insert_many("abc")  # one str, not an iterable of keys
        with pytest.raises(TypeError):
            e.insert_many(["a", 3])
        with pytest.raises(UnicodeEncodeError):
            e.insert_many(["a", "\ud800"])
        assert not e.contains("a")


def test_open_reads_the_configuration_from_redis(redis_server, prefix):
    RedisEngine.create(redis_server.url, prefix, "3d,2w", 5000, 0.01, shards=4).close()
    with RedisEngine.open(redis_server.url, prefix) as e:
        s = e.stats()
        assert (e.tiers, e.shards, s["expected_items_per_day"], s["fpr"]) == ("3d,2w", 4, 5000, 0.01)
        assert [t["tier"] for t in s["tiers"]] == ["3d", "2w"]


def test_processes_share_what_they_have_seen(redis_server, prefix):
    """A second process (another interpreter) sees the first one's keys."""
    with RedisEngine.create(redis_server.url, prefix, items_per_day=10_000, exist_ok=True) as e:
        e.insert_many([f"k{i}" for i in range(500)])
    code = (
        "import sys, timebloom\n"
        f"e = timebloom.RedisEngine.create({redis_server.url!r}, {prefix!r}, items_per_day=10_000, exist_ok=True)\n"
        "print(sum(e.insert_many([f'k{i}' for i in range(1000)])))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "500"  # only k500..k999 were new


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_fork_a_child_cannot_use_an_inherited_redis_engine(redis_server, prefix):
    """A child made by ``fork`` shares the parent's connection: its calls
    would interleave with the parent's on one socket. They raise
    ``ForkedError``; ``close`` there sends nothing, and the parent's
    connection keeps working, before and after the child exits."""
    held = [RedisEngine.create(redis_server.url, prefix, items_per_day=1000)]
    assert held[0].insert("https://example.com/parent")
    pid, to_parent_r, to_child_w = in_forked_child(held, close_it)
    try:
        assert os.read(to_parent_r, 1) == b"x"
        assert held[0].insert("https://example.com/after-fork")
    finally:
        finish_child(pid, to_child_w)
    assert held[0].insert_many(["https://example.com/after-exit"]) == [True]
    assert not held[0].contains("https://example.com/child")
    held[0].close()


def test_of_many_clients_each_key_is_new_exactly_once(redis_server, prefix):
    """Eight threads, each with its own connection (and two sharing one),
    insert overlapping keys: every key is new for exactly one of them."""
    n_threads, per = 8, 3000
    RedisEngine.create(redis_server.url, prefix, items_per_day=100_000).close()
    shared = RedisEngine.open(redis_server.url, prefix)
    results: list = [None] * n_threads

    def work(t: int) -> None:
        e = shared if t < 2 else RedisEngine.open(redis_server.url, prefix)
        keys = [f"k{(t * per // 2) + i}" for i in range(per)]  # half overlaps the next thread
        if t % 2:
            results[t] = list(zip(keys, e.insert_many(keys)))
        else:
            results[t] = [(k, e.insert(k)) for k in keys[:300]]
            results[t] += list(zip(keys[300:], e.insert_many(keys[300:])))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    new: dict = {}
    for r in results:
        for k, was_new in r:
            new[k] = new.get(k, 0) + was_new
    assert sorted(set(new.values())) == [1], "every key new exactly once"
    assert all(shared.contains_many(sorted(new)))
    shared.close()


def test_calls_release_the_gil_while_they_wait_for_redis(tmp_path):
    """While Redis holds a call back, other Python threads run: every call
    that talks to Redis (docs/python.md). A count of the other thread's
    steps alone would pass with the GIL held too: it takes thousands of
    steps in the moment before the call takes the GIL for itself. So the
    other thread must have run in the second half of the wait."""
    server = RedisServer(tmp_path)
    try:
        e = RedisEngine.create(server.url, "gil", items_per_day=1000)
        ticks = [0]
        last = [0.0]  # when the counting thread last ran
        stop = threading.Event()

        def count() -> None:
            while not stop.is_set():
                ticks[0] += 1
                last[0] = time.monotonic()

        calls = (
            lambda: e.insert("k"),
            lambda: e.insert_many(["a", "b"]),
            lambda: e.contains("k"),
            lambda: e.contains_many(["a", "b"]),
            lambda: e.insert_within("w", 3600),
            lambda: e.insert_within_many(["w1", "w2"], 3600),
            lambda: e.insert_at("old", T0 - DAY),
            lambda: e.contains_within("k", 3600),
            lambda: e.contains_within_many(["a", "b"], 3600),
            e.stats,
        )
        for call in calls:
            # The pause runs from the server's reply: a busy machine may
            # start the call a good while after it, and the call must still
            # be held for more than 0.2 s.
            assert server.command("CLIENT", "PAUSE", "1500") == b"+OK"
            counter = threading.Thread(target=count)
            ticks[0] = 0
            stop.clear()
            counter.start()
            time.sleep(0.05)
            t = time.monotonic()
            call()
            ran, waited = last[0], time.monotonic() - t
            stop.set()
            counter.join()
            assert waited > 0.2  # the pause held the call back
            assert ticks[0] > 1000  # and the counting thread ran meanwhile
            assert ran > t + waited / 2, f"the other thread stood still during {waited:.2f} s"
        e.close()
    finally:
        server.stop()


def test_properties_do_not_wait_for_another_threads_call(tmp_path):
    """``is_cluster`` waited for the engine's connection, which a call of
    another thread holds for its whole round trip (retries included), and
    it waited with the GIL held: every Python thread stood still until
    that call was answered. It reads what was fixed at open now, as the
    other properties do."""
    server = RedisServer(tmp_path)
    try:
        e = RedisEngine.create(server.url, "props", items_per_day=1000)
        for name in ("is_cluster", "tiers", "shards", "closed", "url", "prefix"):
            assert server.command("CLIENT", "PAUSE", "1500") == b"+OK"
            held = threading.Thread(target=lambda: e.insert("k"))
            t = time.monotonic()
            held.start()
            time.sleep(0.2)  # the insert is now waiting for the paused server
            t_read = time.monotonic()
            getattr(e, name)
            read = time.monotonic() - t_read
            held.join()
            assert time.monotonic() - t > 0.5  # the pause held the insert back
            assert read < 0.5, f"{name} waited {read:.2f} s for another thread's call"
        assert e.is_cluster is False
        e.close()
        with pytest.raises(timebloom.ClosedError):
            e.is_cluster
    finally:
        server.stop()


def test_reads_behind_a_waiting_close_release_the_gil(tmp_path):
    """While ``close`` waits for another thread's call (held by the
    server), the properties, ``repr`` and later calls wait for it too.
    They waited with the GIL held, so every Python thread stood still
    until the call was answered (up to ``io_timeout`` times its
    retries); they wait with it released now."""
    server = RedisServer(tmp_path)
    try:
        reads = {
            "closed": lambda e: e.closed,
            "tiers": lambda e: e.tiers,
            "shards": lambda e: e.shards,
            "is_cluster": lambda e: e.is_cluster,
            "repr": repr,
        }
        for name, read in reads.items():
            e = RedisEngine.create(server.url, f"close-{name}", items_per_day=1000)
            assert server.command("CLIENT", "PAUSE", "1500") == b"+OK"
            held = threading.Thread(target=lambda: e.insert("k"))
            held.start()
            time.sleep(0.2)  # the insert waits for the paused server
            closing = threading.Thread(target=e.close)
            closing.start()
            time.sleep(0.2)  # close waits for the insert
            last = [0.0]  # when another thread last ran
            stop = threading.Event()

            def tick() -> None:
                while not stop.is_set():
                    last[0] = time.monotonic()

            ticker = threading.Thread(target=tick)
            ticker.start()
            time.sleep(0.05)
            t = time.monotonic()
            try:
                read(e)
            except timebloom.ClosedError:
                pass
            ran, waited = last[0], time.monotonic() - t
            stop.set()
            ticker.join()
            held.join()
            closing.join()
            assert e.closed
            if waited > 0.2:  # it did wait for the close
                # Another thread ran until the read returned, not only
                # in the moment before the read took the GIL for itself.
                assert ran > t + waited / 2, f"{name}: other threads stood still for {waited:.2f} s"
    finally:
        server.stop()


def test_contains_within_and_recrawl_with_a_manual_clock(redis_server, prefix):
    clock = ManualClock(T0)
    with RedisEngine.create(redis_server.url, prefix, "7d,4w", 1000, clock=clock) as e:
        e.insert_many(["a", "b"])
        clock.advance(timedelta(hours=1))
        assert e.contains_within("a", 3600 * 2) and e.contains_within("a", timedelta(days=1))
        assert e.contains_within_many(["a", "b", "c"], DAY) == [True, True, False]
        clock.advance(3 * DAY)
        assert not e.contains_within("a", DAY)  # older than the horizon and one window
        assert e.contains_within("a", 5 * DAY) and e.contains("a")
        assert e.insert("a") is False  # still in the live windows
        assert e.insert_at("old", T0 - 2 * DAY) is True
        assert e.contains_within("old", 6 * DAY) and not e.contains_within("old", DAY)
        with pytest.raises(timebloom.HorizonTooLongError):
            e.contains_within("a", timedelta(days=60))
        with pytest.raises(timebloom.WindowUnavailableError):
            e.insert_at("x", T0 - timedelta(days=90))
        with pytest.raises(timebloom.WindowUnavailableError):
            e.insert_at("x", T0 + 30 * DAY)


def test_a_datetime_whose_zone_gives_no_offset_is_naive(redis_server, prefix, tmp_path):
    """A tzinfo whose ``utcoffset`` answers None leaves a datetime naive
    (Python's definition). It was taken as aware, and ``timestamp()``
    raised ``TypeError: can't subtract offset-naive and offset-aware
    datetimes``, where docs/python.md promises a naive datetime's
    ``ValueError`` (give it a tzinfo). It is that ``ValueError`` now, in
    both engines and in ``ManualClock``."""

    class NoOffset(tzinfo):
        def utcoffset(self, dt):
            return None

        def dst(self, dt):
            return None

        def tzname(self, dt):
            return None

    when = (T0 - DAY).replace(tzinfo=NoOffset())
    assert when.utcoffset() is None  # naive, for Python
    with RedisEngine.create(redis_server.url, prefix, "7d", 1000) as e:
        with pytest.raises(ValueError, match="naive"):
            e.insert_at("k", when)
        assert not e.contains("k")
    with timebloom.Engine.create(str(tmp_path / "e.tb"), "7d", 1000) as e:
        with pytest.raises(ValueError, match="naive"):
            e.insert_at("k", when)
    with pytest.raises(ValueError, match="naive"):
        ManualClock(when)


def test_insert_within_claims_a_key_once_it_is_due(redis_server, prefix):
    clock = ManualClock(T0)
    with RedisEngine.create(redis_server.url, prefix, "7d,4w", 1000, clock=clock) as e:
        assert e.insert_within("a", timedelta(days=3))
        assert not e.insert_within(b"a", 3 * 86_400)
        clock.advance(2 * DAY)
        assert not e.insert_within("a", timedelta(days=3))  # not recorded again
        clock.advance(2 * DAY)
        assert e.insert_within("a", timedelta(days=3))
        assert e.insert_within_many(["a", "b", "b"], 3 * DAY) == [False, True, False]
        with pytest.raises(timebloom.HorizonTooLongError):
            e.insert_within("c", timedelta(days=60))
        assert not e.contains("c")


def test_of_many_clients_one_claims_each_due_key(redis_server, prefix):
    clock = ManualClock(T0)
    keys = [f"k{i}" for i in range(2000)]
    with RedisEngine.create(redis_server.url, prefix, "7d,4w", 10_000, fpr=1e-6, clock=clock) as e:
        e.insert_many(keys)
    clock.advance(5 * DAY)
    claims: list = [None] * 6

    def work(t: int) -> None:
        with RedisEngine.open(redis_server.url, prefix, clock=clock) as e:
            mine = keys[t * 300 :] + keys[: t * 300]
            if t % 2:
                claims[t] = list(zip(mine, e.insert_within_many(mine, 2 * DAY)))
            else:
                claims[t] = [(k, e.insert_within(k, 2 * DAY)) for k in mine[:400]]
                claims[t] += list(zip(mine[400:], e.insert_within_many(mine[400:], 2 * DAY)))

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


def test_errors_are_typed_and_name_the_url_and_prefix(redis_server, prefix):
    url = redis_server.url
    with pytest.raises(timebloom.NotFoundError) as ex:
        RedisEngine.open(url, prefix)
    assert ex.value.path == f"{url} (prefix {prefix})" and prefix in str(ex.value)
    RedisEngine.create(url, prefix, items_per_day=1000).close()
    with pytest.raises(timebloom.AlreadyExistsError):
        RedisEngine.create(url, prefix, items_per_day=1000)
    RedisEngine.create(url, prefix, items_per_day=1000, exist_ok=True).close()
    with pytest.raises(timebloom.ConfigMismatchError):
        RedisEngine.create(url, prefix, items_per_day=2000, exist_ok=True)
    with pytest.raises(timebloom.ConfigMismatchError):
        RedisEngine.create(url, prefix, items_per_day=1000, shards=8, exist_ok=True)
    with pytest.raises(timebloom.UnsupportedError):
        RedisEngine.create(url, prefix + "-c", "7d:counting")
    for bad in ({"tiers": "7x"}, {"fpr": 2.0}, {"items_per_day": 0}):
        with pytest.raises(timebloom.InvalidConfigError):
            RedisEngine.create(url, prefix + "-b", **bad)
    with pytest.raises(timebloom.InvalidConfigError):
        RedisEngine.create(url, "has space")
    with pytest.raises(timebloom.InvalidConfigError):
        RedisEngine.open(url, "{braces}")
    with pytest.raises(ValueError):
        RedisEngine.open(url, prefix, connect_timeout=-1)
    # Nothing was created by the refused calls.
    for p in (prefix + "-c", prefix + "-b"):
        with pytest.raises(timebloom.NotFoundError):
            RedisEngine.open(url, p)


def test_an_unreachable_server_is_a_redis_error():
    port = free_port()  # nothing listens there
    t = time.monotonic()
    with pytest.raises(timebloom.RedisError) as ex:
        RedisEngine.open(f"redis://127.0.0.1:{port}", "x", retries=0, connect_timeout=1)
    assert time.monotonic() - t < 10
    assert isinstance(ex.value, timebloom.TimebloomError)
    assert f"127.0.0.1:{port}" in str(ex.value)


def test_a_tls_url_talks_tls_instead_of_panicking(tmp_path):
    """``rediss://`` is TLS (docs/python.md). The build's rustls had no
    crypto provider, so the first TLS connection panicked (a
    PanicException, which ``except Exception`` does not catch) before it
    even reached the network. Against a TLS redis-server whose certificate
    no public root signs, the handshake now runs and fails on that
    certificate, a RedisError naming the URL; a closed port is a RedisError."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make the server's certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-keyout", str(key), "-out", str(cert), "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    tls_port = free_port()
    tls = ["--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key)]
    try:
        server = RedisServer(tmp_path, *tls, "--tls-auth-clients", "no")
    except RuntimeError as e:
        if "TLS" in str(e) and not os.environ.get("CI"):
            pytest.skip(f"this redis-server has no TLS: {e}")
        raise
    try:
        url = f"rediss://u:s3cr3t@127.0.0.1:{tls_port}"
        with pytest.raises(timebloom.RedisError) as ex:
            RedisEngine.create(url, "tls", items_per_day=1000, retries=0, connect_timeout=5)
        assert "certificate" in str(ex.value).lower(), ex.value
        assert f"rediss://u:***@127.0.0.1:{tls_port}" in str(ex.value) and "s3cr3t" not in str(ex.value)
        with pytest.raises(timebloom.RedisError):
            RedisEngine.open(f"rediss://127.0.0.1:{free_port()}", "tls", retries=0, connect_timeout=5)
    finally:
        server.stop()


def test_passwords_never_appear_in_messages_or_attributes(tmp_path):
    server = RedisServer(tmp_path, password="s3cr3t-pw")
    try:
        with RedisEngine.create(server.url, "auth", items_per_day=1000) as e:
            assert e.insert("k")
            assert e.url == f"redis://:***@127.0.0.1:{server.port}"
            assert "s3cr3t" not in repr(e)
        wrong = f"redis://default:wrong-pw@127.0.0.1:{server.port}"
        with pytest.raises(timebloom.RedisError) as ex:
            RedisEngine.open(wrong, "auth", retries=0)
        assert "wrong-pw" not in str(ex.value) and "wrong-pw" not in ex.value.path
        assert f"default:***@127.0.0.1:{server.port}" in str(ex.value)
    finally:
        server.stop()


def test_a_password_with_a_comma_connects_and_stays_hidden(tmp_path):
    """A ``,`` is allowed in a URL's password. It was taken for the
    separator of a Cluster seed list: the URL failed to parse, and the
    message and ``.path`` showed the password after the comma."""
    server = RedisServer(tmp_path, password="s3cr,et-pw")
    try:
        url = f"redis://default:s3cr,et-pw@127.0.0.1:{server.port}"
        with RedisEngine.create(url, "comma", items_per_day=1000) as e:
            assert e.insert("k") and e.contains("k")
            assert "et-pw" not in e.url and "et-pw" not in repr(e)
        wrong = f"redis://default:wr,ong-pw@127.0.0.1:{server.port}"
        with pytest.raises(timebloom.RedisError) as ex:
            RedisEngine.open(wrong, "comma", retries=0)
        assert "ong-pw" not in str(ex.value) and "ong-pw" not in ex.value.path, ex.value
        assert f"default:***@127.0.0.1:{server.port}" in str(ex.value)
    finally:
        server.stop()


def test_close_is_idempotent_and_later_calls_raise(redis_server, prefix):
    e = RedisEngine.create(redis_server.url, prefix, items_per_day=1000)
    assert repr(e).endswith("open>") and not e.closed
    e.close()
    e.close()
    assert e.closed and repr(e).endswith("closed>")
    for call in (lambda: e.insert("a"), lambda: e.contains_many(["a"]), e.stats, lambda: e.tiers):
        with pytest.raises(timebloom.ClosedError):
            call()
    # The filters stay in Redis.
    with RedisEngine.open(redis_server.url, prefix) as again:
        assert again.tiers == "7d,4w,12m"


def test_stats_is_a_plain_dict(redis_server, prefix):
    clock = ManualClock(T0)
    with RedisEngine.create(redis_server.url, prefix, "7d,12m", 10_000, clock=clock) as e:
        e.insert_many([f"k{i}" for i in range(2000)])
        s = e.stats()
    assert isinstance(s, dict) and s["now"] == int(T0.timestamp())
    day, month = s["tiers"]
    assert (day["tier"], month["tier"]) == ("7d", "12m")
    assert len(day["segments"]) == 1 and day["segments"][0]["state"] == "open"
    assert 1800 < day["segments"][0]["estimated_items"] < 2200


def test_every_public_item_has_a_docstring():
    for name in dir(RedisEngine):
        if not name.startswith("_"):
            assert getattr(RedisEngine, name).__doc__, name
    for name in ("RedisError", "NotReplicatedError", "ConfigMismatchError", "UnsupportedError"):
        assert issubclass(getattr(timebloom, name), timebloom.TimebloomError)
    assert issubclass(timebloom.NotReplicatedError, timebloom.RedisError)


def test_a_server_that_comes_back_empty_is_a_redis_error_saying_so(tmp_path):
    """FLUSHDB under a running client (as a restart without persistence):
    every call fails with RedisError naming the config hash and what to do,
    not answers of "absent" and "new" for keys it had inserted. Sending the
    batch again fails the same way (the resend advice of a lost connection
    does not apply), and the exception's docstring says so."""
    server = RedisServer(tmp_path)
    try:
        e = RedisEngine.create(server.url, "lost", "7d", items_per_day=1000)
        keys = [f"https://lost.example/{i}" for i in range(100)]
        assert all(e.insert_many(keys))
        assert server.command("FLUSHDB") == b"+OK"
        for call in (
            lambda: e.insert_many(keys),
            lambda: e.insert_many(keys),
            lambda: e.insert(keys[0]),
            lambda: e.contains_many(keys),
            lambda: e.contains(keys[0]),
            lambda: e.insert_within_many(keys, 3600),
            lambda: e.contains_within(keys[0], 3600),
            lambda: e.stats(),
        ):
            with pytest.raises(timebloom.RedisError) as info:
                call()
            assert type(info.value) is timebloom.RedisError, info.value
            assert '"lost:config"' in str(info.value) and "lost the engine's keys" in str(info.value)
            assert info.value.path == f"{server.url} (prefix lost)"
        e.close()
    finally:
        server.stop()
    doc = timebloom.RedisError.__doc__
    assert "lost the engine's keys" in doc, doc


@pytest.mark.parametrize(
    "bad, shown",
    [
        ("a\u200bb", "a\\u{200b}b"),
        ("bidi\u202ex", "bidi\\u{202e}x"),
        ("line\nbreak", "line\\nbreak"),
        ("back\rover", "back\\rover"),
        ("", '""'),
    ],
)
def test_a_refused_prefix_is_shown_escaped_in_the_error(redis_server, bad, shown):
    # The message named the prefix raw: a newline cut it, a carriage return
    # or a bidi override reordered it on a terminal, and a zero-width space
    # made it look like another prefix. Nothing is created either way.
    for call in (
        lambda: RedisEngine.create(redis_server.url, bad, tiers="7d"),
        lambda: RedisEngine.open(redis_server.url, bad),
    ):
        with pytest.raises(timebloom.InvalidConfigError) as info:
            call()
        message = str(info.value)
        assert f"(prefix {shown})" in message, message
        if bad:
            assert bad not in message, message
        for c in "\u200b\u202e\n\r":
            assert c not in message, message
