"""A day on which a cluster ran nothing, through each DAG's domain flow.

What people running a cluster expect, and what these tests hold the pipeline to:

- **an empty but present input is a success that records zero rows explicitly**: the input's
  validation report for the day says ``rows_in: 0``, so "ingested, zero jobs" can be told from "not
  ingested" (no report for the day at all); and it **never deletes the day's previously published
  jobs** (an empty re-export of a day does not wipe it);
- **a missing input is a clear error naming the file**, raised where Airflow retries it (the data
  may not have arrived yet);
- telemetry is different: an idle GPU still reports (utilization 0), so a day *without samples* is a
  monitoring outage, not a quiet day -- the metric is not published, the run fails naming the input,
  the metric and its coverage, and earlier samples of the day stay;
- a night without failed jobs diagnoses nothing, writes nothing and deletes no earlier diagnosis;
- a report for a period without jobs: the automatic runs skip it; a period asked for by hand fails
  with an error naming the clusters and the period instead of a green run that built nothing.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from acme.errors import AcmeError, InputError
from acme.jobs.ingest import JobInput, ingest_job_file, ingest_planned
from acme.lake import Lake

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_DAY = date(2023, 7, 1)
SAMPLE_CSV = ROOT / "include" / "sample_data" / "jobs" / "seren" / "2023-07-01.csv"
ACMETRACE_HEADER = SAMPLE_CSV.read_text().splitlines()[0] + "\n"
SACCT_HEADER = "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|AllocTRES|ReqTRES|ExitCode\n"
EMPTY_POD_LIST = json.dumps({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []})


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(str(tmp_path / "lake"))


def snapshot(lake: Lake, area: str) -> dict[str, bytes]:
    """Every object under ``area`` with its bytes."""
    root = Path(lake.root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / area).rglob("*")) if p.is_file()}


def run_job_dag_steps(lake: Lake, job_input: JobInput) -> dict:
    """The job DAG's ingest task (extract -> parse -> validate -> publish), as it calls it."""
    return ingest_planned(lake, {"input": job_input.to_dict(), "command": None}, "manual__2023-07-02")


def validation_reports(lake: Lake, cluster: str, day: date) -> list[dict]:
    folder = Path(lake.root) / "validation" / "jobs" / f"cluster={cluster}" / f"date={day.isoformat()}"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


# --------------------------------------------------------------------------- job traces


@pytest.mark.parametrize(
    "fmt, name, content",
    [
        ("acmetrace", "2023-07-01.csv", ACMETRACE_HEADER),  # the CSV's header and nothing else
        ("sacct", "2023-07-01.txt", SACCT_HEADER),  # what `sacct --parsable2` prints for an idle day
        ("k8s", "2023-07-01.json", EMPTY_POD_LIST),  # `kubectl get pods -o json` with no pod
    ],
)
def test_an_empty_day_is_ingested_as_zero_jobs_and_keeps_the_days_published_jobs(
    lake, tmp_path, fmt, name, content
):
    ingest_job_file(lake, JobInput("seren", "acmetrace", str(SAMPLE_CSV), SAMPLE_DAY), SAMPLE_CSV)
    published = snapshot(lake, "jobs")
    assert published, "the sample day was published first"

    empty = tmp_path / fmt / name
    empty.parent.mkdir()
    empty.write_text(content)
    job_input = JobInput("seren", fmt, str(empty), SAMPLE_DAY)
    outcome = run_job_dag_steps(lake, job_input)

    assert outcome["rows_in"] == 0 and outcome["rows"] == 0
    assert outcome["quarantined"] == 0 and outcome["quarantine"] is None
    assert outcome["partitions"] == []
    assert snapshot(lake, "jobs") == published, "an empty input must not touch the day's published jobs"
    reports = [r for r in validation_reports(lake, "seren", SAMPLE_DAY) if r["input"] == str(empty)]
    assert len(reports) == 1 and reports[0]["rows_in"] == 0 and reports[0]["quarantined"] == 0
    assert not [p for p in (Path(lake.root) / "staging").rglob("*") if p.is_file()], (
        "no staged object is left"
    )


def test_a_day_never_ingested_has_no_validation_report(lake, tmp_path):
    """The difference a report can read: an ingested empty day has a report with rows_in 0, a day that
    was never ingested has none."""
    empty = tmp_path / "2023-07-01.csv"
    empty.write_text(ACMETRACE_HEADER)
    run_job_dag_steps(lake, JobInput("seren", "acmetrace", str(empty), SAMPLE_DAY))
    assert [r["rows_in"] for r in validation_reports(lake, "seren", SAMPLE_DAY)] == [0]
    assert validation_reports(lake, "seren", date(2023, 7, 2)) == []


