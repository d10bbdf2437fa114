"""Section 8's failure table (the paper's Table 3) from diagnosis records joined with the jobs."""

from __future__ import annotations

import statistics
from datetime import date

import pytest

from acme.lake import Lake
from acme.report import paper_sections
from acme.report.characterize import characterize
from acme.report.periods import parse_period
from tests.unit.report.conftest import (
    diagnosis,
    failed_jobs,
    ingest_synth_metrics,
    ingest_synth_trace,
    write_diagnoses,
)

REASONS = [
    ("NVLink Error", "Infrastructure"),
    ("CUDA Error", "Infrastructure"),
    ("Dataloader Killed", "Framework"),
    ("Attribute Error", "Script"),
    ("Attribute Error", "Script"),
    ("Out of Memory", "Script"),
]


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory) -> tuple[Lake, list[dict]]:
    folder = tmp_path_factory.mktemp("failures")
    lake = Lake(str(folder / "lake"))
    ingest_synth_trace(lake, "seren", folder, start=date(2023, 6, 5), days=2, scale=0.2)
    ingest_synth_metrics(lake, "seren", folder, days=(date(2023, 6, 5), date(2023, 6, 6)))
    jobs = failed_jobs(lake, "seren", len(REASONS))
    records = [
        diagnosis("seren", job, reason, category)
        for job, (reason, category) in zip(jobs, REASONS, strict=True)
    ]
    # An older diagnosis of the first job, superseded by the newer record above.
    records.append(diagnosis("seren", jobs[0], "Unknown", "Script", when="2023-06-10T00:00:00"))
    write_diagnoses(lake, "seren", records)
    return lake, jobs


def test_failure_table_has_the_papers_columns_from_the_newest_diagnosis(diagnosed):
    lake, jobs = diagnosed
    report = characterize(lake, "seren", parse_period("all"))
    table = report.tables["failure_reasons"].set_index("reason")
    assert "Unknown" not in table.index  # superseded
    assert table["jobs"].sum() == len(REASONS)
    script = [job for job, (_, c) in zip(jobs, REASONS, strict=True) if c == "Script"]
    attribute = [job for job, (r, _) in zip(jobs, REASONS, strict=True) if r == "Attribute Error"]
    total_gpu_time = sum(job["gpu_time"] for job in jobs)
    row = table.loc["Attribute Error"]
    assert row["category"] == "Script" and row["jobs"] == 2
    assert row["gpu_time_share"] == pytest.approx(sum(j["gpu_time"] for j in attribute) / total_gpu_time)
    assert row["med_time_to_failure_s"] == pytest.approx(statistics.median(j["run_s"] for j in attribute))
    assert row["avg_gpu_num"] == pytest.approx(statistics.mean(j["gpu_num"] for j in attribute))
    categories = report.tables["failure_categories"].set_index("category")
    assert categories.loc["Script", "jobs"] == len(script)
    assert categories["gpu_time_share"].sum() == pytest.approx(1.0)
    # Six diagnoses of hundreds of failed jobs: counts and coverage, no share presented as a finding.
    finding = report.figure("failure_categories").finding
    assert finding.startswith(
        f"{len(REASONS)} of {failed_job_count(lake, 'seren'):,} failed jobs diagnosed ("
    )
    assert "Script 3" in finding and finding.endswith("too few for shares to be a finding")
    assert not report.figure("failure_categories").drawn
    assert report.summary["diagnosed_failed_jobs"] == len(REASONS)


def test_with_enough_diagnoses_the_finding_gives_the_top_categorys_share(diagnosed, monkeypatch):
    lake, _ = diagnosed
    monkeypatch.setattr(paper_sections, "MIN_DIAGNOSED_FOR_SHARES", len(REASONS))
    report = characterize(lake, "seren", parse_period("all"))
    categories = report.tables["failure_categories"].set_index("category")
    top = categories["gpu_time"].idxmax()
    coverage = f"{len(REASONS)} of {failed_job_count(lake, 'seren'):,} failed jobs diagnosed"
    assert report.figure("failure_categories").finding.startswith(f"{coverage}; {top}: ")
    assert report.figure("failure_categories").drawn


@pytest.fixture()
def unknown_lake(tmp_path) -> tuple[Lake, list[dict]]:
    lake = Lake(str(tmp_path / "lake"))
    ingest_synth_trace(lake, "kalos", tmp_path, start=date(2023, 6, 5), days=1, scale=0.2)
    return lake, failed_jobs(lake, "kalos", 4)


