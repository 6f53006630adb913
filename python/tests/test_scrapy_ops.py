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
