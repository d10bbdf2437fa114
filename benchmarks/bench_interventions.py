"""Manual interventions per 100 failures, with and without learning from the operators' triage answers.

The labelled corpus (``tests/fixtures/diagnosis/corpus``: the verbatim error lines of ``lines.yaml`` that
label a failure, and the whole logs of ``logs.yaml``) is replayed as a stream of failed jobs, in one fixed
order (a shuffle with seed 29, so sources mix), through the diagnosis pipeline
(``acme.diagnosis.pipeline.diagnose_log_lines``: compression, rules, retrieval over the cases stored so far,
triage) on a fresh local lake, offline (no LLM agent, lexical retrieval). Every job is treated as a
256-GPU job that ran an hour (256 GPU-hours, above ``ACME_TRIAGE_MIN_GPU_HOURS``), so every unsettled
diagnosis is eligible for triage.

**Leave-one-source-out**: the bundled rules were written from these very sources, so each job is
diagnosed without the rules whose ``sources`` name its own source (as ``bench_diagnosis_accuracy.py``
scores): the stream stands for failures the rules were not written for. Learned rules always apply.

A **simulated operator** answers every triage question at once with the job's label. *With learning* the
answer goes through ``acme.diagnosis.triage.apply_answer`` (a labelled case for retrieval and a candidate
rule, validated against the labelled lines seen so far in the stream: a real operator's corpus does not
hold tomorrow's failures); *without learning* the question is answered and nothing is kept.

Counted per job: **an intervention** when a question was asked, or when nobody was asked and the diagnosis
is wrong (someone has to correct it); a **repeated question** when a question is asked about a template an
earlier question had (checked here independently of the triage ledger); a **wrong rule** when a rule the
answers taught matches a labelled corpus line whose label does not accept its reason (checked over the
whole corpus at the end). Goal: at most 10 interventions per 100 failures after the first 100, 0 repeated
questions, 0 wrong rules.

Run: ``python benchmarks/bench_interventions.py`` (``--json`` for the whole result). Writes
``benchmarks/results/interventions.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_diagnosis_accuracy import load_corpus, rules_without  # noqa: E402

SEED = 29
BIG_JOB = {"job_type": "Pretrain", "user": "replay", "gpu_num": 256, "run_s": 3600.0}
RESULTS = ROOT / "benchmarks" / "results" / "interventions.json"


@dataclass(frozen=True)
class Failure:
    """One failed job of the stream: its log lines and its label."""

    job_id: str
    source: str
    lines: tuple[str, ...]
    reason: str
    alternatives: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)

    def accepts(self, reason: str) -> bool:
        return reason == self.reason or reason in self.alternatives


def failure_stream() -> list[Failure]:
    """The corpus' failure lines and logs as failed jobs, in the fixed order (module docstring)."""
    import gzip

    lines, logs = load_corpus()
    stream = [
        Failure(f"line-{i:03d}", c.source, (c.text,), c.reason, c.alternatives)
        for i, c in enumerate(lines)
        if c.reason != "Unknown"  # routine lines are no failure
    ]
    for log in logs:
        opener = gzip.open if log.path.suffix == ".gz" else open
        with opener(log.path, "rt", encoding="utf-8", errors="replace") as handle:
            text = tuple(handle.read().splitlines())
        stream.append(Failure(f"log-{log.id}"[:100], log.source, text, log.reason, log.alternatives, log.job))
    random.Random(SEED).shuffle(stream)
    return stream


def replay(stream: list[Failure], learning: bool) -> dict[str, Any]:
    """Diagnose the stream in order, the simulated operator answering every question."""
    import acme.diagnosis.learning as learning_module
    from acme.diagnosis.pipeline import diagnose_log_lines
    from acme.diagnosis.rules import load_rules
    from acme.diagnosis.triage import apply_answer, load_question
    from acme.lake import Lake

    bundled = load_rules()
    lake = Lake(tempfile.mkdtemp(prefix=f"interventions-{'learn' if learning else 'plain'}-"))
    seen_lines: list[tuple[str, str, tuple[str, ...]]] = []
    asked_templates: set[str] = set()
    rows = []
    original = learning_module.load_rules
    try:
        for failure in stream:
            # Leave-one-source-out: the bundled rules without those written from this job's source.
            learning_module.load_rules = lambda path=None, f=failure: rules_without(f.source, bundled)  # type: ignore[assignment]
            record = diagnose_log_lines(
                list(failure.lines), {**BIG_JOB, **failure.facts, "job_id": failure.job_id}, cluster="replay",
                lake=lake, agent=None, learn=True, defer_case=False,
            )  # fmt: skip
            note = record.note or ""
            asked = "an operator is asked" in note
            repeated = False
            outcome: dict[str, Any] = {}
            if asked:
                key = note.split("question ")[1].split(")")[0]
                template = load_question(lake, key).template
                repeated = template in asked_templates
                asked_templates.add(template)
                answer = failure.reason if failure.reason in load_question(lake, key).options else "Unknown"
                if learning:
                    outcome = apply_answer(lake, key, answer, "simulated-operator", labelled=list(seen_lines))
            right = failure.accepts(record.reason)
            rows.append({"job": failure.job_id, "label": failure.reason, "diagnosed": record.reason,
                         "source": record.source, "confidence": record.confidence, "asked": asked,
                         "repeated": repeated, "right": right, "intervention": asked or not right,
                         "rule": outcome.get("rule_id"), "rule_status": outcome.get("rule_status")})  # fmt: skip
            if len(failure.lines) == 1:
                seen_lines.append((failure.lines[0], failure.reason, failure.alternatives))
    finally:
        learning_module.load_rules = original
    return {"rows": rows, "wrong_rules": wrong_rules(lake), "rules_learned": learned_count(lake)}


