"""Lemon-node score on synthesized fleets: precision@k for predicting next week's node failures (issue 25).

A fleet of ``--nodes`` nodes (588 by default) runs for ``--weeks`` weeks of history and one target week. Every
node fails at a base rate (``--base-rate`` node faults per node-week); lemons fail at ``--lemon-rate``:

- chronic lemons (2% of the nodes) all along;
- repaired lemons (1%): lemons in the first half of the history, healthy after (a board was swapped);
- new lemons (1%): healthy until two weeks before the target week, lemons from then on.

A node fault crashes the job running on it: its size is drawn from a mix of small and large jobs (1 to 64
nodes, the other nodes random), its GPU-hours from its size and a log-normal run time. What the lake would
then hold is drawn the way the pipeline records it: a diagnosis attributing the failure to infrastructure
(p 0.85), a NODE_FAIL state (p 0.3), a recovery localization naming the faulty node (p 0.5 for jobs of 2
nodes or more), a hardware Xid on the faulty node (p 0.5). Besides the node faults, infrastructure failures
that no node caused (network, storage: ``--noise-failures`` per week, diagnosed as infrastructure, never
localized) and spurious Xids (0.005 per node-week) land on random jobs and nodes. The events are built the
way ``acme.recovery.lemon_evidence`` builds them from the lake (one event per node of a failed job, blame 1/n,
or the localized node with blame 1), and ranked by ``acme.recovery.lemon.rank_nodes`` at the end of the
history.

Truth: the nodes that cause at least one fault in the target week. precision@k = share of the k first nodes
of a ranking that are in it. Rankings compared side by side on the same fleets:

- ``count``: the plain baseline, every failure event of a node counts 1 (a failed job counts on each of its nodes);
- ``count_blame``: events weighted by blame only (no decay, no GPU-hours);
- ``score_no_gpu_hours``: blame and decay;
- ``score``: the lemon score as shipped (blame, decay with the default half-life, GPU-hours);
- ``oracle``: the true next-week fault rates (the ceiling: faults are random even for a lemon).

Results go to benchmarks/results/lemon_nodes.json.
Usage: python benchmarks/bench_lemon_nodes.py [--seeds 20] [--nodes 588] [--weeks 8] [--lemon-rate 1.0] [--through-lake]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
if TYPE_CHECKING:
    from acme.lake import Lake

RESULTS = ROOT / "benchmarks" / "results" / "lemon_nodes.json"
KS = (5, 10, 20)
START = datetime(2026, 1, 5, tzinfo=UTC)
CLUSTER = "fleet"
SACCT_HEADER = "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|AllocTRES|ReqTRES|ExitCode"
JOB_NODES = (1, 1, 1, 1, 2, 2, 4, 8, 16, 32, 64)
P_DIAGNOSED, P_NODE_FAIL, P_LOCALIZED, P_XID = 0.85, 0.3, 0.5, 0.5
SPURIOUS_XID_PER_NODE_WEEK = 0.005


def node_rates(
    rng, nodes: int, weeks: int, base: float, lemon: float
) -> tuple[list[list[float]], dict[str, list[int]]]:
    """Per node and week (history + target), the fault rate; and which nodes are lemons of which kind."""
    order = rng.permutation(nodes)
    chronic, repaired, new = (order[: nodes // 50], order[nodes // 50 : nodes // 50 + nodes // 100],
                              order[nodes // 50 + nodes // 100 : nodes // 50 + 2 * (nodes // 100)])  # fmt: skip
    rates = [[base] * (weeks + 1) for _ in range(nodes)]
    for node in chronic:
        rates[node] = [lemon] * (weeks + 1)
    for node in repaired:
        rates[node] = [lemon if w < weeks // 2 else base for w in range(weeks + 1)]
    for node in new:
        rates[node] = [lemon if w >= weeks - 2 else base for w in range(weeks + 1)]
    kinds = {
        "chronic": sorted(map(int, chronic)),
        "repaired": sorted(map(int, repaired)),
        "new": sorted(map(int, new)),
    }
    return rates, kinds


def job_failure(rng, nodes: int, at: datetime, culprit: int | None, jobs: list) -> list:
    """The events of one failed job (module docstring), on ``culprit``'s job or a random one."""
    from acme.recovery.lemon import FailureEvent

    size = int(rng.choice(JOB_NODES))
    others = [int(n) for n in rng.choice(nodes, size=size, replace=False)]
    members = ([culprit] + [n for n in others if n != culprit])[:size] if culprit is not None else others
    gpu_hours = size * 8 * float(rng.lognormal(1.5, 1.0))
    sources = []
    if rng.random() < P_DIAGNOSED:
        sources.append("diagnosis")
    if culprit is not None and rng.random() < P_NODE_FAIL:
        sources.append("node_fail")
    localized = culprit is not None and size > 1 and rng.random() < P_LOCALIZED
    if localized:
        sources.append("localization")
    if not sources:
        return []
    blamed = [(culprit, 1.0)] if localized else [(n, 1.0 / size) for n in members]
    job_id = str(len(jobs) + 1)
    events = [
        FailureEvent(f"n{n:03d}", at, tuple(sources), share, gpu_hours * share, job_id) for n, share in blamed
    ]
    if culprit is not None and rng.random() < P_XID:
        events.append(FailureEvent(f"n{culprit:03d}", at, ("telemetry",)))
    jobs.append({"job_id": job_id, "members": members, "at": at, "gpu_hours": gpu_hours, "sources": sources,
                 "culprit": culprit})  # fmt: skip
    return events


