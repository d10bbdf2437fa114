"""Job-trace ingest benchmarks (issue: foundation).

1. The command line ingesting and validating a synthesized Seren-scale trace of 1,000,000 jobs
   (~125 MB CSV) into a fresh lake: wall time (interpreter start included) and peak RSS of the
   process. Target: <= 8 s and <= 1 GB on a 2-core machine.
2. One nightly partition of 5,000 jobs through the DAG's task functions (parse, validate,
   publish) in a warm process: task compute. Target: <= 1 s.

Each is run several times; the median is reported. Results go to benchmarks/results/ingest_jobs.json.
Usage: python benchmarks/bench_ingest_jobs.py [--runs 3] [--jobs 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
DATA = ROOT / "benchmarks" / ".data"
SEREN_JOBS_PER_DAY = 818_327 / 184  # the released Seren trace, March to August 2023


def synthesized_trace(jobs: int) -> Path:
    """A Seren-layout trace of about ``jobs`` jobs over 184 days (made once, then reused)."""
    from acme.synth.trace import write_synth_trace

    days = 184
    scale = jobs / (SEREN_JOBS_PER_DAY * days)
    path = DATA / f"seren_{jobs}.csv"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        write_synth_trace("seren", date(2023, 3, 1), days, path, scale=scale, seed=7)
    return path


def measure_cli(trace: Path, runs: int) -> dict:
    results = []
    for _ in range(runs):
        # Popen.communicate reaps the child, so take its peak RSS from a wrapper process instead.
        wrapper = (
            "import resource, subprocess, sys, time, json;"
            "t=time.perf_counter();"
            "p=subprocess.run(sys.argv[1:], capture_output=True);"
            "w=time.perf_counter()-t;"
            "r=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
            "print(json.dumps({'rc':p.returncode,'wall_s':w,'peak_rss_mb':r/1024,"
            "'out':p.stdout.decode(),'err':p.stderr.decode()[-2000:]}))"
        )
        with tempfile.TemporaryDirectory() as lake:
            command = [sys.executable, "-c", wrapper, sys.executable, "-m", "acme", "ingest-jobs",
                       "--format", "acmetrace", "--cluster", "seren", "--input", str(trace), "--lake", lake]  # fmt: skip
            env = dict(os.environ, PYTHONPATH=str(ROOT / "plugins"))
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
            result = json.loads(done.stdout)
            if result["rc"] != 0:
                raise SystemExit(f"ingest failed: {result['err']}")
            summary = json.loads(result["out"])
            results.append({"wall_s": result["wall_s"], "peak_rss_mb": result["peak_rss_mb"],
                            "rows": summary["rows"], "quarantined": summary["quarantined"],
                            "partitions": len(summary["partitions"])})  # fmt: skip
    return {
        "runs": results,
        "median_wall_s": statistics.median(r["wall_s"] for r in results),
        "median_peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in results),
    }


def measure_nightly_partition(runs: int, jobs: int = 5000) -> dict:
    """Task compute of parse + validate + publish for one day of ~5,000 jobs, in a warm process."""
    from acme.ingest_jobs import JobInput, parse_staged, publish_staged, validate_staged
    from acme.lake import Lake
    from acme.synth.trace import write_synth_trace

    day = date(2023, 7, 1)
    path = DATA / f"seren_day_{jobs}.csv"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        write_synth_trace("seren", day, 1, path, scale=jobs / SEREN_JOBS_PER_DAY, seed=11)
    timings = {"parse_s": [], "validate_s": [], "publish_s": [], "total_s": []}
    rows = 0
    for attempt in range(runs + 1):  # the first run warms the imports and is not counted
        with tempfile.TemporaryDirectory() as root:
            lake = Lake(root)
            job_input = JobInput("seren", "acmetrace", str(path), day)
            raw = "raw/input.csv"
            lake.upload_file(str(path), raw)
            t0 = time.perf_counter()
            parsed = parse_staged(lake, job_input, raw, "staging/x")
            t1 = time.perf_counter()
            validate_staged(lake, job_input, "staging/x", parsed)
            t2 = time.perf_counter()
            publish_staged(lake, job_input, "staging/x")
            t3 = time.perf_counter()
            rows = parsed["parsed"]
        if attempt:
            for key, value in zip(timings, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True):
                timings[key].append(value)
    return {"jobs": rows, **{f"median_{k}": statistics.median(v) for k, v in timings.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    args = parser.parse_args()
    trace = synthesized_trace(args.jobs)
    cli = measure_cli(trace, args.runs)
    nightly = measure_nightly_partition(max(args.runs, 5))
    report = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "trace": {"path": str(trace.relative_to(ROOT)), "bytes": trace.stat().st_size},
        "cli_ingest": cli,
        "nightly_partition": nightly,
        "targets": {"cli_wall_s": 8.0, "cli_peak_rss_mb": 1024, "nightly_total_s": 1.0},
    }
    out = ROOT / "benchmarks" / "results" / "ingest_jobs.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"trace: {trace.stat().st_size / 1e6:.0f} MB, {cli['runs'][0]['rows']} jobs published")
    print(f"cli ingest: median {cli['median_wall_s']:.2f} s wall, {cli['median_peak_rss_mb']:.0f} MB peak RSS "
          f"(targets 8 s, 1024 MB)")  # fmt: skip
    print(f"nightly partition of {nightly['jobs']} jobs: median {nightly['median_total_s']:.3f} s "
          f"(parse {nightly['median_parse_s']:.3f}, validate {nightly['median_validate_s']:.3f}, "
          f"publish {nightly['median_publish_s']:.3f}; target 1 s)")  # fmt: skip
    print(f"written: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
