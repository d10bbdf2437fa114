"""Deterministic synthetic AcmeTrace job traces, calibrated to the NSDI'24 paper's figures.

``synth_trace(cluster, start, days, scale, seed)`` returns the jobs *submitted* in the UTC days
``[start, start + days)`` of a synthetic Seren (Slurm) or Kalos (Kubernetes) cluster as a
``pyarrow.Table`` of string columns (null = empty cell) in the exact raw layout of the released
``trace_seren.csv`` / ``trace_kalos.csv``; ``write_synth_trace`` writes it as CSV.

Layout rules reproduced (checked against the real sample rows in the reference folder):

- Seren: integer Slurm ``job_id`` increasing with submit order, times in ``+08:00``,
  ``duration = end - start``, ``queue = start - submit`` (int), ``gpu_time = gpu_num * duration``
  written as a float (``936.0``), empty for CPU jobs. Jobs may end after the window.
- Kalos: ``job_id`` = ``dlc`` + 13 lowercase alphanumerics, times in ``+00:00``,
  ``duration = end - submit`` (includes queueing), ``queue`` a float (``10.0``),
  ``gpu_time = gpu_num * duration`` (empty for CPU jobs), ``fail_time`` = ``end_time`` iff FAILED,
  ``stop_time`` = ``end_time`` iff CANCELLED. A job still running at the window's end is
  ``RUNNING`` with ``end_time``, ``fail_time``, ``stop_time``, ``duration`` and ``gpu_time`` empty
  (the real sample holds no RUNNING row, so those two numeric cells are left empty). A Kalos job
  still queued at the window's end is started at its last second (the raw layout has no way to
  express a pending job), which touches about one job per window.
- Rows are ordered by ``submit_time``.

The model (per cluster; every number is in ``_PARAMS`` and the calibration targets, with their
sources, in ``CALIBRATION``):

- jobs per UTC day: Poisson around the release's daily volume times ``scale`` and a mild weekly
  factor (at least ``MIN_JOBS_PER_DAY``); submissions follow a mild diurnal profile in the
  clusters' local time (UTC+8) and come in same-user, same-type bursts (evaluation sweeps);
- job type (CPU or a GPU workload type) with the paper's shares; per type a GPU-count
  distribution (1..8 GPUs on one node, multiples of 8 across ``gpu_num / 8`` nodes), a final-state
  distribution, a lognormal-mixture run time per final-state group (cancelled jobs run longest,
  which makes cancelled jobs dominate GPU time as in the paper) and a queueing-delay mixture
  (evaluation jobs wait longest);
- every per-job draw is stratified (Latin-hypercube style) within its type, and states and run
  times also within each GPU-count class, one draw in the middle half of each stratum: a short
  window (two weeks) already reproduces the count shares almost exactly and the heavy-tailed
  GPU-time shares within a few points, whatever the seed. The price: within a window the largest
  run times stay below the distribution's extreme tail (see ``CALIBRATION`` for what is checked).

Determinism: the output depends only on ``(cluster, start, days, scale, seed)``; the same
arguments give byte-identical files. Heavy imports stay inside functions (TID253).
"""

from __future__ import annotations

import datetime as dt
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["CALIBRATION", "COLUMNS", "MIN_JOBS_PER_DAY", "synth_trace", "write_synth_trace"]

SEREN_COLUMNS = (
    "job_id",
    "user",
    "node_num",
    "gpu_num",
    "cpu_num",
    "type",
    "state",
    "submit_time",
    "start_time",
    "end_time",
    "duration",
    "queue",
    "gpu_time",
)
KALOS_COLUMNS = (
    "job_id",
    "user",
    "node_num",
    "gpu_num",
    "cpu_num",
    "mem_per_pod_GB",
    "shared_mem_per_pod",
    "type",
    "state",
    "submit_time",
    "start_time",
    "end_time",
    "fail_time",
    "stop_time",
    "duration",
    "queue",
    "gpu_time",
)
COLUMNS = {"seren": SEREN_COLUMNS, "kalos": KALOS_COLUMNS}

MIN_JOBS_PER_DAY = 3  # floor for tiny scales, so every day of the window has jobs

# Final state -> the paper's outcome (AcmeTrace: TIMEOUT and NODE_FAIL are failures; PREEMPTED
# is grouped with cancellations, as in acme.jobs.schema.STATE_GROUPS).
STATE_GROUP = {
    "COMPLETED": "completed",
    "CANCELLED": "cancelled",
    "PREEMPTED": "cancelled",
    "FAILED": "failed",
    "TIMEOUT": "failed",
    "NODE_FAIL": "failed",
    "RUNNING": "running",
}
_GROUPS = ("completed", "cancelled", "failed")

# Mild weekly factor (Mon..Sun, normalised to mean 1) and local-time hourly profile.
_WEEKLY = (1.06, 1.08, 1.08, 1.06, 1.03, 0.86, 0.83)
_HOURLY_LOCAL = (
    0.60, 0.45, 0.35, 0.28, 0.24, 0.24, 0.30, 0.42, 0.65, 0.95, 1.15, 1.20,
    1.00, 1.00, 1.20, 1.30, 1.30, 1.25, 1.05, 1.10, 1.20, 1.20, 1.05, 0.80,
)  # fmt: skip

_DAY_S = 86_400
_SEREN_FIRST_JOB_ID = 5_778_432  # first job of the Seren release (2023-03-01, sample file)
_SEREN_RELEASE_START = dt.date(2023, 3, 1)
_CLUSTER_SALT = {"seren": 0x5E4E, "kalos": 0x6A105}

