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
hangs (NCCL timeouts)         20 % of failures        20 %
hang found after              10 min (the watchdog)   4 min (acme.detection)
============================  ======================  ======================

A failure strikes from a job's start (also while it starts up: such a job never resumed); a hang stops the
job's progress at its onset and runs on until the watchdog kills it (104B: no detection evidence, the
report estimates it) or the detector finds it (123B: a detection episode, killed a minute or two later).
Every 123B failure is recovered by ``recover_training`` (an action log from 30 % into the gap to the
resubmission).

Failure reasons follow the infrastructure-heavy mix of pretraining failures in the paper's Table 3
(NVLinkError, CUDAError, NodeFailure, ECCError, NetworkError, NCCLTimeoutError, ...).

``write_synth_campaigns(lake, cluster)`` publishes them through the real paths: the jobs as a ``sacct``
export (``ingest_job_file``: job type Pretrain from the name), the checkpoint events as
``checkpoints/cluster=<c>/date=<d>/events.parquet``, the failures' diagnoses as diagnosis records, the
detector's hang episodes and evidence logs, the recoveries' action logs. ``simulate`` is also the simulator
the what-if model is checked on (``acme.report.goodput_validation``).
The same seed gives the same campaigns.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
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
    hang_share: float = 0.0
    """Share of the failures that are hangs: the job stops making progress and runs on until detected."""
    hang_detect_min: float = 10.0
    """Mean time from a hang's onset to its detection (the watchdog's timeout without a detector)."""
    detector: bool = False
    """Hangs are found by ``acme.detection`` (detection episodes in the lake) rather than a watchdog."""
    automatic_recovery: bool = False
    """Failures are recovered by ``recover_training`` (recovery action logs in the lake)."""


CAMPAIGNS = (
    CampaignSpec("gpt-104b-pretrain", "u-llm104", datetime(2023, 3, 1, 2, tzinfo=UTC), 14, 128, 7.0, 3.0, 20.0,
                 35.0, 120.0, 0.15, 180.0, "SH-IDC1-10-140-1", 7_104_000, 0.2, 10.0),
    CampaignSpec("gpt-123b-pretrain", "u-llm123", datetime(2023, 4, 3, 2, tzinfo=UTC), 20, 256, 10.0, 0.5, 1.0,
                 8.0, 5.0, 0.05, 150.0, "SH-IDC1-10-140-2", 7_123_000, 0.2, 4.0, True, True),
)  # fmt: skip


@dataclass
class SimulatedCampaign:
    """One simulated campaign: its jobs, checkpoint events, hangs and automated recoveries."""

    spec: CampaignSpec
    jobs: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    hangs: list[dict[str, Any]] = field(default_factory=list)  # job_id, since, detected_at
    recoveries: list[dict[str, Any]] = field(default_factory=list)  # job_id, started_at, restarted_at


def _failure(spec: CampaignSpec, rng: random.Random, onset: datetime) -> tuple[str, str, datetime | None]:
    """(reason, sacct state, detection time or None) of a failure at ``onset``: a hang runs on until its
    detection (about ``hang_detect_min``), a crash ends the job at once."""
    if rng.random() < spec.hang_share:
        return (
            "NCCLTimeoutError",
            "FAILED",
            onset + timedelta(minutes=spec.hang_detect_min * rng.uniform(0.5, 1.5)),
        )
    crashes = [r for r in REASONS if r[0] != "NCCLTimeoutError"]  # a NCCL timeout is a hang's end
    reason, _, state = rng.choices(crashes, weights=[w for _, w, _ in crashes])[0]
    return reason, state, None


