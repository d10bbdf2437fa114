"""Which recovery backend runs a recovery: ``ACME_RECOVERY_BACKEND`` names one of ``BACKENDS``.

The interface and the simulated cluster are in ``acme.recovery.backend``; the real backends import that
module, so the choice between them lives here, apart from it (no import circle). A new backend is one
module implementing ``RecoveryBackend`` and one entry of ``BACKENDS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.recovery.backend import RecoveryBackend
    from acme.settings import RecoverySettings


def _simulated(settings: RecoverySettings, cluster: str, lake: Lake, job_id, nodes, kube_client) -> Any:
    from acme.recovery.backend import SimulatedBackend

    return SimulatedBackend(cluster, settings.simulated_jobs_file, lake, job_id, nodes)


def _kubernetes(settings: RecoverySettings, cluster: str, lake: Lake, job_id, nodes, kube_client) -> Any:
    from acme.recovery.kubernetes_backend import KubernetesBackend

    return KubernetesBackend(settings, kube_client)


def _slurm(settings: RecoverySettings, cluster: str, lake: Lake, job_id, nodes, kube_client) -> Any:
    from acme.recovery.slurm_backend import SlurmBackend

    return SlurmBackend(settings)


# The values of ``ACME_RECOVERY_BACKEND`` (``settings.RECOVERY_BACKENDS``, which checks the name, lists the same).
BACKENDS: dict[str, Callable[..., Any]] = {
    "simulated": _simulated,
    "kubernetes": _kubernetes,
    "slurm": _slurm,
}


def make_backend(
    cluster: str,
    lake: Lake,
    job_id: str | None = None,
    kube_client: Any = None,
    nodes: Sequence[str] | None = None,
) -> RecoveryBackend:
    """The configured backend (``ACME_RECOVERY_BACKEND``) for ``cluster`` (and the job being recovered;
    ``nodes``, the request's, let the simulated cluster stand in for a job its file does not list).

    ``kube_client`` is a ``kubernetes.client.CoreV1Api`` (inside Airflow, from the Kubernetes
    connection); without one the Kubernetes backend loads the default kubeconfig.
    """
    from acme.settings import recovery as recovery_settings

    settings = recovery_settings()
    return BACKENDS[settings.backend](settings, cluster, lake, job_id, nodes, kube_client)
