"""A whole-Acme telemetry day through ``ingest_metrics`` on the Celery stack (issue 27, item 1).

Input: one synthesized day of all of Acme as one cluster, 4,704 GPUs on 588 nodes (``--nodes``), the 14
metrics ``acme.metrics.synth`` makes (9 per GPU, 5 per node) at 15 s: 260,789,760 samples as AcmeTrace-style
wide CSVs (seed 7; about 1.6 GB), written once, one metric at a time, into ``benchmarks/.data/`` and reused.

For each ``--concurrency`` (Celery worker processes; ``[core] parallelism`` the same) a fresh stack
(``stack/stack.py``: Postgres metadata DB, Redis broker, lake on the loopback S3 server) runs one
manual ``ingest_metrics`` run of the day with ``node_groups`` ``--groups`` (mapped ingests by node group,
then ``merge_node_groups``); with ``--single`` also one run with ``node_groups`` 1 on the same stack
(the single-task peer), after which the stored rollups and histograms of the two runs are compared.

Measured per run: wall time from the REST trigger to the run's end, the per-task timeline, CPU seconds
of each stack service (a task's CPU counts once its supervisor has reaped it), the peak PSS of the
Celery worker (its whole process tree, the task processes included, from ``/proc/<pid>/smaps_rollup``
every 0.5 s) and of the whole stack, bytes per stored sample (sample files
only, from the S3 listing) and the machine's load. The stack is stopped and its database dropped at the
end, also on failure.

Results: benchmarks/results/acme_telemetry_day.json.
Usage: python benchmarks/bench_acme_telemetry_day.py [--nodes 588] [--groups 8] [--concurrency 2 4] [--single]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "plugins"))

from stack.bench import Machine, stack_settings_block  # noqa: E402
from stack.rest import StackApi, timeline  # noqa: E402
from stack.stack import (  # noqa: E402
    StackSettings,
    claim_free_redis_db,
    down,
    lake_client,
    service_pid,
    stack_cpu_seconds,
    stack_memory,
    up,
)

DATA = ROOT / "benchmarks" / ".data"
DAY = date(2023, 7, 1)
CLUSTER = "acme"
DAG_ID = "ingest_metrics"
TARGETS = {"wall_s": 600, "worker_pss_peak_mib": 3072, "bytes_per_sample": 1.5}


def synth_day(nodes: int) -> tuple[Path, dict[str, Any]]:
    """The day's wide CSVs (made once); the synthesis manifest and how long it took."""
    from acme.metrics.synth import write_synth_metrics

    folder = DATA / f"metrics_{CLUSTER}_{nodes}n_{DAY.isoformat()}_seed7"
    stamp = folder / "manifest.json"
    if not stamp.exists():
        started = time.perf_counter()
        manifest = write_synth_metrics(CLUSTER, nodes, DAY, 1, "acmetrace-csv", folder, seed=7)
        manifest["synth_s"] = round(time.perf_counter() - started, 1)
        stamp.write_text(json.dumps(manifest, indent=1))
        print(f"synthesized {folder} in {manifest['synth_s']} s", file=sys.stderr)
    manifest = json.loads(stamp.read_text())
    manifest["input_bytes"] = sum(p.stat().st_size for p in folder.glob("*.csv"))
    return folder, manifest


def process_tree(root: int) -> list[int]:
    """``root`` and every process descended from it (a task process of the Celery worker runs in a
    process group of its own, so the worker's process group alone misses the tasks)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return 0
    return 0


class PssSampler(threading.Thread):
    """Peak PSS of the Celery worker's process tree (its pool, the supervisors and the task processes),
    and of the whole stack (the other services' process groups plus that tree); the load."""

    def __init__(self, settings: StackSettings, period_s: float = 0.5):
        super().__init__(daemon=True)
        self.settings, self.period_s = settings, period_s
        self.worker_peak = self.stack_peak = 0
        self.worker_processes = 0
        self.load: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        worker = service_pid(self.settings, "worker")
        while not self.stop.is_set():
            memory = stack_memory(self.settings)
            members = process_tree(worker) if worker else []
            worker_pss = sum(pss_kib(pid) for pid in members) * 1024
            if worker_pss > self.worker_peak:
                self.worker_peak, self.worker_processes = worker_pss, len(members)
            others = sum(m["pss"] for name, m in memory.items() if name != "worker")
            self.stack_peak = max(self.stack_peak, others + worker_pss)
            self.load.append(os.getloadavg()[0])
            self.stop.wait(self.period_s)

    def report(self) -> dict[str, Any]:
        mib = 2**20
        return {
            "worker_pss_peak_mib": round(self.worker_peak / mib),
            "worker_processes_at_peak": self.worker_processes,
            "stack_pss_peak_mib": round(self.stack_peak / mib),
            "load_average_1m": {
                "mean": round(sum(self.load) / len(self.load), 2) if self.load else None,
                "max": round(max(self.load), 2) if self.load else None,
            },
        }


def stored_sample_files(settings: StackSettings) -> dict[str, Any]:
    """Bytes and rows (Parquet footers) of the day's sample files in the stack's lake."""
    import pyarrow.parquet as pq

    client = lake_client(settings)
    total_bytes = rows = files = 0
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=settings.bucket, Prefix="lake/metrics/"):
        for item in page.get("Contents", []):
            key = item["Key"]
            if f"cluster={CLUSTER}/date={DAY.isoformat()}/" not in key or not key.endswith(".parquet"):
                continue
            size = item["Size"]
            tail = client.get_object(
                Bucket=settings.bucket, Key=key, Range=f"bytes={max(0, size - (1 << 20))}-"
            )
            body = tail["Body"].read()
            if len(body) < size:  # a footer larger than 1 MiB: read the whole object
                body = client.get_object(Bucket=settings.bucket, Key=key)["Body"].read()
            rows += pq.ParquetFile(io.BytesIO(body)).metadata.num_rows
            total_bytes += size
            files += 1
    return {"files": files, "samples": rows, "bytes": total_bytes,
            "bytes_per_sample": round(total_bytes / rows, 3) if rows else None}  # fmt: skip


