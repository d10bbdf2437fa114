"""Rule-based root-cause diagnosis of failed jobs (the offline half of the paper's failure diagnosis).

The log is compressed first (:mod:`acme.diagnosis.compress`); the rules of ``include/diagnosis/rules.yaml``
are then searched in its error and traceback lines, and in the job's scheduler facts (line 0, see
:mod:`acme.diagnosis.metadata`). Every rule names a failure reason with a priority: root causes (ECC,
NVLink, a lost GPU, CUDA/HIP errors, out of memory, specific Python exceptions) rank above their symptoms
(NCCL watchdog timeouts, connection resets, bare RuntimeErrors), because one hardware fault makes every
other rank log a timeout. The highest-priority match wins; among equal priorities, the earliest line (the
first rank to fail). A rule may name rules it must *precede* to count as their cause (``must_precede``): an
InfiniBand completion error logged before an NCCL error explains it, but the same text inside the NCCL
error's own message ("Last error: NET/IB ...") is only its detail, and the NCCL error is the answer. When
nothing matches the answer is ``Unknown`` with confidence 0: never a guess dressed as a rule.

Reasons: the paper's taxonomy (Table 3, :data:`TAXONOMY`) plus :data:`EXTRA_REASONS`. Outcomes outside the
taxonomy -- the job was ended from outside (scheduler time limit, preemption, cancellation, pod eviction or
admission failure, a kill signal with no cause logged) -- carry the fourth category ``External``, so the
report's failure table shows them as their own row instead of hiding them in Unknown; their attribution is
``user`` for what the user asked for (time limit, cancellation) and ``infrastructure`` otherwise
(:data:`EXTERNAL_ATTRIBUTION`). Unknown (category None) is kept for jobs with no evidence at all.

Evidence lines and compressed output go through :func:`redact`, which masks tokens, keys and passwords.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acme.diagnosis.taxonomy import (  # noqa: F401 (the taxonomy is part of the rules' interface)
    ATTRIBUTIONS,
    CATEGORIES,
    EXTERNAL_ATTRIBUTION,
    EXTRA_REASONS,
    TAXONOMY,
    UNKNOWN,
    attribution_of,
    category_of,
)
from acme.errors import ConfigError
from acme.secrets import redact

_MAX_EVIDENCE = 5


@dataclass(frozen=True)
class Rule:
    id: str
    reason: str
    category: str
    attribution: str
    priority: int
    patterns: tuple[re.Pattern[str], ...]
    mitigation: str
    version: int
    provenance: str
    # Labelled-corpus sources the patterns were written from (the accuracy scoring leaves the rule out for them).
    sources: tuple[str, ...] = ()
    must_precede: tuple[str, ...] = ()  # rule ids this root cause must be logged before to explain

    def search(self, text: str) -> bool:
        return any(p.search(text) for p in self.patterns)


@dataclass
class Diagnosis:
    reason: str
    category: str | None
    attribution: str | None
    confidence: float
    source: str = "rule"
    evidence: list[dict[str, Any]] = field(default_factory=list)
    mitigation: str | None = None
    rule_id: str | None = None
    rule_version: int | None = None
    # Where the exception was raised, from its traceback's innermost frame: "user code", "library" or
    # "framework" (acme.diagnosis.rootcause); None when the answer is not a raised exception.
    origin: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "category": self.category,
            "attribution": self.attribution,
            "confidence": self.confidence,
            "source": self.source,
            "evidence": [dict(e) for e in self.evidence],
            "mitigation": self.mitigation,
            "rule_id": self.rule_id,
            "rule_version": self.rule_version,
            "origin": self.origin,
        }


# ------------------------------------------------------------------------------------------------ rules
def default_rules_path() -> Path:
    from acme import settings

    return settings.project().include_dir / "diagnosis" / "rules.yaml"


def load_rules(path: str | Path | None = None) -> list[Rule]:
    """Load, validate and compile the diagnosis rules (cached per file version)."""
    from acme.diagnosis.rulefiles import load_rule_file

    rules_path = Path(path) if path is not None else default_rules_path()
    return load_rule_file(rules_path, parse_rules, "diagnosis rules file")


def parse_rules(document: Any, source: str = "<rules>") -> list[Rule]:
    """Validate a parsed rules document; every problem raises ConfigError naming the rule."""
    entries = document.get("rules") if isinstance(document, dict) else document
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{source}: expected a non-empty list under 'rules'")
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        rule = _parse_rule(entry, index, source)
        if rule.id in seen:
            raise ConfigError(f"{source}: rule {rule.id!r} is defined twice")
        seen.add(rule.id)
        rules.append(rule)
    for rule in rules:
        missing = sorted(set(rule.must_precede) - seen)
        if missing:
            raise ConfigError(
                f"{source}: rule {rule.id!r}: must_precede names unknown rules {', '.join(missing)}"
            )
    return rules


_REQUIRED_FIELDS = ("reason", "category", "attribution", "priority", "patterns", "mitigation", "version")


def _parse_rule(entry: Any, index: int, source: str) -> Rule:
    """One rule of a rules document, checked; a problem raises ConfigError naming the rule."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{source}: rule #{index} is not a mapping")
    rule_id = entry.get("id")
    if not isinstance(rule_id, str) or not rule_id:
        raise ConfigError(f"{source}: rule #{index} has no id")
    where = f"{source}: rule {rule_id!r}"
    missing = [f for f in _REQUIRED_FIELDS if entry.get(f) in (None, "", [])]
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}")
    _check_classification(entry, where)
    sources = entry.get("sources") or []
    must_precede = entry.get("must_precede") or []
    if not isinstance(sources, list) or not all(isinstance(x, str) for x in sources):
        raise ConfigError(f"{where}: sources must be a list of corpus source ids")
    if not isinstance(must_precede, list) or not all(isinstance(x, str) for x in must_precede):
        raise ConfigError(f"{where}: must_precede must be a list of rule ids")
    return Rule(
        id=rule_id,
        reason=entry["reason"],
        category=entry["category"],
        attribution=entry["attribution"],
        priority=entry["priority"],
        patterns=_compile_patterns(entry["patterns"], where),
        mitigation=str(entry["mitigation"]).strip(),
        version=int(entry["version"]),
        provenance=str(entry.get("provenance", "")),
        sources=tuple(sources),
        must_precede=tuple(must_precede),
    )


