"""Synthesized pretraining campaigns for the ETTR section's demo: a 104B model in March, a 123B model in April.

What the paper says, and what is assumed here. Hu et al. (NSDI'24, §6 and Figure 14) show the progress of
two pretraining campaigns on Acme: the early 104B runs (March 2023) failed often and lost much of their
progress between checkpoints, restarted by hand; for the 123B model (April) the team had asynchronous
checkpointing and the automatic failure diagnosis and recovery of §6, so it lost far less. The paper's
trace does not publish these jobs, so every number below is an assumption in that spirit, stated here so
that the demo's ETTR is read as an illustration, not a measurement:

============================  ======================  ======================
                              104B (March)            123B (April)
============================  ======================  ======================
GPUs                          1,024 (128 nodes)       2,048 (256 nodes)
days                          14 (from 03-01)         20 (from 04-03)
mean time between failures    7 h                     10 h
checkpoint interval           3 h, synchronous save   30 min, async save
training blocked by a save    20 min                  1 min
restart latency (launch,      35 min                  8 min
loading the checkpoint)
resubmission + queueing       2 h, by a person        5 min, automatic
rollbacks (loss spike:        15 % of restarts        5 %
resume two saves back)
============================  ======================  ======================

Failure reasons follow the infrastructure-heavy mix of pretraining failures in the paper's Table 3
(NVLinkError, CUDAError, NodeFailure, ECCError, NetworkError, NCCLTimeoutError, ...).

``write_synth_campaigns(lake, cluster)`` publishes them through the real paths: the jobs as a ``sacct``
export (``ingest_job_file``: job type Pretrain from the name), the checkpoint events as
``checkpoints/cluster=<c>/date=<d>/events.parquet``, the failures' diagnoses as diagnosis records.
The same seed gives the same campaigns.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.lake import Lake

REASONS = (  # (reason, weight, sacct state)
    ("NVLinkError", 8, "FAILED"), ("CUDAError", 6, "FAILED"), ("NodeFailure", 5, "NODE_FAIL"),
    ("ECCError", 4, "FAILED"), ("NetworkError", 4, "FAILED"), ("NCCLTimeoutError", 6, "FAILED"),
    ("S3StorageError", 2, "FAILED"), ("OutOfMemoryError", 1, "FAILED"),
)  # fmt: skip
CATEGORIES = {"OutOfMemoryError": ("Framework", "user"), "LossSpike": ("Framework", "user")}


@dataclass(frozen=True)
class CampaignSpec:
    name: str
    user: str
    start: datetime
    days: int
    nodes: int
    mtbf_h: float
    interval_h: float
    save_stall_min: float
    restart_latency_min: float
    resubmit_min: float
    rollback_share: float
    steps_per_hour: float
    node_prefix: str
    first_job_id: int


CAMPAIGNS = (
    CampaignSpec("gpt-104b-pretrain", "u-llm104", datetime(2023, 3, 1, 2, tzinfo=UTC), 14, 128, 7.0, 3.0, 20.0,
                 35.0, 120.0, 0.15, 180.0, "SH-IDC1-10-140-1", 7_104_000),
    CampaignSpec("gpt-123b-pretrain", "u-llm123", datetime(2023, 4, 3, 2, tzinfo=UTC), 20, 256, 10.0, 0.5, 1.0,
                 8.0, 5.0, 0.05, 150.0, "SH-IDC1-10-140-2", 7_123_000),
)  # fmt: skip


def simulate(spec: CampaignSpec, seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(jobs, checkpoint events) of one campaign."""
    rng = random.Random(f"{spec.name}:{seed}")
    end_of_campaign = spec.start + timedelta(days=spec.days)
    jobs: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    saves: list[tuple[int, datetime, str]] = []  # every save so far: (step, at, job)
    submit = spec.start - timedelta(minutes=10)
    start = spec.start
    resume_step, source = 0, None
    attempt = 0
    while start < end_of_campaign:
        job_id = str(spec.first_job_id + attempt)  # Slurm job ids are numbers
        name = spec.name if attempt == 0 else f"{spec.name}-r{attempt}"
        resume_at = start + timedelta(minutes=spec.restart_latency_min * rng.uniform(0.7, 1.3))
        events.append({"job_id": job_id, "event": "resume", "step": resume_step, "at": resume_at,
                       "duration_s": None, "source_job_id": source})  # fmt: skip
        fails_at = resume_at + timedelta(hours=rng.expovariate(1 / spec.mtbf_h))
        t, step = resume_at, resume_step
        while True:
            save_at = t + timedelta(hours=spec.interval_h)
            if save_at >= min(fails_at, end_of_campaign):
                break
            step += int(spec.steps_per_hour * spec.interval_h)
            stall = spec.save_stall_min * rng.uniform(0.8, 1.2)
            events.append({"job_id": job_id, "event": "save", "step": step, "at": save_at,
                           "duration_s": stall * 60, "source_job_id": None})  # fmt: skip
            saves.append((step, save_at, job_id))
            t = save_at + timedelta(minutes=stall)
        finished = fails_at >= end_of_campaign
        end = end_of_campaign if finished else fails_at
        reason, _, state = rng.choices(REASONS, weights=[w for _, w, _ in REASONS])[0]
        rollback = not finished and rng.random() < spec.rollback_share
        if rollback:
            reason, state = "LossSpike", "FAILED"
        jobs.append({"job_id": job_id, "job_name": name, "user": spec.user, "submit": submit, "start": start,
                     "end": end, "state": "COMPLETED" if finished else state, "nodes": spec.nodes,
                     "reason": None if finished else reason, "prefix": spec.node_prefix})  # fmt: skip
        if finished:
            break
        back = 3 if rollback else 1  # a loss spike resumes from the save before the last one
        if len(saves) >= back:
            resume_step, _, source = saves[-back]
        attempt += 1
        submit = end + timedelta(minutes=spec.resubmit_min * rng.uniform(0.5, 1.5))
        start = submit + timedelta(minutes=rng.uniform(1, 10))
    return jobs, events


