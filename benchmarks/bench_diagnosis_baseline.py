"""The diff against the last good run (issue 31, item 2): decisive lines and lines sent to the agent, with and
without it.

For each corpus log that has the last good run of its job family (``tests/fixtures/diagnosis/corpus/
baselines.yaml``), the log is compressed as in the pipeline, and the agent's line selection
(``acme.diagnosis.untrusted.select_log_lines``, the prompt's budget) is run at budgets of 3, 5, 10, 20 and 200
lines, once as today (error lines first) and once with the lines new since the good run first
(``acme.diagnosis.baseline``), and once with only the new lines. Printed: per budget, the share of decisive lines among the lines sent (a
decisive line counts when it, or an earlier duplicate it was folded into, is sent), and how many of the kept
lines are new. No timing. Run: ``python benchmarks/bench_diagnosis_baseline.py`` (``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
sys.path.insert(0, str(ROOT))

from benchmarks.bench_diagnosis_accuracy import CORPUS, _decisive_found, load_corpus  # noqa: E402

BUDGETS = (3, 5, 10, 20, 200)


def load_pairs(corpus: Path = CORPUS) -> list[tuple[Any, Path]]:
    """(log case, its last good run's file) for every entry of baselines.yaml."""
    import yaml

    _, logs = load_corpus(corpus)
    by_id = {case.id: case for case in logs}
    pairs = []
    for index, entry in enumerate(yaml.safe_load((corpus / "baselines.yaml").read_text(encoding="utf-8"))):
        case = by_id.get(entry.get("log"))
        path = corpus / str(entry.get("baseline"))
        if case is None or not path.exists():
            raise ValueError(f"{corpus / 'baselines.yaml'}: entry #{index}: unknown log or missing {path}")
        pairs.append((case, path))
    return pairs


def evaluate(corpus: Path = CORPUS) -> dict[str, Any]:
    from acme.diagnosis.baseline import baseline_keys_of_log, novel_lines
    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.untrusted import parse_log_text, select_log_lines

    budgets: dict[int, dict[str, int]] = {b: {"without": 0, "with": 0, "only_new": 0} for b in BUDGETS}
    decisive = kept_total = novel_total = 0
    per_log = []
    for case, good in load_pairs(corpus):
        compressed = compress_log(case.path)
        lines = parse_log_text(compressed.to_text())
        novel = novel_lines(((k.line, k.text) for k in compressed.lines), baseline_keys_of_log(good))
        kept_total += len(compressed.lines)
        novel_total += len(novel)
        decisive += len(case.decisive)
        row: dict[str, Any] = {"log": case.id, "kept": len(compressed.lines), "new": len(novel)}
        for budget in BUDGETS:
            for variant, fresh in (("without", None), ("with", novel), ("only_new", novel)):
                shown = [ln for ln in lines if ln.number in novel] if variant == "only_new" else lines
                sent, _ = select_log_lines(shown, max_lines=budget, max_chars=20_000, novel=fresh)
                found = sum(_decisive_found(case, [(ln.number, ln.text) for ln in sent]).values())
                budgets[budget][variant] += found
                row[f"{variant}@{budget}"] = found
        per_log.append(row)
    return {
        "pairs": len(per_log),
        "decisive_lines": decisive,
        "kept_lines": kept_total,
        "new_lines": novel_total,
        "recall": {
            b: {v: round(n / decisive, 4) if decisive else 0.0 for v, n in counts.items()}
            for b, counts in budgets.items()
        },
        "per_log": per_log,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = evaluate()
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(
        f"{result['pairs']} failed logs with their last good run; {result['decisive_lines']} decisive lines; "
        f"{result['kept_lines']} kept lines, {result['new_lines']} of them new since the good run "
        f"({100 * result['new_lines'] / max(result['kept_lines'], 1):.1f}%)"
    )
    print(f"{'lines sent':>10}{'decisive sent, today':>24}{'new lines first':>18}{'only new lines':>17}")
    for budget, recall in result["recall"].items():
        print(
            f"{budget:>10}{100 * recall['without']:>23.1f}%{100 * recall['with']:>17.1f}%"
            f"{100 * recall['only_new']:>16.1f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
