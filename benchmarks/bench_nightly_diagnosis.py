"""A whole cluster-day's diagnosis on the production stack (``stack/stack.py``: Celery worker over Redis,
Postgres, the lake on the loopback S3 server), issue 20.

A synthesized Seren day (``acme.jobs.synth``, seed 7; ``--scale 1`` is the release's daily volume, about
4,700 jobs of which about 1,000 failed; ``--scale 10`` ten times that) is the only configured cluster's
input, and 5% of its failed jobs have a 20,000-line, 8-rank crash log (gzip) in the lake. Every other
setting is the default: the MiniLM embedding, ``ACME_DIAGNOSIS_MAX_JOBS`` 500, ``ACME_DIAGNOSIS_CHUNKS`` 4,
Celery worker concurrency 2. One REST call triggers ``ingest_job_traces`` for the day; the scheduler starts
``diagnose_failures`` on its Asset event and ``characterize`` on the diagnosis' event
(``stack.nightly_day.run_day``).

Measured: seconds from the REST call to the end of the ingest, of the (last) diagnosis run and of the report
run after it; the stack's peak RSS (every process of its process groups, summed, every 0.5 s); the
diagnosis tasks' running times; how many failed jobs have a record, how many wait in the carry-over queue,
and the day report's failure-table count.

Results: benchmarks/results/nightly_diagnosis_x<scale>.json.
Usage: python benchmarks/bench_nightly_diagnosis.py [--scale 1] [--log-share 0.05]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import uuid
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "plugins"))

from stack.bench import Machine, env_overrides, stack_settings_block  # noqa: E402
from stack.nightly_day import (  # noqa: E402
    DAG_IDS,
    RssSampler,
    clusters_file,
    failed_job_ids,
    report_failure_reasons,
    run_day,
    stored_diagnoses,
    synth_day,
    upload_logs,
    waiting_in_queue,
)
from stack.rest import StackApi  # noqa: E402
from stack.stack import StackSettings, claim_free_redis_db, down, stack_memory, up  # noqa: E402

DATA = ROOT / "benchmarks" / ".data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--log-share", type=float, default=0.05, help="share of failed jobs with a log")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="a further stack setting"
    )
    args = parser.parse_args()
    machine = Machine()

    data = DATA / f"seren_day_x{args.scale:g}_seed7"
    data.mkdir(parents=True, exist_ok=True)
    day_csv = synth_day(data, args.scale)
    jobs = len(day_csv.read_text().splitlines()) - 1
    failed = failed_job_ids(day_csv)
    step = max(1, round(1 / args.log_share))
    work = Path(tempfile.mkdtemp(prefix="acme-bench-night-"))
    settings = StackSettings(
        home=work / "stack",
        password="bench-password",
        database=f"acme_stack_night_{uuid.uuid4().hex[:8]}",
        redis_db=claim_free_redis_db("bench_nightly_diagnosis"),
        extra_env={
            "ACME_CLUSTERS_FILE": str(clusters_file(data)),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            **env_overrides(args.env),
        },
    )
    # A stop (SIGTERM, or SIGINT where a background job ignores it) still tears the stack down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        up(settings)
        logged = upload_logs(settings, failed[::step])
        api = StackApi(settings)
        for dag_id in DAG_IDS:
            api.unpause(dag_id)
        idle = stack_memory(settings)
        sampler = RssSampler(settings)
        sampler.start()
        night = run_day(api, timeout_s=3 * 3600)
        sampler.stop.set()
        sampler.join()
        rows = stored_diagnoses(settings)
        table = report_failure_reasons(settings)
        tasks = []
        for run in night["diagnoses"]:
            for ti in api.task_instances("diagnose_failures", run["dag_run_id"]):
                if ti["start_date"] and ti["end_date"]:
                    took = datetime.fromisoformat(ti["end_date"]) - datetime.fromisoformat(ti["start_date"])
                    index = f"[{ti['map_index']}]" if ti["map_index"] >= 0 else ""
                    tasks.append({"task": ti["task_id"] + index, "running_s": round(took.total_seconds(), 1)})
        result = {
            "measured_at": datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": machine.block(),
            "stack": stack_settings_block(settings),
            "day": {
                "scale": args.scale,
                "jobs": jobs,
                "failed": len(failed),
                "with_log": len(logged),
                "log_lines": 20_000,
            },  # fmt: skip
            "seconds_from_rest_call": {
                "ingest_done": night["ingest_s"],
                "diagnoses_published": night["diagnosed_s"],
                "report_refreshed": night["report_s"],
            },
            "diagnosis_runs": [r["state"] for r in night["diagnoses"]],
            "report_runs": [r["state"] for r in night["reports"]],
            "diagnosis_tasks": tasks,
            "diagnosed": len(rows),
            "distinct_jobs_diagnosed": len({r["job_id"] for r in rows}),
            "by_source": {
                s: sum(r["source"] == s for r in rows) for s in sorted({r["source"] for r in rows})
            },
            "with_log_not_yet_diagnosed": len(set(logged) - {r["job_id"] for r in rows}),
            "queue_entries_at_last_plan": waiting_in_queue(settings),
            "report_failure_table_jobs": sum(int(row["jobs"]) for row in table),
            "stack_rss_idle_mib": round(sum(m["rss"] for m in idle.values()) / 2**20),
            "stack_pss_idle_mib": round(sum(m["pss"] for m in idle.values()) / 2**20),
            "idle": {
                name: {
                    "processes": m["processes"],
                    "rss_mib": round(m["rss"] / 2**20),
                    "pss_mib": round(m["pss"] / 2**20),
                }
                for name, m in idle.items()
            },  # fmt: skip
            **sampler.report(),
        }
        print(json.dumps(result, indent=1))
        out = ROOT / "benchmarks" / "results" / f"nightly_diagnosis_x{args.scale:g}.json"
        out.write_text(json.dumps(result, indent=1) + "\n")
    finally:
        down(settings, purge=True)


if __name__ == "__main__":
    main()
