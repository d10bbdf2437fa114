"""Peak memory of each parser as its input grows (issue 8, "Bad input": 10 GB-like streams).

For each parser, a realistic input of each size is generated into a temporary lake, then the
parser's real entry point runs in a fresh interpreter; its peak RSS (``ru_maxrss`` of that child,
from ``os.wait4``) and wall time (start-up and imports included) are recorded:

==============  =========================================================================
parser          entry point (stage ``parse``; ``full`` adds validation and publishing)
==============  =========================================================================
sacct           ``acme.jobs.ingest.parse_staged`` on ``sacct --parsable2`` text (1 in 3
                jobs with ``.batch``/``.extern`` steps)
k8s             ``parse_staged`` on Kubernetes Pods as JSON Lines (one pod per line)
acmetrace       ``parse_staged`` on an AcmeTrace job CSV (Seren layout, DuckDB)
exposition      ``acme.metrics.exposition.read_exposition_files`` on dcgm-exporter scrape
                pages (8 GPUs x 6 metrics per node and scrape); ``full``:
                ``acme.metrics.ingest.ingest_metrics_file``
log             the diagnosis' log reading and compression:
                ``compress_log(read_log_lines(...))`` on a synthesized training log
==============  =========================================================================

The ``full`` stage of the job parsers is ``acme.jobs.ingest.ingest_job_file`` (parse, validate
with great-expectations, publish by day). An input the parser refuses (``InputError``, e.g. above
``ACME_MAX_INPUT_BYTES``) is recorded as refused with its message, not as a failure.

Results go to benchmarks/results/stream_memory.json (merged by parser, stage and size, so runs of
a few parsers at a time add up).
Usage: python benchmarks/bench_stream_memory.py [--sizes-mb 64,256,1024] [--gb 10]
       [--parsers sacct,k8s,acmetrace,exposition,log] [--stage parse|full] [--runs 1] [--label after]
       [--max-input-bytes N] [--plugins DIR]  (a copy of plugins/ to measure, e.g. the code before a change)
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "stream_memory.json"
PARSERS = ("sacct", "k8s", "acmetrace", "exposition", "log")
MB = 1024 * 1024
START = datetime(2023, 7, 1, tzinfo=UTC)


# --- generators: realistic records written until the file reaches the size ---------------------


def _write_until(path: Path, size: int, header: str, block) -> int:
    """Write ``header`` then ``block(i)`` (a text of many records) until ``size`` bytes; returns records."""
    records = 0
    with open(path, "w", encoding="utf-8", newline="") as out:
        written = out.write(header)
        i = 0
        while written < size:
            text, count = block(i)
            written += len(text.encode())
            out.write(text)
            records += count
            i += 1
    return records


def write_sacct(path: Path, size: int) -> int:
    header = (
        "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|"
        "AllocTRES|ReqTRES|ExitCode\n"
    )
    states = ("COMPLETED", "FAILED", "CANCELLED by 1234", "TIMEOUT", "RUNNING", "NODE_FAIL")

    def block(b: int) -> tuple[str, int]:
        lines = []
        for k in range(1000):
            n = b * 1000 + k
            job = 1_000_000 + n
            submit = START + timedelta(seconds=n % 86_400)
            start, end = submit + timedelta(seconds=30), submit + timedelta(seconds=30 + n % 7200)
            fmt = "%Y-%m-%dT%H:%M:%S"
            gpus = (0, 1, 8, 8, 16)[n % 5]
            nodes = max(1, gpus // 8)
            nodelist = f"SH-IDC1-10-140-{n % 250}-{n % 97}"
            tres = (
                f"billing={gpus * 4},cpu={gpus * 4 or 4},gres/gpu={gpus},mem={gpus * 64 or 16}G,node={nodes}"
            )
            state = states[n % len(states)]
            end_text = "Unknown" if state == "RUNNING" else end.strftime(fmt)
            elapsed = f"{(n % 7200) // 3600:02d}:{(n % 3600) // 60:02d}:{n % 60:02d}"
            lines.append(
                f"{job}|train_llm_{n % 5000}_lr3e-4|u{n % 977:04x}|llm{n % 4}|{state}|{submit.strftime(fmt)}|"
                f"{start.strftime(fmt)}|{end_text}|{elapsed}|{nodes}|{gpus * 4 or 4}|{nodelist}|{tres}|{tres}|"
                f"{n % 3}:0\n"
            )
            if n % 3 == 0:  # steps: folded into the job
                for step in ("batch", "extern"):
                    lines.append(
                        f"{job}.{step}|{step}|||{state}|{submit.strftime(fmt)}|{start.strftime(fmt)}|"
                        f"{end_text}|{elapsed}|{nodes}|{gpus * 4 or 4}|{nodelist}|{tres}||{n % 3}:0\n"
                    )
        return "".join(lines), 1000

    return _write_until(path, size, header, block)


_POD = (
    '{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"team-{team}",'
    '"uid":"{uid}","resourceVersion":"{rv}","creationTimestamp":"{created}",'
    '"labels":{{"app":"llm-train","acme.io/user":"u{user}","training.kubeflow.org/replica-type":"worker"}},'
    '"annotations":{{"kubectl.kubernetes.io/last-applied-configuration":"{{}}"}}}},'
    '"spec":{{"nodeName":"node-{node}","restartPolicy":"Never","containers":[{{"name":"trainer",'
    '"image":"registry.example/llm/trainer:2023.07","command":["torchrun","--nproc_per_node=8","train.py"],'
    '"resources":{{"requests":{{"cpu":"32","memory":"512Gi","nvidia.com/gpu":"{gpus}"}},'
    '"limits":{{"cpu":"32","memory":"512Gi","nvidia.com/gpu":"{gpus}"}}}}}}]}},'
    '"status":{{"phase":"{phase}","startTime":"{started}","conditions":[{{"type":"Ready","status":"False",'
    '"lastTransitionTime":"{finished}"}}],"containerStatuses":[{{"name":"trainer","ready":false,'
    '"restartCount":0,"state":{{"terminated":{{"exitCode":{exit},"reason":"{reason}",'
    '"startedAt":"{started}","finishedAt":"{finished}"}}}}}}]}}}}\n'
)


def write_k8s(path: Path, size: int) -> int:
    def block(b: int) -> tuple[str, int]:
        lines = []
        for k in range(1000):
            n = b * 1000 + k
            created = START + timedelta(seconds=n % 86_400)
            started, finished = created + timedelta(seconds=20), created + timedelta(seconds=20 + n % 9000)
            failed = n % 7 == 0
            lines.append(
                _POD.format(
                    name=f"llm-pretrain-{n}-worker-0",
                    team=n % 40,
                    uid=f"{n:08x}-0000-4000-8000-{n:012x}",
                    rv=10_000 + n,
                    created=created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    user=n % 977,
                    node=n % 300,
                    gpus=(1, 8, 8, 4)[n % 4],
                    phase="Failed" if failed else "Succeeded",
                    started=started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    finished=finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    exit=1 if failed else 0,
                    reason="Error" if failed else "Completed",
                )  # fmt: skip
            )
        return "".join(lines), 1000

    return _write_until(path, size, "", block)


def write_acmetrace(path: Path, size: int) -> int:
    header = "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time\n"
    kinds = (("Pretrain", 64), ("SFT", 8), ("Evaluation", 1), ("Debug", 1), ("CPU", 0))

    def block(b: int) -> tuple[str, int]:
        lines = []
        local = timedelta(hours=8)
        fmt = "%Y-%m-%d %H:%M:%S+08:00"
        for k in range(1000):
            n = b * 1000 + k
            kind, gpus = kinds[n % len(kinds)]
            submit = START + local + timedelta(seconds=(n // 100) % 86_000)
            start, end = (
                submit + timedelta(seconds=n % 60),
                submit + timedelta(seconds=n % 60 + 100 + n % 5000),
            )
            duration = int((end - start).total_seconds())
            lines.append(
                f"{6_000_000 + n},u{n % 977:04x},{max(1, gpus // 8)},{gpus},{gpus * 4 or 8},{kind},"
                f"{('COMPLETED', 'FAILED', 'CANCELLED')[n % 3]},{submit.strftime(fmt)},{start.strftime(fmt)},"
                f"{end.strftime(fmt)},{duration},{n % 60},{gpus * duration if gpus else ''}\n"
            )
        return "".join(lines), 1000

    return _write_until(path, size, header, block)


_DCGM = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
    ("DCGM_FI_DEV_FB_USED", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
)


def write_exposition(path: Path, size: int) -> int:
    nodes = 16

    def block(b: int) -> tuple[str, int]:
        moment = START + timedelta(seconds=15 * b)
        parts = [f"# scrape_time {moment.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"]
        for name, kind in _DCGM:
            parts.append(f"# HELP {name} {name} from dcgm-exporter.\n# TYPE {name} {kind}\n")
            for node in range(nodes):
                for gpu in range(8):
                    value = (b * 7 + node * 13 + gpu * 3) % 100
                    if name == "DCGM_FI_PROF_SM_ACTIVE" or name == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":
                        value = round(value / 100, 3)
                    elif name == "DCGM_FI_DEV_FB_USED":
                        value = 1000 + value * 700
                    elif name == "DCGM_FI_DEV_POWER_USAGE":
                        value = 80 + value * 3.1
                    elif name == "DCGM_FI_DEV_GPU_TEMP":
                        value = 30 + value % 50
                    parts.append(
                        f'{name}{{gpu="{gpu}",UUID="GPU-{node:04d}{gpu:04d}-a1b2-c3d4-e5f6-0123456789ab",'
                        f'device="nvidia{gpu}",modelName="NVIDIA A100-SXM4-80GB",Hostname="seren-n{node:03d}",'
                        f'DCGM_FI_DRIVER_VERSION="535.104.05"}} {value}\n'
                    )
        return "".join(parts), len(_DCGM) * nodes * 8

    return _write_until(path, size, "", block)


def write_log(path: Path, size: int) -> int:
    sys.path.insert(0, str(ROOT / "plugins"))
    from acme.diagnosis.synth_log import iter_training_log

    lines = iter_training_log(max(1000, size // 210), failure="ECCError", ranks=64)
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        written = 0
        for line in lines:
            written += out.write(line + "\n")
            count += 1
    return count


GENERATORS = {
    "sacct": (write_sacct, "sacct.txt"),
    "k8s": (write_k8s, "pods.jsonl"),
    "acmetrace": (write_acmetrace, "jobs.csv"),
    "exposition": (write_exposition, "dcgm.prom"),
    "log": (write_log, "train.log"),
}


# --- the child: one entry point on one file -----------------------------------------------------

CHILD = r"""
import json, sys
sys.path.insert(0, {plugins!r})
parser, stage, lake_root, raw_key, path = sys.argv[1:6]
from acme.errors import InputError
try:
    if parser in ("sacct", "k8s", "acmetrace"):
        from acme.jobs.ingest import JobInput, ingest_job_file, parse_staged
        from acme.lake import Lake
        lake = Lake(lake_root)
        cluster = "kalos" if parser == "k8s" else "seren"
        job_input = JobInput(cluster, parser, path)
        if stage == "parse":
            out = parse_staged(lake, job_input, raw_key, "staging/bench")
            out = {{k: out[k] for k in ("rows_in", "parsed", "parse_rejects")}}
        else:
            out = ingest_job_file(lake, job_input, path, max_quarantine_share=1.0)
            out = {{"rows": out["rows"], "quarantined": out["quarantined"], "partitions": len(out["partitions"])}}
    elif parser == "exposition":
        if stage == "parse":
            from acme.metrics.catalog import load_catalog
            from acme.metrics.exposition import read_exposition_files
            result = read_exposition_files([path], load_catalog())[0]
            out = {{"lines": result.lines, "samples": sum(len(s.value) for s in result.samples.values()),
                   "rejects": len(result.rejects)}}
        else:
            from acme.lake import Lake
            from acme.metrics.ingest import ingest_metrics_file
            s = ingest_metrics_file(Lake(lake_root), "exporter-text", "seren", path, "2023-07-01",
                                    min_coverage=0.0, max_quarantine_share=1.0)
            out = {{"samples": s["samples"], "quarantined": s["quarantined"]}}
    else:
        import fsspec
        from acme.diagnosis.compress import compress_log
        from acme.diagnosis.pipeline import read_log_lines
        compressed = compress_log(read_log_lines([(fsspec.filesystem("file"), path)]))
        out = {{k: compressed.stats[k] for k in ("lines_in", "lines_out", "kept_errors")}}
