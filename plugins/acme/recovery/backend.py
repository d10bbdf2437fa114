"""What recovery needs from a cluster, and the simulated cluster the demo and the tests run on.

A backend answers five things: which nodes a job ran on (``describe_job``; an unknown job is an
``UnknownJobError``), the check of one world (``run_world``), which nodes are already out of
scheduling (``cordoned``), taking a node out (``cordon``) and resubmitting the job (``restart``);
and two for the validation of a cordoned node before it rejoins (``acme.recovery.validation``):
running the node's self-test and DCGM diagnostic (``run_validation``, ``acme.recovery.node_selftest``)
and returning it to scheduling (``uncordon``).
``acme.recovery.kubernetes_backend`` and ``acme.recovery.slurm_backend`` are the real ones; on
Kubernetes the check worlds run as pods through ``acme_airflow.gpu_pod`` instead of ``run_world``.

The simulated backend reads its jobs from ``include/recovery/simulated_jobs.yaml``
(``ACME_RECOVERY_SIMULATED_JOBS``)::

    clusters:
      <cluster>:
        <job_id>: {nodes: [...], faulty: [...], stragglers: [...], seed: 0}

and answers checks through ``localize.SimulatedCluster``. A job the file does not list (any failed
job the diagnosis routes on a fresh install) is simulated on the nodes the request names, all healthy,
so the offline chain still reaches a restart; the file is where simulated faults are set. A cordoned node
passes its simulated validation unless ``ACME_VALIDATION_SIMULATED_FAULTS`` names it (with the check it
fails). Its cordons, uncordons and resubmissions are kept in
the lake (``recovery/simulated/cluster=<c>/state.json``), so a demo run shows what a real cluster
would have been asked to do and a second run sees the first one's cordons.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from acme import lake_keys
from acme.errors import ConfigError, InputError
from acme.recovery.localize import SimulatedCluster, WorldResult
from acme.recovery.node_selftest import (
    NodeMeasurements,
    ValidationSpec,
    read_node_output,
    simulated_node_output,
)

if TYPE_CHECKING:
    from acme.lake import Lake


class UnknownJobError(InputError):
    """The cluster does not know the job (never ran there, or its records are gone)."""


@dataclass(frozen=True)
class JobInfo:
    """A job as the cluster knows it: its nodes and what the backend needs to resubmit it."""

    job_id: str
    nodes: tuple[str, ...]
    spec: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RestartPlan:
    """How the job restarts: from which checkpoint, skipping which batches, on which nodes not."""

    recovery_id: str
    resume_from: str
    resume_step: int
    skip_batches: tuple[tuple[int, int], ...]
    exclude_nodes: tuple[str, ...]

    def skip_batches_text(self) -> str:
        """``first-last,first-last`` (empty when nothing is skipped), as the training script reads it."""
        return ",".join(f"{first}-{last}" for first, last in self.skip_batches)

    def environment(self) -> dict[str, str]:
        """The variables the training script reads to resume (same names on every backend)."""
        return {
            "ACME_RESUME_FROM": self.resume_from,
            "ACME_RESUME_STEP": str(self.resume_step),
            "ACME_SKIP_BATCHES": self.skip_batches_text(),
            "ACME_RECOVERY_ID": self.recovery_id,
        }


class RecoveryBackend(Protocol):
    name: str

    def describe_job(self, job_id: str) -> JobInfo: ...

    def run_world(self, world: list[str], round_number: int, check_id: str) -> WorldResult: ...

    def cordoned(self, nodes: Sequence[str]) -> set[str]: ...

    def cordon(self, node: str, reason: str) -> dict[str, Any]: ...

    def restart(self, job: JobInfo, plan: RestartPlan) -> dict[str, Any]: ...

    # Validation of a cordoned node before it rejoins (acme.recovery.validation).
    def run_validation(self, node: str, spec: ValidationSpec) -> NodeMeasurements: ...

    def uncordon(self, node: str, reason: str) -> dict[str, Any]: ...


class SimulatedBackend:
    """A cluster from the simulated-jobs file; cordons and restarts are recorded in the lake."""

    name = "simulated"

    def __init__(
        self,
        cluster: str,
        jobs_file: Path,
        lake: Lake,
        job_id: str | None = None,
        nodes: Sequence[str] | None = None,
    ):
        self.cluster = cluster
        self.job_id = job_id  # whose nodes answer the checks (a node may appear in several test jobs)
        self.jobs_file = Path(jobs_file)
        self.lake = lake
        self.state_key = lake_keys.simulated_backend_state(cluster)
        self._jobs = dict(_load_simulated_jobs(self.jobs_file).get(cluster) or {})
        if job_id and job_id not in self._jobs and nodes:
            # Not in the file: the job the request describes, on its nodes, with no simulated fault.
            self._jobs[job_id] = {"nodes": list(nodes), "faulty": [], "stragglers": [], "seed": 0,
                                  "from_request": True}  # fmt: skip

    def describe_job(self, job_id: str) -> JobInfo:
        settings = self._jobs.get(job_id)
        if settings is None:
            raise UnknownJobError(
                f"job {job_id}",
                f"not a job of simulated cluster {self.cluster} ({self.jobs_file}), and no node list given",
            )
        return JobInfo(job_id, tuple(settings["nodes"]), {"simulated": settings})

    def _simulated(self, world: Sequence[str]) -> SimulatedCluster:
        jobs = [self._jobs[self.job_id]] if self.job_id in self._jobs else list(self._jobs.values())
        for settings in jobs:
            if set(world) <= set(settings["nodes"]):
                return SimulatedCluster(
                    settings["nodes"], settings.get("faulty", ()), settings.get("stragglers", ()),
                    seed=int(settings.get("seed", 0)),
                )  # fmt: skip
        raise InputError("world", f"nodes {list(world)} are not all nodes of one simulated job")

    def run_world(self, world: list[str], round_number: int, check_id: str) -> WorldResult:
        return self._simulated(world).run_world(list(world), round_number)

    def _state(self) -> dict[str, Any]:
        return self.lake.read_json(self.state_key, default=None) or {"cordoned": {}, "submitted": []}

    def cordoned(self, nodes: Sequence[str]) -> set[str]:
        return set(nodes) & set(self._state()["cordoned"])

    def cordon(self, node: str, reason: str) -> dict[str, Any]:
        with self.lake.lock(f"recovery-simulated-{self.cluster}", timeout_s=60):
            state = self._state()
            already = node in state["cordoned"]
            state["cordoned"].setdefault(node, reason)
            self.lake.write_json(self.state_key, state)
        return {"node": node, "already_cordoned": already, "backend": self.name}

    def run_validation(self, node: str, spec: ValidationSpec) -> NodeMeasurements:
        from acme.recovery.actions import utc_now
        from acme.settings import validation as validation_settings

        fault = validation_settings().simulated_faults.get(node)
        output = simulated_node_output(node, spec, fault, utc_now()[:19] + "Z")
        return read_node_output(output, node, self.name, spec.dcgm_level)

    def uncordon(self, node: str, reason: str) -> dict[str, Any]:
        with self.lake.lock(f"recovery-simulated-{self.cluster}", timeout_s=60):
            state = self._state()
            was = state["cordoned"].pop(node, None)
            if was is not None:
                state.setdefault("uncordoned", []).append(
                    {"node": node, "reason": reason, "cordoned_for": was}
                )
                self.lake.write_json(self.state_key, state)
        return {"node": node, "already_uncordoned": was is None, "backend": self.name}

    def restart(self, job: JobInfo, plan: RestartPlan) -> dict[str, Any]:
        with self.lake.lock(f"recovery-simulated-{self.cluster}", timeout_s=60):
            state = self._state()
            for earlier in state["submitted"]:
                # This recovery's restart went through but its worker died before logging it: not twice
                # (as on Slurm and Kubernetes, the recovery id marks the resubmitted job).
                if (
                    earlier["restart_of"] == job.job_id
                    and earlier.get("environment", {}).get("ACME_RECOVERY_ID") == plan.recovery_id
                ):
                    environment = earlier["environment"]
                    return {"new_job_id": earlier["job_id"], "backend": self.name, "environment": environment}
            new_id = f"{job.job_id}-r{len(state['submitted']) + 1}"
            nodes = [n for n in job.nodes if n not in set(plan.exclude_nodes)]
            state["submitted"].append(
                {"job_id": new_id, "restart_of": job.job_id, "nodes_excluded": list(plan.exclude_nodes),
                 "eligible_nodes": nodes, "environment": plan.environment()}
            )  # fmt: skip
            self.lake.write_json(self.state_key, state)
        return {"new_job_id": new_id, "backend": self.name, "environment": plan.environment()}


def _load_simulated_jobs(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    import yaml

    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"simulated jobs file {path}: cannot read: {exc}") from exc
    clusters = document.get("clusters")
    if not isinstance(clusters, dict):
        raise ConfigError(f"simulated jobs file {path}: 'clusters' must map cluster names to jobs")
    for cluster, jobs in clusters.items():
        if not isinstance(jobs, dict):
            raise ConfigError(f"simulated jobs file {path}: cluster {cluster!r} must map job ids to jobs")
        for job_id, settings in jobs.items():
            nodes = (settings or {}).get("nodes")
            if not isinstance(nodes, list) or not nodes:
                raise ConfigError(f"simulated jobs file {path}: job {job_id!r} needs a 'nodes' list")
    return {str(c): {str(j): s for j, s in jobs.items()} for c, jobs in clusters.items()}
