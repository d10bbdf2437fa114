"""Does the what-if model of :mod:`acme.report.goodput` predict campaigns it never saw?

Each check draws a campaign at random (:func:`random_spec`: MTBF 3-30 h, 15 min - 4 h between saves, stalls
of 0.5-30 min, start-up 3-45 min, resubmission 3-150 min, up to 20 % rollbacks and 40 % hangs detected after
2-30 min), simulates it once with :func:`acme.report.synth_campaigns.simulate` and measures its inputs with
the report's own accounting (:func:`acme.report.synth_campaigns.campaign_row`): that run is all the model is
calibrated on. It then changes one setting -- the checkpoint interval (x0.25, x0.5, x2, x4, Young/Daly's), the
restart latency (x0.3, x3) or the hang-detection delay (x0.2, x3) -- predicts the ETTR from the first run's
measured inputs, and simulates the changed campaign with other seeds: the simulated ETTR (the mean of
``runs`` campaigns) is the truth the prediction is scored against. None of the drawn campaigns is a demo
campaign, and the model has no constant fitted to any campaign.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from acme.report import goodput
from acme.report.synth_campaigns import CampaignSpec, campaign_row, simulate


def random_spec(rng: random.Random, index: int) -> CampaignSpec:
    """A held-out campaign (module doc)."""
    hangs = rng.random() < 0.7
    return CampaignSpec(
        name=f"heldout-{index}", user=f"u-heldout{index}", start=datetime(2024, 1, 1, tzinfo=UTC),
        days=rng.randint(14, 30), nodes=rng.choice((16, 64, 128, 256)), mtbf_h=rng.uniform(3, 30),
        interval_h=rng.uniform(0.25, 4), save_stall_min=rng.uniform(0.5, 30),
        restart_latency_min=rng.uniform(3, 45), resubmit_min=rng.uniform(3, 150),
        rollback_share=rng.uniform(0, 0.2), steps_per_hour=100.0, node_prefix=f"node-{index}",
        first_job_id=9_000_000 + 1000 * index, hang_share=rng.uniform(0.05, 0.4) if hangs else 0.0,
        hang_detect_min=rng.uniform(2, 30), detector=rng.random() < 0.5, automatic_recovery=False,
    )  # fmt: skip


def changes(spec: CampaignSpec, p: goodput.Params) -> list[tuple[str, CampaignSpec, goodput.Params]]:
    """(what changed, the changed campaign, the model's inputs for it) for each what-if of one campaign."""
    out = []
    for factor in (0.25, 0.5, 2.0, 4.0):
        out.append((f"interval x{factor:g}", replace(spec, interval_h=spec.interval_h * factor),
                    replace(p, interval=p.interval * factor)))  # fmt: skip
    young = goodput.young_daly_interval(p.stall, p.mtbf)
    if young:
        out.append(("interval Young/Daly", replace(spec, interval_h=young), replace(p, interval=young)))
    for factor in (0.3, 3.0):
        out.append((f"restart latency x{factor:g}",
                    replace(spec, restart_latency_min=spec.restart_latency_min * factor,
                            resubmit_min=spec.resubmit_min * factor),
                    goodput.with_restart_latency(p, p.restart_latency * factor)))  # fmt: skip
    if spec.hang_share:
        for factor in (0.2, 3.0):
            out.append((f"hang delay x{factor:g}", replace(spec, hang_detect_min=spec.hang_detect_min * factor),
                        replace(p, hang_delay=p.hang_delay * factor)))  # fmt: skip
    return out


def validate(
    campaigns: int = 20, observed: int = 4, runs: int = 4, seed: int = 2026, only: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """One row per (held-out campaign, what-if): the ETTR predicted from ``observed`` simulated runs of the
    campaign (seeds 0..observed-1, pooled: :func:`acme.report.goodput.pooled_params`), the mean simulated ETTR
    of ``runs`` runs with the setting changed (seeds 100..), their difference in points. ``only``: the
    what-ifs to run (their names' prefixes; all when empty)."""
    import statistics

    rng = random.Random(seed)
    rows = []
    for index in range(campaigns):
        spec = random_spec(rng, index)
        history = [campaign_row(simulate(spec, seed=s)) for s in range(observed)]
        p = goodput.pooled_params(history)
        if p is None:  # no failure or no second save: nothing to calibrate on
            continue
        for what, changed, inputs in changes(spec, p):
            if only and not what.startswith(only):
                continue
            simulated = [campaign_row(simulate(changed, seed=100 + s))["ettr"] for s in range(runs)]
            predicted = goodput.expected_ettr(inputs)
            rows.append({
                "campaign": spec.name, "mtbf_h": spec.mtbf_h, "interval_h": spec.interval_h,
                "what_if": what, "observed_ettr": statistics.fmean(r["ettr"] for r in history),
                "predicted_ettr": predicted, "simulated_ettr": statistics.fmean(simulated),
                "simulated_spread_points": 100 * (max(simulated) - min(simulated)),
                "error_points": 100 * (predicted - statistics.fmean(simulated)),
            })  # fmt: skip
    return rows
