"""Test helpers of the checkpoint recovery: code that only tests used, moved out of ``acme.recovery`` (issue 18).

``recover`` (every step of a recovery in one process, worlds one after another: the DAG runs the steps
as tasks instead, from ``recover``), ``manual_request`` and ``simulated_jobs_file`` (a request on the
simulated backend's jobs, as the unit tests build them), ``torchrun_command`` (how a test starts one node of a check world
with torchrun: the backends launch the check with ``srun`` or a pod, from ``allgather_check``) and
``write_metrics`` (a training run's metrics file with a loss spike, from ``synth_checkpoints``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from acme.errors import InputError
from acme.lake import Lake
from acme.recovery import allgather_check
from acme.recovery.approval import APPROVED, AWAITING, record_approval
from acme.recovery.backend import RecoveryBackend
from acme.recovery.recover import (
    RecoveryRequest,
    action_log,
    check_world,
    close_recovery,
    finish_recovery,
    open_recovery,
    plan_second_round,
    restart_after_approval,
)
from acme.settings import RecoverySettings

STARTED = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)


def simulated_jobs_file(folder: Path, jobs: dict[str, dict[str, list[str]]], cluster: str = "seren") -> Path:
    """The simulated backend's jobs file: job id -> ``{"nodes": [...], "faulty": [...]}``."""
    path = folder / "jobs.yaml"
    path.write_text(json.dumps({"clusters": {cluster: jobs}}))  # JSON is YAML
    return path


def manual_request(
    checkpoints: Path, job: str, nodes: Sequence[str] | None, recovery_id: str = "r1", **params: Any
) -> RecoveryRequest:
    """A recovery of ``job`` on seren started by hand (run ``manual__1``) from the checkpoints in ``checkpoints``."""
    values = {
        "cluster": "seren",
        "job_id": job,
        "nodes": nodes,  # as given: the tests of bad input pass None or a string
        "checkpoint_uri": str(checkpoints),
        **params,
    }
    return RecoveryRequest.from_params(values, recovery_id, "manual__1", STARTED)


def recover(
    lake: Lake,
    request: RecoveryRequest,
    backend: RecoveryBackend,
    settings: RecoverySettings,
    answer: str | None = APPROVED,
    by: str = "test-operator",
) -> dict[str, Any]:
    """Every step in order, worlds of a round one after another; the marker is released whatever happens.

    A live recovery that asks for approval gets ``answer`` (``approved``, ``rejected``, ``timed_out``; None:
    nobody answers, and the recovery is left awaiting) recorded as the form would, then goes on."""
    opened = open_recovery(lake, request, backend, settings)
    try:
        round1 = [check_world(lake, request, backend, w, 1) for w in opened["round1"]]
        round2 = [check_world(lake, request, backend, w, 2) for w in plan_second_round(request, round1)]
        finished = finish_recovery(lake, request, backend, opened, round1, round2, settings)
        if not finished["awaiting_approval"] or answer is None:
            return finished
        log = action_log(lake, request)
        record_approval(log, AWAITING, "", finished["approval"]["why"], finished["approval"]["plan"])
        record_approval(log, answer, by, f"{answer} by the test", finished["approval"]["plan"])
        return restart_after_approval(lake, request, backend, opened, finished, settings)
    finally:
        close_recovery(lake, request)


def torchrun_command(
    node_rank: int,
    world_size: int,
    rdzv_endpoint: str,
    check_args: Sequence[str] = (),
    script: str = allgather_check.__file__,
) -> list[str]:
    """The command that runs the check on node ``node_rank`` of a world of ``world_size`` nodes."""
    if not 0 <= node_rank < world_size:
        raise InputError("torchrun_command", f"node rank {node_rank} is outside a world of {world_size}")
    if ":" not in rdzv_endpoint:
        raise InputError("torchrun_command", f"rendezvous endpoint {rdzv_endpoint!r} is not HOST:PORT")
    return [
        "torchrun",
        f"--nnodes={world_size}",
        "--nproc-per-node=1",
        f"--node-rank={node_rank}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={rdzv_endpoint}",
        "--max-restarts=0",
        script,
        *check_args,
    ]


def write_metrics(root: Path, steps: int, spike_at: int | None = None) -> Path:
    """``root/metrics.jsonl``: a loss slowly falling from 3.0, jumping 3x at ``spike_at``."""
    lines = []
    for step in range(1, steps + 1):
        loss = 3.0 - step * 0.001
        if spike_at is not None and step >= spike_at:
            loss *= 3
        lines.append(json.dumps({"step": step, "loss": loss}))
    path = root / "metrics.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path
