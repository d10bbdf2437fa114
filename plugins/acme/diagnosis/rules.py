"""Rule-based root-cause diagnosis of failed jobs (the offline half of the paper's failure diagnosis).

The log is compressed first (:mod:`acme.diagnosis.compress`); the rules of ``include/diagnosis/rules.yaml``
are then searched in its error and traceback lines. Every rule names a failure reason of the paper's
taxonomy (Table 3) -- plus ``LossSpike`` and ``GPUDriverFault`` -- with a priority: root causes (ECC,
NVLink, a lost GPU, CUDA errors, out of memory, specific Python exceptions) rank above their symptoms
(NCCL watchdog timeouts, connection resets, bare RuntimeErrors), because one hardware fault makes every
other rank log a timeout. The highest-priority match wins; among equal priorities, the earliest line (the
first rank to fail). When nothing matches the answer is ``Unknown`` with confidence 0: never a guess dressed
as a rule.

Evidence lines and compressed output go through :func:`redact`, which masks tokens, keys and passwords.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acme.errors import ConfigError
from acme.secrets import redact

# The paper's failure taxonomy (reference failure_taxonomy.csv): reason -> category.
TAXONOMY: dict[str, str] = {
    "NVLinkError": "Infrastructure", "CUDAError": "Infrastructure", "NodeFailure": "Infrastructure",
    "ECCError": "Infrastructure", "NetworkError": "Infrastructure", "ConnectionError": "Infrastructure",
    "S3StorageError": "Infrastructure", "NCCLTimeoutError": "Infrastructure", "NCCLRemoteError": "Infrastructure",
    "DataloaderKilled": "Framework", "AttributeError": "Framework", "OutOfMemoryError": "Framework",
    "RuntimeError": "Framework", "AssertionError": "Framework", "ValueError": "Framework",
    "ZeroDivisionError": "Framework", "ModelLoadingError": "Framework", "DatasetLoadingError": "Framework",
    "FileNotFoundError": "Script", "OSError": "Script", "TypeError": "Script", "NameError": "Script",
    "PermissionError": "Script", "ImportError": "Script", "KeyError": "Script", "SyntaxError": "Script",
    "ArgumentError": "Script", "CalledProcessError": "Script", "IndexError": "Script",
}  # fmt: skip
# Reasons added to the taxonomy by this project (see rules.yaml for why).
EXTRA_REASONS: dict[str, str] = {"LossSpike": "Framework", "GPUDriverFault": "Infrastructure"}
CATEGORIES = ("Infrastructure", "Framework", "Script")
ATTRIBUTIONS = ("infrastructure", "user")
UNKNOWN = "Unknown"
_DIAGNOSED_KINDS = ("error", "traceback")
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
        }


# ------------------------------------------------------------------------------------------------ rules
def default_rules_path() -> Path:
    from acme.config import include_dir

    return include_dir() / "diagnosis" / "rules.yaml"


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
    known = {**TAXONOMY, **EXTRA_REASONS}
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: rule #{index} is not a mapping")
        rule_id = entry.get("id")
        if not isinstance(rule_id, str) or not rule_id:
            raise ConfigError(f"{source}: rule #{index} has no id")
        where = f"{source}: rule {rule_id!r}"
        if rule_id in seen:
            raise ConfigError(f"{where} is defined twice")
        seen.add(rule_id)
        missing = [
            f
            for f in ("reason", "category", "attribution", "priority", "patterns", "mitigation", "version")
            if entry.get(f) in (None, "", [])
        ]
        if missing:
            raise ConfigError(f"{where} lacks {', '.join(missing)}")
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
        raw_patterns = entry["patterns"]
        if isinstance(raw_patterns, str):
            raw_patterns = [raw_patterns]
        compiled = []
        for raw in raw_patterns:
            try:
                compiled.append(re.compile(str(raw)))
            except re.error as exc:
                raise ConfigError(f"{where}: invalid pattern {raw!r}: {exc}") from exc
        rules.append(
            Rule(
                id=rule_id,
                reason=reason,
                category=category,
                attribution=entry["attribution"],
                priority=entry["priority"],
                patterns=tuple(compiled),
                mitigation=str(entry["mitigation"]).strip(),
                version=int(entry["version"]),
                provenance=str(entry.get("provenance", "")),
            )
        )
    return rules


# ------------------------------------------------------------------------------------------------ diagnosis
def diagnose_lines(kept: Iterable[tuple[int, str]], rules: list[Rule] | None = None) -> Diagnosis:
    """Diagnose from already-selected ``(line number, text)`` pairs (error and traceback lines)."""
    rules = rules if rules is not None else load_rules()
    matches: dict[str, list[tuple[int, str]]] = {}
    by_id = {r.id: r for r in rules}
    for number, text in kept:
        for rule in rules:
            if rule.search(text):
                matches.setdefault(rule.id, []).append((number, text))
    if not matches:
        return Diagnosis(reason=UNKNOWN, category=None, attribution=None, confidence=0.0)
    best = max(matches, key=lambda rid: (by_id[rid].priority, -min(n for n, _ in matches[rid])))
    rule = by_id[best]
    # Confidence: a root cause (priority >= 75) is strong evidence; a symptom alone much weaker. Another
    # rule of the same priority pointing at a different reason halves the margin.
    confidence = 0.9 if rule.priority >= 75 else 0.75 if rule.priority >= 55 else 0.5
    rivals = {by_id[r].reason for r in matches if by_id[r].priority == rule.priority} - {rule.reason}
    if rivals:
        confidence -= 0.2
    evidence = [{"line": n, "text": redact(t)[:500]} for n, t in sorted(matches[best])[:_MAX_EVIDENCE]]
    return Diagnosis(
        reason=rule.reason,
        category=rule.category,
        attribution=rule.attribution,
        confidence=round(confidence, 2),
        evidence=evidence,
        mitigation=rule.mitigation,
        rule_id=rule.id,
        rule_version=rule.version,
    )


def diagnose_log(
    path_or_lines: str | Path | Iterable[str],
    job: dict[str, Any] | None = None,
    *,
    rules: list[Rule] | None = None,
) -> Diagnosis:
    """Compress a log (file, ``.gz`` or lines) and diagnose its root cause."""
    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.metadata import job_fact_lines

    compressed = compress_log(path_or_lines)
    kept = [(k.line, k.text) for k in compressed.lines if k.kind in _DIAGNOSED_KINDS]
    return diagnose_lines(job_fact_lines(job) + kept, rules)
