"""Effective training time ratio (ETTR) of pretraining campaigns: the report's section 10.

**Campaigns.** A campaign is a sequence of jobs restarting one another. Jobs are linked in start order:

1. *Checkpoint lineage* first: a job whose first checkpoint event is a ``resume`` from a checkpoint saved
   by an earlier job continues that job's campaign, whatever its name.
2. Otherwise *name and user*: a job continues the newest campaign of the same user whose base name is
   the same -- the job name lower-cased with restart markers removed from its end (``-r3``, ``_retry2``,
   ``.restart-1``, ``-resume4``, ``-attempt2``, ``-try3``, or a separator and 1-3 digits: ``-2``) --
   when that campaign's last job had ended before this one started and this one was submitted at most
   ``ACME_ETTR_MAX_GAP_HOURS`` (24) after it ended. Jobs that overlap in time are not restarts.
3. Anything else starts a new campaign. Only GPU jobs of ``ACME_ETTR_JOB_TYPES`` (``Pretrain``) with a
   name and a user take part (AcmeTrace publishes no job names: its reports have no campaigns).

**Checkpoint events** (``checkpoints/cluster=<c>/date=<d>/events.parquet``: ``job_id``, ``event``
``save``/``resume``, ``step``, ``at``, ``duration_s`` of a save's stall, ``source_job_id`` of a resume)
come from the training framework's log or the checkpoint store; the demo's are synthesized
(``acme.report.synth_campaigns``). Without them, restart latency and lost progress are unknown (0) and only
the queueing between jobs is counted.

**Time accounting** per campaign, from its first job's start to its last job's end (wall time):

* *rework since the last checkpoint*: from the checkpoint the next job resumed from to the failure's onset
  (all of the job's time after its own resume when the next job resumed from an older checkpoint; to the
  job's end when nothing resumed from it yet);
* *hangs before detection*: a hang's onset to its detection -- from the detector's episode
  (``detection/episodes/...``) when there is one, else, for a NCCLTimeoutError, the watchdog's
  ``WATCHDOG_TIMEOUT_MIN`` before the job's end (estimated);
* *start-up to the first step*: from a job's start to its resume event (launch, loading the checkpoint,
  warm-up);
* *queueing after a crash*: from the failure being declared (a crash's end, a hang's detection) to the next
  job's start; the recovery action logs of ``recover_training`` say how much of it was the recovery's work;
* *checkpoint stalls*: the training time blocked by saves (``duration_s``);
* *productive time* = wall - all of the above; ETTR = productive / wall. GPU-hours lost to failures
  multiply the rework, the hangs, the restarts' latency and the queueing by the GPUs of the job concerned
  (queueing: the next job's); the first job's start-up and the stalls are not charged to a failure.

MTBF = the jobs' run time until a failure's onset (the last job's until its end) per failure; MTTR = the mean
time from a failure being declared to the next job's first step. The interrupting reason is the job's
diagnosis (the newest record of ``diagnoses/``) or else its final state. Where each figure comes from, the
checkpoint-interval advice and the what-if model: :mod:`acme.report.goodput`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd
    from matplotlib.figure import Figure

    from acme.lake import Lake
    from acme.report.model import Characterization, ReportInputs

SECTION_TITLE = "Effective training time of pretraining campaigns (ETTR)"
_RESTART_SUFFIX = re.compile(r"(?:[-_.](?:r|retry|restart|resume|rerun|attempt|try)[-_.]?\d+|[-_.]\d{1,3})$")
JOB_COLUMNS = ("job_id", "job_name", "user", "job_type", "state", "submit_time", "start_time", "end_time",
               "gpu_num")  # fmt: skip
CAMPAIGN_COLUMNS = ["campaign", "user", "jobs", "interruptions", "first_start", "last_end", "gpus_max", "wall_h",
                    "productive_h", "ettr", "lost_since_checkpoint_h", "restart_latency_h", "queue_after_crash_h",
                    "checkpoint_stall_h", "hang_before_detection_h", "gpu_hours_lost", "checkpoint_interval_min",
                    "checkpoint_stall_s", "restart_latency_min", "queue_min", "checkpoint_events", "exposure_h",
                    "mtbf_h", "mttr_min", "startup_mean_min", "queue_mean_min", "hangs", "hang_detect_min",
                    "rollback_share", "rollback_depth", "jobs_resumed", "hangs_with_evidence", "recoveries_logged",
                    "recovery_actions_h"]  # fmt: skip
WATCHDOG_TIMEOUT_MIN = 10.0
"""How long a hang lasts when no detection evidence says: Megatron-LM's ``--distributed-timeout-minutes``
default, after which the NCCL watchdog kills the job (the hang's failure, NCCLTimeoutError)."""
HANG_REASONS = frozenset({"NCCLTimeoutError"})
INTERRUPTION_COLUMNS = ["campaign", "job_id", "ended_at", "state", "reason", "lost_since_checkpoint_h",
                        "hang_before_detection_h", "hang_evidence", "restart_latency_h", "queue_after_crash_h",
                        "recovery_actions_h", "time_to_recover_h", "saves_skipped", "gpu_hours_lost"]  # fmt: skip


def base_name(job_name: str) -> str:
    """The campaign part of a job name: lower-cased, restart markers stripped from the end."""
    name = job_name.strip().lower()
    while True:
        stripped = _RESTART_SUFFIX.sub("", name)
        if stripped == name or not stripped:
            return name
        name = stripped


# --- reading --------------------------------------------------------------------------------------


def _read_days(
    lake: Lake, key_of: Callable[[str, str], str], cluster: str, days: list[str], columns=None, filters=None
) -> pd.DataFrame:
    """The day partitions ``key_of(cluster, day)`` (an ``acme.lake_keys`` function) that exist, as one frame."""
    import pandas as pd
    import pyarrow.parquet as pq

    frames = []
    for day in days:
        key = key_of(cluster, day)
        if lake.exists(key):
            with lake.local_file(key) as path:
                names = pq.read_schema(path).names
                chosen = [c for c in columns or names if c in names]
                frames.append(pq.read_table(path, columns=chosen, filters=filters).to_pandas())
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(columns or []))


