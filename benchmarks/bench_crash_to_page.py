"""Crash to the on-call page and to the owner's message on the production stack (``stack/stack.py``: Celery
worker over Redis, Postgres, the lake on the loopback S3 server), issue 29.

The jobs and crash logs of ``bench_crash_to_restart.py`` (an 8-node, 64-GPU Pretrain job with an ECC error on
one node; ``ACME_RECOVERY_DRY_RUN=false``), plus one small job per repetition whose log shows the user's own
error (a KeyError). A real SMTP server (aiosmtpd, in this process) is the mail channel of the routing file
for owners (``<user>@acme.example``) and on-call (``oncall@acme.example``, GPU threshold 64).

Measured per repetition (after one untimed warm-up), each from the REST call that triggers
``diagnose_failures`` to the mail's arrival at the SMTP server:

* crash -> first page (``diagnose_failures``' ``notify`` task: diagnosis, suspect nodes, recovery requested);
* crash -> final page (``recover_training``'s ``page_oncall``: recovery restarted);
* user failure -> the owner's digest.

Results: benchmarks/results/crash_to_page.json.
Usage: python benchmarks/bench_crash_to_page.py [--repeat 3] [--keep]
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

from benchmarks.bench_crash_to_restart import DAY, SACCT_HEADER, prepare_lake, simulated_jobs_file  # noqa: E402
from stack.bench import Machine, free_redis_db, stack_settings_block  # noqa: E402
from stack.rest import StackApi  # noqa: E402
from stack.stack import StackSettings, down, lake_client, stack_env, up  # noqa: E402
from tests.notify_support import Mailbox, smtp_connection, smtp_server  # noqa: E402

ROUTING = """channels: {mail: {kind: smtp, connection: smtp_bench, from: acme-pipeline@acme.example}}
owners: {channel: mail, domain: acme.example}
oncall: {gpu_threshold: 64, default: {channel: mail, to: oncall@acme.example}}
"""


def prepare_owner_jobs(settings: StackSettings, work: Path, ids: list[str]) -> None:
    """One-node jobs of user bob whose logs end in the user's own KeyError."""
    from acme.diagnosis.synth_log import iter_training_log
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import open_lake

    lake = open_lake(stack_env(settings)["ACME_LAKE_URI"])
    rows = [
        f"{job_id}|finetune-{job_id}|bob|gpu|FAILED|{DAY}T02:00:00|{DAY}T02:01:00|{DAY}T02:11:00|00:10:00|1|16|"
        f"o{job_id}-gpu01|billing=16,cpu=16,gres/gpu=8,mem=1T,node=1|billing=16,cpu=16,gres/gpu=8,mem=1T,node=1|1:0"
        for job_id in ids
    ]
    sacct = work / "sacct-owner.txt"
    sacct.write_text("\n".join([SACCT_HEADER, *rows]) + "\n")
    ingest_job_file(lake, JobInput("seren", "sacct", str(sacct)), sacct)
    log = "".join(line + "\n" for line in iter_training_log(5_000, seed=4, ranks=8, failure="KeyError"))
    client = lake_client(settings)
    for job_id in ids:
        client.put_object(
            Bucket=settings.bucket, Key=f"lake/logs/cluster=seren/job={job_id}/train.log", Body=log.encode()
        )


def arrival(mailbox: Mailbox, predicate, timeout_s: float = 300) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for message, at in zip(list(mailbox.messages), list(mailbox.arrived), strict=True):
            if predicate(message):
                return at
        time.sleep(0.05)
    raise SystemExit(f"no matching mail within {timeout_s} s; got {[m['Subject'] for m in mailbox.messages]}")