def _run_job(
    spec: CampaignSpec, rng: random.Random, sim: SimulatedCampaign, job: dict, resume_step: int
) -> int:
    """Simulate one job from its start: start-up, saves every ``interval_h`` until its failure (drawn from its
    start) or the campaign's end; fill in its end, state and reason. Returns its last step."""
    end_of_campaign = spec.start + timedelta(days=spec.days)
    start = job["start"]
    resume_at = start + timedelta(minutes=spec.restart_latency_min * rng.uniform(0.7, 1.3))
    onset = start + timedelta(hours=rng.expovariate(1 / spec.mtbf_h))
    if onset > resume_at:  # a job failing during its start-up never resumed
        sim.events.append({"job_id": job["job_id"], "event": "resume", "step": resume_step, "at": resume_at,
                           "duration_s": None, "source_job_id": job.pop("source", None)})  # fmt: skip
    t, step = resume_at, resume_step
    while onset > resume_at:
        save_at = t + timedelta(hours=spec.interval_h)
        if save_at >= min(onset, end_of_campaign):
            break
        step += int(spec.steps_per_hour * spec.interval_h)
        stall = spec.save_stall_min * rng.uniform(0.8, 1.2)
        sim.events.append({"job_id": job["job_id"], "event": "save", "step": step, "at": save_at,
                           "duration_s": stall * 60, "source_job_id": None})  # fmt: skip
        job["saves"].append(step)
        t = save_at + timedelta(minutes=stall)
    if onset >= end_of_campaign:
        job.update(end=end_of_campaign, state="COMPLETED", reason=None)
        return step
    reason, state, detected = _failure(spec, rng, onset)
    job.update(end=onset, state=state, reason=reason)
    if detected is not None:
        # A hang: found by the detector (then killed within a minute or two) or by the watchdog's timeout.
        end = detected + timedelta(minutes=rng.uniform(1, 2)) if spec.detector else detected
        job["end"] = end
        sim.hangs.append({"job_id": job["job_id"], "since": onset, "detected_at": detected})
    return step


def simulate(spec: CampaignSpec, seed: int = 0) -> SimulatedCampaign:
    """One campaign: jobs restarting one another from the last checkpoint (or, after a loss spike, from the
    save before the one before it) until ``spec.days`` have passed."""
    rng = random.Random(f"{spec.name}:{seed}")
    sim = SimulatedCampaign(spec)
    end_of_campaign = spec.start + timedelta(days=spec.days)
    saves: list[tuple[int, str]] = []  # every save so far: (step, job)
    submit, start = spec.start - timedelta(minutes=10), spec.start
    resume_step, source, attempt = 0, None, 0
    while start < end_of_campaign:
        job: dict[str, Any] = {"job_id": str(spec.first_job_id + attempt),  # Slurm job ids are numbers
               "job_name": spec.name if attempt == 0 else f"{spec.name}-r{attempt}", "user": spec.user,
               "submit": submit, "start": start, "nodes": spec.nodes, "prefix": spec.node_prefix,
               "source": source, "saves": []}  # fmt: skip
        _run_job(spec, rng, sim, job, resume_step)
        saves += [(s, job["job_id"]) for s in job.pop("saves")]
        job.pop("source", None)
        sim.jobs.append(job)
        if job["state"] == "COMPLETED":
            break
        back = 1
        if job["reason"] != "NCCLTimeoutError" and rng.random() < spec.rollback_share:
            job["reason"], job["state"] = "LossSpike", "FAILED"
            back = 3  # a loss spike resumes from the save before the last one
        if len(saves) >= back:
            resume_step, source = saves[-back]
        attempt += 1
        submit = job["end"] + timedelta(minutes=spec.resubmit_min * rng.uniform(0.5, 1.5))
        start = submit + timedelta(minutes=spec.resubmit_min * rng.uniform(0.02, 0.2))  # its queue
        if spec.automatic_recovery:
            began = job["end"] + (submit - job["end"]) * 0.3
            sim.recoveries.append({"job_id": job["job_id"], "started_at": began, "restarted_at": submit})
    return sim


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

    all_jobs, all_events, simulated = [], [], []
    for spec in CAMPAIGNS:
        sim = simulate(spec, seed)
        all_jobs += sim.jobs
        all_events += sim.events
        simulated.append(sim)
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
    evidence = [write_evidence(lake, cluster, sim) for sim in simulated]
    return {
        "cluster": cluster,
        "campaigns": [s.name for s in CAMPAIGNS],
        "jobs": len(all_jobs),
        "interruptions": len(records),
        "checkpoint_events": len(events),
        "job_partitions": ingested.get("partitions"),
        "checkpoint_partitions": len(partitions),
        "diagnosis_partitions": written,
        "detection_episodes": sum(n for n, _ in evidence),
        "recovery_logs": sum(n for _, n in evidence),
    }


