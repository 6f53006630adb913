"""TimebloomDupeFilter: settings, logging, and real crawls of a loopback site."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("scrapy")

from scrapy import Request  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

import timebloom  # noqa: E402
from timebloom.scrapy import TimebloomDupeFilter, parse_duration  # noqa: E402

from loopback_site import Site  # noqa: E402  (tests/loopback_site.py; pytest puts tests/ on sys.path)

HERE = Path(__file__).parent
T0 = datetime(2026, 3, 10, 12, 0, tzinfo=timezone.utc)
N_PAGES = 300
FILTER = "timebloom.scrapy.TimebloomDupeFilter"


@pytest.fixture(scope="module")
def site():
    s = Site(N_PAGES)
    yield s
    s.stop()


def crawl(site: Site, **settings) -> dict:
    """One crawl from page 0 in a fresh process; returns its Scrapy stats."""
    return crawl_together(site, [(site.start_url, settings)])[0]


def crawl_together(site: Site, runs: list) -> list:
    """Crawls at once, one process each, from ``(start_url, settings)``;
    returns their Scrapy stats. The site's counts start from zero."""
    site.reset()
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "crawl.py"), start, json.dumps(settings)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for start, settings in runs
    ]
    stats = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        if p.returncode != 0:
            raise AssertionError(f"crawl failed ({p.returncode}):\n{err[-4000:]}")
        stats.append(json.loads(out.strip().splitlines()[-1]))
    return stats


def fetched_once_each(site: Site) -> bool:
    return dict(site.hits) == {i: 1 for i in range(site.n)} and not site.other


def test_crawl_once_then_nothing_then_again_after_the_recrawl_horizon(site, tmp_path):
    d = str(tmp_path / "seen.tb")
    common = {"DUPEFILTER_CLASS": FILTER, "TIMEBLOOM_DIR": d, "TIMEBLOOM_ITEMS_PER_DAY": 10_000}

    stats = crawl(site, TIMEBLOOM_RECRAWL_AFTER="1d", TIMEBLOOM_NOW=T0.isoformat(), **common)
    assert fetched_once_each(site), (sorted(site.hits.items())[:20], site.other)
    assert stats["downloader/response_count"] == N_PAGES
    assert stats["dupefilter/filtered"] > 5 * N_PAGES  # the site repeats links a lot

    # An hour later: every request is a duplicate, the start URL included.
    stats = crawl(site, TIMEBLOOM_RECRAWL_AFTER="1d", TIMEBLOOM_NOW=(T0 + timedelta(hours=1)).isoformat(), **common)
    assert sum(site.hits.values()) == 0 and not site.other
    assert stats.get("downloader/response_count", 0) == 0
    assert stats["dupefilter/filtered"] == 1

    # Three days later, past TIMEBLOOM_RECRAWL_AFTER: every page again, once.
    crawl(site, TIMEBLOOM_RECRAWL_AFTER="1d", TIMEBLOOM_NOW=(T0 + timedelta(days=3)).isoformat(), **common)
    assert fetched_once_each(site)

    # Without a horizon, anything the live windows hold is a duplicate.
    crawl(site, TIMEBLOOM_NOW=(T0 + timedelta(days=4)).isoformat(), **common)
    assert sum(site.hits.values()) == 0


def test_the_builtin_filter_fetches_the_same_pages(site):
    """The site's link spellings are what Scrapy itself treats as one URL."""
    crawl(site, DUPEFILTER_CLASS="scrapy.dupefilters.RFPDupeFilter")
    assert fetched_once_each(site)


def test_jobdir_is_the_default_home_and_a_rerun_fetches_nothing(site, tmp_path):
    job = tmp_path / "job"
    crawl(site, DUPEFILTER_CLASS=FILTER, JOBDIR=str(job), TIMEBLOOM_ITEMS_PER_DAY=10_000)
    assert fetched_once_each(site)
    assert (job / "timebloom" / "MANIFEST").exists()
    crawl(site, DUPEFILTER_CLASS=FILTER, JOBDIR=str(job))
    assert sum(site.hits.values()) == 0
    with timebloom.Engine.open(job / "timebloom") as e:  # closed by the crawl: not locked
        assert e.stats()["expected_items_per_day"] == 10_000