def fleet(seed: int, nodes: int, weeks: int, base: float, lemon: float, noise: float) -> dict:
    """One synthesized fleet: the history's events, the target week's faulty nodes, the true rates."""
    import numpy as np

    from acme.recovery.lemon import FailureEvent

    rng = np.random.default_rng(seed)
    rates, kinds = node_rates(rng, nodes, weeks, base, lemon)
    events: list = []
    jobs: list = []
    for week in range(weeks):
        week_start = START + timedelta(weeks=week)
        for node in range(nodes):
            for _ in range(rng.poisson(rates[node][week])):
                events += job_failure(
                    rng, nodes, week_start + timedelta(seconds=float(rng.uniform(0, 604_800))), node, jobs
                )
            if rng.random() < SPURIOUS_XID_PER_NODE_WEEK:
                at = week_start + timedelta(seconds=float(rng.uniform(0, 604_800)))
                events.append(FailureEvent(f"n{node:03d}", at, ("telemetry",)))
        for _ in range(rng.poisson(noise)):
            events += job_failure(
                rng, nodes, week_start + timedelta(seconds=float(rng.uniform(0, 604_800))), None, jobs
            )
    target = {f"n{n:03d}" for n in range(nodes) if rng.poisson(rates[n][weeks]) > 0}
    truth_rates = {f"n{n:03d}": rates[n][weeks] for n in range(nodes)}
    return {"events": events, "jobs": jobs, "target": target, "rates": truth_rates, "kinds": kinds,
            "until": START + timedelta(weeks=weeks)}  # fmt: skip


def rankings(world: dict, half_life_days: float) -> dict[str, list[str]]:
    from acme.recovery.lemon import ScoreWeights, failure_counts, rank_nodes

    until, events = world["until"], world["events"]
    no_decay = 1e9
    found = {
        "count": [node for node, _ in failure_counts(events, until)],
        "count_blame": [s.node for s in rank_nodes(events, until, ScoreWeights(no_decay, 1.0, True, False))],
        "score_no_gpu_hours": [
            s.node for s in rank_nodes(events, until, ScoreWeights(half_life_days, 0.5, True, False))
        ],
        "score": [s.node for s in rank_nodes(events, until, ScoreWeights(half_life_days, 0.5))],
    }
    found["oracle"] = sorted(world["rates"], key=lambda n: (-world["rates"][n], n))
    return found


