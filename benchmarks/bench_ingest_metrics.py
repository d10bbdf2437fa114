"""Monitoring ingest benchmark (issue: nightly monitoring ingest).

One day of one Seren-size cluster from the AcmeTrace-style wide CSVs: 2,288 GPUs (286 nodes × 8)
× 6 GPU metrics (gpu_util, sm_active, tensor_active, fb_used, gpu_power, gpu_temp) at 15 s,
79,073,280 samples, ingested, validated and rolled up into a fresh lake by
``acme.metrics.ingest.ingest_metrics_file`` in a new interpreter (wall time includes start-up and
imports; peak RSS is the child's ``ru_maxrss``; CPU time, user + system, is reported too since
on a shared machine it moves far less with the load than wall time). Target: <= 60 s and
<= 3 GB; bytes per stored sample reported (target <= 3).

The six CSVs (synthesized with seed 7 by ``acme.metrics.synth``, ~400 MB) are made once and kept
in ``benchmarks/.data/``. A second figure, in-process: bytes per sample of the same gpu_power day
with i.i.d. jitter (σ = 5 W) added to every sample, a pessimistic stand-in for noisier real data.

Results go to benchmarks/results/ingest_metrics.json.
Usage: python benchmarks/bench_ingest_metrics.py [--runs 3] [--nodes 286]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from child_process import measured_child

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
DATA = ROOT / "benchmarks" / ".data"
METRICS = ["gpu_util", "sm_active", "tensor_active", "fb_used", "gpu_power", "gpu_temp"]
DAY = date(2023, 7, 1)


def wide_csvs(nodes: int) -> Path:
    from acme.metrics.synth import write_synth_metrics

    folder = DATA / f"metrics_seren_{nodes}n_{DAY.isoformat()}"
    if not all((folder / f"{m}.csv").exists() for m in METRICS):
        started = time.perf_counter()
        write_synth_metrics("seren", nodes, DAY, 1, "acmetrace-csv", folder, seed=7, metrics=METRICS)
        print(f"synthesized {folder} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return folder


def measure(folder: Path, runs: int) -> list[dict]:
    results = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as lake:
            child = (
                "import sys, json; sys.path.insert(0, {!r});"
                "from acme.lake import Lake; from acme.metrics.ingest import ingest_metrics_file;"
                "s = ingest_metrics_file(Lake({!r}), 'acmetrace-csv', 'seren', {!r}, {!r});"
                "print(json.dumps({{k: s[k] for k in ('samples', 'series', 'quarantined', 'bytes', 'bytes_per_sample', 'per_metric')}}))"
            ).format(str(ROOT / "plugins"), lake, str(folder), DAY.isoformat())
            run = measured_child([sys.executable, "-c", child])
            run["summary"] = json.loads(run.pop("out"))
            results.append(run)
            print(
                f"run: {run['wall_s']:.1f} s ({run['cpu_s']:.1f} s CPU), {run['peak_rss_mb']:.0f} MiB",
                file=sys.stderr,
            )
    return results


def noisy_bytes_per_sample(folder: Path) -> float:
    import numpy as np

    from acme.metrics.acmetrace_csv import parse_wide_csv
    from acme.metrics.catalog import load_catalog
    from acme.metrics.storage import encode_parquet, samples_table

    spec = load_catalog()["gpu_power"]
    samples = parse_wide_csv(folder / "gpu_power.csv", spec).samples
    rng = np.random.default_rng(0)
    samples.value = np.clip(spec.quantize(samples.value + rng.normal(0, 5, len(samples))), 0, 1000)
    return round(len(encode_parquet(samples_table(samples, spec), spec)) / len(samples), 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=286)
    args = parser.parse_args()
    folder = wide_csvs(args.nodes)
    runs = measure(folder, args.runs)
    summary = runs[0]["summary"]
    result = {
        "what": f"ingest-metrics acmetrace-csv, {args.nodes * 8} GPUs x {len(METRICS)} metrics x 1 day at 15 s",
        "samples": summary["samples"],
        "runs": args.runs,
        "wall_s_median": round(statistics.median(r["wall_s"] for r in runs), 2),
        "wall_s_all": [round(r["wall_s"], 2) for r in runs],
        "cpu_s_median": round(statistics.median(r["cpu_s"] for r in runs), 2),  # less sensitive to load
        "cpu_s_all": [round(r["cpu_s"], 2) for r in runs],
        "peak_rss_mb_median": round(statistics.median(r["peak_rss_mb"] for r in runs)),
        "peak_rss_mb_all": [round(r["peak_rss_mb"]) for r in runs],
        "bytes_per_sample": summary["bytes_per_sample"],
        "stored_mb": round(summary["bytes"] / 2**20, 1),
        "per_metric_bytes_per_sample": {m: v["bytes_per_sample"] for m, v in summary["per_metric"].items()},
        "gpu_power_with_5w_jitter_bytes_per_sample": noisy_bytes_per_sample(folder),
        "targets": {"wall_s": 60, "peak_rss_mb": 3072, "bytes_per_sample": 3},
    }
    out = ROOT / "benchmarks" / "results" / "ingest_metrics.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    missed = (
        result["wall_s_median"] > 60 or result["peak_rss_mb_median"] > 3072 or result["bytes_per_sample"] > 3
    )
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