except InputError as exc:
    out = {{"refused": str(exc)}}
print(json.dumps(out))
"""


def run_child(parser: str, stage: str, lake: Path, raw_key: str, path: Path, plugins: Path) -> dict:
    """Run the entry point in a fresh interpreter; its own peak RSS comes from ``os.wait4``."""
    code = CHILD.format(plugins=str(plugins))
    env = dict(os.environ, GX_ANALYTICS_ENABLED="false", ACME_INCLUDE_DIR=str(ROOT / "include"))
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", code, parser, stage, str(lake), raw_key, str(path)],
            stdout=out, stderr=err, env=env,
        )  # fmt: skip
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"{parser} {stage} failed (exit {child.returncode}):\n{err.read()[-3000:]}")
        result = json.loads(out.read().strip().splitlines()[-1])
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "result": result}


def measure(parser: str, size_mb: int, stage: str, runs: int, plugins: Path) -> dict:
    write, name = GENERATORS[parser]
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as tmp:
        lake = Path(tmp) / "lake"
        raw_key = f"raw/bench/{name}"
        path = lake / raw_key
        path.parent.mkdir(parents=True)
        started = time.perf_counter()
        records = write(path, size_mb * MB)
        generated_s = time.perf_counter() - started
        size = path.stat().st_size
        print(f"{parser} {size_mb} MB: {records:,} records generated in {generated_s:.1f} s", file=sys.stderr)
        samples = [run_child(parser, stage, lake, raw_key, path, plugins) for _ in range(runs)]
    entry = {
        "parser": parser,
        "stage": stage,
        "size_mb": size_mb,
        "bytes": size,
        "records": records,
        "runs": samples,
        "median_peak_rss_mb": statistics.median(s["peak_rss_mb"] for s in samples),
        "median_wall_s": statistics.median(s["wall_s"] for s in samples),
        "result": samples[-1]["result"],
    }
    print(json.dumps({k: entry[k] for k in ("parser", "stage", "size_mb", "median_peak_rss_mb",
                                            "median_wall_s", "result")}), flush=True)  # fmt: skip
    return entry


def save(label: str, key: str, entry: dict) -> None:
    """Add one result to the results file (read again under a lock: several runs may add at once)."""
    import fcntl

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(Path(tempfile.gettempdir()) / "bench_stream_memory.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        document = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        document.setdefault(label, {})[key] = entry
        RESULTS.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes-mb", default="64,256,1024", help="input sizes in MiB, comma-separated")
    parser.add_argument("--gb", type=float, default=None, help="also run this many GiB (e.g. 10)")
    parser.add_argument("--parsers", default=",".join(PARSERS))
    parser.add_argument("--stage", choices=("parse", "full"), default="parse")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--label", default="current", help="name of this set of results (e.g. before, after)")
    parser.add_argument("--max-input-bytes", type=int, help="ACME_MAX_INPUT_BYTES for the children")
    parser.add_argument(
        "--plugins", type=Path, default=ROOT / "plugins", help="code to measure (a copy of plugins/)"
    )
    args = parser.parse_args()
    if args.max_input_bytes:
        os.environ["ACME_MAX_INPUT_BYTES"] = str(args.max_input_bytes)
    sizes = [int(s) for s in args.sizes_mb.split(",") if s]
    if args.gb:
        sizes.append(int(args.gb * 1024))
    chosen = [p for p in args.parsers.split(",") if p]
    unknown = set(chosen) - set(PARSERS)
    if unknown:
        raise SystemExit(f"unknown parser(s): {', '.join(sorted(unknown))}; known: {', '.join(PARSERS)}")
    for name in chosen:
        for size in sizes:
            entry = measure(name, size, args.stage, args.runs, args.plugins)
            entry["date"] = datetime.now(UTC).strftime("%Y-%m-%d")
            entry["max_input_bytes"] = os.environ.get("ACME_MAX_INPUT_BYTES", "default")
            save(args.label, f"{name}/{args.stage}/{size}", entry)
    print(f"results: {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