def write_lake(world: dict, folder: Path) -> Lake:
    """The fleet's history through the pipeline's own writers: the jobs ingest (a sacct export), diagnosis
    records, recovery action logs (a ``decide`` step per localized job) and the metrics publisher (Xid 79 for
    ten minutes per telemetry event, one series per node)."""
    from acme.diagnosis.records import DiagnosisRecord, write_records
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake
    from acme.recovery.actions import ActionLog

    lake = Lake(str(folder / "lake"))
    lines, records = [SACCT_HEADER], []
    for job in world["jobs"]:
        size, hours = len(job["members"]), job["gpu_hours"] / (8 * len(job["members"]))
        start = (job["at"] - timedelta(hours=hours)).replace(microsecond=0)
        end = job["at"].replace(microsecond=0)
        elapsed = int((end - start).total_seconds())
        state = "NODE_FAIL" if "node_fail" in job["sources"] else "FAILED"
        tres = f"billing=8,cpu={64 * size},gres/gpu={8 * size},mem=1T,node={size}"
        nodes = ",".join(f"n{n:03d}" for n in job["members"])
        lines.append(
            f"{job['job_id']}|train|u{int(job['job_id']) % 40}|gpu|{state}|{start:%Y-%m-%dT%H:%M:%S}|"
            f"{start:%Y-%m-%dT%H:%M:%S}|{end:%Y-%m-%dT%H:%M:%S}|{elapsed // 3600:02d}:{elapsed // 60 % 60:02d}:"
            f"{elapsed % 60:02d}|{size}|{64 * size}|{nodes}|{tres}|{tres}|1:0"
        )
        if "diagnosis" in job["sources"]:
            records.append(DiagnosisRecord(CLUSTER, job["job_id"], start.date(), "ECCError", "Infrastructure",
                                           "infrastructure", 0.9, "rule"))  # fmt: skip
        if "localization" in job["sources"]:
            ActionLog(lake, CLUSTER, job["job_id"], "r1").append(
                {"step": "decide", "status": "done", "dry_run": False, "started_at": end.isoformat(),
                 "ended_at": end.isoformat(), "result": {"faulty": [f"n{job['culprit']:03d}"]}}
            )  # fmt: skip
    (folder / "sacct.txt").write_text("\n".join(lines) + "\n")
    ingest_job_file(lake, JobInput(CLUSTER, "sacct", str(folder / "sacct.txt")), folder / "sacct.txt")
    write_records(lake, records)
    write_xids(lake, [e for e in world["events"] if e.is_telemetry])
    return lake


def write_xids(lake: Lake, events: list) -> None:
    import numpy as np

    from acme.metrics.catalog import load_catalog
    from acme.metrics.storage import Samples, day_start_ms, publish_day, series_frame

    spec = load_catalog()["xid_errors"]
    by_day: dict = {}
    for event in events:
        by_day.setdefault(event.at.date(), []).append(event)
    for day, todays in sorted(by_day.items()):
        nodes = sorted({e.node for e in todays})
        values = np.zeros((len(nodes), 1440))
        for event in todays:
            minute = int(
                (event.at - datetime.combine(day, datetime.min.time(), tzinfo=UTC)).total_seconds() // 60
            )
            values[nodes.index(event.node), minute : minute + 10] = 79
        series = series_frame([(node, 0, f"GPU-{node}", "NVIDIA A100") for node in nodes])
        ts = day_start_ms(day) + np.arange(1440, dtype=np.int64) * 60_000
        samples = Samples("xid_errors", series, np.repeat(np.arange(len(nodes), dtype=np.int32), 1440),
                          np.tile(ts, len(nodes)), values.reshape(-1))  # fmt: skip
        publish_day(lake, spec, CLUSTER, day, samples)


