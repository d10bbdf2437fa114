"""Large inputs in bounded memory (issue 8, "Bad input").

Reading a file in chunks gives the same result as reading it whole (chunk boundaries inside a
line, CRLF, a multi-byte UTF-8 character split between two reads); an input above
``ACME_MAX_INPUT_BYTES`` is refused before it is read; a line above the length limit is rejected
with its length, never held whole; and the peak memory of a child process parsing 400 MB is
within a bound of the one parsing 50 MB.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acme.errors import InputError
from acme.jobs import sacct as sacct_module
from acme.jobs.classify import load_classifier
from acme.jobs.sacct import DEFAULT_FIELDS, parse_sacct, parse_sacct_file, read_sacct_file
from acme.metrics.catalog import load_catalog
from acme.metrics.exposition import parse_exposition_file
from acme.text_input import LONG_LINE_HEAD_BYTES, check_input_size, iter_raw_lines
from tests.metrics_support import parse_exposition

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
HEADER = "|".join(DEFAULT_FIELDS)
CLASSIFIER = load_classifier()

# --------------------------------------------------------------------------- the line reader


def whole_split(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


line_bytes = st.lists(
    st.sampled_from([b"a", b"\n", b"\r\n", b"\r", "é".encode(), "训".encode(), "🚀".encode(), b"\xff", b"|"]),
    max_size=300,
).map(b"".join)


@settings(max_examples=300, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=line_bytes | st.binary(max_size=600), chunk=st.integers(1, 40))
def test_lines_read_in_chunks_equal_a_split_of_the_whole_input(data, chunk):
    lines = list(iter_raw_lines(io.BytesIO(data), chunk_bytes=chunk, max_line_bytes=10**9))
    assert [line.data for line in lines] == whole_split(data)
    assert [line.number for line in lines] == list(range(1, len(lines) + 1))
    for line in lines:
        assert data[line.offset : line.offset + line.length] == line.data
        assert not line.too_long


@settings(max_examples=300, derandomize=True)
@given(data=line_bytes, chunk=st.integers(1, 40), limit=st.integers(1, 30))
def test_a_line_above_the_limit_is_cut_to_its_head_and_its_length_kept(data, chunk, limit):
    lines = list(iter_raw_lines(io.BytesIO(data), chunk_bytes=chunk, max_line_bytes=limit))
    expected = whole_split(data)
    assert len(lines) == len(expected)
    for line, full in zip(lines, expected, strict=True):
        assert line.length == len(full)
        assert line.too_long == (len(full) > limit)
        assert line.data == (full[:LONG_LINE_HEAD_BYTES] if line.too_long else full)


def test_a_line_longer_than_the_limit_is_never_held_whole():
    class Source(io.RawIOBase):
        """10 MB of one line, then a short one; records the largest line the reader kept."""

        def __init__(self):
            self.left = 10 * 2**20

        def readable(self):
            return True

        def readinto(self, buffer):
            if self.left <= 0:
                tail = b"\nshort\n"
                if self.left == 0:
                    buffer[: len(tail)] = tail
                    self.left = -1
                    return len(tail)
                return 0
            n = min(len(buffer), self.left)
            buffer[:n] = b"x" * n
            self.left -= n
            return n

    lines = list(iter_raw_lines(io.BufferedReader(Source(), 65536), chunk_bytes=65536, max_line_bytes=4096))
    assert [(line.number, line.too_long, line.length) for line in lines] == [
        (1, True, 10 * 2**20),
        (2, False, 5),
    ]
    assert len(lines[0].data) == LONG_LINE_HEAD_BYTES and lines[1].data == b"short"


# --------------------------------------------------------------------------- sacct


def sacct_bytes(seed: int, jobs: int = 2_000) -> bytes:
    """A sacct extract with what chunked reading could break: CRLF ends, multi-byte names, a byte
    that is not UTF-8, steps near, far and before their job, duplicates, orphans, bad lines and
    times in New York's repeated hour."""
    rng = random.Random(seed)
    lines = [HEADER]
    later: list[str] = []
    for i in range(jobs):
        job = 7_000_000 + i
        name = rng.choice(["pretrain-llm", "训练-模型-🚀", "sft-é", "eval"]) + f"-{i}"
        submit = rng.choice(["2023-11-05T01:30:00", "2023-07-01T10:00:00", "2023-11-05T01:59:59"])
        gpus = rng.choice([0, 1, 8])
        fields = [
            str(job), name, f"u{i % 17}", "gpu", rng.choice(["COMPLETED", "FAILED", "RUNNING", "PENDING"]),
            submit, "2023-11-05T01:45:00", "Unknown", "01:00:00", "1", rng.choice(["64", ""]),
            rng.choice(["gpu001", ""]), rng.choice([f"cpu=64,gres/gpu={gpus},node=1", ""]), f"gres/gpu={gpus}",
            rng.choice(["0:0", ""]),
        ]  # fmt: skip
        step = [f"{job}.extern", "extern", "", "", "COMPLETED", submit, submit, submit, "01:00:00", "1", "64",
                "gpu00x", "cpu=64,gres/gpu=2,node=1", "", "3:0"]  # fmt: skip
        kind = rng.random()
        if kind < 0.05:
            lines.append("|".join(step))  # a step before its job line
        lines.append("|".join(fields))
        if kind < 0.6:
            lines.append("|".join(step))  # right after its job
        elif kind < 0.65:
            later.append("|".join(step))  # far after its job
        elif kind < 0.7:
            later.append("|".join([*fields[:4], "COMPLETED", *fields[5:]]))  # the job again, later
        elif kind < 0.72:
            lines.append("|".join([f"{job + 10**6}.batch", *step[1:]]))  # an orphan step
        elif kind < 0.74:
            lines.append("|".join(fields[:5]))  # wrong field count
        if i % 500 == 250:
            lines.extend(later)
            later.clear()
    lines.extend(later)
    data = "\r\n".join(lines).encode() + b"\r\n"
    return data.replace("sft-é-3".encode(), b"sft-\xff-3")  # one byte that is not UTF-8


