"""Test helpers of the failure diagnosis: code that only tests used, moved out of ``acme.diagnosis`` (issue 18).

``diagnose_log`` (the rule stage on a whole log, from ``rules``), ``confirm_case`` (an operator confirming a
stored case, from ``learning``: no entry point calls it yet), ``waiting_jobs`` (the carry-over queue's
waiting entries, from ``nightly``), ``read_records`` (from ``records``) and ``compile_safe`` /
``UnsafeRegex`` (from ``regex_safety``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Any

from acme.diagnosis.compress import compress_log
from acme.diagnosis.learning import LearnOutcome, learn_rule
from acme.diagnosis.metadata import job_fact_lines
from acme.diagnosis.nightly import _diagnosed_at, queue_key
from acme.diagnosis.records import RECORD_COLUMNS, DiagnosisRecord, _read_rows, partition_key
from acme.diagnosis.regex_safety import MAX_REGEX_CHARS, regex_problem
from acme.diagnosis.rules import TAXONOMY, Diagnosis, Rule, diagnose_lines
from acme.errors import InputError
from acme.lake import Lake

DIAGNOSED_KINDS = ("error", "traceback")


def diagnose_log(
    path_or_lines: str | Path | Iterable[str],
    job: dict[str, Any] | None = None,
    *,
    rules: list[Rule] | None = None,
) -> Diagnosis:
    """Compress a log (file, ``.gz`` or lines) and diagnose its root cause from its error and traceback lines
    and the job's scheduler facts -- the rule stage of the pipeline, without lake, retrieval or agent."""
    compressed = compress_log(path_or_lines)
    kept = [(k.line, k.text) for k in compressed.lines if k.kind in DIAGNOSED_KINDS]
    return diagnose_lines(job_fact_lines(job) + kept, rules)


def confirm_case(
    lake: Lake, cluster: str, job_id: str, reason: str, regex: str, by: str, mitigation: str | None = None
) -> LearnOutcome:
    """An operator confirms (or corrects) the reason of a stored case and teaches its regex."""
    from dataclasses import replace

    from acme.diagnosis.retrieval import Case, CaseStore

    store = CaseStore(lake)
    rows = [r for r in store.read(cluster) if r["job_id"] == str(job_id)]
    if not rows:
        raise InputError(f"{cluster}/{job_id}", "no stored diagnosis case for this job")
    row = rows[0]
    case = Case(**{name: row[name] for name in Case.__dataclass_fields__})
    if reason != case.reason:
        case = replace(
            case, reason=reason, category=TAXONOMY.get(reason), attribution=None, source="operator"
        )
        store.upsert([case])
    return learn_rule(lake, case, regex, source="operator", mitigation=mitigation, by=by)


def waiting_jobs(lake: Lake, cluster: str) -> list[dict[str, Any]]:
    """The entries of a cluster's carry-over queue still without a record newer than their queueing."""
    entries = (lake.read_json(queue_key(cluster), default=None) or {}).get("jobs", [])
    records = {d: _diagnosed_at(lake, cluster, date.fromisoformat(d)) for d in {e["day"] for e in entries}}
    return [e for e in entries if records[e["day"]].get(e["job"]["job_id"], "") < e["queued_at"]]


def read_records(lake: Lake, cluster: str, day: date) -> list[DiagnosisRecord]:
    """The stored records of one cluster and submit day, ordered by job id."""
    return [_record(row) for row in _read_rows(lake, partition_key(cluster, day))]


def _record(row: dict[str, Any]) -> DiagnosisRecord:
    """A stored row back as a record (evidence and similar cases are JSON text in the table)."""
    values: dict[str, Any] = {name: row.get(name) for name in RECORD_COLUMNS}
    values["evidence"] = json.loads(values["evidence"] or "[]")
    values["similar_cases"] = json.loads(values["similar_cases"] or "[]")
    return DiagnosisRecord(**values)


class UnsafeRegex(ValueError):
    """A proposed regex that must not become a rule; the message says why."""


def compile_safe(pattern: Any, *, max_chars: int = MAX_REGEX_CHARS) -> re.Pattern[str]:
    """Compile a proposed regex, or raise :class:`UnsafeRegex` naming the pattern and the problem."""
    problem = regex_problem(pattern, max_chars=max_chars)
    if problem:
        raise UnsafeRegex(f"regex {str(pattern)[:80]!r} {problem}")
    return re.compile(pattern)
