"""Many engine lifetimes in one process leave no descriptors, mappings or
engine threads behind: ``with`` blocks, and engines garbage-collected
without ``close``."""

import gc
import os
import sys
import time
from datetime import timedelta

import pytest

from timebloom import Engine, ManualClock

from test_engine import T0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")


def fds_below(path):
    """Descriptors of this process open on files below ``path``."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(path):
            out.append(target)
    return out


def maps_below(path):
    """Mappings of this process of files below ``path``."""
    with open("/proc/self/maps") as f:
        return [line.split(None, 5)[-1].strip() for line in f if path in line]


def engine_threads():
    """The names of this process's threads the engine started."""
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith("timebloom"):
            names.append(name)
    return names


def released(path):
    """Waits up to 10 s for everything below ``path`` to be let go of."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not fds_below(path) and not maps_below(path) and not engine_threads():
            return True
        time.sleep(0.02)
    return False


def test_with_blocks_and_collected_engines_leave_nothing_open(tmp_path):
    path = os.path.realpath(str(tmp_path / "seen.tb"))
    clock = ManualClock(T0)
    with Engine.create(path, tiers="2d,2w", items_per_day=1000, clock=clock, sync="always") as e:
        e.insert("first")
    assert released(path)
    for cycle in range(60):
        clock.set(T0 + timedelta(days=cycle))
        sync = ["always", "interval=10ms", "none"][cycle % 3]
        if cycle % 2 == 0:
            with Engine.open(path, clock=clock, sync=sync) as e, Engine.open(path, read_only=True, clock=clock) as ro:
                e.insert_many([f"https://example.com/{cycle}/{i}" for i in range(50)])
                # Minutes before midnight: the next windows are created
                # ahead; every other time the engine closes before it.
                clock.set(T0 + timedelta(days=cycle, hours=11, minutes=55))
                e.insert(f"late {cycle}")
                if cycle % 4 == 0:
                    clock.set(T0 + timedelta(days=cycle + 1))
                    e.insert(f"next {cycle}")
                else:
                    time.sleep(0.02)
                ro.contains("first")
        else:
            e = Engine.open(path, clock=clock, sync=sync)
            ro = Engine.open(path, read_only=True, clock=clock)
            e.insert_many([f"https://example.com/{cycle}/{i}" for i in range(50)])
            clock.set(T0 + timedelta(days=cycle + 1))
            e.insert(f"next {cycle}")
            ro.contains("first")
            del e, ro
            gc.collect()
        # Closed (or collected): no descriptor stays, not even for a moment.
        assert not fds_below(path), (cycle, fds_below(path))
        assert released(path), (cycle, fds_below(path), maps_below(path), engine_threads())


def test_failed_opens_leave_nothing_open(tmp_path):
    path = os.path.realpath(str(tmp_path / "seen.tb"))
    clock = ManualClock(T0)
    with Engine.create(path, tiers="2d", items_per_day=1000, clock=clock) as e:
        held = (sorted(fds_below(path)), sorted(maps_below(path)))
        for _ in range(50):
            with pytest.raises(Exception):
                Engine.open(path, clock=clock)
        assert (sorted(fds_below(path)), sorted(maps_below(path))) == held
        e.insert("x")
    assert released(path)