def test_a_jobdir_keeps_the_filter_apart_from_scrapys_requests_seen(tmp_path):
    # Scrapy's RFPDupeFilter keeps its fingerprints in <JOBDIR>/requests.seen;
    # this filter keeps its own in <JOBDIR>/timebloom and neither reads nor
    # writes that file: a job begun with Scrapy's filter and resumed with
    # this one starts with nothing seen, and the file stays as it was.
    from scrapy.dupefilters import RFPDupeFilter

    job = tmp_path / "job"
    settings = {"JOBDIR": str(job)}
    seen_before, other = Request("http://a.example/seen"), Request("http://a.example/other")
    rfp = RFPDupeFilter.from_crawler(get_crawler(settings_dict=settings))
    assert not rfp.request_seen(seen_before)
    rfp.close("shutdown")
    file = job / "requests.seen"
    before = file.read_bytes()
    assert before
    df = make_filter(settings)
    assert Path(df.path) == job / "timebloom"
    assert not df.request_seen(seen_before)  # requests.seen was not read
    assert not df.request_seen(other)
    df.close("shutdown")
    assert file.read_bytes() == before  # nor written
    rfp = RFPDupeFilter.from_crawler(get_crawler(settings_dict=settings))
    assert rfp.request_seen(seen_before) and not rfp.request_seen(other)
    rfp.close("finished")


@pytest.fixture
def clocks(monkeypatch):
    """The ManualClock of each filter made with TIMEBLOOM_NOW from here on,
    in order: a test moves a running filter's clock with them."""
    made = []

    def kept(now):
        made.append(timebloom.ManualClock(now))
        return made[-1]

    monkeypatch.setattr("timebloom.scrapy.ManualClock", kept)
    return made


def make_filter(settings: dict, spidercls=None) -> TimebloomDupeFilter:
    crawler = get_crawler(spidercls, settings_dict=settings)
    return TimebloomDupeFilter.from_crawler(crawler)


def test_without_a_directory_a_temporary_one_is_removed_at_close():
    df = make_filter({})
    assert not df.request_seen(Request("http://a.example/x"))
    assert df.request_seen(Request("http://a.example/x#frag"))
    assert not df.request_seen(Request("http://a.example/x", method="POST"))
    path = Path(df.path)
    assert path.exists()
    df.close("finished")
    assert df.engine.closed
    assert not path.exists()


def test_settings_reach_the_engine(tmp_path):
    d = tmp_path / "tb"
    df = make_filter(
        {
            "TIMEBLOOM_DIR": str(d),
            "TIMEBLOOM_ITEMS_PER_DAY": "5000",
            "TIMEBLOOM_FPR": "0.01",
            "TIMEBLOOM_TIERS": "3d,2w",
            "TIMEBLOOM_RECRAWL_AFTER": "36h",
        }
    )
    try:
        assert df.recrawl_after == 36 * 3600
        s = df.engine.stats()
        assert (s["expected_items_per_day"], s["fpr"], df.engine.tiers) == (5000, 0.01, "3d,2w")
    finally:
        df.close("finished")


def test_timebloom_sync_is_stored_in_a_new_engine_and_replaced_for_one_crawl(tmp_path):
    d = str(tmp_path / "tb")
    df = make_filter({"TIMEBLOOM_DIR": d, "TIMEBLOOM_SYNC": "always"})
    try:
        assert df.engine.sync == "always"
        assert not df.request_seen(Request("http://a.example/x"))
    finally:
        df.close("finished")
    df = make_filter({"TIMEBLOOM_DIR": d, "TIMEBLOOM_SYNC": "none"})
    try:
        assert df.engine.sync == "none"
        assert df.request_seen(Request("http://a.example/x"))
    finally:
        df.close("finished")
    df = make_filter({"TIMEBLOOM_DIR": d})
    try:
        assert df.engine.sync == "always"
    finally:
        df.close("finished")
    with pytest.raises(timebloom.InvalidConfigError):
        make_filter({"TIMEBLOOM_DIR": d, "TIMEBLOOM_SYNC": "sometimes"})
    with pytest.raises(timebloom.InvalidConfigError):
        make_filter({"TIMEBLOOM_DIR": str(tmp_path / "new"), "TIMEBLOOM_SYNC": "sometimes"})
    assert not (tmp_path / "new").exists()


