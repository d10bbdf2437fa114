"""Where a campaign's time went and what checkpoint interval it should have used (the ETTR section's advice).

**Sources.** :func:`sources` says, per campaign and component of :mod:`acme.report.ettr`'s time accounting,
where its figure comes from in the lake and what is estimated when that source is missing:

=============================  ===========================================  ===========================================
component                      measured from                                when missing
=============================  ===========================================  ===========================================
queueing after a crash         job records: failure declared -> next start  never missing (the records are the campaign);
                               (recovery action logs: the part inside       without action logs the recovery's own share
                               ``recover_training``)                        is not known
start-up to the first step     checkpoint ``resume`` events: start -> resume  a job without one is counted as rework from
                                                                            its start (upper bound)
rework since the last          checkpoint events: the save the next job     without any checkpoint events: the whole run
checkpoint                     resumed from -> the failure's onset          of the interrupted job (upper bound)
checkpoint stalls              ``save`` events' ``duration_s``              0 (unknown)
hangs before detection         detection evidence (``detection/episodes``:  a NCCLTimeoutError without an episode: the
                               the episode's onset -> first detection)      watchdog's ``WATCHDOG_TIMEOUT_MIN`` (10 min)
=============================  ===========================================  ===========================================

**Model.** With failures at rate ``1/M`` from each job's start (``M``, the MTBF: the jobs' run time until a
failure's onset over the number of failures), start-up ``R``, compute ``τ`` between saves, save stall ``C``,
a share ``ρ`` of restarts rolled back ``d`` saves (past a loss spike), a share ``h`` of failures that are hangs
undetected for ``H``, and queueing ``Q`` from a failure to the next start, a job survives its start-up with
probability ``exp(-R/M)`` and each segment ``s = τ + C`` with ``p = exp(-s/M)``, committing ``τ`` per segment, so
per failure cycle (renewal reward)::

    committed = τ · exp(-R/M) · (p/(1-p) - ρ · p·(1-p^d)/(1-p))     cycle = M + h·H + Q     ETTR = committed/cycle

(a rollback loses the segments the job completed since the save it went back to, at most ``d``). To first
order ``ETTR ≈ τ/s · (M - s/2 - R) / (M + h·H + Q)``: a failure loses half a segment on average, and Young's
interval ``√(2·C·M)`` maximizes it. The model has no fitted
constant; ``benchmarks/bench_ettr_whatif.py`` checks it on simulated campaigns it never saw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

WHATIF_INTERVALS_MIN = (15, 30, 60, 120, 240, 480)
WHATIF_LATENCIES_MIN = (5, 15, 60, 180)
WHATIF_HANG_DELAYS_MIN = (1, 5, 10, 30)
WHATIF_COLUMNS = ["campaign", "knob", "value_min", "measured", "ettr", "vs_measured_setting_points"]
ADVICE_COLUMNS = ["campaign", "failures", "mtbf_h", "mttr_min", "checkpoint_cost_s", "interval_used_min",
                  "young_daly_interval_min", "measured_ettr", "model_ettr_used_interval",
                  "model_ettr_young_daly", "gain_points", "model_best_interval_min", "model_ettr_best"]  # fmt: skip
SOURCES_COLUMNS = ["campaign", "component", "hours", "share_of_wall", "source", "coverage", "estimate"]


@dataclass(frozen=True)
class Params:
    """The model's inputs, in hours (see the module doc)."""

    mtbf: float
    interval: float  # compute between saves
    stall: float
    startup: float
    queue: float
    hang_share: float = 0.0
    hang_delay: float = 0.0
    rollback_share: float = 0.0
    rollback_depth: float = 0.0  # saves lost by a rollback

    @property
    def restart_latency(self) -> float:
        """Failure declared -> first step of the next job: queueing and start-up."""
        return self.queue + self.startup


def expected_ettr(p: Params) -> float:
    """The model's ETTR (module doc); 0 when the campaign cannot progress."""
    if p.mtbf <= 0 or p.interval <= 0:
        return 0.0
    survive = math.exp(-(p.interval + p.stall) / p.mtbf)
    if survive >= 1.0:
        return p.interval / (p.interval + p.stall)
    # A rollback of d saves loses the segments the job completed since them, at most d (P(N >= k) = p^k).
    rolled_back = p.rollback_share * survive * (1 - survive**p.rollback_depth) / (1 - survive)
    committed = p.interval * math.exp(-p.startup / p.mtbf) * (survive / (1 - survive) - rolled_back)
    return max(0.0, committed / (p.mtbf + p.hang_share * p.hang_delay + p.queue))


