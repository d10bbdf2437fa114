"""Backfill benchmark on the local production stack (``stack/stack.py``; issues 7 and 8).

A synthesized Kalos- or Seren-scale trace (``acme.jobs.synth``, the release's daily volume at
``--scale 1``, seed 7, one AcmeTrace CSV per UTC day, made once and kept in ``benchmarks/.data/``)
is configured as the only cluster (a clusters file passed as ``ACME_CLUSTERS_FILE``). A fresh stack — Celery
worker over Redis, Postgres metadata DB, lake on the loopback S3 server — runs
``airflow backfill create`` over the 30 days. Measured: wall time from the backfill's creation to
the end of its last run, runs per minute, and the memory of the whole stack (the RSS of every
process of its process groups, summed, sampled every 0.5 s): its peak, and its peak in the first
and in the last quarter of the backfill (bounded memory: the last is not above the first by much), the
CPU time each service of the stack (and the Postgres backends of its database) used during the
backfill, and where a run's time goes (``run_breakdown``: scheduler hand-over, queued, running, per
task). Afterwards every day's partition is read back from S3 and compared with its input (each job
exactly once).

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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "plugins"))

from stack.stack import (  # noqa: E402
    StackSettings,
    claim_free_redis_db,
    down,
    lake_client,
    stack_cpu_seconds,
    stack_env,
    stack_memory,
    stack_rss_bytes,
    up,
)

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


def _seconds(later: str | None, earlier: str | None) -> float | None:
    if not later or not earlier:
        return None
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


def _median(values: list[float]) -> float | None:
    import statistics

    return round(statistics.median(values), 2) if values else None


def run_breakdown(api: Api, runs: list[dict], wall_s: float, slots: int) -> dict[str, Any]:
    """Where a run's time goes, as medians over the runs, per task in the order the tasks ran:
    ``handed_over_s`` from the run's start or the previous task's end to this task being queued
    (the scheduler's turn), ``waited_s`` queued → started (the broker, a free worker slot, the fork
    of the task process), ``ran_s`` started → ended (the task process: its DAG parse, imports, work
    and calls to the API); then ``after_last_task_s``, the last task's end → the run's end. The
    worker slots' busy share is the tasks' summed run time over wall time × slots."""
    per_task: dict[str, dict[str, list[float]]] = {}
    after_last: list[float] = []
    busy = 0.0
    for run in runs:
        path = f"/api/v2/dags/ingest_job_traces/dagRuns/{urllib.parse.quote(run['dag_run_id'])}/taskInstances"
        instances = [t for t in api.call("GET", path)["task_instances"] if t.get("queued_when")]
        instances.sort(key=lambda t: t["queued_when"])
        previous_end = run["start_date"]
        for ti in instances:
            timings = per_task.setdefault(ti["task_id"], {"handed_over_s": [], "waited_s": [], "ran_s": []})
            for name, value in (
                ("handed_over_s", _seconds(ti["queued_when"], previous_end)),
                ("waited_s", _seconds(ti["start_date"], ti["queued_when"])),
                ("ran_s", _seconds(ti["end_date"], ti["start_date"])),
            ):
                if value is not None:
                    timings[name].append(value)
            busy += _seconds(ti["end_date"], ti["start_date"]) or 0.0
            previous_end = ti["end_date"] or previous_end
        last = _seconds(run["end_date"], previous_end)
        if last is not None:
            after_last.append(last)
    return {
        "tasks_median": {
            task: {"instances": len(t["ran_s"])} | {name: _median(values) for name, values in t.items()}
            for task, t in per_task.items()
        },
        "after_last_task_median_s": _median(after_last),
        "worker_slots_busy_share": round(busy / (wall_s * slots), 3),
    }


CONSUMERS = ("diagnose_failures", "characterize")  # scheduled on the job Asset, and on the diagnoses


def consumer_runs(api: Api) -> dict[str, list[dict]]:
    """The runs of the Asset-triggered consumer DAGs (the API pages at 100; a few here)."""
    return {
        dag_id: api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]
        for dag_id in CONSUMERS
    }


def consumer_summary(api: Api, runs: dict[str, list[dict]]) -> dict[str, Any]:
    """Per consumer DAG: its runs, their states, and how many Asset events they consumed in all (Airflow
    folds the events queued since a consumer's last run into its next run)."""
    summary = {}
    for dag_id, dag_runs in runs.items():
        events = 0
        for run in dag_runs:
            path = (
                f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run['dag_run_id'])}/upstreamAssetEvents"
            )
            events += len(api.call("GET", path)["asset_events"])
        summary[dag_id] = {
            "runs": len(dag_runs),
            "states": sorted(r["state"] for r in dag_runs),
            "asset_events_consumed": events,
            "run_duration_median_s": _median(
                [d for r in dag_runs if (d := _seconds(r["end_date"], r["start_date"])) is not None]
            ),
        }
    return summary


