"""Crash to restart on the production stack (``stack/stack.py``: Celery worker over Redis, Postgres, the lake on
the loopback S3 server), issue 20.

An 8-node Pretrain job (ingested from ``sacct`` text, so the lake knows its type and node list) crashed with
an uncorrectable ECC error on one node; its 20,000-line, 8-rank log is in the lake where
``ACME_DIAGNOSIS_LOG_PATTERN`` finds it, its checkpoints where the default ``ACME_CHECKPOINT_URI_PATTERN``
points, and the simulated cluster (``ACME_RECOVERY_SIMULATED_JOBS``) knows the job with that node faulty.
Every other setting is the default (the MiniLM embedding, the simulated backend), except
``ACME_RECOVERY_DRY_RUN=false`` (``--dry-run`` keeps the default, a dry run).

Measured per repetition (a fresh job each time, after one untimed warm-up): from the REST call that triggers
``diagnose_failures`` to the ``restart`` record in the job's action log (its ``ended_at``), and the
timeline of every task of both runs (queued, started, ended). The end-to-end time splits into time inside
a task (process start-up and our work: the union of the tasks' running intervals) and time between tasks
(Airflow: scheduling, queueing on the Celery worker, the hand-over from the diagnosis to the recovery).
The recovery steps' own seconds come from the action log.

Results: benchmarks/results/crash_to_restart.json.
Usage: python benchmarks/bench_crash_to_restart.py [--repeat 3] [--dry-run] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "plugins"))

from stack.bench import Machine, env_overrides, stack_settings_block  # noqa: E402
from stack.rest import StackApi, timeline  # noqa: E402
from stack.stack import StackSettings, claim_free_redis_db, down, lake_client, stack_env, up  # noqa: E402

DAY = "2024-03-10"
FAULTY_RANK = 4  # gpu05 of the job's eight nodes
SACCT_HEADER = "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|AllocTRES|ReqTRES|ExitCode"


def job_ids(count: int) -> list[str]:
    return [str(9100 + i) for i in range(count)]


def nodes_of(job_id: str) -> list[str]:
    return [f"n{job_id}-gpu{i:02d}" for i in range(1, 9)]


def prepare_lake(settings: StackSettings, work: Path, ids: list[str]) -> None:
    """The jobs' records (sacct ingest), crash logs and checkpoints in the stack's lake."""
    from acme.diagnosis.synth_log import iter_training_log
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import open_lake
    from acme.recovery.synth_checkpoints import write_checkpoint

    env = stack_env(settings)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3"):
        os.environ[name] = env[name]
    lake = open_lake(env["ACME_LAKE_URI"])
    rows = [
        f"{job_id}|llama-pretrain-{job_id}|alice|gpu|FAILED|{DAY}T01:00:00|{DAY}T01:05:00|{DAY}T03:05:00|"
        f"02:00:00|8|512|n{job_id}-gpu[01-08]|billing=512,cpu=512,gres/gpu=64,mem=8T,node=8|"
        f"billing=512,cpu=512,gres/gpu=64,mem=8T,node=8|1:0"
        for job_id in ids
    ]
    sacct = work / "sacct.txt"
    sacct.write_text("\n".join([SACCT_HEADER, *rows]) + "\n")
    ingest_job_file(lake, JobInput("seren", "sacct", str(sacct)), sacct)
    client = lake_client(settings)
    log = "".join(line + "\n" for line in iter_training_log(20_000, seed=3, ranks=8, failure="ECCError"))
    for job_id in ids:
        key = f"lake/logs/cluster=seren/job={job_id}/train.log"
        client.put_object(Bucket=settings.bucket, Key=key, Body=log.encode())
        local = work / "checkpoints" / job_id
        for step in (100, 200):
            write_checkpoint(local, step)
        for path in local.rglob("*"):
            if path.is_file():
                key = f"lake/checkpoints/cluster=seren/job={job_id}/{path.relative_to(local)}"
                client.upload_file(str(path), settings.bucket, key)


def simulated_jobs_file(work: Path, ids: list[str]) -> Path:
    import yaml

    jobs = {
        job_id: {
            "nodes": nodes_of(job_id),
            "faulty": [nodes_of(job_id)[FAULTY_RANK]],
            "stragglers": [],
            "seed": 0,
        }
        for job_id in ids
    }
    path = work / "simulated_jobs.yaml"
    path.write_text(yaml.safe_dump({"clusters": {"seren": jobs}}))
    return path


def action_records(settings: StackSettings, job_id: str) -> list[dict]:
    client = lake_client(settings)
    key = f"lake/recovery/cluster=seren/job={job_id}/diag-seren-{job_id}/actions.jsonl"
    try:
        body = client.get_object(Bucket=settings.bucket, Key=key)["Body"].read().decode()
    except client.exceptions.NoSuchKey:
        return []
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def union_seconds(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Length of the union of ``intervals`` clipped to [start, end]."""
    clipped = sorted((max(a, start), min(b, end)) for a, b in intervals if b > start and a < end)
    total, current_end = 0.0, start
    for a, b in clipped:
        a = max(a, current_end)
        if b > a:
            total += b - a
            current_end = b
    return total


