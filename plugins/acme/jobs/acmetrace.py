"""AcmeTrace job-trace CSVs (InternLM/AcmeTrace) into canonical job records.

Two layouts exist and are told apart by the header, not by the cluster's name:

- Seren (Slurm, 13 columns): times ``+08:00``, ``duration`` = end − start.
- Kalos (Kubernetes, 17 columns): times ``+00:00``, ``duration`` = end − **submit**
  (includes queueing), ``fail_time`` set iff FAILED, ``stop_time`` iff CANCELLED, no
  ``end_time`` while RUNNING.

The source's ``duration`` and ``gpu_time`` are kept as ``source_duration_s`` and
``source_gpu_time``; ``run_s`` is always the true run time end − start.

DuckDB reads the file (every column as text, malformed lines collected with their line
numbers instead of aborting) and the queries in ``include/sql/ingest/`` convert it. Rows
that cannot be converted become rejects with the reason; nothing is dropped.
"""

from __future__ import annotations

import gzip
import re
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from acme import settings
from acme.errors import InputError, SchemaDriftError
from acme.jobs.base import ParseResult
from acme.jobs.schema import STATE_GROUPS
from acme.rejects import REJECT_COLUMNS

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

SEREN_COLUMNS = (
    "job_id", "user", "node_num", "gpu_num", "cpu_num", "type", "state",
    "submit_time", "start_time", "end_time", "duration", "queue", "gpu_time",
)  # fmt: skip
KALOS_COLUMNS = (
    "job_id", "user", "node_num", "gpu_num", "cpu_num", "mem_per_pod_GB", "shared_mem_per_pod",
    "type", "state", "submit_time", "start_time", "end_time", "fail_time", "stop_time",
    "duration", "queue", "gpu_time",
)  # fmt: skip
LAYOUTS = {"seren": SEREN_COLUMNS, "kalos": KALOS_COLUMNS}

# How DuckDB reads each column: numbers are converted by the reader (a bad number rejects
# its line with the column named); times stay text so the SQL can tell a naive time from
# garbage; everything else is text.
_INTEGER_COLUMNS = {"node_num", "gpu_num", "cpu_num"}
_NUMBER_COLUMNS = {"mem_per_pod_GB", "shared_mem_per_pod", "duration", "queue", "gpu_time"}


def _duckdb_type(column: str) -> str:
    if column in _INTEGER_COLUMNS:
        return "BIGINT"
    if column in _NUMBER_COLUMNS:
        return "DOUBLE"
    return "VARCHAR"


# Columns with one value for the whole file (the cluster, the format, the file; no job names,
# node lists or exit codes in AcmeTrace): built in Arrow as dictionary arrays (a byte per row)
# instead of being read back from DuckDB as a million copies of the same text.
_CONSTANT_TEXT = ("cluster", "job_name", "node_list", "source", "source_file")
_CONSTANT_NULL = {"exit_code": "int64", "gpu_share": "float64"}  # AcmeTrace counts whole GPUs only
# Text columns with a few distinct values (hundreds of users, a handful of types and states):
# dictionary-encoded, as Parquet stores them anyway.
_LOW_CARDINALITY = ("user", "job_type", "state")


