"""What the validate_nodes tasks share: the nodes of the run, and one node validated through its backend."""

from __future__ import annotations

from typing import Any


def find_in_task(context: Any) -> list[dict[str, Any]]:
    """``find_cordoned``'s body: the run's nodes (``acme.recovery.validation.nodes_to_validate``), each with
    the run's validation id (from the run id) and dry-run flag, as the mapped tasks' arguments."""
    from acme.recovery.actions import recovery_id_from_run
    from acme.recovery.validation import nodes_to_validate
    from acme_airflow.recovery import recovery_failures, task_backend
    from acme_airflow.tasks import lake_task

    params = context["params"]
    cluster = None if params.get("cluster") in (None, "", "all") else params["cluster"]
    validation_id = recovery_id_from_run(context["run_id"])
    allow_lemon = bool(params.get("allow_lemon"))
    with recovery_failures(), lake_task() as lake:
        targets = nodes_to_validate(
            lake,
            cluster,
            list(params.get("nodes") or []),
            lambda name: task_backend(name, lake, None),
            allow_lemon,
        )
    return [
        {
            **target,
            "validation_id": validation_id,
            "dry_run": bool(params["dry_run"]),
            "allow_lemon": allow_lemon,
        }
        for target in targets
    ]


def validate_in_task(target: dict[str, Any]) -> dict[str, Any]:
    """``validate_node``'s body: measure, judge and (when it passed) uncordon one node, recorded. A flagged lemon
    node's held uncordon comes with an on-call notice: queued (once, by its id) and delivered here."""
    from acme.notify.outbox import enqueue
    from acme.recovery.validation import validate_node, validation_spec
    from acme.settings import recovery as recovery_settings
    from acme.settings import validation as validation_settings
    from acme_airflow.notify import deliver_queued
    from acme_airflow.recovery import recovery_failures, task_backend
    from acme_airflow.tasks import lake_task

    settings = validation_settings()
    spec = validation_spec(target["validation_id"], settings, recovery_settings())
    with recovery_failures(), lake_task() as lake:
        backend = task_backend(target["cluster"], lake, None)
        outcome = validate_node(
            lake, backend, target["cluster"], target["node"], spec, settings, target["dry_run"],
            bool(target.get("allow_lemon")),
        )  # fmt: skip
        notice = outcome.pop("notice", None)
        if notice is not None:  # queued once (its id); delivered also when an earlier try queued it and died
            outcome["notice"] = notice["id"]
            enqueue(lake, notice)
            deliver_queued(lake)
    return outcome
