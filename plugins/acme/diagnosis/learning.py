"""Rules the diagnosis learns, and filter rules kept per job family: versioned in the lake, with provenance.

**Learned diagnosis rules.** A diagnosis confirmed by an operator, or given by the LLM agent with at least
``ACME_DIAGNOSIS_LEARN_MIN_CONFIDENCE``, may bring a regex for its failure. It becomes a rule only when

* the reason is in the taxonomy and the regex compiles, is not trivially broad (matches an empty line),
* it matches its own case (the case's error lines or signature),
* it matches no stored case of another reason (error lines or signature, every cluster), and
* it changes the outcome of no labelled corpus line (``ACME_DIAGNOSIS_LABELLED_LINES``) to a reason the
  line's label does not accept: a rule may correct the corpus, never break it.

Operators teach rules too: a triage answer (``acme.diagnosis.triage``) goes through the same checks.

Learned rules live in ``diagnosis/rules/learned.yaml``; every change writes the whole new version to
``diagnosis/rules/history/learned-v<NNNN>.yaml`` too. Each rule says which case taught it, from which
source, with what confidence, when. They take the priority of the bundled rules of their reason (so a
learned ECC pattern still beats a NCCL timeout) and are merged after the bundled rules.

**Family filter rules.** Jobs of one family (same type, user and name prefix) print the same routine lines;
filter rules proposed for one of them (by the log agent) are stored per family in
``diagnosis/filter_rules/family=<key>/filter_rules.yaml`` (history beside it) and used for later jobs of
the family, before the bundled filter rules.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from acme import lake_keys
from acme.diagnosis.rules import (
    EXTRA_REASONS,
    TAXONOMY,
    UNKNOWN,
    Rule,
    attribution_of,
    category_of,
    load_rules,
    parse_rules,
)
from acme.errors import ConfigError, InputError

if TYPE_CHECKING:
    from pathlib import Path

    from acme.diagnosis.compress import FilterRule
    from acme.diagnosis.retrieval import Case
    from acme.lake import Lake

LEARN_SOURCES = ("operator", "agent")
MAX_REGEX_CHARS = 500
_DEFAULT_PRIORITY = 60


@dataclass(frozen=True)
class LearnOutcome:
    """What became of a proposed rule: ``added``, ``exists`` (the same rule is already known) or ``refused``."""

    status: str
    why: str
    rule_id: str | None = None
    version: int | None = None

    @property
    def accepted(self) -> bool:
        return self.status in ("added", "exists")


# ------------------------------------------------------------------------------------------ YAML in the lake
def _read_yaml(lake: Lake, key: str) -> Any:
    import yaml

    if not lake.exists(key):
        return None
    try:
        return yaml.safe_load(lake.read_bytes(key))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{lake.url(key)} is not valid YAML: {exc}") from exc


def _write_yaml(lake: Lake, key: str, document: Any) -> str:
    import yaml

    return lake.write_bytes(key, yaml.safe_dump(document, sort_keys=False, allow_unicode=True).encode())


# ------------------------------------------------------------------------------------------ learned rules
def load_learned_document(lake: Lake) -> dict[str, Any]:
    document = _read_yaml(lake, lake_keys.LEARNED_RULES) or {}
    if not isinstance(document, dict):
        raise ConfigError(
            f"{lake.url(lake_keys.LEARNED_RULES)}: expected a mapping with 'version' and 'rules'"
        )
    return {"version": int(document.get("version") or 0), "rules": list(document.get("rules") or [])}


def load_learned_rules(lake: Lake) -> list[Rule]:
    """The learned rules, validated like the bundled ones (an invalid file raises ConfigError naming it)."""
    document = load_learned_document(lake)
    if not document["rules"]:
        return []
    return parse_rules(document, lake.url(lake_keys.LEARNED_RULES))


def rules_with_learned(lake: Lake | None) -> list[Rule]:
    """The bundled rules followed by the learned ones (learned ids never shadow bundled ones)."""
    bundled = load_rules()
    if lake is None:
        return bundled
    ids = {r.id for r in bundled}
    return bundled + [r for r in load_learned_rules(lake) if r.id not in ids]


def learn_rule(
    lake: Lake,
    case: Case,
    regex: str | None,
    *,
    source: str,
    confidence: float | None = None,
    mitigation: str | None = None,
    by: str | None = None,
    min_confidence: float | None = None,
    labelled: Sequence[tuple[str, str, tuple[str, ...]]] | None = None,
    now: datetime | None = None,
) -> LearnOutcome:
    """Add ``regex`` as a rule for ``case.reason`` if it passes every check (see the module docstring).
    ``labelled``: ``(text, label, alternatives)`` lines; default the configured labelled corpus."""
    refusal = _refusal(lake, case, regex, source, confidence, min_confidence)
    if refusal:
        return LearnOutcome("refused", refusal)
    assert regex is not None  # checked by _refusal
    clash = corpus_clash(lake, case, regex, labelled_corpus_lines() if labelled is None else labelled)
    if clash:
        return LearnOutcome("refused", clash)

    rule_id = f"learned-{case.reason.lower()}-{hashlib.sha1(regex.encode()).hexdigest()[:10]}"
    with lake.lock("diagnosis-rules-learned"):
        document = load_learned_document(lake)
        for entry in document["rules"]:
            if entry.get("id") == rule_id:
                return LearnOutcome(
                    "exists", "the same rule was learned before", rule_id, document["version"]
                )
        version = document["version"] + 1
        at = (now or datetime.now(UTC)).isoformat()
        document["rules"].append(
            _learned_entry(rule_id, case, regex, version, source, confidence, mitigation, by, at)
        )
        document = {"version": version, "updated_at": at, "rules": document["rules"]}
        parse_rules(document, "learned rules")  # never publish a file that would not load
        _write_yaml(lake, lake_keys.learned_rules_version(version), document)
        _write_yaml(lake, lake_keys.LEARNED_RULES, document)
    return LearnOutcome("added", f"learned from {case.case_id} ({source})", rule_id, version)


def _refusal(
    lake: Lake,
    case: Case,
    regex: str | None,
    source: str,
    confidence: float | None,
    min_confidence: float | None,
) -> str | None:
    """Why ``regex`` may not become a rule for ``case`` (None when it may): who proposed it, how sure, and
    whether the regex is safe, specific and matches its own case but no stored case of another reason."""
    from acme import settings

    if source not in LEARN_SOURCES:
        return f"source {source!r} cannot teach rules (only {', '.join(LEARN_SOURCES)})"
    threshold = settings.diagnosis().learn_min_confidence if min_confidence is None else min_confidence
    if source == "agent" and (confidence is None or confidence < threshold):
        return f"agent confidence {confidence} is below {threshold}"
    known = {**TAXONOMY, **EXTRA_REASONS}
    if case.reason not in known or case.reason == UNKNOWN:
        return f"reason {case.reason!r} is not in the failure taxonomy"
    if not regex or not regex.strip():
        return "no regex proposed"
    pattern, problem = _safe_pattern(regex)
    if pattern is None:
        return problem
    if not (pattern.search(case.error_text) or pattern.search(case.signature)):
        return f"regex does not match its own case {case.case_id}"
    clash = _first_other_reason_match(lake, pattern, case)
    return f"regex also matches stored case {clash}" if clash else None


def corpus_clash(
    lake: Lake, case: Case, regex: str, labelled: Sequence[tuple[str, str, tuple[str, ...]]]
) -> str | None:
    """How the rule would break a labelled line (None when it breaks none): a line it matches whose
    diagnosis it changes to a reason the line's label does not accept."""
    from acme.diagnosis.rules import diagnose_lines

    pattern = re.compile(regex)
    touched = [item for item in labelled if pattern.search(item[0])]
    if not touched:
        return None
    rules = rules_with_learned(lake)
    entry = _learned_entry("candidate", case, regex, 0, "candidate", None, None, None, "")
    candidate = parse_rules({"rules": [entry]}, "candidate rule")[0]
    for text, label, alternatives in touched:
        before = diagnose_lines([(1, text)], rules).reason
        after = diagnose_lines([(1, text)], [*rules, candidate]).reason
        if after != before and after not in (label, *alternatives):
            return (
                f"regex would change labelled corpus line {text[:100]!r} from {before} to {after} "
                f"(labelled {label})"
            )
    return None


