"""Test helpers of the failure diagnosis (moved out of ``acme.diagnosis.rules``: only tests used it)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from acme.diagnosis.compress import compress_log
from acme.diagnosis.metadata import job_fact_lines
from acme.diagnosis.rules import Diagnosis, Rule, diagnose_lines

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