def parse_acmetrace_table(
    path: str | Path,
    cluster: str,
    *,
    source_file: str | None = None,
    day: date | None = None,
    layout: str | None = None,
) -> ParseResult:
    """Parse one AcmeTrace CSV (plain or ``.gz``) of either layout (detected unless given) into an
    Arrow table of the canonical columns (``acme.jobs.schema.job_arrow_schema``, with the constant
    and low-cardinality text columns dictionary-encoded: :func:`acme.jobs.schema.canonical_job_table`
    decodes them). DuckDB's result is completed in Arrow, never turned into pandas.

    ``day`` keeps the jobs submitted on that UTC day (the nightly run's interval) and counts
    the others as ``skipped_other_days``. Rows whose day cannot be told (unparseable submit
    time, malformed line) are reported by the run for the file's first day, so that a
    backfill over a multi-day file reports each of them exactly once.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    path = str(path)
    source_file = source_file or path
    layout = layout or detect_layout(path, source_file)
    rows, unreadable = _read_rows(path, cluster, source_file, layout)
    lines = _accepted_line_numbers(path, [line for line, _, _ in unreadable], rows.num_rows)
    notes = []
    if lines is None:
        notes.append(f"{source_file}: line numbers are approximate (row order + 2): quoted fields span lines")
        lines = pa.array(range(2, 2 + rows.num_rows), pa.int64())
    rows = rows.append_column("source_line", pa.array(lines, pa.int64()))
    rows_in = rows.num_rows + len(unreadable)
    problem = pc.is_valid(rows["problem"])
    has_problems = rows.num_rows > 0 and pc.any(problem).as_py()
    problems = rows.filter(problem).select(["source_line", "problem", "record"]) if has_problems else None
    rejects = _rejects(
        problems.to_pandas() if problems is not None else _NO_PROBLEMS(), unreadable, source_file
    )
    first_day = _first_day(rows)
    jobs = rows.filter(pc.invert(problem)) if has_problems else rows
    del rows
    count, columns = jobs.num_rows, dict(zip(jobs.column_names, jobs.columns, strict=True))
    del jobs  # from here on each DuckDB column is held only by `columns`, until it is converted
    constants = {"cluster": cluster, "source": "acmetrace", "source_file": source_file}
    table = _canonical_table(columns, count, constants, threads=_reader_threads(path))
    del columns  # what is left: the problem and record columns
    skipped = 0
    if day is not None:
        start = pa.scalar(pd_timestamp(day), pa.timestamp("us", tz="UTC"))
        end = pa.scalar(pd_timestamp(day, 1), pa.timestamp("us", tz="UTC"))
        submitted = table["submit_time"]
        in_day = pc.fill_null(pc.and_(pc.greater_equal(submitted, start), pc.less(submitted, end)), False)
        skipped = table.num_rows - pc.sum(in_day).as_py() if table.num_rows else 0
        if skipped:
            table = table.filter(in_day)
        if len(rejects) and first_day != day:
            skipped += len(rejects)
            rejects = rejects.iloc[0:0]
    return ParseResult(table, rejects.reset_index(drop=True), rows_in, skipped, notes)


def _canonical_table(columns: dict, count: int, constants: dict[str, str], threads: int = 1):
    """The canonical columns from DuckDB's (``columns``: name -> chunked array, ``count`` rows):
    constants and ``state_group`` built in Arrow, the low-cardinality text dictionary-encoded, the
    rest cast to the partitions' types. Each comes out as one chunk in Arrow's memory (pandas
    later takes the columns without a copy), ``threads`` columns at a time (Arrow's kernels and
    copies release the GIL; :func:`_reader_threads` tells whether the other core is free by then),
    and each of DuckDB's columns is dropped from ``columns`` once converted, so its buffers are
    released column by column (the copy costs one column at a time, not the table)."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa

    from acme.jobs.schema import job_arrow_schema, repeated_text

    derived = {
        **{name: repeated_text(constants.get(name), count) for name in _CONSTANT_TEXT},
        **{name: pa.nulls(count, type_name) for name, type_name in _CONSTANT_NULL.items()},
    }
    schema = job_arrow_schema()
    converted = [f for f in schema if f.name not in derived and f.name != "state_group"]
    # the widest columns first, so the threads end together
    converted.sort(key=lambda f: -sum(chunk.nbytes for chunk in columns[f.name].chunks))
    if threads == 1:  # on this thread: a pool of one would only add a thread
        for field in converted:
            derived.update(_converted_column(columns, field))
    else:
        with ThreadPoolExecutor(threads, thread_name_prefix="convert-jobs") as pool:
            for made in pool.map(lambda f: _converted_column(columns, f), converted):
                derived.update(made)
    return pa.table({f.name: derived[f.name] for f in schema})


def _converted_column(columns: dict, field) -> dict:
    """One of DuckDB's columns in its canonical type, in one chunk (with ``state_group`` for
    ``state``); the DuckDB column is dropped from ``columns``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = columns.pop(field.name)
    if field.name not in _LOW_CARDINALITY:
        return {field.name: column.cast(field.type).combine_chunks()}
    text = column.cast(pa.large_string())
    del column
    made = {field.name: pc.dictionary_encode(text).combine_chunks()}
    if field.name == "state":
        group_names = sorted(set(STATE_GROUPS.values()))
        group_of_state = pa.array([group_names.index(group) for group in STATE_GROUPS.values()], pa.int8())
        states = pa.array(list(STATE_GROUPS), pa.large_string())
        # an unknown state has no group (null): validation names it
        made["state_group"] = pa.DictionaryArray.from_arrays(
            pc.take(group_of_state, pc.index_in(text, value_set=states)).combine_chunks(),
            pa.array(group_names, pa.large_string()),
        )
    return made


def _read_rows(path: str, cluster: str, source_file: str, layout: str):
    """The varying canonical columns as DuckDB computes them (an Arrow table, text as
    ``large_string``), and the lines its CSV reader could not read."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"SET threads = {_reader_threads(path)}")
        # Text as Arrow large_string, the partitions' type, so no conversion copies every string.
        con.execute("SET arrow_large_buffer_size = true")
        _define_raw_view(con, path, LAYOUTS[layout])
        constant = ", ".join(_CONSTANT_TEXT + tuple(name for name in _CONSTANT_NULL if name != "gpu_share"))
        query = f"SELECT * EXCLUDE ({constant}) FROM ({_read_sql(f'select_acmetrace_{layout}_jobs.sql')})"
        try:
            rows = con.sql(query, params={"cluster": cluster, "source_file": source_file}).to_arrow_table()
        except duckdb.Error as exc:
            first_line = str(exc).strip().splitlines()[0]
            raise InputError(source_file, f"unreadable as CSV: {first_line}") from exc
        return rows, _unreadable_lines(con)
    finally:
        con.close()


