"""A small lake of one cluster's history, written by the real writers, for the lemon-node tests.

Days are counted back from the day the history is written (``write_history`` returns it), because the
recovery's action log is stamped with the real time; tests take their "today" from it, not from the time their
module was imported (a run that crossed midnight saw the recovery after its own end of day)::

    job  submitted  nodes       state      diagnosis                  recovery
    101  today-6    gpu03       NODE_FAIL  -
    102  today-5    gpu[03-04]  FAILED     ECCError (infrastructure)
    103  today-4    gpu[05-08]  FAILED     ValueError (user)          -
    104  today-3    gpu[01-08]  FAILED     NCCLTimeoutError (infra)   localized: gpu03 faulty (simulated check)

and Xid telemetry: code 79 (fallen off the bus) on gpu03, code 13 (a program's fault) on gpu06.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from acme.lake import Lake

NODES = [f"gpu{i:02d}" for i in range(1, 9)]
HEADER = "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|AllocTRES|ReqTRES|ExitCode"
TRES = "billing=8,cpu=64,gres/gpu={gpus},mem=512G,node={nodes}"


def days_ago(n: int, today: date) -> date:
    return today - timedelta(days=n)


def _sacct_line(
    job_id: int, day: date, state: str, nodes: str, count: int, hours: int, exit_code: str
) -> str:
    start = datetime.combine(day, datetime.min.time()) + timedelta(hours=1)
    end = start + timedelta(hours=hours)
    tres = TRES.format(gpus=8 * count, nodes=count)
    return "|".join(
        [str(job_id), f"train-{job_id}", "alice", "gpu", state, start.isoformat(), start.isoformat(), end.isoformat(),
         f"{hours:02d}:00:00", str(count), str(64 * count), nodes, tres, tres, exit_code]
    )  # fmt: skip


def write_jobs(lake: Lake, folder: Path, today: date) -> None:
    from acme.jobs.ingest import JobInput, ingest_job_file

    lines = [
        HEADER,
        _sacct_line(101, days_ago(6, today), "NODE_FAIL", "gpu03", 1, 10, "0:0"),
        _sacct_line(102, days_ago(5, today), "FAILED", "gpu[03-04]", 2, 5, "1:0"),
        _sacct_line(103, days_ago(4, today), "FAILED", "gpu[05-08]", 4, 2, "1:0"),
        _sacct_line(104, days_ago(3, today), "FAILED", "gpu[01-08]", 8, 3, "1:0"),
    ]
    path = folder / "sacct.txt"
    path.write_text("\n".join(lines) + "\n")
    ingest_job_file(lake, JobInput("seren", "sacct", str(path)), path)


def write_diagnoses(lake: Lake, today: date) -> None:
    from acme.diagnosis.records import DiagnosisRecord, write_records

    found = [
        ("102", days_ago(5, today), "ECCError", "Infrastructure", "infrastructure"),
        ("103", days_ago(4, today), "ValueError", "Framework", "user"),
        ("104", days_ago(3, today), "NCCLTimeoutError", "Infrastructure", "infrastructure"),
    ]
    write_records(
        lake,
        [
            DiagnosisRecord("seren", job, day, reason, category, who, 0.9, "rule")
            for job, day, reason, category, who in found
        ],
    )


def simulated_jobs_file(folder: Path) -> Path:
    path = folder / "simulated_jobs.yaml"
    path.write_text(f"clusters:\n  seren:\n    '104': {{nodes: {NODES}, faulty: [gpu03]}}\n")
    return path


def write_localization(lake: Lake, folder: Path) -> None:
    """A live recovery of job 104 on the simulated cluster: the two-round check finds gpu03 and cordons it."""
    from acme.recovery.backend import SimulatedBackend
    from acme.recovery.recover import RecoveryRequest
    from acme.recovery.synth_checkpoints import write_checkpoint
    from acme.settings import recovery as recovery_settings
    from tests.recovery_support import recover

    checkpoints = folder / "ckpt"
    write_checkpoint(checkpoints, 100)
    values = {"cluster": "seren", "job_id": "104", "nodes": NODES, "checkpoint_uri": str(checkpoints)}
    request = RecoveryRequest.from_params(values, "r1", "manual__1", datetime.now(UTC))
    backend = SimulatedBackend("seren", simulated_jobs_file(folder), lake)
    outcome = recover(lake, request, backend, recovery_settings())
    assert outcome["verdict"]["faulty"] == ["gpu03"], outcome["verdict"]


def write_xids(lake: Lake, today: date) -> None:
    """Xid 79 on gpu03 (GPU 2) and Xid 13 on gpu06 (GPU 0) two days ago, through the metrics' publisher."""
    import numpy as np

    from acme.metrics.catalog import load_catalog
    from acme.metrics.storage import Samples, day_start_ms, publish_day, series_frame

    day = days_ago(2, today)
    start = day_start_ms(day)
    steps = np.arange(0, 86_400_000, 60_000, dtype=np.int64)  # one sample a minute, the whole day
    series = series_frame([("gpu03", 2, "GPU-a", "NVIDIA A100"), ("gpu06", 0, "GPU-b", "NVIDIA A100")])
    values = np.zeros((2, len(steps)))
    values[0, 600:] = 79  # from 10:00 on, as dcgm-exporter keeps the last Xid
    values[1, 300:] = 13
    samples = Samples(
        "xid_errors",
        series,
        np.repeat(np.arange(2, dtype=np.int32), len(steps)),
        np.tile(start + steps, 2),
        values.reshape(-1),
    )
    publish_day(lake, load_catalog()["xid_errors"], "seren", day, samples)


def write_history(lake: Lake, folder: Path) -> date:
    """The history as of today (UTC); returns that day."""
    today = datetime.now(UTC).date()
    write_jobs(lake, folder, today)
    write_diagnoses(lake, today)
    write_localization(lake, folder)
    write_xids(lake, today)
    return today
