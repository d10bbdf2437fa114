"""AcmeTrace CSV parsing on the real sample rows of both clusters, and on broken files."""

from __future__ import annotations

import gzip
from datetime import date

import pandas as pd
import pytest

from acme.errors import InputError, SchemaDriftError
from acme.jobs.acmetrace import KALOS_COLUMNS, SEREN_COLUMNS, parse_acmetrace_table
from acme.jobs.schema import jobs_from_arrow


@pytest.fixture
def seren_sample(shared_reference):
    return shared_reference / "acmetrace" / "samples" / "trace_seren_sample.csv"


@pytest.fixture
def kalos_sample(shared_reference):
    return shared_reference / "acmetrace" / "samples" / "trace_kalos_sample.csv"


def parse_to_frame(path, cluster: str, **options):
    """The parser's result with its rows as a canonical pandas frame, for readable checks."""
    result = parse_acmetrace_table(path, cluster, **options)
    result.jobs = jobs_from_arrow(result.jobs)
    return result


def write(tmp_path, name: str, content: bytes | str):
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def test_seren_sample_rows_are_converted_to_utc_with_true_run_time(seren_sample):
    result = parse_to_frame(seren_sample, "seren")
    jobs = result.jobs
    assert result.rows_in == 5 and len(jobs) == 5 and result.rejects.empty
    first = jobs.iloc[0]
    # 2023-03-01 00:18:22+08:00 is the previous day in UTC.
    assert first["submit_time"] == pd.Timestamp("2023-02-28 16:18:22", tz="UTC")
    assert first["job_id"] == "5778432" and first["user"] == "u5907" and first["job_type"] == "Other"
    assert first["state"] == "FAILED" and first["state_group"] == "failed"
    assert first["queue_s"] == 32 and first["run_s"] == 117
    # Seren's duration is end - start: the source figure equals the true run time.
    assert (jobs["source_duration_s"] == jobs["run_s"]).all()
    assert (jobs["gpu_time"] == jobs["gpu_num"] * jobs["run_s"]).all()
    assert list(jobs["source_line"]) == [2, 3, 4, 5, 6]
    assert str(jobs["submit_time"].dtype) == "datetime64[us, UTC]"


def test_kalos_duration_includes_queueing_but_run_time_does_not(kalos_sample):
    jobs = parse_to_frame(kalos_sample, "kalos").jobs
    first = jobs.iloc[0]
    assert first["job_id"] == "dlctk696s0jbvitv"
    assert first["queue_s"] == 10 and first["run_s"] == 8 and first["source_duration_s"] == 18
    assert first["source_gpu_time"] == 64 * 18 and first["gpu_time"] == 64 * 8
    elapsed = (jobs["end_time"] - jobs["submit_time"]).dt.total_seconds()
    assert (jobs["source_duration_s"] == elapsed).all()


def test_kalos_running_rows_have_no_end_and_no_run_time(tmp_path, kalos_sample):
    header, row = kalos_sample.read_text().splitlines()[:2]
    fields = row.split(",")
    fields[KALOS_COLUMNS.index("state")] = "RUNNING"
    for name in ("end_time", "fail_time", "stop_time", "duration", "gpu_time"):
        fields[KALOS_COLUMNS.index(name)] = ""
    path = write(tmp_path, "running.csv", f"{header}\n{','.join(fields)}\n")
    jobs = parse_to_frame(path, "kalos").jobs
    assert len(jobs) == 1
    assert jobs.loc[0, "state_group"] == "running"
    assert pd.isna(jobs.loc[0, "end_time"]) and pd.isna(jobs.loc[0, "run_s"])


def test_gzip_input_is_read(tmp_path, seren_sample):
    path = tmp_path / "seren.csv.gz"
    path.write_bytes(gzip.compress(seren_sample.read_bytes()))
    result = parse_to_frame(path, "seren")
    assert len(result.jobs) == 5 and list(result.jobs["source_line"]) == [2, 3, 4, 5, 6]


def test_day_selects_jobs_submitted_that_utc_day(seren_sample):
    result = parse_to_frame(seren_sample, "seren", day=date(2023, 2, 28))
    assert len(result.jobs) == 5 and result.skipped_other_days == 0
    other = parse_to_frame(seren_sample, "seren", day=date(2023, 3, 1))
    assert other.jobs.empty and other.skipped_other_days == 5


def test_empty_file_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="empty file"):
        parse_to_frame(write(tmp_path, "empty.csv", ""), "seren")


def test_wrong_delimiter_is_named(tmp_path, seren_sample):
    text = seren_sample.read_text().replace(",", ";")
    with pytest.raises(InputError, match="wrong delimiter.*';'"):
        parse_to_frame(write(tmp_path, "semicolon.csv", text), "seren")


def test_missing_header_is_named(tmp_path, seren_sample):
    rows = seren_sample.read_text().splitlines()[1:]
    with pytest.raises(InputError, match="missing header") as caught:
        parse_to_frame(write(tmp_path, "noheader.csv", "\n".join(rows)), "seren")
    assert caught.value.line == 1 and "noheader.csv" in str(caught.value)


