"""Section 8's failure table (the paper's Table 3) from diagnosis records joined with the jobs."""

from __future__ import annotations

import statistics
from datetime import date

import pytest

from acme.lake import Lake
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
    top = categories["gpu_time"].idxmax()
    assert report.figure("failure_categories").finding.startswith(f"{top}: ")
    assert report.figure("failure_categories").drawn


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
    assert report.failure_note == "no diagnosis records yet"
    assert report.figure("failure_categories").finding == "no diagnosis records yet"
    assert not report.figure("failure_categories").drawn
    assert report.tables["failure_reasons"].empty