def test_a_recrawl_horizon_of_zero_is_refused_as_a_string_or_a_number(tmp_path):
    # Found in review: the number 0 was taken for "unset" and turned
    # recrawling off, where "0" was refused.
    for zero in (0, "0", 0.0):
        with pytest.raises(ValueError, match="positive"):
            make_filter({"TIMEBLOOM_DIR": str(tmp_path / "tb"), "TIMEBLOOM_RECRAWL_AFTER": zero})


def test_timebloom_now_of_zero_is_an_instant_not_unset(tmp_path):
    # TIMEBLOOM_NOW is Unix seconds: 0 is the epoch, as "0" is, not the
    # system clock (a replay would run at today's date unnoticed).
    for zero in (0, "0", 0.0):
        df = make_filter({"TIMEBLOOM_DIR": str(tmp_path / f"tb-{zero!r}"), "TIMEBLOOM_NOW": zero})
        try:
            assert df.engine.stats()["now"] == 0, zero
        finally:
            df.close("finished")


def test_timebloom_now_takes_a_trailing_z_on_every_python(tmp_path):
    # ISO 8601 with "Z" for UTC, as the docs show it: Python before 3.11
    # (the package supports 3.9) reads no "Z" in fromisoformat, nor does
    # any version read a lower-case "z" or surrounding spaces.
    t = int(datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp())
    for i, text in enumerate(("2026-11-01T00:00:00Z", "2026-11-01T00:00:00z", " 2026-11-01T00:00:00Z ")):
        df = make_filter({"TIMEBLOOM_DIR": str(tmp_path / f"tb-{i}"), "TIMEBLOOM_NOW": text})
        try:
            assert df.engine.stats()["now"] == t, text
        finally:
            df.close("finished")


def test_a_seven_day_recrawl_is_late_by_the_window_of_the_tier_that_answers_it(tmp_path, clocks):
    """The docs said a request seen up to "a day, with daily tiers" before
    the horizon may still count as seen; with the default tiers (a daily
    7d tier) TIMEBLOOM_RECRAWL_AFTER = "7d" is answered by the weekly tier,
    so a page seen on a Monday at 00:30 was a duplicate until the Monday
    two weeks on (13 days 23.5 hours; 14 in this test's hourly steps). With
    a daily tier one day longer than the horizon, it is due within a day."""
    monday = datetime(2026, 3, 9, 0, 30, tzinfo=timezone.utc)

    def first_due(tiers, horizon_days=7):
        settings = {
            "TIMEBLOOM_DIR": str(tmp_path / f"{tiers}-{horizon_days}"),
            "TIMEBLOOM_RECRAWL_AFTER": f"{horizon_days}d",
            "TIMEBLOOM_NOW": monday.isoformat(),
        }
        if tiers:
            settings["TIMEBLOOM_TIERS"] = tiers
        df = make_filter(settings)
        try:
            assert not df.request_seen(Request("http://a.example/"))
            for hours in range(horizon_days * 24, 70 * 24):
                clocks[-1].set(monday + timedelta(hours=hours))
                if not df.request_seen(Request("http://a.example/")):
                    return hours / 24
        finally:
            df.close("finished")
        return None

    assert first_due("7d,4w,12m") == 14
    assert first_due("8d,4w,12m") == 8
    # TIMEBLOOM_TIERS unset: the daily tier is fitted to the horizon (the
    # defaults were "7d,4w,12m" whatever the horizon: 14 days for "7d",
    # and for "30d" the monthly tier answered, 53 days from this Monday;
    # up to 61 from the first of a 31-day month, docs/python.md).
    assert first_due(None) == 8
    assert first_due(None, 30) == 31
    assert first_due(None, 3) == 4
    doc = " ".join(timebloom.scrapy.__doc__.split())
    assert "up to a week late" in doc and '"8d,4w,12m"' in doc


def test_without_a_horizon_a_filtered_request_is_recorded_again(tmp_path, clocks):
    """The docs said that without TIMEBLOOM_RECRAWL_AFTER a request is a
    duplicate while a window holds it, "12 months with the default tiers";
    but each filtered request is recorded again, so one requested every 30
    days was still a duplicate 720 days after it was first fetched. The
    docs now count the 12 months from the last time it was requested."""
    t0 = datetime(2026, 1, 15, 12, tzinfo=timezone.utc)
    df = make_filter({"TIMEBLOOM_DIR": str(tmp_path / "tb"), "TIMEBLOOM_NOW": t0.isoformat()})
    try:
        assert not df.request_seen(Request("http://a.example/"))
        for month in range(1, 25):
            clocks[-1].set(t0 + timedelta(days=30 * month))
            assert df.request_seen(Request("http://a.example/")), month
    finally:
        df.close("finished")
    doc = " ".join(timebloom.scrapy.__doc__.split())
    assert "12 months after it was last requested" in doc


