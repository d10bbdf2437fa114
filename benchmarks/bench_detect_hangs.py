"""Hang and fail-slow detection on synthesized telemetry with injected faults and healthy pauses (issue 19).

Per seed, a cluster of ``--nodes`` 8-GPU nodes runs multi-node pretraining jobs (4-32 nodes) for
``--days`` UTC days at a 15 s scrape (``acme.metrics.synth.synth_training_cluster``). Every job has the
healthy-but-idle phases of real training, at rates and lengths assumed here (no public trace gives
them per job):

* checkpoint writes every 30-60 min lasting 1-6 min (GPUs idle, no RDMA); a quarter of them end with
  the other ranks waiting in an NCCL barrier for the slowest writer (a hang's exact signature) for a
  log-normal time, median 45 s, capped at 6 min;
* data-loading stalls (about one per 3 h, 0.5-3 min) and evaluation passes (every 2-4 h, 3-10 min);

and a share of jobs get faults: a **hang** (a collective stuck: kernels spinning, no tensor work, no
RDMA) lasting until the NCCL watchdog's 30 min, in 30 % of them with one node out of the collective;
a **stall** (a hang with no kernel resident, 30 min); a **straggler** (one node's SM, tensor and IB
activity x 0.3-0.65 for 1-3 h).

Every node writes to the shared file system (``acme.detection.scenario.storage_writes``): a little
while its job runs, a checkpoint shard's rate while it writes a checkpoint (the slow writer of a barrier
wait too), only the background once a hang or stall begins.

The detectors (``acme.detection.detect.detect_job``, the code the DAG runs) are called as the DAG
would call them: every ``--tick`` minutes (2, the DAG's schedule) on the trailing window of each
running job. Consecutive detections of one job and kind form one alarm (as the DAG's episodes do). An
alarm is true when it overlaps an injected fault of its class (hang or stall for a hang/stall alarm;
the straggler's node for a fail-slow alarm). Reported: recall and detection delay (first detecting
tick - onset) per fault kind (and for the hangs that begin during a healthy pause, a checkpoint write
above all), precision, false alarms per 1,000 healthy GPU-hours (GPU-hours of jobs
outside their faults), and the same for other thresholds (``--sweep``) to show the trade-off the
defaults sit on; always also the defaults without the storage writes (``storage_write`` not
published: GPU and RDMA signals only), the detectors' fallback. Also timed: one detection pass through
the lake (``detect_cluster``) for one job and for an idle cluster.

Results go to benchmarks/results/detect_hangs.json.
Usage: python benchmarks/bench_detect_hangs.py [--nodes 192] [--days 1] [--seeds 3] [--tick 2] [--sweep]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
RESULTS = ROOT / "benchmarks" / "results" / "detect_hangs.json"
STEP_S = 15
JOB_SIZES = (4, 4, 8, 8, 16, 32)
FAULT_SHARES = {"hang": 0.35, "stall": 0.1, "straggler": 0.3}  # share of jobs given each fault
WATCHDOG_MIN = 30.0
PAUSES = ("checkpoint", "barrier", "data_stall", "eval")
NO_STORAGE = "default, without storage writes (GPU and RDMA signals only)"


@dataclasses.dataclass
class Fault:
    job: str
    kind: str  # hang | stall | straggler
    start_step: int
    end_step: int
    nodes: tuple[str, ...]  # the straggler / the node out of the collective; () otherwise
    in_pause: str | None = None  # the healthy pause a hang or stall began in (checkpoint, barrier, ...)


def minutes(rng: random.Random, low: float, high: float) -> int:
    return max(1, int(rng.uniform(low, high) * 60 / STEP_S))


def plan_cluster(nodes: int, days: int, seed: int):
    """Jobs, their episodes and the injected faults (ground truth) for one synthesized cluster."""
    from acme.metrics.synth import GPUS_PER_NODE, TrainingJob, node_names

    rng = random.Random(f"detect:{seed}")
    steps = days * 86400 // STEP_S
    names = node_names("seren", nodes)
    jobs, episodes, faults = [], [], []
    first = 0
    while True:
        size = rng.choice(JOB_SIZES)
        if first + size > nodes:
            break
        start = rng.randrange(0, steps // 8)
        job = TrainingJob(f"job{len(jobs)}", first, size, start, steps)
        jobs.append(job)
        first += size
        episodes += healthy_phases(rng, job.node_indices, start, steps)
        inject_faults(rng, job, steps, names, episodes, faults)
    gpus_per_job = {j.job_id: j.nodes * GPUS_PER_NODE for j in jobs}
    return jobs, episodes, faults, gpus_per_job, names


def healthy_phases(rng: random.Random, idx: tuple[int, ...], start: int, steps: int) -> list:
    """A job's checkpoint writes (some ending in a barrier wait), evaluations and data stalls, in time order
    without overlap."""
    from acme.metrics.synth import Episode

    episodes = []
    t = start + minutes(rng, 5, 20)
    next_ckpt = t + minutes(rng, 30, 60)
    next_eval = t + minutes(rng, 120, 240)
    while t < steps:
        if t >= next_ckpt:
            write = minutes(rng, 1, 6)
            episodes.append(Episode("checkpoint", idx, t, t + write))
            t += write
            if rng.random() < 0.25:
                wait = max(1, int(min(6.0, rng.lognormvariate(-0.29, 0.8)) * 60 / STEP_S))
                writer = rng.choice(idx)
                others = tuple(n for n in idx if n != writer)
                episodes.append(Episode("barrier", others, t, t + wait))
                episodes.append(Episode("checkpoint", (writer,), t, t + wait))
                t += wait
            next_ckpt = t + minutes(rng, 30, 60)
        elif t >= next_eval:
            length = minutes(rng, 3, 10)
            episodes.append(Episode("eval", idx, t, t + length))
            t += length
            next_eval = t + minutes(rng, 120, 240)
        elif rng.random() < 15 / (3 * 3600):  # about one data stall per 3 h (per 15 s step)
            length = minutes(rng, 0.5, 3)
            episodes.append(Episode("data_stall", idx, t, t + length))
            t += length
        else:
            t += 1
    return episodes


def inject_faults(
    rng: random.Random, job, steps: int, names: list[str], episodes: list, faults: list
) -> None:
    """A job's faults, appended after its healthy phases (so they win where they overlap)."""
    from acme.metrics.synth import Episode

    idx = job.node_indices
    for kind, share in FAULT_SHARES.items():
        if rng.random() >= share:
            continue
        onset = rng.randrange(job.start_step + minutes(rng, 30, 60), steps - minutes(rng, 40, 60))
        if kind == "straggler":
            slow = rng.choice(idx)
            end = min(steps, onset + minutes(rng, 60, 180))
            episodes.append(Episode("straggler", (slow,), onset, end, rng.uniform(0.3, 0.65)))
            faults.append(Fault(job.job_id, kind, onset, end, (names[slow],)))
            continue
        end = min(steps, onset + int(WATCHDOG_MIN * 60 / STEP_S))
        in_pause = next(
            (e.kind for e in episodes if set(e.nodes) <= set(idx) and e.kind in PAUSES
             and e.start_step <= onset <= e.end_step),
            None,
        )  # fmt: skip
        episodes.append(Episode(kind, idx, onset, end))
        culprit: tuple[str, ...] = ()
        if kind == "hang" and rng.random() < 0.3:
            left = rng.choice(idx)
            episodes.append(Episode("stall", (left,), onset, end))
            culprit = (names[left],)
        faults.append(Fault(job.job_id, kind, onset, end, culprit, in_pause))