def _check_classification(entry: dict[str, Any], where: str) -> None:
    """Reason, category, attribution and priority of a rule are known and agree."""
    known = {**TAXONOMY, **EXTRA_REASONS}
    reason, category = entry["reason"], entry["category"]
    if reason not in known:
        raise ConfigError(f"{where}: reason {reason!r} is not in the failure taxonomy")
    if category not in CATEGORIES:
        raise ConfigError(f"{where}: category {category!r} is not one of {', '.join(CATEGORIES)}")
    if known[reason] != category:
        raise ConfigError(f"{where}: reason {reason} belongs to category {known[reason]}, not {category}")
    if entry["attribution"] not in ATTRIBUTIONS:
        raise ConfigError(f"{where}: attribution must be one of {', '.join(ATTRIBUTIONS)}")
    if not isinstance(entry["priority"], int) or isinstance(entry["priority"], bool):
        raise ConfigError(f"{where}: priority must be an integer")


def _compile_patterns(raw_patterns: Any, where: str) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for raw in [raw_patterns] if isinstance(raw_patterns, str) else raw_patterns:
        try:
            compiled.append(re.compile(str(raw)))
        except re.error as exc:
            raise ConfigError(f"{where}: invalid pattern {raw!r}: {exc}") from exc
    return tuple(compiled)


