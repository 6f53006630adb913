"""The directory lock across Python and the ``timebloom`` CLI, across a
``LOCK`` file deleted by hand, and across ``fork``: one writer per engine
directory, whichever process or language holds it (docs/operations.md,
"One writer"; docs/python.md, "Processes").

The CLI binary is ``TIMEBLOOM_BIN`` when set (.ci/python.sh sets it),
else the newest of the repository's ``target/{release,debug}/timebloom``
(and under ``CARGO_TARGET_DIR``), else ``timebloom`` on ``PATH``. Without
one the CLI tests fail when the ``CI`` environment variable is set and are
skipped elsewhere.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Optional

import pytest

import timebloom
from timebloom import Engine

from conftest import forked  # tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]
# How long a CLI call may take before the test fails (it takes milliseconds).
TIMEOUT = 20


def _find_cli() -> Optional[str]:
    env = os.environ.get("TIMEBLOOM_BIN")
    if env:
        return env
    targets = [ROOT / "target"]
    if os.environ.get("CARGO_TARGET_DIR"):
        targets.insert(0, Path(os.environ["CARGO_TARGET_DIR"]))
    exe = "timebloom.exe" if sys.platform == "win32" else "timebloom"
    found = [t / profile / exe for t in targets for profile in ("release", "debug")]
    found = [p for p in found if p.is_file()]
    if found:
        return str(max(found, key=lambda p: p.stat().st_mtime))
    return shutil.which("timebloom")


@pytest.fixture(scope="module")
def cli() -> str:
    """The path of the ``timebloom`` binary."""
    binary = _find_cli()
    if binary is None:
        msg = "no timebloom binary (cargo build, or set TIMEBLOOM_BIN)"
        if os.environ.get("CI"):
            pytest.fail(f"{msg}; the CLI tests require it in CI", pytrace=False)
        pytest.skip(f"{msg}; in CI this fails")
    return binary


@pytest.fixture
def engine_dir(tb_dir) -> str:
    """An engine directory, created small and closed."""
    Engine.create(tb_dir, "7d", items_per_day=1000).close()
    return tb_dir


def run_cli(cli: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([cli, *args], input=stdin, capture_output=True, timeout=TIMEOUT)


def assert_cli_refused(cli: str, path: str) -> None:
    """``add`` and ``maintain`` on ``path`` are refused: exit 2, and stderr
    names the directory."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    for args, stdin in (
        (("add", path), b"https://example.com/cli\n"),
        (("maintain", path, "--now", now), b""),
    ):
        r = run_cli(cli, *args, stdin=stdin)
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 2, (args, r.returncode, err)
        assert path in err and "open in another process" in err, (args, err)