def _stamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_evidence(lake: Lake, cluster: str, sim: SimulatedCampaign) -> tuple[int, int]:
    """The detector's episodes and evidence logs of a campaign's hangs (when ``spec.detector``) and the action
    logs of its automated recoveries, where ``acme.detection`` and ``acme.recovery`` write them. Returns
    (episodes, recovery logs) written."""
    import json

    from acme import lake_keys

    episodes = 0
    for hang in sim.hangs if sim.spec.detector else []:
        since, detected = _stamp(hang["since"]), hang["detected_at"].isoformat()
        episode = since.replace("-", "").replace(":", "")
        lake.write_json(
            lake_keys.detection_episode(cluster, hang["job_id"], "hang"),
            {"episode": episode, "first_detected": detected, "last_detected": detected},
        )
        line = f"{_stamp(hang['detected_at'])} ERROR acme-detect: hang: synthesized campaign, since {since}\n"
        location = lake_keys.detection_evidence_log(cluster, hang["job_id"], "hang", episode)
        lake.write_bytes(f"logs/{location}", line.encode())
        episodes += 1
    for recovery in sim.recoveries:
        began, restarted = recovery["started_at"], recovery["restarted_at"]
        marks = [began + (restarted - began) * share for share in (0.0, 0.1, 0.6, 0.8, 1.0)]
        steps = [
            (step, marks[i], marks[i + 1])
            for i, step in enumerate(("plan", "decide", "checkpoint", "restart"))
        ]
        recovery_id = f"synth-{recovery['job_id']}"
        lines = [
            json.dumps(
                {
                    "recovery_id": recovery_id,
                    "cluster": cluster,
                    "job_id": recovery["job_id"],
                    "step": step,
                    "idempotency_key": "restart" if step == "restart" else None,
                    "dry_run": False,
                    "inputs": {},
                    "started_at": first.isoformat(),
                    "ended_at": last.isoformat(),
                    "seconds": round((last - first).total_seconds(), 3),
                    "status": "done",
                    "result": {},
                },
                sort_keys=True,
            )  # fmt: skip
            for step, first, last in steps
        ]
        key = f"{lake_keys.recovery_job(cluster, recovery['job_id'])}/{recovery_id}/actions.jsonl"
        lake.write_bytes(key, ("\n".join(lines) + "\n").encode())
    return episodes, len(sim.recoveries)


def campaign_frames(sim: SimulatedCampaign) -> dict[str, Any]:
    """The simulated campaign as :func:`acme.report.ettr.account` reads it from a lake: ``jobs``, ``events``,
    ``reasons``, ``evidence`` (detection episodes only when ``spec.detector``) and ``until``."""
    import pandas as pd

    from acme.report.ettr import FailureEvidence

    jobs = pd.DataFrame(
        [{"job_id": j["job_id"], "job_name": j["job_name"], "user": j["user"], "job_type": "Pretrain",
          "state": j["state"], "submit_time": j["submit"], "start_time": j["start"], "end_time": j["end"],
          "gpu_num": 8 * j["nodes"]} for j in sim.jobs]
    )  # fmt: skip
    for column in ("submit_time", "start_time", "end_time"):
        jobs[column] = pd.to_datetime(jobs[column], utc=True)
    events = pd.DataFrame(
        sim.events, columns=["job_id", "event", "step", "at", "duration_s", "source_job_id"]
    )
    events["at"] = pd.to_datetime(events["at"], utc=True)
    evidence = FailureEvidence(
        hangs={h["job_id"]: (h["since"], h["detected_at"]) for h in sim.hangs} if sim.spec.detector else {},
        recoveries={
            r["job_id"]: (r["restarted_at"] - r["started_at"]).total_seconds() for r in sim.recoveries
        },
    )
    return {"jobs": jobs, "events": events, "reasons": {j["job_id"]: j["reason"] for j in sim.jobs if j["reason"]},
            "evidence": evidence, "until": max(j["end"] for j in sim.jobs)}  # fmt: skip


def campaign_row(sim: SimulatedCampaign) -> dict[str, Any]:
    """The simulated campaign's row of ``ettr_campaigns``, measured by the report's own accounting."""
    from acme.report.ettr import account, link_campaigns

    f = campaign_frames(sim)
    tables = account(f["jobs"], f["events"], f["reasons"], link_campaigns(f["jobs"], f["events"]), f["until"],
                     f["evidence"])  # fmt: skip
    (row,) = tables["ettr_campaigns"].to_dict("records")
    return row