# ------------------------------------------------------------------------------------------------ diagnosis
def diagnose_lines(kept: Iterable[tuple[int, str]], rules: list[Rule] | None = None) -> Diagnosis:
    """Diagnose from already-selected ``(line number, text)`` pairs (error and traceback lines).

    The rules' answer, refined by the general layers of :mod:`acme.diagnosis.rootcause`: raised exceptions
    (the generic exception rules count only exceptions the log shows raised, and never a warning record),
    operating-system errors inside exception texts, and signals as the launchers report them, read with the
    scheduler's statement of who ended the job."""
    from acme.diagnosis.rootcause import (
        in_teardown,
        layer_candidates,
        raised_exceptions,
        worker_failure_line,
    )

    rules = rules if rules is not None else load_rules()
    kept = list(kept)
    raised = raised_exceptions(kept)
    by_id = {r.id: r for r in rules}
    matches = _rule_matches(kept, rules, {exc.line for exc in raised})
    failed_at = worker_failure_line(kept)
    if failed_at is not None:  # connection errors after a launcher reported a worker failed: the teardown
        matches = _before_teardown(matches, by_id, failed_at)
    best = _best_rule(matches, by_id)
    candidates = [
        c for c in layer_candidates(kept, rules, raised) if not in_teardown(c.reason, c.line, failed_at)
    ]
    candidates.sort(key=lambda c: (-c.priority, c.line))
    layer = candidates[0] if candidates else None
    if layer is not None and (
        best is None or (layer.priority, -layer.line) > _rule_key(best, matches, by_id)
    ):
        diagnosis = _from_layer(layer, matches, by_id)
    elif best is not None:
        diagnosis = _from_rule(by_id[best], matches, by_id)
    else:
        return Diagnosis(reason=UNKNOWN, category=None, attribution=None, confidence=0.0)
    return _scheduler_statement_wins(diagnosis, matches, by_id)


def _rule_matches(
    kept: list[tuple[int, str]], rules: list[Rule], raised_lines: set[int]
) -> dict[str, list[tuple[int, str]]]:
    """Every rule's matching lines. A generic exception rule skips warning records, and, when the log shows
    raised exceptions, every line that is not one (a docstring or a message that only names the class)."""
    from acme.diagnosis.rootcause import is_generic_exception_rule, is_warning_record

    matches: dict[str, list[tuple[int, str]]] = {}
    generic = {r.id for r in rules if is_generic_exception_rule(r)}
    for number, text in kept:
        warning = None if number not in raised_lines else False  # a raised exception is no warning record
        for rule in rules:
            if rule.id in generic:
                if raised_lines and number not in raised_lines:
                    continue
                warning = is_warning_record(text) if warning is None else warning
                if warning:
                    continue
            if rule.search(text):
                matches.setdefault(rule.id, []).append((number, text))
    return matches


def _before_teardown(
    matches: dict[str, list[tuple[int, str]]], by_id: dict[str, Rule], failed_at: int
) -> dict[str, list[tuple[int, str]]]:
    """``matches`` without the teardown reasons' lines logged after the launcher's first worker failure."""
    from acme.diagnosis.rootcause import in_teardown

    out = {}
    for rid, found in matches.items():
        found = [(n, t) for n, t in found if not in_teardown(by_id[rid].reason, n, failed_at)]
        if found:
            out[rid] = found
    return out


def _best_rule(matches: dict[str, list[tuple[int, str]]], by_id: dict[str, Rule]) -> str | None:
    """The highest-priority matching rule (ties: the earliest line), after ``must_precede``."""
    if not matches:
        return None
    first = {rid: min(n for n, _ in found) for rid, found in matches.items()}
    best = max(matches, key=lambda rid: (by_id[rid].priority, -first[rid]))
    # A root cause that must precede some rules explains them only when logged before them; logged in the
    # same line or after, it is their detail ("Last error: NET/IB ...") and the earliest of them wins.
    explained = [rid for rid in by_id[best].must_precede if rid in matches and first[rid] <= first[best]]
    if explained:
        best = max(explained, key=lambda rid: (by_id[rid].priority, -first[rid]))
    return best


