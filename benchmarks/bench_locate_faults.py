"""Two-round fault localization at scale, on simulated jobs (issue: checkpoint-based recovery).

For each job size (8 … 512 nodes) and number of faulty nodes (1 … 4), ``--trials`` random fault sets
(default 1,000) go through ``acme.recovery.localize.locate_faults`` on a ``SimulatedCluster``. Per
row: the share of faulty nodes found / missed (neither found nor undecided) / undecided, healthy
nodes blamed, healthy nodes reported undecided, worlds launched, and the time of one localization
(the simulated checks are instant: this is the planning and deciding). Two more tables: a flaky
check (healthy worlds failing with probability p; no faulty node) and stragglers.

Results go to benchmarks/results/locate_faults.json.
Usage: python benchmarks/bench_locate_faults.py [--trials 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
RESULTS = ROOT / "benchmarks" / "results" / "locate_faults.json"
SIZES = (8, 16, 32, 64, 128, 256, 512)


def sweep_faults(size: int, faulty_count: int, trials: int, seed: int) -> dict:
    from acme.recovery.localize import SimulatedCluster, locate_faults, node_names

    rng = random.Random(f"faults:{size}:{faulty_count}:{seed}")
    names = node_names(size)
    totals = {"faulty": 0, "found": 0, "missed": 0, "undecided": 0, "blamed": 0, "healthy_undecided": 0}
    runs_blaming, worlds, seconds = 0, [], []
    for _ in range(trials):
        faulty = set(rng.sample(names, faulty_count))
        cluster = SimulatedCluster(names, faulty=faulty, seed=rng.randrange(2**32))
        started = time.perf_counter()
        result = locate_faults(names, cluster.run_world, max_parallel=1)
        seconds.append(time.perf_counter() - started)
        found, undecided = set(result.faulty), set(result.undecided_nodes)
        totals["faulty"] += len(faulty)
        totals["found"] += len(found & faulty)
        totals["undecided"] += len(undecided & faulty)
        totals["missed"] += len(faulty - found - undecided)
        totals["blamed"] += len(found - faulty)
        totals["healthy_undecided"] += len(undecided - faulty)
        runs_blaming += bool(found - faulty)
        worlds.append(result.worlds_launched)
    return {
        "nodes": size,
        "faulty_per_job": faulty_count,
        "trials": trials,
        "found_share": totals["found"] / totals["faulty"],
        "missed_share": totals["missed"] / totals["faulty"],
        "undecided_share": totals["undecided"] / totals["faulty"],
        "healthy_blamed": totals["blamed"],
        "runs_blaming_a_healthy_node": runs_blaming,
        "healthy_undecided_per_run": totals["healthy_undecided"] / trials,
        "worlds_launched_mean": statistics.fmean(worlds),
        "worlds_launched_max": max(worlds),
        "round1_worlds": size // 2,
        "ms_per_localization": 1000 * statistics.median(seconds),
    }


def sweep_flaky(size: int, probability: float, trials: int, seed: int) -> dict:
    from acme.recovery.localize import SimulatedCluster, locate_faults, node_names

    rng = random.Random(f"flaky:{size}:{probability}:{seed}")
    names = node_names(size)
    blamed = runs_blaming = undecided = withdrawn = 0
    for _ in range(trials):
        cluster = SimulatedCluster(names, seed=rng.randrange(2**32), flaky_probability=probability)
        result = locate_faults(names, cluster.run_world, max_parallel=1)
        blamed += len(result.faulty)
        runs_blaming += bool(result.faulty)
        undecided += len(result.undecided)
        withdrawn += sum("the check is flaky here" in u.reason for u in result.undecided)
    return {
        "nodes": size,
        "flaky_probability": probability,
        "trials": trials,
        "healthy_blamed": blamed,
        "runs_blaming_a_healthy_node": runs_blaming,
        "blames_withdrawn_as_flaky": withdrawn,
        "undecided_per_run": undecided / trials,
        "expected_without_withdrawal": 2 * probability**2 * (size // 2) * trials,
    }


def sweep_stragglers(size: int, trials: int, seed: int) -> dict:
    from acme.recovery.localize import SimulatedCluster, locate_faults, node_names

    rng = random.Random(f"stragglers:{size}:{seed}")
    names = node_names(size)
    slow_total = found = wrongly = undecided = 0
    for _ in range(trials):
        slow = set(rng.sample(names, rng.randint(1, max(1, size // 16))))
        cluster = SimulatedCluster(names, stragglers=slow, seed=rng.randrange(2**32))
        result = locate_faults(names, cluster.run_world, max_parallel=1)
        slow_total += len(slow)
        found += len(set(result.stragglers) & slow)
        wrongly += len(set(result.stragglers) - slow)
        undecided += len(result.undecided)
    return {
        "nodes": size,
        "stragglers_per_job": f"1..{max(1, size // 16)}",
        "trials": trials,
        "found_share": found / slow_total,
        "fast_nodes_called_slow": wrongly,
        "undecided_per_run": undecided / trials,
    }


def markdown(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    lines = ["| " + " | ".join(title for title, _, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(format(row[key], spec) for _, key, spec in columns) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    faults = [sweep_faults(n, k, args.trials, args.seed) for k in (1, 2, 3, 4) for n in SIZES]
    flaky = [sweep_flaky(n, p, args.trials, args.seed) for p in (0.01, 0.05) for n in (64, 512)]
    stragglers = [sweep_stragglers(n, args.trials, args.seed) for n in SIZES]
    document = {
        "measured": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "trials": args.trials,
        "seed": args.seed,
        "simulation": "SimulatedCluster defaults: a world fails iff it holds a faulty node; stragglers 3x slower; 3% noise",
        "faults": faults,
        "flaky_check": flaky,
        "stragglers": stragglers,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    print(
        markdown(
            faults,
            [
                ("nodes", "nodes", "d"),
                ("faulty", "faulty_per_job", "d"),
                ("found", "found_share", ".2%"),
                ("missed", "missed_share", ".2%"),
                ("undecided", "undecided_share", ".2%"),
                ("healthy blamed", "healthy_blamed", "d"),
                ("healthy undecided / run", "healthy_undecided_per_run", ".3f"),
                ("worlds (mean)", "worlds_launched_mean", ".1f"),
                ("worlds (max)", "worlds_launched_max", "d"),
                ("ms / run", "ms_per_localization", ".2f"),
            ],
        )
    )
    print()
    print(
        markdown(
            flaky,
            [
                ("nodes", "nodes", "d"),
                ("p(world flakes)", "flaky_probability", "g"),
                ("healthy blamed", "healthy_blamed", "d"),
                ("runs blaming", "runs_blaming_a_healthy_node", "d"),
                ("blames withdrawn", "blames_withdrawn_as_flaky", "d"),
                ("2p² x worlds x runs", "expected_without_withdrawal", ".1f"),
                ("undecided / run", "undecided_per_run", ".2f"),
            ],
        )
    )
    print()
    print(
        markdown(
            stragglers,
            [
                ("nodes", "nodes", "d"),
                ("stragglers", "stragglers_per_job", "s"),
                ("found", "found_share", ".2%"),
                ("fast called slow", "fast_nodes_called_slow", "d"),
                ("undecided / run", "undecided_per_run", ".3f"),
            ],
        )
    )
    print(f"\n{args.trials} trials per row in {document['wall_s']} s -> {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