def run_ticks(telemetry, jobs, names, settings, tick_steps: int, phase: int) -> tuple[list, int, float]:
    """The detectors at every tick on every job, as the DAG calls them: (alarms, calls, seconds), an alarm
    being [job, "hang" | "slow", first step, last step, nodes] (consecutive detections of a kind)."""
    from acme.detection.detect import FAIL_SLOW, detect_job

    window = int(settings.lookback_minutes * 60 / STEP_S)
    gap = max(2 * tick_steps, window)
    alarms: list[list] = []
    calls, seconds = 0, 0.0
    for job in jobs:
        view = telemetry.select([names[i] for i in job.node_indices])
        open_alarm: dict[str, list] = {}
        for end in range(phase, telemetry.steps + 1, tick_steps):  # the DAG's ticks, whatever the window
            if end <= job.start_step:
                continue
            began = time.perf_counter()
            finding = detect_job(view.span(max(job.start_step, end - window), end), settings)
            seconds += time.perf_counter() - began
            calls += 1
            if finding is None:
                continue
            kind = "slow" if finding.kind == FAIL_SLOW else "hang"
            current = open_alarm.get(kind)
            if current is not None and end - current[3] <= gap:
                current[3] = end
                current[4] |= set(finding.nodes)
            else:
                open_alarm[kind] = [job.job_id, kind, end, end, set(finding.nodes)]
                alarms.append(open_alarm[kind])
    return alarms, calls, seconds