def test_schema_drift_names_the_missing_and_unexpected_columns(tmp_path, seren_sample):
    lines = seren_sample.read_text().splitlines()
    lines[0] = lines[0].replace("gpu_time", "gpu_hours")
    with pytest.raises(SchemaDriftError, match="missing: gpu_time; unexpected: gpu_hours"):
        parse_to_frame(write(tmp_path, "drift.csv", "\n".join(lines)), "seren")


def test_truncated_last_line_is_rejected_with_its_line_number(tmp_path, seren_sample):
    text = seren_sample.read_text().rstrip("\n")
    truncated = text[: text.rfind(",")]  # the last line loses its final field
    result = parse_to_frame(write(tmp_path, "truncated.csv", truncated), "seren")
    assert len(result.jobs) == 4
    assert list(result.rejects["source_line"]) == [6]
    assert "Expected Number of Columns: 13 Found: 12" in result.rejects.loc[0, "reason"]
    assert result.rejects.loc[0, "record"] == truncated.splitlines()[-1]


def test_non_utf8_bytes_reject_only_that_line(tmp_path, seren_sample):
    lines = seren_sample.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"u5907", b"u\xff\xfe07")
    result = parse_to_frame(write(tmp_path, "latin.csv", b"\n".join(lines)), "seren")
    assert len(result.jobs) == 4
    assert list(result.rejects["source_line"]) == [3]
    assert "not utf-8" in result.rejects.loc[0, "reason"]
    # The lines after the bad one keep their own line numbers.
    assert list(result.jobs["source_line"]) == [2, 4, 5, 6]


def test_naive_and_unparseable_timestamps_are_rejected_with_reasons(tmp_path, seren_sample):
    lines = seren_sample.read_text().splitlines()
    lines[1] = lines[1].replace("2023-03-01 00:18:54+08:00", "2023-03-01 00:18:54")
    lines[3] = lines[3].replace("2023-03-01 10:27:32+08:00", "yesterday")
    result = parse_to_frame(write(tmp_path, "times.csv", "\n".join(lines) + "\n\n"), "seren")
    reasons = dict(zip(result.rejects["source_line"], result.rejects["reason"], strict=True))
    assert reasons == {
        2: "start_time '2023-03-01 00:18:54' has no UTC offset (naive timestamp)",
        4: "end_time 'yesterday' is not a timestamp",
    }
    assert '"start_time":"2023-03-01 00:18:54"' in result.rejects.set_index("source_line").loc[2, "record"]
    assert len(result.jobs) == 3


def test_non_numeric_counts_are_rejected(tmp_path, seren_sample):
    lines = seren_sample.read_text().splitlines()
    fields = lines[1].split(",")
    fields[SEREN_COLUMNS.index("gpu_num")] = "eight"
    lines[1] = ",".join(fields)
    result = parse_to_frame(write(tmp_path, "count.csv", "\n".join(lines)), "seren")
    assert result.rejects.loc[0, "reason"] == "gpu_num 'eight' is not an integer"


def test_blank_lines_are_not_rows_and_do_not_shift_line_numbers(tmp_path, seren_sample):
    lines = seren_sample.read_text().splitlines()
    text = "\n".join([lines[0], lines[1], "", lines[2], "", lines[3]]) + "\n"
    result = parse_to_frame(write(tmp_path, "blank.csv", text), "seren")
    assert list(result.jobs["source_line"]) == [2, 4, 6]
    assert result.rows_in == 3
    crlf = write(tmp_path, "crlf.csv", text.replace("\n", "\r\n"))
    assert list(parse_to_frame(crlf, "seren").jobs["source_line"]) == [2, 4, 6]


def test_lines_after_the_header_are_counted_as_the_blank_line_search_needs(tmp_path, seren_sample):
    """The newline count decides whether the blank-line search can be skipped: it must count a
    last line without its newline, blank lines and CRLF lines, and the line numbers of a file with
    blank lines and rejected lines must come out as the search gives them."""
    from acme.jobs.acmetrace import _data_lines

    assert _data_lines(b"h\na\nb\n") == _data_lines(b"h\na\nb") == 2
    assert _data_lines(b"h\r\na\r\n\r\nb\r\n") == 3
    assert _data_lines(b"h\n") == _data_lines(b"h") == 0
    assert _data_lines(b"") == 0
    lines = seren_sample.read_text().splitlines()
    broken = lines[2].split(",")
    broken[3] = "x"  # gpu_num: the CSV reader rejects the line
    text = "\n".join([lines[0], lines[1], ",".join(broken), "", lines[3], lines[4]])  # no final newline
    result = parse_to_frame(write(tmp_path, "mixed.csv", text), "seren")
    assert list(result.jobs["source_line"]) == [2, 5, 6]
    assert list(result.rejects["source_line"]) == [3]
    clean = parse_to_frame(write(tmp_path, "clean.csv", "\n".join(lines[:4])), "seren")
    assert list(clean.jobs["source_line"]) == [2, 3, 4]


