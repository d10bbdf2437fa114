"""AcmeTrace-style wide utilization CSVs into canonical samples, fast (for backfills).

A file holds one metric: a ``Time`` column (``2023-07-01 08:00:00+08:00``; any ISO 8601 time with
an offset, naive times taken as UTC+8 like the release) and one column per GPU or per node.
Which metric a file holds comes from its name (``<stem>.csv`` matched against the catalog's
``csv_names``) unless the caller says.

Column names, assumed (the full release is not available offline, so the mapping is explicit and
checked rather than guessed silently):

- GPU metrics: ``<node><sep><gpu>`` where ``<sep>`` is one of ``- _ : / .`` and ``<gpu>`` is an
  optional ``gpu`` followed by the index (``SH-IDC1-10-140-0-12-3``, ``node7_gpu3``, ``node7:3``).
  The index is the part after the *last* separator, so node names may themselves contain
  hyphens and numbers. Indexes must be below ``max_gpus_per_node`` (16); columns whose suffix is
  larger look like node names, and a file of those is refused with a clear error instead of
  inventing GPUs.
- Node metrics: the column name is the node.
- ``column_map`` ({column: (node, gpu)}) overrides both, for any other convention.

Unmappable or duplicate columns are reported in ``notes`` and their cells quarantined (one
reject per column). Empty cells are missing samples (they count against coverage); ``NaN`` and
``inf`` cells are kept so validation quarantines them with a reason. Rows with the wrong number
of cells or an unreadable time become rejects with their line number. Values are taken to be in
the catalog's unit; ``scale`` converts (e.g. 819.2 for memory given in % of 80 GiB).

Speed: pyarrow's multithreaded CSV reader types every value column as float64 in one pass; the
columns are stacked into a (series, time) matrix whose row-major ravel *is* the long form sorted
by (series, time), so no sort and no SQL unpivot is needed (≈ 0.3-1 s per 13 M-sample file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from acme.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from acme.metrics.catalog import Catalog, MetricSpec
    from acme.metrics.storage import Samples

TIME_COLUMNS = ("time", "timestamp", "datetime")
_GPU_SUFFIX = re.compile(r"^(?P<node>.+?)[-_:/.](?:gpu)?(?P<gpu>\d+)$", re.IGNORECASE)
NAIVE_ZONE = "Etc/GMT-8"  # UTC+8 (POSIX sign convention), the zone of the release's times


@dataclass
class WideParse:
    samples: Samples
    rejects: pd.DataFrame
    rows_in: int
    missing_cells: int
    notes: list[str] = field(default_factory=list)


def metric_of_file(path: str | Path, catalog: Catalog) -> MetricSpec:
    stem = Path(path).name.split(".")[0]
    spec = catalog.by_csv_name(stem)
    if spec is None:
        raise InputError(
            str(path), f"cannot tell the metric from the file name {stem!r}; name it after a catalog metric"
        )
    return spec


def _map_column(name: str, spec: MetricSpec, column_map: dict | None) -> tuple[str, int | None] | None:
    """(node, gpu) of one column: from ``column_map``, the whole name (node metrics) or ``<node>-<gpu>``."""
    if column_map and name in column_map:
        node, gpu = column_map[name]
        return str(node), None if gpu is None else int(gpu)
    if not spec.per_gpu:
        return name.strip(), None
    match = _GPU_SUFFIX.match(name.strip())
    return (match["node"], int(match["gpu"])) if match else None


def map_columns(
    names: list[str], spec: MetricSpec, column_map: dict | None = None, max_gpus_per_node: int = 16
) -> tuple[list[tuple[str, int | None] | None], list[str]]:
    """(node, gpu) per column (None = unmappable) and notes about the mapping."""
    notes: list[str] = []
    mapped = [_map_column(name, spec, column_map) for name in names]
    too_large = 0
    for i, key in enumerate(mapped):
        from_map = column_map is not None and names[i] in column_map
        if (
            spec.per_gpu
            and not from_map
            and key is not None
            and key[1] is not None
            and key[1] >= max_gpus_per_node
        ):
            too_large += 1
            mapped[i] = None
    if spec.per_gpu and names and too_large > len(names) / 2:
        raise InputError(
            ",".join(names[:3]) + ",...",
            f"{too_large} of {len(names)} columns end in a number >= {max_gpus_per_node}: they look like "
            f"node names, not <node>-<gpu>, for the GPU metric {spec.name}; pass a column_map",
        )
    seen: set[tuple] = set()
    for i, key in enumerate(mapped):
        if key is None:
            continue
        if key in seen:
            notes.append(f"column {names[i]!r} repeats {key[0]} GPU {key[1]}: its cells are quarantined")
            mapped[i] = None
        seen.add(key)
    unmapped = [
        names[i] for i, key in enumerate(mapped) if key is None and not any(names[i] in n for n in notes)
    ]
    if unmapped:
        notes.append(
            f"{len(unmapped)} column(s) cannot be mapped to node/GPU and are quarantined: "
            + ", ".join(repr(n) for n in unmapped[:5])
        )
    return mapped, notes


def parse_wide_csv(
    path: str | Path,
    spec: MetricSpec,
    *,
    source_file: str | None = None,
    column_map: dict | None = None,
    scale: float = 1.0,
    day=None,
    node_group: tuple[int, int] | None = None,
) -> WideParse:
    """Parse one wide CSV of ``spec`` into samples sorted by (series, time); see the module doc.

    ``node_group`` ``(g, N)``: only the columns of that group's nodes are converted
    (``acme.metrics.node_groups``); the file's own rejects (rows, times, unmappable columns) are
    reported by group 0 only, so that the groups together quarantine each one once."""
    import numpy as np

    from acme.metrics.storage import Samples, series_frame
    from acme.rejects import rejects_frame

    path = str(path)
    source_file = source_file or path
    header = _header(path, source_file)
    time_index = next((i for i, name in enumerate(header) if name.strip().lower() in TIME_COLUMNS), None)
    if time_index is None:
        raise InputError(
            source_file, f"no Time column in the header (columns: {', '.join(header[:5])}, ...)", line=1
        )
    value_names = [name for i, name in enumerate(header) if i != time_index]
    mapped, notes = map_columns(value_names, spec, column_map)
    if node_group is not None:
        value_names, mapped = _columns_of_group(value_names, mapped, node_group)
    rejects: list[dict] = []  # the file's (rows, times, columns)
    cell_rejects: list[dict] = []  # the cells' (text in a number column), first
    include = None if node_group is None else [header[time_index], *value_names]
    table, rows_in = _read_table(
        path,
        source_file,
        include or header,
        header[time_index],
        value_names,
        (rejects, cell_rejects),
        include,
    )
    ts_sorted, order = _rows_in_time_order(table, header[time_index], source_file, day, rejects, notes)
    keyed = sorted(
        (key[0], key[1] if key[1] is not None else -1, i) for i, key in enumerate(mapped) if key is not None
    )
    for i, key in enumerate(mapped):
        if key is None:
            rejects.append({"source_file": source_file, "source_line": 1,
                            "reason": f"column {value_names[i]!r} cannot be mapped to a node/GPU (or repeats one)",
                            "record": value_names[i][:200]})  # fmt: skip
    matrix, present = _value_matrix(table, [value_names[i] for _, _, i in keyed], order)
    rejects = cell_rejects + (rejects if node_group is None or node_group[0] == 0 else [])
    del table
    if scale != 1.0:
        matrix *= scale
    n_series, n_times = matrix.shape
    series = series_frame(
        node=[key[0] for key in keyed],
        gpu=[key[1] for key in keyed],
        uuid=[None] * n_series,
        model=[None] * n_series,
    )
    value = matrix.reshape(-1)
    ts = np.tile(ts_sorted, n_series)
    series_id = np.repeat(np.arange(n_series, dtype=np.int32), n_times)
    missing = 0
    if present is not None:
        flat = present.reshape(-1)
        missing = int(flat.size - np.count_nonzero(flat))
        value, ts, series_id = value[flat], ts[flat], series_id[flat]
    samples = Samples(spec.name, series, series_id, ts, value, is_sorted=True, notes=notes)
    return WideParse(samples, rejects_frame(rejects), rows_in, missing, notes)


def _columns_of_group(names: list[str], mapped: list, group: tuple[int, int]) -> tuple[list[str], list]:
    """The value columns of the group's nodes (and, for group 0, the unmappable ones, to reject them)."""
    from acme.metrics.node_groups import node_group_of

    index, count = group
    kept = [
        i
        for i, key in enumerate(mapped)
        if (key is None and index == 0) or (key is not None and node_group_of(key[0], count) == index)
    ]
    return [names[i] for i in kept], [mapped[i] for i in kept]


