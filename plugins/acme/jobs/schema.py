"""The canonical job record every source is parsed into, and its vocabularies.

One row per job (array tasks and heterogeneous parts count as jobs; Slurm job steps are
folded into their job). Times are tz-aware UTC. Durations are seconds:

- ``queue_s``  = start − submit
- ``run_s``    = end − start (true run time, excludes queueing; null while RUNNING)
- ``gpu_time`` = GPUs × run_s (GPU-seconds), GPUs being ``gpu_share`` where set, else ``gpu_num``

Fractional GPUs: ``gpu_num`` counts the GPU *devices* a job holds as the scheduler hands
them out (a MIG instance, a HAMi vGPU or a Run:ai fraction is one device). When a device is
only part of a GPU, ``gpu_share`` says how much of a physical GPU the job holds in total, as a
real number (two ``nvidia.com/mig-3g.40gb`` instances = 2 × 3/7 ≈ 0.857; one HAMi vGPU with
``nvidia.com/gpucores: 20`` = 0.2; Run:ai ``gpu-fraction: "0.5"`` = 0.5); it is null when the
job holds whole GPUs. Partitions written before the column existed read it as null, which
means the same thing. The report counts GPUs as ``COALESCE(gpu_share, gpu_num)``.

Time key: a job's partition is the UTC day of its first known time,
``COALESCE(submit_time, start_time, end_time)`` (:func:`time_key_column`). ``submit_time`` is
null when the source does not record it (a sacct export without Submit); ``queue_s`` is then
null too, and the report leaves such jobs out of its queueing statistics.

The source's own figures are kept beside them (``source_duration_s``, ``source_gpu_time``):
AcmeTrace Kalos ``duration`` is end − submit, so it includes queueing.
"""

from __future__ import annotations

STATES = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "PREEMPTED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "RUNNING",
)

# Coarse outcome used by the characterization (the paper's completed / canceled / failed).
# AcmeTrace documents TIMEOUT and NODE_FAIL as failed; OUT_OF_MEMORY is a failure of the job
# itself. PREEMPTED is undocumented there: the scheduler stopped a healthy job, which is
# closest to a cancellation, so it is grouped with CANCELLED.
STATE_GROUPS = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "TIMEOUT": "failed",
    "NODE_FAIL": "failed",
    "OUT_OF_MEMORY": "failed",
    "CANCELLED": "cancelled",
    "PREEMPTED": "cancelled",
    "RUNNING": "running",
}

JOB_TYPES = ("Eval", "Pretrain", "SFT", "MLLM", "Debug", "Other", "CPU")

# Canonical columns in their order, with the pandas dtype each has after parsing.
JOB_COLUMNS: dict[str, str] = {
    "cluster": "str",
    "job_id": "str",
    "job_name": "str",  # null where the source has none (AcmeTrace)
    "user": "str",
    "job_type": "str",
    "state": "str",
    "state_group": "str",
    "submit_time": "datetime64[us, UTC]",
    "start_time": "datetime64[us, UTC]",  # null if the job never started
    "end_time": "datetime64[us, UTC]",  # null while RUNNING or never started
    "queue_s": "float64",
    "run_s": "float64",
    "gpu_num": "Int64",
    "gpu_share": "float64",  # GPUs held when part of a GPU (MIG, vGPU, fraction); null = whole GPUs
    "cpu_num": "Int64",
    "node_num": "Int64",
    "node_list": "str",  # scheduler's node list as given (Slurm hostlist), null if unknown
    "gpu_time": "float64",
    "exit_code": "Int64",  # null where the source has none
    "source": "str",
    "source_duration_s": "float64",  # the source's own duration figure, if any
    "source_gpu_time": "float64",  # the source's own GPU time figure, if any
    "source_file": "str",
    "source_line": "Int64",  # 1-based physical line (CSV) or record index (JSON)
}


def job_arrow_schema():
    """The Parquet schema of a job partition (identical in every partition)."""
    import pyarrow as pa

    timestamp = pa.timestamp("us", tz="UTC")
    arrow_types = {
        # large_string is how pandas' pyarrow-backed str columns hold text: no copy either way.
        "str": pa.large_string(),
        "datetime64[us, UTC]": timestamp,
        "float64": pa.float64(),
        "Int64": pa.int64(),
    }
    return pa.schema([pa.field(name, arrow_types[dtype]) for name, dtype in JOB_COLUMNS.items()])


def job_schema_drift(schema) -> list[str]:
    """How ``schema`` differs from :func:`job_arrow_schema` (empty: it matches).

    A text column may be held dictionary-encoded in memory (:func:`repeated_text`, the AcmeTrace
    parser's low-cardinality columns): it matches when its values are the canonical type.
    """
    import pyarrow as pa

    expected = job_arrow_schema()
    if schema.names != expected.names:
        return [f"columns {', '.join(schema.names)} (expected {', '.join(expected.names)})"]
    drift = []
    for field, wanted in zip(schema, expected, strict=True):
        values = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        if values != wanted.type:
            drift.append(f"{field.name}: {field.type} (expected {wanted.type})")
    return drift


def canonical_job_table(table):
    """``table`` in the partitions' exact schema: dictionary-encoded columns decoded (a no-op when
    it is already canonical). Cheap on a day's slice; done where rows are written."""
    schema = job_arrow_schema()
    return table if table.schema.equals(schema) else table.cast(schema)


def repeated_text(value: str | None, length: int):
    """One text value (or null) on every row, dictionary-encoded: a byte per row, not the text."""
    import numpy as np
    import pyarrow as pa

    dictionary_type = pa.dictionary(pa.int8(), pa.large_string())
    if value is None:
        return pa.nulls(length, dictionary_type)
    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(length, dtype=np.int8)), pa.array([value], pa.large_string())
    )


def jobs_from_arrow(table):
    """Canonical pandas frame from a job table read back from Parquet (nullable integers kept)."""
    import pandas as pd
    import pyarrow as pa

    table = canonical_job_table(with_current_columns(table))
    frame = table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    return frame[list(JOB_COLUMNS)]


def with_current_columns(table):
    """A job table with every canonical column: one written before a column existed (a
    partition already in the lake) gets it as nulls. Column order follows the current schema."""
    import pyarrow as pa

    schema = job_arrow_schema()
    missing = [f for f in schema if f.name not in table.column_names]
    for column in missing:
        table = table.append_column(column, pa.nulls(table.num_rows, column.type))
    return table.select(schema.names) if missing else table


def time_key_column(jobs):
    """The time a job is filed under (pandas): its submit time, else start, else end."""
    return jobs["submit_time"].fillna(jobs["start_time"]).fillna(jobs["end_time"])
