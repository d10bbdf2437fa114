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
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from acme import config
from acme.errors import InputError, SchemaDriftError
from acme.schema import JOB_COLUMNS, STATE_GROUPS
from acme.sources.base import REJECT_COLUMNS, ParseResult

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


def parse_acmetrace(
    path: str | Path,
    cluster: str,
    *,
    source_file: str | None = None,
    day: date | None = None,
) -> ParseResult:
    """Parse one AcmeTrace CSV (plain or ``.gz``) of either layout.

    ``day`` keeps the jobs submitted on that UTC day (the nightly run's interval) and counts
    the others as ``skipped_other_days``. Rows whose day cannot be told (unparseable submit
    time, malformed line) are reported by the run for the file's first day, so that a
    backfill over a multi-day file reports each of them exactly once.
    """
    import duckdb

    path = str(path)
    source_file = source_file or path
    layout = detect_layout(path, source_file)
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        try:
            _load_raw(con, path, LAYOUTS[layout])
        except duckdb.Error as exc:
            first_line = str(exc).strip().splitlines()[0]
            raise InputError(source_file, f"unreadable as CSV: {first_line}") from exc
        rows = con.sql(_read_sql(f"select_acmetrace_{layout}_jobs.sql")).to_arrow_table()
        structural = con.execute(
            "SELECT line, string_agg(error_message, '; ') AS reason, any_value(csv_line) AS record "
            "FROM reject_errors GROUP BY line ORDER BY line"
        ).df()
        frame = _to_pandas(rows)
        problem_mask = frame["problem"].notna().to_numpy()
        problem_index = frame.loc[problem_mask, "row_index"].to_list()
        raw_records = _raw_records(con, problem_index)
    finally:
        con.close()

    lines = _accepted_line_numbers(path, structural["line"].to_numpy(), len(frame))
    frame["source_line"] = lines if lines is not None else frame["row_index"] + 2
    notes = [] if lines is not None else [
        f"{source_file}: line numbers are approximate (row order + 2): the file has quoted newlines"
    ]

    rejects = _rejects(frame.loc[problem_mask], raw_records, structural, source_file)
    jobs = _finish(frame.loc[~problem_mask].drop(columns=["problem", "row_index"]), cluster, source_file)

    skipped = 0
    if day is not None:
        submit_day = jobs["submit_time"].dt.date
        in_day = (submit_day == day).to_numpy()
        skipped = int((~in_day).sum())
        jobs = jobs.loc[in_day]
        if len(rejects) and _first_day(frame) != day:
            skipped += len(rejects)
            rejects = rejects.iloc[0:0]
    rows_in = len(frame) + len(structural)
    return ParseResult(
        jobs.reset_index(drop=True), rejects.reset_index(drop=True), rows_in, skipped, notes
    )