def campaign_jobs(lake: Lake, cluster: str, days: list[str]) -> tuple[pd.DataFrame, int]:
    """The period's named GPU jobs of the ETTR job types, and how many such jobs had no name or user."""
    # Only the chosen types are converted (a six-month Seren history is a million rows, few of them Pretrain).
    from acme import lake_keys, settings

    types = settings.ettr().job_types
    wanted = [("job_type", "in", list(types)), ("gpu_num", ">", 0)]
    jobs = _read_days(lake, lake_keys.jobs_partition, cluster, days, JOB_COLUMNS, filters=wanted)
    if jobs.empty:
        return jobs, 0
    chosen = jobs[jobs["job_type"].isin(types) & (jobs["gpu_num"].fillna(0) > 0)]
    chosen = chosen[chosen["start_time"].notna()]
    named = (
        chosen["job_name"].notna()
        & chosen["user"].notna()
        & (chosen["job_name"].astype(str).str.strip() != "")
    )
    return chosen[named].reset_index(drop=True), int((~named).sum())


def checkpoint_events(lake: Lake, cluster: str, days: list[str]) -> pd.DataFrame:
    from acme import lake_keys

    return _read_days(
        lake, lake_keys.checkpoint_events, cluster, days,
        ["job_id", "event", "step", "at", "duration_s", "source_job_id"],
    )  # fmt: skip


def diagnosed_reasons(lake: Lake, cluster: str, days: list[str]) -> dict[str, str]:
    """job id -> reason of its newest diagnosis record."""
    from acme import lake_keys

    records = _read_days(
        lake, lake_keys.diagnoses_partition, cluster, days, ["job_id", "reason", "diagnosed_at"]
    )
    if records.empty:
        return {}
    newest = records.sort_values("diagnosed_at").groupby("job_id").last()
    return {str(k): str(v) for k, v in newest["reason"].items()}


@dataclass
class FailureEvidence:
    """What the detector and the recovery wrote about a campaign's failures (see :func:`failure_evidence`)."""

    hangs: dict[str, tuple[datetime, datetime]] = field(default_factory=dict)  # job -> (onset, detected at)
    recoveries: dict[str, float] = field(default_factory=dict)  # job -> seconds, first step to restart


