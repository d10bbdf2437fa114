"""Publishing: partitions by submit day, exactly-once merge, quarantine and its threshold."""

from __future__ import annotations

import json
from datetime import date

import pandas as pd
import pyarrow.parquet as pq
import pytest

from acme.errors import QuarantineThresholdError
from acme.jobs.acmetrace import KALOS_COLUMNS
from acme.jobs.ingest import JobInput, ingest_job_file, merge_job_tables
from acme.jobs.schema import job_arrow_schema, jobs_from_arrow
from acme.lake import Lake


@pytest.fixture
def kalos_csv(shared_reference):
    return shared_reference / "acmetrace" / "samples" / "trace_kalos_sample.csv"


def read_partition(lake_dir, cluster: str, day: str) -> pd.DataFrame:
    table = pq.read_table(lake_dir / f"jobs/cluster={cluster}/date={day}/jobs.parquet")
    return jobs_from_arrow(table)


def lake_snapshot(lake_dir) -> dict[str, list]:
    """Content of every job partition, independent of file bytes."""
    snapshot = {}
    for path in sorted(lake_dir.glob("jobs/*/*/jobs.parquet")):
        frame = pq.read_table(path).to_pandas()
        snapshot[str(path.relative_to(lake_dir))] = frame.astype(str).values.tolist()
    return snapshot


def test_jobs_land_in_their_submit_day_partition(lake_dir, kalos_csv):
    summary = ingest_job_file(Lake(str(lake_dir)), JobInput("kalos", "acmetrace", str(kalos_csv)), kalos_csv)
    assert summary["rows"] == 5 and summary["quarantined"] == 0
    assert summary["partitions"] == [str(lake_dir / "jobs/cluster=kalos/date=2023-05-17/jobs.parquet")]
    jobs = read_partition(lake_dir, "kalos", "2023-05-17")
    assert len(jobs) == 5 and jobs["job_id"].is_unique
    assert pq.read_schema(summary["partitions"][0]).equals(job_arrow_schema())
    validation = json.loads((lake_dir / "jobs/cluster=kalos/date=2023-05-17/_validation.json").read_text())
    (entry,) = validation["inputs"].values()
    assert entry["success"] is True and entry["rows_published_here"] == 5


def test_ingesting_the_same_input_twice_changes_nothing(lake_dir, kalos_csv):
    lake = Lake(str(lake_dir))
    job_input = JobInput("kalos", "acmetrace", str(kalos_csv))
    ingest_job_file(lake, job_input, kalos_csv)
    before = lake_snapshot(lake_dir)
    ingest_job_file(lake, job_input, kalos_csv)
    assert lake_snapshot(lake_dir) == before


def test_a_later_state_replaces_running_and_never_the_reverse(tmp_path, lake_dir, kalos_csv):
    header, *rows = kalos_csv.read_text().splitlines()
    finished = rows[3].split(",")  # COMPLETED
    running = list(finished)
    running[KALOS_COLUMNS.index("state")] = "RUNNING"
    for name in ("end_time", "fail_time", "stop_time", "duration", "gpu_time"):
        running[KALOS_COLUMNS.index(name)] = ""
    running_csv = tmp_path / "running.csv"
    running_csv.write_text(f"{header}\n{','.join(running)}\n")
    finished_csv = tmp_path / "finished.csv"
    finished_csv.write_text(f"{header}\n{','.join(finished)}\n")
    lake = Lake(str(lake_dir))

    ingest_job_file(lake, JobInput("kalos", "acmetrace", "night-1"), running_csv)
    assert read_partition(lake_dir, "kalos", "2023-05-17")["state"].tolist() == ["RUNNING"]
    ingest_job_file(lake, JobInput("kalos", "acmetrace", "night-2"), finished_csv)
    assert read_partition(lake_dir, "kalos", "2023-05-17")["state"].tolist() == ["COMPLETED"]
    # A stale extract replayed later (a backfill of the first night) does not undo it.
    ingest_job_file(lake, JobInput("kalos", "acmetrace", "night-1"), running_csv)
    jobs = read_partition(lake_dir, "kalos", "2023-05-17")
    assert jobs["state"].tolist() == ["COMPLETED"] and jobs["run_s"].tolist() == [92.0]


