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

* *lost since the last checkpoint*: from the checkpoint the next job resumed from to the end of the
  interrupted job (all of the job's time after its own resume when the next job resumed from an
  older checkpoint; to the job's end when nothing resumed from it yet);
* *start-up and restart latency*: from a job's start to its resume event (launch, loading the
  checkpoint, warm-up);
* *queueing after a crash*: from an interrupted job's end to the next job's start;
* *checkpoint stalls*: the training time blocked by saves (``duration_s``);
* *productive time* = wall - all of the above; ETTR = productive / wall. GPU-hours lost to failures
  multiply the lost progress, the restarts' latency and the queueing by the GPUs of the job concerned
  (queueing: the next job's); the first job's start-up and the stalls are not charged to a failure.

The interrupting reason is the job's diagnosis (the newest record of ``diagnoses/``) or else its final
state. **What-if**: with ``n`` interruptions over ``P`` productive hours, save stall ``C``, interval
``I``, restart latency ``L`` and queueing ``Q``, the expected ETTR is ``P / (P + P*C/I + n*(I/2 + L +
Q))`` (a failure loses on average half an interval); the table evaluates it for other intervals and
latencies, with Young's optimum ``I* = sqrt(2*C*MTBF)``.
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
    from acme.report.model import Characterization

SECTION = 10
SECTION_TITLE = "Effective training time of pretraining campaigns (ETTR)"
_RESTART_SUFFIX = re.compile(r"(?:[-_.](?:r|retry|restart|resume|rerun|attempt|try)[-_.]?\d+|[-_.]\d{1,3})$")
JOB_COLUMNS = ("job_id", "job_name", "user", "job_type", "state", "submit_time", "start_time", "end_time",
               "gpu_num")  # fmt: skip
CAMPAIGN_COLUMNS = ["campaign", "user", "jobs", "interruptions", "first_start", "last_end", "gpus_max", "wall_h",
                    "productive_h", "ettr", "lost_since_checkpoint_h", "restart_latency_h", "queue_after_crash_h",
                    "checkpoint_stall_h", "gpu_hours_lost", "checkpoint_interval_min", "checkpoint_stall_s",
                    "restart_latency_min", "queue_min", "checkpoint_events"]  # fmt: skip
WHATIF_INTERVALS_MIN = (15, 30, 60, 120, 240)
WHATIF_LATENCIES_MIN = (5, 15, 60, 180)


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
        default_factory=lambda: {"lost_ckpt": 0.0, "restart": 0.0, "queue": 0.0, "stall": 0.0}
    )
    gpu_h: dict[str, float] = field(default_factory=lambda: {"lost_ckpt": 0.0, "restart": 0.0, "queue": 0.0})
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
) -> dict[str, pd.DataFrame]:
    """The section's tables: ``ettr_campaigns``, ``ettr_interruptions``, ``ettr_reasons``, ``ettr_whatif``,
    ``ettr_progress`` (see the module doc)."""
    import pandas as pd

    by_job = {str(j): g.sort_values("at") for j, g in events.groupby("job_id")} if not events.empty else {}
    campaigns, interruptions, progress = [], [], []
    jobs = jobs.assign(campaign=jobs["job_id"].astype(str).map(campaign_of))
    for campaign, members in jobs.sort_values("start_time").groupby("campaign", sort=False):
        tally = _Campaign(str(campaign))
        records = members.to_dict("records")
        for index, job in enumerate(records):
            following = records[index + 1] if index + 1 < len(records) else None
            _account_job(tally, job, following, index, by_job, reasons, until)
        campaigns.append(_campaign_row(tally, records, by_job, until))
        interruptions += tally.interruptions
        progress += tally.progress
    campaigns_frame = pd.DataFrame(campaigns, columns=CAMPAIGN_COLUMNS)
    if len(campaigns_frame):
        campaigns_frame = campaigns_frame.sort_values("first_start").reset_index(drop=True)
    interruptions_frame = pd.DataFrame(
        interruptions,
        columns=["campaign", "job_id", "ended_at", "state", "reason", "lost_since_checkpoint_h",
                 "restart_latency_h", "queue_after_crash_h", "gpu_hours_lost"],
    )  # fmt: skip
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
        "ettr_whatif": whatif(campaigns_frame),
        "ettr_progress": pd.DataFrame(progress, columns=["campaign", "job_id", "at", "step", "kind"]),
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
    by_job: dict,
    reasons: dict,
    until: datetime,
) -> None:
    """Add one job of the campaign (``following``: the job that restarted it) to ``tally``."""
    job_id = str(job["job_id"])
    start = job["start_time"].to_pydatetime()
    end = _end_of(job, by_job.get(job_id), until)
    gpus = float(job["gpu_num"])
    mine = by_job.get(job_id)
    tally.has_events = tally.has_events or (mine is not None and len(mine) > 0)
    resume_at, resume_step, saves = _job_checkpoints(mine, start)
    latency = max(0.0, (min(resume_at, end) - start).total_seconds())
    tally.totals["restart"] += latency  # the first job's start-up is not productive either ...
    if index:  # ... but only a restart's latency is lost to a failure
        tally.gpu_h["restart"] += latency * gpus / 3600
        tally.latencies.append(latency)
    tally.totals["stall"] += sum(d for _, _, d in saves)
    tally.saves.extend(saves)
    tally.progress.append(_progress_row(tally.name, job_id, resume_at, resume_step, "resume"))
    tally.progress += [_progress_row(tally.name, job_id, a, s, "save") for s, a, _ in saves]
    step_at_end = _step_at(saves, resume_at, resume_step, end)
    if following is None and job["state"] in ("COMPLETED", "RUNNING"):
        tally.progress.append(_progress_row(tally.name, job_id, end, step_at_end, "end"))
        return
    _account_interruption(tally, job, following, by_job, reasons, (resume_at, end, saves))
    tally.progress.append(_progress_row(tally.name, job_id, end, step_at_end, "failure"))


