"""Type stubs of timebloom (the classes live in the extension timebloom._timebloom)."""

import os
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Iterable, Literal, Optional, Type, Union, final

__version__: str
"""The package's version (that of its distribution, and of the Rust crate it is built from)."""

_Key = Union[str, bytes]
"""A key: ``str`` (encoded as UTF-8) or ``bytes``."""

_Seconds = Union[timedelta, int, float]
"""A duration: a ``timedelta`` or a number of seconds. Another type (a
``bool`` included) is a ``TypeError``; a negative, NaN or infinite duration,
or one of 2**64 seconds or more, is a ``ValueError``."""

_Instant = Union[datetime, int, float]
"""An instant: an aware ``datetime`` or seconds since the Unix epoch."""

class TimebloomError(Exception):
    """Base class of every error timebloom raises."""

    path: str
    """The engine directory or file concerned (``os.fsdecode``'s form); for
    a ``RedisEngine``, the URL (password masked) and the prefix."""

class InvalidConfigError(TimebloomError):
    """The configuration given to ``Engine.create`` or ``RedisEngine.create`` (or the ``sync`` policy given to ``Engine.open``, or the prefix given to ``RedisEngine``) is not valid; nothing was written."""

class LockedError(TimebloomError):
    """Another process (or another open ``Engine``) holds the directory: close it, or open with ``read_only=True`` beside it."""

class AlreadyExistsError(TimebloomError):
    """``Engine.create`` found an engine in the directory already (``RedisEngine.create``: under the prefix, without ``exist_ok=True``)."""

class NotFoundError(TimebloomError):
    """``Engine.open`` found no engine (no MANIFEST) in the directory (``RedisEngine.open``: no config hash under the prefix)."""

class CorruptError(TimebloomError):
    """A file's bytes are wrong; the message names the file."""

class QuarantinedError(CorruptError):
    """A segment file failed its checks at open and was moved to ``quarantine/``."""

    window: str
    """The window the file held (``TIER WINDOW``); ``path`` is where the file is now."""

class UnsupportedVersionError(TimebloomError):
    """A file was written by a format version this build does not read."""

class WindowUnavailableError(TimebloomError):
    """``insert_at`` or ``remove_at`` named an instant whose window has expired in every tier, or that lies past a tier's newest window (a later instant of the current window is taken); or the clock (a ``ManualClock`` set so) reads before 1970 or after 9999, which every call refuses; or a horizon was asked while the clock is behind every window the tiers keep."""

class HorizonTooLongError(TimebloomError):
    """``contains_within`` or ``insert_within`` (or their batches) asked for a horizon longer than any tier keeps."""

class RemoveUnsupportedError(TimebloomError):
    """``remove`` or ``remove_at`` on an engine with a plain Bloom tier (only counting and fingerprint tiers remove keys)."""

class IoError(TimebloomError):
    """An I/O call failed, or an earlier one left the engine unusable (reopen it)."""

class ReadOnlyError(TimebloomError):
    """A write, or ``maintain``, on an engine opened with ``read_only=True``."""

class ClockJumpError(TimebloomError):
    """The clock jumped past every window holding keys; nothing changed (see ``Engine.maintain``)."""

class IncompleteError(TimebloomError):
    """``insert_many`` or ``insert_within_many`` stopped part way; ``__cause__`` is the error that stopped it
    (the engine's, or in a batch of more than 16,384 keys a key of a later chunk that could not be encoded).
    Also a single-key write (``insert``, ``insert_within``, ``insert_at``, ``remove``, ``remove_at``) whose
    sync failed under ``sync="always"``, with its one answer: done, not known to be durable."""

    answers: list[bool]
    """Answers of the first ``len(answers)`` keys, which were recorded; the rest were not.
    When the batch's closing sync failed (under ``sync="always"``), every key
    of the batch (or of its chunks up to the failed one): recorded, not known
    to be durable."""

class NotEmptyError(TimebloomError):
    """``Engine.create`` refused a directory that holds files it did not make."""

class ClosedError(TimebloomError):
    """The engine was closed."""

class ForkedError(ClosedError):
    """The engine was opened in the parent of this process, before a ``fork``
    (``multiprocessing``'s default on Linux): the parent still uses it, so
    the child may not. Open it again in the child; ``close()`` there lets go
    of the inherited engine without writing anything."""

