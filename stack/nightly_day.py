"""One cluster-day on the stack, from the ingest to the refreshed report, as the scheduler runs it: shared by
``benchmarks/bench_nightly_diagnosis.py`` and ``tests/integration/test_stack_nightly_diagnosis.py``.

A synthesized Seren day (``acme.jobs.synth``; ``scale`` 1 is the release's daily volume) is the only
configured cluster's input; a share of its failed jobs get a 20,000-line crash log (gzip) in the lake
where ``ACME_DIAGNOSIS_LOG_PATTERN`` finds it. One REST call triggers ``ingest_job_traces`` for the day; its
Asset event starts ``diagnose_failures``, whose Asset event starts ``characterize``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import threading
import time
from datetime import date, datetime
from pathlib import Path
from typing import Any

from stack.rest import FINISHED, StackApi
from stack.stack import StackSettings, lake_client, stack_memory

DAY = date(2023, 7, 1)
FAILURES = ("ECCError", "NCCLTimeoutError", "OutOfMemoryError", "KeyError", "NVLinkError")
DAG_IDS = ("ingest_job_traces", "diagnose_failures", "characterize")


def synth_day(folder: Path, scale: float, seed: int = 7) -> Path:
    """The day's AcmeTrace CSV (made once per folder); a clusters file next to it configures it."""
    from acme.jobs.synth import write_synth_trace

    path = folder / f"{DAY.isoformat()}.csv"
    if not path.exists():
        write_synth_trace("seren", DAY, 1, folder, scale=scale, seed=seed, per_day=True)
    return path


def clusters_file(folder: Path) -> Path:
    path = folder / "clusters.yaml"
    path.write_text(
        f'clusters:\n  seren:\n    jobs:\n      format: acmetrace\n      input: "{folder}/{{ds}}.csv"\n'
    )
    return path


def failed_job_ids(day_csv: Path) -> list[str]:
    """The day's failed jobs as the lake groups them (FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY)."""
    from acme.jobs.schema import STATE_GROUPS

    with day_csv.open(newline="") as handle:
        rows = csv.DictReader(handle)
        return sorted(row["job_id"] for row in rows if STATE_GROUPS.get(row["state"]) == "failed")


def upload_logs(settings: StackSettings, job_ids: list[str], lines: int = 20_000) -> list[str]:
    """A crash log (gzip, 8 ranks, one of ``FAILURES`` in turn) for each job, in the stack's lake."""
    from acme.diagnosis.synth_log import iter_training_log

    client = lake_client(settings)
    bodies = {
        failure: gzip.compress(
            "".join(
                line + "\n" for line in iter_training_log(lines, seed=3, ranks=8, failure=failure)
            ).encode(),
            compresslevel=5,
        )
        for failure in FAILURES
    }
    for index, job_id in enumerate(job_ids):
        key = f"lake/logs/cluster=seren/job={job_id}/train.log.gz"
        client.put_object(Bucket=settings.bucket, Key=key, Body=bodies[FAILURES[index % len(FAILURES)]])
    return job_ids


class RssSampler(threading.Thread):
    """Peak of the stack's summed RSS and PSS (every process of its process groups), sampled every
    ``period_s``, with each service's share at the RSS peak; and the machine's 1-minute load average."""

    def __init__(self, settings: StackSettings, period_s: float = 0.5):
        super().__init__(daemon=True)
        self.settings, self.period_s = settings, period_s
        self.peak = 0
        self.peak_pss = 0
        self.at_peak: dict[str, dict[str, int]] = {}
        self.load: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            memory = stack_memory(self.settings)
            rss = sum(service["rss"] for service in memory.values())
            if rss > self.peak:
                self.peak, self.at_peak = rss, memory
            self.peak_pss = max(self.peak_pss, sum(service["pss"] for service in memory.values()))
            self.load.append(os.getloadavg()[0])
            self.stop.wait(self.period_s)

    def report(self) -> dict[str, Any]:
        """Peaks in MiB, each service's RSS/PSS/process count at the RSS peak, the load's mean and max."""
        mib = 2**20
        return {
            "stack_rss_peak_mib": round(self.peak / mib),
            "stack_pss_peak_mib": round(self.peak_pss / mib),
            "at_rss_peak": {
                name: {
                    "processes": m["processes"],
                    "rss_mib": round(m["rss"] / mib),
                    "pss_mib": round(m["pss"] / mib),
                }
                for name, m in self.at_peak.items()
            },
            "load_average_1m": {
                "mean": round(sum(self.load) / len(self.load), 2) if self.load else None,
                "max": round(max(self.load), 2) if self.load else None,
            },
        }