def test_a_crawl_resumed_after_every_window_would_expire_is_a_clock_jump(tmp_path):
    """A directory crawled with TIMEBLOOM_TIERS = "7d" and opened again 10
    days later failed at start with ClockJumpError, which the Scrapy docs
    did not name among the errors of a crawl's start; they now do, with the
    way past it."""
    d = str(tmp_path / "tb")
    t0 = datetime(2026, 3, 10, 12, tzinfo=timezone.utc)
    df = make_filter({"TIMEBLOOM_DIR": d, "TIMEBLOOM_TIERS": "7d", "TIMEBLOOM_NOW": t0.isoformat()})
    try:
        assert not df.request_seen(Request("http://a.example/"))
    finally:
        df.close("finished")
    later = (t0 + timedelta(days=10)).isoformat()
    with pytest.raises(timebloom.ClockJumpError, match="timebloom maintain"):
        make_filter({"TIMEBLOOM_DIR": d, "TIMEBLOOM_NOW": later})
    doc = " ".join(timebloom.scrapy.__doc__.split())
    assert "ClockJumpError" in doc and "timebloom maintain" in doc


def test_a_horizon_longer_than_the_tiers_fails_at_start(tmp_path):
    with pytest.raises(timebloom.HorizonTooLongError):
        make_filter({"TIMEBLOOM_DIR": str(tmp_path / "tb"), "TIMEBLOOM_TIERS": "7d", "TIMEBLOOM_RECRAWL_AFTER": "30d"})
    # The refused filter closed its engine: the directory is not locked.
    timebloom.Engine.open(tmp_path / "tb").close()


def test_a_horizon_that_fits_at_start_may_not_fit_past_the_next_boundary(tmp_path, clocks):
    """The docs said a horizon longer than the tiers keep fails when the
    crawl starts; but a tier of N windows reaches back N-1 whole windows and
    the open one's elapsed part, so "50w" (350 days, under the 12 months of
    the default tiers) started on March 31 and failed every request with
    HorizonTooLongError from April 1. 334 days (11 months at the least)
    always fits. The docs now say so."""
    march_31 = datetime(2026, 3, 31, 12, tzinfo=timezone.utc)
    for horizon, fits in (("50w", False), ("334d", True)):
        df = make_filter(
            {"TIMEBLOOM_DIR": str(tmp_path / horizon), "TIMEBLOOM_RECRAWL_AFTER": horizon, "TIMEBLOOM_NOW": march_31.isoformat()}
        )
        try:
            assert not df.request_seen(Request("http://a.example/1"))
            clocks[-1].set(datetime(2026, 4, 1, tzinfo=timezone.utc))
            if fits:
                assert not df.request_seen(Request("http://a.example/2"))
            else:
                with pytest.raises(timebloom.HorizonTooLongError):
                    df.request_seen(Request("http://a.example/2"))
        finally:
            df.close("finished")
    doc = " ".join(timebloom.scrapy.__doc__.split())
    assert "334 days" in doc


def test_a_horizon_past_what_a_duration_holds_is_too_long_too(tmp_path):
    # Found in review: 1e30 seconds failed with the engine's ValueError
    # "not a valid duration" (past 2**64 s) instead of HorizonTooLongError.
    for i, value in enumerate((1e30, 2**64, "99999999999999999999w", timedelta.max)):
        d = tmp_path / f"tb-{i}"
        with pytest.raises(timebloom.HorizonTooLongError):
            make_filter({"TIMEBLOOM_DIR": str(d), "TIMEBLOOM_TIERS": "7d", "TIMEBLOOM_RECRAWL_AFTER": value})
        timebloom.Engine.open(d).close()


