"""Synthetic telemetry: determinism, calibration to the AcmeTrace quantile curves, the formats."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from acme.metrics.synth import reference_curve, synth_cluster, write_synth_metrics
from tests.metrics_support import parse_exposition

DAY = date(2023, 7, 1)
CALIBRATED = ("gpu_util", "sm_active", "tensor_active", "fb_used", "gpu_power", "gpu_temp", "mem_temp",
              "node_cpu_util", "node_mem_util", "server_power", "ib_tx")  # fmt: skip


def quantile_shift(values: np.ndarray, curve, tolerance: float = 0.0) -> float:
    """The smallest d such that every synthetic quantile q(p) lies in [Q_ref(p - d), Q_ref(p + d)].

    ``tolerance`` (half the metric's precision) widens the interval by the rounding of the values.

    A distance in probability that tolerates the reference's plateaus (a point mass at 0 % makes
    value distances meaningless around it).
    """
    p_ref, v_ref = curve
    ps = np.linspace(0.02, 0.98, 49)
    q = np.quantile(values, ps)
    worst, tol = 0.0, tolerance + 1e-6
    for p, value in zip(ps, q, strict=True):
        d = 0.0
        while d < 0.5 and not (
            np.interp(p - d, p_ref, v_ref) - tol <= value <= np.interp(p + d, p_ref, v_ref) + tol
        ):
            d += 0.005
        worst = max(worst, d)
    return worst


@pytest.mark.parametrize("cluster", ["seren", "kalos"])
def test_distributions_follow_the_reference_curves(cluster, shared_reference):
    # 64 nodes (512 GPUs), one day at 60 s: within 0.06 in probability of every reference quantile.
    synth = synth_cluster(cluster, 64, DAY, 1, seed=11, step_s=60)
    shifts = {}
    for metric in CALIBRATED:
        values = synth.values(metric).ravel()
        tolerance = synth.catalog[metric].precision / 2
        shifts[metric] = quantile_shift(values, reference_curve(cluster, metric), tolerance)
    print(cluster, shifts)
    assert max(shifts.values()) <= 0.06, shifts


def test_the_paper_s_headline_shapes(shared_reference):
    synth = synth_cluster("seren", 64, DAY, 1, seed=5, step_s=60)
    util, sm, power = (synth.values(m).ravel() for m in ("gpu_util", "sm_active", "gpu_power"))
    polarized = ((util == 0) | (util >= 95)).mean()
    assert polarized > 0.85  # utilization polarized at 0 and ~100 %
    assert 35 <= np.median(sm) <= 55  # median SM activity ~40-50 %
    idle = util == 0
    assert 55 <= np.median(power[idle]) <= 70 and 0.2 <= idle.mean() <= 0.4  # ~30 % of GPUs idle near 60 W
    busy_power = power[~idle].mean()
    assert busy_power > 2 * power[idle].mean()


def test_same_seed_same_bytes_and_formats(tmp_path):
    a = write_synth_metrics("seren", 2, DAY, 1, "exporter-text", tmp_path / "a.prom", seed=4, step_s=3600)
    b = write_synth_metrics("seren", 2, DAY, 1, "exporter-text", tmp_path / "b.prom", seed=4, step_s=3600)
    write_synth_metrics("seren", 2, DAY, 1, "exporter-text", tmp_path / "c.prom", seed=5, step_s=3600)
    assert (
        (tmp_path / "a.prom").read_bytes()
        == (tmp_path / "b.prom").read_bytes()
        != (tmp_path / "c.prom").read_bytes()
    )
    assert a["samples"] == b["samples"] == 2 * 8 * 24 * len(a["metrics"])
    om = write_synth_metrics(
        "kalos", 1, DAY, 1, "prometheus-openmetrics", tmp_path / "om.txt", seed=1, step_s=3600
    )
    text = (tmp_path / "om.txt").read_text()
    assert (
        text.endswith("# EOF\n")
        and "node_cpu_seconds_total{" in text
        and "# TYPE node_cpu_seconds counter" in text
    )
    families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(families) == len(set(families))  # each family once, its samples together
    wide = write_synth_metrics(
        "seren",
        2,
        DAY,
        1,
        "acmetrace-csv",
        tmp_path / "wide",
        seed=1,
        step_s=900,
        metrics=["gpu_util", "server_power"],
    )
    header = (tmp_path / "wide" / "gpu_util.csv").read_text().splitlines()[:2]
    assert header[0].split(",")[:2] == ["Time", "SH-IDC1-10-140-0-0-0"] and header[1].startswith(
        "2023-07-01 08:00:00+08:00,"
    )
    assert wide["samples"] == 16 * 96 + 2 * 96 and om["gpus"] == 8


def test_openmetrics_samples_carry_timestamps_in_seconds(tmp_path, catalog):
    write_synth_metrics(
        "seren", 1, DAY, 1, "prometheus-openmetrics", tmp_path / "om.txt", seed=1, step_s=21600
    )
    result = parse_exposition((tmp_path / "om.txt").read_text(), catalog)
    util = result.samples["gpu_util"]
    assert result.rejects.empty and sorted(set(util.ts_ms.tolist())) == [
        1688169600000 + i * 21600000 for i in range(4)
    ]
    assert 0 <= result.samples["sm_active"].value.max() <= 100  # exported as ratios, read back as %


def test_a_job_trace_makes_gpus_busy_while_jobs_run(tmp_path, shared_reference):
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time\n"
        "1,u,1,8,64,Pretrain,COMPLETED,2023-07-01 08:00:00+08:00,2023-07-01 09:00:00+08:00,2023-07-01 11:00:00+08:00,7200,3600,57600.0\n"
        "2,u,2,16,64,Pretrain,COMPLETED,2023-07-01 08:00:00+08:00,2023-07-01 10:00:00+08:00,2023-07-01 12:00:00+08:00,7200,7200,115200.0\n"
        "3,u,1,4,8,Eval,COMPLETED,2023-07-01 08:00:00+08:00,2023-07-01 12:00:00+08:00,2023-07-01 13:00:00+08:00,3600,14400,14400.0\n"
        "4,u,4,32,64,Pretrain,FAILED,2023-07-01 08:00:00+08:00,2023-07-01 10:30:00+08:00,2023-07-01 11:00:00+08:00,1800,9000,57600.0\n"
    )
    synth = synth_cluster("seren", 3, DAY, 1, seed=2, step_s=300, trace_path=trace)
    assert synth.info["jobs_placed"] == 3 and synth.info["jobs_unplaced"] == 1  # 32 GPUs do not fit in 24
    util = synth.values("gpu_util")
    hour = 3600 // 300
    assert (util[0:8, 1 * hour : 3 * hour] > 0).all()  # job 1 on node 0, 01:00-03:00 UTC
    assert (util[8:24, 2 * hour : 4 * hour] > 0).all()  # job 2 on nodes 1-2
    assert (util[0:4, 4 * hour : 5 * hour] > 0).all() and (
        util[4:8, 4 * hour : 5 * hour] == 0
    ).all()  # job 3: 4 GPUs
    assert (util[:, 6 * hour :] == 0).all()  # nothing runs after 06:00 UTC
