"""Publishing: the report folder's layout, tables as CSV and JSON, the index, re-runs and the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from acme.lake import Lake
from acme.report.build import build_report, plan_reports
from acme.report.publish import png_size

ROOT = Path(__file__).resolve().parents[3]


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_report_in_the_lake_is_self_contained_with_every_table_as_csv_and_json(synth_lake):
    manifest = build_report(synth_lake, "seren", "2023-06")
    base = Path(synth_lake.path("reports/cluster=seren/period=2023-06"))
    assert manifest["report"] == str(base / "index.html")
    assert manifest["index"] == synth_lake.url("reports/index.html")
    html = (base / "index.html").read_text()
    images = re.findall(r'<img src="([^"]+)"', html)
    assert (
        len(images) == manifest["figures"] >= 10
    )  # no diagnoses: the failure chart is the only one left out
    for image in images:
        width, height = png_size((base / image).read_bytes())
        assert width >= 2000 and height > 600  # page width (1050 CSS px) at twice the pixels: sharp on HiDPI
        assert f'<img src="{image}" alt="' in html and f'width="{width // 2}" height="{height // 2}"' in html
    assert sorted(manifest["tables"]) == sorted(p.stem for p in (base / "tables").glob("*.csv"))
    for name in manifest["tables"]:
        frame = pd.read_csv(base / "tables" / f"{name}.csv")
        records = json.loads((base / "tables" / f"{name}.json").read_text())
        assert len(records) == len(frame), name
        assert f'href="tables/{name}.csv"' in html and f'href="tables/{name}.json"' in html
    assert "://" not in "".join(re.findall(r'(?:src|href)="([^"]+)"', html))  # nothing outside the folder
    assert html.count("o diagnosis records yet") == 1  # said once, as a sentence
    assert "No diagnosis records yet (0 of " in html
    # Readable row labels with units on the page, the identifiers in the CSV.
    assert "<th>GPU jobs: median run time</th>" in html and "med_run_time_gpu" not in html
    assert "med_run_time_gpu" in (base / "tables" / "summary.csv").read_text()
    assert "Kalos <code>duration</code> column is end − <i>submit</i>" in html
    stored = json.loads((base / "report.json").read_text())
    assert stored["gpu_jobs"] == manifest["summary"]["gpu_jobs"] > 0
    assert set(stored["findings"]) >= {"duration_cdf", "type_shares", "power_cdf", "trends"}
    assert all(stored["findings"].values())


def test_rerun_replaces_the_report_and_the_index_lists_every_report(synth_lake, tmp_path):
    out = tmp_path / "out"
    build_report(synth_lake, "kalos", "all", out_dir=str(out))
    build_report(synth_lake, "seren", "2023-06-05", out_dir=str(out))
    first = files_under(out)
    stray = out / "cluster=kalos" / "period=all" / "tables" / "left_over.csv"
    stray.write_text("a\n1\n")
    build_report(synth_lake, "kalos", "all", out_dir=str(out))
    again = files_under(out)
    assert set(again) == set(first)  # the stray file of an older version is gone, nothing doubled
    assert (
        again["cluster=kalos/period=all/tables/summary.csv"]
        == first["cluster=kalos/period=all/tables/summary.csv"]
    )
    index = (out / "index.html").read_text()
    assert 'href="cluster=kalos/period=all/index.html"' in index
    assert 'href="cluster=seren/period=2023-06-05/index.html"' in index


def test_command_line_prints_the_manifest(synth_lake, tmp_path):
    command = [sys.executable, "-m", "acme", "report", "--lake", synth_lake.uri, "--cluster", "seren",
               "--period", "2023-06-05", "-o", str(tmp_path / "cli")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT / "plugins", timeout=300)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    # A day without diagnoses: every figure but the failure table's and the trends across nights.
    assert Path(printed["index"]).is_file() and printed["figures"] == 9 and "summary" in printed["tables"]
    summary = printed["summary"]
    for key in ("gpu_jobs", "median_run_time_gpu_s", "median_queue_time_gpu_s", "fail_rate_gpu"):
        assert summary[key] is not None, key
    assert sum(summary["job_share"].values()) == pytest.approx(1.0)
    assert sum(summary["gpu_time_share"].values()) == pytest.approx(1.0)

    empty_month = [arg if arg != "2023-06-05" else "2022-01" for arg in command]
    missing = subprocess.run(empty_month, capture_output=True, text=True, cwd=ROOT / "plugins", timeout=300)
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: ") and "no job partitions in month 2022-01" in missing.stderr


def test_plan_reports_follows_ingests_the_month_and_manual_periods(synth_lake):
    from datetime import date

    after_ingest = plan_reports(
        synth_lake, ["seren", "kalos"], [{"cluster": "seren", "day": "2023-06-07"}], date(2023, 6, 8)
    )
    assert after_ingest == [
        {"cluster": "seren", "period": "2023-06"},
        {"cluster": "seren", "period": "2023-06-07"},
        {"cluster": "seren", "period": "all"},
    ]
    monthly = plan_reports(synth_lake, ["seren", "kalos"], [], date(2023, 7, 1))
    assert monthly == [{"cluster": c, "period": p} for c in ("kalos", "seren") for p in ("2023-06", "all")]
    assert plan_reports(synth_lake, ["kalos"], [], date(2023, 9, 1)) == [
        {"cluster": "kalos", "period": "all"}
    ]
    assert plan_reports(synth_lake, ["seren", "other"], [], date(2023, 9, 1), period="2023-06-10") == [
        {"cluster": "seren", "period": "2023-06-10"}
    ]


def test_the_report_runs_without_the_shared_reference_folder(synth_lake, tmp_path, monkeypatch):
    from acme.report import reference

    monkeypatch.setenv("ACME_REFERENCE_DIR", str(tmp_path / "absent"))
    assert reference.reference_dir().is_relative_to(ROOT / "include")
    assert set(reference.curves("gpu_util")) == {"Seren", "Kalos", "Philly", "PAI"}
    manifest = build_report(Lake(synth_lake.uri), "kalos", "2023-06-10", out_dir=str(tmp_path / "out"))
    # A kalos day without telemetry or diagnoses: no failure, temperature or trends figure.
    assert manifest["figures"] == 8