def test_a_horizon_past_what_a_float_holds_is_too_long_not_an_overflow(tmp_path):
    # An int too large for a float failed with Python's OverflowError
    # ("int too large to convert to float"), and a string of as many digits
    # with "must be positive and finite": both are finite numbers of seconds,
    # longer than any tier keeps, as 1e30 is.
    for i, value in enumerate((10**400, "9" * 400, "9" * 400 + "d")):
        d = tmp_path / f"tb-{i}"
        with pytest.raises(timebloom.HorizonTooLongError):
            make_filter({"TIMEBLOOM_DIR": str(d), "TIMEBLOOM_TIERS": "7d", "TIMEBLOOM_RECRAWL_AFTER": value})
        timebloom.Engine.open(d).close()
    # Negative, however large, is refused as any negative horizon is.
    for value in (-(10**400), -1):
        with pytest.raises(ValueError, match="positive"):
            parse_duration(value)


def test_a_bad_items_per_day_or_fpr_names_its_setting(tmp_path):
    # TIMEBLOOM_ITEMS_PER_DAY = -1 failed with OverflowError "can't convert
    # negative int to unsigned", and "abc" (or "1e5") and an FPR of "0.1%"
    # with int()'s and float()'s own ValueError, none naming the setting.
    for i, (name, value, match) in enumerate(
        (
            ("TIMEBLOOM_ITEMS_PER_DAY", -1, "TIMEBLOOM_ITEMS_PER_DAY must be at least 1"),
            ("TIMEBLOOM_ITEMS_PER_DAY", -(10**30), "TIMEBLOOM_ITEMS_PER_DAY must be at least 1"),
            ("TIMEBLOOM_ITEMS_PER_DAY", 0, "TIMEBLOOM_ITEMS_PER_DAY must be at least 1"),
            ("TIMEBLOOM_ITEMS_PER_DAY", "abc", "TIMEBLOOM_ITEMS_PER_DAY must be a whole number"),
            ("TIMEBLOOM_ITEMS_PER_DAY", "1e5", "TIMEBLOOM_ITEMS_PER_DAY must be a whole number"),
            ("TIMEBLOOM_FPR", "0.1%", "TIMEBLOOM_FPR must be a number"),
            ("TIMEBLOOM_FPR", [0.1], "TIMEBLOOM_FPR must be a number"),
        )
    ):
        d = tmp_path / f"tb-{i}"
        with pytest.raises(ValueError, match=match):
            make_filter({"TIMEBLOOM_DIR": str(d), name: value})
        assert not d.exists(), (name, value)
    # An FPR out of range names its setting too (it was the engine's
    # InvalidConfigError, which names only fpr).
    with pytest.raises(ValueError, match="TIMEBLOOM_FPR must be strictly between 0 and 1: 1.5"):
        make_filter({"TIMEBLOOM_DIR": str(tmp_path / "tb-fpr"), "TIMEBLOOM_FPR": 1.5})
    assert not (tmp_path / "tb-fpr").exists()


def test_a_locked_directory_is_a_locked_error(tmp_path):
    d = tmp_path / "tb"
    with timebloom.Engine.create(d, items_per_day=100):
        with pytest.raises(timebloom.LockedError):
            make_filter({"TIMEBLOOM_DIR": str(d)})


class _Spider:
    def __init__(self, crawler):
        self.crawler = crawler


@pytest.mark.parametrize("debug", [False, True])
def test_logging_like_the_builtin_filter(caplog, debug):
    crawler = get_crawler(settings_dict={"DUPEFILTER_DEBUG": debug})
    df = TimebloomDupeFilter.from_crawler(crawler)
    spider = _Spider(crawler)
    try:
        with caplog.at_level(logging.DEBUG, logger="timebloom.scrapy"):
            for i in range(3):
                r = Request(f"http://a.example/{i}", headers={"Referer": "http://a.example/"})
                df.request_seen(r)
                assert df.request_seen(r)
                df.log(r, spider)
    finally:
        df.close("finished")
    msgs = [rec.getMessage() for rec in caplog.records if rec.name == "timebloom.scrapy"]
    if debug:
        assert len(msgs) == 3
        assert all("(referer: http://a.example/)" in m for m in msgs)
    else:
        assert len(msgs) == 1 and "no more duplicates will be shown" in msgs[0]
    assert crawler.stats.get_value("dupefilter/filtered") == 3