def match_alarms(alarms: list, faults: list, tick_steps: int) -> tuple[int, list, dict, dict]:
    """(true alarms, false alarms, fault number -> first delay in steps, fault number -> culprit named)."""
    true_alarms, false_alarms = 0, []
    detected: dict[int, int] = {}
    named_culprit: dict[int, bool] = {}
    for job_id, kind, first, last, nodes in alarms:
        matched = False
        for number, fault in enumerate(faults):
            same_class = (kind == "hang" and fault.kind in ("hang", "stall")) or (
                kind == "slow" and fault.kind == "straggler" and set(fault.nodes) <= nodes
            )
            if fault.job != job_id or not same_class:
                continue
            if first <= fault.end_step + tick_steps and last >= fault.start_step:
                matched = True
                delay = first - fault.start_step
                if delay >= 0 and (number not in detected or delay < detected[number]):
                    detected[number] = delay
                    named_culprit[number] = bool(fault.nodes) and set(fault.nodes) <= nodes and len(nodes) < 8
        true_alarms += matched
        if not matched:
            false_alarms.append(
                {"job": job_id, "kind": kind, "at_step": first, "minutes_after_midnight": first / 4}
            )
    return true_alarms, false_alarms, detected, named_culprit


def evaluate(telemetry, jobs, faults, gpus_per_job, names, settings, tick_steps: int, phase: int) -> dict:
    """Run the detectors at every tick on every job; alarms, matched against the faults."""
    alarms, calls, seconds = run_ticks(telemetry, jobs, names, settings, tick_steps, phase)
    true_alarms, false_alarms, detected, named_culprit = match_alarms(alarms, faults, tick_steps)
    fault_gpu_steps = sum(
        gpus_per_job[f.job] * (f.end_step - f.start_step) for f in faults if f.kind in ("hang", "stall")
    )
    job_gpu_steps = sum(gpus_per_job[j.job_id] * (telemetry.steps - j.start_step) for j in jobs)
    by_kind = {}
    for kind in ("hang", "stall", "straggler"):
        numbers = [i for i, f in enumerate(faults) if f.kind == kind]
        delays = [detected[i] * STEP_S / 60 for i in numbers if i in detected]
        by_kind[kind] = {"injected": len(numbers), "detected": len(delays), "delays_min": delays}
    in_pause = [i for i, f in enumerate(faults) if f.kind == "hang" and f.in_pause]
    by_kind["hang_in_pause"] = {
        "injected": len(in_pause),
        "detected": sum(i in detected for i in in_pause),
        "delays_min": [detected[i] * STEP_S / 60 for i in in_pause if i in detected],
        "pauses": [faults[i].in_pause for i in in_pause],
    }
    culprits = [i for i, f in enumerate(faults) if f.kind == "hang" and f.nodes]
    return {
        "alarms": len(alarms),
        "true_alarms": true_alarms,
        "false_alarms": false_alarms,
        "healthy_gpu_hours": (job_gpu_steps - fault_gpu_steps) * STEP_S / 3600,
        "by_kind": by_kind,
        "culprit_hangs": len(culprits),
        "culprit_named": sum(named_culprit.get(i, False) for i in culprits),
        "calls": calls,
        "detect_seconds": seconds,
    }


def merge(parts: list[dict]) -> dict:
    by_kind = {}
    for kind in ("hang", "hang_in_pause", "stall", "straggler"):
        injected = sum(p["by_kind"][kind]["injected"] for p in parts)
        delays = [d for p in parts for d in p["by_kind"][kind]["delays_min"]]
        by_kind[kind] = {
            "injected": injected,
            "detected": len(delays),
            "recall": round(len(delays) / injected, 4) if injected else None,
            "delay_min_median": round(statistics.median(delays), 2) if delays else None,
            "delay_min_max": round(max(delays), 2) if delays else None,
            "detected_within_5min": sum(d <= 5 for d in delays),
            "delays_min": sorted(round(d, 2) for d in delays),
        }
    by_kind["hang_in_pause"]["pauses"] = sorted(
        x for p in parts for x in p["by_kind"]["hang_in_pause"]["pauses"]
    )
    alarms = sum(p["alarms"] for p in parts)
    true_alarms = sum(p["true_alarms"] for p in parts)
    false_alarms = [a for p in parts for a in p["false_alarms"]]
    healthy = sum(p["healthy_gpu_hours"] for p in parts)
    calls = sum(p["calls"] for p in parts)
    return {
        "by_kind": by_kind,
        "alarms": alarms,
        "precision": round(true_alarms / alarms, 4) if alarms else None,
        "false_alarms": len(false_alarms),
        "false_alarm_kinds": {k: sum(a["kind"] == k for a in false_alarms) for k in ("hang", "slow")},
        "false_alarm_examples": false_alarms[:5],
        "healthy_gpu_hours": round(healthy, 1),
        "false_alarms_per_1000_healthy_gpu_hours": round(1000 * len(false_alarms) / healthy, 4),
        "culprit_named": f"{sum(p['culprit_named'] for p in parts)}/{sum(p['culprit_hangs'] for p in parts)}",
        "detect_ms_per_job_and_tick": round(
            1000 * sum(p["detect_seconds"] for p in parts) / max(calls, 1), 3
        ),
    }


