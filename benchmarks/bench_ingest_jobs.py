"""Job-trace ingest benchmarks (issues 18 and the foundation).

1. The command line ingesting and validating a synthesized Seren-scale trace of 1,000,000 jobs
   (~125 MB CSV) into a fresh lake, side by side **in the same run** with a bare DuckDB
   CSV→Parquet conversion of the same file (``COPY (SELECT * FROM read_csv(...)) TO ... (FORMAT
   parquet)`` in a fresh interpreter): wall time (interpreter start included) and peak RSS of
   each process, alternated so both see the same load. Targets: CLI ≤ 4× DuckDB, ≤ 700 MB.
2. The floor: a fresh interpreter importing what the CLI needs (acme's ingest, DuckDB, pyarrow,
   pandas, great-expectations) and nothing more.
3. One nightly partition of 5,000 jobs through the DAG's ingest task function
   (:func:`acme.jobs.ingest.ingest_planned`: raw copy, staged parse, validation, publish) in a
   warm process: task compute. Target: <= 1 s.
4. ``--validation-options``: the great-expectations suite over the whole canonical frame against
   the narrow frame of only the validated columns (what ``validate_job_table`` does), in one
   process on the 1M-job table.

``--plugins DIR`` runs the CLI (and the nightly step, when the API allows) from another
checkout's ``plugins/`` (an "old" tree), so before/after are measured in one session.
Results go to benchmarks/results/ingest_jobs.json (``--out`` to change).
Usage: python benchmarks/bench_ingest_jobs.py [--runs 3] [--jobs 1000000] [--plugins DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from child_process import measured_child

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / ".data"
SEREN_JOBS_PER_DAY = 818_327 / 184  # the released Seren trace, March to August 2023

DUCKDB_COPY = (
    "import sys, duckdb;"
    "duckdb.sql(f\"COPY (SELECT * FROM read_csv('{sys.argv[1]}')) TO '{sys.argv[2]}' "
    '(FORMAT parquet)")'
)
FLOOR_IMPORTS = (
    "import acme.jobs.ingest, acme.jobs.validate, duckdb, pyarrow.parquet, pandas, great_expectations"
)


def synthesized_trace(jobs: int) -> Path:
    """A Seren-layout trace of about ``jobs`` jobs over 184 days (made once, then reused)."""
    from acme.jobs.synth import write_synth_trace

    days = 184
    scale = jobs / (SEREN_JOBS_PER_DAY * days)
    path = DATA / f"seren_{jobs}.csv"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        write_synth_trace("seren", date(2023, 3, 1), days, path, scale=scale, seed=7)
    return path


def measured(command: list[str], plugins: Path) -> dict:
    """Wall time, CPU time and peak RSS of ``command`` in a fresh process (``plugins`` on its path)."""
    return measured_child(command, dict(os.environ, PYTHONPATH=str(plugins), GX_ANALYTICS_ENABLED="false"))


def cli_run(trace: Path, plugins: Path) -> dict:
    with tempfile.TemporaryDirectory() as lake:
        result = measured(
            [sys.executable, "-m", "acme", "ingest-jobs", "--format", "acmetrace", "--cluster", "seren",
             "--input", str(trace), "--lake", lake],
            plugins,
        )  # fmt: skip
    summary = json.loads(result["out"])
    return {"wall_s": result["wall_s"], "cpu_s": result["cpu_s"], "peak_rss_mb": result["peak_rss_mb"], "rows": summary["rows"],
            "quarantined": summary["quarantined"], "partitions": len(summary["partitions"])}  # fmt: skip


def duckdb_run(trace: Path) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "jobs.parquet"
        result = measured([sys.executable, "-c", DUCKDB_COPY, str(trace), str(out)], ROOT / "plugins")
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(out).metadata.num_rows
    return {
        "wall_s": result["wall_s"],
        "cpu_s": result["cpu_s"],
        "peak_rss_mb": result["peak_rss_mb"],
        "rows": rows,
    }


def floor_run(plugins: Path) -> dict:
    result = measured([sys.executable, "-c", FLOOR_IMPORTS], plugins)
    return {"wall_s": result["wall_s"], "cpu_s": result["cpu_s"], "peak_rss_mb": result["peak_rss_mb"]}


def measure_side_by_side(trace: Path, runs: int, trees: dict[str, Path]) -> dict:
    """Per round: DuckDB, then the CLI of every tree, then the import floor: the same conditions."""
    rounds = []
    for _ in range(runs):
        row = {"duckdb": duckdb_run(trace)}
        for name, plugins in trees.items():
            row[f"cli_{name}"] = cli_run(trace, plugins)
            row[f"cli_{name}"]["ratio_to_duckdb"] = row[f"cli_{name}"]["wall_s"] / row["duckdb"]["wall_s"]
            row[f"cli_{name}"]["cpu_ratio_to_duckdb"] = row[f"cli_{name}"]["cpu_s"] / row["duckdb"]["cpu_s"]
        row["floor"] = floor_run(trees["new"])
        rounds.append(row)
    medians = {
        key: {
            stat: statistics.median(r[key][stat] for r in rounds)
            for stat in ("wall_s", "cpu_s", "peak_rss_mb", "ratio_to_duckdb", "cpu_ratio_to_duckdb")
            if stat in rounds[0][key]
        }
        for key in rounds[0]
    }
    return {"rounds": rounds, "median": medians}


def measure_nightly_partition(runs: int, jobs: int = 5000) -> dict:
    """Task compute of the ingest task for one day of ~5,000 jobs, in a warm process."""
    sys.path.insert(0, str(ROOT / "plugins"))
    from acme.jobs.ingest import JobInput, ingest_planned
    from acme.jobs.synth import write_synth_trace
    from acme.lake import Lake

    day = date(2023, 7, 1)
    path = DATA / f"seren_day_{jobs}.csv"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        write_synth_trace("seren", day, 1, path, scale=jobs / SEREN_JOBS_PER_DAY, seed=11)
    timings, rows = [], 0
    for attempt in range(runs + 1):  # the first run warms the imports and is not counted
        with tempfile.TemporaryDirectory() as root:
            lake = Lake(root)
            planned = {"input": JobInput("seren", "acmetrace", str(path), day).to_dict(), "command": None}
            t0 = time.perf_counter()
            summary = ingest_planned(lake, planned, f"bench-{attempt}")
            elapsed = time.perf_counter() - t0
            rows = summary["rows"]
        if attempt:
            timings.append(elapsed)
    return {"jobs": rows, "median_total_s": statistics.median(timings), "runs_s": timings}


def measure_validation_options(trace: Path, runs: int) -> dict:
    """The suite on the whole canonical frame vs. on the narrow frame of the validated columns."""
    sys.path.insert(0, str(ROOT / "plugins"))
    from acme.jobs.ingest import JobInput, parse_to_table
    from acme.jobs.schema import jobs_from_arrow
    from acme.jobs.validate import validate_job_table, validate_jobs

    parsed = parse_to_table(JobInput("seren", "acmetrace", str(trace)), trace)
    table = parsed.table
    options = {
        "whole frame (Arrow→pandas of every column, then the suite)": lambda: validate_jobs(
            jobs_from_arrow(table), layout=parsed.layout, source_file="bench"
        ),
        "narrow frame (validate_job_table: only the validated columns)": lambda: validate_job_table(
            table, layout=parsed.layout, source_file="bench"
        ),
    }
    results = {}
    for name, call in options.items():
        call()  # warm
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        results[name] = {"median_s": statistics.median(times), "runs_s": times}
    return {"rows": table.num_rows, "options": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--plugins", type=Path, help="also run the CLI of this (older) plugins/ folder")
    parser.add_argument("--validation-options", action="store_true")
    parser.add_argument("--skip-nightly", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "ingest_jobs.json")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "plugins"))
    trace = synthesized_trace(args.jobs)
    trees = {"new": ROOT / "plugins", **({"old": args.plugins.resolve()} if args.plugins else {})}
    side = measure_side_by_side(trace, args.runs, trees)
    report = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "load_avg": os.getloadavg()},
        "trace": {"path": str(trace.relative_to(ROOT)), "bytes": trace.stat().st_size},
        "trees": {name: str(path) for name, path in trees.items()},
        "cli_vs_duckdb": side,
        "targets": {"cli_over_duckdb": 4.0, "cli_peak_rss_mb": 700, "nightly_total_s": 1.0},
    }
    if not args.skip_nightly:
        report["nightly_partition"] = measure_nightly_partition(max(args.runs, 5))
    if args.validation_options:
        report["validation_options"] = measure_validation_options(trace, args.runs)
    report["machine"]["load_avg_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    m = side["median"]
    print(
        f"trace: {trace.stat().st_size / 1e6:.0f} MB, {side['rounds'][0]['cli_new']['rows']} jobs published"
    )
    print(f"duckdb csv→parquet: median {m['duckdb']['wall_s']:.2f} s, CPU {m['duckdb']['cpu_s']:.2f} s, "
          f"{m['duckdb']['peak_rss_mb']:.0f} MB")  # fmt: skip
    for name in trees:
        cli = m[f"cli_{name}"]
        print(f"cli ({name}): median {cli['wall_s']:.2f} s = {cli['ratio_to_duckdb']:.2f}× duckdb, "
              f"CPU {cli['cpu_s']:.2f} s = {cli['cpu_ratio_to_duckdb']:.2f}× duckdb's, "
              f"{cli['peak_rss_mb']:.0f} MB peak (targets 4×, 700 MB)")  # fmt: skip
    print(f"floor (imports only): median {m['floor']['wall_s']:.2f} s, CPU {m['floor']['cpu_s']:.2f} s, "
          f"{m['floor']['peak_rss_mb']:.0f} MB")  # fmt: skip
    if "nightly_partition" in report:
        nightly = report["nightly_partition"]
        print(
            f"nightly partition of {nightly['jobs']} jobs: median {nightly['median_total_s']:.3f} s (target 1 s)"
        )
    for name, result in report.get("validation_options", {}).get("options", {}).items():
        print(f"validation, {name}: median {result['median_s']:.2f} s")
    print(
        f"load average before/after: {report['machine']['load_avg']} / {report['machine']['load_avg_after']}"
    )
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
