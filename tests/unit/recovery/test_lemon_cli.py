"""``python -m acme lemon-nodes``, run as a user runs it, over a lake written by the real writers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from acme.lake import Lake
from tests.lemon_support import days_ago, write_history

ROOT = Path(__file__).resolve().parents[3]


def acme(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "acme", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, date]:
    """The history's lake and the day it was written as of."""
    folder = tmp_path_factory.mktemp("lemon-cli")
    today = write_history(Lake(str(folder / "lake")), folder)
    return folder / "lake", today


@pytest.fixture(scope="module")
def lake_dir(written) -> Path:
    return written[0]


def test_json_ranking_names_the_repeat_offender_first(written):
    lake_dir, today = written
    done = acme(
        "lemon-nodes",
        "--cluster",
        "seren",
        "--lake",
        str(lake_dir),
        "--day",
        days_ago(0, today).isoformat(),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [row["node"] for row in result["ranking"]] == ["gpu03", "gpu04"]
    assert result["ranking"][0]["localization_events"] == 1 and result["ranking"][0]["telemetry_events"] == 1
    assert result["read"]["job_partitions"] == 4


def test_the_table_defaults_to_the_newest_day_with_job_records(written):
    lake_dir, today = written
    done = acme("lemon-nodes", "--cluster", "seren", "--lake", str(lake_dir), "--top", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        f"lemon nodes of seren as of {days_ago(3, today).isoformat()}"
    )  # job 104's submit day
    assert len(lines) == 3 and lines[2].split()[:2] == ["1", "gpu03"]


def test_a_bad_setting_is_a_one_line_error(lake_dir):
    done = subprocess.run(
        [sys.executable, "-m", "acme", "lemon-nodes", "--cluster", "seren", "--lake", str(lake_dir)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "ACME_LEMON_LOOKBACK_DAYS": "zero"},
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == "error: ACME_LEMON_LOOKBACK_DAYS='zero' is not an integer"