def _after(run: dict[str, Any], origin: float) -> bool:
    return datetime.fromisoformat(run["run_after"]).timestamp() >= origin - 1


def _published(api: StackApi, run: dict[str, Any]) -> float:
    """When the diagnosis run's publish task (the one that emits the diagnoses Asset event) ended."""
    (publish,) = [
        t for t in api.task_instances("diagnose_failures", run["dag_run_id"]) if t["task_id"] == "publish"
    ]
    return datetime.fromisoformat(publish["end_date"]).timestamp() if publish["end_date"] else _ended(run)


def _ended(run: dict[str, Any]) -> float:
    return datetime.fromisoformat(run["end_date"]).timestamp()


def run_day(api: StackApi, timeout_s: float = 1800) -> dict[str, Any]:
    """Trigger the day's ingest and wait until the diagnosis runs it caused and the report run after the
    last of them are finished; returns the runs and the seconds from the REST call to each end."""
    origin = time.time()
    ingest = api.trigger("ingest_job_traces", {"day": DAY.isoformat(), "cluster": "seren"})
    ingested = api.wait_run("ingest_job_traces", ingest["dag_run_id"], timeout_s)
    if ingested["state"] != "success":
        raise RuntimeError(f"the ingest run failed: {ingested}")
    deadline = time.monotonic() + timeout_s
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError("no finished diagnosis and report after the ingest")
        diagnoses = [
            r
            for r in api.runs("diagnose_failures")
            if r["run_type"] == "asset_triggered" and _after(r, origin)
        ]
        reports = [
            r for r in api.runs("characterize") if r["run_type"] == "asset_triggered" and _after(r, origin)
        ]
        if diagnoses and all(r["state"] in FINISHED for r in diagnoses):
            last_diagnosis = max(_ended(r) for r in diagnoses)
            # A report follows the Asset event of the diagnosis's publish task (the run itself ends a task
            # later, once its staged plan is dropped).
            last_event = max(_published(api, r) for r in diagnoses)
            later = [
                r for r in reports if datetime.fromisoformat(r["run_after"]).timestamp() >= last_event - 1
            ]
            if later and all(r["state"] in FINISHED for r in later):
                break
        time.sleep(1)
    return {
        "ingest": ingested,
        "diagnoses": diagnoses,
        "reports": later,
        "ingest_s": round(_ended(ingested) - origin, 1),
        "diagnosed_s": round(last_diagnosis - origin, 1),
        "report_s": round(max(_ended(r) for r in later) - origin, 1),
    }


def stored_diagnoses(settings: StackSettings) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    client = lake_client(settings)
    key = f"lake/diagnoses/cluster=seren/date={DAY.isoformat()}/diagnoses.parquet"
    body = client.get_object(Bucket=settings.bucket, Key=key)["Body"].read()
    return pq.read_table(io.BytesIO(body)).to_pylist()


def waiting_in_queue(settings: StackSettings) -> int:
    """Entries of the carry-over queue as last written (diagnosed entries leave it at the next plan)."""
    client = lake_client(settings)
    try:
        body = client.get_object(
            Bucket=settings.bucket, Key="lake/diagnosis/queue/cluster=seren/pending.json"
        )
    except client.exceptions.NoSuchKey:
        return 0
    return len(json.loads(body["Body"].read())["jobs"])


def report_failure_reasons(settings: StackSettings, period: str = DAY.isoformat()) -> list[dict[str, str]]:
    """The report's failure table (the paper's Table 3) as published in the lake, as CSV rows."""
    client = lake_client(settings)
    prefix = f"lake/reports/cluster=seren/period={period}/"
    keys = [
        o["Key"] for o in client.list_objects_v2(Bucket=settings.bucket, Prefix=prefix).get("Contents", [])
    ]
    (key,) = [k for k in keys if k.endswith("failure_reasons.csv")]
    text = client.get_object(Bucket=settings.bucket, Key=key)["Body"].read().decode()
    return list(csv.DictReader(io.StringIO(text)))