def assert_same_result(streamed, whole):
    pd.testing.assert_frame_equal(streamed.jobs, whole.jobs)
    pd.testing.assert_frame_equal(streamed.rejects, whole.rejects)
    assert (streamed.rows_in, streamed.notes, streamed.skipped) == (whole.rows_in, whole.notes, whole.skipped)
    assert streamed.rows_in == len(streamed.jobs) + len(streamed.rejects) + sum(streamed.skipped.values())


@pytest.mark.parametrize("seed", [1, 2])
def test_sacct_read_in_small_chunks_equals_the_whole_file(tmp_path, monkeypatch, seed):
    path = tmp_path / "extract.txt"
    data = sacct_bytes(seed)
    path.write_bytes(data)
    chunk = 4093  # a prime: chunk boundaries fall inside lines and inside multi-byte characters
    assert len(data) > 50 * chunk
    whole = parse_sacct(
        read_sacct_file(path), "seren", source_file="x", classifier=CLASSIFIER, tz="America/New_York"
    )
    kinds = " ".join(whole.rejects["reason"])
    assert all(word in kinds for word in ("orphan step", "wrong field count"))
    assert {"superseded", "pending"} <= {reason.split(" ")[0] for reason in whole.skipped}
    assert any("repeated hour" in note for note in whole.notes) and any("U+FFFD" in n for n in whole.notes)
    # small build chunks and step window: far steps, early steps and several row batches are used
    monkeypatch.setattr(sacct_module, "BUILD_CHUNK_JOBS", 64)
    monkeypatch.setattr(sacct_module, "_STEP_WINDOW", 3)
    streamed = parse_sacct_file(
        path, "seren", source_file="x", classifier=CLASSIFIER, tz="America/New_York", chunk_bytes=chunk
    )
    assert_same_result(streamed, whole)