def test_an_empty_re_export_is_idempotent(lake, tmp_path):
    empty = tmp_path / "2023-07-01.json"
    empty.write_text(EMPTY_POD_LIST)
    job_input = JobInput("seren", "k8s", str(empty), SAMPLE_DAY)
    run_job_dag_steps(lake, job_input)
    first = snapshot(lake, "validation")
    run_job_dag_steps(lake, job_input)
    assert snapshot(lake, "validation").keys() == first.keys()
    assert [r["rows_in"] for r in validation_reports(lake, "seren", SAMPLE_DAY)] == [0]


def test_a_missing_input_is_a_retried_error_naming_the_file(lake, tmp_path):
    """Data not arrived yet: the ingest raises an InputNotFoundError naming the file, which the DAG's
    task retries (``lake_task`` makes only bad input final); an unusable input is an InputError."""
    from acme.errors import InputNotFoundError

    missing = tmp_path / "2023-07-01.csv"
    planned = {"input": JobInput("seren", "acmetrace", str(missing), SAMPLE_DAY).to_dict(), "command": None}
    with pytest.raises(InputNotFoundError) as raised:
        ingest_planned(lake, planned, "manual__x")
    assert not isinstance(raised.value, InputError), "a missing input must stay retryable"
    assert str(missing) in str(raised.value) and "no input for seren on 2023-07-01" in str(raised.value)
    assert snapshot(lake, "jobs") == {} and snapshot(lake, "validation") == {}
    broken = tmp_path / "broken.csv"
    broken.write_text("not,an,acmetrace,header\n")
    planned["input"]["uri"] = str(broken)
    with pytest.raises(InputError):
        ingest_planned(lake, planned, "manual__x")


def test_a_zero_byte_sacct_file_is_refused_naming_it(lake, tmp_path):
    """``sacct --parsable2`` prints its header even for an idle day, so a file without even the header is
    no sacct output (a failed or unfinished export): a clear error, nothing published."""
    empty = tmp_path / "2023-07-01.txt"
    empty.write_text("")
    with pytest.raises(InputError, match="empty") as raised:
        run_job_dag_steps(lake, JobInput("seren", "sacct", str(empty), SAMPLE_DAY))
    assert str(empty) in str(raised.value)
    assert snapshot(lake, "jobs") == {}


def test_an_empty_header_less_sacct_export_with_its_field_list_is_zero_jobs(lake, tmp_path):
    """``sacct --noheader`` prints nothing at all for an idle day: with the field list configured that is
    a day with zero jobs, not an error."""
    empty = tmp_path / "2023-07-01.txt"
    empty.write_text("")
    fields = tuple(SACCT_HEADER.strip().split("|"))
    outcome = run_job_dag_steps(lake, JobInput("seren", "sacct", str(empty), SAMPLE_DAY, fields))
    assert outcome["rows_in"] == 0 and outcome["partitions"] == []


# --------------------------------------------------------------------------- metrics


def _publish_a_metrics_day(lake: Lake, tmp_path: Path) -> Path:
    from acme.metrics.ingest import ingest_metrics_file
    from acme.metrics.synth import write_synth_metrics

    exports = tmp_path / "exports"
    write_synth_metrics("seren", 1, SAMPLE_DAY, 1, "acmetrace-csv", exports, seed=3)
    ingest_metrics_file(lake, "acmetrace-csv", "seren", str(exports), SAMPLE_DAY)
    return exports


def test_a_metrics_day_without_samples_fails_naming_it_and_keeps_the_days_samples(lake, tmp_path):
    from acme.metrics.ingest import ingest_metrics_file
    from acme.metrics.validate import MetricsThresholdError

    exports = _publish_a_metrics_day(lake, tmp_path)
    published = snapshot(lake, "metrics")
    assert published
    empty = tmp_path / "empty"
    empty.mkdir()
    for export in sorted(exports.glob("*.csv")):  # each wide CSV's header, no sample row
        (empty / export.name).write_text(export.read_text().splitlines()[0] + "\n")
    with pytest.raises(MetricsThresholdError) as raised:
        ingest_metrics_file(lake, "acmetrace-csv", "seren", str(empty), SAMPLE_DAY)
    message = str(raised.value)
    assert str(empty) in message and "coverage 0.0%" in message and "not published" in message
    assert snapshot(lake, "metrics") == published
    reports = list(
        (Path(lake.root) / "validation" / "metrics" / "cluster=seren" / "date=2023-07-01").glob("*.json")
    )
    assert len(reports) == 2, "the failed input's validation report is written beside the good one"


