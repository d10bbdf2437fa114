"""Secrets out of everything the pipeline writes or sends: one set of patterns for all of it.

Job names, quarantined records, log evidence, owner messages, reports and LLM prompts can all carry
what users type on a command line: tokens, API keys, passwords, credentials in URLs. They are masked as
``[REDACTED]`` before they reach the lake, a report or an LLM endpoint. The raw zone of the lake
(``raw/``, the input exactly as received, for audit and re-parsing) is the one place that keeps them:
it must be access-controlled like the source it copies.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 [REDACTED]"),
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"), "[REDACTED]"),
    # No word boundary around these two: ranks' output interleaved on one line glues a key to its neighbours.
    (re.compile(r"hf_[A-Za-z0-9]{20,}"), "[REDACTED]"),
    (re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{16}"), "[REDACTED]"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), "[REDACTED]"),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), "[REDACTED]"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), "[REDACTED]"),  # JWT
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1[REDACTED]@"),  # user:pass@host
    (
        re.compile(
            r"(?i)(--?(?:password|passwd|pwd|token|api[-_]?key|secret|access[-_]?key|secret[-_]?key)"
            r"(?:\s+|=))(\"[^\"]*\"|'[^']*'|\S+)"
        ),
        r"\1[REDACTED]",
    ),
    (
        re.compile(
            r"(?i)(\b[\w.-]*(?:password|passwd|pwd|token|api[_-]?key|secret|access[_-]?key|credentials?)\b"
            r"[\"']?\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
        ),
        r"\1[REDACTED]",
    ),
)


# A cheap test that a text may hold a secret: every pattern above needs one of these substrings
# (case-insensitive), so most job names and records skip the regexes entirely.
_HINTS = re.compile(
    r"(?i)bearer|sk-|hf_|akia|asia|gh[pousr]_|xox|eyj|://|pass|pwd|token|key|secret|credential"
)


def redact(text: str) -> str:
    """Mask tokens, API keys (sk-, hf_, AKIA...), passwords, URL credentials and bearer tokens."""
    if not _HINTS.search(text):
        return text
    for pattern, replacement in SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_column(values: pd.Series) -> pd.Series:
    """:func:`redact` over a string column; nulls stay null, rows without a hint are not touched."""
    mask = values.notna() & values.astype("str").str.contains(_HINTS, regex=True)
    if not mask.any():
        return values
    values = values.copy()
    values[mask] = values[mask].map(redact)
    return values