def learned_count(lake: Any) -> int:
    from acme.diagnosis.learning import load_learned_document

    return len(load_learned_document(lake)["rules"])


def wrong_rules(lake: Any) -> list[dict[str, Any]]:
    """Learned rules that match a labelled corpus line whose label does not accept the rule's reason."""
    from acme.diagnosis.learning import load_learned_rules

    lines, _ = load_corpus()
    wrong = []
    for rule in load_learned_rules(lake):
        for case in lines:
            if rule.search(case.text) and not case.accepts(rule.reason):
                wrong.append(
                    {"rule": rule.id, "reason": rule.reason, "line": case.text[:160], "label": case.reason}
                )
                break
    return wrong


def per_100(rows: list[dict[str, Any]]) -> float:
    return round(100 * sum(r["intervention"] for r in rows) / len(rows), 1) if rows else 0.0


def summary(result: dict[str, Any]) -> dict[str, Any]:
    rows = result["rows"]
    return {
        "failures": len(rows),
        "interventions_per_100": per_100(rows),
        "first_100_per_100": per_100(rows[:100]),
        "after_first_100_per_100": per_100(rows[100:]),
        "questions": sum(r["asked"] for r in rows),
        "wrong_unasked": sum(not r["asked"] and not r["right"] for r in rows),
        "repeated_questions": sum(r["repeated"] for r in rows),
        "rules_learned": result["rules_learned"],
        "rules_refused": sum(r["rule_status"] == "refused" for r in rows),
        "wrong_rules": len(result["wrong_rules"]),
        "wrong_rule_examples": result["wrong_rules"][:5],
        "right_share": round(sum(r["right"] for r in rows) / len(rows), 4) if rows else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    parser.add_argument(
        "--min-confidence",
        type=float,
        default=None,
        help="ACME_TRIAGE_MIN_CONFIDENCE for the replay (default: the setting's default)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the result is written")
    args = parser.parse_args(argv)
    if args.min_confidence is not None:
        os.environ["ACME_TRIAGE_MIN_CONFIDENCE"] = str(args.min_confidence)
    os.environ.setdefault("ACME_DIAGNOSIS_EMBEDDING", "lexical")
    os.environ["ACME_DIAGNOSIS_LABELLED_LINES"] = "none"  # the replay passes the lines seen so far itself
    stream = failure_stream()
    started = time.perf_counter()
    results = {}
    for mode, learning in (("without_learning", False), ("with_learning", True)):
        replayed = replay(stream, learning)
        results[mode] = {"summary": summary(replayed), "rows": replayed["rows"]}
    elapsed = round(time.perf_counter() - started, 1)
    from acme import settings

    document = {"seed": SEED, "failures": len(stream), "seconds": elapsed, "load": os.getloadavg()[0],
                "triage_min_confidence": settings.diagnosis().triage_min_confidence,
                **{mode: r["summary"] for mode, r in results.items()},
                "rows": {mode: r["rows"] for mode, r in results.items()}}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    if args.json:
        print(json.dumps(document, indent=1))
        return 0
    print(
        f"{len(stream)} failures (seed {SEED}), ACME_TRIAGE_MIN_CONFIDENCE={document['triage_min_confidence']}, "
        f"{elapsed} s, load {document['load']:.1f}"
    )
    keys = ("interventions_per_100", "first_100_per_100", "after_first_100_per_100", "questions", "wrong_unasked",
            "repeated_questions", "rules_learned", "rules_refused", "wrong_rules", "right_share")  # fmt: skip
    print(f"{'':28s} {'without learning':>18s} {'with learning':>15s}")
    for key in keys:
        print(f"{key:28s} {results['without_learning']['summary'][key]!s:>18s} "
              f"{results['with_learning']['summary'][key]!s:>15s}")  # fmt: skip
    for example in results["with_learning"]["summary"]["wrong_rule_examples"]:
        print("  wrong rule:", example)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
