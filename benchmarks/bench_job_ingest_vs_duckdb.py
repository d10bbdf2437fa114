"""Job ingest against the bare engine: fixed cost and marginal cost per million rows (issue 27 item 2).

The command line (``python -m acme ingest-jobs --format acmetrace``: parse, validate with the
great-expectations suite, quarantine, publish the day partitions into an empty lake) and a bare
DuckDB CSV→Parquet conversion of the same file (``COPY (SELECT * FROM read_csv(...)) TO ...``, in a
fresh interpreter) run alternately on two synthesized Seren-layout traces: the one of
``bench_ingest_jobs.py`` (1,002,061 jobs over 184 days, seed 7) and one ten times as large over
the same 184 days (seed 8), made once into ``benchmarks/.data/`` and reused. Per round: DuckDB 1M,
CLI 1M, DuckDB 10M, CLI 10M (``--plugins DIR`` adds the CLI of another checkout's ``plugins/``
after each CLI run, for before/after in one session). Wall and CPU (user + system) time of each
process, interpreter start included; medians over the rounds.

From the medians at the two sizes, for each of DuckDB and the CLI:
- marginal cost per million rows = (time at 10M − time at 1M) / (millions of rows between them);
- fixed cost = time at 1M − 1M's rows × the marginal cost (start-up, imports, per-run work).

Goals: the CLI's marginal wall cost ≤ 2.5× DuckDB's, the whole 1M-job command ≤ 4× DuckDB's wall.
Results go to benchmarks/results/job_ingest_vs_duckdb.json (``--out`` to change).
Usage: python benchmarks/bench_job_ingest_vs_duckdb.py [--rounds 3] [--large 10000000] [--plugins DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from datetime import date
from pathlib import Path

from child_process import measured_child

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / ".data"
SEREN_JOBS_PER_DAY = 818_327 / 184  # the released Seren trace, March to August 2023
DAYS = 184
DUCKDB_COPY = (
    "import sys, duckdb;"
    "duckdb.sql(f\"COPY (SELECT * FROM read_csv('{sys.argv[1]}')) TO '{sys.argv[2]}' "
    '(FORMAT parquet)")'
)


def synthesized_trace(jobs: int, seed: int) -> Path:
    """A Seren-layout trace of about ``jobs`` jobs over 184 days (made once, then reused)."""
    path = DATA / (f"seren_{jobs}.csv" if seed == 7 else f"seren_{jobs}_seed{seed}.csv")
    if not path.exists():
        sys.path.insert(0, str(ROOT / "plugins"))
        from acme.jobs.synth import write_synth_trace

        DATA.mkdir(parents=True, exist_ok=True)
        write_synth_trace(
            "seren", date(2023, 3, 1), DAYS, path, scale=jobs / (SEREN_JOBS_PER_DAY * DAYS), seed=seed
        )
    return path


def _env(plugins: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(plugins), GX_ANALYTICS_ENABLED="false")


def cli_run(trace: Path, plugins: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-h27b-") as lake:
        command = [sys.executable, "-m", "acme", "ingest-jobs", "--format", "acmetrace", "--cluster", "seren",
                   "--input", str(trace), "--lake", lake]  # fmt: skip
        result = measured_child(command, _env(plugins))
    summary = json.loads(result["out"])
    return {
        "wall_s": result["wall_s"],
        "cpu_s": result["cpu_s"],
        "peak_rss_mb": result["peak_rss_mb"],
        "rows_in": summary["rows_in"],
        "rows": summary["rows"],
        "quarantined": summary["quarantined"],
        "partitions": len(summary["partitions"]),
    }


def duckdb_run(trace: Path) -> dict:
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="bench-h27b-") as folder:
        out = Path(folder) / "jobs.parquet"
        result = measured_child(
            [sys.executable, "-c", DUCKDB_COPY, str(trace), str(out)], _env(ROOT / "plugins")
        )
        rows = pq.ParquetFile(out).metadata.num_rows
    return {
        "wall_s": result["wall_s"],
        "cpu_s": result["cpu_s"],
        "peak_rss_mb": result["peak_rss_mb"],
        "rows": rows,
    }


def run_rounds(traces: dict[str, Path], rounds: int, trees: dict[str, Path], after_round) -> list[dict]:
    """Each round runs every size: DuckDB, then the CLI of each tree (the same load for all);
    ``after_round(rounds so far)`` after each (the report is written as the rounds come in)."""
    done = []
    for number in range(rounds):
        row: dict = {"load_avg": os.getloadavg()}
        for size, trace in traces.items():
            row[f"duckdb_{size}"] = duckdb_run(trace)
            for name, plugins in trees.items():
                row[f"cli_{name}_{size}"] = cli_run(trace, plugins)
        row["load_avg_after"] = os.getloadavg()
        done.append(row)
        walls = ", ".join(
            f"{k} {v['wall_s']:.2f} s" for k, v in row.items() if k.startswith(("duckdb", "cli"))
        )
        print(f"round {number + 1} (load {row['load_avg'][0]:.1f}): {walls}", flush=True)
        after_round(done)
    return done


def medians(rounds: list[dict]) -> dict[str, dict[str, float]]:
    keys = [key for key in rounds[0] if key.startswith(("duckdb", "cli"))]
    return {
        key: {
            stat: statistics.median(r[key][stat] for r in rounds)
            for stat in ("wall_s", "cpu_s", "peak_rss_mb")
        }
        for key in keys
    }


def split_costs(small: dict, large: dict, small_rows: int, large_rows: int) -> dict[str, float]:
    """Fixed cost and marginal cost per million rows (wall and CPU) from the medians at two sizes."""
    millions = (large_rows - small_rows) / 1e6
    costs = {}
    for stat in ("wall_s", "cpu_s"):
        marginal = (large[stat] - small[stat]) / millions
        costs[f"marginal_{stat}_per_million"] = marginal
        costs[f"fixed_{stat}"] = small[stat] - marginal * small_rows / 1e6
    return costs


def summarize(rounds: list[dict], rows: dict[str, int], trees: dict[str, Path]) -> dict:
    median = medians(rounds)
    engines = {"duckdb": "duckdb", **{f"cli_{name}": f"cli_{name}" for name in trees}}
    costs = {
        engine: split_costs(
            median[f"{prefix}_small"], median[f"{prefix}_large"], rows["small"], rows["large"]
        )
        for engine, prefix in engines.items()
    }
    ratios = {}
    for name in trees:
        cli, duck = costs[f"cli_{name}"], costs["duckdb"]
        ratios[name] = {
            "whole_1m_wall": median[f"cli_{name}_small"]["wall_s"] / median["duckdb_small"]["wall_s"],
            "whole_1m_cpu": median[f"cli_{name}_small"]["cpu_s"] / median["duckdb_small"]["cpu_s"],
            "whole_large_wall": median[f"cli_{name}_large"]["wall_s"] / median["duckdb_large"]["wall_s"],
            "marginal_wall": cli["marginal_wall_s_per_million"] / duck["marginal_wall_s_per_million"],
            "marginal_cpu": cli["marginal_cpu_s_per_million"] / duck["marginal_cpu_s_per_million"],
        }
    return {"median": median, "costs": costs, "ratios_to_duckdb": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=1_000_000)
    parser.add_argument("--large", type=int, default=10_000_000)
    parser.add_argument("--plugins", type=Path, help="also run the CLI of this (older) plugins/ folder")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "job_ingest_vs_duckdb.json"
    )
    args = parser.parse_args()
    traces = {"small": synthesized_trace(args.small, seed=7), "large": synthesized_trace(args.large, seed=8)}
    trees = {"new": ROOT / "plugins", **({"old": args.plugins.resolve()} if args.plugins else {})}
    load_before = os.getloadavg()

    def write(rounds: list[dict]) -> dict:
        rows = {size: rounds[0][f"cli_new_{size}"]["rows_in"] for size in traces}
        report = {
            "machine": {
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "load_avg": load_before,
                "load_avg_after": os.getloadavg(),
            },
            "traces": {
                size: {"path": str(p.relative_to(ROOT)), "bytes": p.stat().st_size, "rows": rows[size]}
                for size, p in traces.items()
            },
            "trees": {name: str(path) for name, path in trees.items()},
            "rounds": rounds,
            **summarize(rounds, rows, trees),
            "goals": {"marginal_wall_over_duckdb": 2.5, "whole_1m_wall_over_duckdb": 4.0},
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        return report

    report = write(run_rounds(traces, args.rounds, trees, write))
    rows, summary = {size: t["rows"] for size, t in report["traces"].items()}, report
    print(f"rows: {rows}")
    for engine, cost in summary["costs"].items():
        print(f"{engine}: fixed {cost['fixed_wall_s']:.2f} s wall / {cost['fixed_cpu_s']:.2f} s CPU; marginal "
              f"{cost['marginal_wall_s_per_million']:.3f} s wall / {cost['marginal_cpu_s_per_million']:.3f} s CPU "
              "per million rows")  # fmt: skip
    for name, ratio in summary["ratios_to_duckdb"].items():
        print(f"cli ({name}) / duckdb: whole 1M {ratio['whole_1m_wall']:.2f}× wall, {ratio['whole_1m_cpu']:.2f}× CPU "
              f"(goal 4×); marginal {ratio['marginal_wall']:.2f}× wall, {ratio['marginal_cpu']:.2f}× CPU (goal 2.5×)")  # fmt: skip
    print(
        f"load average before/after: {report['machine']['load_avg']} / {report['machine']['load_avg_after']}"
    )
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