# Lognormal mixtures are tuples of (weight, median_s, sigma).
_Mix = tuple[tuple[float, float, float], ...]


def _kind(
    *,
    share: float | None,
    gpus: dict[int, float],
    states: tuple[float, float, float],
    run: tuple,
    queue: tuple[float, float, float],
    batch: float,
    gap: float,
    users: int,
    fast_queue: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One job type's parameters (their meaning: the note above ``_PARAMS``' first ``types``).

    ``run`` gives the (completed, cancelled, failed) run times, each a lognormal ``(median_s,
    sigma)`` or a mixture ``((weight, median_s, sigma), ...)``.
    """
    mixtures = [part if isinstance(part[0], tuple) else ((1.0, *part),) for part in run]
    kind: dict[str, Any] = {"share": share, "gpus": gpus, "states": states, "run": dict(zip(_GROUPS, mixtures, strict=True)),
            "queue": queue, "batch": batch, "gap": gap, "users": users}  # fmt: skip
    if fast_queue is not None:
        kind["fast_queue"] = fast_queue
    return kind


_SEREN_CPU_PER_GPU = {16: 0.55, 12: 0.15, 8: 0.20, 4: 0.10}  # single-node jobs (sample: 8 GPUs, 128 CPUs)
_SEREN_CPU_PER_GPU_MULTI = {10: 0.55, 16: 0.25, 8: 0.20}  # multi-node (sample: 16/160, 32/320)
_KALOS_CPU_PER_GPU = {15: 0.55, 12: 0.20, 16: 0.15, 8: 0.10}  # sample: 64 GPUs, 960 CPUs
_CPU_JOB_CPUS = {1: 0.22, 2: 0.18, 4: 0.22, 8: 0.16, 16: 0.12, 32: 0.07, 64: 0.03}

# fmt: off
_PARAMS: dict[str, dict[str, Any]] = {
    "seren": {
        "tz_hours": 8,
        "jobs_per_day": 818_327 / 184,  # release rows / days 2023-03-01..2023-08-31
        "gpu_share": 450_590 / 818_327,  # release GPU jobs / rows
        "users": 480,
        "max_run": 1_209_604,  # cluster_summary max_run_time_gpu
        "max_queue": 3 * _DAY_S,
        "cancel_split": {"CANCELLED": 0.96, "PREEMPTED": 0.04},
        "fail_split": {"FAILED": 0.93, "TIMEOUT": 0.03, "NODE_FAIL": 0.04},
        "fast_queue": (0.7, 0.7),  # (median_s, sigma) of the immediately scheduled part
        "types": {
            # share: of GPU jobs; states: (completed, cancelled, failed); run: lognormal mixture per
            # state group; queue: (p_slow, median, sigma) of the waiting part; batch: mean burst
            # length; gap: mean seconds between a burst's submissions; users: how many of the cluster's
            # users submit this type
            "Eval": _kind(share=0.649, gpus={1: 0.8, 2: 0.06, 4: 0.06, 8: 0.08}, states=(0.513, 0.057, 0.43),
                          run=((58, 1.85), (860, 1.8), (42, 1.95)), queue=(0.6, 60, 2.5), batch=8.0, gap=20.0,
                          users=320),
            "Pretrain": _kind(share=0.009, gpus={8: 0.03, 16: 0.04, 32: 0.08, 64: 0.12, 128: 0.23, 256: 0.3,
                                                  512: 0.15, 1024: 0.05},
                              states=(0.25, 0.3, 0.45), run=((2390, 1.3), (11170, 1.1), (404, 1.6)),
                              queue=(0.3, 30, 2.5), batch=1.3, gap=120.0, users=12),
            "SFT": _kind(share=0.065, gpus={1: 0.27, 2: 0.05, 4: 0.1, 8: 0.3, 16: 0.12, 32: 0.1, 64: 0.06},
                         states=(0.48, 0.12, 0.4), run=((618, 1.5), (4980, 1.3), (391, 1.7)),
                         queue=(0.2, 30, 2.2), batch=2.0, gap=60.0, users=120),
            "MLLM": _kind(share=0.045, gpus={1: 0.3, 2: 0.05, 4: 0.1, 8: 0.35, 16: 0.1, 32: 0.07, 64: 0.03},
                          states=(0.46, 0.12, 0.42), run=((917, 1.6), (7260, 1.4), (521, 1.8)),
                          queue=(0.2, 30, 2.2), batch=2.0, gap=60.0, users=60),
            "Debug": _kind(share=0.13, gpus={1: 0.55, 2: 0.1, 4: 0.1, 8: 0.2, 16: 0.04, 32: 0.01},
                           states=(0.45, 0.1, 0.45), run=((307, 1.6), (2460, 1.5), (190, 1.7)),
                           queue=(0.12, 20, 2.0), batch=3.0, gap=45.0, users=300),
            "Other": _kind(share=0.102,
                           gpus={1: 0.45, 2: 0.08, 4: 0.1, 8: 0.27, 16: 0.05, 32: 0.04, 64: 0.01},
                           states=(0.52, 0.09, 0.39), run=((483, 1.7), (5860, 1.5), (393, 1.8)),
                           queue=(0.2, 30, 2.2), batch=3.0, gap=45.0, users=300),
            "CPU": _kind(share=None, gpus={0: 1.0}, states=(0.858, 0.039, 0.103),
                         run=(((0.9, 12, 1.2), (0.1, 1500, 1.8)), ((0.7, 30, 1.5), (0.3, 1500, 1.8)),
                              ((0.9, 8, 1.2), (0.1, 600, 1.8))),
                         queue=(0.1, 10, 1.5), fast_queue=(1.2, 0.6), batch=6.0, gap=5.0, users=400),
        },
    },
    "kalos": {
        "tz_hours": 0,
        "local_tz_hours": 8,  # diurnal profile in Beijing time although the file is in UTC
        "jobs_per_day": 62_413 / 107,  # rows / days 2023-05-17..2023-08-31
        "gpu_share": 19_907 / 62_413,
        "users": 160,
        "max_run": 625_740,  # cluster_summary max_run_time_gpu (duration incl. queueing)
        "max_queue": 2 * _DAY_S,
        "cancel_split": {"CANCELLED": 1.0},
        "fail_split": {"FAILED": 1.0},
        "fast_queue": (10.0, 0.35),  # pod scheduling + image pull
        "types": {
            # run = end - start here; the raw duration adds the queueing delay
            "Eval": _kind(share=0.928, gpus={1: 0.62, 2: 0.08, 4: 0.1, 8: 0.2}, states=(0.556, 0.055, 0.389),
                          run=((46, 1.95), (850, 1.8), (35, 2.05)), queue=(0.3, 140, 1.8),
                          fast_queue=(16.0, 0.35), batch=10.0, gap=15.0, users=90),
            "Pretrain": _kind(share=0.032, gpus={256: 0.25, 512: 0.3, 1024: 0.45}, states=(0.25, 0.25, 0.5),
                              run=((11000, 0.8), (24000, 0.8), (556, 1.5)), queue=(0.2, 120, 2.0), batch=1.3,
                              gap=120.0, users=6),
            "SFT": _kind(share=0.005, gpus={8: 0.4, 16: 0.2, 32: 0.2, 64: 0.2}, states=(0.5, 0.15, 0.35),
                         run=((11300, 1.0), (37600, 1.0), (8000, 1.3)), queue=(0.15, 100, 1.8), batch=1.5,
                         gap=60.0, users=10),
            "Debug": _kind(share=0.022, gpus={1: 0.3, 8: 0.45, 16: 0.1, 64: 0.1, 128: 0.05},
                           states=(0.4, 0.1, 0.5), run=((2750, 1.3), (10900, 1.3), (1100, 1.5)),
                           queue=(0.1, 60, 1.8), batch=3.0, gap=60.0, users=40),
            "Other": _kind(share=0.013, gpus={1: 0.2, 8: 0.3, 64: 0.3, 256: 0.15, 512: 0.05},
                           states=(0.5, 0.1, 0.4), run=((3100, 1.2), (15500, 1.2), (2100, 1.4)),
                           queue=(0.12, 80, 1.8), batch=4.0, gap=120.0, users=30),
            "CPU": _kind(share=None, gpus={0: 1.0}, states=(0.86, 0.001, 0.139),
                         run=(((0.97, 11, 1.2), (0.03, 100, 1.2)), ((0.97, 11, 1.2), (0.03, 100, 1.2)),
                              ((0.97, 8, 1.2), (0.03, 60, 1.2))),
                         queue=(0.08, 200, 1.8), fast_queue=(9.5, 0.35), batch=6.0, gap=5.0, users=120),
        },
    },
}
# fmt: on

_SRC_SUMMARY = "reference/acmetrace/cluster_summary.csv (paper Table 2)"
_SRC_README = "reference/README.md (paper headline figures)"
_SRC_RELEASE = "AcmeTrace release row counts (reference/README.md)"
_SRC_CHOICE = "own choice (paper gives no figure); keeps the shares summing to 1"


def _t(target: float, tol: float, kind: str, source: str) -> dict[str, Any]:
    return {"target": target, "tol": tol, "kind": kind, "source": source}


# Calibration targets checked by tests/unit/test_synth_trace.py on a 14-day window read back from
# the CSV. kind "rel": |achieved/target - 1| <= tol; "abs": |achieved - target| <= tol (shares
# are fractions); "max"/"min": achieved <= / >= target. GPU-job statistics use the raw columns as
# the paper's analysis notebook does (Kalos ``duration`` includes queueing). State shares are over
# finished GPU jobs (Kalos RUNNING rows have no gpu_time); PREEMPTED counts as cancelled,
# TIMEOUT and NODE_FAIL as failed.
CALIBRATION: dict[str, dict[str, dict[str, Any]]] = {
    "seren": {
        "jobs_per_day": _t(818_327 / 184, 0.10, "rel", _SRC_RELEASE + ": 818,327 rows over 184 days"),
        "gpu_job_share": _t(450_590 / 818_327, 0.02, "abs", _SRC_RELEASE + ": 450,590 GPU jobs"),
        "count_share.Eval": _t(0.649, 0.10, "rel", _SRC_README),
        "count_share.Pretrain": _t(0.009, 0.10, "rel", _SRC_README),
        "count_share.SFT": _t(0.065, 0.10, "rel", _SRC_CHOICE),
        "count_share.MLLM": _t(0.045, 0.10, "rel", _SRC_CHOICE),
        "count_share.Debug": _t(0.130, 0.10, "rel", _SRC_CHOICE),
        "count_share.Other": _t(0.102, 0.10, "rel", _SRC_CHOICE),
        "gpu_time_share.Pretrain": _t(0.695, 0.05, "abs", _SRC_README),
        "gpu_time_share.Eval": _t(0.025, 0.05, "abs", _SRC_CHOICE + " (paper: small)"),
        "gpu_time_share.SFT": _t(0.090, 0.05, "abs", _SRC_CHOICE),
        "gpu_time_share.MLLM": _t(0.080, 0.05, "abs", _SRC_CHOICE),
        "gpu_time_share.Debug": _t(0.030, 0.05, "abs", _SRC_CHOICE),
        "gpu_time_share.Other": _t(0.080, 0.05, "abs", _SRC_CHOICE),
        "gpu_median_run_s": _t(122.0, 0.25, "rel", _SRC_SUMMARY + " med_run_time_gpu"),
        "gpu_median_queue_s": _t(1.0, 0.0, "abs", _SRC_SUMMARY + " med_que_time_gpu"),
        "gpu_mean_run_s": _t(1414.335, 0.40, "rel", _SRC_SUMMARY + " avg_run_time_gpu"),
        "gpu_mean_queue_s": _t(445.984, 0.40, "rel", _SRC_SUMMARY + " avg_que_time_gpu"),
        "gpu_mean_gpus": _t(5.68, 0.15, "rel", _SRC_SUMMARY + " avg_gpu_num"),
        "gpu_median_gpus": _t(1.0, 0.0, "abs", _SRC_SUMMARY + " med_gpu_num"),
        "share_gt8_gpus": _t(0.07, 0.0, "max", _SRC_README + ": fewer than 7% ask for more than 8 GPUs"),
        "state_count.completed": _t(0.497, 0.04, "abs", _SRC_SUMMARY + " complete_rate_gpu"),
        "state_count.cancelled": _t(0.075, 0.02, "abs", _SRC_SUMMARY + " cancel_rate_gpu"),
        "state_count.failed": _t(0.429, 0.04, "abs", _SRC_SUMMARY + " fail_rate_gpu"),
        "state_gpu_time.completed": _t(0.212, 0.08, "abs", _SRC_SUMMARY + " complete_rate_gpu_time"),
        "state_gpu_time.cancelled": _t(0.664, 0.08, "abs", _SRC_SUMMARY + " cancel_rate_gpu_time"),
        "state_gpu_time.failed": _t(0.124, 0.08, "abs", _SRC_SUMMARY + " fail_rate_gpu_time"),
        "cpu_median_run_s": _t(14.0, 0.25, "rel", _SRC_SUMMARY + " med_run_time_cpu"),
        "cpu_median_queue_s": _t(1.0, 0.0, "abs", _SRC_SUMMARY + " med_que_time_cpu"),
        "cpu_state_count.completed": _t(0.858, 0.03, "abs", _SRC_SUMMARY + " complete_rate_cpu"),
        "eval_longest_median_queue": _t(1.0, 0.0, "min", _SRC_README + ": Eval waits longest"),
    },
    "kalos": {
        "jobs_per_day": _t(62_413 / 107, 0.10, "rel", _SRC_RELEASE + ": 62,413 rows over 107 days"),
        "gpu_job_share": _t(19_907 / 62_413, 0.02, "abs", _SRC_SUMMARY + ": 19,907 GPU jobs"),
        "count_share.Eval": _t(0.928, 0.10, "rel", _SRC_README),
        "count_share.Pretrain": _t(0.032, 0.10, "rel", _SRC_README),
        "count_share.SFT": _t(0.005, 0.30, "rel", _SRC_CHOICE + " (paper's Kalos treemap has no SFT)"),
        "count_share.Debug": _t(0.022, 0.10, "rel", _SRC_CHOICE),
        "count_share.Other": _t(0.013, 0.15, "rel", _SRC_CHOICE),
        "gpu_time_share.Pretrain": _t(0.9475, 0.05, "abs", _SRC_README + ": 94.0-95.5%"),
        "gpu_time_share.Eval": _t(0.006, 0.004, "abs", _SRC_README + ": 0.4-0.8%"),
        "gpu_time_share.SFT": _t(0.010, 0.02, "abs", _SRC_CHOICE),
        "gpu_time_share.Debug": _t(0.008, 0.02, "abs", _SRC_CHOICE),
        "gpu_time_share.Other": _t(0.028, 0.03, "abs", _SRC_CHOICE),
        "gpu_median_run_s": _t(124.0, 0.25, "rel", _SRC_SUMMARY + " med_run_time_gpu (duration col.)"),
        "gpu_median_queue_s": _t(17.0, 0.25, "rel", _SRC_SUMMARY + " med_que_time_gpu"),
        "gpu_mean_run_s": _t(1259.689, 0.40, "rel", _SRC_SUMMARY + " avg_run_time_gpu"),
        "gpu_mean_queue_s": _t(214.179, 0.40, "rel", _SRC_SUMMARY + " avg_que_time_gpu"),
        "gpu_mean_gpus": _t(26.77, 0.15, "rel", _SRC_SUMMARY + " avg_gpu_num"),
        "gpu_median_gpus": _t(1.0, 0.0, "abs", _SRC_SUMMARY + " med_gpu_num"),
        "share_gt8_gpus": _t(0.07, 0.0, "max", _SRC_README + ": fewer than 7% ask for more than 8 GPUs"),
        "gpu_time_share_ge256": _t(0.96, 0.0, "min", _SRC_README + ": >=256-GPU jobs take >96%"),
        "state_count.completed": _t(0.541, 0.04, "abs", _SRC_SUMMARY + " complete_rate_gpu"),
        "state_count.cancelled": _t(0.062, 0.02, "abs", _SRC_SUMMARY + " cancel_rate_gpu"),
        "state_count.failed": _t(0.397, 0.04, "abs", _SRC_SUMMARY + " fail_rate_gpu"),
        "state_gpu_time.completed": _t(0.313, 0.08, "abs", _SRC_SUMMARY + " complete_rate_gpu_time"),
        "state_gpu_time.cancelled": _t(0.607, 0.08, "abs", _SRC_SUMMARY + " cancel_rate_gpu_time"),
        "state_gpu_time.failed": _t(0.080, 0.08, "abs", _SRC_SUMMARY + " fail_rate_gpu_time"),
        "cpu_median_run_s": _t(22.0, 0.25, "rel", _SRC_SUMMARY + " med_run_time_cpu (duration col.)"),
        "cpu_median_queue_s": _t(9.0, 0.25, "rel", _SRC_SUMMARY + " med_que_time_cpu"),
        "cpu_state_count.completed": _t(0.86, 0.03, "abs", _SRC_SUMMARY + " complete_rate_cpu"),
        "eval_longest_median_queue": _t(1.0, 0.0, "min", _SRC_README + ": Eval waits longest"),
    },
}


# ----------------------------------------------------------------------------------------------
# public API


def synth_trace(cluster: str, start: dt.date, days: int, scale: float = 1.0, seed: int = 0) -> pa.Table:
    """The synthetic raw trace as a ``pyarrow.Table`` of string columns (null = empty cell)."""
    jobs = _generate(cluster, start, days, scale, seed)
    return _format(cluster, jobs)


def write_synth_trace(
    cluster: str,
    start: dt.date,
    days: int,
    out_path: str | os.PathLike[str],
    scale: float = 1.0,
    seed: int = 0,
    per_day: bool = False,
) -> dict[str, Any]:
    """Write the synthetic trace as CSV (atomically); ``{"rows", "path", "bytes"}``.

    With ``per_day`` ``out_path`` is a folder that receives one ``YYYY-MM-DD.csv`` per UTC
    submit day, the way a nightly export delivers them (``"files"`` lists them).
    """
    import pyarrow.compute as pc

    table = synth_trace(cluster, start, days, scale=scale, seed=seed)
    if not per_day:
        path = Path(out_path)
        _write_csv(table, path)
        return {"rows": table.num_rows, "path": str(path), "bytes": path.stat().st_size}
    folder = Path(out_path)
    submitted = pc.strptime(table["submit_time"], format="%Y-%m-%d %H:%M:%S%z", unit="s")
    utc_days = pc.cast(submitted, pa_date32()).to_pylist()
    files = []
    for day in sorted(set(utc_days)):
        mask = pc.equal(pc.cast(submitted, pa_date32()), day)
        path = folder / f"{day.isoformat()}.csv"
        _write_csv(table.filter(mask), path)
        files.append(str(path))
    total = sum(Path(f).stat().st_size for f in files)
    return {"rows": table.num_rows, "path": str(folder), "bytes": total, "files": files}


def pa_date32():
    import pyarrow as pa

    return pa.date32()


def _write_csv(table: pa.Table, path: Path) -> None:
    import pyarrow.csv as pacsv

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        options = pacsv.WriteOptions(quoting_style="none", quoting_header="none", batch_size=1 << 16)
        pacsv.write_csv(table, str(tmp), write_options=options)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


# ----------------------------------------------------------------------------------------------
# sampling helpers


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7), enough for a sampling table."""
    import numpy as np

    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


