"""The synthetic AcmeTrace generator: exact raw layout, determinism and calibration to the paper.

Statistics are computed from the written CSV read back with pandas (never from the generator's
internals) and compared with the targets and tolerances in ``acme.jobs.synth.CALIBRATION``.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from acme.jobs.schema import STATE_GROUPS
from acme.jobs.synth import CALIBRATION, COLUMNS, STATE_GROUP, synth_trace, write_synth_trace

REFERENCE = Path("/work/shared/reference/acmetrace/samples")
START = dt.date(2023, 6, 5)  # a Monday: 14 days = two whole weeks
DAYS = 14
WINDOW_START = int(dt.datetime(START.year, START.month, START.day, tzinfo=dt.UTC).timestamp())

TIME_RE = {
    "seren": re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\+08:00$"),
    "kalos": re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\+00:00$"),
}
INT_RE = re.compile(r"^\d+$")
FLOAT_RE = re.compile(r"^\d+\.0$")
SEREN_TYPES = {"CPU", "Eval", "Pretrain", "SFT", "MLLM", "Debug", "Other"}
KALOS_TYPES = {"CPU", "Eval", "Pretrain", "SFT", "Debug", "Other"}
SEREN_STATES = {"COMPLETED", "FAILED", "CANCELLED", "PREEMPTED", "TIMEOUT", "NODE_FAIL"}
KALOS_STATES = {"COMPLETED", "FAILED", "CANCELLED", "RUNNING"}


def read_raw(path: Path) -> pd.DataFrame:
    """The CSV as text cells ('' for empty)."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def observed_stats(raw: pd.DataFrame, days: int) -> dict[str, float]:
    """The calibration statistics of a raw trace, computed like the paper's notebook does."""
    num = {c: pd.to_numeric(raw[c].replace("", np.nan)) for c in ("gpu_num", "duration", "queue", "gpu_time")}
    df = pd.DataFrame({"type": raw["type"], "state": raw["state"], **num})
    df["group"] = df["state"].map(STATE_GROUP)
    gpu = df[df["gpu_num"] > 0]
    cpu = df[df["gpu_num"] == 0]
    done = gpu[gpu["group"] != "running"]
    total_gt = gpu["gpu_time"].sum()
    stats: dict[str, float] = {
        "jobs_per_day": len(df) / days,
        "gpu_job_share": len(gpu) / len(df),
        "gpu_median_run_s": gpu["duration"].median(),
        "gpu_median_queue_s": gpu["queue"].median(),
        "gpu_mean_run_s": gpu["duration"].mean(),
        "gpu_mean_queue_s": gpu["queue"].mean(),
        "gpu_mean_gpus": gpu["gpu_num"].mean(),
        "gpu_median_gpus": gpu["gpu_num"].median(),
        "share_gt8_gpus": (gpu["gpu_num"] > 8).mean(),
        "gpu_time_share_ge256": gpu.loc[gpu["gpu_num"] >= 256, "gpu_time"].sum() / total_gt,
        "cpu_median_run_s": cpu["duration"].median(),
        "cpu_median_queue_s": cpu["queue"].median(),
        "cpu_state_count.completed": (cpu["group"] == "completed").mean(),
    }
    for name, count in gpu["type"].value_counts().items():
        stats[f"count_share.{name}"] = count / len(gpu)
    for name, value in gpu.groupby("type")["gpu_time"].sum().items():
        stats[f"gpu_time_share.{name}"] = value / total_gt
    for group in ("completed", "cancelled", "failed"):
        stats[f"state_count.{group}"] = (done["group"] == group).mean()
        stats[f"state_gpu_time.{group}"] = done.loc[done["group"] == group, "gpu_time"].sum() / total_gt
    queue_medians = gpu.groupby("type")["queue"].median()
    others = queue_medians.drop("Eval")
    stats["eval_longest_median_queue"] = float(queue_medians["Eval"] > others.max())
    return stats