def one_crash(api: StackApi, settings: StackSettings, job_id: str, timeout_s: float = 600) -> dict:
    origin = time.time()
    triggered = api.trigger("diagnose_failures", {"cluster": "seren", "job_id": job_id, "day": DAY})
    deadline = time.monotonic() + timeout_s
    restart = None
    while restart is None:
        if time.monotonic() > deadline:
            raise SystemExit(f"no restart in the action log of job {job_id} within {timeout_s} s")
        records = action_records(settings, job_id)
        restart = next((r for r in records if r["step"] == "restart"), None)
        failed = next((r for r in records if r["status"] in ("failed", "needs-person")), None)
        if failed:
            raise SystemExit(f"recovery of {job_id} stopped: {failed['step']}: {failed.get('error')}")
        if restart is None:
            diagnosis = api.run("diagnose_failures", triggered["dag_run_id"])
            if diagnosis and diagnosis["state"] == "failed":
                raise SystemExit(f"diagnose_failures failed for job {job_id}")
            time.sleep(0.2)
    restarted = datetime.fromisoformat(restart["ended_at"]).timestamp()
    recovery_run = f"recover__seren__{job_id}"
    api.wait_run("diagnose_failures", triggered["dag_run_id"])
    api.wait_run("recover_training", recovery_run)
    tasks = timeline(api, "diagnose_failures", triggered["dag_run_id"], origin)
    tasks += timeline(api, "recover_training", recovery_run, origin)
    end_to_end = restarted - origin
    running = [
        (r["start_s"], r["end_s"]) for r in tasks if r["start_s"] is not None and r["end_s"] is not None
    ]
    in_tasks = union_seconds(running, 0.0, end_to_end)
    records = action_records(settings, job_id)
    return {
        "job_id": job_id,
        "end_to_end_s": round(end_to_end, 2),
        "inside_tasks_s": round(in_tasks, 2),
        "between_tasks_s": round(end_to_end - in_tasks, 2),
        "recovery_steps_own_s": round(
            sum(r.get("seconds") or 0 for r in records if r["step"] != "restart")
            + (restart.get("seconds") or 0),
            2,
        ),  # fmt: skip
        "restart": {k: restart["result"].get(k) for k in ("new_job_id", "planned", "detection_to_restart_s")},
        "cordoned": [r["inputs"]["node"] for r in records if r["step"] == "cordon"],
        "tasks": [r for r in tasks if r["start_s"] is not None and r["start_s"] <= end_to_end],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dry-run", action="store_true", help="keep ACME_RECOVERY_DRY_RUN's default (true)")
    parser.add_argument("--keep", action="store_true", help="leave the stack running (its folder is printed)")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="a further stack setting"
    )
    args = parser.parse_args()
    machine = Machine()

    ids = job_ids(args.repeat + 1)
    work = Path(tempfile.mkdtemp(prefix="acme-bench-crash-"))
    extra = {
        "ACME_RECOVERY_SIMULATED_JOBS": str(simulated_jobs_file(work, ids)),
        # Only the runs this benchmark makes: other DAGs stay paused, no scheduled runs.
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
    }
    if not args.dry_run:
        extra["ACME_RECOVERY_DRY_RUN"] = "false"
    extra.update(env_overrides(args.env))
    settings = StackSettings(
        home=work / "stack",
        password="bench-password",
        database=f"acme_stack_crash_{uuid.uuid4().hex[:8]}",
        redis_db=claim_free_redis_db("bench_crash_to_restart"),
        extra_env=extra,
    )
    # A stop (SIGTERM, or SIGINT where a background job ignores it) still tears the stack down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        up(settings)
        prepare_lake(settings, work, ids)
        api = StackApi(settings)
        for dag_id in ("diagnose_failures", "recover_training"):
            api.unpause(dag_id)
        warm_up = one_crash(api, settings, ids[0])
        timed = [one_crash(api, settings, job_id) for job_id in ids[1:]]
        totals = [t["end_to_end_s"] for t in timed]
        result = {
            "measured_at": datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": machine.block(),
            "setup": {
                "executor": "CeleryExecutor (1 worker), Postgres, Redis, moto S3",
                "stack": stack_settings_block(settings),
                "dry_run": args.dry_run,
                "log_lines": 20_000,
                "job_nodes": 8,
                "embedding": "minilm (default)",
            },
            "end_to_end_s": {
                "median": statistics.median(totals),
                "min": min(totals),
                "max": max(totals),
                "runs": totals,
            },  # fmt: skip
            "inside_tasks_s_median": statistics.median(t["inside_tasks_s"] for t in timed),
            "between_tasks_s_median": statistics.median(t["between_tasks_s"] for t in timed),
            "recovery_steps_own_s_median": statistics.median(t["recovery_steps_own_s"] for t in timed),
            "warm_up_end_to_end_s": warm_up["end_to_end_s"],
            "repetitions": timed,
        }
        print(json.dumps(result, indent=1))
        name = "crash_to_restart_dry_run" if args.dry_run else "crash_to_restart"
        (ROOT / "benchmarks" / "results" / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    finally:
        if args.keep:
            print(f"stack left running in {settings.home}", file=sys.stderr)
        else:
            down(settings, purge=True)


if __name__ == "__main__":
    main()