def _read_table(
    path: str, source_file: str, columns: list[str], time_name: str, value_names,
    rejected: tuple[list[dict], list[dict]], include: list[str] | None = None,
):  # fmt: skip
    """The CSV's ``columns`` (the header, or a node group's: ``include``) as an Arrow table (values float64, times text) and the rows
    read; short or long rows are rejected with their line, and bad cells (text in a number column)
    through the slow path."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rejects, cell_rejects = rejected  # the rows' and the cells'
    bad_rows: list[tuple[int, str, str]] = []

    def on_invalid_row(row) -> str:
        bad_rows.append(
            (row.number, f"expected {row.expected_columns} cells, got {row.actual_columns}", row.text)
        )
        return "skip"

    column_types = {name: pa.float64() for name in value_names}
    column_types[time_name] = pa.string()
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=8 << 20),
            parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid_row),
            convert_options=pacsv.ConvertOptions(
                column_types=column_types,
                null_values=[""],
                strings_can_be_null=False,
                include_columns=include or [],
            ),
        )
    except pa.ArrowInvalid as exc:
        bad_rows.clear()  # the slow path reads the file again and reports the short/long rows anew
        table = _read_with_bad_cells(path, source_file, columns, time_name, exc, cell_rejects, on_invalid_row)
    for number, reason, text in bad_rows:
        rejects.append(
            {"source_file": source_file, "source_line": number, "reason": reason, "record": text[:500]}
        )
    return table, table.num_rows + len(bad_rows)


def _rows_in_time_order(
    table, time_column: str, source_file: str, day, rejects: list[dict], notes: list[str]
):
    """(times in ms, sorted; the row order that sorts them) of the rows with a readable time (on ``day``
    when given); unreadable times are rejected with their line."""
    import numpy as np
    import pandas as pd

    from acme.metrics.storage import DAY_MS, day_start_ms

    times = _parse_times(pd.Series(table.column(time_column).to_numpy(zero_copy_only=False)))
    bad_time = times.isna().to_numpy()
    ts_ms = times.to_numpy(dtype="datetime64[ms]", na_value=np.datetime64("NaT")).astype(np.int64)
    if bad_time.any():
        texts = table.column(time_column).to_pylist()
        for row in np.flatnonzero(bad_time)[:1000]:
            rejects.append({"source_file": source_file, "source_line": int(row) + 2,
                            "reason": f"Time {texts[row]!r} is not a time", "record": str(texts[row])[:200]})  # fmt: skip
    keep_rows = ~bad_time
    if day is not None:
        start = day_start_ms(day)
        keep_rows &= (ts_ms >= start) & (ts_ms < start + DAY_MS)
    row_index = np.flatnonzero(keep_rows)
    order = row_index[np.argsort(ts_ms[row_index], kind="stable")]
    if len(order) and (np.diff(ts_ms[row_index]) < 0).any():
        notes.append(f"{source_file}: rows are not in time order; sorted")
    return ts_ms[order], order


def _value_matrix(table, columns: list[str], order):
    """(values, presence or None when no cell is empty): one row per column, in the rows' ``order``."""
    import numpy as np

    n_series, n_times = len(columns), len(order)
    matrix = np.empty((n_series, n_times), dtype=np.float64)
    present = None
    identity = n_times == table.num_rows and bool((order == np.arange(n_times)).all())
    for row, name in enumerate(columns):
        column = table.column(name)
        values = (
            column.to_numpy(zero_copy_only=False)
            if column.num_chunks != 1
            else column.chunk(0).to_numpy(zero_copy_only=False)
        )
        matrix[row] = values if identity else values[order]
        if column.null_count:
            if present is None:
                present = np.ones((n_series, n_times), dtype=bool)
            nulls = column.is_null().to_numpy(zero_copy_only=False)
            present[row] = ~(nulls if identity else nulls[order])
    return matrix, present