# Above this much CSV text the parse is most of the run and gets both cores.
_TWO_THREADS_FROM_BYTES = 256 * 1024 * 1024


def _reader_threads(path: str) -> int:
    """Threads for reading ``path`` and converting its columns: one for an input parsed in less time
    than the import of great-expectations takes (the command line imports it on the other core
    meanwhile, and a second thread holds its own buffers: about 40 MB more at the peak of a
    million-job file, and no faster), two for larger ones."""
    import os

    text_bytes = os.path.getsize(path) * (4 if path.endswith(".gz") else 1)  # gzip: about 4× smaller
    return 2 if text_bytes > _TWO_THREADS_FROM_BYTES else 1


def pd_timestamp(day: date, plus_days: int = 0):
    from datetime import UTC, datetime, timedelta

    return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=plus_days)


def _NO_PROBLEMS():
    import pandas as pd

    return pd.DataFrame({"source_line": pd.array([], "Int64"), "problem": [], "record": []})


def _first_day(rows) -> date | None:
    """UTC day of the earliest time key (submit, else start, else end) of all rows, problems included."""
    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return None
    first = pc.min(pc.coalesce(rows["submit_time"], rows["start_time"], rows["end_time"])).as_py()
    return None if first is None else first.date()


def detect_layout(path: str, source_file: str) -> str:
    """``seren`` or ``kalos`` from the header line; a clear error for anything else."""
    header = _first_line(path, source_file)
    if not header.strip():
        raise InputError(source_file, "the first line is blank: expected the AcmeTrace header", line=1)
    for delimiter in (";", "\t", "|"):
        if delimiter in header and "," not in header:
            raise InputError(
                source_file,
                f"wrong delimiter: the header is separated by {delimiter!r}, expected ','",
                line=1,
            )
    columns = tuple(name.strip() for name in header.split(","))
    for layout, expected in LAYOUTS.items():
        if columns == expected:
            return layout
    if columns and (columns[0].isdigit() or columns[0].startswith("dlc")):
        raise InputError(source_file, "missing header: the first line is a data row", line=1)
    best = min(LAYOUTS.values(), key=lambda expected: len(set(expected) ^ set(columns)))
    missing = [c for c in best if c not in columns]
    unexpected = [c for c in columns if c not in best]
    problem = "columns differ from the AcmeTrace layout"
    if missing:
        problem += f"; missing: {', '.join(missing)}"
    if unexpected:
        problem += f"; unexpected: {', '.join(unexpected)}"
    if not missing and not unexpected:
        problem += f"; order differs: expected {','.join(best)}"
    raise SchemaDriftError(source_file, problem, line=1)


def _first_line(path: str, source_file: str) -> str:
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            first = handle.readline(1 << 16)
    except OSError as exc:
        raise InputError(source_file, f"cannot read: {exc}") from exc
    if not first:
        raise InputError(source_file, "empty file: no header and no rows")
    try:
        return first.decode("utf-8-sig").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise InputError(source_file, f"header is not UTF-8 (byte {exc.start})", line=1) from exc


def _define_raw_view(con, path: str, columns: tuple[str, ...]) -> None:
    """``raw_jobs``: the file as the CSV reader returns it, scanned once by the select query."""
    column_types = ", ".join(f"'{name}': '{_duckdb_type(name)}'" for name in columns)
    con.execute("SET VARIABLE acme_input_path = ?", [path])
    con.execute(
        f"CREATE TEMP VIEW raw_jobs AS SELECT * FROM read_csv(getvariable('acme_input_path'), "
        f"header = true, delim = ',', quote = '\"', escape = '\"', auto_detect = false, "
        f"store_rejects = true, columns = {{{column_types}}})"
    )
    con.execute(_read_sql("create_parse_macros.sql"))


def _read_sql(name: str) -> str:
    return (settings.project().sql_dir / "ingest" / name).read_text()


_NOT_CONVERTIBLE = re.compile(r'Could not convert string "(?P<value>.*)" to')


