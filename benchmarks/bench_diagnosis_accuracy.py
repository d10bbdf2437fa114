"""Accuracy of the failure diagnosis on the labelled public corpus, leave-one-source-out.

The corpus (``tests/fixtures/diagnosis/corpus``) holds verbatim error lines and real training logs from public
issue trackers and logbooks, labelled from what their sources concluded. Scoring is leave-one-source-out: when
a source is scored, every rule whose ``sources`` name it (its patterns were written from that source's text)
is left out, and so are that source's own stored cases for retrieval. So a figure here says how the diagnosis
does on failures it was not tuned to.

Measured, and printed:

* single lines -- the rules applied to each line alone (``diagnose_lines``): reason, category and attribution
  accuracy, overall and per class, the confusion of reasons, the share answered Unknown; and the share of
  failure lines the compressor flags as error lines (what the rules then see in a whole log);
* whole logs -- compression, job facts and rules (the pipeline's rule stage): the root cause, and the
  decisive-line recall of compression (a decisive line counts as kept when it, or an earlier duplicate it was folded into,
  is among the kept error/traceback lines);
* each of those without retrieval, and with retrieval over the other sources' labelled lines (a vote only when
  no rule matched, as in the pipeline), with the lexical embedding and with MiniLM when it can load.

A label's ``alternatives`` count as right too. Run: ``python benchmarks/bench_diagnosis_accuracy.py`` (``--json``
for machine-readable output, ``--embeddings lexical`` to skip the model). ``tests/unit/diagnosis/
test_corpus_accuracy.py`` runs :func:`evaluate` and fails below the goals; timing is not measured here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))

from acme.diagnosis.rules import UNKNOWN, Rule, attribution_of, category_of  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "diagnosis" / "corpus"
# The 68-line set the rules were tuned on before this corpus existed: its sources are folded into the corpus,
# and the rules written before cannot be left out for them (nobody recorded which pattern came from which), so
# the figures are also given for the lines of the other sources alone.
TUNED_ON = ROOT / "tests" / "fixtures" / "diagnosis" / "labelled_errors.yaml"
# Issue 31 raised the line goal to 95% and added: no more than 2% confidently wrong (a wrong reason at
# confidence >= 0.5) on lines and on logs, and at least 85% of the newest batch of whole logs right.
GOALS = {
    "line_reason": 0.95, "line_category": 0.95, "log_reason": 0.85, "decisive_recall": 0.99,
    "line_confidently_wrong": 0.02, "log_confidently_wrong": 0.02, "new_batch_reason": 0.85,
}  # fmt: skip
CONFIDENT = 0.5  # a wrong answer at this confidence or more is "confidently wrong"
RETRIEVAL_K = 5


@dataclass(frozen=True)
class LineCase:
    source: str
    text: str
    reason: str
    alternatives: tuple[str, ...] = ()

    def accepts(self, reason: str) -> bool:
        return reason == self.reason or reason in self.alternatives


@dataclass(frozen=True)
class LogCase:
    id: str
    source: str
    path: Path
    reason: str
    alternatives: tuple[str, ...]
    decisive: tuple[int, ...]
    job: dict[str, Any] = field(default_factory=dict)
    excerpt: bool = False
    batch: str | None = None  # the first-contact batch the log came in (logs.yaml's "batch")

    def accepts(self, reason: str) -> bool:
        return reason == self.reason or reason in self.alternatives


def load_corpus(corpus: Path = CORPUS) -> tuple[list[LineCase], list[LogCase]]:
    """The labelled lines and logs; a malformed entry raises ValueError naming the file and entry."""
    import yaml

    lines = []
    for index, group in enumerate(yaml.safe_load((corpus / "lines.yaml").read_text(encoding="utf-8"))):
        if not group.get("source") or not group.get("lines"):
            raise ValueError(f"{corpus / 'lines.yaml'}: entry #{index} lacks a source or lines")
        for item in group["lines"]:
            lines.append(
                LineCase(group["source"], item["text"], item["reason"], tuple(item.get("alternatives") or ()))
            )
    logs = []
    for entry in yaml.safe_load((corpus / "logs.yaml").read_text(encoding="utf-8")):
        path = corpus / entry["file"]
        if not path.exists():
            raise ValueError(f"{corpus / 'logs.yaml'}: log {entry['id']!r}: {path} does not exist")
        logs.append(
            LogCase(
                id=entry["id"],
                source=entry["source"],
                path=path,
                reason=entry["reason"],
                alternatives=tuple(entry.get("alternatives") or ()),
                decisive=tuple(entry["decisive"]),
                job=dict(entry.get("job") or {}),
                excerpt=bool(entry.get("excerpt", False)),
                batch=entry.get("batch"),
            )
        )
    return lines, logs


def rules_without(source: str, rules: list[Rule]) -> list[Rule]:
    """The rules that did not come from ``source`` (leave-one-source-out)."""
    return [rule for rule in rules if source not in rule.sources]


# ------------------------------------------------------------------------------------------------ retrieval
class CaseIndex:
    """The labelled lines as retrieval cases, embedded once; :meth:`vote` leaves the scored source out."""

    def __init__(self, lines: list[LineCase], rules: list[Rule], embedder: Any):
        from acme.diagnosis.retrieval import error_signature

        self.embedder = embedder
        self.cases = [c for c in lines if c.reason != UNKNOWN]
        self.signatures = [error_signature([(1, c.text)], rules) or c.text for c in self.cases]
        self.vectors = embedder.embed(self.signatures)

    def vote(self, signature: str, source: str) -> Any:
        import numpy as np

        from acme.diagnosis.retrieval import SimilarCase, vote

        keep = [i for i, case in enumerate(self.cases) if case.source != source]
        if not signature.strip() or not keep:
            return None
        query = self.embedder.embed([signature])[0]
        sims = self.embedder.similarities(query, self.vectors[keep])
        order = np.argsort(-sims, kind="stable")[:RETRIEVAL_K]
        similar = [
            SimilarCase(
                case_id=str(keep[i]), cluster="corpus", job_id=str(keep[i]), reason=self.cases[keep[i]].reason,
                category=category_of(self.cases[keep[i]].reason), attribution=None, source="corpus",
                similarity=float(sims[i]),
            )
            for i in order
        ]  # fmt: skip
        return vote(similar, self.embedder.min_similarity)


# ------------------------------------------------------------------------------------------------ scoring
@dataclass
class Tally:
    """Right/total by expected reason, category and attribution, and the confusion of reasons."""

    reason_ok: int = 0
    category_ok: int = 0
    attribution_ok: int = 0
    total: int = 0
    unknown: int = 0
    confidently_wrong: int = 0
    by_reason: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    confusion: Counter = field(default_factory=Counter)
    misses: list[dict[str, Any]] = field(default_factory=list)
    retrieval: Counter = field(default_factory=Counter)  # answered / right / on routine lines

    def add(
        self,
        case: LineCase | LogCase,
        predicted: str,
        where: str,
        rule_id: str | None,
        confidence: float = 0.0,
    ) -> None:
        accepted = (case.reason, *case.alternatives)
        reason_ok = case.accepts(predicted)
        category_ok = category_of(predicted) in {category_of(r) for r in accepted}
        attribution_ok = attribution_of(predicted) in {attribution_of(r) for r in accepted}
        self.total += 1
        self.reason_ok += reason_ok
        self.category_ok += category_ok
        self.attribution_ok += attribution_ok
        self.unknown += predicted == UNKNOWN
        self.confidently_wrong += not reason_ok and predicted != UNKNOWN and confidence >= CONFIDENT
        self.by_reason[case.reason][0] += reason_ok
        self.by_reason[case.reason][1] += 1
        self.confusion[(case.reason, predicted if not reason_ok else case.reason)] += 1
        if rule_id == "retrieval":
            self.retrieval["answered"] += 1
            self.retrieval["right"] += reason_ok
            self.retrieval["on_routine_lines"] += case.reason == UNKNOWN
        if not reason_ok:
            self.misses.append(
                {"source": case.source, "where": where, "expected": case.reason,
                 "alternatives": list(case.alternatives), "got": predicted, "rule": rule_id,
                 "confidence": confidence}
            )  # fmt: skip

    def summary(self) -> dict[str, Any]:
        share = (lambda n: round(n / self.total, 4)) if self.total else (lambda n: 0.0)
        return {
            "total": self.total,
            "reason": share(self.reason_ok),
            "category": share(self.category_ok),
            "attribution": share(self.attribution_ok),
            "unknown_share": share(self.unknown),
            "confidently_wrong": share(self.confidently_wrong),
            "confidently_wrong_n": self.confidently_wrong,
            "per_reason": {r: {"right": ok, "total": n} for r, (ok, n) in sorted(self.by_reason.items())},
            "confusion": [
                {"expected": e, "predicted": p, "n": n} for (e, p), n in sorted(self.confusion.items())
            ],
            "misses": self.misses,
            "retrieval": dict(self.retrieval),
        }


def tuned_on_sources() -> set[str]:
    """Corpus source ids of the previous labelled set (issue threads, ``owner/repo#number``)."""
    import re

    import yaml

    out = set()
    for item in yaml.safe_load(TUNED_ON.read_text(encoding="utf-8")):
        match = re.match(r"https://github.com/([^/]+/[^/]+)/(?:issues|pull)/(\d+)", item["source"])
        if match:
            out.add(f"{match.group(1)}#{match.group(2)}")
    return out


def score_lines(lines: list[LineCase], rules: list[Rule], index: CaseIndex | None = None) -> dict[str, Any]:
    from acme.diagnosis.compress import is_error_line, strip_prefix
    from acme.diagnosis.retrieval import error_signature, vote_alone
    from acme.diagnosis.rules import diagnose_lines

    tally, fresh = Tally(), Tally()
    tuned = tuned_on_sources()
    flagged = failures = 0
    for case in lines:
        rules_here = rules_without(case.source, rules)
        diagnosis = diagnose_lines([(1, case.text)], rules_here)
        predicted, rule_id, confidence = diagnosis.reason, diagnosis.rule_id, diagnosis.confidence
        if predicted == UNKNOWN and index is not None:
            voted = index.vote(error_signature([(1, case.text)], rules_here), case.source)
            # deciding alone, as in the pipeline (retrieval.vote_alone): a hint only, unless the line names a failure
            voted = vote_alone(voted, [(1, case.text)], rules_here) if voted is not None else None
            if voted is not None:
                predicted, rule_id, confidence = voted.reason, "retrieval", voted.confidence
        tally.add(case, predicted, case.text[:160], rule_id, confidence)
        if case.source not in tuned:
            fresh.add(case, predicted, case.text[:160], rule_id, confidence)
        if case.reason != UNKNOWN:
            failures += 1
            flagged += is_error_line(strip_prefix(case.text)[0])
    result = tally.summary()
    result["never_tuned_on"] = {
        k: v for k, v in fresh.summary().items() if k in ("total", "reason", "category")
    }
    result["compressor_flags_failure_lines"] = round(flagged / failures, 4) if failures else 0.0
    return result


def score_logs(logs: list[LogCase], rules: list[Rule], index: CaseIndex | None = None) -> dict[str, Any]:
    tally = Tally()
    kept_decisive = decisive_total = in_evidence = 0
    missed_lines, per_log = [], {}
    for case in logs:
        predicted, rule_id, confidence, kept, evidence = _diagnose_log(case, rules, index)
        tally.add(case, predicted, case.id, rule_id, confidence)
        found = _decisive_found(case, kept)
        decisive_total += len(found)
        kept_decisive += sum(found.values())
        missed_lines += [
            {"log": case.id, "line": n, "text": t[:160]} for (n, t), ok in found.items() if not ok
        ]
        shown = _decisive_found(case, evidence)
        in_evidence += any(shown.values())
        per_log[case.id] = {"predicted": predicted, "confidence": confidence, "right": case.accepts(predicted),
                            "evidence_has_decisive": any(shown.values())}  # fmt: skip
    result = tally.summary()
    result["decisive_lines"] = decisive_total
    result["decisive_recall"] = round(kept_decisive / decisive_total, 4) if decisive_total else 0.0
    result["decisive_missed"] = missed_lines
    result["evidence_has_decisive"] = round(in_evidence / len(logs), 4) if logs else 0.0
    result["whole_logs"] = sum(not c.excerpt for c in logs)
    missed = {m["where"] for m in result["misses"]}
    # The root cause on whole logs only (the goal is stated on whole logs), and on the logs whose root
    # cause is not a scheduler outcome (time limit, cancellation, ...): those end in one fixed Slurm line and are
    # the easy part of the corpus.
    result["whole_logs_reason"] = _share([c for c in logs if not c.excerpt], missed)
    result["crash_logs_reason"] = _share([c for c in logs if category_of(c.reason) != "External"], missed)
    result["batches"] = {
        batch: _batch_summary([c for c in logs if c.batch == batch], per_log)
        for batch in sorted({c.batch for c in logs if c.batch})
    }
    return result


def _diagnose_log(
    case: LogCase, rules: list[Rule], index: CaseIndex | None
) -> tuple[str, str | None, float, list[tuple[int, str]], list[tuple[int, str]]]:
    """Compression, job facts and rules (retrieval when no rule matched): the answer, its rule, confidence,
    the kept error/traceback lines and the evidence lines."""
    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.metadata import job_fact_lines
    from acme.diagnosis.retrieval import error_signature, signature_lines, vote_alone
    from acme.diagnosis.rules import diagnose_lines

    rules_here = rules_without(case.source, rules)
    compressed = compress_log(case.path)
    kept = [(k.line, k.text) for k in compressed.lines if k.kind in ("error", "traceback")]
    diagnosis = diagnose_lines(job_fact_lines(case.job) + kept, rules_here)
    predicted, rule_id, confidence = diagnosis.reason, diagnosis.rule_id, diagnosis.confidence
    evidence = [(e["line"], e["text"]) for e in diagnosis.evidence]
    if predicted == UNKNOWN and index is not None:
        voted = index.vote(error_signature(signature_lines(compressed), rules_here), case.source)
        voted = vote_alone(voted, signature_lines(compressed), rules_here) if voted is not None else None
        if voted is not None:
            predicted, rule_id, confidence = voted.reason, "retrieval", voted.confidence
    return predicted, rule_id, confidence, kept, evidence


def _decisive_found(case: LogCase, lines: list[tuple[int, str]]) -> dict[tuple[int, str], bool]:
    """Each decisive line (number, text) and whether ``lines`` hold it, or an earlier duplicate it was folded
    into (the same error key)."""
    from acme.diagnosis.compress import error_key, strip_prefix

    texts = _read_lines(case.path, set(case.decisive))
    numbers = {number for number, _ in lines}
    keys = {error_key(strip_prefix(seg)[0]) for _, text in lines for seg in text.split("\r") if seg.strip()}
    out = {}
    for number in case.decisive:
        text = texts.get(number, "")
        out[(number, text)] = number in numbers or any(
            error_key(strip_prefix(seg)[0]) in keys for seg in text.split("\r") if seg.strip()
        )
    return out


def _batch_summary(cases: list[LogCase], per_log: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Root cause, confidently wrong, Unknown and evidence figures on one first-contact batch."""
    n = len(cases)
    share = (lambda k: round(k / n, 4)) if n else (lambda k: 0.0)
    right = sum(per_log[c.id]["right"] for c in cases)
    wrong_confident = sum(
        not per_log[c.id]["right"]
        and per_log[c.id]["predicted"] != UNKNOWN
        and per_log[c.id]["confidence"] >= CONFIDENT
        for c in cases
    )
    return {
        "total": n, "right": right, "reason": share(right), "confidently_wrong": share(wrong_confident),
        "unknown_share": share(sum(per_log[c.id]["predicted"] == UNKNOWN for c in cases)),
        "evidence_has_decisive": share(sum(per_log[c.id]["evidence_has_decisive"] for c in cases)),
        "misses": [c.id for c in cases if not per_log[c.id]["right"]],
    }  # fmt: skip


def _share(cases: list[LogCase], missed: set[str]) -> dict[str, Any]:
    right = sum(c.id not in missed for c in cases)
    return {"right": right, "total": len(cases), "reason": round(right / len(cases), 4) if cases else 0.0}


def _read_lines(path: Path, wanted: set[int]) -> dict[int, str]:
    from acme.diagnosis.compress import _lines_of, _split_lines

    found: dict[int, str] = {}
    with _lines_of(path) as raw:
        for number, text in enumerate(_split_lines(iter(raw)), start=1):
            if number in wanted:
                found[number] = text
    return found


def evaluate(embeddings: tuple[str, ...] = ("lexical",), corpus: Path = CORPUS) -> dict[str, Any]:
    """Score the corpus without retrieval and with each embedding in ``embeddings`` (``lexical``,
    ``minilm``); an embedding that cannot load is reported as such, not scored."""
    from acme.diagnosis.retrieval import LexicalEmbedder, MiniLMEmbedder
    from acme.diagnosis.rules import load_rules

    rules = load_rules()
    lines, logs = load_corpus(corpus)
    out: dict[str, Any] = {
        "corpus": {
            "lines": len(lines),
            "line_sources": len({c.source for c in lines}),
            "logs": len(logs),
            "whole_logs": sum(not c.excerpt for c in logs),
            "sources": len({c.source for c in lines} | {c.source for c in logs}),
        },
        "goals": GOALS,
        "rules": len(rules),
        "rules_with_corpus_sources": sum(bool(r.sources) for r in rules),
        "variants": {},
    }
    variants: dict[str, CaseIndex | None] = {"rules": None}
    for kind in embeddings:
        try:
            embedder = LexicalEmbedder() if kind == "lexical" else MiniLMEmbedder()
        except Exception as exc:  # the model may be absent: say so, score the others
            out["variants"][f"rules+{kind}"] = {"unavailable": f"{type(exc).__name__}: {exc}"}
            continue
        variants[f"rules+{kind}"] = CaseIndex(lines, rules, embedder)
    for name, index in variants.items():
        out["variants"][name] = {
            "lines": score_lines(lines, rules, index),
            "logs": score_logs(logs, rules, index),
        }
    return out


# ------------------------------------------------------------------------------------------------ report
def _pct(value: float) -> str:
    return f"{100 * value:5.1f}%"


def _print_variants(variants: dict[str, Any]) -> None:
    """One row per variant (rules, +lexical, +MiniLM), then what retrieval answered."""
    print(f"\n{'variant':<16}{'lines: reason':>14}{'category':>10}{'attrib.':>9}{'unknown':>9}{'conf. wrong':>12}"
          f"{'logs: cause':>13}{'conf. wrong':>12}{'unknown':>9}{'decisive kept':>15}{'in evidence':>13}")  # fmt: skip
    for name, variant in variants.items():
        if "unavailable" in variant:
            print(f"{name:<16} unavailable: {variant['unavailable']}")
            continue
        lines, logs = variant["lines"], variant["logs"]
        print(
            f"{name:<16}{_pct(lines['reason']):>14}{_pct(lines['category']):>10}{_pct(lines['attribution']):>9}"
            f"{_pct(lines['unknown_share']):>9}{_pct(lines['confidently_wrong']):>12}{_pct(logs['reason']):>13}"
            f"{_pct(logs['confidently_wrong']):>12}{_pct(logs['unknown_share']):>9}{_pct(logs['decisive_recall']):>15}"
            f"{_pct(logs['evidence_has_decisive']):>13}"
        )
    for name, variant in variants.items():
        if "retrieval" in variant.get("lines", {}) and name != "rules":
            answered = variant["lines"]["retrieval"]
            print(
                f"{name}: retrieval answered {answered.get('answered', 0)} lines the rules left Unknown, "
                f"{answered.get('right', 0)} right ({answered.get('on_routine_lines', 0)} were routine lines)"
            )


def print_report(result: dict[str, Any]) -> None:
    corpus = result["corpus"]
    print(
        f"corpus: {corpus['lines']} lines from {corpus['line_sources']} sources, {corpus['logs']} logs "
        f"({corpus['whole_logs']} whole); {result['rules']} rules, {result['rules_with_corpus_sources']} of "
        "them written from corpus sources (left out when those are scored)"
    )
    _print_variants(result["variants"])
    base = result["variants"]["rules"]
    fresh = base["lines"]["never_tuned_on"]
    print(
        f"\nrules only, the {fresh['total']} lines of sources outside the set the rules were tuned on before: "
        f"reason {_pct(fresh['reason'])}, category {_pct(fresh['category'])}"
    )
    for key, label in (
        ("whole_logs_reason", "whole logs"),
        ("crash_logs_reason", "logs not ended by the scheduler"),
    ):
        part = base["logs"][key]
        print(
            f"rules only, root cause on the {part['total']} {label}: {_pct(part['reason'])} ({part['right']} right)"
        )
    for batch, part in base["logs"]["batches"].items():
        print(
            f"rules only, batch {batch}: {part['right']} of {part['total']} right ({_pct(part['reason'])}), "
            f"confidently wrong {_pct(part['confidently_wrong'])}, Unknown {_pct(part['unknown_share'])}, "
            f"evidence holds a decisive line {_pct(part['evidence_has_decisive'])}"
        )
    print(
        f"\ncompressor flags {_pct(base['lines']['compressor_flags_failure_lines'])} of failure lines as errors"
    )
    print(f"\nper reason (single lines, rules only):\n{'reason':<22}{'right':>6}{'total':>7}")
    for reason, counts in base["lines"]["per_reason"].items():
        print(f"{reason:<22}{counts['right']:>6}{counts['total']:>7}")
    print("\nconfusion (single lines, rules only; expected -> predicted, misses only):")
    for cell in base["lines"]["confusion"]:
        if cell["expected"] != cell["predicted"]:
            print(f"  {cell['expected']:<20} -> {cell['predicted']:<20} {cell['n']}")
    print("\nmisses (rules only):")
    for miss in base["lines"]["misses"] + base["logs"]["misses"]:
        print(
            f"  [{miss['source']}] expected {miss['expected']}, got {miss['got']} ({miss['confidence']:.2f}): "
            f"{miss['where']}"
        )
    for missed in base["logs"]["decisive_missed"]:
        print(f"  decisive line dropped: {missed['log']}:{missed['line']}: {missed['text']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embeddings", default="lexical,minilm", help="comma-separated: lexical, minilm")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    args = parser.parse_args(argv)
    result = evaluate(tuple(e for e in args.embeddings.split(",") if e))
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
