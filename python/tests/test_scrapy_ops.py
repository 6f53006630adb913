"""TimebloomDupeFilter in the situations of Scrapy operations: settings
given as strings on the command line, unusable directories, two crawls
over one directory, and the scheduler's use of the filter."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("scrapy")

from scrapy import Request  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

import timebloom  # noqa: E402
from timebloom.scrapy import TimebloomDupeFilter  # noqa: E402

HERE = Path(__file__).parent


def make_filter(settings: dict) -> TimebloomDupeFilter:
    return TimebloomDupeFilter.from_crawler(get_crawler(settings_dict=settings))


@pytest.mark.parametrize(
    "value, error",
    [("7x", ValueError), ("-1d", ValueError), ("0", ValueError), ("   ", ValueError), ("3m", ValueError), ([1], TypeError)],
)
def test_a_bad_recrawl_horizon_names_its_setting(tmp_path, value, error):
    # `-s TIMEBLOOM_RECRAWL_AFTER=7x` failed with "not a duration: '7x'",
    # which names no setting: the user had to guess which one was read.
    d = tmp_path / "tb"
    with pytest.raises(error, match="TIMEBLOOM_RECRAWL_AFTER"):
        make_filter({"TIMEBLOOM_DIR": str(d), "TIMEBLOOM_RECRAWL_AFTER": value})
    assert not d.exists()


@pytest.mark.parametrize("value", ["yesterday", " ", "2026-03-10T12:00", "-5"])
def test_a_bad_timebloom_now_names_its_setting(tmp_path, value):
    # "Invalid isoformat string: 'yesterday'", from deep in datetime.
    with pytest.raises(ValueError, match="TIMEBLOOM_NOW"):
        make_filter({"TIMEBLOOM_DIR": str(tmp_path / "tb"), "TIMEBLOOM_NOW": value})


@pytest.mark.parametrize("value", [10**30, "100000000000000000000000", 1e30, 2**64])
def test_an_items_per_day_too_large_for_the_engine_names_its_setting(tmp_path, value):
    # Failed with the conversion's OverflowError "int too big to convert".
    d = tmp_path / "tb"
    with pytest.raises(ValueError, match="TIMEBLOOM_ITEMS_PER_DAY is too large"):
        make_filter({"TIMEBLOOM_DIR": str(d), "TIMEBLOOM_ITEMS_PER_DAY": value})
    assert not d.exists()


@pytest.mark.parametrize("value", [0, 1, 2.0, -0.1, "nan", "inf"])
def test_an_fpr_out_of_range_names_its_setting(tmp_path, value):
    # Was the engine's InvalidConfigError "fpr must be strictly between 0
    # and 1", which names no setting (and NaN was read as a rate).
    d = tmp_path / "tb"
    with pytest.raises(ValueError, match=r"TIMEBLOOM_FPR must be strictly between 0 and 1: "):
        make_filter({"TIMEBLOOM_DIR": str(d), "TIMEBLOOM_FPR": value})
    assert not d.exists()


@pytest.mark.parametrize("value", [2.7, 0.5, "2.5"])
def test_an_items_per_day_with_a_fraction_is_refused_not_cut(tmp_path, value):
    # 2.7 (from a settings module) made an engine for 2 items a day, and 0.5
    # was refused as "must be at least 1: 0", a value nobody gave.
    with pytest.raises(ValueError, match=r"TIMEBLOOM_ITEMS_PER_DAY must be a whole number: " + repr(value).replace(".", r"\.")):
        make_filter({"TIMEBLOOM_DIR": str(tmp_path / "tb"), "TIMEBLOOM_ITEMS_PER_DAY": value})
    df = make_filter({"TIMEBLOOM_DIR": str(tmp_path / "ok"), "TIMEBLOOM_ITEMS_PER_DAY": 2.5e5})
    try:
        assert df.engine.stats()["expected_items_per_day"] == 250_000
    finally:
        df.close("finished")


@pytest.mark.parametrize(
    "settings, names",
    [
        ({"TIMEBLOOM_TIERS": "7x"}, "TIMEBLOOM_TIERS"),
        ({"TIMEBLOOM_TIERS": "0d"}, "TIMEBLOOM_TIERS"),
        ({"TIMEBLOOM_TIERS": "7d,7d"}, "TIMEBLOOM_TIERS"),
        ({"TIMEBLOOM_TIERS": "7d,30d:fingerprint,60d:fingerprint"}, "TIMEBLOOM_TIERS"),
        ({"TIMEBLOOM_SYNC": "sometimes"}, "TIMEBLOOM_SYNC"),
        ({"TIMEBLOOM_SYNC": "interval=0s"}, "TIMEBLOOM_SYNC"),
        # The size of a window follows from all three: each is named.
        ({"TIMEBLOOM_TIERS": "7d", "TIMEBLOOM_ITEMS_PER_DAY": 10**15}, "TIMEBLOOM_TIERS, TIMEBLOOM_ITEMS_PER_DAY, TIMEBLOOM_FPR"),
        ({"TIMEBLOOM_TIERS": "30d:fingerprint", "TIMEBLOOM_FPR": 1e-12}, "TIMEBLOOM_TIERS, TIMEBLOOM_FPR"),
    ],
)
def test_a_bad_tier_or_sync_setting_names_its_setting(tmp_path, settings, names):
    # The engine's InvalidConfigError quotes the tier or the policy but names
    # no setting: `-s TIMEBLOOM_SYNC=sometimes` said only "sync policy
    # "sometimes": expected always, ...".
    d = tmp_path / "tb"
    with pytest.raises(timebloom.InvalidConfigError) as info:
        make_filter({"TIMEBLOOM_DIR": str(d), **settings})
    assert str(info.value).startswith(names + ": "), str(info.value)
    assert str(d) in str(info.value)  # the engine's message follows
    assert not d.exists()


def test_a_bad_sync_setting_for_an_existing_directory_names_its_setting(tmp_path):
    d = tmp_path / "tb"
    make_filter({"TIMEBLOOM_DIR": str(d)}).close("finished")
    with pytest.raises(timebloom.InvalidConfigError, match=r"^TIMEBLOOM_SYNC: .*sync policy \"sometimes\""):
        make_filter({"TIMEBLOOM_DIR": str(d), "TIMEBLOOM_SYNC": "sometimes"})


@pytest.mark.parametrize(
    "settings, names",
    [
        ({"TIMEBLOOM_REDIS_PREFIX": "my prefix"}, "TIMEBLOOM_REDIS_PREFIX"),
        ({"TIMEBLOOM_TIERS": "7x"}, "TIMEBLOOM_TIERS"),
        # A tier kind Redis does not keep: an UnsupportedError.
        ({"TIMEBLOOM_TIERS": "7d:counting"}, "TIMEBLOOM_TIERS"),
        ({"TIMEBLOOM_TIERS": "30d:fingerprint"}, "TIMEBLOOM_TIERS"),
    ],
)
def test_a_bad_redis_setting_names_its_setting(redis_server, prefix, settings, names):
    settings = {"TIMEBLOOM_REDIS_URL": redis_server.url, "TIMEBLOOM_REDIS_PREFIX": prefix, **settings}
    with pytest.raises((timebloom.InvalidConfigError, timebloom.UnsupportedError)) as info:
        make_filter(settings)
    assert str(info.value).startswith(names + ": "), str(info.value)


def test_command_line_strings_reach_the_engine(tmp_path):
    df = make_filter(
        {
            "TIMEBLOOM_DIR": str(tmp_path / "tb"),
            "TIMEBLOOM_FPR": " 1e-3 ",
            "TIMEBLOOM_ITEMS_PER_DAY": " 2000 ",
            "TIMEBLOOM_RECRAWL_AFTER": " 7d ",
        }
    )
    try:
        s = df.engine.stats()
        assert (s["fpr"], s["expected_items_per_day"], df.recrawl_after) == (0.001, 2000, 7 * 86_400)
    finally:
        df.close("finished")


def unusable_dirs(tmp_path: Path) -> dict:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "MANIFEST").write_bytes(b"garbage")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    return {
        "a file": (a_file, timebloom.IoError),
        "under a file": (a_file / "sub", timebloom.IoError),
        "corrupt": (corrupt, timebloom.CorruptError),
        "other files": (other, timebloom.NotEmptyError),
    }


@pytest.mark.parametrize("case", ["a file", "under a file", "corrupt", "other files"])
def test_an_unusable_directory_names_the_setting_and_the_path(tmp_path, case):
    # The engine's error named the path but not the setting that gave it.
    path, error = unusable_dirs(tmp_path)[case]
    with pytest.raises(error) as info:
        make_filter({"TIMEBLOOM_DIR": str(path)})
    assert "TIMEBLOOM_DIR" in str(info.value) and str(path) in str(info.value)
    assert info.value.path  # the engine's attributes are kept


def test_an_unusable_default_directory_names_jobdir(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "timebloom").write_text("x")
    with pytest.raises(timebloom.IoError) as info:
        make_filter({"JOBDIR": str(job)})
    assert "JOBDIR" in str(info.value) and str(job / "timebloom") in str(info.value)


def test_a_directory_another_crawl_holds_says_what_to_do(tmp_path):
    # The LockedError advised a read-only open, which a duplicate filter
    # cannot use, and named no setting.
    d = tmp_path / "tb"
    first = make_filter({"TIMEBLOOM_DIR": str(d)})
    try:
        with pytest.raises(timebloom.LockedError) as info:
            make_filter({"TIMEBLOOM_DIR": str(d)})
        msg = str(info.value)
        assert str(d) in msg and "TIMEBLOOM_DIR" in msg and "TIMEBLOOM_REDIS_URL" in msg
        assert "read_only" not in msg
    finally:
        first.close("finished")
    # Closed with the first crawl: a later crawl opens the directory.
    make_filter({"TIMEBLOOM_DIR": str(d)}).close("finished")


@pytest.mark.parametrize("debug", [False, True])
def test_the_scheduler_never_asks_about_dont_filter_and_counts_the_filtered(tmp_path, caplog, debug):
    # Checks, as Scrapy's scheduler uses the filter: a dont_filter request
    # is enqueued without request_seen (nor recorded), a duplicate is
    # logged as the built-in filter logs it and counted in the stats.
    from scrapy import Spider
    from scrapy.core.scheduler import Scheduler
    from scrapy.statscollectors import MemoryStatsCollector

    settings = {"DUPEFILTER_CLASS": "timebloom.scrapy.TimebloomDupeFilter", "TIMEBLOOM_DIR": str(tmp_path / "tb")}
    settings["SCHEDULER_PRIORITY_QUEUE"] = "scrapy.pqueues.ScrapyPriorityQueue"  # needs no engine
    crawler = get_crawler(Spider, settings_dict={**settings, "DUPEFILTER_DEBUG": debug})
    crawler.stats = MemoryStatsCollector(crawler)
    crawler.spider = Spider("s")
    crawler.spider.crawler = crawler
    scheduler = Scheduler.from_crawler(crawler)
    asked = []
    seen = scheduler.df.request_seen
    scheduler.df.request_seen = lambda r: asked.append(r.url) or seen(r)
    scheduler.open(crawler.spider)
    try:
        with caplog.at_level(logging.DEBUG, logger="timebloom.scrapy"):
            assert scheduler.enqueue_request(Request("http://a.example/forced", dont_filter=True))
            assert scheduler.enqueue_request(Request("http://a.example/forced", dont_filter=True))
            assert scheduler.enqueue_request(Request("http://a.example/x"))
            for _ in range(3):
                assert not scheduler.enqueue_request(Request("http://a.example/x#y"))
    finally:
        scheduler.close("finished")
    assert asked == ["http://a.example/x"] + ["http://a.example/x#y"] * 3
    assert crawler.stats.get_value("dupefilter/filtered") == 3
    msgs = [r.getMessage() for r in caplog.records if r.name == "timebloom.scrapy"]
    assert len(msgs) == (3 if debug else 1) and all("Filtered duplicate request" in m for m in msgs)
    with timebloom.Engine.open(tmp_path / "tb") as e:  # closed with the scheduler
        assert not e.contains(scheduler.df.fingerprinter.fingerprint(Request("http://a.example/forced")))


TWO_CRAWLS = """
import json, sys
from crawl import FollowAll
from scrapy.crawler import CrawlerProcess
from twisted.internet import defer
start, d, mode = sys.argv[1:]
process = CrawlerProcess({
    "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "ERROR", "RETRY_ENABLED": False,
    "DUPEFILTER_CLASS": "timebloom.scrapy.TimebloomDupeFilter", "TIMEBLOOM_DIR": d, "TIMEBLOOM_ITEMS_PER_DAY": 1000,
})
crawlers = [process.create_crawler(type(n, (FollowAll,), {"name": n})) for n in ("first", "second")]
if mode == "together":
    for c in crawlers:
        process.crawl(c, start_url=start)
    process.start()
