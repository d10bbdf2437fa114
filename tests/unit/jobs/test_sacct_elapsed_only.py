"""sacct exports whose only time is Elapsed (seff-style; issue 31), on the real reportseff export.

Without a day they are refused naming ``--day``; with one, each job is stored with its submit,
start and end unknown (null), ``run_s`` = Elapsed, filed under that day, and the characterization
report counts it on that day without breaking or mis-counting (the run-time figures use it, the
queueing figures leave it out).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from acme.errors import SchemaDriftError
from acme.jobs.ingest import JobInput, ingest_job_file
from acme.jobs.sacct import parse_sacct, parse_sacct_file
from acme.lake import Lake

EXPORT = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "field"
    / "jobs"
    / "reportseff_issue16_elapsed_only.txt"
)
FIELDS = "AdminComment,AllocCPUS,Elapsed,JobID,JobIDRaw,MaxRSS,NNodes,NTasks,ReqMem,State,Timelimit,TotalCPU"
DAY = dt.date(2023, 1, 23)


def test_without_a_day_the_export_is_refused_naming_day():
    with pytest.raises(SchemaDriftError) as refused:
        parse_sacct_file(EXPORT, "c", fields=FIELDS, delimiter="^|^")
    message = str(refused.value)
    assert "Start and End" in message and "--day" in message and "Elapsed" in message


def test_with_a_day_the_job_is_stored_with_unknown_times_and_its_elapsed():
    result = parse_sacct_file(EXPORT, "c", fields=FIELDS, delimiter="^|^", day=DAY)
    assert result.rows_in == 1 and result.rejects.empty  # 38 steps folded into the job
    job = result.jobs.iloc[0]
    assert job["job_id"] == "65638294" and job["state"] == "COMPLETED"
    for column in ("submit_time", "start_time", "end_time", "queue_s"):
        assert job[column] is None or job[column] != job[column], column  # unknown: null
    assert job["run_s"] == job["source_duration_s"] == 7 * 3600 + 36 * 60 + 3
    assert (job["cpu_num"], job["node_num"]) == (16, 1)  # AllocCPUS is NCPUS
    assert any("Elapsed as their only time" in note and "2023-01-23" in note for note in result.notes)


def test_constructed_elapsed_only_lines_running_and_without_elapsed():
    text = "JobID|State|Elapsed\n1|RUNNING|00:10:00\n2|FAILED|\n3|TIMEOUT|1-00:00:00\n"
    result = parse_sacct(text, "c", source_file="constructed", day=DAY)
    jobs = result.jobs.set_index("job_id")
    assert (
        jobs.loc["1", "state"] == "RUNNING" and jobs.loc["1", "run_s"] != jobs.loc["1", "run_s"]
    )  # not ended
    assert jobs.loc["3", "run_s"] == 86400.0
    assert list(result.rejects["source_line"]) == [3]  # no time at all, not even Elapsed
    assert "no time at all" in result.rejects.iloc[0]["reason"]


def test_ingested_it_is_filed_under_the_day_and_the_report_counts_it_there(tmp_path):
    from acme.report.characterize import characterize
    from acme.report.periods import parse_period

    lake = Lake(str(tmp_path / "lake"))
    job_input = JobInput("seff", "sacct", str(EXPORT), DAY, tuple(FIELDS.split(",")), "UTC", "^|^")
    summary = ingest_job_file(lake, job_input, EXPORT)
    assert (summary["rows"], summary["quarantined"]) == (1, 0), summary
    assert [Path(p).parent.name for p in summary["partitions"]] == ["date=2023-01-23"]
    again = ingest_job_file(lake, job_input, EXPORT)  # a re-run replaces, never duplicates
    assert again["rows"] == 1

    report = characterize(lake, "seff", parse_period("all"))
    summary_table = report.tables["summary"]
    row = summary_table[summary_table["id"].str.startswith("seff (this report")].iloc[0]
    assert (row["job_num"], row["cpu_job_num"], row["gpu_job_num"]) == (1, 1, 0)
    assert row["avg_run_time_cpu"] == row["med_run_time_cpu"] == 27363.0  # Elapsed is its run time
    assert (
        row["avg_que_time_cpu"] is None or row["avg_que_time_cpu"] != row["avg_que_time_cpu"]
    )  # left out, not 0
    assert row["complete_rate_cpu"] == 1.0
    usage = report.tables["daily_usage"]
    assert [(str(d)[:10], n) for d, n in zip(usage["day"], usage["jobs"], strict=True)] == [("2023-01-23", 1)]
