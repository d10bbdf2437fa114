"""``summarize_metrics`` and ``python -m acme lake-summary``: daily partitions, snapshots and
quarantined samples of a real lake, counted from what the ingest stored."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from acme.cli import main
from acme.lake import Lake
from acme.metrics.ingest import ingest_metrics_file
from acme.metrics.summary import summarize_metrics
from acme.metrics.synth import write_synth_metrics
from acme.metrics.validate import MetricsThresholdError

DAY = date(2023, 7, 1)
FIELD = Path(__file__).resolve().parents[2] / "fixtures" / "field" / "metrics" / "scrapes"


@pytest.fixture
def lake_with_everything(tmp_path):
    """A day of wide CSVs (daily), two real one-off scrapes (snapshots) and a CSV with bad values."""
    lake = Lake(str(tmp_path / "lake"))
    wide = tmp_path / "wide"
    write_synth_metrics("seren", 1, DAY, 1, "acmetrace-csv", wide, seed=3, metrics=["gpu_util", "gpu_temp"])
    daily = ingest_metrics_file(lake, "acmetrace-csv", "seren", str(wide), DAY)
    snapshots = [
        ingest_metrics_file(
            lake,
            "exporter-text",
            "kalos",
            str(FIELD / name),
            snapshot=True,
            scrape_time="2023-07-02T10:00:00Z",
            node="kalos-n001",
        )  # fmt: skip
        for name in ("ipmi_exporter_dcmi_power_pr160.prom", "dcgm_l40s_upcloud.prom")
    ]
    broken = tmp_path / "broken"
    broken.mkdir()
    header, *rows = (wide / "gpu_util.csv").read_text().splitlines()
    rows[:10] = [",".join(["250" if i else v for i, v in enumerate(r.split(","))]) for r in rows[:10]]
    (broken / "gpu_util.csv").write_text("\n".join([header, *rows]) + "\n")
    with pytest.raises(MetricsThresholdError):
        ingest_metrics_file(lake, "acmetrace-csv", "seren", str(broken), DAY, max_quarantine_share=0.0)
    return lake, daily, snapshots


def test_daily_partitions_snapshots_and_quarantine_are_counted(lake_with_everything):
    lake, daily, snapshots = lake_with_everything
    summary = summarize_metrics(lake)
    assert summary["metric_samples"] == daily["samples"] > 0
    assert summary["metric_partitions"] == 2 and summary["metric_days"] == [("seren", "2023-07-01")]
    assert summary["snapshot_samples"] == sum(s["samples"] for s in snapshots) > 0
    assert summary["snapshot_files"] == sum(len(s["partitions"]) for s in snapshots)
    assert summary["snapshot_days"] == [("kalos", "2023-07-02")]
    assert summary["metric_quarantined"] == 8 * 10  # 10 rows × 8 GPUs at 250 %
    modes = {(f["mode"], f["metric"]) for f in summary["metric_files"]}
    assert {("daily", "gpu_util"), ("snapshot", "server_power"), ("quarantine", "gpu_util")} <= modes
    assert all(f["rows"] > 0 and f["path"].endswith(".parquet") for f in summary["metric_files"])


def test_lake_summary_prints_and_returns_the_telemetry(lake_with_everything, capsys):
    lake, daily, snapshots = lake_with_everything
    assert main(["lake-summary", "--lake", lake.uri]) == 0
    out = capsys.readouterr().out
    assert f"telemetry: {daily['samples']} samples in 2 metric partitions (seren 2023-07-01)" in out
    stored = sum(s["samples"] for s in snapshots)
    assert f"snapshots: {stored} samples in " in out and "(kalos 2023-07-02) under" in out
    assert "telemetry quarantine: 80 samples under quarantine/metrics" in out
    assert main(["lake-summary", "--lake", lake.uri, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["snapshot_samples"] == stored and document["metric_samples"] == daily["samples"]
    assert document["jobs"] == 0


def test_an_empty_lake_has_no_telemetry(tmp_path):
    summary = summarize_metrics(Lake(str(tmp_path / "empty")))
    assert summary["metric_samples"] == summary["snapshot_samples"] == summary["metric_quarantined"] == 0
    assert summary["metric_files"] == [] and summary["snapshot_days"] == []
