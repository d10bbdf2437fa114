"""One all-gather check world on Kubernetes: a ``CheckPodOperator`` pod per rank, all at once.

The ranks of a world must run at the same time (they rendezvous), so one Airflow task runs the whole
world: it starts one pod per node in threads and parses the ranks' logs into the world's result.
Called inside a running task (it needs the task's context for the pods' labels); imports the
Kubernetes provider only when called.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.recovery.localize import WorldResult
    from acme.settings import RecoverySettings


class _RankTaskInstance:
    """The task instance as a rank's pod operator sees it: it reads the ids, its XCom pushes are dropped.

    The pod operator pushes ``pod_name``/``pod_namespace``; with several pods per task those would
    overwrite each other, and the task-runner channel behind ``xcom_push`` is not meant for threads.
    The world task returns every pod's name instead.
    """

    def __init__(self, ti: Any):
        self._ti = ti

    def xcom_push(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ti, name)


def run_world_as_pods(
    world: Sequence[str],
    round_number: int,
    check_id: str,
    settings: RecoverySettings,
    context: Any,
    job_labels: dict[str, str] | None = None,
    **operator_overrides: Any,
) -> tuple[WorldResult, list[dict[str, Any]]]:
    """Run the check on ``world`` (one pod per node, concurrently); the world's result and each pod's outcome."""
    from acme.recovery.allgather_check import parse_check_output
    from acme.recovery.kubernetes_backend import check_pod_specs
    from acme_airflow.gpu_pod import CheckPodOperator

    pod_context = dict(context)
    pod_context["ti"] = _RankTaskInstance(context["ti"])
    # The task state store (re-attach by stored pod identity) talks to the task runner, which is not
    # for threads; without it the operator re-attaches by its labels, unique per rank here.
    pod_context.pop("task_state_store", None)
    specs = check_pod_specs(world, round_number, check_id, settings)

    def run_rank(spec: dict[str, Any]) -> dict[str, Any]:
        operator = CheckPodOperator(
            task_id=f"check-{spec['name']}",
            name=spec["name"],
            random_name_suffix=False,
            node_name=spec["node"],
            gpus=settings.gpus_per_node,
            image=settings.check_image,
            namespace=settings.namespace,
            kubernetes_conn_id=settings.kubernetes_conn_id,
            cmds=["python", "/opt/acme/allgather_check.py"],
            arguments=spec["arguments"],
            env_vars=spec["env"],
            labels=spec["labels"],
            job_labels=job_labels,
            startup_timeout_seconds=settings.pod_startup_timeout_s,
            **operator_overrides,
        )
        outcome = operator.execute(pod_context)
        return {**outcome, "pod": spec["name"], "rank": spec["rank"]}

    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        outcomes = list(pool.map(run_rank, specs))
    logs = "\n".join(outcome["log"] or "" for outcome in outcomes)
    result = parse_check_output(logs, list(world))
    failures = [f"{o['node']}: {o['pod_failed']}" for o in outcomes if o["pod_failed"] and not o["log"]]
    if failures:
        from dataclasses import replace

        result = replace(result, ok=False, error="; ".join(filter(None, [result.error, *failures])))
    return result, [{k: v for k, v in o.items() if k != "log"} for o in outcomes]