def test_parse_duration():
    assert parse_duration("7d") == 7 * 86_400
    assert parse_duration("90min") == 5400
    assert parse_duration("1d12h") == 36 * 3600  # parts run together, as on the command line
    assert parse_duration(" 1.5d ") == 36 * 3600
    assert parse_duration("2w") == 14 * 86_400
    assert parse_duration("3600") == 3600
    assert parse_duration(1.5) == 1.5
    assert parse_duration(timedelta(hours=2)) == 7200
    for bad in ("7x", "", "-1d", "0", "7D", "1d-2h", float("nan"), float("inf"), -1, timedelta(0)):
        with pytest.raises(ValueError):
            parse_duration(bad)
    # "m" read as minutes, though TIMEBLOOM_TIERS reads it as months: "3m"
    # meant as three months recrawled every three minutes. It is refused,
    # as the command line refuses it.
    for ambiguous in ("3m", "90m", "1d30m"):
        with pytest.raises(ValueError, match="ambiguous: write min for minutes"):
            parse_duration(ambiguous)
    with pytest.raises(TypeError):
        parse_duration(True)


# ---- Redis: TIMEBLOOM_REDIS_URL ------------------------------------------

# Noon UTC today: the windows a crawl at TIMEBLOOM_NOW writes expire in
# Redis (EXPIREAT, by Redis's own clock) days after the real now.
T_REDIS = datetime.now(timezone.utc).replace(hour=12, minute=0, second=0, microsecond=0)


def test_a_fleet_shares_one_redis_engine_across_runs_and_recrawls_after_the_horizon(site, redis_server, prefix):
    """One crawl, then another process an hour later fetches nothing, then
    three days later (past TIMEBLOOM_RECRAWL_AFTER) every page again."""
    common = {
        "DUPEFILTER_CLASS": FILTER,
        "TIMEBLOOM_REDIS_URL": redis_server.url,
        "TIMEBLOOM_REDIS_PREFIX": prefix,
        "TIMEBLOOM_ITEMS_PER_DAY": 10_000,
        "TIMEBLOOM_RECRAWL_AFTER": "1d",
    }
    stats = crawl(site, TIMEBLOOM_NOW=T_REDIS.isoformat(), **common)
    assert fetched_once_each(site), (sorted(site.hits.items())[:20], site.other)
    assert stats["downloader/response_count"] == N_PAGES
    assert stats["dupefilter/filtered"] > 5 * N_PAGES

    stats = crawl(site, TIMEBLOOM_NOW=(T_REDIS + timedelta(hours=1)).isoformat(), **common)
    assert sum(site.hits.values()) == 0 and not site.other
    assert stats.get("downloader/response_count", 0) == 0
    assert stats["dupefilter/filtered"] == 1  # the start URL

    crawl(site, TIMEBLOOM_NOW=(T_REDIS + timedelta(days=3)).isoformat(), **common)
    assert fetched_once_each(site)

    # Without a horizon, anything the live windows hold is a duplicate.
    del common["TIMEBLOOM_RECRAWL_AFTER"]
    crawl(site, TIMEBLOOM_NOW=(T_REDIS + timedelta(days=4)).isoformat(), **common)
    assert sum(site.hits.values()) == 0
    with timebloom.RedisEngine.open(redis_server.url, prefix) as e:
        assert e.stats()["expected_items_per_day"] == 10_000