def one_repetition(api: StackApi, mailbox: Mailbox, crash_job: str, owner_job: str) -> dict:
    origin = time.time()
    api.trigger("diagnose_failures", {"cluster": "seren", "job_id": crash_job, "day": DAY})
    first = arrival(
        mailbox, lambda m: m["Subject"].startswith("[acme page]") and f"job {crash_job} " in m["Subject"]
    )
    final = arrival(
        mailbox, lambda m: f"job {crash_job} " in m["Subject"] and "recovery restarted" in m["Subject"]
    )
    before = [m for m in mailbox.messages if m["To"] == "bob@acme.example"]
    owner_origin = time.time()
    api.trigger("diagnose_failures", {"cluster": "seren", "job_id": owner_job, "day": DAY})
    owner = arrival(mailbox, lambda m: m["To"] == "bob@acme.example" and not any(m is b for b in before))
    return {
        "crash_job": crash_job,
        "owner_job": owner_job,
        "crash_to_first_page_s": round(first - origin, 2),
        "crash_to_final_page_s": round(final - origin, 2),
        "user_failure_to_owner_message_s": round(owner - owner_origin, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="leave the stack running (its folder is printed)")
    args = parser.parse_args()
    machine = Machine()
    crash_ids = [str(9300 + i) for i in range(args.repeat + 1)]
    owner_ids = [str(9400 + i) for i in range(args.repeat + 1)]
    work = Path(tempfile.mkdtemp(prefix="acme-bench-page-"))
    routing = work / "notify.yaml"
    routing.write_text(ROUTING)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    with smtp_server() as (mailbox, port):
        extra = {
            "ACME_RECOVERY_SIMULATED_JOBS": str(simulated_jobs_file(work, crash_ids)),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "ACME_RECOVERY_DRY_RUN": "false",
            "ACME_NOTIFY_FILE": str(routing),
            "AIRFLOW_CONN_SMTP_BENCH": smtp_connection(port),
        }
        settings = StackSettings(
            home=work / "stack", password="bench-password", database=f"acme_stack_h29a_page_{uuid.uuid4().hex[:8]}",
            redis_db=free_redis_db(), extra_env=extra,
        )  # fmt: skip
        try:
            up(settings)
            env = stack_env(settings)
            for name in (
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_DEFAULT_REGION",
                "AWS_ENDPOINT_URL_S3",
            ):
                os.environ[name] = env[name]
            prepare_lake(settings, work, crash_ids)
            prepare_owner_jobs(settings, work, owner_ids)
            api = StackApi(settings)
            for dag_id in ("diagnose_failures", "recover_training"):
                api.unpause(dag_id)
            warm_up = one_repetition(api, mailbox, crash_ids[0], owner_ids[0])
            timed = [
                one_repetition(api, mailbox, c, o) for c, o in zip(crash_ids[1:], owner_ids[1:], strict=True)
            ]

            def spread(name: str) -> dict:
                values = [t[name] for t in timed]
                return {
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                    "runs": values,
                }

            result = {
                "measured_at": datetime.now().astimezone().isoformat(timespec="seconds"),
                "machine": machine.block(),
                "setup": {
                    "executor": "CeleryExecutor (1 worker), Postgres, Redis, moto S3",
                    "stack": stack_settings_block(settings),
                    "channel": "SmtpNotifier -> aiosmtpd on 127.0.0.1",
                    "crash_job": "8 nodes, 64 GPUs, ECC error, live recovery (simulated cluster)",
                    "owner_job": "1 node, KeyError in the user's script",
                },  # fmt: skip
                "crash_to_first_page_s": spread("crash_to_first_page_s"),
                "crash_to_final_page_s": spread("crash_to_final_page_s"),
                "user_failure_to_owner_message_s": spread("user_failure_to_owner_message_s"),
                "warm_up": warm_up,
                "repetitions": timed,
                "mails": len(mailbox.messages),
            }
            print(json.dumps(result, indent=1))
            (ROOT / "benchmarks" / "results" / "crash_to_page.json").write_text(
                json.dumps(result, indent=1) + "\n"
            )
        finally:
            if args.keep:
                print(f"stack left running in {settings.home}", file=sys.stderr)
            else:
                down(settings, purge=True)


if __name__ == "__main__":
    main()