def young_daly_interval(stall_h: float, mtbf_h: float) -> float | None:
    """Young's first-order optimal compute time between checkpoints, √(2·C·M) (hours)."""
    return math.sqrt(2 * stall_h * mtbf_h) if stall_h > 0 and mtbf_h > 0 else None


def with_restart_latency(p: Params, latency_h: float) -> Params:
    """``p`` with queueing + start-up = ``latency_h``, split in the measured proportion."""
    total = p.restart_latency
    share = p.startup / total if total > 0 else 0.0
    return replace(p, startup=latency_h * share, queue=latency_h * (1 - share))


def params_of(campaign: dict[str, Any]) -> Params | None:
    """The model's inputs from an ``ettr_campaigns`` row; None without failures or a measured interval."""
    failures = campaign["interruptions"]
    mtbf, spacing = campaign.get("mtbf_h"), campaign.get("checkpoint_interval_min")
    if not failures or not mtbf or not spacing or spacing != spacing:
        return None
    stall = (campaign.get("checkpoint_stall_s") or 0) / 3600
    hangs = campaign.get("hangs") or 0
    return Params(
        mtbf=float(mtbf),
        interval=max(1e-6, spacing / 60 - stall),
        stall=stall,
        startup=_number(campaign.get("startup_mean_min")) / 60,
        queue=_number(campaign.get("queue_mean_min")) / 60,
        hang_share=hangs / failures,
        hang_delay=_number(campaign.get("hang_detect_min")) / 60,
        rollback_share=_number(campaign.get("rollback_share")),
        rollback_depth=_number(campaign.get("rollback_depth")),
    )


def pooled_params(campaigns: list[dict[str, Any]]) -> Params | None:
    """The model's inputs from several ``ettr_campaigns`` rows of one kind of campaign (a longer history than
    one campaign): each input the failure-weighted mean of the rows', the MTBF their exposure per failure."""
    chosen = [(c, p) for c in campaigns if (p := params_of(c)) is not None]
    if not chosen:
        return None
    weights = [float(c["interruptions"]) for c, _ in chosen]
    total = sum(weights)

    def mean(name: str) -> float:
        return sum(w * getattr(p, name) for w, (_, p) in zip(weights, chosen, strict=True)) / total

    return Params(
        mtbf=sum(float(c["exposure_h"]) for c, _ in chosen) / total,
        **{
            name: mean(name)
            for name in (
                "interval",
                "stall",
                "startup",
                "queue",
                "hang_share",
                "hang_delay",
                "rollback_share",
                "rollback_depth",
            )
        },
    )


def _number(value: Any) -> float:
    return 0.0 if value is None or value != value else float(value)


def best_interval(p: Params) -> float:
    """The compute interval (hours) maximizing the model, by golden-section search over 1 min to 2·MTBF."""
    low, high = 1 / 60, max(2 / 60, 2 * p.mtbf)
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if expected_ettr(replace(p, interval=a)) < expected_ettr(replace(p, interval=b)):
            low = a
        else:
            high = b
    return (low + high) / 2