def failure_evidence(lake: Lake, cluster: str, job_ids: list[str]) -> FailureEvidence:
    """The hang episodes of ``acme.detection`` (``detection/episodes/.../{hang,stall}.json``: onset = the
    episode's ``since``, detected = its ``first_detected``) and the action logs of ``acme.recovery``
    (``recovery/cluster=<c>/job=<id>/<recovery>/actions.jsonl``: from the first step's start to the end of the
    ``restart`` step that was done, not a dry run) of the given jobs."""
    import json

    from acme import lake_keys
    from acme.lake_keys import safe_name

    found = FailureEvidence()
    for job_id in job_ids:
        for kind in ("hang", "stall"):
            episode = lake.read_json(lake_keys.detection_episode(cluster, job_id, kind), default=None)
            if episode and job_id not in found.hangs:
                onset = datetime.strptime(str(episode["episode"])[:15], "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
                found.hangs[job_id] = (onset, datetime.fromisoformat(episode["first_detected"]))
        if safe_name(job_id) != job_id:
            continue
        for key in lake.list(lake_keys.recovery_job(cluster, job_id)):
            if not key.endswith("/actions.jsonl"):
                continue
            records = [
                json.loads(line) for line in lake.read_bytes(key).decode().splitlines() if line.strip()
            ]
            restarts = [r for r in records if r.get("step") == "restart" and r.get("status") == "done"
                        and not r.get("dry_run")]  # fmt: skip
            if restarts:
                first = min(datetime.fromisoformat(r["started_at"]) for r in records)
                last = max(datetime.fromisoformat(r["ended_at"]) for r in restarts)
                found.recoveries[job_id] = found.recoveries.get(job_id, 0.0) + (last - first).total_seconds()
    return found


# --- linking ----------------------------------------------------------------------------------------


def link_campaigns(
    jobs: pd.DataFrame, events: pd.DataFrame, gap_hours: float | None = None
) -> dict[str, str]:
    """job id -> campaign id (see the module doc for the rule)."""
    from acme import settings

    gap_s = 3600 * (settings.ettr().max_gap_hours if gap_hours is None else gap_hours)
    resumed_from: dict[str, str] = {}
    if not events.empty:
        resumes = events[(events["event"] == "resume") & events["source_job_id"].notna()].sort_values("at")
        for job_id, source in zip(resumes["job_id"], resumes["source_job_id"], strict=True):
            resumed_from.setdefault(str(job_id), str(source))
    campaign_of: dict[str, str] = {}
    last_job: dict[str, dict] = {}  # campaign -> its latest job
    newest_by_key: dict[tuple[str, str], str] = {}
    for job in jobs.sort_values(["start_time", "job_id"]).to_dict("records"):
        job_id = str(job["job_id"])
        key = (str(job["user"]), base_name(str(job["job_name"])))
        campaign = campaign_of.get(resumed_from.get(job_id, ""))
        if campaign is None and key in newest_by_key:
            previous = last_job[newest_by_key[key]]
            ended = previous["end_time"]
            ended_before = ended is not None and ended == ended and ended <= job["start_time"]
            if ended_before and (job["submit_time"] - ended).total_seconds() <= gap_s:
                campaign = newest_by_key[key]
        if campaign is None:
            campaign = f"{key[1]} ({key[0]}, {job['start_time']:%Y-%m-%d})"
            taken = set(last_job)
            if campaign in taken:  # two campaigns of one name starting the same day
                campaign = next(
                    f"{campaign} #{n}" for n in range(2, len(taken) + 3) if f"{campaign} #{n}" not in taken
                )
        campaign_of[job_id] = campaign
        last_job[campaign] = job
        newest_by_key[key] = campaign
    return campaign_of


# --- accounting ----------------------------------------------------------------------------------------


@dataclass
class _Campaign:
    """What one campaign's jobs add up to while :func:`account` walks them in start order."""

    name: str
    totals: dict[str, float] = field(
        default_factory=lambda: {"lost_ckpt": 0.0, "restart": 0.0, "queue": 0.0, "stall": 0.0, "hang": 0.0}
    )
    gpu_h: dict[str, float] = field(
        default_factory=lambda: {"lost_ckpt": 0.0, "restart": 0.0, "queue": 0.0, "hang": 0.0}
    )
    exposure: float = 0.0  # seconds the jobs ran until a failure's onset (or their end): MTBF's denominator
    startups: list[float] = field(default_factory=list)  # every resumed job's start -> resume
    hang_delays: list[float] = field(default_factory=list)
    skipped: list[int] = field(
        default_factory=list
    )  # saves after the one resumed from (to the onset), per failure
    recovery_s: list[float] = field(default_factory=list)
    hangs_with_evidence: int = 0
    resumed: int = 0
    saves: list[tuple[int, datetime, float]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    queues: list[float] = field(default_factory=list)
    interruptions: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    has_events: bool = False


def account(
    jobs: pd.DataFrame,
    events: pd.DataFrame,
    reasons: dict[str, str],
    campaign_of: dict[str, str],
    until: datetime,
    evidence: FailureEvidence | None = None,
) -> dict[str, pd.DataFrame]:
    """The section's tables: ``ettr_campaigns``, ``ettr_interruptions``, ``ettr_reasons``, ``ettr_progress``,
    and from :mod:`acme.report.goodput` ``ettr_sources``, ``ettr_advice``, ``ettr_whatif`` (see the module
    doc)."""
    import pandas as pd

    from acme.report import goodput

    evidence = evidence or FailureEvidence()
    save_times = {}
    if not events.empty:
        saved = events[events["event"] == "save"]
        save_times = {
            (str(j), int(st)): a.to_pydatetime()
            for j, st, a in zip(saved["job_id"], saved["step"], saved["at"], strict=True)
        }

    by_job = {str(j): g.sort_values("at") for j, g in events.groupby("job_id")} if not events.empty else {}
    campaigns, interruptions, progress = [], [], []
    jobs = jobs.assign(campaign=jobs["job_id"].astype(str).map(campaign_of))
    for campaign, members in jobs.sort_values("start_time").groupby("campaign", sort=False):
        tally = _Campaign(str(campaign))
        records = members.to_dict("records")
        for index, job in enumerate(records):
            following = records[index + 1] if index + 1 < len(records) else None
            _account_job(tally, job, following, index, (by_job, reasons, evidence, save_times), until)
        campaigns.append(_campaign_row(tally, records, by_job, until))
        interruptions += tally.interruptions
        progress += tally.progress
    campaigns_frame = pd.DataFrame(campaigns, columns=CAMPAIGN_COLUMNS)
    if len(campaigns_frame):
        campaigns_frame = campaigns_frame.sort_values("first_start").reset_index(drop=True)
    interruptions_frame = pd.DataFrame(interruptions, columns=INTERRUPTION_COLUMNS)
    reasons_frame = (
        interruptions_frame.groupby("reason", as_index=False)
        .agg(interruptions=("job_id", "count"), gpu_hours_lost=("gpu_hours_lost", "sum"))
        .sort_values("gpu_hours_lost", ascending=False)
        .reset_index(drop=True)
    )
    total = reasons_frame["gpu_hours_lost"].sum()
    reasons_frame["gpu_hours_share"] = reasons_frame["gpu_hours_lost"] / total if total else 0.0
    return {
        "ettr_campaigns": campaigns_frame,
        "ettr_interruptions": interruptions_frame,
        "ettr_reasons": reasons_frame,
        "ettr_progress": pd.DataFrame(progress, columns=["campaign", "job_id", "at", "step", "kind"]),
        "ettr_sources": goodput.sources(campaigns_frame),
        "ettr_advice": goodput.advice(campaigns_frame),
        "ettr_whatif": goodput.whatif(campaigns_frame),
    }


def _job_checkpoints(mine, start: datetime) -> tuple[datetime, int, list[tuple[int, datetime, float]]]:
    """(resumed at, resumed from step, saves as (step, at, stall s)) of one job's checkpoint events."""
    resume_at, resume_step, saves = start, 0, []
    if mine is not None and len(mine):
        resumed = mine[mine["event"] == "resume"]
        if len(resumed):
            resume_at = resumed["at"].iloc[0].to_pydatetime()
            resume_step = int(resumed["step"].iloc[0])
        saves = [
            (int(s), a.to_pydatetime(), float(d or 0))
            for s, a, d in zip(mine["step"], mine["at"], mine["duration_s"], strict=True)
            if a is not None
        ]
        saves = [s for s, e in zip(saves, mine["event"], strict=True) if e == "save"]
    return resume_at, resume_step, saves


def _account_job(
    tally: _Campaign,
    job: dict,
    following: dict | None,
    index: int,
    sources: tuple[dict, dict, FailureEvidence, dict],
    until: datetime,
) -> None:
    """Add one job of the campaign (``following``: the job that restarted it) to ``tally``; ``sources``:
    checkpoint events by job, diagnosed reasons, detection and recovery evidence, (job, step) -> save time."""
    by_job = sources[0]
    job_id = str(job["job_id"])
    start = job["start_time"].to_pydatetime()
    end = _end_of(job, by_job.get(job_id), until)
    gpus = float(job["gpu_num"])
    mine = by_job.get(job_id)
    tally.has_events = tally.has_events or (mine is not None and len(mine) > 0)
    resume_at, resume_step, saves = _job_checkpoints(mine, start)
    if resume_at == start and tally.saves:  # never resumed (failed while starting): still at the last save
        resume_step = tally.saves[-1][0]
    latency = max(0.0, (min(resume_at, end) - start).total_seconds())
    tally.totals["restart"] += latency  # the first job's start-up is not productive either ...
    if resume_at > start:
        tally.startups.append(latency)
        tally.resumed += 1
    if index:  # ... but only a restart's latency is lost to a failure
        tally.gpu_h["restart"] += latency * gpus / 3600
        if resume_at > start:
            tally.latencies.append(latency)
    tally.totals["stall"] += sum(d for _, _, d in saves)
    tally.saves.extend(saves)
    tally.progress.append(_progress_row(tally.name, job_id, resume_at, resume_step, "resume"))
    tally.progress += [_progress_row(tally.name, job_id, a, s, "save") for s, a, _ in saves]
    step_at_end = _step_at(saves, resume_at, resume_step, end)
    if following is None and job["state"] in ("COMPLETED", "RUNNING"):
        tally.exposure += (end - start).total_seconds()
        tally.progress.append(_progress_row(tally.name, job_id, end, step_at_end, "end"))
        return
    onset = _account_interruption(tally, job, following, sources, (resume_at, end, saves))
    tally.exposure += max(0.0, (onset - start).total_seconds())
    tally.progress.append(_progress_row(tally.name, job_id, end, step_at_end, "failure"))


def _hang_span(
    tally: _Campaign, job_id: str, reason: str, floor: datetime, end: datetime, evidence: FailureEvidence
) -> tuple[datetime, datetime, str]:
    """(onset, declared, evidence) of an interrupted job's failure: a detected hang from its episode; a hang
    without one (reason NCCLTimeoutError) ended by the watchdog, ``WATCHDOG_TIMEOUT_MIN`` before the job's end;
    a crash at the job's end."""
    if job_id in evidence.hangs:
        onset, detected = evidence.hangs[job_id]
        onset = min(max(onset, floor), end)
        tally.hangs_with_evidence += 1
        return onset, min(max(detected, onset), end), "detection episode"
    if reason in HANG_REASONS:
        return max(floor, end - timedelta(minutes=WATCHDOG_TIMEOUT_MIN)), end, "watchdog timeout (estimated)"
    return end, end, ""


def _account_interruption(
    tally: _Campaign, job: dict, following: dict | None, sources: tuple, span: tuple
) -> datetime:
    """Add an interrupted job's losses: progress since the checkpoint its restart used (until the failure's
    onset), a hang until its detection, the queueing from then to the restart and the restart's latency.
    Returns the failure's onset."""
    by_job, reasons, evidence, save_times = sources
    resume_at, end, saves = span
    job_id, gpus = str(job["job_id"]), float(job["gpu_num"])
    next_resume = _resume_of(by_job.get(str(following["job_id"]))) if following is not None else None
    kept_at = next((a for s, a, _ in saves if next_resume is not None and s == next_resume[1]), None)
    if kept_at is None and next_resume is None and saves:
        kept_at = saves[-1][1]  # nothing resumed yet: the last save is what a restart would use
    reason = reasons.get(job_id) or str(job["state"])
    onset, declared, hang_evidence = _hang_span(tally, job_id, reason, kept_at or resume_at, end, evidence)
    lost = max(0.0, (onset - (kept_at or resume_at)).total_seconds())
    hang = max(0.0, (declared - onset).total_seconds())
    queue = (
        max(0.0, (following["start_time"].to_pydatetime() - declared).total_seconds())
        if following is not None
        else 0.0
    )
    next_gpus = float(following["gpu_num"]) if following is not None else gpus
    next_latency = (
        max(0.0, (next_resume[0] - following["start_time"].to_pydatetime()).total_seconds())
        if following is not None and next_resume is not None
        else 0.0
    )
    resumed_save = (
        _resumed_save(by_job.get(str(following["job_id"])), save_times) if following is not None else None
    )
    # Saves made after the checkpoint the restart used (a rollback past a loss spike), whichever job made them.
    skipped = sum(1 for _, a, _ in tally.saves if resumed_save is not None and resumed_save < a <= onset)
    tally.totals["lost_ckpt"] += lost
    tally.totals["hang"] += hang
    tally.totals["queue"] += queue
    tally.gpu_h["lost_ckpt"] += lost * gpus / 3600
    tally.gpu_h["hang"] += hang * gpus / 3600
    tally.gpu_h["queue"] += queue * next_gpus / 3600
    tally.queues.append(queue)
    if hang_evidence:
        tally.hang_delays.append(hang)
    if resumed_save is not None:
        tally.skipped.append(skipped)
    recovery = evidence.recoveries.get(job_id)
    if recovery is not None:
        tally.recovery_s.append(recovery)
    tally.interruptions.append({
        "campaign": tally.name, "job_id": job_id, "ended_at": end, "state": job["state"], "reason": reason,
        "lost_since_checkpoint_h": lost / 3600, "hang_before_detection_h": hang / 3600,
        "hang_evidence": hang_evidence, "restart_latency_h": next_latency / 3600,
        "queue_after_crash_h": queue / 3600,
        "recovery_actions_h": None if recovery is None else recovery / 3600,
        "time_to_recover_h": (queue + next_latency) / 3600 if following is not None else None,
        "saves_skipped": skipped,
        "gpu_hours_lost": (lost * gpus + hang * gpus + next_latency * next_gpus + queue * next_gpus) / 3600,
    })  # fmt: skip
    return onset


def _campaign_row(tally: _Campaign, members: list[dict], by_job: dict, until: datetime) -> dict[str, Any]:
    """The campaign's row of ``ettr_campaigns``."""
    first_start = members[0]["start_time"].to_pydatetime()
    last_end = _end_of(members[-1], by_job.get(str(members[-1]["job_id"])), until)
    wall = max(1.0, (last_end - first_start).total_seconds())
    productive = max(0.0, wall - sum(tally.totals.values()))
    saves = tally.saves
    intervals = [(b[1] - a[1]).total_seconds() for a, b in zip(saves, saves[1:], strict=False) if b[1] > a[1]]
    return {
        "campaign": tally.name, "user": members[0]["user"], "jobs": len(members),
        "interruptions": len(tally.interruptions),
        "first_start": first_start, "last_end": last_end, "gpus_max": int(max(m["gpu_num"] for m in members)),
        "wall_h": wall / 3600, "productive_h": productive / 3600, "ettr": productive / wall,
        "lost_since_checkpoint_h": tally.totals["lost_ckpt"] / 3600,
        "restart_latency_h": tally.totals["restart"] / 3600,
        "queue_after_crash_h": tally.totals["queue"] / 3600, "checkpoint_stall_h": tally.totals["stall"] / 3600,
        "gpu_hours_lost": sum(tally.gpu_h.values()),
        "checkpoint_interval_min": _median(intervals) / 60 if intervals else None,
        "checkpoint_stall_s": _median([d for _, _, d in saves]) if saves else None,
        "restart_latency_min": _median(tally.latencies) / 60 if tally.latencies else None,
        "queue_min": _median(tally.queues) / 60 if tally.queues else None,
        "checkpoint_events": tally.has_events,
        "hang_before_detection_h": tally.totals["hang"] / 3600, **_failure_figures(tally),
    }  # fmt: skip


def _failure_figures(tally: _Campaign) -> dict[str, Any]:
    """MTBF (exposure per failure), mean time to recover (failure declared -> the next job's resume) and the
    means the what-if model of :mod:`acme.report.goodput` takes."""
    import statistics

    failures = len(tally.interruptions)
    recovered = [r["time_to_recover_h"] for r in tally.interruptions if r["time_to_recover_h"] is not None]
    return {
        "exposure_h": tally.exposure / 3600,
        "mtbf_h": tally.exposure / 3600 / failures if failures else None,
        "mttr_min": 60 * statistics.fmean(recovered) if recovered else None,
        "startup_mean_min": statistics.fmean(tally.startups) / 60 if tally.startups else None,
        "queue_mean_min": statistics.fmean(tally.queues) / 60 if tally.queues else None,
        "hangs": len(tally.hang_delays),
        "hang_detect_min": statistics.fmean(tally.hang_delays) / 60 if tally.hang_delays else None,
        "rollback_share": sum(1 for k in tally.skipped if k) / len(tally.skipped) if tally.skipped else None,
        "rollback_depth": statistics.fmean(k for k in tally.skipped if k) if any(tally.skipped) else None,
        "jobs_resumed": tally.resumed,
        "hangs_with_evidence": tally.hangs_with_evidence,
        "recoveries_logged": len(tally.recovery_s),
        "recovery_actions_h": sum(tally.recovery_s) / 3600,
    }


def _median(values: list[float]) -> float:
    import statistics

    return float(statistics.median(values))


def _end_of(job: dict, events, until: datetime) -> datetime:
    end = job["end_time"]
    if end is not None and end == end:
        return end.to_pydatetime()
    latest = events["at"].max().to_pydatetime() if events is not None and len(events) else None
    return max(job["start_time"].to_pydatetime(), min(latest or until, until))


def _resumed_save(events, save_times: dict) -> datetime | None:
    """When the save a job resumed from was made (None: no resume, or from a save not in the events)."""
    if events is None or not len(events):
        return None
    resumed = events[(events["event"] == "resume") & events["source_job_id"].notna()]
    if not len(resumed):
        return None
    return save_times.get((str(resumed["source_job_id"].iloc[0]), int(resumed["step"].iloc[0])))


def _resume_of(events) -> tuple[datetime, int] | None:
    if events is None or not len(events):
        return None
    resumed = events[events["event"] == "resume"]
    return (resumed["at"].iloc[0].to_pydatetime(), int(resumed["step"].iloc[0])) if len(resumed) else None


def _step_at(saves, resume_at: datetime, resume_step: int, when: datetime) -> float:
    """Progress at ``when``, extrapolated at the job's own pace from its saves."""
    points = [(resume_at, resume_step)] + [(a, s) for s, a, _ in saves]
    if len(points) < 2:
        return float(resume_step)
    (t0, s0), (t1, s1) = points[0], points[-1]
    span = (t1 - t0).total_seconds()
    rate = (s1 - s0) / span if span > 0 else 0.0
    return float(s1 + rate * max(0.0, (when - t1).total_seconds()))


def _progress_row(campaign: str, job_id: str, at: datetime, step: float, kind: str) -> dict[str, Any]:
    return {"campaign": campaign, "job_id": job_id, "at": at, "step": step, "kind": kind}


# --- the report section ----------------------------------------------------------------------------------


def attach_ettr(report: Characterization, inputs: ReportInputs) -> None:
    """Add the ETTR section to a characterization: its tables and its figure's finding (its entry in
    :mod:`acme.report.sections`)."""
    lake = inputs.lake
    from acme import settings
    from acme.report.model import FigureSpec, pct

    jobs, unnamed = campaign_jobs(lake, report.cluster, report.days)
    until = datetime.combine(date.fromisoformat(report.days[-1]), datetime.max.time(), tzinfo=UTC)
    if jobs.empty:
        tables = account(jobs, checkpoint_events(lake, report.cluster, []), {}, {}, until)
        finding = f"no named {'/'.join(settings.ettr().job_types)} GPU job in this period" + (
            f" ({unnamed:,} without a job name or user: the source publishes none)" if unnamed else ""
        )
        report.tables.update(tables)
        report.figures.append(FigureSpec("ettr_progress", SECTION_TITLE, finding, list(tables), False))
        return
    first = jobs["start_time"].min().date()
    last = max(jobs["end_time"].max().date() if jobs["end_time"].notna().any() else first, until.date())
    event_days = [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]
    events = checkpoint_events(lake, report.cluster, event_days)
    events = events[events["job_id"].astype(str).isin(set(jobs["job_id"].astype(str)))]
    campaign_of = link_campaigns(jobs, events)
    reasons = diagnosed_reasons(lake, report.cluster, report.days)
    failed = [str(j) for j, state in zip(jobs["job_id"], jobs["state"], strict=True) if state != "COMPLETED"]
    evidence = failure_evidence(lake, report.cluster, failed)
    tables = account(jobs, events, reasons, campaign_of, until, evidence)
    report.tables.update(tables)
    campaigns, reasons = tables["ettr_campaigns"], tables["ettr_reasons"]
    advice = {row["campaign"]: row for row in tables["ettr_advice"].to_dict("records")}
    parts = [
        f"{row['campaign']}: ETTR {pct(row['ettr'])} over {row['wall_h']:.0f} h, {row['interruptions']} "
        f"interruptions, {row['gpu_hours_lost']:,.0f} GPU-h lost" + _advice_text(advice.get(row["campaign"]))
        for row in campaigns.sort_values("gpu_hours_lost", ascending=False).head(3).to_dict("records")
    ]
    if len(reasons) and reasons["gpu_hours_lost"].sum():
        top = reasons.iloc[0]
        parts.append(
            f"costliest reason {top['reason']} ({pct(top['gpu_hours_share'])} of the GPU-hours lost)"
        )
    report.summary["ettr"] = {
        row["campaign"]: round(float(row["ettr"]), 4) for row in campaigns.to_dict("records")
    }
    report.figures.append(FigureSpec("ettr_progress", SECTION_TITLE, "; ".join(parts), list(tables), True))


def _advice_text(advice: dict[str, Any] | None) -> str:
    """The finding's clause of a campaign's checkpoint advice (empty without one)."""
    if (
        not advice
        or advice["young_daly_interval_min"] is None
        or advice["young_daly_interval_min"] != advice["young_daly_interval_min"]
    ):
        return ""
    return (
        f" (MTBF {advice['mtbf_h']:.1f} h; checkpointing every {advice['young_daly_interval_min']:.0f} min, "
        f"Young/Daly's, instead of {advice['interval_used_min']:.0f} min: model ETTR "
        f"{100 * advice['model_ettr_young_daly']:.1f}% instead of {100 * advice['model_ettr_used_interval']:.1f}%)"
    )


def draw_ettr_progress(report: Characterization) -> Figure:
    """Training progress against time per campaign (the paper's Figure 14), interruptions marked."""
    import pandas as pd
    from matplotlib.figure import Figure

    progress = report.tables["ettr_progress"]
    campaigns = report.tables["ettr_campaigns"].sort_values("gpu_hours_lost", ascending=False).head(4)
    from acme.report.style import FIGURE_WIDTH_IN, LEGEND_FONT

    # As wide as the page like every figure of the report: two campaigns a row, the time breakdown beside them.
    panels = max(1, len(campaigns))
    columns, rows_of_panels = min(2, panels), (panels + 1) // 2
    figure = Figure(figsize=(FIGURE_WIDTH_IN, 3.8 * max(1, rows_of_panels)), layout="constrained")
    halves: Any = figure.subfigures(1, 2, width_ratios=[2.5 if columns == 2 else 1.5, 1.1])
    left, right = halves[0], halves[1]
    axes = [ax for row in left.subplots(rows_of_panels, columns, squeeze=False) for ax in row]
    draw_breakdown(right.subplots(), report.tables["ettr_campaigns"])
    for unused in axes[panels:]:
        unused.set_visible(False)
    for ax, campaign in zip(axes, campaigns.to_dict("records"), strict=False):
        rows = progress[progress["campaign"] == campaign["campaign"]].copy()
        rows["at"] = pd.to_datetime(rows["at"], utc=True).dt.tz_localize(None)
        for _, part in rows.groupby("job_id", sort=False):
            part = part.sort_values("at")
            kept = part[part["kind"].isin(["resume", "save", "end"])]
            ax.plot(kept["at"], kept["step"], color="tab:blue", linewidth=1.6)
            lost = part[part["kind"] == "failure"]
            if len(lost):
                last_kept = kept.iloc[-1]
                ax.plot([last_kept["at"], lost["at"].iloc[0]], [last_kept["step"], lost["step"].iloc[0]],
                        color="tab:red", linestyle=":", linewidth=1.2)  # fmt: skip
                ax.scatter(lost["at"], lost["step"], marker="x", color="tab:red", zorder=3, s=28)
        ax.set_title(f"{campaign['campaign']}\nETTR {campaign['ettr']:.0%}", fontsize=9)
        ax.set_xlabel("time (UTC)")
        ax.set_ylabel("training step")
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.grid(alpha=0.3)
    axes[0].plot([], [], color="tab:blue", label="progress kept")
    axes[0].plot([], [], color="tab:red", linestyle=":", label="progress lost (since last checkpoint)")
    axes[0].scatter([], [], marker="x", color="tab:red", label="interruption")
    axes[0].legend(fontsize=LEGEND_FONT, loc="upper left")
    return figure


BREAKDOWN = (  # (column of ettr_campaigns, label, colour): the stacked bar's segments, bottom to top
    ("productive_h", "productive", "tab:green"),
    ("lost_since_checkpoint_h", "rework since ckpt", "tab:red"),
    ("hang_before_detection_h", "hang undetected", "tab:purple"),
    ("queue_after_crash_h", "queue after crash", "tab:orange"),
    ("restart_latency_h", "start-up", "tab:olive"),
    ("checkpoint_stall_h", "checkpoint stalls", "tab:gray"),
)


def draw_breakdown(ax, campaigns: pd.DataFrame) -> None:
    """One stacked bar per campaign: its wall time split into productive time and the lost components (% of
    wall), the number of failures, MTBF and MTTR under it."""
    from acme.report.style import LEGEND_FONT

    rows = campaigns.sort_values("first_start").to_dict("records")
    labels = []
    for x, row in enumerate(rows):
        bottom = 0.0
        for column, label, colour in BREAKDOWN:
            share = 100 * float(row[column] or 0) / row["wall_h"]
            ax.bar(x, share, bottom=bottom, color=colour, width=0.6, label=label if x == 0 else None)
            if share >= 4:
                ax.text(
                    x,
                    bottom + share / 2,
                    f"{share:.0f}%",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                )
            bottom += share
        mtbf = f"{row['mtbf_h']:.1f} h" if row["mtbf_h"] == row["mtbf_h"] and row["mtbf_h"] else "n/a"
        mttr = (
            f"{row['mttr_min']:.0f} min" if row["mttr_min"] == row["mttr_min"] and row["mttr_min"] else "n/a"
        )
        labels.append(
            f"{str(row['campaign']).split(' (')[0]}\n{row['interruptions']} failures\nMTBF {mtbf}\nMTTR {mttr}"
        )
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylim(0, 100)
    ax.set_ylabel("share of wall time (%)")
    ax.set_title("where the time went", fontsize=9)
    handles, names = ax.get_legend_handles_labels()
    ax.figure.legend(handles[::-1], names[::-1], fontsize=LEGEND_FONT - 2, loc="outside lower center", ncol=2,
                     frameon=False)  # fmt: skip
