"""The diff against the last good run (issue 31, item 2): decisive lines and lines sent to the agent, with and
without it.

For each corpus log that has the last good run of its job family (``tests/fixtures/diagnosis/corpus/
baselines.yaml``), the log is compressed as in the pipeline, and the agent's line selection
(``acme.diagnosis.untrusted.select_log_lines``, the prompt's budget) is run at budgets of 3, 5, 10, 20 and 200
lines (200 is the agent's default, ``FailureAgent.max_log_lines``), once as today (error lines first), once
with the lines new since the good run first (``acme.diagnosis.baseline``), and once with only the new lines.
Printed: per budget, the share of decisive lines among the lines sent (a decisive line counts when it, or an
earlier duplicate it was folded into, is sent) and the number of lines sent; how many of the kept lines are
new; and, through ``acme.diagnosis.pipeline.diagnose_log_lines`` (rules, no agent), whether the diagnosis'
evidence (at most 5 lines) holds a decisive line and starts with one, with and without the baseline.

The corpus pairs are short single-GPU logs. ``--synthetic N`` adds N pairs of multi-rank training logs from
``acme.diagnosis.synth_log`` (a good run, and a failed run of another seed with its failure cascade; the
decisive line is the cascade's first error line), where routine warnings and retried errors of every rank
outnumber a small budget: labelled synthetic, never mixed into the corpus figures. No timing. Run:
``python benchmarks/bench_diagnosis_baseline.py`` (``--json``).
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


def synthetic_pairs(count: int, folder: Path, n_lines: int = 6_000) -> list[tuple[Any, Path]]:
    """``count`` (failed log case, good run's log) pairs of synthetic 16-rank training logs, written to
    ``folder``; the failures cycle through a few reasons."""
    from benchmarks.bench_diagnosis_accuracy import LogCase

    from acme.diagnosis.synth_log import ERROR, iter_training_log

    reasons = ("ECCError", "NCCLTimeoutError", "OutOfMemoryError", "NetworkError")
    pairs = []
    for index in range(count):
        reason = reasons[index % len(reasons)]
        good = folder / f"good-{index}.log"
        good.write_text("\n".join(iter_training_log(n_lines, seed=2 * index, failure=None)) + "\n")
        failed = folder / f"failed-{index}.log"
        labelled = list(iter_training_log(n_lines, seed=2 * index + 1, failure=reason, labelled=True))
        failed.write_text("\n".join(text for text, _ in labelled) + "\n")
        first_error = next(n for n, (_, label) in enumerate(labelled, start=1) if label == ERROR)
        case = LogCase(f"synthetic-{index}-{reason}", "synthetic", failed, reason, (), (first_error,))
        pairs.append((case, good))
    return pairs


def _evidence_figures(case: Any, keys: set[str] | None) -> tuple[bool, bool]:
    """Through the pipeline (rules, no agent, no lake): whether the evidence holds a decisive line, and
    whether its first line is one."""
    from acme.diagnosis.pipeline import diagnose_log_lines

    record = diagnose_log_lines(case.path, dict(case.job), cluster="bench", agent=None, baseline=keys)
    lines = [(e["line"], e["text"]) for e in record.evidence]
    return any(_decisive_found(case, lines).values()), any(_decisive_found(case, lines[:1]).values())


def evaluate(corpus: Path = CORPUS, pairs: list[tuple[Any, Path]] | None = None) -> dict[str, Any]:
    from acme.diagnosis.baseline import baseline_keys_of_log, novel_lines
    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.untrusted import parse_log_text, select_log_lines

    budgets: dict[int, dict[str, int]] = {b: {"without": 0, "with": 0, "only_new": 0} for b in BUDGETS}
    sent_lines: dict[int, dict[str, int]] = {b: {"without": 0, "with": 0, "only_new": 0} for b in BUDGETS}
    evidence = {"without": [0, 0], "with": [0, 0]}  # [holds a decisive line, starts with one]
    decisive = kept_total = novel_total = 0
    per_log = []
    for case, good in load_pairs(corpus) if pairs is None else pairs:
        compressed = compress_log(case.path)
        lines = parse_log_text(compressed.to_text())
        keys = baseline_keys_of_log(good)
        novel = novel_lines(((k.line, k.text) for k in compressed.lines), keys)
        for variant, given in (("without", None), ("with", keys)):
            holds, first = _evidence_figures(case, given)
            evidence[variant][0] += holds
            evidence[variant][1] += first
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
                sent_lines[budget][variant] += len(sent)
                row[f"{variant}@{budget}"] = found
        per_log.append(row)
    logs = len(per_log)
    return {
        "pairs": logs,
        "lines_sent": sent_lines,
        "evidence": {
            v: {
                "holds_decisive": round(h / logs, 4) if logs else 0.0,
                "starts_with_decisive": round(f / logs, 4) if logs else 0.0,
            }
            for v, (h, f) in evidence.items()
        },
        "decisive_lines": decisive,
        "kept_lines": kept_total,
        "new_lines": novel_total,
        "recall": {
            b: {v: round(n / decisive, 4) if decisive else 0.0 for v, n in counts.items()}
            for b, counts in budgets.items()
        },
        "per_log": per_log,
    }


def _print(title: str, result: dict[str, Any]) -> None:
    print(
        f"{title}: {result['pairs']} failed logs with their last good run; {result['decisive_lines']} decisive "
        f"lines; {result['kept_lines']} kept lines, {result['new_lines']} of them new since the good run "
        f"({100 * result['new_lines'] / max(result['kept_lines'], 1):.1f}%)"
    )
    print(f"{'budget':>8}{'decisive sent: today':>22}{'new first':>11}{'only new':>10}"
          f"{'lines sent: today':>19}{'new first':>11}{'only new':>10}")  # fmt: skip
    for budget, recall in result["recall"].items():
        sent = result["lines_sent"][budget]
        print(
            f"{budget:>8}{100 * recall['without']:>21.1f}%{100 * recall['with']:>10.1f}%"
            f"{100 * recall['only_new']:>9.1f}%{sent['without']:>19}{sent['with']:>11}{sent['only_new']:>10}"
        )
    for variant, label in (("without", "without the baseline"), ("with", "with the baseline")):
        shown = result["evidence"][variant]
        print(
            f"evidence (pipeline, rules) {label}: holds a decisive line {100 * shown['holds_decisive']:.1f}%, "
            f"starts with one {100 * shown['starts_with_decisive']:.1f}%"
        )


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--synthetic", type=int, default=0, help="also N synthetic multi-rank pairs")
    args = parser.parse_args(argv)
    results = {"corpus": evaluate()}
    if args.synthetic:
        with tempfile.TemporaryDirectory() as folder:
            results["synthetic"] = evaluate(pairs=synthetic_pairs(args.synthetic, Path(folder)))
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for title, result in results.items():
        _print(title, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
