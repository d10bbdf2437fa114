"""What the recover_training tasks share: the request from the run, the backend, and the failure rules."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.recovery.backend import RecoveryBackend
    from acme.recovery.request import RecoveryRequest


def request_from_context(context: Any, lake: Lake) -> RecoveryRequest:
    """The checked request of the running recover_training run (``acme.recovery.recover.request_from_run``:
    a request that cannot be made is recorded in the action log, then raised)."""
    from acme.recovery.recover import request_from_run

    return request_from_run(lake, context["params"], context["run_id"], context["dag_run"].run_after)


def task_backend(cluster: str, lake: Lake, job_id: str | None, nodes: Any = None) -> RecoveryBackend:
    """The configured backend; on Kubernetes its client comes from the Airflow connection."""
    from acme.recovery.backends import make_backend
    from acme.settings import recovery as recovery_settings

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


def open_in_task(context: Any) -> list[list[str]]:
    """``open_recovery``'s body: the request from the run, the job checked with the cluster, the marker
    held; pushes the opened recovery as the XCom ``opened`` and returns the round-1 worlds."""
    from acme.recovery.recover import open_recovery
    from acme.settings import recovery as recovery_settings
    from acme_airflow.tasks import lake_task

    with recovery_failures(), lake_task() as lake:
        request = request_from_context(context, lake)
        backend = task_backend(request.cluster, lake, request.job_id, request.nodes)
        opened = open_recovery(lake, request, backend, recovery_settings())
    context["ti"].xcom_push(key="opened", value=opened)
    return opened["round1"]


def check_in_task(opened: dict[str, Any], world: list[str], round_number: int) -> dict[str, Any]:
    """Check one world from a running task: the configured backend, or (live, on Kubernetes) one pod per
    rank through the task's context (``acme.recovery.checks``)."""
    from airflow.sdk import get_current_context

    from acme.recovery.checks import world_checker
    from acme.recovery.request import opened_request
    from acme.settings import recovery as recovery_settings
    from acme_airflow.tasks import lake_task

    request = opened_request(opened)
    with recovery_failures(), lake_task() as lake:
        settings = recovery_settings()

        def launch_pods(world: Any, round_number: int, check_id: str, labels: dict[str, str]) -> Any:
            from acme_airflow.check_pods import run_world_as_pods

            return run_world_as_pods(world, round_number, check_id, settings, get_current_context(), labels)

        def backend() -> RecoveryBackend:
            return task_backend(request.cluster, lake, request.job_id, request.nodes)

        return world_checker(settings, request, backend, launch_pods).check(
            lake, request, world, round_number
        )


def finish_in_task(
    opened: dict[str, Any], round1: list[dict[str, Any]], round2: list[dict[str, Any]]
) -> dict[str, Any]:
    """``decide_and_restart``'s body (``acme.recovery.recover.finish_recovery``)."""
    from acme.recovery.recover import finish_recovery
    from acme.recovery.request import opened_request
    from acme.settings import recovery as recovery_settings
    from acme_airflow.tasks import lake_task

    request = opened_request(opened)
    with recovery_failures(), lake_task() as lake:
        backend = task_backend(request.cluster, lake, request.job_id, request.nodes)
        return finish_recovery(lake, request, backend, opened, round1, round2, recovery_settings())


def plan_in_task(opened: dict[str, Any], round1: list[dict[str, Any]]) -> list[list[str]]:
    """``plan_round2``'s body: the round-2 worlds from round 1's results."""
    from acme.recovery.recover import plan_second_round
    from acme.recovery.request import opened_request

    return plan_second_round(opened_request(opened), round1)


def release_in_task(opened: dict[str, Any] | None) -> bool:
    """``release``'s body: the job's recovery marker released (nothing to release when the recovery never
    opened: bad Params)."""
    from acme.recovery.recover import close_recovery
    from acme.recovery.request import opened_request
    from acme_airflow.tasks import lake_task

    if opened is None:
        return False
    with lake_task() as lake:
        return close_recovery(lake, opened_request(opened))


def restart_in_task(opened: dict[str, Any], finished: dict[str, Any]) -> dict[str, Any]:
    """``restart_approved``'s body: after the approval question, take out and restart when approved, else
    record the plan (``acme.recovery.recover.restart_after_approval``)."""
    from acme.recovery.recover import restart_after_approval
    from acme.recovery.request import opened_request
    from acme.settings import recovery as recovery_settings
    from acme_airflow.tasks import lake_task

    request = opened_request(opened)
    with recovery_failures(), lake_task() as lake:
        backend = task_backend(request.cluster, lake, request.job_id, request.nodes)
        return restart_after_approval(lake, request, backend, opened, finished, recovery_settings())
