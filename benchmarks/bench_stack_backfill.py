"""Backfill benchmark on the local production stack (``stack/stack.py``; issues 7 and 8).

A synthesized Kalos- or Seren-scale trace (``acme.jobs.synth``, the release's daily volume at
``--scale 1``, seed 7, one AcmeTrace CSV per UTC day, made once and kept in ``benchmarks/.data/``)
is configured as the only cluster (a clusters file passed as ``ACME_CLUSTERS_FILE``). A fresh stack — Celery
worker over Redis, Postgres metadata DB, lake on the loopback S3 server — runs
``airflow backfill create`` over the 30 days. Measured: wall time from the backfill's creation to
the end of its last run, runs per minute, and the memory of the whole stack (the RSS of every
process of its process groups, summed, sampled every 0.5 s): its peak, and its peak in the first
and in the last quarter of the backfill (bounded memory: the last is not above the first by much). Afterwards every day's partition is
read back from S3 and compared with its input (each job exactly once).

Parallelism is stated in the results: ``[core] parallelism``, Celery worker concurrency, the
backfill's ``--max-active-runs``. The stack is stopped and its database dropped at the end, also on
failure.

Results go to benchmarks/results/stack_backfill.json (30 Kalos days, the default) or
stack_backfill_<cluster>_<days>d.json.
Usage: python benchmarks/bench_stack_backfill.py [--cluster kalos|seren] [--days 30] [--max-active-runs 4]
       [--concurrency 2]      (the six-month run: --cluster seren --days 184)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from datetime import date, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "plugins"))

from stack.stack import StackSettings, down, lake_client, stack_env, stack_rss_bytes, up  # noqa: E402

DATA = ROOT / "benchmarks" / ".data"
START = date(2023, 7, 1)
SEED = 7
AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def synth_trace(cluster: str, days: int, scale: float) -> Path:
    folder = DATA / f"{cluster}_{START.isoformat()}_{days}d_x{scale:g}_seed{SEED}"
    if not (folder / f"{(START + timedelta(days=days - 1)).isoformat()}.csv").exists():
        from acme.jobs.synth import write_synth_trace

        write_synth_trace(cluster, START, days, folder, scale=scale, seed=SEED, per_day=True)
    return folder


def free_redis_db() -> int:
    import redis

    for number in range(15, 7, -1):
        if redis.Redis(host="127.0.0.1", port=6379, db=number).dbsize() == 0:
            return number
    raise SystemExit("no empty Redis DB between 8 and 15")


class Api:
    def __init__(self, settings: StackSettings):
        self.base = stack_env(settings)["AIRFLOW__API__BASE_URL"]
        body = self.call("POST", "/auth/token", {"username": "admin", "password": settings.password})
        self.token = body["access_token"]

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        headers = {"Content-Type": "application/json"}
        if getattr(self, "token", None):
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read() or b"{}")


class RssSampler(threading.Thread):
    """Peak of the stack's summed RSS, sampled every ``period_s``."""

    def __init__(self, settings: StackSettings, period_s: float = 0.5):
        super().__init__(daemon=True)
        self.settings, self.period_s = settings, period_s
        self.rss: list[tuple[float, int]] = []  # (monotonic time, bytes)
        self.load: list[float] = []  # 1-minute load average: the machine is shared and noisy
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.rss.append((time.monotonic(), stack_rss_bytes(self.settings)))
            self.load.append(os.getloadavg()[0])
            self.stop.wait(self.period_s)

    @property
    def peak(self) -> int:
        return max(rss for _, rss in self.rss)

    def peak_between(self, start: float, end: float) -> int:
        return max((rss for at, rss in self.rss if start <= at <= end), default=0)


def backfill_runs(api: Api) -> list[dict]:
    """Every backfill run of the job DAG (the API pages at 100)."""
    runs: list[dict] = []
    while True:
        page = api.call(
            "GET", f"/api/v2/dags/ingest_job_traces/dagRuns?run_type=backfill&limit=100&offset={len(runs)}"
        )["dag_runs"]
        runs += page
        if len(page) < 100:
            return runs


def task_timings(api: Api, runs: list[dict]) -> dict[str, dict[str, float]]:
    """Per task id, over every run: the median time a task instance ran (start → end, which includes
    its process start and imports) and waited (queued → start: scheduling and a free worker slot)."""
    import statistics

    ran: dict[str, list[float]] = {}
    waited: dict[str, list[float]] = {}
    for run in runs:
        path = f"/api/v2/dags/ingest_job_traces/dagRuns/{urllib.parse.quote(run['dag_run_id'])}/taskInstances"
        for ti in api.call("GET", path)["task_instances"]:
            if ti.get("start_date") and ti.get("end_date"):
                start = datetime.fromisoformat(ti["start_date"])
                ran.setdefault(ti["task_id"], []).append(
                    (datetime.fromisoformat(ti["end_date"]) - start).total_seconds()
                )
                if ti.get("queued_when"):
                    queued = datetime.fromisoformat(ti["queued_when"])
                    waited.setdefault(ti["task_id"], []).append((start - queued).total_seconds())
    return {
        task: {
            "instances": len(times),
            "ran_median_s": round(statistics.median(times), 2),
            "waited_median_s": round(statistics.median(waited.get(task, [0.0])), 2),
        }
        for task, times in ran.items()
    }