def detect_layout(path: str, source_file: str) -> str:
    """``seren`` or ``kalos`` from the header line; a clear error for anything else."""
    header = _first_line(path, source_file)
    if not header.strip():
        raise InputError(source_file, "the first line is blank: expected the AcmeTrace header", line=1)
    for delimiter in (";", "\t", "|"):
        if delimiter in header and "," not in header:
            raise InputError(
                source_file, f"wrong delimiter: the header is separated by {delimiter!r}, expected ','", line=1
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


def _load_raw(con, path: str, columns: tuple[str, ...]) -> None:
    column_types = ", ".join(f"'{name}': 'VARCHAR'" for name in columns)
    con.execute(
        f"CREATE TEMP TABLE raw_rows AS SELECT * FROM read_csv(?, header = true, delim = ',', "
        f"quote = '\"', escape = '\"', auto_detect = false, store_rejects = true, "
        f"columns = {{{column_types}}})",
        [path],
    )
    con.execute("CREATE TEMP VIEW raw_jobs AS SELECT rowid AS row_index, * FROM raw_rows")
    con.execute(_read_sql("create_parse_macros.sql"))


def _read_sql(name: str) -> str:
    return (config.sql_dir() / "ingest" / name).read_text()


def _to_pandas(table) -> pd.DataFrame:
    frame = table.to_pandas(split_blocks=True, self_destruct=True)
    for name in ("gpu_num", "cpu_num", "node_num"):
        frame[name] = frame[name].astype("Int64")
    for name in ("submit_time", "start_time", "end_time"):
        frame[name] = frame[name].astype("datetime64[us, UTC]")
    return frame


def _raw_records(con, row_indexes: list[int]) -> dict[int, str]:
    """The raw text fields of the given rows as JSON, for the quarantine."""
    if not row_indexes:
        return {}
    records = con.execute(
        "SELECT row_index, to_json(r)::VARCHAR FROM (SELECT * FROM raw_jobs WHERE row_index IN "
        "(SELECT UNNEST(?::BIGINT[]))) AS r",
        [row_indexes],
    ).fetchall()
    return dict(records)


def _rejects(problems: pd.DataFrame, raw: dict[int, str], structural: pd.DataFrame, source_file: str):
    import pandas as pd

    parsed = pd.DataFrame(
        {
            "source_file": source_file,
            "source_line": problems["source_line"].astype("Int64"),
            "reason": problems["problem"],
            "record": [_strip_row_index(raw.get(int(i), "")) for i in problems["row_index"]],
        }
    )
    unreadable = pd.DataFrame(
        {
            "source_file": source_file,
            "source_line": structural["line"].astype("Int64"),
            "reason": structural["reason"],
            "record": structural["record"],
        }
    )
    both = pd.concat([parsed, unreadable], ignore_index=True)
    return both.astype(REJECT_COLUMNS).sort_values("source_line", kind="stable")


def _strip_row_index(record: str) -> str:
    import json

    if not record:
        return record
    fields = json.loads(record)
    fields.pop("row_index", None)
    return json.dumps(fields, ensure_ascii=False)


def _finish(frame: pd.DataFrame, cluster: str, source_file: str) -> pd.DataFrame:
    frame = frame.assign(
        cluster=cluster,
        state_group=frame["state"].map(STATE_GROUPS),
        gpu_time=frame["gpu_num"].astype("float64") * frame["run_s"],
        node_list=None,
        exit_code=None,
        source="acmetrace",
        source_file=source_file,
    )
    frame["exit_code"] = frame["exit_code"].astype("Int64")
    frame["source_line"] = frame["source_line"].astype("Int64")
    for name, dtype in JOB_COLUMNS.items():
        if dtype == "str" and frame[name].dtype != "str":
            frame[name] = frame[name].astype("str").where(frame[name].notna(), None)
    return frame[list(JOB_COLUMNS)]


def _first_day(frame: pd.DataFrame) -> date | None:
    first = frame["submit_time"].min()
    return None if first is None or first != first else first.date()


def _accepted_line_numbers(path: str, rejected_lines: np.ndarray, accepted: int) -> np.ndarray | None:
    """Physical line numbers (1-based) of the rows DuckDB accepted, in order.

    Data lines are the non-blank lines after the header; DuckDB skips blank lines and
    reports malformed ones by their physical line, so the accepted rows are the remaining
    data lines. Returns None when the counts disagree (quoted fields spanning lines).
    """
    import numpy as np

    if path.endswith(".gz"):
        with gzip.open(path, "rb") as handle:
            data = np.frombuffer(handle.read(), dtype=np.uint8)
    else:
        data = np.memmap(path, dtype=np.uint8, mode="r") if Path(path).stat().st_size else np.zeros(0, np.uint8)
    newlines = np.flatnonzero(data == 10)
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [len(data)]))
    if len(data) and data[-1] == 10:  # no line after the final newline
        starts, ends = starts[:-1], ends[:-1]
    lengths = ends - starts
    carriage = (lengths == 1) & (data[np.minimum(starts, max(len(data) - 1, 0))] == 13)
    non_blank = np.flatnonzero((lengths > 0) & ~carriage) + 1
    data_lines = non_blank[non_blank > 1]
    accepted_lines = np.setdiff1d(data_lines, rejected_lines.astype(np.int64), assume_unique=True)
    if len(accepted_lines) != accepted:
        return None
    return accepted_lines
