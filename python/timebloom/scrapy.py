"""A Scrapy duplicate filter over a timebloom engine.

Enable it in a project's settings::

    DUPEFILTER_CLASS = "timebloom.scrapy.TimebloomDupeFilter"
    TIMEBLOOM_RECRAWL_AFTER = "7d"   # optional: fetch a URL again after 7 days

Settings:

``TIMEBLOOM_DIR``
    The engine directory. Default: ``<JOBDIR>/timebloom`` when ``JOBDIR`` is
    set; otherwise a temporary directory deleted when the spider closes
    (every run starts empty, like Scrapy's built-in filter without JOBDIR).
``TIMEBLOOM_REDIS_URL``
    Keep the filters in Redis instead of a directory, shared by every
    spider process that uses the same URL and prefix (a fleet): of several
    processes that reach the same new request, exactly one fetches it.
    ``redis://[user:password@]host:6379[/db]``, ``rediss://`` for TLS,
    comma-separated URLs for a Cluster, ``redis+sentinel://host:26379/<master>``
    (see ``timebloom.RedisEngine``). Not with ``TIMEBLOOM_DIR`` or
    ``TIMEBLOOM_SYNC``. The filters stay in Redis when the spider closes.
``TIMEBLOOM_REDIS_PREFIX``
    The prefix of the engine's Redis keys. Default: ``timebloom:<spider
    name>``, so the processes of one spider share an engine and different
    spiders do not. A spider name with a brace, a space, a control or
    invisible format character (or of more than 118 bytes) makes no prefix: the filter
    fails at start with a ``ValueError`` asking for this setting.
``TIMEBLOOM_RECRAWL_AFTER``
    A request is a duplicate only if its fingerprint was seen within this
    horizon: seconds, a ``timedelta``, or a string such as ``"90min"``,
    ``"12h"``, ``"7d"``, ``"2w"``. Windows are whole, so a request seen up to
    one window of the answering tier earlier may still count as seen. The
    answering tier is the one with the shortest windows that reaches back
    the whole horizon, and a tier of N daily windows reaches back N-1 days
    and today: with ``TIMEBLOOM_TIERS = "7d,4w,12m"``, ``"7d"`` is answered
    by the weekly tier (a page is fetched again up to a week late) and
    ``"30d"`` by the monthly one (up to a month late). So when
    ``TIMEBLOOM_TIERS`` is unset and the horizon is from 7 to 62 days, a new
    engine's daily tier keeps a day more than the horizon (``"8d,4w,12m"``
    for ``"7d"``, ``"31d,4w,12m"`` for ``"30d"``): a page is fetched again
    at most a day late. Default: unset, a request is a duplicate
    while any window still holds it: 12 months after it was last requested
    with the default tiers, since a filtered request is recorded again (a
    request that comes back within every 12 months is never fetched again).
``TIMEBLOOM_ITEMS_PER_DAY``
    Planned distinct requests per day (default 100000), at least 1. A
    window that receives more grows instead of losing accuracy.
``TIMEBLOOM_FPR``
    The false-positive rate bound of one lookup (default 0.001): the share
    of new requests wrongly dropped as duplicates, strictly between 0 and 1.
``TIMEBLOOM_TIERS``
    The engine's tiers when it is created (default ``"7d,4w,12m"``, with a
    longer daily tier for a ``TIMEBLOOM_RECRAWL_AFTER`` of 7 to 62 days:
    see there). An existing engine (directory or Redis prefix) keeps the
    configuration it was created with.
``TIMEBLOOM_SYNC``
    When a recorded request survives a power loss: ``"always"``,
    ``"interval=1s"`` or ``"none"`` (see ``Engine.create``). Stored in a new
    engine; on an existing one it applies to this crawl only. Default:
    unset, the engine's own policy (``"interval=1s"`` for a new one). A
    process crash loses nothing under any policy.
``TIMEBLOOM_NOW``
    For tests and replays only: the engine reads this fixed instant (seconds
    since the Unix epoch, an aware ``datetime``, or an ISO 8601 string with
    an offset) instead of the system clock, so a test can run a crawl "three
    days later". Never set it in production: time does not move while it is
    set, so no window ever rotates.
``DUPEFILTER_DEBUG``
    Log every filtered request, as Scrapy's built-in filter does (otherwise
    only the first).

The filter keys the engine with the request fingerprint of the crawler's
``REQUEST_FINGERPRINTER_CLASS`` (the 20 raw bytes), so requests that Scrapy's
own filter treats as one are one here too. The engine is closed when the
spider closes. One writer at a time: two spiders running at once need
their own ``TIMEBLOOM_DIR`` (or ``TIMEBLOOM_REDIS_URL``); the second fails
at start with ``LockedError``. An engine directory that cannot be opened
fails at start with an error naming the path and the setting that gave it.
A directory opened again after the clock passed every
window its tiers keep (10 days later with ``TIMEBLOOM_TIERS = "7d"``, over
12 months with the default tiers) fails at start with ``ClockJumpError``,
as the engine refuses such a step: if the clock is right, move the engine
there with ``timebloom maintain DIR --now T`` (or delete the directory).

With ``TIMEBLOOM_RECRAWL_AFTER``, a request is checked against the horizon
and recorded in one step (``insert_within``), recorded only when it is due.
A horizon longer than the tiers keep fails when the crawl starts
(``HorizonTooLongError``). What the tiers keep varies: a tier of N windows reaches back N-1 whole
windows and the open one's elapsed part, so a horizon that fits at start
may not after the next window boundary, and then each request fails with
``HorizonTooLongError``. A horizon within N-1 windows of a tier always
fits: 6 days, 3 weeks or 334 days (11 months at the least) with the
default tiers. An engine clock behind every window the tiers keep fails
at start too (a ``TIMEBLOOM_NOW`` before the windows an earlier crawl rotated
to, or a system clock stepped back further than the tiers keep):
``WindowUnavailableError``, at start, or at each request when the clock
steps back during a crawl, rather than letting every request through as
unseen; it goes away when the clock catches up. A Redis engine does not
check its clock against its windows: with ``TIMEBLOOM_REDIS_URL``, a clock
behind every window its tiers keep reads windows that hold nothing, and
every request goes through as unseen until the clock catches up.
With or without it, of several processes sharing a Redis engine that reach
the same request when it is new or due again, exactly one fetches it.
"""