def advice(campaigns: pd.DataFrame) -> pd.DataFrame:
    """Per campaign: MTBF, MTTR, checkpoint cost, the interval used and Young/Daly's, and the model's ETTR of
    each beside the measured one."""
    import pandas as pd

    rows = []
    for campaign in campaigns.to_dict("records") if len(campaigns) else []:
        p = params_of(campaign)
        if p is None:
            continue
        young = young_daly_interval(p.stall, p.mtbf)
        used = expected_ettr(p)
        at_young = expected_ettr(replace(p, interval=young)) if young else None
        best = best_interval(p)
        rows.append({
            "campaign": campaign["campaign"], "failures": campaign["interruptions"], "mtbf_h": p.mtbf,
            "mttr_min": campaign.get("mttr_min"), "checkpoint_cost_s": p.stall * 3600,
            "interval_used_min": p.interval * 60, "young_daly_interval_min": young * 60 if young else None,
            "measured_ettr": campaign["ettr"], "model_ettr_used_interval": used, "model_ettr_young_daly": at_young,
            "gain_points": 100 * (at_young - used) if at_young is not None else None,
            "model_best_interval_min": best * 60, "model_ettr_best": expected_ettr(replace(p, interval=best)),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=ADVICE_COLUMNS)


def whatif(campaigns: pd.DataFrame) -> pd.DataFrame:
    """The model's ETTR per campaign over checkpoint interval, restart latency (queueing + start-up) and
    hang-detection delay, one knob at a time, the others as measured (long format)."""
    import pandas as pd

    rows = []
    for campaign in campaigns.to_dict("records") if len(campaigns) else []:
        p = params_of(campaign)
        if p is None:
            continue
        base = expected_ettr(p)
        knobs = [
            ("checkpoint interval", p.interval, WHATIF_INTERVALS_MIN, lambda m, p=p: replace(p, interval=m / 60)),
            ("restart latency", p.restart_latency, WHATIF_LATENCIES_MIN,
             lambda m, p=p: with_restart_latency(p, m / 60)),
            ("hang-detection delay", p.hang_delay, WHATIF_HANG_DELAYS_MIN,
             lambda m, p=p: replace(p, hang_delay=m / 60)),
        ]  # fmt: skip
        for knob, measured_h, values, change in knobs:
            rows.append(_whatif_row(campaign["campaign"], knob, measured_h * 60, True, base, base))
            for minutes in values:
                rows.append(
                    _whatif_row(
                        campaign["campaign"], knob, minutes, False, expected_ettr(change(minutes)), base
                    )
                )
    return pd.DataFrame(rows, columns=WHATIF_COLUMNS)


def _whatif_row(campaign: str, knob: str, minutes: float, measured: bool, ettr: float, base: float) -> dict:
    return {"campaign": campaign, "knob": knob, "value_min": minutes, "measured": measured, "ettr": ettr,
            "vs_measured_setting_points": 100 * (ettr - base)}  # fmt: skip


def sources(campaigns: pd.DataFrame) -> pd.DataFrame:
    """Per campaign and component: hours, share of wall time, where the figure comes from, how much of it was
    measured and what was estimated (the table of the module doc)."""
    import pandas as pd

    rows = []
    for c in campaigns.to_dict("records") if len(campaigns) else []:
        failures, hangs = int(c["interruptions"]), int(c.get("hangs") or 0)
        evidence = int(c.get("hangs_with_evidence") or 0)
        logged = int(c.get("recoveries_logged") or 0)
        events = bool(c["checkpoint_events"])
        parts = [
            ("productive", c["productive_h"], "wall time (job records) minus the components below", "", ""),
            ("queueing after a crash", c["queue_after_crash_h"],
             "job records: failure declared (crash end, hang detected) to the next job's start"
             + (f"; {c['recovery_actions_h']:.1f} h of it inside recover_training (recovery action logs)"
                if logged else ""),
             f"{logged} of {failures} failures with a recovery action log",
             "" if logged else "no recovery action log: the automated recovery's share is not known"),
            ("start-up to the first step", c["restart_latency_h"], "checkpoint resume events: job start to resume",
             f"{c.get('jobs_resumed', 0)} of {c['jobs']} jobs resumed",
             "" if events else "no checkpoint events: 0 (unknown); jobs without a resume count as rework"),
            ("rework since the last checkpoint", c["lost_since_checkpoint_h"],
             "checkpoint events: the save the next job resumed from to the failure's onset",
             f"{failures} failures",
             "" if events else "no checkpoint events: the interrupted jobs' whole run (upper bound)"),
            ("checkpoint stalls", c["checkpoint_stall_h"], "checkpoint save events' duration_s", "",
             "" if events else "no checkpoint events: 0 (unknown)"),
            ("hangs before detection", c["hang_before_detection_h"],
             "detection evidence (detection/episodes): hang onset to first detection", f"{evidence} of {hangs} hangs",
             f"{hangs - evidence} NCCLTimeoutError hangs without evidence: the watchdog's 10 min assumed"
             if hangs > evidence else ""),
        ]  # fmt: skip
        for component, hours, source, coverage, estimate in parts:
            rows.append({"campaign": c["campaign"], "component": component, "hours": hours,
                         "share_of_wall": hours / c["wall_h"] if c["wall_h"] else None, "source": source,
                         "coverage": coverage, "estimate": estimate})  # fmt: skip
    return pd.DataFrame(rows, columns=SOURCES_COLUMNS)