def test_a_scrape_without_any_sample_is_not_a_quiet_success(lake, tmp_path):
    from acme.metrics.ingest import ingest_metrics_file
    from acme.metrics.validate import MetricsThresholdError

    scrape = tmp_path / "node1.prom"
    scrape.write_text("# scrape_time 1688169615\n")
    with pytest.raises(MetricsThresholdError, match="no samples"):
        ingest_metrics_file(lake, "exporter-text", "seren", str(scrape), SAMPLE_DAY)


def test_a_missing_metrics_input_is_an_error_naming_it(lake, tmp_path):
    from acme.metrics.ingest import ingest_metrics_file

    missing = tmp_path / "not-arrived"
    with pytest.raises(AcmeError, match="no such file or folder") as raised:
        ingest_metrics_file(lake, "acmetrace-csv", "seren", str(missing), SAMPLE_DAY)
    assert str(missing) in str(raised.value)


def test_a_missing_metrics_input_is_retried(lake, tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    from acme.metrics.ingest import ingest_metrics_file
    from acme_airflow.failures import no_retry_for_bad_input

    missing = tmp_path / "not-arrived"
    with pytest.raises(Exception) as raised, no_retry_for_bad_input():
        ingest_metrics_file(lake, "acmetrace-csv", "seren", str(missing), SAMPLE_DAY)
    assert not isinstance(raised.value, AirflowFailException)
    assert str(missing) in str(raised.value)


# --------------------------------------------------------------------------- diagnosis


def test_a_night_without_failed_jobs_diagnoses_nothing_and_keeps_earlier_diagnoses(lake, tmp_path):
    from acme.diagnosis.nightly import diagnosis_targets, plan_run, summarize
    from acme.diagnosis.records import DiagnosisRecord, write_records
    from tests.diagnosis_support import read_records

    rows = SAMPLE_CSV.read_text().splitlines()
    completed = [row for row in rows[1:] if ",COMPLETED," in row]
    assert completed and len(completed) < len(rows) - 1
    only_completed = tmp_path / "completed.csv"
    only_completed.write_text("\n".join([rows[0], *completed]) + "\n")
    ingest_job_file(lake, JobInput("seren", "acmetrace", str(only_completed), SAMPLE_DAY), only_completed)
    earlier = DiagnosisRecord(
        cluster="seren", job_id="earlier-1", date=SAMPLE_DAY, reason="ECCError", category="Infrastructure",
        attribution="infrastructure", confidence=0.9, source="rule",
    )  # fmt: skip
    write_records(lake, [earlier])
    before = snapshot(lake, "diagnosis")

    from acme.clusters import load_clusters

    targets = diagnosis_targets(load_clusters(), "seren", SAMPLE_DAY, [{"cluster": "seren", "day": "2023-07-01"}],
                                manual=False)  # fmt: skip
    plan = plan_run(lake, targets, run_id="night")
    assert (plan["without_log"], plan["with_log"], plan["waiting"], plan["chunks"]) == (0, 0, 0, [])
    summary = summarize([])
    assert summary["jobs"] == 0 and summary["recoveries"] == [] and summary["partitions"] == []
    assert snapshot(lake, "diagnosis") == before
    assert [r.job_id for r in read_records(lake, "seren", SAMPLE_DAY)] == ["earlier-1"]


def test_a_day_with_no_job_partition_at_all_plans_no_diagnosis(lake):
    from acme.diagnosis.nightly import plan_run

    plan = plan_run(lake, [("seren", date(2023, 7, 2))], run_id="night")
    assert plan["without_log"] == plan["with_log"] == 0


# --------------------------------------------------------------------------- reports


def test_reports_skip_a_period_without_jobs_unless_it_was_asked_for(lake):
    from acme.report.build import build_report, plan_reports
    from acme.report.queries import NoJobsError

    ingest_job_file(lake, JobInput("seren", "acmetrace", str(SAMPLE_CSV), SAMPLE_DAY), SAMPLE_CSV)
    # after an ingest of an empty day (2023-07-05): its month and the history, not the empty day
    after_ingest = plan_reports(
        lake, ["seren"], [{"cluster": "seren", "day": "2023-07-05"}], date(2023, 7, 6)
    )
    assert after_ingest == [{"cluster": "seren", "period": "2023-07"}, {"cluster": "seren", "period": "all"}]
    # the monthly run for a month without jobs: only the history
    assert plan_reports(lake, ["seren"], [], date(2023, 6, 1)) == [{"cluster": "seren", "period": "all"}]
    # a period asked for by hand: an error naming the clusters and the period, not a green run of nothing
    with pytest.raises(NoJobsError, match=r"seren, kalos in month 2023-05"):
        plan_reports(lake, ["seren", "kalos"], [], date(2023, 7, 6), "2023-05")
    with pytest.raises(NoJobsError, match="no job partitions in month 2023-05"):
        build_report(lake, "seren", "2023-05")
    assert not (Path(lake.root) / "reports").exists()