def test_merge_keeps_one_row_per_job_sorted_by_submit_time():
    import pyarrow as pa

    schema = job_arrow_schema()

    def table(rows):
        frame = pd.DataFrame(rows).reindex(columns=schema.names)
        for name in ("submit_time", "start_time", "end_time"):
            frame[name] = pd.to_datetime(frame[name], utc=True)
        return pa.Table.from_pandas(frame, schema=schema, preserve_index=False)

    existing = table(
        [
            {"job_id": "b", "state": "COMPLETED", "submit_time": "2023-07-01T02:00:00Z", "user": "old"},
            {"job_id": "a", "state": "RUNNING", "submit_time": "2023-07-01T01:00:00Z", "user": "old"},
        ]
    )
    incoming = table(
        [
            {"job_id": "a", "state": "FAILED", "submit_time": "2023-07-01T01:00:00Z", "user": "new"},
            {"job_id": "b", "state": "RUNNING", "submit_time": "2023-07-01T02:00:00Z", "user": "new"},
            {"job_id": "c", "state": "RUNNING", "submit_time": "2023-07-01T00:30:00Z", "user": "new"},
        ]
    )
    merged = merge_job_tables(existing, incoming).to_pandas()
    assert merged[["job_id", "state", "user"]].values.tolist() == [
        ["c", "RUNNING", "new"],
        ["a", "FAILED", "new"],
        ["b", "COMPLETED", "old"],
    ]


def test_quarantine_keeps_bad_rows_with_reasons_and_the_threshold_fails_the_input(
    tmp_path, lake_dir, kalos_csv
):
    header, *rows = kalos_csv.read_text().splitlines()
    rows[3] = rows[3].replace("COMPLETED", "EXPLODED", 1)
    path = tmp_path / "bad.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    lake = Lake(str(lake_dir))
    job_input = JobInput("kalos", "acmetrace", "exports/bad.csv", day=date(2023, 5, 17))

    with pytest.raises(
        QuarantineThresholdError, match=r"exports/bad.csv: 1 of 5 rows \(20.0%\).*line 5: unknown state"
    ):
        ingest_job_file(lake, job_input, path)
    assert not (lake_dir / "jobs").exists(), "nothing may be published when the threshold is passed"
    quarantine = pq.read_table(
        lake_dir / f"quarantine/jobs/cluster=kalos/date=2023-05-17/{job_input.key}.parquet"
    )
    row = quarantine.to_pylist()[0]
    assert row["source_line"] == 5 and row["stage"] == "validate" and "unknown state" in row["reason"]
    assert row["input"] == "exports/bad.csv" and '"EXPLODED"' in row["record"]

    summary = ingest_job_file(lake, job_input, path, max_quarantine_share=0.25)
    assert summary["rows"] == 4 and summary["quarantined"] == 1
    # Re-running replaces the quarantine file of the input instead of adding to it.
    assert len(list((lake_dir / "quarantine").rglob("*.parquet"))) == 1


# --- field-shaped inputs: no Submit, fractional GPUs, partitions from before gpu_share ---------

NO_SUBMIT_SACCT = (
    "JobID|State|Start|End|AllocTRES\n"
    "501|COMPLETED|2024-03-09T23:30:00|2024-03-10T01:00:00|cpu=8,gres/gpu=2\n"
    "502|FAILED|2024-03-10T02:00:00|2024-03-10T03:00:00|cpu=4\n"
)


def _report_jobs(lake_dir, cluster: str) -> pd.DataFrame:
    import duckdb

    from acme.report.queries import sql_text

    files = sorted(str(p) for p in lake_dir.glob(f"jobs/cluster={cluster}/date=*/jobs.parquet"))
    con = duckdb.connect()
    con.execute(sql_text("create_report_macros"))
    return con.execute("SELECT * FROM report_jobs($files, false) ORDER BY job_id", {"files": files}).df()


def test_job_without_submit_is_filed_by_its_start_day_and_left_out_of_queueing(lake_dir, tmp_path):
    path = tmp_path / "nosubmit.txt"
    path.write_text(NO_SUBMIT_SACCT)
    summary = ingest_job_file(Lake(str(lake_dir)), JobInput("field", "sacct", str(path)), path)
    assert (summary["rows"], summary["quarantined"]) == (2, 0)
    assert any("no Submit field" in note for note in summary["notes"])
    assert read_partition(lake_dir, "field", "2024-03-09")["job_id"].tolist() == ["501"]
    assert read_partition(lake_dir, "field", "2024-03-10")["job_id"].tolist() == ["502"]
    report = _report_jobs(lake_dir, "field")
    assert report["queue_s"].isna().all() and report["submit_day"].astype(str).tolist() == [
        "2024-03-09",
        "2024-03-10",
    ]


