"""What the recover_training tasks share: the request from the run, the backend, and the failure rules."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.recovery.backend import RecoveryBackend
    from acme.recovery.recover import RecoveryRequest


def request_from_context(context: Any, lake_uri: str | None = None) -> RecoveryRequest:
    """The checked request: the run's Params (or the diagnosis DAG's conf), keyed on ``recovery_id``
    (default the run id); no ``checkpoint_uri`` means ``ACME_CHECKPOINT_URI_PATTERN`` (``{lake}`` is
    ``lake_uri``)."""
    from acme.recovery.actions import checked_name, recovery_id_from_run
    from acme.recovery.recover import RecoveryRequest
    from acme.recovery.settings import checkpoint_uri_for

    params = context["params"]
    run_id = context["run_id"]
    recovery_id = params.get("recovery_id") or recovery_id_from_run(run_id)
    default_checkpoint = None
    if lake_uri and not (params.get("checkpoint_uri") or "").strip():
        cluster = checked_name(params.get("cluster"), "cluster")
        default_checkpoint = checkpoint_uri_for(
            cluster, checked_name(str(params.get("job_id") or ""), "job_id"), lake_uri
        )
    return RecoveryRequest.from_params(
        params, recovery_id, run_id, context["dag_run"].run_after, default_checkpoint=default_checkpoint
    )


def task_backend(cluster: str, lake: Lake, job_id: str, nodes: Any = None) -> RecoveryBackend:
    """The configured backend; on Kubernetes its client comes from the Airflow connection."""
    from acme.recovery.backend import make_backend
    from acme.recovery.settings import recovery_settings

    settings = recovery_settings()
    client = None
    if settings.backend == "kubernetes":
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

        client = KubernetesHook(conn_id=settings.kubernetes_conn_id).core_v1_client
    return make_backend(cluster, lake, job_id, kube_client=client, nodes=nodes)


@contextlib.contextmanager
def recovery_failures() -> Iterator[None]:
    """A person is needed, or the input is wrong: fail at once with the reason (a retry cannot help).

    Errors of the cluster's API or commands keep the task's retries: they are often transient, and
    every step is idempotent.
    """
    from airflow.sdk.exceptions import AirflowFailException

    from acme.errors import ConfigError, InputError
    from acme.recovery.actions import RecoveryInProgressError
    from acme.recovery.recover import NeedsPersonError

    try:
        yield
    except NeedsPersonError as exc:
        raise AirflowFailException(str(exc)) from exc
    except (InputError, ConfigError, RecoveryInProgressError) as exc:
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc
