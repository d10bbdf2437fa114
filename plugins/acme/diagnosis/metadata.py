"""Job metadata as diagnostic evidence: the scheduler's facts about a job, as lines the rules can match.

A job record says things a log may not: Slurm's state (``TIMEOUT``, ``OUT_OF_MEMORY``, ``NODE_FAIL``,
``PREEMPTED``, ``CANCELLED``), the exit code, and for containers the signal hidden in it (128 + N: 137 is
SIGKILL, 143 SIGTERM, 139 SIGSEGV), and Kubernetes termination reasons (``OOMKilled``, ``Evicted``,
``DeadlineExceeded``). :func:`job_fact_lines` turns them into numbered line 0 facts such as
``job state: TIMEOUT`` or ``job exit_code: 137 (signal 9 SIGKILL)``, matched by the same rules as log
lines, so a root cause in the log still outranks a fact that is only its symptom.

:func:`diagnose_from_metadata` diagnoses many jobs that have no log in one pass: jobs with the same facts
share one rule evaluation, so a day of thousands of failed jobs takes a fraction of a second and loads no
model.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.diagnosis.rules import Diagnosis, Rule

# Keys of a job record (or a manual run's job dict) whose values are scheduler facts.
_FACT_KEYS = ("state", "status", "exit_reason", "reason", "error")


def _signal_name(number: int) -> str | None:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def exit_code_fact(exit_code: Any) -> str | None:
    """``job exit_code: N``, with the signal spelled out when N is 128 + a signal number (a container's
    or a shell's way of reporting death by signal); None when there is no code or it is 0."""
    if exit_code is None or isinstance(exit_code, bool):
        return None
    try:
        code = int(exit_code)
    except (TypeError, ValueError):
        return None
    if code == 0:
        return None
    name = _signal_name(code - 128) if 128 < code < 128 + 65 else None
    return f"job exit_code: {code}" + (f" (signal {code - 128} {name})" if name else "")


def job_fact_lines(job: dict[str, Any] | None) -> list[tuple[int, str]]:
    """The job's scheduler facts as ``(0, text)`` pairs, matched like log lines (line 0: before any)."""
    if not job:
        return []
    facts = [(0, f"job {key}: {job[key]}") for key in _FACT_KEYS if job.get(key)]
    exit_fact = exit_code_fact(job.get("exit_code"))
    if exit_fact:
        facts.append((0, exit_fact))
    signal_number = job.get("signal")
    if signal_number not in (None, 0, ""):
        name = _signal_name(int(signal_number)) if str(signal_number).isdigit() else None
        facts.append((0, f"job signal: {signal_number}" + (f" {name}" if name else "")))
    return facts


def diagnose_from_metadata(
    jobs: Iterable[dict[str, Any]], rules: list[Rule] | None = None
) -> list[Diagnosis]:
    """One diagnosis per job from its metadata alone, in the jobs' order; jobs with identical facts share
    one evaluation of the rules. No fact matched gives ``Unknown`` (confidence 0), never a guess."""
    from dataclasses import replace

    from acme.diagnosis.rules import diagnose_lines, load_rules

    rules = rules if rules is not None else load_rules()
    decided: dict[tuple[str, ...], Diagnosis] = {}
    out = []
    for job in jobs:
        facts = job_fact_lines(job)
        key = tuple(text for _, text in facts)
        if key not in decided:
            decided[key] = diagnose_lines(facts, rules)
        shared = decided[key]
        out.append(replace(shared, evidence=[dict(e) for e in shared.evidence]))
    return out