class RedisError(TimebloomError):
    """Redis, or the connection to it, failed after every retry, or answered
    something unexpected; ``path`` is the URL (password masked) and prefix.
    After a failed ``insert_many``, send the same keys again (same order,
    no other insert in between): the call resumes and reports each key new
    exactly once. Also raised by every call once Redis lost the engine's
    keys (a restart without persistence, ``FLUSHDB``, a failover to an
    empty replica; the message names the config hash, or on a Cluster the
    directory of a shard whose master came back empty): sending again fails
    the same way; stop every client, then delete the engine's keys
    (docs/distributed.md, "Key layout": not ``prefix:*``) or use another
    prefix."""

class NotReplicatedError(RedisError):
    """An insert batch was applied, or an engine created, but fewer replicas
    than ``wait_replicas`` confirmed it in time. After a create, ``answers``
    is empty and the engine exists on the master: opening it works."""

    answers: list[bool]
    """Answers of the first ``len(answers)`` keys, which are recorded: all of
    them, unless the batch went out in several rounds (the rest were not
    sent; sending the same batch again sends them)."""
    acked: int
    """Replicas that confirmed."""
    wanted: int
    """Replicas asked for."""

class ConfigMismatchError(TimebloomError):
    """``RedisEngine.create(..., exist_ok=True)`` found an engine with another
    configuration under the prefix."""

class UnsupportedError(TimebloomError):
    """The Redis engine does not do this (counting or fingerprint tiers, a
    false-positive rate below the lowest its layout plans, a window string
    over 512 MiB, a key layout this build does not read)."""

@final
class ManualClock:
    """A clock that moves only when told to, for tests and replays (whole seconds)."""

    def __new__(cls, now: _Instant) -> "ManualClock":
        """A clock showing ``now``."""
    def set(self, now: _Instant) -> None:
        """Shows ``now`` from now on."""
    def advance(self, by: _Seconds) -> None:
        """Moves the clock forward by ``by`` (stopping at the last second a
        signed 64-bit count holds); a ``by`` of 2**64 seconds or more is a
        ``ValueError`` and the clock does not move."""
    def timestamp(self) -> int:
        """The time shown, in whole seconds since the Unix epoch."""

