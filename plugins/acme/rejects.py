"""A rejected input row as the quarantine keeps it (``quarantine/…``): the file, the line, the reason and
the record as text. Every parser builds its rejects this way: the job-source parsers (``acme.jobs``)
and the monitoring parsers (``acme.metrics``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

REJECT_COLUMNS = {"source_file": "str", "source_line": "Int64", "reason": "str", "record": "str"}


def rejects_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Rejects DataFrame from dicts with source_file, source_line, reason, record."""
    import pandas as pd

    frame = pd.DataFrame.from_records(records, columns=list(REJECT_COLUMNS))
    return frame.astype(REJECT_COLUMNS)


def record_text(fields: dict[str, Any]) -> str:
    """A rejected record as JSON text, for the quarantine."""
    return json.dumps(fields, default=str, ensure_ascii=False, sort_keys=True)