def time_lake_pass(tmp: Path) -> dict:
    """detect_cluster through the lake: one running 4-node job with a day of telemetry, and the same lake three
    minutes before the job starts (its jobs partition is read, nothing runs, no telemetry is read)."""
    from acme.detection.run import detect_cluster
    from acme.detection.scenario import NODES, build_lake, step_of
    from acme.lake import Lake
    from acme.metrics.synth import Episode
    from acme.settings import DetectionSettings

    lake_dir = tmp / "lake"
    build_lake(lake_dir, tmp, [Episode("hang", tuple(range(NODES)), step_of(2), step_of(2, 30))])
    lake = Lake(str(lake_dir))
    at = datetime(2024, 3, 10, 2, 10, tzinfo=UTC)
    settings = DetectionSettings()
    busy, idle = [], []
    for _ in range(5):
        busy.append(detect_cluster(lake, "seren", at, settings)["seconds"])
        idle.append(
            detect_cluster(lake, "seren", datetime(2024, 3, 10, 0, 2, tzinfo=UTC), settings)["seconds"]
        )
    found = detect_cluster(lake, "seren", at, settings)["suspects"]
    return {
        "one_job_pass_s_median": statistics.median(busy),
        "idle_cluster_pass_s_median": statistics.median(idle),
        "lake_pass_found": [s["kind"] for s in found],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=192)
    parser.add_argument("--days", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tick", type=float, default=2.0, help="minutes between detection runs (the DAG's)")
    parser.add_argument("--sweep", action="store_true", help="also other hang minutes and slow ratios")
    parser.add_argument(
        "--lake-pass-only", action="store_true", help="only re-time the lake pass, into the existing results"
    )
    args = parser.parse_args()
    if args.lake_pass_only:
        report = json.loads(RESULTS.read_text())
        with tempfile.TemporaryDirectory() as tmp:
            report["lake_pass"] = time_lake_pass(Path(tmp))
        report["lake_pass"]["when"] = datetime.now(UTC).isoformat(timespec="seconds")
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report["lake_pass"]))
        return

    import numpy as np

    from acme.detection.scenario import storage_writes
    from acme.detection.telemetry import telemetry_from_synth
    from acme.metrics.synth import synth_training_cluster
    from acme.settings import DetectionSettings

    default = DetectionSettings()
    variants = {"default": default}
    if args.sweep:
        for m in (1.0, 1.5, 4.0):
            variants[f"hang_minutes={m:g}"] = dataclasses.replace(default, hang_minutes=m)
        for r in (0.5, 0.85):
            variants[f"slow_ratio={r:g}"] = dataclasses.replace(default, slow_ratio=r)
        variants["slow_windows=1"] = dataclasses.replace(default, slow_windows=1)
    tick_steps = int(args.tick * 60 / STEP_S)
    parts: dict[str, list[dict]] = {name: [] for name in [*variants, NO_STORAGE]}
    began = time.perf_counter()
    for seed in range(args.seeds):
        jobs, episodes, faults, gpus_per_job, names = plan_cluster(args.nodes, args.days, seed)
        synth = synth_training_cluster(
            "seren", args.nodes, date(2024, 4, 1), args.days, jobs, episodes, seed=seed, step_s=STEP_S
        )
        telemetry = telemetry_from_synth(synth, storage_writes(synth, jobs, seed))
        del synth
        phase = random.Random(seed).randrange(tick_steps)
        for name, settings in variants.items():
            parts[name].append(
                evaluate(telemetry, jobs, faults, gpus_per_job, names, settings, tick_steps, phase)
            )
        blind = dataclasses.replace(telemetry, write=np.full_like(telemetry.write, np.nan))
        parts[NO_STORAGE].append(
            evaluate(blind, jobs, faults, gpus_per_job, names, default, tick_steps, phase)
        )
        print(
            f"seed {seed}: {len(jobs)} jobs, {len(faults)} faults, {time.perf_counter() - began:.0f} s",
            flush=True,
        )
    results = {name: merge(p) for name, p in parts.items()}
    with tempfile.TemporaryDirectory() as tmp:
        lake_pass = time_lake_pass(Path(tmp))
    report = {
        "benchmark": "detect_hangs",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.python_version()}",
        "nodes": args.nodes,
        "days": args.days,
        "seeds": args.seeds,
        "tick_min": args.tick,
        "settings": dataclasses.asdict(default),
        "results": results,
        "lake_pass": lake_pass,
        "seconds": round(time.perf_counter() - began, 1),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"results": results, "lake_pass": lake_pass}, indent=2))


if __name__ == "__main__":
    main()