def rollups(settings: StackSettings) -> dict[str, Any]:
    """The day's stored rollups and histograms, dictionary columns decoded, by key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    client = lake_client(settings)
    tables = {}
    for area in ("metrics_5m", "metrics_hist"):
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=settings.bucket, Prefix=f"lake/{area}/"):
            for item in page.get("Contents", []):
                if f"cluster={CLUSTER}/date={DAY.isoformat()}/" not in item["Key"]:
                    continue
                body = client.get_object(Bucket=settings.bucket, Key=item["Key"])["Body"].read()
                table = pq.read_table(io.BytesIO(body))
                for index, field in enumerate(table.schema):
                    if pa.types.is_dictionary(field.type):
                        table = table.set_column(index, field.name, table[field.name].cast(pa.string()))
                tables[item["Key"]] = table
    return tables


def one_run(settings: StackSettings, api: StackApi, groups: int) -> dict[str, Any]:
    """One manual run of the day with ``groups`` node groups, measured."""
    sampler = PssSampler(settings)
    cpu_before = stack_cpu_seconds(settings)
    load_start = os.getloadavg()[0]
    sampler.start()
    origin = time.time()
    started = time.monotonic()
    run = api.trigger(DAG_ID, {"day": DAY.isoformat(), "cluster": CLUSTER, "node_groups": groups})
    finished = api.wait_run(DAG_ID, run["dag_run_id"], timeout_s=3 * 3600, poll_s=1)
    wall = time.monotonic() - started
    sampler.stop.set()
    sampler.join()
    cpu_after = stack_cpu_seconds(settings)
    tasks = timeline(api, DAG_ID, run["dag_run_id"], origin)
    result = {
        "node_groups": groups,
        "state": finished["state"],
        "wall_s": round(wall, 1),
        "cpu_s": {name: round(cpu_after[name] - cpu_before.get(name, 0), 1) for name in cpu_after},
        "load_average_1m_at_start": round(load_start, 2),
        **sampler.report(),
        "stored": stored_sample_files(settings),
        "tasks": tasks,
    }
    result["cpu_s_stack"] = round(sum(result["cpu_s"].values()), 1)
    print(json.dumps({k: v for k, v in result.items() if k != "tasks"}), file=sys.stderr)
    if finished["state"] != "success":
        raise RuntimeError(f"the run failed: {[t for t in tasks if t['state'] != 'success']}")
    return result


def on_stack(folder: Path, concurrency: int, groups: int, single: bool) -> dict[str, Any]:
    """A fresh stack of ``concurrency`` worker processes: the grouped run (and the single-task peer)."""
    work = Path(tempfile.mkdtemp(prefix="acme-bench-telemetry-"))
    clusters = work / "clusters.yaml"
    clusters.write_text(
        f"clusters:\n  {CLUSTER}:\n"
        f"    jobs: {{format: acmetrace, input: '{work}/jobs/{{ds}}.csv'}}\n"
        f"    metrics: {{format: acmetrace-csv, input: '{folder}', node_groups: {groups}}}\n"
    )
    settings = StackSettings(
        home=work / "stack",
        password="bench-password",
        database=f"acme_stack_h27a_{uuid.uuid4().hex[:8]}",
        redis_db=claim_free_redis_db("bench_acme_telemetry_day"),
        parallelism=concurrency,
        worker_concurrency=concurrency,
        extra_env={
            "ACME_CLUSTERS_FILE": str(clusters),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        },
    )
    try:
        up(settings)
        api = StackApi(settings)
        api.unpause(DAG_ID)
        runs = [one_run(settings, api, groups)]
        block: dict[str, Any] = {"concurrency": concurrency, "stack_settings": stack_settings_block(settings)}
        if single:
            grouped = rollups(settings)
            runs.append(one_run(settings, api, 1))
            alone = rollups(settings)
            block["rollups_identical"] = sorted(grouped) == sorted(alone) and all(
                grouped[k].equals(alone[k]) for k in alone
            )
            block["rollup_files_compared"] = len(alone)
        block["runs"] = runs
        return block
    finally:
        down(settings, purge=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=588)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--single", action="store_true", help="also a node_groups=1 run on the first stack")
    args = parser.parse_args()
    machine = Machine()
    folder, manifest = synth_day(args.nodes)
    stacks = [
        on_stack(folder, c, args.groups, args.single and i == 0) for i, c in enumerate(args.concurrency)
    ]
    result = {
        "what": f"ingest_metrics on the Celery stack: {manifest['gpus']} GPUs on {args.nodes} nodes, "
        f"{len(manifest['metrics'])} metrics, 1 day at 15 s, node_groups {args.groups}",
        "samples": manifest["samples"],
        "input": {"path": str(folder), "bytes": manifest["input_bytes"], "synth_s": manifest.get("synth_s")},
        "stacks": stacks,
        "targets": TARGETS,
        "machine": machine.block(),
    }
    out = ROOT / "benchmarks" / "results" / "acme_telemetry_day.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "stacks"}, indent=2))


if __name__ == "__main__":
    main()
