"""``python -m acme diagnose LOG [--job JSON] [--lake URI]``: the diagnosis of one log, as JSON.

Prints ``{"reason", "category", "attribution", "confidence", "source", "evidence": [{"line", "text"}],
"mitigation"}``. Offline by default: the bundled rules (and the LLM agent when an endpoint is configured).
With ``--lake`` the lake's learned rules, family filter rules and retrieval of similar past cases join in;
the command line only reads the lake, it never stores a case or learns a rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acme.errors import InputError


def read_job_argument(job_json: str | Path | None) -> dict[str, Any] | None:
    """Job metadata from a JSON object given inline or as a file; a clear InputError otherwise."""
    if not job_json:
        return None
    raw = str(job_json)
    try:
        job = json.loads(Path(raw).read_text(encoding="utf-8") if Path(raw).is_file() else raw)
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(raw, f"job metadata is not a JSON object: {exc}") from exc
    if not isinstance(job, dict):
        raise InputError(raw, "job metadata is not a JSON object")
    return job


def diagnose_log_cli(
    log_path: str | Path, job_json: str | Path | None = None, lake_uri: str | None = None
) -> dict[str, Any]:
    """Diagnose the log file at ``log_path``; see the module docstring for what is used."""
    from acme.diagnosis.pipeline import diagnose_log_lines

    path = Path(log_path)
    if not path.is_file():
        raise InputError(str(path), "log file not found")
    job = read_job_argument(job_json) or {}
    lake = None
    if lake_uri:
        from acme.lake import open_lake

        lake = open_lake(lake_uri)
    record = diagnose_log_lines(
        path,
        job,
        cluster=str(job.get("cluster") or "adhoc"),
        lake=lake,
        learn=False,
        store_case=False,
    )
    return record.to_output()