def _rule_key(
    rule_id: str, matches: dict[str, list[tuple[int, str]]], by_id: dict[str, Rule]
) -> tuple[int, int]:
    return by_id[rule_id].priority, -min(n for n, _ in matches[rule_id])


def _confidence(priority: int, category: str | None, rivals: bool) -> float:
    # A root cause (priority >= 75) is strong evidence; a symptom alone much weaker. Another rule of the same
    # priority pointing at a different reason lowers it.
    confidence = 0.9 if priority >= 75 else 0.75 if priority >= 55 else 0.5
    if category == "External" and priority >= 50:
        confidence = 0.9  # the scheduler itself says how the job ended (time limit, preemption, cancellation)
    return round(confidence - (0.2 if rivals else 0.0), 2)


def _from_rule(rule: Rule, matches: dict[str, list[tuple[int, str]]], by_id: dict[str, Rule]) -> Diagnosis:
    rivals = {by_id[r].reason for r in matches if by_id[r].priority == rule.priority} - {rule.reason}
    evidence = [{"line": n, "text": redact(t)[:500]} for n, t in sorted(matches[rule.id])[:_MAX_EVIDENCE]]
    return Diagnosis(
        reason=rule.reason,
        category=rule.category,
        attribution=rule.attribution,
        confidence=_confidence(rule.priority, rule.category, bool(rivals)),
        evidence=evidence,
        mitigation=rule.mitigation,
        rule_id=rule.id,
        rule_version=rule.version,
    )


def _from_layer(layer: Any, matches: dict[str, list[tuple[int, str]]], by_id: dict[str, Rule]) -> Diagnosis:
    """A layer's answer, with the mitigation of a rule for the same reason when the layer has none."""
    same = [by_id[r] for r in matches if by_id[r].reason == layer.reason] or [
        r for r in by_id.values() if r.reason == layer.reason
    ]
    rivals = {by_id[r].reason for r in matches if by_id[r].priority == layer.priority} - {layer.reason}
    category = category_of(layer.reason)
    evidence = [{"line": layer.line, "text": redact(layer.text)[:500]}]
    evidence += [
        {"line": n, "text": redact(t)[:500]} for r in same[:1] for n, t in sorted(matches.get(r.id, []))
    ]
    unique = list({e["line"]: e for e in evidence}.values())[:_MAX_EVIDENCE]
    return Diagnosis(
        reason=layer.reason,
        category=category,
        attribution=attribution_of(layer.reason),
        confidence=_confidence(layer.priority, category, bool(rivals)),
        evidence=unique,
        mitigation=layer.mitigation or (same[0].mitigation if same else None),
        rule_id=f"layer:{layer.layer}",
        rule_version=1,
        origin=layer.origin,
    )


_SIGNAL_OUTCOMES = ("UserCancelled", "KilledBySignal")


def _scheduler_statement_wins(
    diagnosis: Diagnosis, matches: dict[str, list[tuple[int, str]]], by_id: dict[str, Rule]
) -> Diagnosis:
    """An interrupt or a kill is how the scheduler's action looks from inside the job: when the scheduler
    says who ended it (a time limit, a cancellation by the owner or an administrator, a preemption), that
    statement is the answer, wherever it is logged."""
    if diagnosis.reason not in _SIGNAL_OUTCOMES:
        return diagnosis
    stated = [
        rid for rid in matches
        if by_id[rid].category == "External" and by_id[rid].priority >= 50 and by_id[rid].reason not in _SIGNAL_OUTCOMES
    ]  # fmt: skip
    if not stated:
        return diagnosis
    first = {rid: min(n for n, _ in matches[rid]) for rid in stated}
    return _from_rule(by_id[max(stated, key=lambda rid: (by_id[rid].priority, -first[rid]))], matches, by_id)