def test_sacct_steps_fill_their_job_whatever_the_window(tmp_path, monkeypatch):
    """A job line without NodeList and ExitCode takes them from its steps: one before it, one far after."""
    job = "|".join(["11", "train", "u1", "gpu", "FAILED", "2023-07-01T10:00:00", "2023-07-01T10:00:01",
                    "2023-07-01T11:00:00", "00:59:59", "1", "8", "", "cpu=8,gres/gpu=8,node=1", "", ""])  # fmt: skip
    extern = "|".join(["11.extern", "extern", "", "", "COMPLETED", *(["2023-07-01T10:00:00"] * 3),
                       "00:59:59", "1", "8", "node07", "", "", "0:0"])  # fmt: skip
    batch = "|".join(["11.batch", "batch", "", "", "FAILED", *(["2023-07-01T10:00:00"] * 3),
                      "00:59:59", "1", "8", "node07", "", "", "2:0"])  # fmt: skip
    other = ["|".join([str(100 + i), *job.split("|")[1:]]) for i in range(20)]
    text = "\n".join([HEADER, extern, job, *other, batch]) + "\n"
    path = tmp_path / "x.txt"
    path.write_text(text)
    monkeypatch.setattr(sacct_module, "_STEP_WINDOW", 5)
    monkeypatch.setattr(sacct_module, "BUILD_CHUNK_JOBS", 4)
    result = parse_sacct_file(path, "c", classifier=CLASSIFIER, chunk_bytes=97)
    row = result.jobs.set_index("job_id").loc["11"]
    assert (row["node_list"], row["exit_code"]) == ("node07", 2)  # the batch step's exit code wins
    assert list(result.jobs["job_id"]) == ["11", *(str(100 + i) for i in range(20))]


def test_sacct_line_above_the_limit_is_rejected_with_its_length(tmp_path):
    ok = "|".join(["5", "train", "u1", "gpu", "COMPLETED", *(["2023-07-01T10:00:00"] * 3),
                   "00:00:00", "1", "8", "n1", "gres/gpu=1", "", "0:0"])  # fmt: skip
    huge = "6|" + "x" * 50_000
    path = tmp_path / "x.txt"
    path.write_text("\n".join([HEADER, ok, huge, ok.replace("5|", "7|", 1)]) + "\n")
    result = parse_sacct_file(path, "c", source_file="huge.txt", classifier=CLASSIFIER, max_line_bytes=10_000)
    assert list(result.jobs["job_id"]) == ["5", "7"] and result.rows_in == 3
    (reject,) = result.rejects.itertuples(index=False)
    assert (reject.source_file, reject.source_line) == ("huge.txt", 3)
    assert "50,002 bytes is longer than the limit of 10,000 bytes" in reject.reason
    assert reject.record == huge[:LONG_LINE_HEAD_BYTES]


