"""A lake holding one running Pretrain job (through the real sacct ingest) and a day of its synthesized
telemetry (through the real AcmeTrace wide-CSV metrics ingest), with episodes injected: what the detection
tests and the ``detect_hangs`` DAG test read."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from acme.metrics.synth import Episode, TrainingJob, node_names, synth_training_cluster

DAY = date(2024, 3, 10)
STEP_S = 15
NODES = 4
JOB_ID = "8200"
DETECT_METRICS = ["sm_active", "tensor_active", "gpu_util", "ib_tx", "ib_rx"]


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


def build_lake(lake_dir: Path, tmp_path: Path, episodes: list[Episode], cluster: str = "seren") -> list[str]:
    """Ingest the job and its telemetry into ``lake_dir``; the job's nodes."""
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
    ingest_metrics_file(lake, "acmetrace-csv", cluster, str(folder), DAY, step_s=STEP_S)
    return nodes


def step_of(hour: int, minute: int = 0) -> int:
    return (hour * 3600 + minute * 60) // STEP_S
