"""Validation of canonical job records with great-expectations 1.x.

One suite per source: the canonical expectations every job record must meet (keys,
vocabularies, time order, non-negative durations, GPU time = GPUs × run time, tz-aware
times) plus the source's own consistency checks (AcmeTrace's ``duration`` and
``gpu_time`` columns against the times). Rows that fail any row-level expectation are
rejected with the reasons of every expectation they failed; table-level failures (a
missing column, naive or wrongly typed times) mean the schema drifted and nothing of the
input is published.

great-expectations is imported inside the functions (:func:`import_great_expectations`): its
import costs seconds.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from types import ModuleType
from typing import TYPE_CHECKING, Any

from acme.errors import SchemaDriftError
from acme.jobs.formats import LayoutRules, layout_rules
from acme.jobs.schema import JOB_COLUMNS, JOB_TYPES, STATE_GROUPS, STATES
from acme.rejects import REJECT_COLUMNS, record_text

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

# Absolute tolerance of the consistency checks: sources round to whole seconds.
TOLERANCE_S = 1.0

# The canonical columns the suite reads (plus a layout's required ones, e.g. ``user``): only these
# are handed to great-expectations as pandas. Names, node lists, exit codes and provenance stay in
# Arrow; their types are checked on the Arrow schema (:func:`validate_job_table`).
VALIDATED_COLUMNS = (
    "job_id", "job_type", "state", "state_group", "submit_time", "start_time", "end_time",
    "queue_s", "run_s", "gpu_num", "gpu_share", "cpu_num", "node_num", "gpu_time",
    "source_duration_s", "source_gpu_time",
)  # fmt: skip


@dataclass
class ValidationOutcome:
    accepted: pd.DataFrame  # canonical rows that met every expectation
    rejected: pd.DataFrame  # REJECT_COLUMNS: the canonical row as JSON and the failed expectations
    report: dict[str, Any]  # JSON-ready summary, saved beside the partition


@dataclass
class TableOutcome:
    accepted: pa.Table  # canonical rows that met every expectation (a filter of the input table)
    rejected: pd.DataFrame  # REJECT_COLUMNS, as in ValidationOutcome
    report: dict[str, Any]


def validated_columns(layout: str) -> list[str]:
    required = [c for c in layout_rules(layout).required if c not in VALIDATED_COLUMNS]
    return [*VALIDATED_COLUMNS, *required]


def validate_jobs(jobs: pd.DataFrame, *, layout: str, source_file: str) -> ValidationOutcome:
    """Run the job suite for ``layout`` (seren, kalos, sacct, k8s) over a canonical frame."""
    missing = [c for c in JOB_COLUMNS if c not in jobs.columns]
    if missing:
        raise SchemaDriftError(
            source_file, f"parsed job records lack the canonical column(s) {', '.join(missing)}"
        )
    jobs = jobs.reset_index(drop=True)
    reasons, report = _suite(jobs[validated_columns(layout)], layout, source_file)
    bad = sorted(reasons)
    accepted = jobs.drop(index=bad) if bad else jobs  # no copy of a million rows when all pass
    rejected = _rejected(jobs.loc[bad][list(JOB_COLUMNS)], bad, reasons, source_file)
    return ValidationOutcome(accepted.reset_index(drop=True), rejected, report)


def validate_job_table(
    table: pa.Table,
    *,
    layout: str,
    source_file: str,
    day: date | None = None,
    before_suite: Callable[[], object] | None = None,
) -> TableOutcome:
    """:func:`validate_jobs` over an Arrow table in the canonical schema (the one data path; text
    columns may be dictionary-encoded, see :func:`acme.jobs.schema.job_schema_drift`).

    Only the validated columns become pandas (:func:`_narrow_frame`); the accepted rows are an
    Arrow filter of ``table`` (the table itself when every row passes), and only the rejected
    rows are turned into text.

    ``day``: the input's day (``--day``). A job with no time at all (a sacct export whose only time
    is Elapsed) is filed under it: its time key is that day and its unknown end is no defect.

    ``before_suite()`` is called once the frame the suite reads is built, before the first use of
    great-expectations (the command line waits there for its import on another thread).
    """
    import numpy as np
    import pyarrow as pa

    from acme.jobs.schema import canonical_job_table, job_schema_drift, with_current_columns

    table = with_current_columns(table)
    drift = job_schema_drift(table.schema)
    if drift:
        raise SchemaDriftError(
            source_file, f"parsed job records do not match the canonical schema: {'; '.join(drift)}"
        )
    reasons, report = _suite(
        _narrow_frame(table, validated_columns(layout)), layout, source_file, day, before_suite
    )
    bad = sorted(reasons)
    if not bad:
        return TableOutcome(table, _rejected(None, [], reasons, source_file), report)
    keep = np.ones(table.num_rows, dtype=bool)
    keep[bad] = False
    rejected_rows = canonical_job_table(table.take(pa.array(bad))).to_pandas(types_mapper=_nullable_ints)
    return TableOutcome(
        table.filter(pa.array(keep)), _rejected(rejected_rows, bad, reasons, source_file), report
    )


def _nullable_ints(arrow_type):
    import pandas as pd
    import pyarrow as pa

    return pd.Int64Dtype() if arrow_type == pa.int64() else None


def _narrow_frame(table: pa.Table, columns: list[str]) -> pd.DataFrame:
    """The columns the suite reads, as pandas with numpy-backed columns only (GX filters and copies
    the frame per expectation; Arrow-backed text would make each copy a slow ``take``):
    dictionary-encoded text becomes categoricals, and ``job_id`` becomes an integer code of each id
    (:func:`job_id_codes`: equal codes exactly where the ids are equal, null where the id is), so
    the uniqueness and not-null checks see the same rows fail as on the text."""
    narrow = table.select(columns)
    index = narrow.schema.get_field_index("job_id")
    narrow = narrow.set_column(index, "job_id", job_id_codes(narrow["job_id"]))
    return narrow.to_pandas(types_mapper=_nullable_ints, split_blocks=True)  # numbers without nulls: no copy


# A job id that is a number as its scheduler writes it (no sign, no leading zero, 18 digits at most: it fits
# an unsigned 64-bit integer): then the number itself is the id's code.
_PLAIN_NUMBER = r"^(0|[1-9][0-9]{0,17})$"


def job_id_codes(job_ids: pa.ChunkedArray | pa.Array) -> pa.Array:
    """An integer per job id, equal exactly where the ids are equal (null where the id is): the ids
    themselves as unsigned numbers when every id is a plain number and none is missing (AcmeTrace's
    and Slurm's plain job ids: a cast, 0.4 s for ten million), else each id's index in a dictionary of
    the ids (a hash table of every distinct id: 2.5 s for ten million, and 4-8 s of a ten-million-job
    command, where it competes with the partitions' encoding for the cores)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = job_ids.combine_chunks() if isinstance(job_ids, pa.ChunkedArray) else job_ids
    if ids.null_count == 0 and pc.all(pc.match_substring_regex(ids, _PLAIN_NUMBER)).as_py() is not False:
        return pc.cast(ids, pa.uint64())
    return pc.dictionary_encode(ids).indices  # one dictionary for all rows


def _suite(
    frame: pd.DataFrame,
    layout: str,
    source_file: str,
    day: date | None = None,
    before_suite: Callable[[], object] | None = None,
) -> tuple[dict[int, list[str]], dict[str, Any]]:
    """Run the suite over the (narrow) frame: the failed reasons per row index, and the report."""
    rules = layout_rules(layout)
    derived = _with_derived_columns(
        frame, rules.duration_basis, gpu_num_required="gpu_num" in rules.required, day=day
    )
    if before_suite is not None:
        before_suite()
    results = _run_suite(
        derived, build_job_expectations(layout, list(frame.columns)), suite_name=f"jobs_{layout}"
    )
    table_failures = [r for r in results if not r["success"] and r["row_level"] is False]
    if table_failures:
        detail = "; ".join(f"{r['expectation']}({r['column']}): {r['observed']}" for r in table_failures)
        raise SchemaDriftError(source_file, f"parsed job records do not match the canonical schema: {detail}")
    reasons: dict[int, list[str]] = {}
    for result in results:
        for index in result.pop("unexpected_index_list"):
            reasons.setdefault(int(index), []).append(result["reason"])
    report = {
        "suite": f"jobs_{layout}",
        "success": not reasons,
        "rows_validated": len(frame),
        "rows_rejected": len(reasons),
        "expectations": results,
    }
    return reasons, report


def _rejected(
    rows: pd.DataFrame | None, bad: list[int], reasons: dict[int, list[str]], source_file: str
) -> pd.DataFrame:
    import pandas as pd

    if rows is None or not bad:
        return pd.DataFrame({name: [] for name in REJECT_COLUMNS}).astype(REJECT_COLUMNS)
    rows = rows.reset_index(drop=True)
    return pd.DataFrame(
        {
            "source_file": rows["source_file"].fillna(source_file),
            "source_line": rows["source_line"],
            "reason": ["; ".join(reasons[i]) for i in bad],
            "record": [record_text(row) for row in rows[list(JOB_COLUMNS)].to_dict("records")],
        }
    ).astype(REJECT_COLUMNS)


def build_job_expectations(layout: str, columns: list[str] | None = None) -> list:
    """The expectations of the suite for one source layout, each with the reason it stands for;
    ``columns``: those of the frame it runs on (default: :func:`validated_columns`)."""
    e = import_great_expectations().expectations
    rules = layout_rules(layout)
    columns = validated_columns(layout) if columns is None else columns
    expectations = [
        e.ExpectTableColumnsToMatchSet(
            column_set=[*(c for c in columns if c not in _DERIVATION_ONLY), *_DERIVED], exact_match=True
        ),
        # The pandas type of a tz-aware column is Timestamp; a naive one is numpy.datetime64.
        *(
            e.ExpectColumnValuesToBeOfType(
                column=name, type_="Timestamp", meta={"reason": f"{name} is not tz-aware"}
            )
            for name in ("submit_time", "start_time", "end_time")
        ),
        *(
            e.ExpectColumnValuesToNotBeNull(column=name, meta={"reason": f"{name} is missing"})
            for name in ("job_id", "job_type", "state", *rules.required)
        ),
        *(
            # where submit_time is required, its own check covers this one
            []
            if "submit_time" in rules.required
            else [
                e.ExpectColumnValuesToNotBeNull(
                    column="_time_key", meta={"reason": "no time at all (submit, start and end are missing)"}
                )
            ]
        ),
        e.ExpectColumnValuesToBeUnique(column="job_id", meta={"reason": "job_id appears more than once"}),
        *(
            e.ExpectColumnValuesToBeInSet(column=name, value_set=values, meta={"reason": reason})
            for name, values, reason in (
                ("state", list(STATES), "unknown state"),
                ("state_group", sorted(set(STATE_GROUPS.values())), "unknown state group"),
                ("job_type", list(JOB_TYPES), "unknown job type"),
            )
        ),
        *(
            e.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A=later,
                column_B=earlier,
                or_equal=True,
                ignore_row_if="either_value_is_missing",
                meta={"reason": f"{later} before {earlier}"},
            )
            for later, earlier in (("start_time", "submit_time"), ("end_time", "start_time"))
        ),
        # State-dependent end times through derived columns rather than row conditions: a row
        # condition makes GX copy the whole frame for each expectation.
        e.ExpectColumnValuesToNotBeNull(
            column="_end_time_unless_running", meta={"reason": "finished job without end_time"}
        ),
        e.ExpectColumnValuesToBeNull(
            column="_end_time_if_running", meta={"reason": "RUNNING job with an end_time"}
        ),
        *(
            e.ExpectColumnValuesToBeBetween(column=name, min_value=0, meta={"reason": f"negative {name}"})
            # gpu_time is covered by gpu_num and run_s here and by the gap check below.
            for name in ("queue_s", "run_s", "gpu_num", "cpu_num", "node_num")
        ),
        e.ExpectColumnValuesToBeBetween(
            column="_gpu_time_gap",
            max_value=TOLERANCE_S,
            meta={"reason": "gpu_time differs from GPUs (gpu_share, else gpu_num) × run_s"},
        ),
    ]
    return expectations + _layout_expectations(e, rules)


def _layout_expectations(e: Any, rules: LayoutRules) -> list:
    """The layout's own consistency checks: its GPU time and duration figures against the times."""
    expectations = []
    if rules.source_gpu_time:
        expectations.append(
            e.ExpectColumnValuesToBeBetween(
                column="_source_gpu_time_gap",
                max_value=TOLERANCE_S,
                meta={"reason": "source gpu_time differs from gpu_num × source duration"},
            )
        )
    if rules.duration_basis:
        basis = {"run": "differs from end − start", "run_at_most": "is longer than end − start"}.get(
            rules.duration_basis, "differs from end − submit"
        )
        expectations.append(
            e.ExpectColumnValuesToBeBetween(
                column="_source_duration_gap",
                max_value=TOLERANCE_S,
                meta={"reason": f"source duration {basis}"},
            )
        )
    return expectations


# Read only to derive the gap columns: left out of the frame the suite sees (GX copies it whole
# when it filters rows, so every column it does not check costs a copy per such expectation).
_DERIVATION_ONLY = ["gpu_time", "gpu_share", "source_duration_s", "source_gpu_time"]
_DERIVED = [
    "_time_key",
    "_gpu_time_gap",
    "_source_gpu_time_gap",
    "_source_duration_gap",
    "_end_time_unless_running",
    "_end_time_if_running",
]


def _with_derived_columns(
    jobs: pd.DataFrame, duration_basis: str | None, *, gpu_num_required: bool = True, day: date | None = None
) -> pd.DataFrame:
    """The frame the suite sees: the jobs plus derived columns, shaped for GX's fast paths.

    - Consistency gaps are 0 where not applicable (a CPU job has no source GPU time).
    - Columns that only get a range check have nulls as 0: GX skips nulls by copying the
      whole frame without them (hundreds of MB per million jobs). Nullness is checked by the
      not-null expectations, on columns left as they are.
    - Integer columns are checked as floats: GX's range check makes one Python call per
      value on pandas' nullable integers and is vectorized on floats.
    """
    from acme.jobs.schema import time_key_column

    gpus = jobs["gpu_num"].astype("float64")
    held = jobs["gpu_share"].fillna(gpus) if jobs["gpu_share"].notna().any() else gpus
    time_key = time_key_column(jobs) if jobs["submit_time"].hasnans else jobs["submit_time"]
    filed_by_day = None  # jobs with no time at all, filed under the input's day (their end is unknown)
    if day is not None and time_key.hasnans:
        import pandas as pd

        filed_by_day = time_key.isna()
        time_key = time_key.fillna(pd.Timestamp(day, tz="UTC"))
    if duration_basis == "submit":
        measured = (jobs["end_time"] - jobs["submit_time"]).dt.total_seconds()
    else:
        measured = jobs["run_s"]
    running = (jobs["state"] == "RUNNING").to_numpy()

    def gap(a, b):
        return (a - b).abs().fillna(0.0)

    def zero_if_null(column: pd.Series) -> pd.Series:
        return column.fillna(0.0) if column.hasnans else column  # no copy without nulls

    end_exempt = running if filed_by_day is None else running | filed_by_day.to_numpy()
    derived = jobs.assign(
        # end_time where the job should have one; a RUNNING job (or one whose times are all
        # unknown, filed under the input's day) counts as having it.
        _end_time_unless_running=jobs["end_time"].where(~end_exempt, time_key),
        # end_time where the job must not have one; null elsewhere.
        _end_time_if_running=jobs["end_time"].where(running),
        _time_key=time_key,
        # a required gpu_num keeps its nulls for the not-null check; elsewhere null means unknown
        gpu_num=gpus if gpu_num_required else zero_if_null(gpus),
        cpu_num=zero_if_null(jobs["cpu_num"].astype("float64")),
        node_num=zero_if_null(jobs["node_num"].astype("float64")),
        queue_s=zero_if_null(jobs["queue_s"]),
        run_s=zero_if_null(jobs["run_s"]),
        _gpu_time_gap=gap(jobs["gpu_time"], held * jobs["run_s"]),
        _source_gpu_time_gap=gap(jobs["source_gpu_time"], gpus * jobs["source_duration_s"]),
        _source_duration_gap=(
            (jobs["source_duration_s"] - measured).clip(lower=0).fillna(0.0)
            if duration_basis == "run_at_most"
            else gap(jobs["source_duration_s"], measured)
        ),
    )
    return derived.drop(columns=_DERIVATION_ONLY)


def preload_in_background():
    """Start importing great-expectations (seconds of work) on a thread; returns the thread.

    The command line parses the input meanwhile: DuckDB releases the GIL while it reads.
    """
    thread = threading.Thread(
        target=import_great_expectations, name="preload-great-expectations", daemon=True
    )
    thread.start()
    return thread


# Modules great-expectations imports at start-up only for expectations and renderers this suite
# never runs (the KL-divergence and KS-test expectations: scipy.stats; charts: altair; the JSON
# schema expectation: jsonschema, with its format checkers; Markdown in data docs: mistune): about
# a third of the CPU of its import (`python -X importtime`). They are imported on first use instead.
DEFERRED_BY_GX_IMPORT = ("scipy.stats", "altair", "jsonschema", "mistune")
# Optional dependencies of great-expectations for data sources and stores this project never gives
# it (its SQL data sources; S3 stores and assets: boto3): when the process has not imported them
# yet, great-expectations' import does not see them and runs as if they were not installed, which
# it supports (its ``compatibility`` modules put a stand-in that raises on use). SQLAlchemy is a
# third of the rest of the import's CPU (1.8 -> 1.3 s); in an Airflow process it is always
# imported already.
HIDDEN_FROM_GX_IMPORT = ("sqlalchemy", "psycopg2", "boto3", "botocore")
# great-expectations' fluent data sources for back ends this project never gives it (Spark, SQL databases
# and warehouses, Fabric, and pandas on S3, GCS, Azure and DBFS): its import loads them all, and each
# defines and registers its pydantic models. While it imports, each of these modules is a placeholder
# whose every name is an empty class (nothing registered, no ``add_spark``); the pandas data source
# the suite runs on is real. Import CPU 1.1 -> 0.77 s; a million-job command line 3.50 -> 3.10 s wall
# (medians of 5 alternated runs, 2026-12-07). The placeholders leave ``sys.modules`` after the import:
# code that imports such a module afterwards gets the real one.
_FLUENT = "great_expectations.datasource.fluent."
PLACEHOLDERS_IN_GX_IMPORT = tuple(
    _FLUENT + name
    for name in (
        "alloy_datasource", "aurora_datasource", "bigquery_datasource", "citus_datasource", "fabric",
        "fabric_datasource", "postgres_datasource", "neon_datasource", "redshift_datasource",
        "spark_datasource", "spark_file_path_datasource", "spark_filesystem_datasource",
        "spark_dbfs_datasource", "spark_s3_datasource", "spark_google_cloud_storage_datasource",
        "spark_azure_blob_storage_datasource", "sql_datasource", "sql_server_datasource",
        "sqlite_datasource", "databricks_sql_datasource", "snowflake_datasource",
        "pandas_dbfs_datasource", "pandas_s3_datasource", "pandas_google_cloud_storage_datasource",
        "pandas_azure_blob_storage_datasource",
    )
)  # fmt: skip
_IMPORTING = threading.RLock()


class _FinderForThread(importlib.abc.MetaPathFinder):
    """A finder that acts on the imports of ``names`` made on ``thread`` only."""

    def __init__(self, names: tuple[str, ...], thread: int) -> None:
        self.names, self.thread = names, thread

    def _on_thread(self) -> bool:
        return threading.get_ident() == self.thread


class _HiddenFromThread(_FinderForThread):
    """Finds nothing for ``names`` (and their submodules) when imported from ``thread``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if self._on_thread() and fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"{fullname} is hidden from great-expectations' import", name=fullname)
        return None


class _PlaceholderModule(ModuleType):
    """A module of :data:`PLACEHOLDERS_IN_GX_IMPORT`: any name asked of it is an empty class."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        placeholder = type(name, (), {"__module__": self.__name__})
        setattr(self, name, placeholder)
        return placeholder


class _PlaceholdersForThread(_FinderForThread, importlib.abc.Loader):
    """Gives ``thread`` a :class:`_PlaceholderModule` for each of ``names``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if self._on_thread() and fullname in self.names:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: Any) -> ModuleType:
        return _PlaceholderModule(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        pass


class _DeferredModule(ModuleType):
    """Stands in for a module until one of its attributes is first asked for, then imports the
    module and forwards to it. It carries the real module's ``__spec__``, so an ``import``
    statement finds it in ``sys.modules`` and takes it as it is."""

    def __getattr__(self, name: str) -> Any:
        with _IMPORTING:
            real = self.__dict__.get("_real_module")
            if real is None:
                if sys.modules.get(self.__name__) is self:
                    del sys.modules[self.__name__]
                real = importlib.import_module(self.__name__)
                self.__dict__["_real_module"] = real
        return getattr(real, name)


def import_great_expectations() -> ModuleType:
    """``great_expectations``, imported with :data:`DEFERRED_BY_GX_IMPORT` left unloaded until
    something uses them, :data:`HIDDEN_FROM_GX_IMPORT` unseen by it and
    :data:`PLACEHOLDERS_IN_GX_IMPORT` as placeholders. The stand-ins and placeholders are only in
    ``sys.modules`` during the import, and only this thread's import is given them or refused the
    hidden modules: code that imports those modules afterwards, or meanwhile on another thread, gets
    the real ones."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    with _IMPORTING:
        if "great_expectations" not in sys.modules:
            standing_in = _stand_ins(DEFERRED_BY_GX_IMPORT)
            hidden = [name for name in HIDDEN_FROM_GX_IMPORT if name not in sys.modules]
            thread = threading.get_ident()
            finders = [
                _HiddenFromThread(tuple(hidden), thread),
                _PlaceholdersForThread(PLACEHOLDERS_IN_GX_IMPORT, thread),
            ]
            sys.meta_path[:0] = finders
            try:
                importlib.import_module("great_expectations")
            finally:
                for finder in finders:
                    sys.meta_path.remove(finder)
                for name, module in standing_in.items():
                    if sys.modules.get(name) is module:
                        del sys.modules[name]
                _drop_placeholders()
    return sys.modules["great_expectations"]


def _drop_placeholders() -> None:
    """Take the placeholder modules out of ``sys.modules`` and off their package, so the next import
    of one (``import a.b`` or ``from a import b``) loads the real module."""
    for name in PLACEHOLDERS_IN_GX_IMPORT:
        if isinstance(sys.modules.get(name), _PlaceholderModule):
            del sys.modules[name]
            package, _, child = name.rpartition(".")
            if isinstance(getattr(sys.modules.get(package), child, None), _PlaceholderModule):
                delattr(sys.modules[package], child)


def _stand_ins(names: tuple[str, ...]) -> dict[str, _DeferredModule]:
    placed = {}
    for name in names:
        if name in sys.modules:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue  # not installed: great-expectations says what it misses
        module = _DeferredModule(name)
        vars(module).update(__spec__=spec, __loader__=spec.loader)
        sys.modules[name] = placed[name] = module
    return placed


def _run_suite(frame: pd.DataFrame, expectations: list, suite_name: str) -> list[dict[str, Any]]:
    gx = import_great_expectations()
    from great_expectations.execution_engine import pandas_execution_engine

    # GX fingerprints every pandas batch under 1 GB by hashing all of it (about 1.2 s per
    # million jobs). The fingerprint is only a batch marker; our provenance is the input key.
    pandas_execution_engine.HASH_THRESHOLD = 0

    context = gx.get_context(mode="ephemeral")
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    batch_definition = (
        context.data_sources.add_pandas("acme")
        .add_dataframe_asset("jobs")
        .add_batch_definition_whole_dataframe("whole")
    )
    # The suite is not added to the context: validating needs only the object (adding it
    # serializes it into the context's store).
    suite = gx.ExpectationSuite(name=suite_name, expectations=expectations)
    batch = batch_definition.get_batch(batch_parameters={"dataframe": frame})
    try:
        validation = batch.validate(suite, result_format={"result_format": "COMPLETE"})
    finally:
        # GX keeps the last context process-wide, and with it the batch's frame (a hundred MB per
        # million jobs) until the next validation: let it go now, before publishing.
        context.data_sources.delete("acme")
        del batch
    summaries = []
    for result in validation.results:
        configuration = result.expectation_config
        if configuration is None:
            raise RuntimeError("great-expectations returned a result without its expectation")
        kwargs = configuration.kwargs
        details = result.result or {}
        row_level = "unexpected_index_list" in details or "unexpected_count" in details
        if result.exception_info and result.exception_info.get("raised_exception"):
            raise RuntimeError(
                f"expectation {configuration.type} failed to run: {result.exception_info['exception_message']}"
            )
        summaries.append(
            {
                "expectation": configuration.type,
                "column": kwargs.get("column")
                or ",".join(str(kwargs[k]) for k in ("column_A", "column_B") if k in kwargs),
                "reason": (configuration.meta or {}).get("reason", configuration.type),
                "success": bool(result.success),
                "row_level": row_level,
                "unexpected_count": int(details.get("unexpected_count") or 0),
                "observed": details.get("observed_value"),
                "unexpected_index_list": list(details.get("unexpected_index_list") or []),
            }
        )
    return summaries
