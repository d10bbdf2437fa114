"""Real scores next to the ones a model's card publishes, with the sampling error of our small subsets.

``compare_with_published(rows, published)`` puts each dataset's score (a proportion of ``n`` items) beside
the published figure and says whether the published figure lies inside our 95% Wilson interval: with
tens of items the interval is wide (±15–20 points), so "agrees" means "not contradicted", and a
published figure outside it is reported as such, never hidden, with the two-sided exact binomial test
of our count against the published rate (``binomial_p``): near 0% on ten items the Wilson interval's
lower end is above a rate that the exact test does not reject (1 of 10 against 1.4%: p = 0.13), which the
verdict then says ("not significant"). Prompts differ from the card's harness
(lighteval; 5-shot GSM8K; our items come partly from train splits, see ``include/eval/real/SOURCES.md``),
which the comparison states.

``python -m acme.evaluation.published [--lake LAKE]`` prints the latest evaluation of the ``real`` suite in
a local or S3 lake: per dataset the score, its interval, the published figure, and the measured seconds
per sample (median and max) and tokens per second -- what ``make demo`` shows after its evaluation step.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from acme import lake_keys
from acme.errors import InputError
from acme.evaluation.evaluation_run import wilson_interval
from acme.lake import Lake, open_lake


def published_path() -> Path:
    from acme import settings

    return settings.project().include_dir / "eval" / "real" / "published.json"


def compare_with_published(rows: list[dict[str, Any]], published: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per dataset: our score and interval (percent), the published figure, agreement."""
    figures = published.get("scores_percent", {})
    lines = []
    for row in rows:
        low, high = wilson_interval(int(row["correct"]), int(row["n_samples"]))
        entry = figures.get(row["dataset"])
        value = None if entry is None else float(entry["published"])
        p_value = (
            None if value is None else binomial_p(int(row["correct"]), int(row["n_samples"]), value / 100)
        )
        lines.append(
            {
                "dataset": row["dataset"],
                "score_percent": round(100 * row["correct"] / row["n_samples"], 1),
                "interval_percent": [round(100 * low, 1), round(100 * high, 1)],
                "n": int(row["n_samples"]),
                "published_percent": value,
                "binomial_p": None if p_value is None else round(p_value, 3),
                "verdict": _verdict(value, low, high, p_value),
            }
        )
    return lines


def binomial_p(correct: int, n: int, rate: float) -> float:
    """Two-sided exact binomial test: how likely a score at least this far from ``rate`` is on ``n`` items."""
    from scipy.stats import binomtest

    return float(binomtest(correct, n, min(1.0, max(0.0, rate))).pvalue)


def _verdict(value: float | None, low: float, high: float, p_value: float | None) -> str:
    if value is None or p_value is None:
        return "not published"
    if 100 * low <= value <= 100 * high:
        return "agrees"
    # The Wilson interval is approximate where the published rate is near 0 and n is small; the exact test
    # says whether the difference is significant.
    return "outside our interval" + (" (not significant)" if p_value >= 0.05 else "")


def latest_results(lake: Lake, suite_stem: str) -> tuple[str, list[dict[str, Any]]]:
    """The results of the suite's most recently written evaluation in the lake (any model), and their URL."""
    run_folder = re.compile(rf"{re.escape(suite_stem)}-[0-9a-f]{{8}}")
    found = [
        item
        for item in lake.find(lake_keys.EVAL_RUNS)
        if (parts := item.key.split("/"))[-1] == "results.parquet"
        and len(parts) == 5
        and run_folder.fullmatch(parts[3])
    ]
    if not found:
        raise InputError(
            lake.url(lake_keys.EVAL_RUNS), f"no evaluation of the {suite_stem} suite: run one first"
        )
    latest = max(found, key=lambda item: (item.modified, item.key))
    return lake.url(latest.key), lake.read_parquet(latest.key).to_pylist()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m acme.evaluation.published", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--lake", help="the lake: a folder or s3://bucket/prefix (default ACME_LAKE_URI)")
    parser.add_argument("--suite", default="real_suite", help="suite file stem (default: real_suite)")
    args = parser.parse_args(argv)
    try:
        path, rows = latest_results(open_lake(args.lake), args.suite)
    except InputError as exc:
        raise SystemExit(str(exc)) from None
    published = json.loads(published_path().read_text())
    by_name = {r["dataset"]: r for r in rows}
    print(f"  model: {published['model']}; published figures: {published['source']}")
    print(
        f"  {'dataset':<14} {'score %':>7} {'95% interval':>13} {'card %':>7}  {'verdict':<21}"
        f"{'s/sample med':>12} {'max':>6} {'tok/s read':>10} {'written':>8}"
    )
    for line in compare_with_published(rows, published):
        row = by_name[line["dataset"]]
        low, high = line["interval_percent"]
        card = "—" if line["published_percent"] is None else f"{line['published_percent']:.1f}"
        infer = row.get("infer_s") or 0.0
        read = f"{row['tokens_read'] / infer:.0f}" if infer and row.get("tokens_read") else "—"
        written = f"{row['tokens_written'] / infer:.0f}" if infer and row.get("tokens_written") else "—"
        median = row.get("sample_s_median")
        longest = row.get("sample_s_max")
        print(
            f"  {line['dataset']:<14} {line['score_percent']:>7.1f} {low:>6.1f}–{high:<6.1f} {card:>7}  "
            f"{line['verdict']:<38}{'—' if median is None else f'{median:.2f}':>12} "
            f"{'—' if longest is None else f'{longest:.2f}':>6} {read:>10} {written:>8}"
        )
    print(f"  results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