def calibration_misses(stats: dict[str, float], targets: dict[str, dict]) -> list[str]:
    misses = []
    for name, spec in targets.items():
        value, target, tol, kind = stats.get(name, float("nan")), spec["target"], spec["tol"], spec["kind"]
        ok = {
            "rel": abs(value / target - 1) <= tol,
            "abs": abs(value - target) <= tol,
            "max": value <= target,
            "min": value >= target,
        }[kind]
        if not ok:
            misses.append(f"{name}: achieved {value:.4g}, target {target:.4g} ({kind} tol {tol})")
    return misses


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, pd.DataFrame]]:
    out = {}
    for cluster in ("seren", "kalos"):
        path = tmp_path_factory.mktemp(cluster) / f"trace_{cluster}.csv"
        summary = write_synth_trace(cluster, START, DAYS, path, seed=7)
        assert summary["path"] == str(path)
        assert summary["bytes"] == path.stat().st_size
        raw = read_raw(path)
        assert summary["rows"] == len(raw)
        out[cluster] = (path, raw)
    return out


@pytest.mark.parametrize("cluster", ["seren", "kalos"])
def test_header_matches_real_sample(cluster: str, traces: dict) -> None:
    path, _ = traces[cluster]
    header = path.read_text().split("\n", 1)[0]
    sample_header = (REFERENCE / f"trace_{cluster}_sample.csv").read_text().split("\n", 1)[0]
    assert header == sample_header == ",".join(COLUMNS[cluster])
    assert '"' not in path.read_text()


@pytest.mark.parametrize("cluster", ["seren", "kalos"])
def test_calibration(cluster: str, traces: dict) -> None:
    _, raw = traces[cluster]
    stats = observed_stats(raw, DAYS)
    assert calibration_misses(stats, CALIBRATION[cluster]) == []


def test_calibration_targets_are_documented() -> None:
    for targets in CALIBRATION.values():
        for spec in targets.values():
            assert spec["kind"] in {"rel", "abs", "max", "min"}
            assert spec["source"]


def test_state_groups_agree_with_schema() -> None:
    for state, group in STATE_GROUP.items():
        assert STATE_GROUPS[state] == group


def _seconds(series: pd.Series) -> pd.Series:
    stamps = pd.to_datetime(series, format="%Y-%m-%d %H:%M:%S%z", utc=True)
    return (stamps - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)