def through_lake(world: dict, half_life_days: float) -> dict:
    """Write one fleet to a lake, read its events back with ``acme.recovery.lemon_evidence`` and rank them:
    the same ranking as the events built in memory, and how long writing and reading took."""
    import tempfile

    from acme.recovery.lemon import ScoreWeights, rank_nodes
    from acme.recovery.lemon_evidence import collect_events
    from acme.settings import LemonSettings

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        lake = write_lake(world, Path(folder))
        written = time.perf_counter() - started
        settings = LemonSettings(half_life_days=half_life_days)
        started = time.perf_counter()
        evidence = collect_events(lake, CLUSTER, world["until"], settings)
        read = time.perf_counter() - started
    from_lake = rank_nodes(evidence.events, world["until"], ScoreWeights.from_settings(settings))
    in_memory = rank_nodes(world["events"], world["until"], ScoreWeights.from_settings(settings))
    top = 20
    return {
        "jobs_written": len(world["jobs"]),
        "events_in_memory": len(world["events"]),
        "events_from_lake": len(evidence.events),
        "read": evidence.read,
        "same_top_20": [s.node for s in from_lake[:top]] == [s.node for s in in_memory[:top]],
        "top_20_overlap": len({s.node for s in from_lake[:top]} & {s.node for s in in_memory[:top]}),
        "write_seconds": round(written, 1),
        "collect_events_seconds": round(read, 2),
    }


def precision_at(ranking: list[str], target: set[str], k: int) -> float:
    return sum(1 for node in ranking[:k] if node in target) / k


def run(args: argparse.Namespace) -> dict:
    per_method: dict[str, dict[int, list[float]]] = {}
    timings, sizes = [], []
    for seed in range(args.seeds):
        world = fleet(seed, args.nodes, args.weeks, args.base_rate, args.lemon_rate, args.noise_failures)
        started = time.perf_counter()
        found = rankings(world, args.half_life_days)
        timings.append((time.perf_counter() - started) / 4)
        sizes.append({"events": len(world["events"]), "target_nodes": len(world["target"])})
        for method, ranking in found.items():
            for k in KS:
                per_method.setdefault(method, {}).setdefault(k, []).append(
                    precision_at(ranking, world["target"], k)
                )
    table = {
        method: {f"p@{k}": {"mean": round(statistics.fmean(v), 3), "median": round(statistics.median(v), 3),
                            "min": round(min(v), 3), "max": round(max(v), 3)} for k, v in by_k.items()}
        for method, by_k in per_method.items()
    }  # fmt: skip
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_1_5_15": os.getloadavg(),
        },
        "fleet": {
            "nodes": args.nodes,
            "weeks": args.weeks,
            "seeds": args.seeds,
            "base_rate": args.base_rate,
            "lemon_rate": args.lemon_rate,
            "noise_failures_per_week": args.noise_failures,
            "half_life_days": args.half_life_days,
        },  # fmt: skip
        "events_per_fleet_median": statistics.median(s["events"] for s in sizes),
        "target_nodes_per_week_median": statistics.median(s["target_nodes"] for s in sizes),
        "ranking_seconds_median": round(statistics.median(timings), 4),
        "precision": table,
        "through_lake_seed_0": through_lake(
            fleet(0, args.nodes, args.weeks, args.base_rate, args.lemon_rate, args.noise_failures),
            args.half_life_days,
        )
        if args.through_lake
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=588)
    parser.add_argument("--weeks", type=int, default=8)
    parser.add_argument(
        "--base-rate", type=float, default=0.01, help="node faults per node-week (healthy node)"
    )
    parser.add_argument("--lemon-rate", type=float, default=1.0, help="node faults per node-week (lemon)")
    parser.add_argument(
        "--noise-failures", type=float, default=20, help="infrastructure failures per week no node caused"
    )
    parser.add_argument("--half-life-days", type=float, default=28)
    parser.add_argument(
        "--through-lake", action="store_true", help="also write seed 0's fleet to a lake and read it back"
    )
    args = parser.parse_args()
    result = run(args)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'method':<20}" + "".join(f"{f'p@{k} mean (min-max)':>22}" for k in KS))
    for method, by_k in result["precision"].items():
        cells = "".join(f"{v['mean']:>10.3f} ({v['min']:.2f}-{v['max']:.2f})" for v in by_k.values())
        print(f"{method:<20}{cells}")
    if result["through_lake_seed_0"]:
        print(f"through the lake (seed 0): {result['through_lake_seed_0']}")
    print(
        f"load {result['machine']['load_1_5_15']}; ranking {result['ranking_seconds_median']} s per ranking"
    )


if __name__ == "__main__":
    main()