def postgres_backend_cpu_s(database: str) -> float:
    """CPU seconds (user + system) of the live Postgres backends connected to ``database`` (the
    stack's metadata DB): the stack's processes keep their connections pooled, so the difference of
    two readings is close to what the DB did for the stack in between."""
    ticks = os.sysconf("SC_CLK_TCK")
    used = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if command.startswith("postgres: ") and f" {database} " in command:
            used += sum(int(v) for v in stat[stat.rindex(")") + 2 :].split()[11:13]) / ticks
    return used


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
    parser.add_argument(
        "--consumers",
        action="store_true",
        help=f"also unpause the Asset-triggered consumers ({', '.join(CONSUMERS)}) and wait for their runs",
    )
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
        redis_db=claim_free_redis_db("bench_stack_backfill"),
        parallelism=args.parallelism,
        worker_concurrency=args.concurrency,
        max_active_runs=args.max_active_runs,
        extra_env={
            "ACME_CLUSTERS_FILE": str(clusters),
            # Only the backfill's runs: other DAGs stay paused and the scheduler creates no
            # scheduled (cron or Asset) runs of its own. With --consumers it creates both (Airflow
            # has one switch for them): the job DAG's own run for yesterday is made too, and waits
            # for input that the synthesized trace does not have (its retries are not counted).
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": str(args.consumers),
        },
    )
    try:
        started = time.monotonic()
        up(settings)
        startup_s = time.monotonic() - started
        api = Api(settings)
        deadline = time.monotonic() + 300
        unpaused = ["ingest_job_traces", *(CONSUMERS if args.consumers else ())]
        while True:
            try:
                for dag_id in unpaused:
                    api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)
        idle_rss = stack_rss_bytes(settings)
        sampler = RssSampler(settings)
        sampler.start()
        cpu_before = stack_cpu_seconds(settings)
        postgres_before = postgres_backend_cpu_s(settings.database)
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
        consumers: dict[str, Any] = {}
        if args.consumers:
            # Done when no consumer run is queued or running and none was created in the last 30 s (the
            # scheduler creates a run for events queued since the previous one on a later pass).
            quiet_since, seen = time.monotonic(), -1
            while time.monotonic() - quiet_since < 30:
                runs_now = [r for rs in consumer_runs(api).values() for r in rs]
                if len(runs_now) != seen or any(r["state"] in ("queued", "running") for r in runs_now):
                    quiet_since, seen = time.monotonic(), len(runs_now)
                if time.monotonic() - began > timeout_s:
                    raise SystemExit(f"the consumers' runs did not finish within {timeout_s} s")
                time.sleep(2)
            consumers = consumer_summary(api, consumer_runs(api))
            consumers["wall_s_until_their_last_run_ended"] = round(time.monotonic() - began, 1)
        cpu_after = stack_cpu_seconds(settings)
        postgres_cpu_s = postgres_backend_cpu_s(settings.database) - postgres_before
        pss_end = {name: round(m["pss"] / 2**20) for name, m in stack_memory(settings).items()}
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
            "stack_pss_at_end_mib": pss_end,
            "cpu_s_during_backfill": {
                name: round(cpu_after[name] - cpu_before[name], 1) for name in cpu_after
            }
            | {"postgres_backends": round(postgres_cpu_s, 1)},
            "consumers": consumers or "paused",
            "every_job_published_exactly_once": exact,
            "run_breakdown": run_breakdown(api, runs, wall_s, args.concurrency),
        }
        print(json.dumps(result, indent=1))
        name = (
            "stack_backfill"
            if (args.cluster, args.days) == ("kalos", 30)
            else f"stack_backfill_{args.cluster}_{args.days}d"
        ) + ("_with_consumers" if args.consumers else "")
        out = ROOT / "benchmarks" / "results" / f"{name}.json"
        out.write_text(json.dumps(result, indent=1) + "\n")
        if states != ["success"] or not exact:
            raise SystemExit("the backfill did not publish every day exactly once")
    finally:
        down(settings, purge=True)


if __name__ == "__main__":
    main()