from __future__ import annotations

import logging
import math
import re
import shutil
import sys
import tempfile
import unicodedata
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union

try:
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy.utils.request import referer_str
except ModuleNotFoundError as _missing:
    if (_missing.name or "").split(".")[0] != "scrapy":
        raise
    raise ModuleNotFoundError("timebloom.scrapy needs Scrapy (>= 2.7): pip install scrapy", name="scrapy") from _missing

from timebloom import (
    AlreadyExistsError,
    CorruptError,
    Engine,
    InvalidConfigError,
    IoError,
    LockedError,
    ManualClock,
    NotEmptyError,
    NotFoundError,
    ReadOnlyError,
    RedisEngine,
    UnsupportedError,
    UnsupportedVersionError,
)

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

__all__ = ["TimebloomDupeFilter", "parse_duration"]

_UNITS = {"s": 1, "min": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_SECONDS = re.compile(r"\d+(?:\.\d+)?")
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")
_FORMS = "use seconds or 90min, 12h, 7d, 2w, 1d12h"


def parse_duration(value: Union[str, int, float, timedelta]) -> float:
    """Seconds of ``value``: a number of seconds, a ``timedelta``, or a
    string such as ``"3600"``, ``"90min"``, ``"12h"``, ``"7d"``, ``"2w"``,
    or several run together (``"1d12h"``), as the command line reads them.
    ``"m"`` is refused as ambiguous: ``TIMEBLOOM_TIERS`` reads it as months.

    A ``ValueError`` when ``value`` is not positive and finite (or a string
    of another form), a ``TypeError`` when it is none of these types. An int
    or a string of digits too large for a float reads as the largest float
    (longer than any engine keeps: the filter raises ``HorizonTooLongError``).
    """
    if isinstance(value, timedelta):
        secs = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            secs = float(value)
        except OverflowError:  # an int past the largest float
            secs = sys.float_info.max if value > 0 else -sys.float_info.max
    elif isinstance(value, str):
        text, secs, at = value.strip(), 0.0, 0
        if _SECONDS.fullmatch(text):
            secs, at = float(text), len(text)
        elif not text:
            raise ValueError(f"not a duration: {value!r} ({_FORMS})")
        while at < len(text):
            m = _PART.match(text, at)
            if m and m.group(2) == "m":
                raise ValueError(f'not a duration: {value!r} ("m" is ambiguous: write min for minutes)')
            if not m or m.group(2) not in _UNITS:
                raise ValueError(f"not a duration: {value!r} ({_FORMS})")
            unit = m.group(2)
            secs += float(m.group(1)) * _UNITS[unit]
            at = m.end()
        # Digits are finite, however many: too many for a float is the largest.
        secs = min(secs, sys.float_info.max)
    else:
        raise TypeError(f"not a duration: {value!r}")
    if not 0 < secs < float("inf"):  # NaN fails this too
        raise ValueError(f"a duration must be positive and finite: {value!r}")
    return secs


_T = TypeVar("_T")

# The errors of an engine directory that cannot be opened or created.
_DIR_ERRORS = (
    IoError,
    CorruptError,
    LockedError,
    NotEmptyError,
    UnsupportedVersionError,
    AlreadyExistsError,
    ReadOnlyError,
)

_DEFAULT_TIERS = "7d,4w,12m"


def _default_tiers(recrawl_after: Optional[float]) -> str:
    """The tiers of a new engine when ``TIMEBLOOM_TIERS`` is unset: the
    defaults, with a daily tier a day longer than a horizon of 7 to 62 days
    (``recrawl_after`` in seconds), so that the daily tier answers it and a
    page is due again at most a day late, not a week or a month late (a
    tier of N daily windows reaches back N-1 whole days and today)."""
    if recrawl_after is None:
        return _DEFAULT_TIERS
    days = math.ceil(recrawl_after / 86_400)
    if 7 <= days <= 62:
        return f"{days + 1}d,4w,12m"
    return _DEFAULT_TIERS

# Longer than any tier keeps (2**63 s), and short enough for the engine.
_LONGEST_HORIZON = float(2**63)


def _setting(value: Optional[_T]) -> Optional[_T]:
    """A setting's value, or ``None`` when it is unset or empty (a 0 is a
    value: the filter refuses it as a horizon)."""
    return None if value is None or value == "" else value


def _number(value: Any, name: str, kind: type, what: str) -> Any:
    """``value`` of the setting ``name`` as ``kind`` (``int`` or ``float``,
    as Scrapy's ``getint`` and ``getfloat`` read it); a ``ValueError``
    naming the setting when it is not one."""
    try:
        # int() cuts a fraction off a float (2.7 items a day read as 2).
        if kind is int and isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{value!r} has a fraction")
        return kind(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"{name} must be {what}: {value!r}") from e


def _named(name: str, read: Callable[[Any], _T], value: Any) -> _T:
    """``read(value)``, whose ``ValueError`` or ``TypeError`` names the
    setting ``name`` (the parser's own message names only the value)."""
    try:
        return read(value)
    except (TypeError, ValueError) as e:
        raise (TypeError if isinstance(e, TypeError) else ValueError)(f"{name}: {e}") from e


def _instant(value: Union[str, int, float, datetime]) -> Union[datetime, float]:
    """``TIMEBLOOM_NOW`` as something ``ManualClock`` takes."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            # Python before 3.11 reads no trailing ``Z`` for UTC.
            text = value.strip()
            if text[-1:] in ("Z", "z"):
                text = text[:-1] + "+00:00"
            return datetime.fromisoformat(text)
    return value


def _open_dir(
    path: str, tiers: str, items_per_day: int, fpr: float, clock: Optional[ManualClock], sync: Optional[str]
) -> Engine:
    """The engine in ``path``, created from the settings when there is none."""
    try:
        return Engine.open(path, clock=clock, sync=sync)
    except NotFoundError:
        if sync is None:
            return Engine.create(path, tiers, items_per_day, fpr, clock=clock)
        return Engine.create(path, tiers, items_per_day, fpr, clock=clock, sync=sync)


# The engine's names of its configuration's fields, as an InvalidConfigError
# quotes them, and the settings that give them.
_CONFIG_FIELDS = (
    ("tier", "TIMEBLOOM_TIERS"),
    ("expected_items_per_day", "TIMEBLOOM_ITEMS_PER_DAY"),
    ("fpr", "TIMEBLOOM_FPR"),
    ("sync", "TIMEBLOOM_SYNC"),
    ("prefix", "TIMEBLOOM_REDIS_PREFIX"),
)


def _name_settings(e: Exception) -> None:
    """Starts ``e``'s message (an ``InvalidConfigError``, or the
    ``UnsupportedError`` of a tier kind Redis does not keep) with the
    settings whose fields it names: the engine quotes the tier, the policy
    or the prefix it refused, but not the setting that gave it. A message
    naming none of them is about the tiers (the only other input of a
    create whose numbers were checked before it)."""
    message = str(e)
    what = message
    for marker in ("invalid configuration: ", "not supported on Redis: "):
        _, found, rest = message.partition(marker)
        if found:
            what = rest
            break
    names = [setting for field, setting in _CONFIG_FIELDS if field in what] or ["TIMEBLOOM_TIERS"]
    e.args = (f"{', '.join(names)}: {message}",)


def _default_prefix(name: str, check: bool) -> str:
    """``timebloom:<name>``, the default Redis prefix of a spider. With
    ``check``, a name that makes a prefix ``RedisEngine`` refuses (a brace,
    white space, a control or invisible format character, more than 128
    bytes) is a
    ``ValueError`` that names ``TIMEBLOOM_REDIS_PREFIX``: the engine's own
    error would name a prefix the settings never gave."""
    prefix = f"timebloom:{name}"
    if check and (
        len(prefix.encode("utf-8", "surrogatepass")) > 128
        or any(c in "{}" or c.isspace() or unicodedata.category(c) in ("Cc", "Cf") for c in prefix)
    ):
        raise ValueError(
            f"spider name {name!r} cannot be part of the default Redis prefix (timebloom:<spider name>, "
            "at most 128 bytes, no braces, spaces, control or invisible format characters): "
            "set TIMEBLOOM_REDIS_PREFIX"
        )
    return prefix


def _open_redis(
    url: str, prefix: str, tiers: str, items_per_day: int, fpr: float, clock: Optional[ManualClock]
) -> RedisEngine:
    """The engine under ``prefix`` in Redis, created from the settings when
    there is none."""
    try:
        return RedisEngine.open(url, prefix, clock=clock)
    except NotFoundError:
        # Another process may create it meanwhile: exist_ok opens it then
        # (ConfigMismatchError if its configuration differs).
        return RedisEngine.create(url, prefix, tiers, items_per_day, fpr, clock=clock, exist_ok=True)


class TimebloomDupeFilter(BaseDupeFilter):
    """Scrapy duplicate filter (``DUPEFILTER_CLASS``) over a timebloom engine.

    A request is a duplicate when its fingerprint is in the engine (within
    ``recrawl_after`` when set): an :class:`~timebloom.Engine` directory, or
    with ``TIMEBLOOM_REDIS_URL`` a :class:`~timebloom.RedisEngine` that a
    fleet of spider processes shares. Unlike Scrapy's built-in filter,
    memory does not grow with the number of requests seen, old fingerprints
    expire with their windows, and "fetch again after N days" is one
    setting.
    """

    def __init__(
        self,
        path: Optional[Union[str, Path]] = None,
        *,
        recrawl_after: Optional[Union[str, int, float, timedelta]] = None,
        items_per_day: int = 100_000,
        fpr: float = 0.001,
        tiers: Optional[str] = None,
        debug: bool = False,
        fingerprinter: Any = None,
        now: Optional[Union[str, int, float, datetime]] = None,
        sync: Optional[str] = None,
        redis_url: Optional[str] = None,
        redis_prefix: Optional[str] = None,
    ) -> None:
        """Opens (or creates) the engine in ``path``; a temporary directory,
        deleted at close, when ``path`` is None. ``sync`` is a sync policy
        (stored in a new engine, for this crawl only in an existing one;
        None: the engine's own). ``tiers`` None: the defaults, fitted to the
        horizon. With ``redis_url``, the engine under
        ``redis_prefix`` in that Redis instead (``path`` and ``sync`` must
        be None). ``now`` is the test hook of ``TIMEBLOOM_NOW``."""
        if fingerprinter is None:
            from scrapy.utils.request import RequestFingerprinter

            fingerprinter = RequestFingerprinter()
        if not items_per_day >= 1:  # the engine takes no negative number at all
            raise ValueError(f"TIMEBLOOM_ITEMS_PER_DAY must be at least 1: {items_per_day!r}")
        if items_per_day >= 2**64:  # past what the engine reads (its own error names no setting)
            raise ValueError(f"TIMEBLOOM_ITEMS_PER_DAY is too large: {items_per_day!r}")
        if not 0 < fpr < 1:  # NaN too; the engine's own error names no setting
            raise ValueError(f"TIMEBLOOM_FPR must be strictly between 0 and 1: {fpr!r}")
        self.fingerprinter = fingerprinter
        self.debug = debug
        self.logdupes = True
        self.logger = logging.getLogger(__name__)
        self.recrawl_after: Optional[float] = (
            None if recrawl_after is None else _named("TIMEBLOOM_RECRAWL_AFTER", parse_duration, recrawl_after)
        )
        if tiers is None:
            tiers = _default_tiers(self.recrawl_after)
        self._tempdir: Optional[str] = None
        self.path: Optional[str] = None
        self.redis_url, self.redis_prefix = redis_url, redis_prefix
        clock = None if now is None else _named("TIMEBLOOM_NOW", lambda v: ManualClock(_instant(v)), now)
        if redis_url:
            if path is not None or sync is not None:
                raise ValueError(
                    "TIMEBLOOM_REDIS_URL keeps the filters in Redis: TIMEBLOOM_DIR and TIMEBLOOM_SYNC do not apply"
                )
            if not redis_prefix:
                raise ValueError("TIMEBLOOM_REDIS_URL needs a prefix (TIMEBLOOM_REDIS_PREFIX)")
        elif path is None:
            self._tempdir = tempfile.mkdtemp(prefix="timebloom-dupefilter-")
            path = Path(self._tempdir, "seen.tb")
        engine: Union[Engine, RedisEngine, None] = None
        try:
            if redis_url and redis_prefix:
                engine = _open_redis(redis_url, redis_prefix, tiers, items_per_day, fpr, clock)
            else:
                self.path = str(path)
                engine = _open_dir(self.path, tiers, items_per_day, fpr, clock, sync)
            if self.recrawl_after is not None:
                # Fails now, not at the first request, when no tier keeps
                # the horizon (HorizonTooLongError). A horizon past what the
                # engine's durations hold (2**64 s, a ValueError there) is
                # asked as 2**63 s: no tier keeps that either.
                engine.contains_within(b"", min(self.recrawl_after, _LONGEST_HORIZON))
        except BaseException as e:
            if engine is not None:
                engine.close()
            self._remove_tempdir()
            if isinstance(e, (InvalidConfigError, UnsupportedError)):
                _name_settings(e)
            raise
        self.engine: Union[Engine, RedisEngine] = engine

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TimebloomDupeFilter:
        """The filter configured from the crawler's settings (see the module docs)."""
        s = crawler.settings
        redis_url = s.get("TIMEBLOOM_REDIS_URL") or None
        path = s.get("TIMEBLOOM_DIR")
        if not path and s.get("JOBDIR") and not redis_url:
            path = str(Path(s.get("JOBDIR"), "timebloom"))
        spider = getattr(crawler, "spider", None) or crawler.spidercls
        try:
            return cls._from_settings(crawler, path, redis_url, spider)
        except _DIR_ERRORS as e:
            # The engine's error names the path, not the setting that gave
            # it, and a LockedError advises a read-only open, of no use here.
            if path and not redis_url:
                given = (
                    "TIMEBLOOM_DIR"
                    if s.get("TIMEBLOOM_DIR")
                    else "JOBDIR (the default TIMEBLOOM_DIR is <JOBDIR>/timebloom)"
                )
                if isinstance(e, LockedError):
                    e.args = (
                        f"{given}: {path}: the engine is open in another process or crawl (one writer at a "
                        "time): give each spider, and each crawl that runs at the same time, its own "
                        "TIMEBLOOM_DIR, or let them share one filter with TIMEBLOOM_REDIS_URL",
                    )
                else:
                    e.args = (f"{given}: {e}",)
            raise

    @classmethod
    def _from_settings(
        cls, crawler: Crawler, path: Optional[str], redis_url: Optional[str], spider: Any
    ) -> TimebloomDupeFilter:
        """The filter of ``from_crawler``, the directory ``path`` chosen."""
        s = crawler.settings
        return cls(
            path or None,
            # 0 is a value (refused as a horizon, as "0" is), not unset.
            recrawl_after=_setting(s.get("TIMEBLOOM_RECRAWL_AFTER")),
            items_per_day=_number(
                s.get("TIMEBLOOM_ITEMS_PER_DAY", 100_000), "TIMEBLOOM_ITEMS_PER_DAY", int, "a whole number"
            ),
            fpr=_number(s.get("TIMEBLOOM_FPR", 0.001), "TIMEBLOOM_FPR", float, "a number"),
            tiers=_setting(s.get("TIMEBLOOM_TIERS")),
            debug=s.getbool("DUPEFILTER_DEBUG"),
            fingerprinter=crawler.request_fingerprinter,
            now=_setting(s.get("TIMEBLOOM_NOW")),  # 0 is the epoch, not unset
            sync=s.get("TIMEBLOOM_SYNC") or None,
            redis_url=redis_url,
            redis_prefix=s.get("TIMEBLOOM_REDIS_PREFIX") or _default_prefix(spider.name, bool(redis_url)),
        )

    def request_seen(self, request: Request) -> bool:
        """Whether ``request`` was seen (within ``recrawl_after``); records it when not."""
        fp = self.fingerprinter.fingerprint(request)
        if self.recrawl_after is None:
            return not self.engine.insert(fp)
        # One step: of several spiders sharing a Redis engine, exactly one
        # is told a request is due again.
        return not self.engine.insert_within(fp, self.recrawl_after)

    def close(self, reason: str) -> None:
        """Closes the engine (and deletes a temporary directory); the
        filters of a Redis engine stay in Redis."""
        try:
            self.engine.close()
        finally:
            self._remove_tempdir()

    def log(self, request: Request, spider: Spider) -> None:
        """Logs a filtered request like Scrapy's built-in filter: every one
        with ``DUPEFILTER_DEBUG``, else the first; counts
        ``dupefilter/filtered`` in the crawl stats."""
        if self.debug:
            msg = "Filtered duplicate request: %(request)s (referer: %(referer)s)"
            args = {"request": request, "referer": referer_str(request)}
            self.logger.debug(msg, args, extra={"spider": spider})
        elif self.logdupes:
            msg = (
                "Filtered duplicate request: %(request)s"
                " - no more duplicates will be shown"
                " (see DUPEFILTER_DEBUG to show all duplicates)"
            )
            self.logger.debug(msg, {"request": request}, extra={"spider": spider})
            self.logdupes = False
        spider.crawler.stats.inc_value("dupefilter/filtered")

    def _remove_tempdir(self) -> None:
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None
