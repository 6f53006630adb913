"""Shared fixtures of the timebloom tests: engine directories, and
``redis-server`` processes started on free loopback ports.

Without ``redis-server`` the Redis tests fail when the ``CI`` environment
variable is set (.ci/python.sh sets it) and are skipped elsewhere.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import socket
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, Optional

import pytest

import timebloom


@pytest.fixture
def tb_dir(tmp_path):
    """A path for a new engine directory (not created)."""
    return str(tmp_path / "seen.tb")


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_command(port: int, *args: str, password: Optional[str] = None) -> bytes:
    """Sends one command to the server on ``port`` (RESP, no client library)
    and returns the first line of the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        commands = ([("AUTH", password)] if password else []) + [args]
        for cmd in commands:
            s.sendall(f"*{len(cmd)}\r\n".encode() + b"".join(f"${len(a.encode())}\r\n{a}\r\n".encode() for a in cmd))
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
        return reply.split(b"\r\n")[0]


class RedisServer:
    """One ``redis-server`` on 127.0.0.1 in its own directory, no persistence."""

    def __init__(self, workdir: Path, *extra: str, password: Optional[str] = None) -> None:
        """Starts the server and waits until it answers PING."""
        binary = shutil.which("redis-server")
        if binary is None:
            msg = (
                "redis-server is not installed (scripts/install-redis.sh, or "
                "apt-get install -y redis-server redis-tools)"
            )
            if os.environ.get("CI"):
                pytest.fail(f"{msg}; the Redis tests require it in CI", pytrace=False)
            pytest.skip(f"{msg}; in CI this fails")
        self.password = password
        self.port = free_port()
        self.dir = workdir
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--daemonize", "no"]
        args += ["--dir", str(workdir), "--logfile", "redis.log", "--save", "", "--appendonly", "no"]
        if password:
            args += ["--requirepass", password]
        self.proc = subprocess.Popen([*args, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while True:
            try:
                if redis_command(self.port, "PING", password=password) == b"+PONG":
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (workdir / "redis.log").read_text(errors="replace") if (workdir / "redis.log").exists() else ""
                self.stop()
                raise RuntimeError(f"redis-server on port {self.port} did not start:\n{log[-2000:]}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT``, with the password when there is one."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}"

    def command(self, *args: str) -> bytes:
        """The first line of the reply to one command."""
        return redis_command(self.port, *args, password=self.password)

    def stop(self) -> None:
        """Kills the server."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory) -> Iterator[RedisServer]:
    """A ``redis-server`` shared by the tests (each uses its own prefix)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}"


# ---- fork: an engine inherited by a child process ----------------------------


def forked(body) -> tuple[int, int, int]:
    """Forks a child that runs ``body()`` (its exit code: 0 when its checks
    passed), tells the parent, and waits for the parent's word before
    exiting. Returns the pid and the pipe ends the parent reads from and
    writes to."""
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.close(to_parent_r)
            os.close(to_child_w)
            code = body()
            os.write(to_parent_w, b"x")
            os.read(to_child_r, 1)
        finally:
            os._exit(code)
    os.close(to_child_r)
    os.close(to_parent_w)
    return pid, to_parent_r, to_child_w


def in_forked_child(held: list, let_go) -> tuple[int, int, int]:
    """Forks (see ``forked``). The child calls ``insert`` on the engine
    ``held[0]`` (which must raise ``ForkedError``, a ``ClosedError`` naming
    the engine's path or Redis prefix) and lets go of it with
    ``let_go(held)``; it exits with 0, or 1 or 2 when a check failed."""

    def body() -> int:
        e = held[0]
        place = e.path if isinstance(e, timebloom.Engine) else e.prefix
        code = 1
        try:
            e.insert("https://example.com/child")
        except timebloom.ForkedError as err:
            code = 0 if isinstance(err, timebloom.ClosedError) and place in str(err) else 2
        del e
        let_go(held)
        return code

    return forked(body)


def finish_child(pid: int, to_child_w: int) -> None:
    os.write(to_child_w, b"x")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def close_it(held: list) -> None:
    held[0].close()
    assert held[0].closed


def drop_it(held: list) -> None:
    held.clear()  # the last reference: the object goes
    gc.collect()


@contextlib.contextmanager
def sigint_when(ready: Callable[[], bool]) -> Iterator[None]:
    """Sends this process SIGINT (Ctrl-C) from another thread once `ready()`
    is true, while the `with` block runs; the thread is joined at its end.
    A `ready()` still false after 60 s sends nothing (the block then ends
    without the KeyboardInterrupt its test waits for, instead of hanging)."""

    def interrupt() -> None:
        give_up = time.monotonic() + 60
        while not ready():
            if time.monotonic() > give_up:
                return
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt)
    t.start()
    try:
        yield
    finally:
        t.join()