def test_a_file_the_csv_reader_cannot_follow_is_a_clear_error(tmp_path, seren_sample):
    lines = seren_sample.read_text().splitlines()
    text = "\n".join([lines[0], lines[1], "\r", lines[2]]) + "\n"  # a stray carriage return
    with pytest.raises(InputError, match="stray.csv: unreadable as CSV"):
        parse_to_frame(write(tmp_path, "stray.csv", text), "seren")


def broken_inputs(seren_sample) -> dict[str, bytes]:
    """The broken files of the tests above, all at once."""
    text = seren_sample.read_text()
    lines = text.splitlines()
    naive = list(lines)
    naive[1] = naive[1].replace("2023-03-01 00:18:54+08:00", "2023-03-01 00:18:54")
    naive[3] = naive[3].replace("2023-03-01 10:27:32+08:00", "yesterday")
    count = list(lines)
    fields = count[1].split(",")
    fields[SEREN_COLUMNS.index("gpu_num")] = "eight"
    count[1] = ",".join(fields)
    raw = seren_sample.read_bytes().split(b"\n")
    raw[2] = raw[2].replace(b"u5907", b"u\xff\xfe07")
    trimmed = text.rstrip("\n")
    return {
        "clean": text.encode(),
        "truncated": trimmed[: trimmed.rfind(",")].encode(),
        "latin": b"\n".join(raw),
        "times": ("\n".join(naive) + "\n\n").encode(),
        "count": "\n".join(count).encode(),
        "blank": ("\n".join([lines[0], lines[1], "", lines[2], "", lines[3]]) + "\n").encode(),
    }


@pytest.mark.parametrize("day", [None, date(2023, 3, 1), date(2023, 3, 2)])
def test_the_table_decodes_to_the_partition_schema_on_clean_and_broken_files(tmp_path, seren_sample, day):
    """The parser holds the file's constants and low-cardinality text dictionary-encoded; decoded,
    its table is exactly the partitions' schema, with the constants on every row, the state's
    group, and every record accounted for."""
    from acme.jobs.schema import STATE_GROUPS, canonical_job_table, job_arrow_schema

    for name, content in broken_inputs(seren_sample).items():
        path = write(tmp_path, f"{name}.csv", content)
        result = parse_acmetrace_table(path, "seren", day=day)
        table = canonical_job_table(result.jobs)
        assert table.schema.equals(job_arrow_schema()), name
        for row in table.to_pylist():
            assert (row["cluster"], row["source"], row["source_file"]) == ("seren", "acmetrace", str(path))
            assert [row[c] for c in ("job_name", "node_list", "exit_code", "gpu_share")] == [None] * 4
            assert row["state_group"] == STATE_GROUPS[row["state"]], name
        assert result.rows_in == table.num_rows + len(result.rejects) + result.skipped_other_days, name


def test_an_unknown_state_has_no_group_and_is_left_to_validation(tmp_path, seren_sample):
    lines = seren_sample.read_text().splitlines()
    fields = lines[1].split(",")
    fields[SEREN_COLUMNS.index("state")] = "EXPLODED"
    lines[1] = ",".join(fields)
    jobs = parse_to_frame(write(tmp_path, "state.csv", "\n".join(lines)), "seren").jobs
    assert jobs.loc[0, "state"] == "EXPLODED" and pd.isna(jobs.loc[0, "state_group"])
    assert jobs.loc[1:, "state_group"].notna().all()


@pytest.mark.parametrize("threads", [1, 2])
def test_duckdb_columns_in_many_chunks_become_one_chunk_each_and_are_released(seren_sample, threads):
    """DuckDB returns a large file in batches: each canonical column comes out in one chunk (pandas
    takes it without a copy), equal to the same rows converted from one chunk, and each of DuckDB's
    columns is dropped from the mapping once converted (only its extra columns are left)."""
    import pyarrow as pa

    from acme.jobs.acmetrace import _canonical_table
    from acme.jobs.schema import job_schema_drift

    parsed = parse_acmetrace_table(seren_sample, "seren").jobs
    varying = ("job_id", "user", "job_type", "state", "submit_time", "start_time", "end_time", "queue_s",
               "run_s", "gpu_num", "cpu_num", "node_num", "gpu_time", "source_duration_s", "source_gpu_time",
               "source_line")  # fmt: skip
    text = ("user", "job_type", "state")  # DuckDB gives them as plain text
    plain = {name: parsed[name].cast(pa.large_string()) if name in text else parsed[name] for name in varying}
    third = parsed.num_rows // 3
    assert third > 0
    chunked = {
        name: pa.chunked_array([column.slice(0, third), column.slice(third, third), column.slice(2 * third)])
        for name, column in plain.items()
    }
    chunked["problem"] = pa.chunked_array([pa.nulls(parsed.num_rows, pa.large_string())])
    constants = {"cluster": "seren", "source": "acmetrace", "source_file": str(seren_sample)}

    table = _canonical_table(chunked, parsed.num_rows, constants, threads=threads)

    assert list(chunked) == ["problem"]
    assert all(column.num_chunks == 1 for column in table.columns)
    assert job_schema_drift(table.schema) == []
    assert table.to_pylist() == parsed.to_pylist()