_LABELLED: dict[str, tuple[float, list[tuple[str, str, tuple[str, ...]]]]] = {}


def labelled_corpus_lines(path: Path | None = None) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(text, label, alternatives)`` of the configured labelled corpus (``ACME_DIAGNOSIS_LABELLED_LINES``;
    cached per file version); empty when none is configured."""
    import yaml

    from acme import settings

    path = path or settings.diagnosis().labelled_lines
    if path is None or not path.exists():
        return []
    stamp = path.stat().st_mtime
    cached = _LABELLED.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        groups = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        lines = [
            (str(item["text"]), str(item["reason"]), tuple(item.get("alternatives") or ()))
            for group in groups
            for item in group["lines"]
        ]
    except (yaml.YAMLError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a labelled corpus of lines ({type(exc).__name__}: {exc})") from exc
    _LABELLED[str(path)] = (stamp, lines)
    return lines


def _safe_pattern(regex: str) -> tuple[re.Pattern[str] | None, str]:
    """The compiled regex, or None and why it may not run on every log."""
    from acme.diagnosis.regex_safety import regex_problem

    if len(regex) > MAX_REGEX_CHARS:
        return None, f"regex longer than {MAX_REGEX_CHARS} characters"
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        return None, f"regex does not compile: {exc}"
    unsafe = regex_problem(regex, max_chars=MAX_REGEX_CHARS)
    if unsafe:  # nested quantifiers and the like would stall every later diagnosis (ReDoS)
        return None, f"regex is unsafe to run on every log: it {unsafe}"
    if pattern.search("") or pattern.search(" "):
        return None, "regex matches an empty line: it would match every log"
    return pattern, ""


def _learned_entry(
    rule_id: str,
    case: Case,
    regex: str,
    version: int,
    source: str,
    confidence: float | None,
    mitigation: str | None,
    by: str | None,
    at: str,
) -> dict[str, Any]:
    bundled = [r for r in load_rules() if r.reason == case.reason]
    return {
        "id": rule_id,
        "reason": case.reason,
        "category": category_of(case.reason),
        # One attribution function for every reason (rules.attribution_of): a learned rule is attributed as
        # the bundled rules and the agent attribute its reason (FailSlow and NCCLError are infrastructure).
        "attribution": attribution_of(case.reason),
        "priority": max((r.priority for r in bundled), default=_DEFAULT_PRIORITY),
        "patterns": [regex],
        "mitigation": mitigation or (bundled[0].mitigation if bundled else "See the evidence lines."),
        "version": version,
        "provenance": f"learned from {case.case_id} ({source}"
        + (f", confidence {confidence:.2f}" if confidence is not None else "")
        + f", {at})",
        "learned_from": {
            "case_id": case.case_id,
            "source": source,
            "confidence": confidence,
            "by": by,
            "at": at,
        },
    }


def _first_other_reason_match(lake: Lake, pattern: re.Pattern[str], case: Case) -> str | None:
    """The id of a stored case of another reason that the pattern matches, if any."""
    import pyarrow.parquet as pq

    for key in lake.list(lake_keys.DIAGNOSIS_CASES):
        if not key.endswith("/cases.parquet"):
            continue
        with lake.open(key) as handle:
            table = pq.read_table(handle, columns=["case_id", "reason", "signature", "error_text"])
        for row in table.to_pylist():
            if row["reason"] == case.reason or row["case_id"] == case.case_id:
                continue
            if pattern.search(row["error_text"] or "") or pattern.search(row["signature"] or ""):
                return row["case_id"]
    return None


# ------------------------------------------------------------------------------------------ family filter rules
_RUN_TOKEN_RE = re.compile(r"^(?:\d+|.*\d{4,}.*|(?:run|try|attempt|v|r|seed)\d+)$", re.IGNORECASE)
_SLUG_RE = re.compile(r"[^a-z0-9-]+")


def family_key(job: dict[str, Any] | None) -> str:
    """The family of a job: ``<type>.<user>.<name prefix>`` (run numbers, dates and ids dropped)."""
    job = job or {}
    tokens = []
    for token in re.split(r"[-_.\s/]+", str(job.get("job_name") or "")):
        if not token or _RUN_TOKEN_RE.match(token):
            break
        tokens.append(token)
        if len(tokens) == 3:
            break

    def slug(value: Any) -> str:
        text = _SLUG_RE.sub("-", str(value or "").lower()).strip("-")
        return text[:40] or "any"

    return ".".join([slug(job.get("job_type")), slug(job.get("user")), slug("-".join(tokens))])


def _family_prefix(family: str) -> str:
    if not family or not re.fullmatch(r"[a-z0-9.-]+", family) or ".." in family:
        raise InputError("family filter rules", f"family key {family!r} is not one made by family_key()")
    from acme import lake_keys

    return lake_keys.learned_filter_rules(family)


def load_family_filter_rules(lake: Lake, family: str) -> list[FilterRule]:
    """The current filter rules of a job family (empty when it has none)."""
    from acme.diagnosis.compress import parse_filter_rules

    key = f"{_family_prefix(family)}/filter_rules.yaml"
    document = _read_yaml(lake, key)
    if not document or not document.get("rules"):
        return []
    return parse_filter_rules(document, lake.url(key))


def save_family_filter_rules(
    lake: Lake,
    family: str,
    rules: list[FilterRule] | list[dict[str, Any]],
    provenance: dict[str, Any] | str,
    now: datetime | None = None,
) -> int:
    """Merge ``rules`` into the family's filter rules by id; returns the version now current.

    A rule with an id already stored and the same regex changes nothing (so re-saving is idempotent); a new
    regex under an old id replaces it with the rule's version raised. Every change writes a new version.
    """
    from acme.diagnosis.compress import parse_filter_rules

    prefix = _family_prefix(family)
    incoming = [_filter_rule_entry(rule) for rule in rules]
    parse_filter_rules({"rules": incoming}, f"proposed filter rules for family {family}")
    with lake.lock(f"diagnosis-filter-rules-{family}"):
        current = _read_yaml(lake, f"{prefix}/filter_rules.yaml") or {"version": 0, "rules": []}
        by_id = {entry["id"]: entry for entry in current["rules"]}
        changed = False
        at = (now or datetime.now(UTC)).isoformat()
        for entry in incoming:
            old = by_id.get(entry["id"])
            if old is not None and old["regex"] == entry["regex"]:
                continue
            entry["version"] = (int(old["version"]) + 1) if old else int(entry["version"])
            entry["provenance"] = {
                "at": at,
                **(provenance if isinstance(provenance, dict) else {"note": provenance}),
            }
            by_id[entry["id"]] = entry
            changed = True
        if not changed:
            return int(current["version"])
        version = int(current["version"]) + 1
        document = {"family": family, "version": version, "updated_at": at, "rules": list(by_id.values())}
        _write_yaml(lake, f"{prefix}/history/v{version:04d}.yaml", document)
        _write_yaml(lake, f"{prefix}/filter_rules.yaml", document)
    return version


def _filter_rule_entry(rule: FilterRule | dict[str, Any]) -> dict[str, Any]:
    if isinstance(rule, dict):
        entry = dict(rule)
        if hasattr(entry.get("regex"), "pattern"):
            entry["regex"] = entry["regex"].pattern
        return entry
    entry = {
        "id": rule.id,
        "regex": rule.pattern.pattern,
        "description": rule.description,
        "version": rule.version,
    }
    if rule.keep_first is not None:
        entry["keep_first"] = rule.keep_first
    return entry
