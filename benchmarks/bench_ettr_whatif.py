"""The ETTR what-if model on campaigns held out from its calibration (issue 26): ``acme.report.goodput_validation``.

Per held-out campaign (random MTBF, interval, stalls, latencies, rollbacks, hangs: ``random_spec``), the model's
inputs are measured by the report's accounting on ``--observed`` simulated runs; each what-if (interval x0.25,
x0.5, x2, x4 and Young/Daly's; restart latency x0.3, x3; hang-detection delay x0.2, x3) is predicted from them
and compared with the mean ETTR of ``--runs`` new simulated runs with that setting. Also: the same with one
observed run (what one campaign's own history is worth), and the demo campaigns' model-vs-measured ETTR.

Results go to benchmarks/results/ettr_whatif.json.
Usage: python benchmarks/bench_ettr_whatif.py [--campaigns 30] [--observed 4] [--runs 4]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
RESULTS = ROOT / "benchmarks" / "results" / "ettr_whatif.json"


def summary(rows: list[dict]) -> dict:
    errors = [abs(r["error_points"]) for r in rows]
    by_kind: dict[str, list[float]] = {}
    for r in rows:
        by_kind.setdefault(r["what_if"], []).append(r["error_points"])
    return {
        "what_ifs": len(rows),
        "within_5_points": sum(e <= 5 for e in errors), "share_within_5_points": sum(e <= 5 for e in errors) / len(rows),
        "abs_error_median": statistics.median(errors), "abs_error_p90": sorted(errors)[int(0.9 * (len(errors) - 1))],
        "abs_error_max": max(errors), "mean_error_points": statistics.fmean(r["error_points"] for r in rows),
        "by_what_if": {k: {"n": len(v), "mean": statistics.fmean(v), "max_abs": max(abs(x) for x in v)}
                       for k, v in sorted(by_kind.items())},
    }  # fmt: skip


def main() -> None:
    from acme.report import goodput
    from acme.report.goodput_validation import validate
    from acme.report.synth_campaigns import CAMPAIGNS, campaign_row, simulate

    parser = argparse.ArgumentParser()
    parser.add_argument("--campaigns", type=int, default=30)
    parser.add_argument("--observed", type=int, default=4)
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    began = time.perf_counter()
    rows = validate(args.campaigns, args.observed, args.runs)
    pooled_s = time.perf_counter() - began
    single = validate(args.campaigns, 1, args.runs)
    demo = []
    for spec in CAMPAIGNS:
        row = campaign_row(simulate(spec, 0))
        demo.append({"campaign": spec.name, "measured_ettr": row["ettr"],
                     "model_ettr": goodput.expected_ettr(goodput.params_of(row))})  # fmt: skip
    out = {
        "load": os.getloadavg(), "python": platform.python_version(), "campaigns": args.campaigns,
        "observed_runs": args.observed, "truth_runs": args.runs, "seconds": round(time.perf_counter() - began, 1),
        "seconds_pooled_validation": round(pooled_s, 1),
        f"calibrated_on_{args.observed}_runs": summary(rows), "calibrated_on_1_run": summary(single),
        "demo_in_sample": demo, "rows": rows,
    }  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}, indent=2, default=str))


if __name__ == "__main__":
    main()