def test_sacct_file_keeps_the_whole_file_errors(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes((HEADER + "\n").encode() * 3 + b"1|a\x00b\n")
    with pytest.raises(InputError, match=r"NUL byte at byte offset \d+") as caught:
        parse_sacct_file(path, "c", chunk_bytes=7)
    assert caught.value.line == 4
    path.write_bytes((HEADER + "\n1|caf").encode() + b"\xe9|x\n")
    with pytest.raises(InputError, match="not UTF-8: byte 0xe9 at byte offset") as strict:
        parse_sacct_file(path, "c", strict=True, chunk_bytes=5)
    with pytest.raises(InputError) as whole:
        read_sacct_file(path, strict=True)
    assert (str(strict.value), strict.value.line) == (str(whole.value), whole.value.line)
    path.write_bytes(b"\r\n \n")
    with pytest.raises(InputError, match="empty"):
        parse_sacct_file(path, "c")


# --------------------------------------------------------------------------- exposition text


def exposition_text(seed: int, pages: int = 40) -> str:
    rng = random.Random(seed)
    out = []
    for page in range(pages):
        out.append(f"# scrape_time {1_688_169_600 + 15 * page}")
        out.append("# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge")
        for node in range(6):
            for gpu in range(8):
                host = rng.choice([f"node-{node}", f"nœud-{node}-训练"])
                value = rng.choice([str(rng.randint(0, 100)), "NaN", "x", "+Inf"])
                out.append(
                    f'DCGM_FI_DEV_GPU_UTIL{{gpu="{gpu}",UUID="GPU-{node}-{gpu}",Hostname="{host}"}} {value}'
                )
        out.append(
            rng.choice(["", "garbage line {", 'DCGM_FI_DEV_FB_USED{gpu="0",Hostname="n"} 5 1688169600000'])
        )
    return "\n".join(out) + "\n"


def assert_same_exposition(streamed, whole):
    assert (streamed.lines, streamed.help, streamed.types, streamed.scrapes) == (
        whole.lines, whole.help, whole.types, whole.scrapes,
    )  # fmt: skip
    assert streamed.skipped_metrics == whole.skipped_metrics
    pd.testing.assert_frame_equal(streamed.rejects, whole.rejects)
    assert streamed.samples.keys() == whole.samples.keys()
    for name, samples in whole.samples.items():
        got = streamed.samples[name]
        pd.testing.assert_frame_equal(got.series, samples.series)
        for field in ("series_id", "ts_ms", "value"):
            assert getattr(got, field).tolist() == pytest.approx(
                getattr(samples, field).tolist(), nan_ok=True
            )


@pytest.mark.parametrize("crlf", [False, True])
def test_exposition_read_in_small_chunks_equals_the_whole_text(tmp_path, monkeypatch, crlf):
    from acme.metrics import exposition

    text = exposition_text(3)
    path = tmp_path / "scrape.prom"
    path.write_bytes(text.replace("\n", "\r\n").encode() if crlf else text.encode())
    assert path.stat().st_size > 50 * 1021
    monkeypatch.setattr(exposition, "_FLUSH_SAMPLES", 100)  # samples move into arrays many times
    catalog = load_catalog()
    whole = parse_exposition(text, catalog, source_file="s.prom")
    streamed = parse_exposition_file(path, catalog, source_file="s.prom", chunk_bytes=1021)
    assert len(whole.rejects) and sum(len(s.value) for s in whole.samples.values()) > 1000
    assert_same_exposition(streamed, whole)


def test_exposition_line_above_the_limit_is_rejected_and_openmetrics_seen_at_the_end(tmp_path):
    path = tmp_path / "scrape.prom"
    huge = 'DCGM_FI_DEV_GPU_UTIL{Hostname="' + "x" * 100_000 + '"} 5'
    path.write_text(
        f'{huge}\nDCGM_FI_DEV_GPU_UTIL{{gpu="0",Hostname="n1"}} 5 1688169600\n# EOF\n' + " \n" * 40_000
    )
    result = parse_exposition_file(path, load_catalog(), chunk_bytes=4096, max_line_bytes=8192)
    assert result.rejects["source_line"].tolist() == [1]
    assert "100,035 bytes is longer than the limit of 8,192 bytes" in result.rejects["reason"].iloc[0]
    (samples,) = result.samples.values()
    assert samples.ts_ms.tolist() == [1_688_169_600_000]  # OpenMetrics: the timestamp is in seconds


# --------------------------------------------------------------------------- diagnosis logs


def test_log_reader_cuts_a_huge_line_and_keeps_every_other(tmp_path):
    import gzip

    import fsspec

    from acme.diagnosis.pipeline import read_log_lines

    lines = [
        "step 1 loss 2.3",
        "训练 ok\r",
        "x" * (3 * 2**20),
        "RuntimeError: CUDA error: an illegal memory access",
    ]
    plain = tmp_path / "train.log"
    plain.write_text("\n".join(lines) + "\n")
    packed = tmp_path / "train.log.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    fs = fsspec.filesystem("file")
    for path in (plain, packed):
        got = list(read_log_lines([(fs, str(path))]))
        assert got[:2] == lines[:2] and got[3] == lines[3]
        assert got[2] == "x" * LONG_LINE_HEAD_BYTES + f" [line of {3 * 2**20:,} bytes cut to its first 1,024]"


# --------------------------------------------------------------------------- input size limit


def test_an_input_above_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from acme.jobs.ingest import JobInput, parse_job_input

    path = tmp_path / "pods.json"
    path.write_text('{"kind": "Pod"}' * 1000)
    monkeypatch.setenv("ACME_MAX_INPUT_BYTES", "4096")
    with pytest.raises(InputError) as caught:
        parse_job_input(JobInput("kalos", "k8s", "s3://in/pods.json"), path)
    message = str(caught.value)
    assert message.startswith("s3://in/pods.json: input is 15,000 bytes, above the limit of 4,096 bytes")
    assert "ACME_MAX_INPUT_BYTES" in message
    sacct_path = tmp_path / "x.txt"
    sacct_path.write_text(HEADER + "\n" + "1|" * 5000)
    with pytest.raises(InputError, match=r"input is 10,\d{3} bytes, above the limit of 4,096"):
        parse_sacct_file(sacct_path, "c", source_file="x.txt")


def test_a_sparse_20_gib_file_is_refused_unread(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as handle:
        handle.truncate(20 * 2**30)  # no blocks written: reading it would take minutes
    with pytest.raises(InputError, match="21,474,836,480 bytes, above the limit of 1,073,741,824"):
        check_input_size(path, "huge.json")
    with pytest.raises(InputError, match="cannot read"):
        check_input_size(tmp_path / "missing", "missing")


def test_the_limit_must_be_a_positive_integer(monkeypatch):
    from acme.errors import ConfigError
    from acme.text_input import max_input_bytes

    assert max_input_bytes() == 2**30
    monkeypatch.setenv("ACME_MAX_INPUT_BYTES", "0")
    with pytest.raises(ConfigError, match="ACME_MAX_INPUT_BYTES"):
        max_input_bytes()


# --------------------------------------------------------------------------- peak memory

CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {plugins!r})
    import fsspec
    from acme.diagnosis.pipeline import read_log_lines
    from acme.jobs.sacct import parse_sacct_file
    from acme.jobs.classify import load_classifier
    kind, path = sys.argv[1:3]
    if kind == "sacct":
        result = parse_sacct_file(path, "c", classifier=load_classifier())
        assert result.rows_in == len(result.jobs) + len(result.rejects)
        print(len(result.jobs), len(result.rejects))
    else:
        lines = list(read_log_lines([(fsspec.filesystem("file"), path)]))
        assert len(lines) == 3 and lines[1].startswith("RuntimeError") and "bytes cut to" in lines[2]
    """
)


def write_input(kind: str, path: Path, size: int) -> None:
    """sacct: a job, then garbage lines of 8 MB; log: a few lines, then one line of all the rest
    (a runaway print without a newline)."""
    with open(path, "wb") as out:
        if kind == "sacct":
            job = "|".join(["1", "t", "u", "p", "COMPLETED", *(["2023-07-01T10:00:00"] * 3),
                            "00:00:00", "1", "8", "n1", "gres/gpu=1", "", "0:0"])  # fmt: skip
            out.write(f"{HEADER}\n{job}\n".encode())
            garbage = (b"garbage " * (2**20))[:-1] + b"\n"
            for _ in range(size // len(garbage)):
                out.write(garbage)
        else:
            out.write(b"[rank0]: iteration 1 | loss 2.3\nRuntimeError: CUDA error: out of memory\n")
            block = b"\x1b[2K 97%|#########7| 970/1000 [00:10<00:00]\r" * 20_000
            for _ in range(size // len(block)):
                out.write(block)


def peak_rss_mb(kind: str, path: Path) -> float:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(plugins=str(PLUGINS)), kind, str(path)], stdout=subprocess.PIPE
    )
    _, status, usage = os.wait4(child.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    child.stdout.close()
    return usage.ru_maxrss / 1024


@pytest.mark.parametrize("kind", ["sacct", "log"])
def test_peak_memory_hardly_grows_from_50_to_400_mb(tmp_path, kind):
    peaks = {}
    for size_mb in (50, 400):
        path = tmp_path / f"{kind}-{size_mb}"
        write_input(kind, path, size_mb * 2**20)
        peaks[size_mb] = peak_rss_mb(kind, path)
        path.unlink()
    growth = peaks[400] - peaks[50]
    # reading the input whole would add 350 MB at least
    assert growth < 40, f"{kind}: peak RSS {peaks[50]:.0f} MB at 50 MB, {peaks[400]:.0f} MB at 400 MB"


def test_sacct_staged_in_batches_equals_the_parse_in_memory(tmp_path, monkeypatch):
    """The Airflow parse task writes sacct rows batch by batch (secrets masked in each): the staged
    rows, rejects and counts are those of the in-memory parse."""
    from acme.jobs.ingest import JobInput, _jobs_table, parse_job_input, parse_staged
    from acme.lake import Lake

    lake = Lake(str(tmp_path / "lake"))
    data = sacct_bytes(5).replace(
        b"pretrain-llm-1", b"pretrain --hf-token=hf_abcdefghijklmnopqrstuvwxyz123456"
    )
    assert b"hf_abcdefghijklmnopqrstuvwxyz123456" in data
    lake.write_bytes("raw/x.txt", data)
    job_input = JobInput("seren", "sacct", "s3://in/x.txt", timezone="America/New_York")
    monkeypatch.setattr(sacct_module, "BUILD_CHUNK_JOBS", 100)
    monkeypatch.setattr(sacct_module, "_STEP_WINDOW", 3)
    staged = parse_staged(lake, job_input, "raw/x.txt", "staging/run")
    whole, _ = parse_job_input(job_input, lake.path("raw/x.txt"))
    assert staged["rows_in"] == whole.rows_in and staged["parsed"] == len(whole.jobs) > 1000
    assert staged["parse_rejects"] == len(whole.rejects) and staged["notes"] == whole.notes
    assert staged["first_day"] == min(whole.jobs["submit_time"]).date().isoformat()  # JSON-ready
    table = lake.read_parquet("staging/run/parsed.parquet")
    assert table.num_rows == len(whole.jobs) and table.schema.equals(_jobs_table(whole.jobs).schema)
    assert table.sort_by("source_line").equals(_jobs_table(whole.jobs).sort_by("source_line"))
    assert "hf_abcdefghijklmnopqrstuvwxyz123456" not in str(table.column("job_name").to_pylist())
    rejects = lake.read_parquet("staging/run/parse_rejects.parquet").to_pandas()
    pd.testing.assert_frame_equal(rejects.astype(whole.rejects.dtypes.to_dict()), whole.rejects)


def test_extract_refuses_an_input_above_the_limit_before_copying_it(tmp_path, monkeypatch):
    from acme.jobs.ingest import JobInput, extract_job_input, raw_key
    from acme.lake import Lake

    lake = Lake(str(tmp_path / "lake"))
    source = tmp_path / "day.txt"
    source.write_text(HEADER + "\n" + "x" * 5000 + "\n")
    job_input = JobInput("seren", "sacct", str(source))
    monkeypatch.setenv("ACME_MAX_INPUT_BYTES", "4096")
    with pytest.raises(InputError, match=r"input is 5,\d{3} bytes, above the limit of 4,096 bytes") as caught:
        extract_job_input(lake, job_input)
    assert caught.value.source == str(source) and not lake.exists(raw_key(job_input))
    monkeypatch.setenv("ACME_MAX_INPUT_BYTES", "8192")
    key = extract_job_input(lake, job_input)
    assert lake.read_bytes(key) == source.read_bytes()
    from acme.errors import InputNotFoundError

    with pytest.raises(InputNotFoundError, match="no input for seren"):
        extract_job_input(lake, JobInput("seren", "sacct", str(tmp_path / "missing.txt")))
