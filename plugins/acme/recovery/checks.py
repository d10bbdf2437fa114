"""How a recovery runs the all-gather check on one world, whatever the backend, so that the DAG's check
task is a few lines: ``world_checker(...).check(lake, request, world, round_number)``.

- ``BackendChecker``: the backend runs the world (``simulated``; ``slurm``: one ``srun -w``), and every
  dry run on any backend (it only records the plan): ``acme.recovery.recover.check_world``.
- ``PodChecker``: on Kubernetes a world is one GPU pod per rank, started together by a *pod launcher*
  the caller provides (inside Airflow, ``acme_airflow.check_pods.run_world_as_pods`` with the task's
  context); the result is recorded like any other world, and a re-run reuses a recorded result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from acme.recovery.recover import check_world, earlier_check, record_world

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.recovery.backend import RecoveryBackend
    from acme.recovery.localize import WorldResult
    from acme.recovery.recover import RecoveryRequest
    from acme.settings import RecoverySettings

PodLauncher = Callable[[Sequence[str], int, str, dict[str, str]], "tuple[WorldResult, list[dict[str, Any]]]"]
"""Runs one world as pods: ``(world, round_number, check_id, job_labels) -> (result, pods)``."""


class WorldChecker(Protocol):
    """Checks one world of a recovery and returns its recorded result (a dict of ``WorldResult``)."""

    def check(
        self, lake: Lake, request: RecoveryRequest, world: Sequence[str], round_number: int
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class BackendChecker:
    backend: Callable[[], RecoveryBackend]  # made when a check runs (a client connects then)

    def check(
        self, lake: Lake, request: RecoveryRequest, world: Sequence[str], round_number: int
    ) -> dict[str, Any]:
        return check_world(lake, request, self.backend(), world, round_number)


@dataclass(frozen=True)
class PodChecker:
    launch: PodLauncher

    def check(
        self, lake: Lake, request: RecoveryRequest, world: Sequence[str], round_number: int
    ) -> dict[str, Any]:
        earlier = earlier_check(lake, request, world, round_number)
        if earlier is not None:
            return earlier
        labels = {"acme.io/job": request.job_id, "acme.io/recovery": request.check_id}
        result, pods = self.launch(list(world), round_number, request.check_id, labels)
        return record_world(lake, request, result, round_number, {"backend": "kubernetes", "pods": pods})


def world_checker(
    settings: RecoverySettings,
    request: RecoveryRequest,
    backend: Callable[[], RecoveryBackend],
    launch_pods: PodLauncher | None = None,
) -> WorldChecker:
    """The checker for the configured backend (``ACME_RECOVERY_BACKEND``): pods on Kubernetes for a live
    recovery (``launch_pods`` is then required), the backend itself otherwise."""
    from acme.errors import ConfigError

    if settings.backend == "kubernetes" and not request.dry_run:
        if launch_pods is None:
            raise ConfigError("ACME_RECOVERY_BACKEND=kubernetes runs checks as pods: give a pod launcher")
        return PodChecker(launch_pods)
    return BackendChecker(backend)
