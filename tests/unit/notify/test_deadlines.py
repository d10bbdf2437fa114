"""The nightly chain's deadline alerts as the DAGs declare them (parsed by a DagBag, no DB), and the interval
from an hour in the clusters' time zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from acme.notify.deadlines import interval_to_hour

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("hour", "zone", "expected"),
    [
        (6, "UTC", timedelta(hours=30)),  # the night of D ends D+1 00:00 UTC; 06:00 that morning
        (0, "UTC", timedelta(hours=24)),
        (9, "Asia/Shanghai", timedelta(hours=25)),  # 09:00 UTC+8 = 01:00 UTC
        (6, "Asia/Shanghai", timedelta(hours=46)),  # 06:00 UTC+8 on D+1 was before the night ended
    ],
)
def test_the_interval_runs_from_the_logical_date_to_the_hour_after_the_night(hour, zone, expected):
    assert interval_to_hour(hour, zone, datetime(2023, 3, 1, tzinfo=UTC)) == expected


def _dags():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags


def test_the_nightly_chain_carries_deadline_alerts_that_send_the_late_notice(monkeypatch):
    from airflow.sdk.definitions.deadline import DeadlineReference

    monkeypatch.setenv("ACME_NOTIFY_DEADLINE_HOUR", "9")
    monkeypatch.setenv("ACME_NOTIFY_DEADLINE_TIMEZONE", "Asia/Shanghai")
    monkeypatch.setenv("ACME_NOTIFY_STEP_BUDGET_MINUTES", "90")
    dags = _dags()
    head = dags["ingest_job_traces"].deadline
    head = head[0] if isinstance(head, list) else head
    assert head.reference == DeadlineReference.DAGRUN_LOGICAL_DATE and head.interval == timedelta(hours=25)
    assert head.callback.path == "acme_airflow.notify.late_notice"
    for dag_id in ("diagnose_failures", "characterize"):
        alert = dags[dag_id].deadline
        alert = alert[0] if isinstance(alert, list) else alert
        assert alert.reference == DeadlineReference.DAGRUN_QUEUED_AT and alert.interval == timedelta(
            minutes=90
        )
        assert alert.callback.kwargs == {"dag_id": dag_id, "rule": "90 min after being queued"}
    assert not dags["recover_training"].deadline  # not part of the nightly chain


def test_the_alerts_are_off_when_the_setting_says_so(monkeypatch):
    monkeypatch.setenv("ACME_NOTIFY_DEADLINE_HOUR", "off")
    assert not _dags()["ingest_job_traces"].deadline