@final
class Engine:
    """An open timebloom engine: a directory of time-windowed Bloom filters."""

    def __new__(cls, *_args: object, **_kwargs: object) -> "Engine":
        """Not a constructor: always a ``TypeError`` naming ``Engine.create``
        and ``Engine.open``, the ways to make an engine."""

    @staticmethod
    def create(
        path: Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"],
        tiers: str = "7d,4w,12m",
        items_per_day: int = 1_000_000,
        fpr: float = 0.001,
        *,
        utc_offset_secs: int = 0,
        clock: Optional[ManualClock] = None,
        sync: str = "interval=1s",
    ) -> "Engine":
        """Creates a new engine in ``path`` (created if missing); ``sync``
        (``"always"``, ``"interval=1s"``, ``"none"``) is stored in it."""
    @staticmethod
    def open(
        path: Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"],
        *,
        verify: bool = False,
        read_only: bool = False,
        clock: Optional[ManualClock] = None,
        allow_clock_jump: bool = False,
        sync: Optional[str] = None,
        degraded: bool = False,
    ) -> "Engine":
        """Opens the engine in ``path``; its configuration comes from the
        directory. ``sync`` replaces the stored sync policy for this open only;
        ``degraded`` goes on without a window whose file failed its checks."""
    def insert(self, key: _Key) -> bool:
        """Records ``key``; True when it was absent from every live window before."""
    def insert_many(self, keys: Iterable[_Key]) -> list[bool]:
        """``insert`` for every key, with the GIL released; one bool per key.
        Ctrl-C stops a batch of more than 16,384 keys between chunks: the
        ``KeyboardInterrupt`` carries the answers of the keys recorded in
        its ``answers`` attribute."""
    def contains(self, key: _Key) -> bool:
        """Whether ``key`` is in any live window."""
    def contains_many(self, keys: Iterable[_Key]) -> list[bool]:
        """``contains`` for every key, with the GIL released."""
    def contains_within(self, key: _Key, horizon: _Seconds) -> bool:
        """Whether ``key`` was inserted within ``horizon`` of now.
        ``HorizonTooLongError`` when no tier keeps ``horizon``;
        ``WindowUnavailableError`` for every horizon while the clock is
        behind every window the tiers keep (stepped back further than they
        keep); a ``ValueError`` or ``TypeError`` for what ``_Seconds`` refuses."""
    def insert_within(self, key: _Key, horizon: _Seconds) -> bool:
        """Records ``key`` now and returns True when it was not seen within ``horizon``; otherwise records nothing.
        Raises as ``contains_within`` does for ``horizon``, before recording anything."""
    def insert_within_many(self, keys: Iterable[_Key], horizon: _Seconds) -> list[bool]:
        """``insert_within`` for every key, with the GIL released; one bool per key.
        Raises as ``insert_within`` does for ``horizon``, even with no keys."""
    def insert_at(self, key: _Key, when: _Instant) -> bool:
        """Records ``key`` as seen at ``when`` (a backfill); True when it was new."""
    def remove(self, key: _Key) -> bool:
        """Takes back one insert of ``key`` made now (counting and fingerprint tiers): only when every window inserts go to now holds it; whether it did. In a fingerprint table, a key sharing its slot with another (same fingerprint and bucket pair) takes it along."""
    def remove_at(self, key: _Key, when: _Instant) -> bool:
        """Takes back one insert of ``key`` made at ``when`` (counting and fingerprint tiers)."""
    def maintain(self, now: Optional[_Instant] = None) -> dict[str, list[str]]:
        """Rotates and expires windows as of ``now``; what was opened, sealed, expired."""
    def stats(self) -> dict[str, Any]:
        """Tiers, segments, fill, estimated keys and rates (GIL released: a
        read-only engine beside a writer counts its open windows' bodies)."""
    def verify(self) -> None:
        """Checks every sealed segment's checksum; ``CorruptError`` names a bad file."""
    def flush(self) -> None:
        """Makes every insert so far durable."""
    def close(self) -> None:
        """Closes the engine cleanly; later calls raise ``ClosedError``."""
    @property
    def path(self) -> str:
        """The engine directory."""
    @property
    def closed(self) -> bool:
        """Whether ``close`` has been called."""
    @property
    def read_only(self) -> bool:
        """Whether the engine was opened with ``read_only=True``."""
    @property
    def supports_remove(self) -> bool:
        """Whether ``remove`` works here."""
    @property
    def sync(self) -> str:
        """The sync policy of this open (``"always"``, ``"interval=1s"``, ``"none"``)."""
    @property
    def tiers(self) -> str:
        """The tiers, in the form ``create`` takes (``"4x360min"`` reads back as ``"4x6h"``)."""
    def __contains__(self, key: _Key, /) -> bool:
        """``key in engine`` is ``engine.contains(key)``."""
    def __enter__(self) -> "Engine":
        """The engine itself; ``ClosedError`` (``ForkedError`` in a forked child) when it is closed, as every call."""
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        """Closes the engine; False: an exception of the block goes on."""

