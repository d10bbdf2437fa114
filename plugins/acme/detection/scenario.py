"""Synthesized scenarios for hang and fail-slow detection, used by its tests, the ``detect_hangs`` DAG test and
``benchmarks/bench_detect_hangs.py``.

* :func:`storage_writes`: what each node of a synthesized cluster (``acme.metrics.synth.SynthCluster``)
  writes to the shared file system (the ``storage_write`` metric), from its jobs and episodes: a training
  node's background writes (logs, metrics: ``BACKGROUND_BPS``) while a job runs, a checkpoint shard's rate
  (``CHECKPOINT_BPS``) in ``checkpoint`` episodes -- the slow writer of a barrier wait too --, and only the
  background once a ``hang`` or ``stall`` begins (a hung job writes no checkpoint). Episodes apply in order,
  later ones win, as in ``acme.metrics.synth.apply_episodes``. The rates are assumptions (no public trace
  gives them per node); the reasoning is in ``acme.settings.DetectionSettings``.
* :func:`build_lake`: a lake holding one running Pretrain job (through the real sacct ingest) and a day of
  its synthesized telemetry (through the real AcmeTrace wide-CSV metrics ingest), storage writes included
  unless asked not to, with episodes injected.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from acme.metrics.synth import Episode, TrainingJob, node_names, synth_training_cluster

if TYPE_CHECKING:
    import numpy as np

    from acme.metrics.synth import SynthCluster

DAY = date(2024, 3, 10)
STEP_S = 15
NODES = 4
JOB_ID = "8200"
DETECT_METRICS = ["sm_active", "tensor_active", "gpu_util", "ib_tx", "ib_rx"]
IDLE_BPS = (0.0, 2e4)  # a node without a job
BACKGROUND_BPS = (2e4, 1e6)  # a training node's own writes: logs, metrics, small files
CHECKPOINT_BPS = (5e7, 8e8)  # a node writing its checkpoint shard (GBs in minutes) to the shared file system


def storage_writes(synth: SynthCluster, jobs: list[TrainingJob], seed: int = 0) -> np.ndarray:
    """(nodes, steps) B/s written to the shared file system by each node (see the module doc)."""
    import numpy as np

    rng = np.random.default_rng([seed, 19, 7])
    steps = synth.steps
    values = rng.uniform(*IDLE_BPS, size=(len(synth.nodes), steps))

    def fill(rows: list[int], start: int, end: int, low_high: tuple[float, float], level: bool) -> None:
        span = slice(max(0, start), min(steps, end))
        width = span.stop - span.start
        if width <= 0:
            return
        if level:  # one rate per node and episode, wobbling around it
            base = rng.uniform(*low_high, size=(len(rows), 1))
            values[rows, span] = base * rng.uniform(0.7, 1.3, size=(len(rows), width))
        else:
            values[rows, span] = rng.uniform(*low_high, size=(len(rows), width))

    for job in jobs:
        fill(list(job.node_indices), job.start_step, job.end_step, BACKGROUND_BPS, False)
    for episode in synth.episodes:
        if episode.kind == "checkpoint":
            fill(list(episode.nodes), episode.start_step, episode.end_step, CHECKPOINT_BPS, True)
        elif episode.kind in ("hang", "stall"):
            fill(list(episode.nodes), episode.start_step, episode.end_step, BACKGROUND_BPS, False)
    return np.round(values / 1000) * 1000  # the catalog's precision


def write_storage_csv(synth: SynthCluster, values: np.ndarray, folder: Path) -> Path:
    """``storage_write.csv`` in the AcmeTrace wide-CSV layout (``Time`` in +08:00, one column per node)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from acme.metrics.synth import local_time_strings

    folder.mkdir(parents=True, exist_ok=True)
    arrays = [pa.array(local_time_strings(synth.ts_ms()))] + [pa.array(row.astype("int64")) for row in values]
    table = pa.Table.from_arrays(arrays, names=["Time", *synth.nodes])
    path = folder / "storage_write.csv"
    with open(path, "wb") as handle:  # a plain header and unquoted times, like the release
        handle.write((",".join(table.column_names) + "\n").encode())
        pacsv.write_csv(table, handle, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return path


def sacct_running(nodes: list[str], job_id: str = JOB_ID) -> str:
    prefix = nodes[0].rsplit("-", 1)[0]
    hostlist = f"{prefix}-[{nodes[0].rsplit('-', 1)[1]}-{nodes[-1].rsplit('-', 1)[1]}]"
    gpus = 8 * len(nodes)
    return (
        "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|AllocTRES|ReqTRES|ExitCode\n"
        f"{job_id}|llama-123b-pretrain|alice|gpu|RUNNING|2024-03-10T00:00:00|2024-03-10T00:05:00|Unknown|"
        f"23:00:00|{len(nodes)}|{16 * len(nodes)}|{hostlist}|billing={gpus},cpu={16 * len(nodes)},gres/gpu={gpus},"
        f"node={len(nodes)}|billing={gpus},cpu={16 * len(nodes)},gres/gpu={gpus},node={len(nodes)}|0:0\n"
    )


def build_lake(
    lake_dir: Path, tmp_path: Path, episodes: list[Episode], cluster: str = "seren", storage: bool = True
) -> list[str]:
    """Ingest the job and its telemetry into ``lake_dir`` (``storage``: with its nodes' storage writes);
    the job's nodes."""
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake
    from acme.metrics.ingest import ingest_metrics_file
    from acme.metrics.synth import write_acmetrace_csv

    lake = Lake(str(lake_dir))
    nodes = node_names(cluster, NODES)
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(sacct_running(nodes))
    ingest_job_file(lake, JobInput(cluster, "sacct", str(sacct)), sacct)
    steps = 86400 // STEP_S
    job = TrainingJob(JOB_ID, 0, NODES, 20, steps)  # started 00:05
    synth = synth_training_cluster(cluster, NODES, DAY, 1, [job], episodes, seed=7, step_s=STEP_S)
    folder = tmp_path / "metrics"
    write_acmetrace_csv(synth, DETECT_METRICS, folder)
    if storage:
        write_storage_csv(synth, storage_writes(synth, [job], seed=7), folder)
    else:
        (folder / "storage_write.csv").unlink(missing_ok=True)
    ingest_metrics_file(lake, "acmetrace-csv", cluster, str(folder), DAY, step_s=STEP_S)
    return nodes


def step_of(hour: int, minute: int = 0) -> int:
    return (hour * 3600 + minute * 60) // STEP_S
