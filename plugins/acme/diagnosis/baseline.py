"""The diff against the last good run of the same job family (issue 31, item 2).

A failed run of a job family prints mostly what its successful runs printed too: banners, configuration,
warnings, progress. The lines that are *new* in the failed run are where its failure shows (the cross-job idea
of L4, FSE'25). :func:`baseline_keys` reads a good run's log into the set of its line templates (rank prefixes
stripped, numbers, paths, addresses and times masked, as the compressor compares lines); :func:`novel_lines`
says which kept lines of the failed run are not among them. Those rank first where lines are cut: the prompt
for the agent (``acme.diagnosis.untrusted.select_log_lines``) and the evidence of the diagnosis
(:func:`novel_first`, in ``acme.diagnosis.pipeline``).

:class:`acme.diagnosis.baseline_lookup.BaselineFinder` finds the good run in the lake: the family's last COMPLETED job (same cluster, same
``learning.family_key``: job type, user and name without run numbers -- job records carry no campaign lineage)
that ended before the failed run began, and its log by ``ACME_DIAGNOSIS_LOG_PATTERN``. The nightly diagnosis
(``acme.diagnosis.nightly.diagnose_chunk``) and ``python -m acme diagnose --lake`` use it; a night reads each
good run's log once.

``benchmarks/bench_diagnosis_baseline.py`` measures it on corpus logs whose repository also holds the last
good run before them: the decisive lines among the first lines sent, and how many lines are new.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

_Item = TypeVar("_Item")  # what a numbered line carries: its text, or an evidence entry


def line_key(text: str) -> str:
    """The template of a line: rank/host prefix stripped, variable parts masked (the compressor's masks)."""
    from acme.diagnosis.compress import mask, strip_prefix

    segment = text.split("\r")[-1]
    return mask(strip_prefix(segment)[0]).strip()


def baseline_keys(lines: Iterable[str]) -> set[str]:
    """The templates of every line of a good run's log (the whole log: a line anywhere in it is not new)."""
    return {key for key in (line_key(line) for line in lines) if key}


def baseline_keys_of_log(path: str | Path) -> set[str]:
    """:func:`baseline_keys` of a log file (plain or gzip), read as the compressor reads it."""
    from acme.diagnosis.compress import _lines_of, _split_lines

    with _lines_of(Path(path)) as raw:
        return baseline_keys(_split_lines(iter(raw)))


def novel_lines(kept: Iterable[tuple[int, str]], baseline: AbstractSet[str]) -> set[int]:
    """The numbers of the kept lines whose template the good run never printed."""
    return {number for number, text in kept if line_key(text) not in baseline}


def novel_first(lines: Iterable[tuple[int, _Item]], novel: set[int] | None) -> list[tuple[int, _Item]]:
    """``lines`` with the new ones (``novel``, line numbers) first, each group in its given order: where a
    list of lines is cut (the evidence of a diagnosis), the lines the good run never printed survive."""
    ordered = list(lines)
    if not novel:
        return ordered
    return [item for item in ordered if item[0] in novel] + [item for item in ordered if item[0] not in novel]


@dataclass(frozen=True)
class Baseline:
    """The last good run of a failed job's family, as the pipeline uses it: its line templates (None when
    there is no usable good run) and a note saying which run it was, or why there is none."""

    keys: frozenset[str] | None
    note: str
    good_job_id: str | None = None
