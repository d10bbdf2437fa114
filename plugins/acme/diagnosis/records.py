"""Diagnosis records in the lake: one row per failed job, in the partition of its submit day.

Layout (read by the characterization report, so the column names are a contract)::

    diagnoses/cluster=<c>/date=<YYYY-MM-DD>/diagnoses.parquet

Columns: cluster, job_id (string), date (the job's submit day), reason, category, attribution, confidence
(double), source (rule | retrieval | llm | none), mitigation, rule_id, rule_version, evidence (JSON string of
``[{"line", "text"}]``), similar_cases (JSON string), diagnosed_at (timestamp UTC), and note (what the
pipeline wants a reader to know: a fallback, a missing log, a rule learned).

Writing merges by ``(cluster, job_id)`` under the partition's lake lock and publishes the file whole, so a
retry or a re-run of the same job replaces its row and never adds a second one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from acme.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

    from acme.lake import Lake

SOURCES = ("rule", "retrieval", "llm", "none")

RECORD_COLUMNS = (
    "cluster", "job_id", "date", "reason", "category", "attribution", "confidence", "source", "mitigation",
    "rule_id", "rule_version", "evidence", "similar_cases", "diagnosed_at", "note",
)  # fmt: skip


@dataclass
class DiagnosisRecord:
    """The diagnosis of one failed job, as stored and as handed to routing."""

    cluster: str
    job_id: str
    date: date
    reason: str
    category: str | None
    attribution: str | None
    confidence: float
    source: str
    mitigation: str | None = None
    rule_id: str | None = None
    rule_version: int | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)
    similar_cases: list[dict[str, Any]] = field(default_factory=list)
    diagnosed_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    note: str | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"diagnosis source {self.source!r} is not one of {', '.join(SOURCES)}")
        self.job_id = str(self.job_id)

    def to_row(self) -> dict[str, Any]:
        row = {name: getattr(self, name) for name in RECORD_COLUMNS}
        row["evidence"] = json.dumps(self.evidence, ensure_ascii=False)
        row["similar_cases"] = json.dumps(self.similar_cases, ensure_ascii=False)
        row["confidence"] = float(self.confidence)
        return row

    def to_output(self) -> dict[str, Any]:
        """The command line's answer: reason, category, attribution, confidence, source, evidence, mitigation."""
        keys = ("reason", "category", "attribution", "confidence", "source", "evidence", "mitigation")
        return {key: getattr(self, key) for key in keys}


def record_schema() -> pa.Schema:
    import pyarrow as pa

    types = {
        "date": pa.date32(),
        "confidence": pa.float64(),
        "rule_version": pa.int64(),
        "diagnosed_at": pa.timestamp("us", tz="UTC"),
    }
    return pa.schema([pa.field(name, types.get(name, pa.string())) for name in RECORD_COLUMNS])


def partition_key(cluster: str, day: date) -> str:
    if not cluster or "/" in cluster or "=" in cluster:
        raise InputError("diagnosis record", f"cluster name {cluster!r} cannot name a partition")
    from acme import lake_keys

    return lake_keys.diagnoses_partition(cluster, day)


def write_records(lake: Lake, records: list[DiagnosisRecord]) -> list[str]:
    """Upsert records into their partitions by ``(cluster, job_id)``; returns the partition URLs."""
    import pyarrow as pa

    schema = record_schema()
    urls = []
    for cluster, day in sorted({(r.cluster, r.date) for r in records}):
        incoming = {r.job_id: r for r in records if (r.cluster, r.date) == (cluster, day)}
        key = partition_key(cluster, day)
        with lake.lock(f"diagnoses-{cluster}-{day.isoformat()}"):
            rows = _read_rows(lake, key)
            rows = [row for row in rows if row["job_id"] not in incoming]
            rows += [r.to_row() for r in incoming.values()]
            rows.sort(key=lambda row: row["job_id"])
            table = pa.Table.from_pylist(rows, schema=schema)
            urls.append(lake.write_parquet(key, table))
    return urls


def _read_rows(lake: Lake, key: str) -> list[dict[str, Any]]:
    if not lake.exists(key):
        return []
    table = lake.read_parquet(key)
    for name in RECORD_COLUMNS:  # files written before a column existed
        if name not in table.column_names:
            import pyarrow as pa

            table = table.append_column(name, pa.nulls(table.num_rows, record_schema().field(name).type))
    return table.select(list(RECORD_COLUMNS)).to_pylist()
