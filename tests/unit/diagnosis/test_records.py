"""Diagnosis records: the partition layout and columns others read, and upserts that never duplicate."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from acme.diagnosis.records import RECORD_COLUMNS, DiagnosisRecord, write_records
from acme.errors import InputError
from acme.lake import Lake
from tests.diagnosis_support import read_records

DAY = date(2023, 7, 1)


def record(job_id: str, reason: str = "ECCError", **overrides) -> DiagnosisRecord:
    values = {
        "cluster": "seren",
        "job_id": job_id,
        "date": DAY,
        "reason": reason,
        "category": "Infrastructure",
        "attribution": "infrastructure",
        "confidence": 0.9,
        "source": "rule",
        "mitigation": "drain the node",
        "rule_id": "ecc-uncorrectable",
        "rule_version": 1,
        "evidence": [{"line": 12, "text": "RuntimeError: CUDA error: uncorrectable ECC error encountered"}],
        "similar_cases": [{"case_id": "seren/7", "reason": "ECCError", "similarity": 0.93}],
        "diagnosed_at": datetime(2023, 7, 2, 3, 0, tzinfo=UTC),
    }
    values.update(overrides)
    return DiagnosisRecord(**values)


def test_layout_and_columns_are_the_contract(tmp_path):
    lake = Lake(str(tmp_path))
    (url,) = write_records(lake, [record("42")])
    path = tmp_path / "diagnoses/cluster=seren/date=2023-07-01/diagnoses.parquet"
    assert url == str(path)
    table = pq.read_table(path)
    assert tuple(table.column_names) == RECORD_COLUMNS
    types = {f.name: f.type for f in table.schema}
    assert types["job_id"] == pa.string() and types["confidence"] == pa.float64()
    assert types["date"] == pa.date32() and types["diagnosed_at"] == pa.timestamp("us", tz="UTC")
    row = table.to_pylist()[0]
    assert json.loads(row["evidence"]) == [
        {"line": 12, "text": "RuntimeError: CUDA error: uncorrectable ECC error encountered"}
    ]
    assert json.loads(row["similar_cases"])[0]["case_id"] == "seren/7"


def test_rewriting_a_job_replaces_its_row_and_keeps_the_others(tmp_path):
    lake = Lake(str(tmp_path))
    write_records(lake, [record("1"), record("2", reason="KeyError", category="Script", attribution="user")])
    write_records(lake, [record("1", reason="NVLinkError", confidence=0.95)])
    write_records(lake, [record("1", reason="NVLinkError", confidence=0.95)])  # a retry: nothing changes
    stored = read_records(lake, "seren", DAY)
    assert [(r.job_id, r.reason) for r in stored] == [("1", "NVLinkError"), ("2", "KeyError")]
    assert stored[0] == record("1", reason="NVLinkError", confidence=0.95)


def test_records_go_to_the_partition_of_their_submit_day(tmp_path):
    lake = Lake(str(tmp_path))
    urls = write_records(
        lake, [record("1"), record("9", date=date(2023, 7, 2)), record("5", cluster="kalos")]
    )
    assert len(urls) == 3
    assert [r.job_id for r in read_records(lake, "seren", date(2023, 7, 2))] == ["9"]
    assert [r.job_id for r in read_records(lake, "kalos", DAY)] == ["5"]


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match="source 'guess'"):
        record("1", source="guess")
    with pytest.raises(InputError, match="cannot name a partition"):
        write_records(Lake("/tmp"), [record("1", cluster="../x")])


def test_command_line_output_has_exactly_the_issue_keys():
    assert set(record("1").to_output()) == {
        "reason", "category", "attribution", "confidence", "source", "evidence", "mitigation",
    }  # fmt: skip