def _parse_times(texts: pd.Series) -> pd.Series:
    """UTC times from ISO 8601 texts; naive times are taken as +08:00 (the release's zone).

    The common case (one style for the whole file) is one vectorized parse. A file that pandas
    cannot parse in one go (times with and without an offset mixed, a year 0 that falls outside
    the nanosecond range once shifted to UTC) is parsed text by text: rare, and only then slow.
    Unreadable texts become NaT (rejected by the caller with their line).
    """
    import pandas as pd

    texts = texts.astype("object").str.strip()
    try:
        return _to_utc(pd.to_datetime(texts, format="ISO8601", utc=False, errors="coerce"))
    except (ValueError, TypeError, OverflowError, pd.errors.OutOfBoundsDatetime):
        pass
    parsed = {text: _one_time(text) for text in texts.dropna().unique()}
    return pd.Series(texts.map(parsed), index=texts.index, dtype="datetime64[ns, UTC]")


def _one_time(text: str):
    import pandas as pd

    try:
        moment = pd.Timestamp(text)
        if moment.tzinfo is None:
            moment = moment.tz_localize(NAIVE_ZONE)
        return moment.tz_convert("UTC").as_unit("ns")  # raises outside 1677..2262
    except (ValueError, TypeError, OverflowError, pd.errors.OutOfBoundsDatetime):
        return pd.NaT


