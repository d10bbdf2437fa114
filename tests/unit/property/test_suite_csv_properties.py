"""Property-based tests of the evaluation suite CSV parser (:mod:`acme.evaluation.suite`, Hypothesis).

The suite parser repairs or drops imperfect rows with a warning naming ``file:line`` and refuses a file
it cannot use at all with ``InputError`` naming the file. The properties, for any generated suite:

- the parser returns a ``Suite`` or raises ``InputError`` naming the file; never another exception;
- every row is accounted for: ``rows_in == datasets + rows dropped`` (each dropped row has a warning
  naming the file and the line it is on, and that line of the file holds the row);
- every dataset kept has a unique name, a positive sample count and a known metric kind.

Inputs are the real format (the bundled suites' rows) with cells replaced by garbage: unicode
(including U+2028, ``\\x85`` and other characters ``str.splitlines`` treats as line ends), control
characters, commas, huge cells, numbers in odd notations, truncated and extra fields.
"""

from __future__ import annotations

import csv
import re
import string
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from acme.errors import InputError
from acme.evaluation.suite import METRIC_KINDS, parse_suite, read_suite
from tests.unit.property.campaign import SETTINGS

ROOT = Path(__file__).resolve().parents[3]
HEADER = ["dataset", "n_samples", "metric_kind", "gpu_s_per_sample", "cpu_s_per_sample", "n_choices"]
REAL_ROWS = [
    row
    for name in ("default_suite.csv", "tiny_suite.csv")
    for row in csv.reader((ROOT / "include" / "eval" / name).read_text().splitlines())
    if row and not row[0].startswith("#") and row[0] != "dataset"
]
LINE_BREAKS_OF_SPLITLINES = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

cell_garbage = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=string.printable.replace("\n", "").replace("\r", ""), max_size=30),
    st.text(alphabet=LINE_BREAKS_OF_SPLITLINES + "ab1 ", min_size=1, max_size=6),
    st.sampled_from(
        ["", " ", "?", "unknown", "0", "-5", "1e400", "nan", "inf", "1_000", "7.5", "0x10", "１２", "12\x00",
         "match", "PPL", "code-exec", "llm judge", "#x", "x" * 200_000]
    ),
)  # fmt: skip


@st.composite
def suite_rows(draw) -> list[list[str]]:
    """Rows of the real format (header first), some cells replaced by garbage, some rows cut or extended."""
    header = list(HEADER[: draw(st.integers(3, len(HEADER)))])
    if draw(st.integers(0, 9)) == 0:
        header[draw(st.integers(0, len(header) - 1))] = draw(cell_garbage)
    rows = [header]
    for _ in range(draw(st.integers(0, 12))):
        row = list(draw(st.sampled_from(REAL_ROWS)))[: len(header)]
        for index in draw(st.lists(st.integers(0, len(row) - 1), max_size=3)):
            row[index] = draw(cell_garbage)
        shape = draw(st.sampled_from(["ok", "ok", "ok", "short", "long", "blank", "comment"]))
        if shape == "short":
            row = row[: draw(st.integers(1, len(row)))]
        elif shape == "long":
            row = row + draw(st.lists(cell_garbage, min_size=1, max_size=2))
        elif shape == "blank":
            row = [""]
        elif shape == "comment":
            row = ["# " + row[0]]
        rows.append(row)
    return rows


def _unquoted(cell: str) -> str:
    """A cell written without quotes: no quote, comma, \\n or \\r (so one row is one line)."""
    return re.sub(r'[",\n\r]', "_", cell)


