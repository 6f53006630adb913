"""Shared fixtures of the timebloom tests."""

import pytest


@pytest.fixture
def tb_dir(tmp_path):
    """A path for a new engine directory (not created)."""
    return str(tmp_path / "seen.tb")