def _to_utc(times: pd.Series) -> pd.Series:
    """UTC times; naive times are taken as +08:00 (the release's zone)."""
    import pandas as pd

    if isinstance(times.dtype, pd.DatetimeTZDtype):
        return times.dt.tz_convert("UTC")
    return times.dt.tz_localize(NAIVE_ZONE).dt.tz_convert("UTC")


def _header(path: str, source_file: str) -> list[str]:
    import csv

    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            first = handle.readline()
    except OSError as exc:
        raise InputError(source_file, f"cannot read: {exc}") from exc
    if not first.strip():
        raise InputError(source_file, "empty file: no header", line=1)
    return next(csv.reader([first]))


def _read_with_bad_cells(path, source_file, header, time_name, error, rejects, on_invalid_row):
    """Slow path when some cells are not numbers: read text, convert, reject the bad cells (``header``:
    the columns to read)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = pacsv.read_csv(
        path,
        parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid_row),
        convert_options=pacsv.ConvertOptions(
            column_types={name: pa.string() for name in header},
            null_values=[""],
            strings_can_be_null=True,
            include_columns=list(header),
        ),
    )
    columns = {}
    for name in header:
        column = table.column(name)
        if name == time_name:
            columns[name] = column
            continue
        text = pd.Series(column.to_numpy(zero_copy_only=False), dtype="object")
        numbers = pd.to_numeric(text.str.strip(), errors="coerce")
        bad = (
            numbers.isna().to_numpy()
            & text.notna().to_numpy()
            & ~text.str.strip().str.lower().isin(["nan", "+nan", "-nan"]).to_numpy()
        )
        for row in np.flatnonzero(bad)[:1000]:
            rejects.append({"source_file": source_file, "source_line": int(row) + 2,
                            "reason": f"{name}: {text.iloc[row]!r} is not a number", "record": str(text.iloc[row])[:200]})  # fmt: skip
        mask = text.isna().to_numpy() | bad
        columns[name] = pa.array(numbers.to_numpy(dtype=np.float64), mask=mask)
    del error
    return pa.table(columns)