@lru_cache(maxsize=256)
def _quantile_table(mix: _Mix, cap: float) -> tuple[np.ndarray, np.ndarray]:
    """(cdf, log x) of a lognormal mixture truncated at ``cap``, for inverse-CDF sampling."""
    import numpy as np

    log_x = np.linspace(np.log(0.05), np.log(cap), 4096)
    cdf = np.zeros_like(log_x)
    total = sum(w for w, _, _ in mix)
    for weight, median, sigma in mix:
        cdf += weight / total * 0.5 * (1.0 + _erf((log_x - np.log(median)) / (sigma * np.sqrt(2.0))))
    cdf = (cdf - cdf[0]) / (cdf[-1] - cdf[0])
    cdf += np.arange(cdf.size) * 1e-13  # strictly increasing for np.interp
    cdf.flags.writeable = False
    log_x.flags.writeable = False
    return cdf, log_x


def _strat_u(rng: np.random.Generator, n: int) -> np.ndarray:
    """Stratified uniforms: one draw in the middle half of each of n equal strata, in random
    order (the middle half tames the top stratum of heavy tails in small samples)."""
    return (rng.permutation(n) + rng.uniform(0.25, 0.75, n)) / max(n, 1)


def _paired_u(rng: np.random.Generator, key: np.ndarray) -> np.ndarray:
    """Uniforms stratified separately within every value of ``key`` (the GPU count): each
    GPU-size class gets its exact share of states and of short and long run times, which keeps
    GPU-time totals of short windows close to the expected ones."""
    import numpy as np

    m = key.size
    order = np.lexsort((rng.random(m), key))
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    sizes = np.diff(np.r_[starts, m])
    cell = np.repeat(np.arange(starts.size), sizes)
    rank = np.arange(m) - starts[cell]  # a random permutation within each cell
    u = np.empty(m)
    u[order] = (rank + rng.uniform(0.25, 0.75, m)) / sizes[cell]
    return u