def _check_common(raw: pd.DataFrame, cluster: str) -> pd.DataFrame:
    for column in ("submit_time", "start_time"):
        assert raw[column].str.match(TIME_RE[cluster]).all()
    for column in ("node_num", "gpu_num", "cpu_num"):
        assert raw[column].str.match(INT_RE).all()
    assert raw["user"].str.match(r"^u[0-9a-f]{4}$").all()
    gpu = raw["gpu_num"].astype(int)
    node = raw["node_num"].astype(int)
    assert ((gpu <= 8) | (gpu % 8 == 0)).all()
    assert (node == np.where(gpu > 8, gpu // 8, 1)).all()
    assert (raw["cpu_num"].astype(int) > 0).all()
    assert ((raw["type"] == "CPU") == (gpu == 0)).all()
    assert raw["gpu_time"].eq("").eq(gpu == 0).loc[raw["state"] != "RUNNING"].all()
    submit = _seconds(raw["submit_time"])
    assert submit.is_monotonic_increasing
    assert submit.min() >= WINDOW_START
    assert submit.max() < WINDOW_START + DAYS * 86400
    assert (_seconds(raw["start_time"]) - submit == raw["queue"].astype(float)).all()
    return pd.DataFrame({"submit": submit, "start": _seconds(raw["start_time"]), "gpu": gpu})


def test_seren_raw_format(traces: dict) -> None:
    _, raw = traces["seren"]
    t = _check_common(raw, "seren")
    assert set(raw["type"]) == SEREN_TYPES
    assert set(raw["state"]) == SEREN_STATES
    assert raw["job_id"].str.match(INT_RE).all()
    assert raw["job_id"].astype(int).is_monotonic_increasing and raw["job_id"].is_unique
    assert raw["end_time"].str.match(TIME_RE["seren"]).all()
    for column in ("duration", "queue"):
        assert raw[column].str.match(INT_RE).all()
    end = _seconds(raw["end_time"])
    assert (end - t["start"] == raw["duration"].astype(int)).all()
    on_gpu = t["gpu"] > 0
    assert raw.loc[on_gpu, "gpu_time"].str.match(FLOAT_RE).all()
    expected = t["gpu"] * raw["duration"].astype(int)
    assert (raw.loc[on_gpu, "gpu_time"].astype(float) == expected[on_gpu]).all()
    assert (raw.loc[~on_gpu, "gpu_time"] == "").all()


def test_kalos_raw_format(traces: dict) -> None:
    _, raw = traces["kalos"]
    t = _check_common(raw, "kalos")
    assert set(raw["type"]) == KALOS_TYPES
    assert set(raw["state"]) <= KALOS_STATES
    assert raw["job_id"].str.match(r"^dlc[0-9a-z]{13}$").all() and raw["job_id"].is_unique
    assert raw["queue"].str.match(FLOAT_RE).all()
    assert raw["mem_per_pod_GB"].str.match(INT_RE).all()
    assert raw["shared_mem_per_pod"].str.match(r"^\d+\.\d$").all()
    running = raw["state"] == "RUNNING"
    window_end = WINDOW_START + DAYS * 86400
    for column in ("end_time", "fail_time", "stop_time", "duration", "gpu_time"):
        assert (raw.loc[running, column] == "").all(), column
    assert (t.loc[running, "start"] < window_end).all()
    done = raw[~running]
    assert done["end_time"].str.match(TIME_RE["kalos"]).all()
    end = _seconds(done["end_time"])
    assert (end <= window_end).all()
    assert done["duration"].str.match(INT_RE).all()
    assert (end - t.loc[~running, "submit"] == done["duration"].astype(int)).all()
    failed, cancelled = done["state"] == "FAILED", done["state"] == "CANCELLED"
    assert (done.loc[failed, "fail_time"] == done.loc[failed, "end_time"]).all()
    assert (done.loc[~failed, "fail_time"] == "").all()
    assert (done.loc[cancelled, "stop_time"] == done.loc[cancelled, "end_time"]).all()
    assert (done.loc[~cancelled, "stop_time"] == "").all()
    gpus = t.loc[~running, "gpu"]
    on_gpu = gpus > 0
    assert done.loc[on_gpu, "gpu_time"].str.match(FLOAT_RE).all()
    expected = gpus * done["duration"].astype(int)
    assert (done.loc[on_gpu, "gpu_time"].astype(float) == expected[on_gpu]).all()
    assert (done.loc[~on_gpu, "gpu_time"] == "").all()


@pytest.mark.parametrize("cluster", ["seren", "kalos"])
def test_deterministic_by_seed(cluster: str, tmp_path: Path) -> None:
    paths = [tmp_path / name for name in ("a.csv", "b.csv", "c.csv")]
    for path, seed in zip(paths, (3, 3, 4), strict=True):
        write_synth_trace(cluster, dt.date(2023, 7, 1), 2, path, scale=0.2, seed=seed)
    first, same, other = (p.read_bytes() for p in paths)
    assert first == same
    assert first != other


@pytest.mark.parametrize("cluster", ["seren", "kalos"])
def test_tiny_scale_still_has_jobs_every_day(cluster: str) -> None:
    table = synth_trace(cluster, dt.date(2023, 7, 1), 5, scale=0.0005, seed=1)
    submit = pd.to_datetime(pd.Series(table.column("submit_time").to_pylist()), utc=True)
    per_day = submit.dt.floor("D").value_counts()
    assert len(per_day) == 5 and per_day.min() >= 3
    assert table.column_names == list(COLUMNS[cluster])


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        synth_trace("philly", START, 1)
    with pytest.raises(ValueError):
        synth_trace("seren", START, 0)
    with pytest.raises(ValueError):
        synth_trace("seren", START, 1, scale=0)