@final
class RedisEngine:
    """A timebloom engine kept in Redis, shared by every process that uses the
    same URL and prefix. Every call that talks to Redis releases the GIL."""

    def __new__(cls, *_args: object, **_kwargs: object) -> "RedisEngine":
        """Not a constructor: always a ``TypeError`` naming
        ``RedisEngine.create`` and ``RedisEngine.open``, the ways to make an
        engine."""

    @staticmethod
    def create(
        url: str,
        prefix: str,
        tiers: str = "7d,4w,12m",
        items_per_day: int = 1_000_000,
        fpr: float = 0.001,
        *,
        utc_offset_secs: int = 0,
        shards: int = 16,
        exist_ok: bool = False,
        clock: Optional[ManualClock] = None,
        connect_timeout: Optional[_Seconds] = None,
        io_timeout: Optional[_Seconds] = None,
        retries: Optional[int] = None,
        cluster: bool = False,
        wait_replicas: int = 0,
        wait_timeout: Optional[_Seconds] = None,
    ) -> "RedisEngine":
        """Creates a new engine under ``prefix`` in the Redis at ``url``;
        ``exist_ok=True`` opens an existing one with the same configuration
        (what each process of a fleet calls)."""
    @staticmethod
    def open(
        url: str,
        prefix: str,
        *,
        clock: Optional[ManualClock] = None,
        connect_timeout: Optional[_Seconds] = None,
        io_timeout: Optional[_Seconds] = None,
        retries: Optional[int] = None,
        cluster: bool = False,
        wait_replicas: int = 0,
        wait_timeout: Optional[_Seconds] = None,
    ) -> "RedisEngine":
        """Opens the engine under ``prefix``; its configuration comes from Redis."""
    def insert(self, key: _Key) -> bool:
        """Records ``key``; True when it was absent from every live window before."""
    def insert_many(self, keys: Iterable[_Key]) -> list[bool]:
        """``insert`` for every key, in one pipeline; one bool per key.
        One call however long (sent again after an error, it resumes), so
        Ctrl-C is raised only once it returns, every key recorded."""
    def insert_at(self, key: _Key, when: _Instant) -> bool:
        """Records ``key`` as seen at ``when`` (a backfill); True when it was new."""
    def contains(self, key: _Key) -> bool:
        """Whether ``key`` is in any live window."""
    def contains_many(self, keys: Iterable[_Key]) -> list[bool]:
        """``contains`` for every key, in calls of up to 16,384 keys: Ctrl-C
        stops it between two (``KeyboardInterrupt.answers``: those done)."""
    def contains_within(self, key: _Key, horizon: _Seconds) -> bool:
        """Whether ``key`` was inserted within ``horizon`` of now.
        ``HorizonTooLongError`` when no tier keeps ``horizon``; a
        ``ValueError`` or ``TypeError`` for what ``_Seconds`` refuses."""
    def contains_within_many(self, keys: Iterable[_Key], horizon: _Seconds) -> list[bool]:
        """``contains_within`` for every key, in chunks as ``contains_many``."""
    def insert_within(self, key: _Key, horizon: _Seconds) -> bool:
        """Records ``key`` now and returns True when it was not seen within ``horizon``; otherwise records nothing.
        Raises as ``contains_within`` does for ``horizon``, before recording anything."""
    def insert_within_many(self, keys: Iterable[_Key], horizon: _Seconds) -> list[bool]:
        """``insert_within`` for every key, in one pipeline; one bool per key.
        One call however long, as ``insert_many``. Raises as ``insert_within``
        does for ``horizon``, even with no keys."""
    def stats(self) -> dict[str, Any]:
        """Tiers, windows, fill, estimated keys and rates."""
    def close(self) -> None:
        """Closes the connection; the filters stay in Redis."""
    @property
    def url(self) -> str:
        """The URL, its password masked."""
    @property
    def prefix(self) -> str:
        """The prefix of every key of this engine."""
    @property
    def closed(self) -> bool:
        """Whether ``close`` has been called."""
    @property
    def tiers(self) -> str:
        """The tiers, in the form ``create`` takes (``"4x360min"`` reads back as ``"4x6h"``)."""
    @property
    def shards(self) -> int:
        """Strings per window."""
    @property
    def is_cluster(self) -> bool:
        """Whether the engine talks to a Redis Cluster."""
    def __contains__(self, key: _Key, /) -> bool:
        """``key in engine`` is ``engine.contains(key)``."""
    def __enter__(self) -> "RedisEngine":
        """The engine itself; ``ClosedError`` (``ForkedError`` in a forked child) when it is closed, as every call."""
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        """Closes the connection; False: an exception of the block goes on."""

__all__ = [
    "AlreadyExistsError",
    "ClockJumpError",
    "ClosedError",
    "ForkedError",
    "ConfigMismatchError",
    "CorruptError",
    "Engine",
    "HorizonTooLongError",
    "IncompleteError",
    "InvalidConfigError",
    "IoError",
    "LockedError",
    "ManualClock",
    "NotEmptyError",
    "NotFoundError",
    "NotReplicatedError",
    "QuarantinedError",
    "ReadOnlyError",
    "RedisEngine",
    "RedisError",
    "RemoveUnsupportedError",
    "TimebloomError",
    "UnsupportedError",
    "UnsupportedVersionError",
    "WindowUnavailableError",
]
