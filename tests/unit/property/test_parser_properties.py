"""Property-based tests of every input parser (Hypothesis): thousands of generated inputs each.

The properties, for any input at all:

- the parser returns a result or raises :class:`acme.errors.InputError` (a clear, file-level error);
  never any other exception;
- nothing is lost: every record is a canonical row, a reject with a reason, or (job parsers) a record
  of another day -- ``rows_in == rows_ok + rows_quarantined (+ skipped)``;
- every reject names its source file and line.

Inputs are generated from the real formats (valid headers and field shapes) with cells and lines
replaced by garbage: random unicode, control characters, huge fields, delimiters in values, truncated
lines, binary bytes. ``ACME_PROPERTY_EXAMPLES`` raises the number of cases (the default keeps the
suite fast; `docs/reliability.md` records the counts run).
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from acme.errors import InputError
from acme.jobs.sacct import DEFAULT_FIELDS
from tests.unit.property.campaign import SETTINGS

garbage = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=string.printable, max_size=40),
    st.sampled_from(
        ["", " ", "\t", "None", "Unknown", "-1", "NaN", "inf", "1e309", "0x1F", "\x00", "|", ",", '"']
    ),
    st.sampled_from(["x" * 20_000, "|" * 5_000, '"' * 5_000]),  # a huge cell (fixed: no entropy cost)
)


def assert_rejects_located(rejects, source_file: str) -> None:
    assert (rejects["source_file"] == source_file).all()
    assert rejects["reason"].map(lambda r: isinstance(r, str) and len(r) > 0).all()


# --------------------------------------------------------------------------- sacct


SACCT_FIELDS = list(DEFAULT_FIELDS)  # what the live mode asks sacct for
sacct_cell = {
    "JobID": st.one_of(st.integers(1, 10**9).map(str), st.from_regex(r"\d{1,6}(_\d{1,3})?(\.(batch|extern|\d))?", fullmatch=True), garbage),
    "State": st.one_of(st.sampled_from(["COMPLETED", "FAILED", "CANCELLED by 42", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "RUNNING"]), garbage),
    "Submit": st.one_of(st.just("2024-03-10T01:00:00"), st.just("2024-02-29T23:59:59"), st.just("Unknown"), garbage),
    "Start": st.one_of(st.just("2024-03-10T01:05:00"), st.just("None"), garbage),
    "End": st.one_of(st.just("2024-03-10T03:05:00"), st.just("Unknown"), garbage),
    "Elapsed": st.one_of(st.just("02:00:00"), st.just("1-00:00:00"), garbage),
    "NNodes": st.one_of(st.integers(0, 4096).map(str), garbage),
    "NCPUS": st.one_of(st.integers(0, 10**6).map(str), garbage),
    "AllocTRES": st.one_of(st.just("billing=128,cpu=128,gres/gpu=16,mem=1T,node=2"), st.just("cpu=1,gres/gpu=-3"), garbage),
    "ReqTRES": st.one_of(st.just("cpu=128,gres/gpu=16"), garbage),
    "ExitCode": st.one_of(st.just("0:0"), st.just("1:9"), garbage),
}  # fmt: skip


@st.composite
def sacct_text(draw) -> str:
    lines = ["|".join(SACCT_FIELDS)]
    for _ in range(draw(st.integers(0, 12))):
        cells = [draw(sacct_cell.get(name, garbage)) for name in SACCT_FIELDS]
        shape = draw(st.sampled_from(["ok", "short", "long", "raw"]))
        if shape == "short":
            cells = cells[: draw(st.integers(0, len(cells) - 1))]
        elif shape == "long":
            cells = cells + draw(st.lists(garbage, min_size=1, max_size=3))
        line = "|".join(c.replace("\n", " ").replace("\r", " ") for c in cells)
        lines.append(draw(st.text(max_size=200)) if shape == "raw" else line)
    return "\n".join(lines)


@SETTINGS
@given(text=sacct_text())
def test_sacct_parser_accounts_for_every_record(text):
    from acme.jobs.sacct import parse_sacct

    try:
        result = parse_sacct(text, "seren", source_file="fuzz.sacct")
    except InputError:
        event("refused whole with InputError")
        return
    event("parsed")
    # ParseResult itself checks rows_in == jobs + rejects + skipped; check it again here, visibly.
    assert result.rows_in == (
        len(result.jobs) + len(result.rejects) + result.skipped_other_days + sum(result.skipped.values())
    )
    assert_rejects_located(result.rejects, "fuzz.sacct")
    assert result.jobs["job_id"].notna().all()


@SETTINGS
@given(data=st.binary(max_size=2_000))
def test_sacct_parser_on_binary_garbage(data):
    from acme.jobs.sacct import parse_sacct

    try:
        result = parse_sacct(data.decode("utf-8", "replace"), "seren", source_file="bin.sacct")
    except InputError:
        event("refused whole with InputError")
        return
    event("parsed")
    assert result.rows_in == (
        len(result.jobs) + len(result.rejects) + result.skipped_other_days + sum(result.skipped.values())
    )


# --------------------------------------------------------------------------- Kubernetes

json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63), st.floats(), st.text(max_size=20)
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=30,
)

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "train-7b-worker-0",
        "namespace": "llm",
        "uid": "u-1",
        "creationTimestamp": "2024-03-10T01:00:00Z",
        "labels": {"job-name": "train-7b"},
    },
    "spec": {
        "nodeName": "gpu01",
        "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "64"}}}],
    },
    "status": {
        "phase": "Failed",
        "startTime": "2024-03-10T01:05:00Z",
        "containerStatuses": [
            {
                "name": "main",
                "state": {
                    "terminated": {
                        "exitCode": 1,
                        "startedAt": "2024-03-10T01:05:00Z",
                        "finishedAt": "2024-03-10T02:00:00Z",
                    }
                },
            }
        ],
    },
}
POD_PATHS = [
    ("metadata", "name"),
    ("metadata", "uid"),
    ("metadata", "creationTimestamp"),
    ("metadata", "labels"),
    ("spec", "nodeName"),
    ("spec", "containers"),
    ("status", "phase"),
    ("status", "startTime"),
    ("status", "containerStatuses"),
    ("kind",),
]


@st.composite
def kubernetes_document(draw) -> str:
    items = []
    for index in range(draw(st.integers(0, 6))):
        pod = json.loads(json.dumps(POD))
        pod["metadata"]["name"] = f"train-7b-worker-{index}"
        pod["metadata"]["uid"] = f"u-{index}"
        for path in draw(st.lists(st.sampled_from(POD_PATHS), max_size=3)):
            target = pod
            for key in path[:-1]:
                target = target.setdefault(key, {}) if isinstance(target, dict) else {}
            if isinstance(target, dict):
                target[path[-1]] = draw(json_value)
        items.append(pod if draw(st.integers(0, 9)) else draw(json_value))
    shape = draw(st.sampled_from(["list", "lines", "raw"]))
    if shape == "list":
        return json.dumps({"apiVersion": "v1", "kind": "PodList", "items": items})
    if shape == "lines":
        return "\n".join(json.dumps(item) for item in items)
    return draw(st.text(max_size=300))


@SETTINGS
@given(text=kubernetes_document())
def test_kubernetes_parser_accounts_for_every_record(text):
    from acme.jobs.kubernetes import parse_kubernetes

    try:
        result = parse_kubernetes(text, "seren", source_file="fuzz.json")
    except InputError:
        event("refused whole with InputError")
        return
    event("parsed")
    assert result.rows_in == (
        len(result.jobs) + len(result.rejects) + result.skipped_other_days + sum(result.skipped.values())
    )
    assert_rejects_located(result.rejects, "fuzz.json")


def test_kubernetes_parser_on_deeply_nested_json():
    from acme.jobs.kubernetes import parse_kubernetes

    nested = "[" * 100_000 + "]" * 100_000
    document = '{"kind": "PodList", "items": [' + nested + "]}"
    try:
        result = parse_kubernetes(document, "seren", source_file="deep.json")
    except InputError as error:
        assert "deep.json" in str(error)
    else:
        assert result.rows_in == len(result.jobs) + len(result.rejects) + sum(result.skipped.values())
        assert len(result.jobs) == 0


# --------------------------------------------------------------------------- AcmeTrace CSV

SEREN_HEADER = (
    "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time"
)
acmetrace_cell = st.one_of(
    st.sampled_from(
        [
            "1",
            "8",
            "0",
            "-3",
            "2023-07-01 08:00:00+08:00",
            "2023-07-01 09:00:00",
            "COMPLETED",
            "FAILED",
            "Other",
        ]
    ),
    st.text(alphabet=string.ascii_letters + string.digits + " -:.+", max_size=25),
    garbage.filter(lambda s: "\n" not in s and "\r" not in s and '"' not in s),
)


@st.composite
def acmetrace_csv(draw) -> str:
    names = SEREN_HEADER.split(",")
    lines = [SEREN_HEADER]
    for number in range(draw(st.integers(0, 10))):
        good = [
            str(5778432 + number), "u1", "1", "8", "64", "Pretrain", "COMPLETED",
            "2023-07-01 08:00:00+08:00", "2023-07-01 08:01:00+08:00", "2023-07-01 09:01:00+08:00",
            "3600", "60", "28800.0",
        ]  # fmt: skip
        for index in draw(st.lists(st.integers(0, len(names) - 1), max_size=4)):
            good[index] = draw(acmetrace_cell)
        if draw(st.integers(0, 7)) == 0:
            good = good[: draw(st.integers(1, len(good)))]
        lines.append(",".join(good))
    return "\n".join(lines) + "\n"


@SETTINGS
@given(text=acmetrace_csv())
def test_acmetrace_parser_accounts_for_every_row(text, tmp_path_factory):
    from acme.jobs.acmetrace import parse_acmetrace_table

    path = tmp_path_factory.mktemp("acmetrace") / "cluster_job_trace.csv"
    path.write_text(text, encoding="utf-8")
    try:
        result = parse_acmetrace_table(path, "seren", source_file="fuzz.csv")
    except InputError:
        event("refused whole with InputError")
        return
    event("parsed")
    data_rows = sum(1 for line in text.split("\n")[1:] if line not in ("", "\r"))  # blank lines are no rows
    assert result.rows_in == data_rows
    assert result.rows_in == (
        len(result.jobs) + len(result.rejects) + result.skipped_other_days + sum(result.skipped.values())
    )
    assert_rejects_located(result.rejects, "fuzz.csv")


# --------------------------------------------------------------------------- exposition text


@st.composite
def exposition_text(draw) -> str:
    names = [
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "not_in_catalog",
        "power_draw_watts", "idrac_power_control_consumed_watts",  # aliases that sum and select series
    ]  # fmt: skip
    lines = [f"# scrape_time {draw(st.sampled_from(['2023-07-01T00:00:15Z', '1688169615', 'yesterday']))}"]
    for _ in range(draw(st.integers(0, 15))):
        name = draw(st.sampled_from(names))
        labels = draw(
            st.sampled_from(
                [
                    '{gpu="0",UUID="GPU-1",Hostname="node1",modelName="A100"}',
                    '{Hostname="node1"}',
                    '{gpu="0",Hostname="no\\"de"}',
                    '{Hostname="node1",psu="1"}',
                    '{Hostname="node1",psu="2",name="System Power Control"}',
                    "{broken",
                    "",
                ]
            )
        )
        value = draw(st.one_of(st.sampled_from(["42", "NaN", "+Inf", "-1e3", "x"]), st.floats().map(repr)))
        stamp = draw(st.sampled_from(["", " 1688169615000", " bad"]))
        line = f"{name}{labels} {value}{stamp}"
        lines.append(draw(st.one_of(st.just(line), st.text(max_size=80))))
    return "\n".join(lines)


def _data_lines(text: str) -> int:
    return sum(1 for raw in text.split("\n") if raw.strip() and not raw.strip().startswith("#"))


@SETTINGS
@given(text=exposition_text())
def test_exposition_parser_accounts_for_every_sample_line(text):
    from acme.metrics.catalog import load_catalog
    from tests.metrics_support import parse_exposition

    result = parse_exposition(text, load_catalog(), source_file="fuzz.prom")
    samples = sum(len(s) for s in result.samples.values())
    skipped = sum(result.skipped_metrics.values())
    summed = sum(result.summed.values())  # parts added into a stored sample (PSUs of one node)
    comment_rejects = sum(1 for record in result.rejects["record"] if record.strip().startswith("#"))
    assert samples + skipped + summed + len(result.rejects) - comment_rejects == _data_lines(text)
    assert_rejects_located(result.rejects, "fuzz.prom")


# --------------------------------------------------------------------------- wide utilization CSV


@st.composite
def wide_csv(draw) -> str:
    columns = ["Time", "node1-0", "node1-1", "node2-0"]
    lines = [",".join(columns)]
    for minute in range(draw(st.integers(0, 12))):
        cells = [f"2023-07-01 08:{minute:02d}:00+08:00", "50", "", "75.5"]
        for index in draw(st.lists(st.integers(0, 3), max_size=3)):
            cells[index] = draw(
                st.one_of(
                    st.sampled_from(["", "NaN", "inf", "-5", "abc", "2023-13-45 99:00:00"]),
                    st.text(alphabet=string.digits + ".-e", max_size=8),
                )
            )
        if draw(st.integers(0, 7)) == 0:
            cells = cells[: draw(st.integers(1, 3))]
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


@SETTINGS
@given(text=wide_csv())
def test_wide_csv_parser_accounts_for_every_row(text, tmp_path_factory):
    from acme.metrics.acmetrace_csv import parse_wide_csv
    from acme.metrics.catalog import load_catalog

    spec = load_catalog()["gpu_util"]
    path = tmp_path_factory.mktemp("wide") / "gpu_util.csv"
    path.write_text(text, encoding="utf-8")
    try:
        result = parse_wide_csv(path, spec, source_file="fuzz-wide.csv")
    except InputError:
        event("refused whole with InputError")
        return
    event("parsed")
    data_rows = sum(1 for line in text.split("\n")[1:] if line.strip())
    assert result.rows_in == data_rows
    # A row is dropped whole (wrong cell count, unreadable time) with a reject; every cell of a kept row
    # is a sample or a counted missing cell (bad cells are quarantined as missing, with a reject).
    row_level = result.rejects["reason"].str.startswith("expected") | result.rejects["reason"].str.contains(
        "is not a time"
    )
    kept_rows = data_rows - int(row_level.sum())
    assert len(result.samples) + result.missing_cells == result.samples.n_series * kept_rows
    assert_rejects_located(result.rejects, "fuzz-wide.csv")


@pytest.mark.parametrize("size_mb", [64])
def test_exposition_parser_handles_a_huge_line_in_bounded_memory(size_mb):
    """One 64 MB line (a runaway label value) is one reject, not a crash or a copy per character."""
    import resource

    from acme.metrics.catalog import load_catalog
    from tests.metrics_support import parse_exposition

    huge = 'DCGM_FI_DEV_GPU_UTIL{Hostname="' + "x" * (size_mb << 20) + "\n"
    text = "# scrape_time 1688169615\n" + huge + 'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n1"} 5\n'
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = parse_exposition(text, load_catalog(), source_file="huge.prom")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert len(result.rejects) == 1 and result.rejects["source_line"].iloc[0] == 2
    assert len(result.rejects["record"].iloc[0]) <= 500
    assert sum(len(s) for s in result.samples.values()) == 1
    assert grown_mb < 8 * size_mb, f"parsing a {size_mb} MB line grew the process by {grown_mb:.0f} MB"
