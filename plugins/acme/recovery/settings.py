"""Recovery settings from environment variables, with defaults that run offline.

Kept beside the recovery code rather than in ``acme.config`` so the recovery feature can be read in
one place; every value is read when asked for (never at import), so tests and tasks see the current
environment. The default backend is ``simulated``: the demo and the tests run with no cluster.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from acme import config
from acme.config import env as _env
from acme.config import env_number
from acme.errors import ConfigError

BACKENDS = ("simulated", "kubernetes", "slurm")

_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _positive(name: str, default: str, kind: type = int) -> int | float:
    return env_number(name, default, above=0, integer=kind is int)


@dataclass(frozen=True)
class RecoverySettings:
    """Everything recovery reads from the environment, checked once."""

    backend: str
    namespace: str
    check_image: str
    gpus_per_node: int
    max_nodes: int
    max_share: float
    kubernetes_conn_id: str
    taint_key: str
    check_timeout_s: float
    check_args: tuple[str, ...]
    pod_startup_timeout_s: int
    simulated_jobs_file: Path
    slurm_command_prefix: tuple[str, ...]
    slurm_check_script: str
    slurm_partition: str | None
    slurm_python: str
    lock_ttl_s: float


def recovery_settings() -> RecoverySettings:
    """The current settings (``ACME_RECOVERY_*``); a ConfigError names the bad variable."""
    backend = _env("ACME_RECOVERY_BACKEND", "simulated").lower()
    if backend not in BACKENDS:
        raise ConfigError(f"ACME_RECOVERY_BACKEND={backend!r} must be one of {', '.join(BACKENDS)}")
    namespace = _env("ACME_RECOVERY_NAMESPACE", "training")
    if not _K8S_NAME.match(namespace):
        raise ConfigError(f"ACME_RECOVERY_NAMESPACE={namespace!r} is not a Kubernetes namespace name")
    max_share_raw = _env("ACME_RECOVERY_MAX_SHARE", "0.05")
    try:
        max_share = float(max_share_raw)
    except ValueError:
        raise ConfigError(f"ACME_RECOVERY_MAX_SHARE={max_share_raw!r} is not a number") from None
    max_nodes_raw = _env("ACME_RECOVERY_MAX_NODES", "2")
    if not max_nodes_raw.isdigit():
        raise ConfigError(f"ACME_RECOVERY_MAX_NODES={max_nodes_raw!r} must be a whole number >= 0")
    prefix = _env("ACME_RECOVERY_SLURM_COMMAND_PREFIX", "")
    return RecoverySettings(
        backend=backend,
        namespace=namespace,
        # The image must hold torch and acme/recovery/allgather_check.py (it runs alone too).
        check_image=_env("ACME_RECOVERY_CHECK_IMAGE", "ghcr.io/acme/allgather-check:torch2.13-cu12"),
        gpus_per_node=int(_positive("ACME_RECOVERY_GPUS_PER_NODE", "8")),
        max_nodes=int(max_nodes_raw),
        max_share=max_share,
        kubernetes_conn_id=_env("ACME_RECOVERY_KUBERNETES_CONN_ID", "kubernetes_default"),
        taint_key=_env("ACME_RECOVERY_TAINT_KEY", "acme.io/faulty"),
        check_timeout_s=float(_positive("ACME_RECOVERY_CHECK_TIMEOUT_S", "60", float)),
        # More arguments for the check program, e.g. "--allgather-mb 64 --matmul-size 8192" (split on spaces).
        check_args=tuple(_env("ACME_RECOVERY_CHECK_ARGS", "").split()),
        pod_startup_timeout_s=int(_positive("ACME_RECOVERY_POD_STARTUP_TIMEOUT_S", "300")),
        simulated_jobs_file=Path(
            _env(
                "ACME_RECOVERY_SIMULATED_JOBS",
                str(config.include_dir() / "recovery" / "simulated_jobs.yaml"),
            )
        ),
        # e.g. "ssh slurm-login" to run srun/sbatch/scontrol on a login node (split on spaces, no shell).
        slurm_command_prefix=tuple(prefix.split()),
        slurm_check_script=_env(
            "ACME_RECOVERY_SLURM_CHECK_SCRIPT", str(Path(__file__).with_name("allgather_check.py"))
        ),
        slurm_partition=os.environ.get("ACME_RECOVERY_SLURM_PARTITION", "").strip() or None,
        # The Python with torch on the nodes (a path the nodes share, e.g. a venv on NFS).
        slurm_python=_env("ACME_RECOVERY_SLURM_PYTHON", "python3"),
        lock_ttl_s=float(_positive("ACME_RECOVERY_LOCK_TTL_S", "7200", float)),
    )


DEFAULT_CHECKPOINT_URI_PATTERN = "{lake}/checkpoints/cluster={cluster}/job={job_id}"


def dry_run_default() -> bool:
    """Whether a recovery is a dry run unless its run says otherwise (``ACME_RECOVERY_DRY_RUN``, default
    true): the one setting for both the diagnosis' recovery requests and ``recover_training``'s Param
    default. ``false`` makes both live (cordons and restarts)."""
    raw = _env("ACME_RECOVERY_DRY_RUN", "true").lower()
    if raw not in ("1", "true", "yes", "0", "false", "no"):
        raise ConfigError(f"ACME_RECOVERY_DRY_RUN={raw!r} must be true or false")
    return raw in ("1", "true", "yes")


def checkpoint_uri_pattern() -> str:
    """Where a job's checkpoints are when its run gives no ``checkpoint_uri``, its job record none and its
    cluster's entry in ``include/config/clusters.yaml`` no ``checkpoint_uri_pattern``
    (``ACME_CHECKPOINT_URI_PATTERN``, default ``{lake}/checkpoints/cluster={cluster}/job={job_id}``;
    e.g. ``s3://ckpt/{cluster}/{job_id}``). Placeholders: ``{lake}``, ``{cluster}``, ``{job_id}``."""
    from acme.clusters import checked_checkpoint_pattern

    pattern = _env("ACME_CHECKPOINT_URI_PATTERN", DEFAULT_CHECKPOINT_URI_PATTERN)
    return checked_checkpoint_pattern(pattern, "ACME_CHECKPOINT_URI_PATTERN")


def checkpoint_uri_for(cluster: str, job_id: str, lake_uri: str) -> str:
    """The checkpoint location of a job by ``ACME_CHECKPOINT_URI_PATTERN``."""
    return checkpoint_uri_pattern().format(lake=lake_uri.rstrip("/"), cluster=cluster, job_id=job_id)
