"""timebloom: embedded, persistent, time-windowed Bloom filters.

An :class:`Engine` keeps one Bloom filter per time window (by default 7
daily, 4 weekly and 12 monthly windows) as memory-mapped files in a
directory. Every insert goes into the open window of each tier; old windows
expire by themselves. The typical use is URL deduplication::

    from timebloom import Engine

    with Engine.create("seen.tb", items_per_day=100_000) as engine:
        if engine.insert("https://example.com/a"):
            ...  # first time this URL is seen

Keys are ``str`` (encoded as UTF-8) or ``bytes``; a ``str`` and its UTF-8
bytes are the same key. Batch calls (``insert_many``, ``contains_many``)
release the GIL; one engine may be shared between threads.

A :class:`RedisEngine` keeps the same windows in Redis, shared by every
process that connects to the same URL and prefix (a crawler fleet)::

    from timebloom import RedisEngine

    with RedisEngine.create("redis://10.0.0.5:6379", "crawl", exist_ok=True) as seen:
        new = seen.insert_many(urls)   # one bool per URL, in order

:mod:`timebloom.scrapy` holds a Scrapy duplicate filter.
"""

from timebloom._timebloom import (
    AlreadyExistsError,
    ClockJumpError,
    ClosedError,
    ConfigMismatchError,
    CorruptError,
    Engine,
    ForkedError,
    HorizonTooLongError,
    IncompleteError,
    InvalidConfigError,
    IoError,
    LockedError,
    ManualClock,
    NotEmptyError,
    NotFoundError,
    NotReplicatedError,
    QuarantinedError,
    ReadOnlyError,
    RedisEngine,
    RedisError,
    RemoveUnsupportedError,
    TimebloomError,
    UnsupportedError,
    UnsupportedVersionError,
    WindowUnavailableError,
    __version__,
)

__all__ = [
    "AlreadyExistsError",
    "ClockJumpError",
    "ClosedError",
    "ConfigMismatchError",
    "CorruptError",
    "Engine",
    "ForkedError",
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