else:  # one after the other, as a CrawlerRunner script runs them
    @defer.inlineCallbacks
    def one_after_the_other():
        for c in crawlers:
            yield process.crawl(c, start_url=start)
    one_after_the_other()
    process.start()
print(json.dumps([c.stats.get_value("downloader/response_count", 0) if c.engine else None for c in crawlers]))
"""


def two_crawls(site, d: str, mode: str) -> tuple[list, str]:
    site.reset()
    p = subprocess.run(
        [sys.executable, "-c", TWO_CRAWLS, site.start_url, d, mode],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HERE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])},
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def test_two_spiders_of_one_process_on_one_directory(tmp_path):
    # Checks: at the same time, the second spider fails at start with a
    # LockedError naming the setting and what to do, while the first
    # crawls; one after the other, the first crawl's close releases the
    # directory and the second finds every page seen.
    from loopback_site import Site

    site = Site(20)
    try:
        d = str(tmp_path / "tb")
        counts, log = two_crawls(site, d, "together")
        assert dict(site.hits) == {i: 1 for i in range(20)}
        assert "LockedError" in log and f"TIMEBLOOM_DIR: {d}: " in log and "TIMEBLOOM_REDIS_URL" in log
        assert counts[0] == 20
        counts, log = two_crawls(site, str(tmp_path / "tb2"), "after")
        assert counts == [20, 0] and dict(site.hits) == {i: 1 for i in range(20)}, log[-3000:]
        assert "Error" not in log
    finally:
        site.stop()


def test_a_jobdir_crawl_paused_by_a_signal_resumes_without_fetching_a_page_again(tmp_path):
    # Checks the JOBDIR pause and resume of Scrapy's docs with the filter's
    # default home <JOBDIR>/timebloom: a crawl stopped by Ctrl-C (SIGINT, a
    # graceful stop) then started again with the same JOBDIR fetches the
    # pages it had not, each once; the pending requests come from the
    # scheduler's disk queue, the rest are filtered as seen.
    import signal
    import time

    from loopback_site import Site

    n = 40
    site = Site(n)
    job = tmp_path / "job"
    settings = {
        "DUPEFILTER_CLASS": "timebloom.scrapy.TimebloomDupeFilter",
        "JOBDIR": str(job),
        "CONCURRENT_REQUESTS": 1,
        "DOWNLOAD_DELAY": 0.02,
        "LOG_LEVEL": "ERROR",
    }
    cmd = [sys.executable, str(HERE / "crawl.py"), site.start_url, json.dumps(settings)]
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        give_up = time.monotonic() + 60
        while sum(site.hits.values()) < 10 and time.monotonic() < give_up and p.poll() is None:
            time.sleep(0.005)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err[-3000:]
        first = json.loads(out.strip().splitlines()[-1])
        assert first["finish_reason"] == "shutdown" and first["downloader/response_count"] < n
        assert (job / "timebloom" / "MANIFEST").exists()
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
        second = json.loads(out.strip().splitlines()[-1])
        assert second["finish_reason"] == "finished"
        assert dict(site.hits) == {i: 1 for i in range(n)}, sorted(site.hits.items())
    finally:
        site.stop()
