"""The command line's pipelined ingest (validation on a thread while partitions are encoded ahead)
writes exactly what the sequential path writes: the same partitions, quarantine rows with their
reasons, validation reports and counts, on real AcmeTrace rows spread over several days with
defects on some of them, into an empty lake and over partitions that already exist."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from acme.jobs.ingest import (
    JobInput,
    ingest_job_file,
    parse_to_table,
    prepare_partitions,
    validate_and_publish,
    validate_while_preparing,
)
from acme.lake import Lake

DAYS = 6


@pytest.fixture
def seren_days(shared_reference, tmp_path) -> Path:
    """The real Seren sample rows repeated on six consecutive days (new job ids), with a defect on
    the rows of days 2 and 4: an unknown state, a duplicated job id, a start before the submit."""
    header, *rows = (
        (shared_reference / "acmetrace" / "samples" / "trace_seren_sample.csv").read_text().splitlines()
    )
    lines = [header]
    for offset in range(DAYS):
        for number, row in enumerate(rows):
            day = (date(2023, 3, 1) + timedelta(days=offset)).isoformat()
            fields = row.replace("2023-03-01", day).split(",")
            fields[0] = f"{fields[0]}{offset}"
            if offset == 2 and number == 1:
                fields[6] = "EXPLODED"
            if offset == 4 and number == 3:
                fields[0] = f"{rows[0].split(',')[0]}{offset}"  # the day's first job id again
            if offset == 4 and number == 4:
                fields[8] = fields[7].replace("00:52:01", "00:51:00")  # started before submitted
            lines.append(",".join(fields))
    path = tmp_path / "seren_days.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def lake_contents(root: Path) -> dict[str, object]:
    """Every object of the lake but the locks: Parquet as rows, JSON as text with the root taken out."""
    contents: dict[str, object] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "_locks" not in p.parts):
        key = str(path.relative_to(root))
        if path.suffix == ".parquet":
            contents[key] = pq.read_table(path).to_pylist()
        else:
            contents[key] = path.read_text().replace(str(root), "LAKE")
    return contents


MAX_SHARE = 0.5  # four defective rows of thirty


def ingest_sequentially(lake: Lake, job_input: JobInput, path: Path, max_share: float) -> dict:
    parsed = parse_to_table(job_input, path)
    table, parsed.table = parsed.table, None
    return validate_and_publish(lake, job_input, table, parsed, max_share)


def ingest_pipelined(lake: Lake, job_input: JobInput, path: Path, max_share: float) -> dict:
    parsed = parse_to_table(job_input, path)
    table, parsed.table = parsed.table, None
    return validate_while_preparing(lake, job_input, table, parsed, max_share, prepare_all=True)


def test_every_day_is_encoded_ahead_and_only_the_days_that_lost_rows_are_encoded_again(
    tmp_path, seren_days, monkeypatch
):
    import acme.jobs.ingest as ingest

    parsed = parse_to_table(JobInput("seren", "acmetrace", str(seren_days)), seren_days)
    assert prepare_partitions(parsed.table, None, lambda: False) == {}
    prepared = prepare_partitions(parsed.table, None, lambda: True)
    assert len(prepared) == DAYS and all(rows == 5 for rows, _ in prepared.values())
    encoded = []
    monkeypatch.setattr(
        ingest, "partition_bytes", lambda table, real=ingest.partition_bytes: encoded.append(1) or real(table)
    )
    summary = ingest_pipelined(
        Lake(str(tmp_path / "lake")), JobInput("seren", "acmetrace", str(seren_days)), seren_days, MAX_SHARE
    )
    assert summary["quarantined"] == 4
    assert len(encoded) == DAYS + 2  # every day ahead, then the two days with quarantined rows again


@pytest.mark.parametrize(
    "ingest", [ingest_pipelined, ingest_job_file], ids=["every-day-ahead", "command-line"]
)
def test_pipelined_ingest_writes_what_the_sequential_path_writes(tmp_path, seren_days, ingest):
    job_input = JobInput("seren", "acmetrace", str(seren_days))
    results = {}
    for name, run in (("sequential", ingest_sequentially), ("pipelined", ingest)):
        root = tmp_path / name
        first = run(Lake(str(root)), job_input, seren_days, MAX_SHARE)
        again = run(
            Lake(str(root)), job_input, seren_days, MAX_SHARE
        )  # over existing partitions: the merge path
        results[name] = (first, again, lake_contents(root))
    (seq_first, seq_again, seq_lake), (new_first, new_again, new_lake) = (
        results["sequential"],
        results["pipelined"],
    )
    assert seq_first["rows"] == DAYS * 5 - 4 and seq_first["quarantined"] == 4
    for sequential, pipelined in ((seq_first, new_first), (seq_again, new_again)):
        same = {key: value for key, value in pipelined.items() if key not in ("partitions", "quarantine")}
        assert same == {key: sequential[key] for key in same}
        assert len(pipelined["partitions"]) == len(sequential["partitions"]) == DAYS
    assert new_lake == seq_lake
    (quarantine,) = [rows for key, rows in new_lake.items() if key.startswith("quarantine/")]
    assert sorted(row["reason"] for row in quarantine) == [
        "job_id appears more than once",
        "job_id appears more than once",
        "start_time before submit_time; negative queue_s; source duration differs from end − start",
        "unknown state",
    ]


def test_rows_out_of_partition_order_are_sorted_as_the_merge_sorts_them(tmp_path, seren_days):
    """The sort of each day is skipped only for rows already in partition order (submit time,
    then job id): rows in reverse, and rows of one second out of job-id order, are encoded as
    the merge path orders them."""
    import pyarrow as pa

    from acme.jobs.ingest import _day_slices, _in_partition_order

    job_input = JobInput("seren", "acmetrace", str(seren_days))
    table = parse_to_table(job_input, seren_days).table
    ordered, days, _ = _day_slices(table, None)
    assert _in_partition_order(ordered, days)
    reverse = table.take(pa.array(range(table.num_rows - 1, -1, -1)))
    same_second = table.set_column(
        table.schema.get_field_index("submit_time"),
        "submit_time",
        pa.array([table["submit_time"][0].as_py()] * table.num_rows, table.schema.field("submit_time").type),
    ).take(pa.array([1, 0, *range(2, table.num_rows)]))
    for shuffled in (reverse, same_second):
        rows, shuffled_days, _ = _day_slices(shuffled, None)
        assert not _in_partition_order(rows, shuffled_days)
        results = {}
        for name, prepare_all in (("ahead", True), ("merge", False)):
            root = tmp_path / f"{name}-{id(shuffled)}"
            parsed = parse_to_table(job_input, seren_days)
            parsed.table = None
            if prepare_all:
                validate_while_preparing(
                    Lake(str(root)), job_input, shuffled, parsed, MAX_SHARE, prepare_all=True
                )
            else:
                validate_and_publish(Lake(str(root)), job_input, shuffled, parsed, MAX_SHARE)
            results[name] = lake_contents(root)
        assert results["ahead"] == results["merge"]


@pytest.mark.parametrize("prepare_all", [True, False], ids=["every-day-ahead", "command-line"])
def test_no_day_is_published_when_too_many_rows_fail(tmp_path, seren_days, prepare_all):
    """Days are published as soon as they are encoded once the outcome is recorded, never before:
    an input above the allowed share of bad rows leaves its quarantine and report, and no partition."""
    from acme.errors import QuarantineThresholdError

    root = tmp_path / "lake"
    job_input = JobInput("seren", "acmetrace", str(seren_days))
    parsed = parse_to_table(job_input, seren_days)
    table, parsed.table = parsed.table, None
    with pytest.raises(QuarantineThresholdError, match="nothing was published"):
        validate_while_preparing(Lake(str(root)), job_input, table, parsed, 0.01, prepare_all=prepare_all)
    keys = list(lake_contents(root))
    assert any(key.startswith("quarantine/") for key in keys)
    assert not [key for key in keys if key.startswith("jobs/")]


@pytest.mark.parametrize("max_share", [MAX_SHARE, 0.01], ids=["published", "refused"])
def test_the_thread_switch_interval_is_shortened_only_while_encoding_beside_the_validation(
    tmp_path, seren_days, monkeypatch, max_share
):
    """The short switch interval is the encoding's beside the validation: the days that lost rows,
    encoded again once it is done, and the process afterwards have their own, also when the input
    is refused."""
    import sys

    import acme.jobs.ingest as ingest
    from acme.errors import QuarantineThresholdError

    seen: list[float] = []
    encode = ingest.partition_bytes
    monkeypatch.setattr(
        ingest, "partition_bytes", lambda rows: seen.append(sys.getswitchinterval()) or encode(rows)
    )
    sys.setswitchinterval(0.004)
    job_input = JobInput("seren", "acmetrace", str(seren_days))
    parsed = parse_to_table(job_input, seren_days)
    table, parsed.table = parsed.table, None
    try:
        validate_while_preparing(Lake(str(tmp_path / "lake")), job_input, table, parsed, max_share)
    except QuarantineThresholdError:
        assert max_share == 0.01
    finally:
        after = sys.getswitchinterval()
        sys.setswitchinterval(0.005)
    short = [interval == pytest.approx(ingest.ENCODING_SWITCH_INTERVAL_S) for interval in seen]
    assert short and short[0], "the days encoded ahead, beside the validation"
    assert all(short) if max_share == 0.01 else not all(short), "days that lost rows: encoded again after"
    assert all(
        was_short or interval == pytest.approx(0.004) for was_short, interval in zip(short, seen, strict=True)
    )
    assert after == pytest.approx(0.004)


@pytest.mark.parametrize("clean", [True, False], ids=["every-row-kept", "rows-quarantined"])
def test_the_publisher_takes_the_day_slices_of_the_encoding_when_validation_kept_every_row(
    tmp_path, seren_days, monkeypatch, clean
):
    """The days are sliced once when the accepted rows are the parsed table itself, twice when
    validation took rows out (the publisher slices what is left); the lake is the sequential path's."""
    import acme.jobs.ingest as ingest
    from acme.jobs.synth import write_synth_trace

    path = tmp_path / "clean.csv" if clean else seren_days
    if clean:
        write_synth_trace("seren", date(2023, 3, 1), 3, path, scale=0.002, seed=4)
    job_input = JobInput("seren", "acmetrace", str(path))
    sequential = tmp_path / "sequential"
    ingest_sequentially(Lake(str(sequential)), job_input, path, MAX_SHARE)
    sliced = []
    monkeypatch.setattr(
        ingest,
        "_day_slices",
        lambda table, day, real=ingest._day_slices: sliced.append(1) or real(table, day),
    )
    pipelined = tmp_path / "pipelined"
    summary = ingest_pipelined(Lake(str(pipelined)), job_input, path, MAX_SHARE)
    assert (summary["quarantined"] == 0) is clean and len(summary["partitions"]) >= 3
    assert len(sliced) == (1 if clean else 2)
    assert lake_contents(pipelined) == lake_contents(sequential)