@SETTINGS
@given(rows=suite_rows(), ending=st.sampled_from(["\n", "\r\n"]), bom=st.booleans())
def test_suite_parser_accounts_for_every_row(rows, ending, bom):
    lines = [",".join(_unquoted(cell) for cell in row) for row in rows]
    text = ("\ufeff" if bom else "") + ending.join(lines) + ending
    try:
        suite = parse_suite(text, source="fuzz.csv")
    except InputError as error:
        assert "fuzz.csv" in str(error)
        event("refused whole with InputError")
        return
    event("parsed")
    header_index = next(
        i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")
    )
    data_lines = {
        number: line
        for number, line in enumerate(lines[header_index + 1 :], start=header_index + 2)
        if any(cell.strip() for cell in line.split(",")) and not line.lstrip().startswith("#")
    }
    dropped = {}
    for warning in suite.warnings:
        match = re.match(r"fuzz\.csv:(\d+): ", warning)
        assert match, f"warning names no file and line: {warning!r}"
        if warning.endswith("row dropped"):
            dropped[int(match.group(1))] = warning
    assert set(dropped) <= set(data_lines), "a dropped row's warning names a line that holds no row"
    assert len(suite.datasets) + len(dropped) == len(data_lines)
    names = [d.name for d in suite.datasets]
    assert len(names) == len(set(names))
    for dataset in suite.datasets:
        assert dataset.n_samples > 0 and dataset.metric_kind in METRIC_KINDS
        assert any(dataset.name in line for line in data_lines.values())


@SETTINGS
@given(data=st.one_of(st.binary(max_size=2_000), st.text(max_size=500).map(str.encode)))
def test_suite_reader_on_arbitrary_bytes(data, tmp_path_factory):
    path = tmp_path_factory.mktemp("suite") / "garbage_suite.csv"
    path.write_bytes(data)
    try:
        suite = read_suite(path)
    except InputError as error:
        assert str(path) in str(error)
        event("refused whole with InputError")
        return
    event("parsed")
    lines = data.count(b"\n") + 1
    for warning in suite.warnings:
        number = int(re.match(re.escape(str(path)) + r":(\d+): ", warning).group(1))
        assert 1 <= number <= lines


def test_a_line_break_character_inside_a_name_keeps_the_row_whole():
    """Regression: ``str.splitlines`` cut a row at U+2028 (or \\x85, \\x1e...), giving two broken rows
    and shifting every later line number."""
    suite = parse_suite(
        "dataset,n_samples,metric_kind\nmmlu\u2028pro,100,ppl\nbbh\x85x,50,match\nbad,0,match\n",
        source="s.csv",
    )
    assert [(d.name, d.n_samples, d.metric_kind) for d in suite.datasets] == [
        ("mmlu\u2028pro", 100, "ppl"),
        ("bbh\x85x", 50, "match"),
    ]
    assert suite.warnings == ["s.csv:4: bad: n_samples 0 is not positive; row dropped"]


def test_a_quoted_name_over_two_lines_keeps_later_line_numbers():
    """Regression: rows were numbered by record, so a quoted field spanning lines shifted later lines."""
    suite = parse_suite(
        'dataset,n_samples,metric_kind\n"two\nlines",10,match\nbad,-1,match\n', source="q.csv"
    )
    assert [d.name for d in suite.datasets] == ["two\nlines"]
    assert suite.warnings == ["q.csv:4: bad: n_samples -1 is not positive; row dropped"]


def test_a_huge_cell_or_a_bare_carriage_return_drops_the_row_with_its_line():
    """Regression: a cell over the csv module's 128 KB limit raised ``_csv.Error`` (not an InputError,
    no file or line named), and so did a bare \\r inside a row; a long comment line is skipped."""
    text = (
        "dataset,n_samples,metric_kind\nok,1,match\nbig,"
        + "9" * 200_000
        + ",match\ncr\rx,2,ppl\n# "
        + "a long comment " * 20_000  # over the limit too, but a comment: no row, no warning
        + "\nlast,3,gen\n"
    )
    suite = parse_suite(text, source="h.csv")
    assert [d.name for d in suite.datasets] == ["ok", "last"]
    assert [w.split(": ", 1)[0] for w in suite.warnings] == ["h.csv:3", "h.csv:4"]
    assert all(w.endswith("row dropped") for w in suite.warnings)


def test_a_suite_path_with_a_nul_byte_is_an_input_error():
    """Regression: the ``suite`` Param is any text; a NUL byte made ``read_suite`` raise ValueError."""
    with pytest.raises(InputError, match="not a file path"):
        read_suite("suites/a\x00b.csv")
