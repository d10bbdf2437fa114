"""Fail-slow from training logs (issue 26): detection delay and false alarms of the CUSUM of
``acme.detection.slowdown`` on training runs whose slow periods are known, parsed from their logs.

Runs: ``acme.detection.trainlog_synth.synth_run`` (Greyhound's injection schedule, 10-30 % and up to 2x
slowdowns, noise, checkpoint spikes, outliers), each written as a Megatron-LM, a DeepSpeed and an HF Trainer log
and parsed back by ``acme.detection.trainlog`` (so the parsers are on the path), then fed line by line to the
detector. No public log with labelled slow periods exists (docs/fail-slow-logs.md): Greyhound's published run
is scored for agreement with Greyhound's own detection only (``--greyhound DIR``, its ``trainlog/`` folder).

When ``ruptures`` is installed, the same runs (``--ruptures-runs`` of them; it is slow) are also given to
ruptures' PELT used online: re-run on the trailing ``--window`` log-times at every line, an alarm when its last
breakpoint splits the window into a level at least half the smallest slowdown of interest higher.

Results go to benchmarks/results/trainlog_slowdown.json.
Usage: python benchmarks/bench_trainlog_slowdown.py [--runs 30] [--iterations 3000] [--ruptures-runs 4]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
RESULTS = ROOT / "benchmarks" / "results" / "trainlog_slowdown.json"


def summarize(scores: list[dict], seconds_per_line: float) -> dict:
    delays = [d for s in scores for d in s["delays_iterations"]]
    delays_s = [d for s in scores for d in s["delays_s"]]
    periods = sum(s["slow_periods"] for s in scores)
    hours = sum(s["hours"] for s in scores)
    false_alarms = sum(s["false_alarms"] for s in scores)
    return {
        "slow_periods": periods, "detected": sum(s["detected"] for s in scores),
        "recall": sum(s["detected"] for s in scores) / periods if periods else None,
        "false_alarms": false_alarms, "training_hours": round(hours, 1),
        "false_alarms_per_100_h": 100 * false_alarms / hours if hours else None,
        "delay_iterations_median": statistics.median(delays) if delays else None,
        "delay_iterations_p90": sorted(delays)[int(0.9 * (len(delays) - 1))] if delays else None,
        "delay_s_median": statistics.median(delays_s) if delays_s else None,
        "delay_s_p90": sorted(delays_s)[int(0.9 * (len(delays_s) - 1))] if delays_s else None,
        "ms_per_line": 1000 * seconds_per_line,
    }  # fmt: skip


def by_factor(run, result_periods, score) -> list[dict]:
    """One score per slow period, with its factor, for the breakdown by slowdown size."""
    rows = []
    for (first, last), factor in zip(run.truth, run.factors, strict=True):
        one = score(result_periods, [(first, last)], run.seconds)
        rows.append(
            {"factor": factor, "detected": one["detected"], "delay": (one["delays_iterations"] or [None])[0]}
        )
    return rows


def ruptures_online(seconds: list[float], window: int, min_slowdown: float = 0.10):
    """ruptures' PELT re-run on the trailing window at every line (module doc): SlowPeriod-like alarms."""
    import numpy as np
    import ruptures as rpt

    from acme.detection.slowdown import SlowPeriod

    x = np.log(np.asarray(seconds))
    jump = math.log1p(min_slowdown) / 2
    periods, slow = [], False
    for i in range(10, len(x)):
        w = x[max(0, i - window + 1) : i + 1]
        sigma = max(1.4826 * float(np.median(np.abs(w - np.median(w)))), 0.005)
        breaks = rpt.Pelt(model="l1", min_size=2, jump=1).fit(w).predict(pen=3 * sigma * math.log(len(w)))
        if len(breaks) < 2:
            continue
        b = breaks[-2]
        before, after = float(np.median(w[:b])), float(np.median(w[b:]))
        if not slow and after - before >= jump and len(w) - b >= 2:
            periods.append(SlowPeriod(i - (len(w) - b) + 1, i, None, math.exp(after - before)))
            slow = True
        elif slow and before - after >= jump:
            periods[-1].end = i - (len(w) - b)
            slow = False
    return periods