def count_published(settings: StackSettings, cluster: str, day: str) -> tuple[int, int]:
    import pyarrow.parquet as pq

    client = lake_client(settings)
    key = f"lake/jobs/cluster={cluster}/date={day}/jobs.parquet"
    ids = pq.read_table(io.BytesIO(client.get_object(Bucket=settings.bucket, Key=key)["Body"].read()))
    ids = ids["job_id"].to_pylist()
    return len(ids), len(set(ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", choices=("kalos", "seren"), default="kalos")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--max-active-runs", type=int, default=4)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=2, help="Celery worker concurrency")
    args = parser.parse_args()

    trace = synth_trace(args.cluster, args.days, args.scale)
    days = [(START + timedelta(days=i)).isoformat() for i in range(args.days)]
    input_rows = {d: len((trace / f"{d}.csv").read_text().splitlines()) - 1 for d in days}
    work = Path(tempfile.mkdtemp(prefix="acme-bench-stack-"))
    clusters = work / "clusters.yaml"
    clusters.write_text(
        f'clusters:\n  {args.cluster}:\n    jobs:\n      format: acmetrace\n      input: "{trace}/{{ds}}.csv"\n'
    )
    timeout_s = max(3600, 60 * len(days))
    settings = StackSettings(
        home=work / "stack",
        password="bench-password",
        database=f"acme_stack_bench_{uuid.uuid4().hex[:8]}",
        redis_db=free_redis_db(),
        parallelism=args.parallelism,
        worker_concurrency=args.concurrency,
        max_active_runs=args.max_active_runs,
        extra_env={
            "ACME_CLUSTERS_FILE": str(clusters),
            # Only the backfill's runs: other DAGs stay paused and the scheduler creates no
            # scheduled (cron or Asset) runs of its own.
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        },
    )
    try:
        started = time.monotonic()
        up(settings)
        startup_s = time.monotonic() - started
        api = Api(settings)
        deadline = time.monotonic() + 300
        while True:
            try:
                api.call("PATCH", "/api/v2/dags/ingest_job_traces", {"is_paused": False})
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)
        idle_rss = stack_rss_bytes(settings)
        sampler = RssSampler(settings)
        sampler.start()
        began = time.monotonic()
        created = subprocess.run(
            [AIRFLOW, "backfill", "create", "--dag-id", "ingest_job_traces", "--from-date", days[0],
             "--to-date", days[-1], "--max-active-runs", str(args.max_active_runs)],
            env={**os.environ, **stack_env(settings)}, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if created.returncode != 0:
            raise SystemExit(f"backfill create failed: {created.stderr[-2000:]}")
        most_running = 0
        quarter_done: dict[int, float] = {}  # 1..4 -> when a quarter of the runs had finished
        while True:
            runs = backfill_runs(api)
            most_running = max(most_running, sum(r["state"] == "running" for r in runs))
            finished = sum(r["state"] in ("success", "failed") for r in runs)
            for quarter in range(1, 5):
                if finished >= quarter * len(days) / 4:
                    quarter_done.setdefault(quarter, time.monotonic())
            if len(runs) == len(days) and finished == len(days):
                break
            if time.monotonic() - began > timeout_s:
                raise SystemExit(f"the backfill did not finish within {timeout_s} s")
            time.sleep(2)
        wall_s = time.monotonic() - began
        sampler.stop.set()
        sampler.join()
        states = sorted({r["state"] for r in runs})
        published = {d: count_published(settings, args.cluster, d) for d in days}
        exact = all(published[d] == (input_rows[d], input_rows[d]) for d in days)
        durations = sorted(
            (datetime.fromisoformat(r["end_date"]) - datetime.fromisoformat(r["start_date"])).total_seconds()
            for r in runs
        )
        result = {
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "trace": {
                "cluster": args.cluster,
                "days": args.days,
                "scale": args.scale,
                "seed": SEED,
                "jobs": sum(input_rows.values()),
                "jobs_per_day_median": sorted(input_rows.values())[len(days) // 2],
            },
            "parallelism": {
                "executor": "CeleryExecutor (1 worker)",
                "core_parallelism": args.parallelism,
                "worker_concurrency": args.concurrency,
                "backfill_max_active_runs": args.max_active_runs,
                "most_runs_seen_running": most_running,
            },
            "stack_startup_s": round(startup_s, 1),
            "backfill_wall_s": round(wall_s, 1),
            "runs": len(runs),
            "run_states": states,
            "runs_per_minute": round(len(runs) / (wall_s / 60), 2),
            "run_duration_s": {"median": durations[len(durations) // 2], "max": durations[-1]},
            "stack_rss_idle_mib": round(idle_rss / 2**20),
            "stack_rss_peak_mib": round(sampler.peak / 2**20),
            "stack_rss_peak_first_quarter_mib": round(sampler.peak_between(began, quarter_done[1]) / 2**20),
            "stack_rss_peak_last_quarter_mib": round(
                sampler.peak_between(quarter_done[3], quarter_done[4]) / 2**20
            ),
            "rss_samples": len(sampler.rss),
            "load_average_1m": {
                "mean": round(sum(sampler.load) / len(sampler.load), 2),
                "max": max(sampler.load),
            },
            "every_job_published_exactly_once": exact,
            "tasks": task_timings(api, runs),
        }
        print(json.dumps(result, indent=1))
        name = (
            "stack_backfill"
            if (args.cluster, args.days) == ("kalos", 30)
            else f"stack_backfill_{args.cluster}_{args.days}d"
        )
        out = ROOT / "benchmarks" / "results" / f"{name}.json"
        out.write_text(json.dumps(result, indent=1) + "\n")
        if states != ["success"] or not exact:
            raise SystemExit("the backfill did not publish every day exactly once")
    finally:
        down(settings, purge=True)


if __name__ == "__main__":
    main()