def test_spiders_crawling_at_once_fetch_every_page_once_between_them(site, redis_server, prefix):
    """Three processes crawl the site at the same time from different pages,
    sharing one engine in Redis: every page is fetched exactly once."""
    settings = {"DUPEFILTER_CLASS": FILTER, "TIMEBLOOM_REDIS_URL": redis_server.url, "TIMEBLOOM_REDIS_PREFIX": prefix}
    starts = [f"http://127.0.0.1:{site.port}/page?id={i}&lang=en" for i in (0, N_PAGES // 3, 2 * N_PAGES // 3)]
    # Every page waits until all three processes have sent a request (each
    # its own user agent): none discovers links before the others have
    # claimed their start pages, however late one of them starts.
    agents = [f"crawler-{k}" for k in range(len(starts))]
    site.hold_for = set(agents)
    try:
        stats = crawl_together(site, [(s, {**settings, "USER_AGENT": a}) for s, a in zip(starts, agents)])
    finally:
        site.hold_for = set()
    assert fetched_once_each(site), (sorted(site.hits.items())[:20], site.other)
    assert sum(s.get("downloader/response_count", 0) for s in stats) == N_PAGES
    assert all(s.get("downloader/response_count", 0) > 0 for s in stats)


def test_spiders_recrawling_at_once_fetch_every_due_page_once_between_them(site, redis_server, prefix):
    """Past TIMEBLOOM_RECRAWL_AFTER, three processes recrawl at once: a page
    due again is claimed by one of them (check and record in one step), so
    every page is fetched exactly once between them."""
    settings = {
        "DUPEFILTER_CLASS": FILTER,
        "TIMEBLOOM_REDIS_URL": redis_server.url,
        "TIMEBLOOM_REDIS_PREFIX": prefix,
        "TIMEBLOOM_RECRAWL_AFTER": "1d",
        "TIMEBLOOM_NOW": T_REDIS.isoformat(),
    }
    crawl(site, **settings)
    assert fetched_once_each(site)
    later = {**settings, "TIMEBLOOM_NOW": (T_REDIS + timedelta(days=3)).isoformat()}
    starts = [f"http://127.0.0.1:{site.port}/page?id={i}&lang=en" for i in (0, N_PAGES // 3, 2 * N_PAGES // 3)]
    stats = crawl_together(site, [(start, later) for start in starts])
    assert fetched_once_each(site), (sorted(site.hits.items())[:20], site.other)
    assert sum(s.get("downloader/response_count", 0) for s in stats) == N_PAGES


def test_redis_settings_reach_the_engine(redis_server, prefix):
    df = make_filter(
        {
            "TIMEBLOOM_REDIS_URL": redis_server.url,
            "TIMEBLOOM_REDIS_PREFIX": prefix,
            "TIMEBLOOM_ITEMS_PER_DAY": "5000",
            "TIMEBLOOM_FPR": "0.01",
            "TIMEBLOOM_TIERS": "3d,2w",
            "TIMEBLOOM_RECRAWL_AFTER": "36h",
            "JOBDIR": "/nonexistent/job",  # the scheduler's; the filter is in Redis
        }
    )
    try:
        assert isinstance(df.engine, timebloom.RedisEngine) and df.path is None
        s = df.engine.stats()
        assert (s["expected_items_per_day"], s["fpr"], df.engine.tiers, df.engine.prefix) == (5000, 0.01, "3d,2w", prefix)
        assert not df.request_seen(Request("http://a.example/x"))
        assert df.request_seen(Request("http://a.example/x#frag"))
    finally:
        df.close("finished")
    assert df.engine.closed
    # The filters stay in Redis; an engine that exists keeps its configuration.
    df = make_filter({"TIMEBLOOM_REDIS_URL": redis_server.url, "TIMEBLOOM_REDIS_PREFIX": prefix, "TIMEBLOOM_TIERS": "7d"})
    try:
        assert df.engine.tiers == "3d,2w"
        assert df.request_seen(Request("http://a.example/x"))
    finally:
        df.close("finished")


def test_the_default_redis_prefix_is_the_spider_name(redis_server):
    import scrapy

    name = f"spider-{uuid.uuid4().hex[:8]}"
    spidercls = type("NamedSpider", (scrapy.Spider,), {"name": name})
    df = make_filter({"TIMEBLOOM_REDIS_URL": redis_server.url}, spidercls)
    try:
        assert df.engine.prefix == f"timebloom:{name}"
    finally:
        df.close("finished")


@pytest.mark.parametrize("name", ["my spider", "brace{d}", "x" * 200, "zero\u200bwidth", "bidi\u202eoverride"])
def test_a_spider_name_no_prefix_can_hold_asks_for_timebloom_redis_prefix(redis_server, prefix, name):
    # A spider name with a space or a brace (or too long) made a default
    # prefix the engine refuses, an InvalidConfigError about a prefix the
    # settings never named. The error now says which setting to set.
    import scrapy

    spidercls = type("OddSpider", (scrapy.Spider,), {"name": name})
    with pytest.raises(ValueError, match="TIMEBLOOM_REDIS_PREFIX") as info:
        make_filter({"TIMEBLOOM_REDIS_URL": redis_server.url}, spidercls)
    assert repr(name) in str(info.value)
    df = make_filter({"TIMEBLOOM_REDIS_URL": redis_server.url, "TIMEBLOOM_REDIS_PREFIX": prefix}, spidercls)
    try:
        assert df.engine.prefix == prefix
    finally:
        df.close("finished")


def test_redis_url_with_a_directory_or_a_sync_policy_is_refused(redis_server, tmp_path, prefix):
    base = {"TIMEBLOOM_REDIS_URL": redis_server.url, "TIMEBLOOM_REDIS_PREFIX": prefix}
    with pytest.raises(ValueError, match="TIMEBLOOM_DIR"):
        make_filter({**base, "TIMEBLOOM_DIR": str(tmp_path / "tb")})
    with pytest.raises(ValueError, match="TIMEBLOOM_SYNC"):
        make_filter({**base, "TIMEBLOOM_SYNC": "always"})
    with pytest.raises(timebloom.HorizonTooLongError):
        make_filter({**base, "TIMEBLOOM_TIERS": "7d", "TIMEBLOOM_RECRAWL_AFTER": "30d"})


def test_a_clock_behind_every_kept_window_fails_the_recrawl_loudly(tmp_path, clocks):
    """The engine's clock behind every window its tiers keep (a replay's
    TIMEBLOOM_NOW before the windows an earlier crawl rotated to, or a
    system clock stepped back further than the tiers keep): no horizon can
    be answered, so the filter fails with WindowUnavailableError naming the
    clock, at start, or at each request when the clock steps back during a
    crawl; it never lets every request through as unseen. Without a recrawl
    horizon the filter goes on (a request is seen while any window holds it)."""
    d = str(tmp_path / "tb")
    day0 = datetime(2026, 3, 10, tzinfo=timezone.utc)
    common = {"TIMEBLOOM_DIR": d, "TIMEBLOOM_TIERS": "2d", "TIMEBLOOM_RECRAWL_AFTER": "1h"}
    for day in (1, 2, 3):
        df = make_filter({**common, "TIMEBLOOM_NOW": (day0 + timedelta(days=day)).isoformat()})
        try:
            assert not df.request_seen(Request(f"http://a.example/{day}"))
        finally:
            df.close("finished")
    behind = (day0 + timedelta(days=1, hours=12)).isoformat()
    with pytest.raises(timebloom.WindowUnavailableError, match="behind every window"):
        make_filter({**common, "TIMEBLOOM_NOW": behind})
    # The refused filter closed its engine: the directory is not locked.
    timebloom.Engine.open(d, clock=timebloom.ManualClock(day0 + timedelta(days=3))).close()

    df = make_filter({**common, "TIMEBLOOM_NOW": (day0 + timedelta(days=3)).isoformat()})
    try:
        clocks[-1].set(day0 + timedelta(days=1, hours=12))
        for url in ("http://a.example/3", "http://a.example/new"):
            with pytest.raises(timebloom.WindowUnavailableError, match="behind every window"):
                df.request_seen(Request(url))
    finally:
        df.close("finished")
    df = make_filter({"TIMEBLOOM_DIR": d, "TIMEBLOOM_NOW": behind})
    try:
        assert df.request_seen(Request("http://a.example/3"))
        assert not df.request_seen(Request("http://a.example/new"))
    finally:
        df.close("finished")
    assert "WindowUnavailableError" in timebloom.scrapy.__doc__


def test_a_redis_engine_does_not_refuse_a_clock_behind_its_windows(redis_server, prefix):
    """The docs said an engine clock behind every window the tiers keep
    fails the recrawl with WindowUnavailableError rather than letting every
    request through as unseen, with no word that this is a directory
    engine's check: a Redis engine whose clock was 8 days behind its newest
    window (tiers 2d) let a request recorded then through as new. The docs
    now say so."""
    common = {
        "TIMEBLOOM_REDIS_URL": redis_server.url,
        "TIMEBLOOM_REDIS_PREFIX": prefix,
        "TIMEBLOOM_TIERS": "2d",
        "TIMEBLOOM_RECRAWL_AFTER": "1h",
    }
    for day in (1, 3):
        df = make_filter({**common, "TIMEBLOOM_NOW": (T_REDIS + timedelta(days=day)).isoformat()})
        try:
            assert not df.request_seen(Request(f"http://a.example/{day}"))
        finally:
            df.close("finished")
    df = make_filter({**common, "TIMEBLOOM_NOW": (T_REDIS - timedelta(days=5)).isoformat()})
    try:
        assert not df.request_seen(Request("http://a.example/3"))
    finally:
        df.close("finished")
    doc = " ".join(timebloom.scrapy.__doc__.split())
    assert "A Redis engine does not check its clock against its windows" in doc
