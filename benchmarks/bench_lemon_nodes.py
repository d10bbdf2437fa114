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
Usage: python benchmarks/bench_lemon_nodes.py [--seeds 10] [--nodes 588] [--weeks 8]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
RESULTS = ROOT / "benchmarks" / "results" / "lemon_nodes.json"
KS = (5, 10, 20)
START = datetime(2026, 1, 5, tzinfo=UTC)
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


def job_failure(rng, nodes: int, at: datetime, culprit: int | None) -> list:
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
    events = [FailureEvent(f"n{n:03d}", at, tuple(sources), share, gpu_hours * share) for n, share in blamed]
    if culprit is not None and rng.random() < P_XID:
        events.append(FailureEvent(f"n{culprit:03d}", at, ("telemetry",)))
    return events


def fleet(seed: int, nodes: int, weeks: int, base: float, lemon: float, noise: float) -> dict:
    """One synthesized fleet: the history's events, the target week's faulty nodes, the true rates."""
    import numpy as np

    from acme.recovery.lemon import FailureEvent

    rng = np.random.default_rng(seed)
    rates, kinds = node_rates(rng, nodes, weeks, base, lemon)
    events = []
    for week in range(weeks):
        week_start = START + timedelta(weeks=week)
        for node in range(nodes):
            for _ in range(rng.poisson(rates[node][week])):
                events += job_failure(
                    rng, nodes, week_start + timedelta(seconds=float(rng.uniform(0, 604_800))), node
                )
            if rng.random() < SPURIOUS_XID_PER_NODE_WEEK:
                at = week_start + timedelta(seconds=float(rng.uniform(0, 604_800)))
                events.append(FailureEvent(f"n{node:03d}", at, ("telemetry",)))
        for _ in range(rng.poisson(noise)):
            events += job_failure(
                rng, nodes, week_start + timedelta(seconds=float(rng.uniform(0, 604_800))), None
            )
    target = {f"n{n:03d}" for n in range(nodes) if rng.poisson(rates[n][weeks]) > 0}
    truth_rates = {f"n{n:03d}": rates[n][weeks] for n in range(nodes)}
    return {"events": events, "target": target, "rates": truth_rates, "kinds": kinds,
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
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=588)
    parser.add_argument("--weeks", type=int, default=8)
    parser.add_argument(
        "--base-rate", type=float, default=0.01, help="node faults per node-week (healthy node)"
    )
    parser.add_argument("--lemon-rate", type=float, default=1.0, help="node faults per node-week (lemon)")
    parser.add_argument(
        "--noise-failures", type=float, default=20, help="infrastructure failures per week no node caused"
    )
    parser.add_argument("--half-life-days", type=float, default=14)
    args = parser.parse_args()
    result = run(args)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'method':<20}" + "".join(f"{f'p@{k} mean (min-max)':>22}" for k in KS))
    for method, by_k in result["precision"].items():
        cells = "".join(f"{v['mean']:>10.3f} ({v['min']:.2f}-{v['max']:.2f})" for v in by_k.values())
        print(f"{method:<20}{cells}")
    print(
        f"load {result['machine']['load_1_5_15']}; ranking {result['ranking_seconds_median']} s per ranking"
    )


if __name__ == "__main__":
    main()