def sacct_text(jobs: list[dict[str, Any]]) -> str:
    """The jobs as ``sacct --parsable2`` output with a header (what the nightly ingest reads)."""

    def stamp(value: datetime) -> str:
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")

    lines = [
        "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|AllocTRES|ReqTRES|ExitCode"
    ]
    for job in jobs:
        seconds = int((job["end"] - job["start"]).total_seconds())
        elapsed = (
            f"{seconds // 86400}-{seconds % 86400 // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
        )
        nodes, gpus = job["nodes"], 8 * job["nodes"]
        tres = f"billing={gpus},cpu={128 * nodes},gres/gpu={gpus},node={nodes}"
        exit_code = "0:0" if job["state"] == "COMPLETED" else "1:0"
        lines.append(
            f"{job['job_id']}|{job['job_name']}|{job['user']}|llm|{job['state']}|{stamp(job['submit'])}|"
            f"{stamp(job['start'])}|{stamp(job['end'])}|{elapsed}|{nodes}|{128 * nodes}|"
            f"{job['prefix']}-[0-{nodes - 1}]|{tres}|{tres}|{exit_code}"
        )
    return "\n".join(lines) + "\n"


def write_synth_campaigns(lake: Lake, cluster: str = "seren", seed: int = 0) -> dict[str, Any]:
    """Publish the campaigns' jobs, checkpoint events and failure diagnoses into ``lake``."""
    import tempfile
    from pathlib import Path

    import pandas as pd
    import pyarrow as pa

    from acme import lake_keys
    from acme.diagnosis.records import DiagnosisRecord, write_records
    from acme.diagnosis.rules import EXTRA_REASONS, TAXONOMY
    from acme.jobs.ingest import JobInput, ingest_job_file

    all_jobs, all_events = [], []
    for spec in CAMPAIGNS:
        jobs, events = simulate(spec, seed)
        all_jobs += jobs
        all_events += events
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "campaigns.sacct.txt"
        path.write_text(sacct_text(all_jobs))
        ingested = ingest_job_file(lake, JobInput(cluster, "sacct", str(path)), path)
    events = pd.DataFrame(all_events)
    events["at"] = pd.to_datetime(events["at"], utc=True)
    events["date"] = events["at"].dt.strftime("%Y-%m-%d")
    partitions = []
    for day, part in events.groupby("date"):
        table = pa.Table.from_pandas(part.drop(columns="date").reset_index(drop=True), preserve_index=False)
        partitions.append(lake.write_parquet(lake_keys.checkpoint_events(cluster, str(day)), table))
    known = {**TAXONOMY, **EXTRA_REASONS}
    records = [
        DiagnosisRecord(
            cluster=cluster,
            job_id=job["job_id"],
            date=job["submit"].date(),
            reason=job["reason"],
            category=known[job["reason"]],
            attribution=CATEGORIES.get(job["reason"], ("", "infrastructure"))[1],
            confidence=0.9,
            source="rule",
            note="synthesized campaign (acme.report.synth_campaigns)",
        )  # fmt: skip
        for job in all_jobs
        if job["reason"]
    ]
    written = write_records(lake, records) if records else []
    return {
        "cluster": cluster,
        "campaigns": [s.name for s in CAMPAIGNS],
        "jobs": len(all_jobs),
        "interruptions": len(records),
        "checkpoint_events": len(events),
        "job_partitions": ingested.get("partitions"),
        "checkpoint_partitions": len(partitions),
        "diagnosis_partitions": written,
    }