class CliWriter:
    """``timebloom filter-new DIR`` reading keys from a pipe this test keeps
    open: a writer holding the directory until ``finish``."""

    def __init__(self, cli: str, path: str) -> None:
        self.proc = subprocess.Popen(
            [cli, "filter-new", path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )

    def send(self, key: str) -> None:
        """Sends a new key and waits for its line on stdout: the engine is
        open (and the key recorded) once the line is printed."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(key.encode() + b"\n")
        self.proc.stdin.flush()
        line = self._read_line()
        assert line == key.encode() + b"\n", (line, self.proc.poll())

    def _read_line(self) -> bytes:
        """One line of stdout (what there is at its end), waited for no
        longer than ``TIMEOUT``: a CLI that prints nothing fails the test
        instead of hanging it."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + TIMEOUT
        line = b""
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
            assert ready, f"filter-new printed no line in {TIMEOUT} s: {line!r}"
            chunk = os.read(fd, 4096)  # one key is sent at a time
            if not chunk:
                break
            line += chunk
        return line

    def finish(self) -> int:
        """Closes stdin and waits for the exit status."""
        try:
            _, err = self.proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise
        assert self.proc.returncode == 0, err.decode(errors="replace")
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def cli_writer(cli, engine_dir) -> Iterator[CliWriter]:
    w = CliWriter(cli, engine_dir)
    try:
        yield w
    finally:
        w.kill()


# ---- Python and the CLI --------------------------------------------------------


def test_a_python_writer_refuses_the_cli(cli, engine_dir):
    with Engine.open(engine_dir) as e:
        assert e.insert("https://example.com/py")
        assert_cli_refused(cli, engine_dir)
        # The refused CLI wrote nothing.
        assert not e.contains("https://example.com/cli")
    # Closed: the CLI writes.
    r = run_cli(cli, "add", engine_dir, stdin=b"https://example.com/cli\n")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    with Engine.open(engine_dir, read_only=True) as e:
        assert e.contains("https://example.com/py")
        assert e.contains("https://example.com/cli")


def test_a_cli_writer_refuses_python_which_reads_beside_it(cli_writer, engine_dir):
    cli_writer.send("https://example.com/cli-1")
    with pytest.raises(timebloom.LockedError) as info:
        Engine.open(engine_dir)
    assert engine_dir in str(info.value) and info.value.path == engine_dir
    # A read-only open beside the writer works and sees its keys.
    with Engine.open(engine_dir, read_only=True) as ro:
        assert ro.read_only
        assert ro.contains("https://example.com/cli-1")
        with pytest.raises(timebloom.ReadOnlyError):
            ro.insert("https://example.com/py")
    # The CLI goes on writing beside the reader, then exits and lets go.
    cli_writer.send("https://example.com/cli-2")
    assert cli_writer.finish() == 0
    with Engine.open(engine_dir) as e:
        assert e.contains("https://example.com/cli-1")
        assert e.contains("https://example.com/cli-2")


def test_a_second_cli_writer_beside_a_cli_writer_is_refused(cli, cli_writer, engine_dir):
    cli_writer.send("https://example.com/cli-1")
    assert_cli_refused(cli, engine_dir)
    assert cli_writer.finish() == 0


# ---- a LOCK file deleted by hand ---------------------------------------------------


def test_a_deleted_lock_file_lets_no_second_python_writer_in(cli, engine_dir):
    with Engine.open(engine_dir) as e:
        assert e.insert("https://example.com/first")
        os.remove(os.path.join(engine_dir, "LOCK"))
        with pytest.raises(timebloom.LockedError) as info:
            Engine.open(engine_dir)
        assert engine_dir in str(info.value)
        # Refused again with the LOCK file the refused open made.
        with pytest.raises(timebloom.LockedError):
            Engine.open(engine_dir)
        # Through another path to the directory too.
        with pytest.raises(timebloom.LockedError):
            Engine.open(os.path.join(engine_dir, "."))
        assert_cli_refused(cli, engine_dir)
        assert e.insert("https://example.com/still-the-writer")
    with Engine.open(engine_dir) as again:
        assert again.contains("https://example.com/first")
        assert again.contains("https://example.com/still-the-writer")
        assert not again.contains("https://example.com/cli")


def test_a_deleted_lock_file_lets_no_python_writer_in_beside_the_cli(cli_writer, engine_dir):
    cli_writer.send("https://example.com/cli-1")
    os.remove(os.path.join(engine_dir, "LOCK"))
    with pytest.raises(timebloom.LockedError) as info:
        Engine.open(engine_dir)
    assert engine_dir in str(info.value)
    cli_writer.send("https://example.com/cli-2")
    assert cli_writer.finish() == 0
    with Engine.open(engine_dir) as e:
        assert e.contains("https://example.com/cli-2")


# ---- fork ----------------------------------------------------------------------------


def end_child(pid: int, to_parent_r: int, to_child_w: int) -> int:
    """Lets the child exit; its exit code."""
    os.close(to_parent_r)
    try:
        os.write(to_child_w, b"x")
    except BrokenPipeError:
        pass
    os.close(to_child_w)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")


@needs_fork
def test_fork_a_child_that_keeps_the_engine_keeps_the_directory_locked_until_it_exits(cli, engine_dir):
    """docs/python.md: nothing is let go of at the fork itself; a child that
    keeps the inherited engine keeps the directory locked (the LOCK file and
    the directory itself) until it exits."""
    held = [Engine.open(engine_dir)]
    assert held[0].insert("https://example.com/parent")
    pid, to_parent_r, to_child_w = forked(lambda: 0)  # keeps held[0], unused
    try:
        assert os.read(to_parent_r, 1) == b"x"
        held[0].close()
        with pytest.raises(timebloom.LockedError) as info:
            Engine.open(engine_dir)
        assert engine_dir in str(info.value)
        assert_cli_refused(cli, engine_dir)
        # Also with the LOCK file deleted: the child holds the directory.
        os.remove(os.path.join(engine_dir, "LOCK"))
        with pytest.raises(timebloom.LockedError):
            Engine.open(engine_dir)
    finally:
        assert end_child(pid, to_parent_r, to_child_w) == 0
    # The child exited: the directory is free.
    with Engine.open(engine_dir) as again:
        assert again.contains("https://example.com/parent")


@needs_fork
@pytest.mark.parametrize("how", ["close", "drop"])
def test_fork_a_child_that_lets_go_frees_both_locks_and_the_parent_keeps_its_own(cli, engine_dir, how):
    """A child that closes (or drops) the inherited engine closes its copy of
    both lock descriptors, the LOCK file's and the directory's: while the
    parent holds the engine, every other writer is still refused; once the
    parent closes it, Python and the CLI write while the child lives."""
    held = [Engine.open(engine_dir)]

    def child() -> int:
        e = held.pop()
        if how == "close":
            e.close()
        del e
        return 0 if not held else 4

    pid, to_parent_r, to_child_w = forked(child)
    try:
        assert os.read(to_parent_r, 1) == b"x"
        # The parent still holds the directory.
        with pytest.raises(timebloom.LockedError):
            Engine.open(engine_dir)
        assert_cli_refused(cli, engine_dir)
        assert held[0].insert("https://example.com/parent")
        held[0].close()
        # The child, alive, holds neither lock: the CLI writes, then Python.
        r = run_cli(cli, "add", engine_dir, stdin=b"https://example.com/cli\n")
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        with Engine.open(engine_dir) as again:
            assert again.contains("https://example.com/parent")
            assert again.contains("https://example.com/cli")
    finally:
        assert end_child(pid, to_parent_r, to_child_w) == 0


@needs_fork
def test_fork_a_child_that_lets_go_after_the_lock_file_was_deleted(engine_dir):
    """The LOCK file deleted by hand while the parent writes: a child that
    closes the inherited engine still lets go of the directory's lock, so
    the parent closes and opens the directory while the child lives."""
    held = [Engine.open(engine_dir)]
    os.remove(os.path.join(engine_dir, "LOCK"))

    def child() -> int:
        held.pop().close()
        return 0

    pid, to_parent_r, to_child_w = forked(child)
    try:
        assert os.read(to_parent_r, 1) == b"x"
        with pytest.raises(timebloom.LockedError):
            Engine.open(engine_dir)
        held[0].close()
        with Engine.open(engine_dir) as again:
            assert not again.read_only
    finally:
        assert end_child(pid, to_parent_r, to_child_w) == 0


def test_a_program_started_while_python_writes_holds_no_lock(cli, engine_dir):
    """A program started while the engine is open inherits no lock, even
    with every descriptor passed on (``close_fds=False``): both lock
    descriptors are close-on-exec. Python closes the engine and the CLI
    writes while that program still runs."""
    e = Engine.open(engine_dir)
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        close_fds=False,
    )
    try:
        assert other.stdout is not None and other.stdout.readline() == b"up\n"
        e.close()
        r = run_cli(cli, "add", engine_dir, stdin=b"https://example.com/cli\n")
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        with Engine.open(engine_dir) as again:
            assert again.contains("https://example.com/cli")
    finally:
        e.close()
        other.communicate(timeout=TIMEOUT)


# ---- read-only ------------------------------------------------------------------------


def test_maintain_on_a_read_only_engine_raises_read_only_error(engine_dir):
    with Engine.open(engine_dir, read_only=True) as ro:
        with pytest.raises(timebloom.ReadOnlyError) as info:
            ro.maintain()
        assert engine_dir in str(info.value)
        with pytest.raises(timebloom.ReadOnlyError):
            ro.maintain(datetime(2026, 3, 10, 12, 0, tzinfo=timezone.utc))
        # Nothing was taken: a writer opens beside it.
        with Engine.open(engine_dir) as e:
            assert e.maintain() is not None
