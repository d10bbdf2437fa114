"""Diagnosis latency per failed job (acme.diagnosis.pipeline.diagnose_job), offline (no LLM).

1. **Model load.** Building the packaged all-MiniLM-L6-v2 embedder in a fresh process (imports of torch and
   sentence-transformers included), measured apart from the per-job figures: a worker pays it once.
2. **Per job.** ``--jobs`` (default 50) synthesized multi-rank training logs of ``--lines`` lines (default
   20,000; 16 ranks) ending in a failure drawn from every reason synth_log supports, plus a few with an
   unknown error, written to a local lake; each job is diagnosed end to end as the DAG's task does it
   (locate the log, stream and compress it, rules + learned rules, retrieval from and update of the
   vector store in the lake). Median and p95 latency, for the model and for the lexical fallback.
3. **Search at scale.** Nearest-neighbour search (brute-force cosine) over ``--cases`` stored cases.

Results go to benchmarks/results/diagnose.json.
Usage: python benchmarks/bench_diagnose.py [--jobs 50] [--lines 20000] [--cases 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
RESULTS = ROOT / "benchmarks" / "results" / "diagnose.json"

UNKNOWN_EXCERPT = [
    "[rank3]: Traceback (most recent call last):",
    '[rank3]:   File "/workspace/train.py", line 88, in <module>',
    "[rank3]: widgetlib.FluxCapacitorFault: flux capacitor drained on device 3",
]


def model_load_seconds() -> float:
    plugins = str(ROOT / "plugins")
    probe = (
        f"import sys, time; sys.path.insert(0, {plugins!r}); t = time.perf_counter();"
        "from acme.diagnosis.retrieval import get_embedder; e = get_embedder('minilm');"
        "assert e.name.startswith('minilm'); print(time.perf_counter() - t)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return round(float(done.stdout.strip().splitlines()[-1]), 2)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def bench_jobs(embedding: str, jobs: int, lines: int) -> dict:
    from acme.diagnosis import retrieval
    from acme.diagnosis.pipeline import diagnose_job
    from acme.diagnosis.synth_log import SUPPORTED_FAILURES, iter_training_log
    from acme.lake import Lake

    os.environ["ACME_DIAGNOSIS_EMBEDDING"] = embedding
    retrieval.get_embedder()  # loaded before timing (see model_load_seconds)
    rng = random.Random(5)
    failures = [rng.choice(SUPPORTED_FAILURES) if i % 10 else None for i in range(jobs)]
    latencies, sources, right = [], {}, 0
    with tempfile.TemporaryDirectory() as tmp:
        lake = Lake(tmp)
        size = 0
        for i, failure in enumerate(failures):
            path = Path(tmp) / "logs" / "cluster=seren" / f"job={i}" / "train.log"
            path.parent.mkdir(parents=True)
            log = iter_training_log(
                lines, seed=i, ranks=16, failure=failure, excerpt=None if failure else UNKNOWN_EXCERPT
            )
            path.write_text("\n".join(log) + "\n")
            size += path.stat().st_size
        for i, failure in enumerate(failures):
            job = {
                "job_id": str(i),
                "job_type": "Pretrain",
                "user": "u1",
                "submit_time": "2023-07-01T00:00:00Z",
            }
            started = time.perf_counter()
            record = diagnose_job(lake, "seren", job, agent=None)
            latencies.append(time.perf_counter() - started)
            sources[record.source] = sources.get(record.source, 0) + 1
            right += record.reason == (failure or "Unknown")
    return {
        "embedding": retrieval.get_embedder().name,
        "jobs": jobs,
        "lines_per_log": lines,
        "mean_log_mb": round(size / jobs / 1e6, 2),
        "median_s": round(statistics.median(latencies), 3),
        "p95_s": round(percentile(latencies, 0.95), 3),
        "max_s": round(max(latencies), 3),
        "sources": sources,
        "reason_right": right,
    }


def bench_search(cases: int) -> dict:
    import numpy as np

    from acme.diagnosis.retrieval import get_embedder

    out = {"cases": cases}
    rng = np.random.default_rng(0)
    for kind in ("minilm", "lexical"):
        embedder = get_embedder(kind)
        stored = rng.random((cases, embedder.dim), dtype=np.float32)
        query = embedder.embed(["RuntimeError: CUDA error: an illegal memory access was encountered"])[0]
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            sims = embedder.similarities(query, stored)
            np.argsort(-sims)[:5]
            timings.append(time.perf_counter() - started)
        out[f"{kind}_search_ms"] = round(1000 * statistics.median(timings), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--cases", type=int, default=20_000)
    args = parser.parse_args()
    results = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "model_load_s": model_load_seconds(),
        "per_job": [bench_jobs(kind, args.jobs, args.lines) for kind in ("minilm", "lexical")],
        "search": bench_search(args.cases),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