def test_a_period_whose_only_diagnosis_is_unknown_counts_it_instead_of_crashing(unknown_lake):
    # What the diagnosis writes when nothing decided: reason Unknown, no category (issue 20).
    lake, jobs = unknown_lake
    write_diagnoses(lake, "kalos", [diagnosis("kalos", jobs[0], "Unknown", None)])
    report = characterize(lake, "kalos", parse_period("all"))
    categories = report.tables["failure_categories"]
    assert categories[["category", "jobs"]].to_dict("records") == [{"category": "Unknown", "jobs": 1}]
    assert report.tables["failure_reasons"][["category", "reason"]].to_dict("records") == [
        {"category": "Unknown", "reason": "Unknown"}
    ]
    failed = failed_job_count(lake, "kalos")
    assert report.figure("failure_categories").finding.startswith(
        f"1 of {failed:,} failed jobs diagnosed (Unknown 1)"
    )


def test_unknown_and_categories_outside_the_taxonomy_are_rows_never_dropped(unknown_lake):
    lake, jobs = unknown_lake
    outcomes = [
        ("Unknown", None),
        ("NVLink Error", "Infrastructure"),
        ("Unknown", None),
        ("Rack power", "Facility"),
    ]
    write_diagnoses(
        lake, "kalos", [diagnosis("kalos", job, r, c) for job, (r, c) in zip(jobs, outcomes, strict=True)]
    )
    report = characterize(lake, "kalos", parse_period("all"))
    categories = report.tables["failure_categories"].set_index("category")["jobs"].to_dict()
    assert categories == {"Unknown": 2, "Infrastructure": 1, "Facility": 1}
    assert report.tables["failure_reasons"]["jobs"].sum() == len(outcomes)
    assert report.summary["diagnosed_failed_jobs"] == len(outcomes)
    assert report.tables["failure_categories"]["job_share"].sum() == pytest.approx(1.0)


def test_temperature_against_infrastructure_failures_per_day(diagnosed):
    lake, jobs = diagnosed
    report = characterize(lake, "seren", parse_period("all"))
    frame = report.tables["temperature_failures"]
    infra = {j["date"] for j, (_, c) in zip(jobs, REASONS, strict=True) if c == "Infrastructure"}
    assert frame["infra_failures"].sum() == 2
    assert {d.strftime("%Y-%m-%d") for d in frame.loc[frame["infra_failures"] > 0, "day"]} == infra
    assert (
        frame["gpu_temp_max_c"].notna().all() and (frame["gpu_temp_max_c"] >= frame["gpu_temp_mean_c"]).all()
    )


def test_without_diagnosis_records_the_report_says_so(synth_lake):
    report = characterize(synth_lake, "kalos", parse_period("all"))
    note = f"no diagnosis records yet (0 of {failed_job_count(synth_lake, 'kalos'):,} failed jobs diagnosed)"
    assert report.failure_note == note
    assert report.figure("failure_categories").finding == note
    assert not report.figure("failure_categories").drawn
    assert report.tables["failure_reasons"].empty


def failed_job_count(lake: Lake, cluster: str) -> int:
    """Failed jobs (GPU and CPU) in the lake, counted apart from the report's SQL."""
    import pyarrow.parquet as pq

    keys = [k for k in lake.list(f"jobs/cluster={cluster}") if k.endswith("jobs.parquet")]
    return sum(
        pq.read_table(lake.path(k), columns=["state_group"]).column(0).to_pylist().count("failed")
        for k in keys
    )


def test_days_that_tie_are_named_as_a_tie_never_as_the_extreme():
    import pandas as pd

    from acme.report.paper_sections import _extreme_days

    days = pd.to_datetime(["2023-07-01", "2023-07-02", "2023-07-03"])
    same = pd.DataFrame({"day": days, "gpu_temp_max_c": [71.2, 70.9, 71.0]})
    assert (
        _extreme_days(same, "gpu_temp_max_c", "hottest", " °C") == "hottest: the same on all 3 days (71 °C)"
    )
    two = pd.DataFrame({"day": days, "gpu_temp_max_c": [74.0, 68.0, 74.2]})
    assert _extreme_days(two, "gpu_temp_max_c", "hottest", " °C") == "hottest: 2023-07-01, 2023-07-03 (74 °C)"
    one = pd.DataFrame({"day": days, "gpu_temp_max_c": [70.0, 76.0, None]})
    assert _extreme_days(one, "gpu_temp_max_c", "hottest", " °C") == "hottest: 2023-07-02 (76 °C)"