def greyhound(folder: str) -> dict:
    from acme.detection.slowdown import SlowdownSettings, detect_slowdowns
    from acme.detection.trainlog import parse_training_log

    path = Path(folder) / "log_2025_05_04_14_19_42_027694_rank0" / "local_controller_0.log"
    times = parse_training_log(path.read_text(), str(path))
    periods = detect_slowdowns(times.seconds, SlowdownSettings(min_reference=3, warmup=0))
    return {
        "estimates": len(times), "seconds": [round(s, 4) for s in times.seconds],
        "alarms_at": [times.at[p.detected].isoformat() for p in periods],
        "greyhound_flagged_after": "2025-05-04T14:21:22.552313 (its log: change point, degradation 0.159)",
    }  # fmt: skip


def main() -> None:
    from acme.detection.slowdown import SlowdownDetector, score
    from acme.detection.trainlog import parse_training_log
    from acme.detection.trainlog_synth import deepspeed_log, hf_trainer_log, megatron_log, synth_run

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--ruptures-runs", type=int, default=4)
    parser.add_argument("--window", type=int, default=60)
    parser.add_argument("--greyhound", default=os.environ.get("GREYHOUND_TRAINLOG_DIR"))
    args = parser.parse_args()
    renders = {"megatron": megatron_log, "deepspeed": deepspeed_log, "hf-trainer": hf_trainer_log}
    scores: dict[str, list] = {name: [] for name in renders}
    factor_rows, clock, lines = [], 0.0, 0
    for seed in range(args.runs):
        run = synth_run(seed, args.iterations)
        for name, render in renders.items():
            times = parse_training_log(render(run.seconds), f"{name}-{seed}.log")
            detector = SlowdownDetector()
            began = time.perf_counter()
            for value in times.seconds:
                detector.update(value)
            clock += time.perf_counter() - began
            lines += len(times)
            result = score(detector.periods, run.truth, run.seconds)
            scores[name].append({**result, "hours": sum(run.seconds) / 3600})
            if name == "megatron":
                factor_rows += by_factor(run, detector.periods, score)
    out = {
        "uptime": os.getloadavg(), "python": platform.python_version(), "runs": args.runs,
        "iterations": args.iterations,
        "cusum": {name: summarize(s, clock / lines) for name, s in scores.items()},
        "cusum_by_slowdown": {},
    }  # fmt: skip
    for low, high in ((1.1, 1.2), (1.2, 1.3), (1.3, 2.0)):
        chosen = [r for r in factor_rows if low <= r["factor"] < high]
        found = [r["delay"] for r in chosen if r["detected"]]
        out["cusum_by_slowdown"][f"{low:g}-{high:g}x"] = {
            "periods": len(chosen), "detected": len(found),
            "delay_iterations_median": statistics.median(found) if found else None,
        }  # fmt: skip
    try:
        import ruptures

        compare = {"cusum": [], "ruptures": []}
        rclock = rlines = 0
        for seed in range(args.ruptures_runs):
            run = synth_run(seed, args.iterations)
            detector = SlowdownDetector()
            for value in run.seconds:
                detector.update(value)
            compare["cusum"].append(
                {**score(detector.periods, run.truth, run.seconds), "hours": sum(run.seconds) / 3600}
            )
            began = time.perf_counter()
            found = ruptures_online(run.seconds, args.window)
            rclock += time.perf_counter() - began
            rlines += len(run.seconds)
            compare["ruptures"].append(
                {**score(found, run.truth, run.seconds), "hours": sum(run.seconds) / 3600}
            )
        out["versus_ruptures"] = {
            "ruptures": ruptures.__version__, "window": args.window, "runs": args.ruptures_runs,
            "cusum": summarize(compare["cusum"], clock / lines),
            "ruptures_pelt_l1_online": summarize(compare["ruptures"], rclock / rlines),
        }  # fmt: skip
    except ImportError:
        out["versus_ruptures"] = "ruptures not installed"
    if args.greyhound:
        out["greyhound"] = greyhound(args.greyhound)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