def _account_interruption(
    tally: _Campaign, job: dict, following: dict | None, by_job: dict, reasons: dict, span: tuple
) -> None:
    """Add an interrupted job's losses: progress since the checkpoint its restart used, the restart's
    latency and the queueing before it."""
    resume_at, end, saves = span
    job_id, gpus = str(job["job_id"]), float(job["gpu_num"])
    next_resume = _resume_of(by_job.get(str(following["job_id"]))) if following is not None else None
    kept_at = next((a for s, a, _ in saves if next_resume is not None and s == next_resume[1]), None)
    if kept_at is None and next_resume is None and saves:
        kept_at = saves[-1][1]  # nothing resumed yet: the last save is what a restart would use
    lost = max(0.0, (end - kept_at).total_seconds() if kept_at else (end - resume_at).total_seconds())
    queue = (
        max(0.0, (following["start_time"].to_pydatetime() - end).total_seconds())
        if following is not None
        else 0.0
    )
    next_gpus = float(following["gpu_num"]) if following is not None else gpus
    next_latency = (
        max(0.0, (next_resume[0] - following["start_time"].to_pydatetime()).total_seconds())
        if following is not None and next_resume is not None
        else 0.0
    )
    tally.totals["lost_ckpt"] += lost
    tally.totals["queue"] += queue
    tally.gpu_h["lost_ckpt"] += lost * gpus / 3600
    tally.gpu_h["queue"] += queue * next_gpus / 3600
    tally.queues.append(queue)
    tally.interruptions.append({
        "campaign": tally.name, "job_id": job_id, "ended_at": end, "state": job["state"],
        "reason": reasons.get(job_id) or str(job["state"]), "lost_since_checkpoint_h": lost / 3600,
        "restart_latency_h": next_latency / 3600, "queue_after_crash_h": queue / 3600,
        "gpu_hours_lost": (lost * gpus + next_latency * next_gpus + queue * next_gpus) / 3600,
    })  # fmt: skip


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
    }  # fmt: skip