def _unreadable_lines(con) -> list[tuple[int, str, str]]:
    """Lines the CSV reader rejected: (line, reason, the line's text), one entry per line."""
    rejected = con.execute(
        "SELECT line, error_type, column_name, error_message, csv_line FROM reject_errors ORDER BY line, column_idx"
    ).fetchall()
    by_line: dict[int, tuple[list[str], str]] = {}
    for line, error_type, column_name, message, text in rejected:
        reason = message
        match = _NOT_CONVERTIBLE.search(message or "")
        if error_type == "CAST" and match:
            kind = "an integer" if column_name in _INTEGER_COLUMNS else "a number"
            reason = f"{column_name} '{match['value'][:40]}' is not {kind}"
        by_line.setdefault(int(line), ([], text))[0].append(reason)
    return [(line, "; ".join(reasons), text) for line, (reasons, text) in sorted(by_line.items())]


def _rejects(problems: pd.DataFrame, unreadable: list, source_file: str) -> pd.DataFrame:
    import pandas as pd

    parsed = pd.DataFrame(
        {
            "source_file": source_file,
            "source_line": problems["source_line"].astype("Int64"),
            "reason": problems["problem"],
            "record": problems["record"],
        }
    )
    unreadable_rows = pd.DataFrame(unreadable, columns=["source_line", "reason", "record"]).assign(
        source_file=source_file
    )
    both = pd.concat([parsed, unreadable_rows[list(REJECT_COLUMNS)]], ignore_index=True)
    return both.astype(REJECT_COLUMNS).sort_values("source_line", kind="stable")


def _accepted_line_numbers(path: str, rejected_lines: list[int], accepted: int) -> np.ndarray | None:
    """Physical line numbers (1-based) of the rows the CSV reader accepted, in order.

    Data lines are the lines after the header; the reader skips blank lines and reports
    rejected ones by their physical line, so the accepted rows are the data lines left when
    both are taken out. Returns None when the counts disagree (quoted fields spanning lines).
    """
    import mmap

    import numpy as np

    readable_lines = accepted + len(set(rejected_lines))
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as handle:
            data: bytes | mmap.mmap = handle.read()
        blank = _blank_lines(data, readable_lines)
    else:
        with open(path, "rb") as handle:
            if not Path(path).stat().st_size:
                return np.zeros(0, dtype=np.int64) if accepted == 0 else None
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                blank = _blank_lines(data, readable_lines)
    excluded = np.array(sorted(set(blank) | set(rejected_lines)), dtype=np.int64)
    candidates = np.arange(2, 2 + accepted + len(excluded), dtype=np.int64)
    kept = candidates[~np.isin(candidates, excluded)][:accepted] if len(excluded) else candidates
    return kept if len(kept) == accepted else None


def _data_lines(data) -> int:
    """Lines after the header (a last line without its newline counts). When there are as many as
    the rows read plus the lines rejected, no line is blank (nor a quoted field spanning lines), and
    the search for blank lines is skipped: counting newlines with numpy takes a tenth of its time."""
    import numpy as np

    chunk = 1 << 24  # 16 MB at a time: the comparison's temporary stays small
    newlines = 0
    for start in range(0, len(data), chunk):
        count = min(chunk, len(data) - start)
        newlines += int(np.count_nonzero(np.frombuffer(data, np.uint8, count, start) == 10))  # no copy
    unterminated = 1 if len(data) and data[len(data) - 1 : len(data)] != b"\n" else 0
    return max(newlines + unterminated - 1, 0)


def _blank_lines(data, readable_lines: int) -> list[int]:
    """1-based numbers of the empty lines (``\\n`` or ``\\r\\n`` alone), by searching for them;
    none, without a search, when the data lines are as many as ``readable_lines`` (:func:`_data_lines`)."""
    if _data_lines(data) == readable_lines:
        return []
    positions = []
    for pattern in (b"\n\n", b"\n\r\n"):
        position = data.find(pattern)
        while position != -1:
            positions.append(position)
            position = data.find(pattern, position + 1)
    blank, counted, newlines = [], 0, 0
    for position in sorted(positions):
        newlines += data[counted : position + 1].count(b"\n")
        counted = position + 1
        blank.append(newlines + 1)
    return blank


def parse_input(job_input, local_path: str | Path) -> tuple[ParseResult, str]:
    """The format registry's entry point (:mod:`acme.jobs.formats`): the layout is detected."""
    local_path = str(local_path)
    layout = detect_layout(local_path, job_input.uri)
    result = parse_acmetrace_table(
        local_path, job_input.cluster, source_file=job_input.uri, day=job_input.day, layout=layout
    )
    return result, layout
