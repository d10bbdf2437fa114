"""The diff against the last good run of the same job family (issue 31, item 2).

A failed run of a job family (same name and user, or a campaign's lineage) prints mostly what its successful
runs printed too: banners, configuration, warnings, progress. The lines that are *new* in the failed run are
where its failure shows (the cross-job idea of L4, FSE'25). :func:`baseline_keys` reads a good run's log into
the set of its line templates (rank prefixes stripped, numbers, paths, addresses and times masked, as the
compressor compares lines); :func:`novel_lines` says which kept lines of the failed run are not among them.
Those rank first when the prompt for the agent has to be cut (``acme.diagnosis.untrusted.select_log_lines``;
``acme.diagnosis.pipeline.diagnose_log_lines(..., baseline=...)`` takes the good run's templates or its log).

``benchmarks/bench_diagnosis_baseline.py`` measures it on corpus logs whose repository also holds the last
good run before them: the decisive lines among the first lines sent, and how many lines are new.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


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


def novel_lines(kept: Iterable[tuple[int, str]], baseline: set[str]) -> set[int]:
    """The numbers of the kept lines whose template the good run never printed."""
    return {number for number, text in kept if line_key(text) not in baseline}