def _strat_choice(rng: np.random.Generator, n: int, probs: Any) -> np.ndarray:
    import numpy as np

    cum = np.cumsum(np.asarray(probs, dtype=float))
    return np.minimum(np.searchsorted(cum / cum[-1], _strat_u(rng, n), side="right"), len(cum) - 1)


def _sample_mix(rng: np.random.Generator, n: int, mix: _Mix, cap: float, u: Any = None) -> np.ndarray:
    import numpy as np

    cdf, log_x = _quantile_table(mix, float(cap))
    u = _strat_u(rng, n) if u is None else u
    return np.floor(np.exp(np.interp(u, cdf, log_x))).astype(np.int64)


def _pick(rng: np.random.Generator, n: int, dist: dict[int, float]) -> np.ndarray:
    import numpy as np

    values = np.fromiter(dist.keys(), dtype=np.int64)
    return values[_strat_choice(rng, n, list(dist.values()))]


# ----------------------------------------------------------------------------------------------
# generation (numbers only)


def _generate(cluster: str, start: dt.date, days: int, scale: float, seed: int) -> dict[str, Any]:
    import numpy as np

    start, days = _checked_args(cluster, start, days, scale)
    p = _PARAMS[cluster]
    entropy = [int(seed) % 2**63, _CLUSTER_SALT[cluster], start.toordinal(), days, round(scale * 1e6)]
    rng = np.random.default_rng(np.random.SeedSequence(entropy))

    type_names = list(p["types"])
    specs = [p["types"][name] for name in type_names]
    submit, typ, user, t0 = _volume(rng, p, specs, start, days, scale)
    n = submit.size
    a = _attributes(rng, p, specs, typ, cluster)
    gpu, queue, run = a["gpu"], a["queue"], a["run"]
    node = np.where(gpu > 8, gpu // 8, 1)
    if cluster == "kalos":
        # Kalos duration (end - submit) is capped at the paper's maximum, queue included.
        run = np.minimum(run, p["max_run"] - queue)
    start_t = submit + queue
    window_end = t0 + days * _DAY_S
    running = np.zeros(n, dtype=bool)
    if cluster == "kalos":
        start_t = np.minimum(start_t, window_end - 1)
        queue = start_t - submit
    end_t = start_t + run
    if cluster == "kalos":
        running = end_t > window_end
    return {
        "n": n,
        "t0": t0,
        "window_end": window_end,
        "type_names": type_names,
        "states": a["states"],
        "typ": typ,
        "user": user,
        "pool_size": p["users"],
        "gpu": gpu,
        "cpu": a["cpu"],
        "node": node,
        "mem": a["mem"],
        "state": a["state"],
        "running": running,
        "submit": submit,
        "start": start_t,
        "end": end_t,
        "queue": queue,
        "run": run,
        "tz_hours": p["tz_hours"],
        "job_id_base": _seren_first_id(start, scale, p["jobs_per_day"]),
        "rng": rng,
    }


def _checked_args(cluster: str, start: dt.date, days: int, scale: float) -> tuple[dt.date, int]:
    if cluster not in _PARAMS:
        raise ValueError(f"unknown cluster {cluster!r}: expected one of {sorted(_PARAMS)}")
    if isinstance(start, dt.datetime):
        start = start.date()
    if int(days) != days or days < 1:
        raise ValueError(f"days must be a positive integer, got {days!r}")
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    return start, int(days)


def _volume(
    rng: np.random.Generator,
    p: dict[str, Any],
    specs: list[dict[str, Any]],
    start: dt.date,
    days: int,
    scale: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Jobs per UTC day, their types, bursts, users and submit times, in submit order."""
    import numpy as np

    gpu_share = p["gpu_share"]
    type_probs = [(1.0 - gpu_share) if s["share"] is None else gpu_share * s["share"] for s in specs]

    # --- volume: jobs per UTC day, types, bursts, submit times --------------------------------
    weekly = np.asarray(_WEEKLY) / np.mean(_WEEKLY)
    dows = np.array([(start + dt.timedelta(days=d)).weekday() for d in range(days)])
    n_day = np.maximum(rng.poisson(p["jobs_per_day"] * scale * weekly[dows]), MIN_JOBS_PER_DAY)
    n = int(n_day.sum())
    day = np.repeat(np.arange(days, dtype=np.int64), n_day)
    typ = _strat_choice(rng, n, type_probs).astype(np.int64)

    # Bursts: within a day, jobs of one type are cut into runs of geometric length (mean
    # "batch"), each run one user submitting at "gap"-second intervals from one anchor time.
    order = np.lexsort((rng.random(n), typ, day))
    day, typ = day[order], typ[order]
    batch_mean = np.array([s["batch"] for s in specs])
    gap_mean = np.array([s["gap"] for s in specs])
    new = rng.random(n) < 1.0 / batch_mean[typ]
    new[0] = True
    new[1:] |= (day[1:] != day[:-1]) | (typ[1:] != typ[:-1])
    first = np.flatnonzero(new)
    batch = np.cumsum(new) - 1
    gaps = np.floor(rng.exponential(1.0, n) * gap_mean[typ])
    gaps[first] = 0.0
    cum = np.cumsum(gaps)
    offset = (cum - cum[first][batch]).astype(np.int64)
    anchor = _diurnal_seconds(rng, first.size, p.get("local_tz_hours", p["tz_hours"]))
    second = (anchor[batch] + offset) % _DAY_S
    t0 = int(dt.datetime(start.year, start.month, start.day, tzinfo=dt.UTC).timestamp())
    submit = t0 + day * _DAY_S + second

    # Users: each type draws its users Zipf-like from its own slice of the cluster's population.
    pool = rng.permutation(p["users"])
    batch_type = typ[first]
    batch_user = np.zeros(first.size, dtype=np.int64)
    for k, spec in enumerate(specs):
        sel = np.flatnonzero(batch_type == k)
        if sel.size == 0:
            continue
        size = min(spec["users"], p["users"])
        weights = 1.0 / np.arange(1, size + 1) ** 1.1
        rank = np.searchsorted(np.cumsum(weights) / weights.sum(), rng.random(sel.size), side="right")
        members = np.roll(pool, -(k * 37) % p["users"])[:size]
        batch_user[sel] = members[np.minimum(rank, size - 1)]
    user = batch_user[batch]

    # Final order: by submit time (stable, so a burst keeps its order).
    final = np.argsort(submit, kind="stable")
    submit, typ, user = submit[final], typ[final], user[final]

    return submit, typ, user, t0


def _attributes(
    rng: np.random.Generator, p: dict[str, Any], specs: list[dict[str, Any]], typ: np.ndarray, cluster: str
) -> dict[str, Any]:
    """Per-job GPUs, CPUs, memory, state, run and queue times, stratified within each type."""
    import numpy as np

    n = typ.size
    states = ["COMPLETED", *p["cancel_split"], *p["fail_split"]]
    state_group = np.array([_GROUPS.index(STATE_GROUP[s]) for s in states])
    gpu = np.zeros(n, dtype=np.int64)
    cpu = np.zeros(n, dtype=np.int64)
    state = np.zeros(n, dtype=np.int64)
    run = np.zeros(n, dtype=np.int64)
    queue = np.zeros(n, dtype=np.int64)
    mem = np.zeros(n, dtype=np.int64)
    for k, spec in enumerate(specs):
        idx = np.flatnonzero(typ == k)
        m = idx.size
        if m == 0:
            continue
        g = _pick(rng, m, spec["gpus"])
        gpu[idx] = g
        c, x, f = spec["states"]
        probs = [c, *(x * v for v in p["cancel_split"].values()), *(f * v for v in p["fail_split"].values())]
        cum = np.cumsum(probs)
        st = np.minimum(np.searchsorted(cum / cum[-1], _paired_u(rng, g), side="right"), len(probs) - 1)
        state[idx] = st
        for gi, group in enumerate(_GROUPS):
            sel = state_group[st] == gi
            if sel.any():
                u = _paired_u(rng, g[sel])
                run[idx[sel]] = _sample_mix(rng, u.size, spec["run"][group], p["max_run"], u)
        p_slow, q_median, q_sigma = spec["queue"]
        fq_median, fq_sigma = spec.get("fast_queue", p["fast_queue"])
        qmix = ((1.0 - p_slow, fq_median, fq_sigma), (p_slow, q_median, q_sigma))
        queue[idx] = _sample_mix(rng, m, qmix, p["max_queue"])
        if cluster == "seren":
            if spec["share"] is None:
                cpu[idx] = _pick(rng, m, _CPU_JOB_CPUS)
            else:
                single = _pick(rng, m, _SEREN_CPU_PER_GPU)
                multi = _pick(rng, m, _SEREN_CPU_PER_GPU_MULTI)
                cpu[idx] = g * np.where(g > 8, multi, single)
        else:
            if spec["share"] is None:
                cc = _pick(rng, m, _CPU_JOB_CPUS)
                cpu[idx] = cc
                mem[idx] = cc * _pick(rng, m, {2: 0.3, 4: 0.5, 8: 0.2})
            else:
                cpu[idx] = g * _pick(rng, m, _KALOS_CPU_PER_GPU)
                mem[idx] = np.minimum(g, 8) * _pick(rng, m, {125: 0.7, 100: 0.2, 60: 0.1})

    return {"states": states, "gpu": gpu, "cpu": cpu, "state": state, "run": run, "queue": queue, "mem": mem}


def _diurnal_seconds(rng: np.random.Generator, n: int, local_tz_hours: int) -> np.ndarray:
    """UTC seconds-of-day following the local-time hourly submission profile."""
    import numpy as np

    hourly_utc = np.array([_HOURLY_LOCAL[(h + local_tz_hours) % 24] for h in range(24)])
    cum = np.cumsum(hourly_utc) / hourly_utc.sum()
    hour = np.minimum(np.searchsorted(cum, rng.random(n), side="right"), 23)
    return hour * 3600 + rng.integers(0, 3600, n)


def _seren_first_id(start: dt.date, scale: float, jobs_per_day: float) -> int:
    """Slurm ids keep growing across windows: ~1.25 ids per released job since the release start."""
    elapsed = (start - _SEREN_RELEASE_START).days
    return max(1000, _SEREN_FIRST_JOB_ID + round(elapsed * jobs_per_day * scale * 1.25))


# ----------------------------------------------------------------------------------------------
# formatting (numbers -> raw strings)


def _format(cluster: str, j: dict[str, Any]) -> pa.Table:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = j["n"]
    rng = j["rng"]
    tz = j["tz_hours"]
    is_gpu = j["gpu"] > 0

    def ints(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
        arr = pa.array(values, type=pa.int64(), mask=None if valid is None else ~valid)
        return pc.cast(arr, pa.string())

    def floats(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
        return pc.binary_join_element_wise(ints(values, valid), ".0", "")

    def times(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
        return _time_strings(values, tz, valid)

    users = pa.array([f"u{v:04x}" for v in rng.choice(1 << 16, j["pool_size"], replace=False)])
    cols: dict[str, pa.Array] = {}
    if cluster == "seren":
        gaps = rng.geometric(0.8, n)  # Slurm ids also go to jobs outside the trace
        cols["job_id"] = ints(j["job_id_base"] + np.cumsum(gaps) - gaps[0])
    else:
        cols["job_id"] = _kalos_job_ids(rng, n)
    cols["user"] = users.take(pa.array(j["user"]))
    cols["node_num"] = ints(j["node"])
    cols["gpu_num"] = ints(j["gpu"])
    cols["cpu_num"] = ints(j["cpu"])
    if cluster == "kalos":
        mem = j["mem"]
        cols["mem_per_pod_GB"] = ints(mem)
        # shared memory = a tenth of the pod memory, written with one decimal (sample: 1000 -> 100.0)
        cols["shared_mem_per_pod"] = pc.binary_join_element_wise(ints(mem // 10), ints(mem % 10), ".")
    cols["type"] = pa.array(j["type_names"]).take(pa.array(j["typ"]))
    state_names = pa.array([*j["states"], "RUNNING"])
    state_idx = np.where(j["running"], len(j["states"]), j["state"])
    cols["state"] = state_names.take(pa.array(state_idx))
    cols["submit_time"] = times(j["submit"])
    cols["start_time"] = times(j["start"])
    if cluster == "seren":
        cols["end_time"] = times(j["end"])
        cols["duration"] = ints(j["run"])
        cols["queue"] = ints(j["queue"])
        cols["gpu_time"] = floats(j["gpu"] * j["run"], is_gpu)
    else:
        done = ~j["running"]
        final_state = np.asarray(j["states"])[j["state"]]
        cols["end_time"] = times(j["end"], done)
        cols["fail_time"] = times(j["end"], done & (final_state == "FAILED"))
        cols["stop_time"] = times(j["end"], done & (final_state == "CANCELLED"))
        duration = j["end"] - j["submit"]
        cols["duration"] = ints(duration, done)
        cols["queue"] = floats(j["queue"])
        cols["gpu_time"] = floats(j["gpu"] * duration, done & is_gpu)
    return pa.table([cols[c] for c in COLUMNS[cluster]], names=list(COLUMNS[cluster]))


@lru_cache(maxsize=4)
def _time_of_day_table(tz_hours: int) -> np.ndarray:
    """(86400, 14) uint8: ``HH:MM:SS+hh:00`` for every second of the day."""
    import numpy as np

    s = np.arange(_DAY_S)
    hh, mm, ss = s // 3600, s // 60 % 60, s % 60
    out = np.empty((_DAY_S, 14), dtype=np.uint8)
    for col, (value, div) in enumerate(((hh, 10), (hh, 1), (mm, 10), (mm, 1), (ss, 10), (ss, 1))):
        out[:, col + col // 2] = 48 + (value // div) % 10
    out[:, 2] = out[:, 5] = ord(":")
    out[:, 8:] = np.frombuffer(f"+{tz_hours:02d}:00".encode(), dtype=np.uint8)
    out.flags.writeable = False
    return out


def _time_strings(t_utc: np.ndarray, tz_hours: int, valid: np.ndarray | None = None) -> pa.Array:
    """``YYYY-MM-DD HH:MM:SS+hh:00`` strings (local time of the given offset), built bytewise."""
    import numpy as np
    import pyarrow as pa

    n = t_utc.size
    local = t_utc.astype(np.int64) + tz_hours * 3600
    day_n, sod = np.divmod(local, _DAY_S)
    first_day = int(day_n.min()) if n else 0
    last_day = int(day_n.max()) if n else 0
    epoch = dt.date(1970, 1, 1)
    dates = "".join((epoch + dt.timedelta(days=d)).isoformat() + " " for d in range(first_day, last_day + 1))
    date_tab = np.frombuffer(dates.encode(), dtype=np.uint8).reshape(-1, 11)
    out = np.empty((n, 25), dtype=np.uint8)
    out[:, :11] = date_tab[day_n - first_day]
    out[:, 11:] = _time_of_day_table(tz_hours)[sod]
    width = 25
    offsets = np.arange(n + 1, dtype=np.int64) * width
    if valid is None:
        bitmap, nulls = None, 0
    else:
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
        nulls = int(n - np.count_nonzero(valid))
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out), bitmap, nulls).cast(
        pa.string()
    )


def _kalos_job_ids(rng: np.random.Generator, n: int) -> pa.Array:
    """Unique ``dlc`` + 13 base-36 characters: a bijective 64-bit mix of the row number."""
    import numpy as np
    import pyarrow as pa

    key = np.uint64(int(rng.integers(0, 2**63)))
    with np.errstate(over="ignore"):
        x = np.arange(n, dtype=np.uint64) + key  # distinct inputs (mod 2^64)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)  # splitmix64 finaliser: a bijection, so ids stay distinct
    alphabet = np.frombuffer(b"0123456789abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    out = np.empty((n, 16), dtype=np.uint8)
    out[:, :3] = np.frombuffer(b"dlc", dtype=np.uint8)
    base12 = np.uint64(36**12)
    high, low = x // base12, x % base12  # high in 0..3
    # First character: high + 4 * r (r random in 0..8) covers the whole alphabet, and high is
    # recovered as first % 4, so (first, low) is still unique.
    out[:, 3] = alphabet[(high + np.uint64(4) * rng.integers(0, 9, n).astype(np.uint64)).astype(np.int64)]
    for pos in range(15, 3, -1):
        out[:, pos] = alphabet[(low % np.uint64(36)).astype(np.int64)]
        low //= np.uint64(36)
    offsets = np.arange(n + 1, dtype=np.int64) * 16
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out)).cast(pa.string())