def whatif(campaigns: pd.DataFrame) -> pd.DataFrame:
    """Expected ETTR of each campaign under other checkpoint intervals and restart latencies."""
    import math

    import pandas as pd

    rows = []
    for campaign in campaigns.to_dict("records") if len(campaigns) else []:
        failures = campaign["interruptions"]
        productive = campaign["productive_h"]
        stall_h = (campaign["checkpoint_stall_s"] or 0) / 3600
        queue_h = (campaign["queue_min"] or 0) / 60
        interval_h = (campaign["checkpoint_interval_min"] or 0) / 60
        latency_h = (campaign["restart_latency_min"] or 0) / 60
        if not failures or productive <= 0 or not interval_h:
            continue
        mtbf_h = productive / failures

        def expected(i_h: float, l_h: float, p=productive, c=stall_h, n=failures, q=queue_h) -> float:
            return p / (p + p * c / i_h + n * (i_h / 2 + l_h + q))

        optimum = math.sqrt(2 * stall_h * mtbf_h) if stall_h else None
        row = {
            "campaign": campaign["campaign"], "mtbf_h": mtbf_h, "measured_ettr": campaign["ettr"],
            "model_ettr": expected(interval_h, latency_h), "interval_min": interval_h * 60,
            "restart_latency_min": latency_h * 60, "young_optimal_interval_min": optimum * 60 if optimum else None,
        }  # fmt: skip
        for minutes in WHATIF_INTERVALS_MIN:
            row[f"ettr_interval_{minutes}min"] = expected(minutes / 60, latency_h)
        for minutes in WHATIF_LATENCIES_MIN:
            row[f"ettr_latency_{minutes}min"] = expected(interval_h, minutes / 60)
        rows.append(row)
    columns = ["campaign", "mtbf_h", "measured_ettr", "model_ettr", "interval_min", "restart_latency_min",
               "young_optimal_interval_min"] + [f"ettr_interval_{m}min" for m in WHATIF_INTERVALS_MIN] + [
               f"ettr_latency_{m}min" for m in WHATIF_LATENCIES_MIN]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _median(values: list[float]) -> float:
    import statistics

    return float(statistics.median(values))


def _end_of(job: dict, events, until: datetime) -> datetime:
    end = job["end_time"]
    if end is not None and end == end:
        return end.to_pydatetime()
    latest = events["at"].max().to_pydatetime() if events is not None and len(events) else None
    return max(job["start_time"].to_pydatetime(), min(latest or until, until))


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


def attach_ettr(report: Characterization, lake: Lake) -> None:
    """Add section 10 to a characterization: its tables and its figure's finding (the one call made by
    ``acme.report.characterize``)."""
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
        report.figures.append(
            FigureSpec("ettr_progress", SECTION, SECTION_TITLE, finding, list(tables), False)
        )
        return
    first = jobs["start_time"].min().date()
    last = max(jobs["end_time"].max().date() if jobs["end_time"].notna().any() else first, until.date())
    event_days = [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]
    events = checkpoint_events(lake, report.cluster, event_days)
    events = events[events["job_id"].astype(str).isin(set(jobs["job_id"].astype(str)))]
    campaign_of = link_campaigns(jobs, events)
    tables = account(jobs, events, diagnosed_reasons(lake, report.cluster, report.days), campaign_of, until)
    report.tables.update(tables)
    campaigns, reasons = tables["ettr_campaigns"], tables["ettr_reasons"]
    parts = [
        f"{row['campaign']}: ETTR {pct(row['ettr'])} over {row['wall_h']:.0f} h, {row['interruptions']} "
        f"interruptions, {row['gpu_hours_lost']:,.0f} GPU-h lost"
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
    report.figures.append(
        FigureSpec("ettr_progress", SECTION, SECTION_TITLE, "; ".join(parts), list(tables), True)
    )


def draw_ettr_progress(report: Characterization) -> Figure:
    """Training progress against time per campaign (the paper's Figure 14), interruptions marked."""
    import pandas as pd
    from matplotlib.figure import Figure

    progress = report.tables["ettr_progress"]
    campaigns = report.tables["ettr_campaigns"].sort_values("gpu_hours_lost", ascending=False).head(4)
    from acme.report.style import FIGURE_WIDTH_IN, LEGEND_FONT

    # As wide as the page like every figure of the report: two campaigns a row.
    panels = max(1, len(campaigns))
    columns, rows_of_panels = min(2, panels), (panels + 1) // 2
    figure = Figure(figsize=(FIGURE_WIDTH_IN, 3.8 * rows_of_panels), layout="constrained")
    axes = [ax for row in figure.subplots(rows_of_panels, columns, squeeze=False) for ax in row]
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
