"""Validation of canonical job records with great-expectations 1.x.

One suite per source: the canonical expectations every job record must meet (keys,
vocabularies, time order, non-negative durations, GPU time = GPUs × run time, tz-aware
times) plus the source's own consistency checks (AcmeTrace's ``duration`` and
``gpu_time`` columns against the times). Rows that fail any row-level expectation are
rejected with the reasons of every expectation they failed; table-level failures (a
missing column, naive or wrongly typed times) mean the schema drifted and nothing of the
input is published.

great-expectations is imported inside the functions: its import costs seconds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acme.errors import SchemaDriftError
from acme.schema import JOB_COLUMNS, JOB_TYPES, STATE_GROUPS, STATES
from acme.sources.base import REJECT_COLUMNS, record_text

if TYPE_CHECKING:
    import pandas as pd

# What the source's own ``duration`` column measures, per source layout:
# "run" = end - start, "submit" = end - submit (Kalos includes queueing), None = no such column.
# "run_at_most" = at most end - start: sacct's Elapsed leaves out the time a job was suspended.
DURATION_BASIS = {"seren": "run", "kalos": "submit", "sacct": "run_at_most", "k8s": None}

# Columns a layout always fills. AcmeTrace has a user, a GPU count and a submit time on every
# row; sacct and Kubernetes exports legitimately lack them (no User or TRES field in the
# --format, no Submit: the queue time is then unknown), so there they may be null.
_REQUIRED_BY_LAYOUT = {
    "seren": ("user", "gpu_num", "submit_time"),
    "kalos": ("user", "gpu_num", "submit_time"),
}

# Absolute tolerance of the consistency checks: sources round to whole seconds.
TOLERANCE_S = 1.0


@dataclass
class ValidationOutcome:
    accepted: pd.DataFrame  # canonical rows that met every expectation
    rejected: pd.DataFrame  # REJECT_COLUMNS: the canonical row as JSON and the failed expectations
    report: dict[str, Any]  # JSON-ready summary, saved beside the partition


def validate_jobs(jobs: pd.DataFrame, *, layout: str, source_file: str) -> ValidationOutcome:
    """Run the job suite for ``layout`` (seren, kalos, sacct, k8s) over ``jobs``."""
    import pandas as pd

    frame = _with_derived_columns(
        jobs.reset_index(drop=True),
        DURATION_BASIS.get(layout),
        gpu_num_required="gpu_num" in _REQUIRED_BY_LAYOUT.get(layout, ()),
    )
    expectations = build_job_expectations(layout)
    results = _run_suite(frame, expectations, suite_name=f"jobs_{layout}")

    table_failures = [r for r in results if not r["success"] and r["row_level"] is False]
    if table_failures:
        detail = "; ".join(f"{r['expectation']}({r['column']}): {r['observed']}" for r in table_failures)
        raise SchemaDriftError(source_file, f"parsed job records do not match the canonical schema: {detail}")

    reasons: dict[int, list[str]] = {}
    for result in results:
        for index in result.pop("unexpected_index_list"):
            reasons.setdefault(int(index), []).append(result["reason"])
    bad = sorted(reasons)
    jobs = jobs.reset_index(drop=True)
    accepted = jobs.drop(index=bad) if bad else jobs  # no copy of a million rows when all pass
    rejected_rows = jobs.loc[bad]
    rejected = pd.DataFrame(
        {
            "source_file": rejected_rows["source_file"].fillna(source_file),
            "source_line": rejected_rows["source_line"],
            "reason": ["; ".join(reasons[i]) for i in bad],
            "record": [record_text(row) for row in rejected_rows[list(JOB_COLUMNS)].to_dict("records")],
        }
    ).astype(REJECT_COLUMNS)
    report = {
        "suite": f"jobs_{layout}",
        "success": not bad,
        "rows_validated": len(frame),
        "rows_rejected": len(bad),
        "expectations": results,
    }
    return ValidationOutcome(accepted.reset_index(drop=True), rejected.reset_index(drop=True), report)


def build_job_expectations(layout: str) -> list:
    """The expectations of the suite for one source layout, each with the reason it stands for."""
    import great_expectations as gx

    e = gx.expectations
    expectations = [
        e.ExpectTableColumnsToMatchSet(column_set=list(JOB_COLUMNS) + _DERIVED, exact_match=True),
        # The pandas type of a tz-aware column is Timestamp; a naive one is numpy.datetime64.
        *(
            e.ExpectColumnValuesToBeOfType(
                column=name, type_="Timestamp", meta={"reason": f"{name} is not tz-aware"}
            )
            for name in ("submit_time", "start_time", "end_time")
        ),
        *(
            e.ExpectColumnValuesToNotBeNull(column=name, meta={"reason": f"{name} is missing"})
            for name in ("job_id", "job_type", "state", *_REQUIRED_BY_LAYOUT.get(layout, ()))
        ),
        *(
            # where submit_time is required, its own check covers this one
            []
            if "submit_time" in _REQUIRED_BY_LAYOUT.get(layout, ())
            else [
                e.ExpectColumnValuesToNotBeNull(
                    column="_time_key", meta={"reason": "no time at all (submit, start and end are missing)"}
                )
            ]
        ),
        e.ExpectColumnValuesToBeUnique(column="job_id", meta={"reason": "job_id appears more than once"}),
        e.ExpectColumnValuesToBeInSet(
            column="state", value_set=list(STATES), meta={"reason": "unknown state"}
        ),
        e.ExpectColumnValuesToBeInSet(
            column="state_group",
            value_set=sorted(set(STATE_GROUPS.values())),
            meta={"reason": "unknown state group"},
        ),
        e.ExpectColumnValuesToBeInSet(
            column="job_type", value_set=list(JOB_TYPES), meta={"reason": "unknown job type"}
        ),
        e.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="start_time",
            column_B="submit_time",
            or_equal=True,
            ignore_row_if="either_value_is_missing",
            meta={"reason": "start_time before submit_time"},
        ),
        e.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="end_time",
            column_B="start_time",
            or_equal=True,
            ignore_row_if="either_value_is_missing",
            meta={"reason": "end_time before start_time"},
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
    if layout in ("seren", "kalos"):
        expectations.append(
            e.ExpectColumnValuesToBeBetween(
                column="_source_gpu_time_gap",
                max_value=TOLERANCE_S,
                meta={"reason": "source gpu_time differs from gpu_num × source duration"},
            )
        )
    if DURATION_BASIS.get(layout):
        basis = {"run": "differs from end − start", "run_at_most": "is longer than end − start"}.get(
            DURATION_BASIS[layout], "differs from end − submit"
        )
        expectations.append(
            e.ExpectColumnValuesToBeBetween(
                column="_source_duration_gap",
                max_value=TOLERANCE_S,
                meta={"reason": f"source duration {basis}"},
            )
        )
    return expectations


_DERIVED = [
    "_time_key",
    "_gpu_time_gap",
    "_source_gpu_time_gap",
    "_source_duration_gap",
    "_end_time_unless_running",
    "_end_time_if_running",
]


def _with_derived_columns(
    jobs: pd.DataFrame, duration_basis: str | None, *, gpu_num_required: bool = True
) -> pd.DataFrame:
    """The frame the suite sees: the jobs plus derived columns, shaped for GX's fast paths.

    - Consistency gaps are 0 where not applicable (a CPU job has no source GPU time).
    - Columns that only get a range check have nulls as 0: GX skips nulls by copying the
      whole frame without them (hundreds of MB per million jobs). Nullness is checked by the
      not-null expectations, on columns left as they are.
    - Integer columns are checked as floats: GX's range check makes one Python call per
      value on pandas' nullable integers and is vectorized on floats.
    """
    from acme.schema import time_key_column

    gpus = jobs["gpu_num"].astype("float64")
    held = jobs["gpu_share"].fillna(gpus) if jobs["gpu_share"].notna().any() else gpus
    time_key = time_key_column(jobs) if jobs["submit_time"].hasnans else jobs["submit_time"]
    if duration_basis == "submit":
        measured = (jobs["end_time"] - jobs["submit_time"]).dt.total_seconds()
    else:
        measured = jobs["run_s"]
    running = (jobs["state"] == "RUNNING").to_numpy()

    def gap(a, b):
        return (a - b).abs().fillna(0.0)

    def zero_if_null(column: pd.Series) -> pd.Series:
        return column.fillna(0.0) if column.hasnans else column  # no copy without nulls

    return jobs.assign(
        # end_time where the job should have one; a RUNNING job counts as having it.
        _end_time_unless_running=jobs["end_time"].where(~running, time_key),
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


def preload_in_background():
    """Start importing great-expectations (seconds of work) on a thread; returns the thread.

    The command line parses the input meanwhile: DuckDB releases the GIL while it reads.
    """
    import threading

    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

    def load() -> None:
        import great_expectations  # noqa: F401

    thread = threading.Thread(target=load, name="preload-great-expectations", daemon=True)
    thread.start()
    return thread


def _run_suite(frame: pd.DataFrame, expectations: list, suite_name: str) -> list[dict[str, Any]]:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.execution_engine import pandas_execution_engine

    # GX fingerprints every pandas batch under 1 GB by hashing all of it (about 1.2 s per
    # million jobs). The fingerprint is only a batch marker; our provenance is the input key.
    pandas_execution_engine.HASH_THRESHOLD = 0

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = {"globally": False, "metric_calculations": False}
    batch_definition = (
        context.data_sources.add_pandas("acme")
        .add_dataframe_asset("jobs")
        .add_batch_definition_whole_dataframe("whole")
    )
    suite = context.suites.add(gx.ExpectationSuite(name=suite_name, expectations=expectations))
    batch = batch_definition.get_batch(batch_parameters={"dataframe": frame})
    validation = batch.validate(suite, result_format={"result_format": "COMPLETE"})
    summaries = []
    for result in validation.results:
        configuration = result.expectation_config
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