def test_partition_written_before_gpu_share_merges_and_is_reported(lake_dir, tmp_path):
    import pyarrow as pa

    from acme.jobs.ingest import DayPublisher

    # A partition as the code before gpu_share wrote it: every canonical column but that one.
    path = tmp_path / "old.txt"
    path.write_text(NO_SUBMIT_SACCT)
    summary = ingest_job_file(Lake(str(lake_dir)), JobInput("field", "sacct", str(path)), path)
    key = lake_dir / "jobs/cluster=field/date=2024-03-10/jobs.parquet"
    old = pq.read_table(key).drop_columns(["gpu_share"])
    pq.write_table(old, key)
    assert "gpu_share" not in pq.read_schema(key).names
    assert jobs_from_arrow(pq.read_table(key))["gpu_share"].isna().all()

    # The report reads old partitions alone ...
    assert _report_jobs(lake_dir, "field")["gpu_num"].tolist() == [2.0, 0.0]
    # ... and a fractional job merged into the old partition keeps its share.
    new = read_partition(lake_dir, "field", "2024-03-10").assign(
        job_id="503", gpu_num=1, gpu_share=0.5, run_s=3600.0, gpu_time=1800.0
    )
    DayPublisher(Lake(str(lake_dir)), JobInput("field", "k8s", "new"), new, {}).publish_rest()
    merged = read_partition(lake_dir, "field", "2024-03-10")
    assert merged.set_index("job_id")["gpu_share"].to_dict() == pytest.approx(
        {"502": float("nan"), "503": 0.5}, nan_ok=True
    )
    assert pa.types.is_float64(pq.read_schema(key).field("gpu_share").type)
    report = _report_jobs(lake_dir, "field").set_index("job_id")
    assert report.loc["503", "gpu_num"] == 0.5 and report.loc["503", "gpu_time"] == 1800.0
    assert summary["partitions"]


def test_cli_takes_every_per_cluster_setting_as_a_flag(lake_dir, tmp_path, capsys):
    from acme.cli import main

    path = tmp_path / "tabbed.txt"
    # header-less, tab-separated, local times of Helsinki (UTC+2 in March)
    path.write_text("601\tCOMPLETED\t2024-03-10T12:00:00\t2024-03-10T13:00:00\n")
    argv = ["ingest-jobs", "--format", "sacct", "--cluster", "field", "--lake", str(lake_dir)]
    code = main([*argv, "--input", str(path), "--fields", "JobID,State,Start,End", "--delimiter", "\\t",
                 "--timezone", "Europe/Helsinki"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["rows"] == 1
    job = read_partition(lake_dir, "field", "2024-03-10").iloc[0]
    assert job["start_time"] == pd.Timestamp("2024-03-10T10:00:00Z")

    # live sacct: --command runs it for --day (a stand-in script prints a real-shaped export)
    script = tmp_path / "fake-sacct"
    script.write_text(
        "#!/bin/sh\nprintf 'JobID|State|Submit|Start|End\\n602|COMPLETED|2024-03-10T08:00:00|"
        "2024-03-10T08:00:05|2024-03-10T09:00:00\\n'\n"
    )
    script.chmod(0o755)
    code = main([*argv, "--command", str(script), "--day", "2024-03-10"])
    assert code == 0 and json.loads(capsys.readouterr().out)["rows"] == 1
    assert "602" in set(read_partition(lake_dir, "field", "2024-03-10")["job_id"])


def test_cli_never_exits_0_with_nothing_stored(lake_dir, tmp_path, capsys):
    from acme.cli import main

    path = tmp_path / "pending.txt"
    path.write_text("JobID|State|Submit|Start|End\n701|PENDING|2024-03-10T08:00:00|Unknown|Unknown\n")
    code = main(["ingest-jobs", "--format", "sacct", "--cluster", "field", "--lake", str(lake_dir),
                 "--input", str(path)])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "all 1 record(s) skipped" in err and "pending" in err and "nothing to store" in err
