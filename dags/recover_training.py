"""
### Recover a crashed training job

Started by the failure diagnosis for an infrastructure failure of a training job (with the same
conf as these Params), or by hand right after a crash. In minutes it finds the job's faulty nodes,
takes them out of scheduling, picks the checkpoint to resume from and resubmits the job on healthy
nodes — or stops with **"needs a person: …"** and the reason.

`open_recovery` (the job and its nodes exist on the cluster; one recovery per job at a time) →
`check_round1` (one mapped task per 2-node world, a 3-node world for an odd count: an all-gather +
matmul check) → `plan_round2` (each node of a failed world beside a node that passed) →
`check_round2` → `decide_and_restart`: **decide** (faulty = failed both rounds; stragglers; undecided
with reasons) → **take out** the faulty nodes (blast-radius limit, then cordon + taint on Kubernetes or
`scontrol … State=DRAIN` on Slurm) → **choose the checkpoint** (the newest complete one before any loss
spike, with the batches to skip) → **restart** (drained nodes excluded; detection-to-restart time) →
`release` (teardown).

Backend by `ACME_RECOVERY_BACKEND`: `kubernetes` (each rank a GPU pod pinned to its node),
`slurm` (`srun -w`), or `simulated` (default, offline: `include/recovery/simulated_jobs.yaml`; a job
not listed there is simulated on the nodes given, all healthy).
Every step, with its times, inputs and result, is in the lake at
`recovery/cluster=<c>/job=<job_id>/<recovery_id>/actions.jsonl`. **Dry run** (the default:
`ACME_RECOVERY_DRY_RUN`, true unless set to false, for this DAG's Param and for the recoveries the
diagnosis starts alike) records every step, down to the restart it would make, and touches no cluster.
Re-running the same run never cordons or restarts twice.

**Checkpoints**: the `checkpoint_uri` Param (the diagnosis passes the job record's), else the
cluster's `checkpoint_uri_pattern` in `include/config/clusters.yaml`, else `ACME_CHECKPOINT_URI_PATTERN`
(default `{lake}/checkpoints/cluster={cluster}/job={job_id}`). When no healthy checkpoint is there, the
run stops for a person and the action log names the location and the setting it came from (a dry run
records that and still writes its restart plan); a request that cannot be made at all (a bad Param,
an unreadable cluster configuration) is still recorded there as a failed `request` step.
"""

from __future__ import annotations

from airflow.sdk import Param, dag, get_current_context, task

from acme import settings
from acme.settings import recovery as recovery_settings
from acme_airflow.defaults import DEFAULT_ARGS, Tag

PARAMS = {
    "cluster": Param("seren", type="string", title="Cluster", description="The cluster the job ran on."),
    # No defaults for the job: a trigger without edits must not recover some job by accident.
    "job_id": Param(
        type="string", minLength=1, title="Job id",
        description="The crashed job (required): as the cluster's scheduler names it.",
    ),
    "nodes": Param(
        type="array",
        items={"type": "string"},
        minItems=1,
        title="Nodes",
        description="The job's nodes in rank order (required).",
    ),
    "checkpoint_uri": Param(
        "", type="string", title="Checkpoint location",
        description="Folder or s3:// prefix holding the job's step_<N>/ checkpoints; empty = the cluster's "
        "checkpoint_uri_pattern in clusters.yaml, else ACME_CHECKPOINT_URI_PATTERN "
        "(default {lake}/checkpoints/cluster={cluster}/job={job_id}).",
    ),
    "metrics_file": Param(
        None, type=["null", "string"], title="Training metrics",
        description="Metrics file (CSV or JSON lines, step/loss) relative to the checkpoint location.",
    ),
    "dry_run": Param(
        recovery_settings().dry_run, type="boolean", title="Dry run",
        description="Record every step, touch nothing. Default: ACME_RECOVERY_DRY_RUN (true unless set to "
        "false), the same setting the diagnosis uses for the recoveries it starts.",
    ),
    "reason": Param("", type="string", title="Reason", description="Why recovery was started (diagnosis)."),
    "recovery_id": Param(
        None, type=["null", "string"], pattern="^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", title="Recovery id",
        description="Names this recovery (e.g. the diagnosis' incident id): runs with the same id are re-runs "
        "of one recovery and never cordon or restart twice. Default: the run id.",
    ),
    "detected_at": Param(
        None, type=["null", "string"], title="Detected at",
        description="When the crash was detected (ISO 8601); default the run's start.",
    ),
}  # fmt: skip


@dag(
    dag_id="recover_training",
    schedule=None,
    start_date=settings.project().start_date,  # the project's; a manual run's logical date may be any day since
    catchup=False,
    max_active_runs=8,
    default_args=DEFAULT_ARGS,
    tags=[Tag.RECOVERY, Tag.TRAINING],
    description="After an infrastructure failure, or by hand: find faulty nodes, cordon them, restart from a healthy checkpoint",
    doc_md=__doc__,
    params=PARAMS,
)
def recover_training():
    @task
    def open_recovery() -> list[list[str]]:
        """Check the request and the job, hold the job's marker; return the round-1 worlds (the opened
        recovery goes to the other tasks as the XCom ``opened``)."""
        from acme_airflow.recovery import open_in_task

        return open_in_task(get_current_context())

    @task(map_index_template="{{ world | join(',') }}")
    def check_round1(opened: dict, world: list[str]) -> dict:
        from acme_airflow.recovery import check_in_task

        return check_in_task(opened, world, 1)

    @task
    def plan_round2(opened: dict, round1: list[dict]) -> list[list[str]]:
        from acme.recovery.recover import RecoveryRequest, plan_second_round

        return plan_second_round(RecoveryRequest.from_dict(opened["request"]), list(round1))

    # Only the worlds round 2 needs: one slot per round-1 world without this planning task left the unused
    # slots waiting for a worker slot ahead of decide_and_restart (measured: 2-3 s more with 2 slots).
    @task(map_index_template="{{ world | join(',') }}")
    def check_round2(opened: dict, world: list[str]) -> dict:
        from acme_airflow.recovery import check_in_task

        return check_in_task(opened, world, 2)

    # One task from the verdict to the restart: each step is still its own record in the action log,
    # but the scheduler hands over once instead of four times (seconds on the way from crash to restart).
    @task(trigger_rule="none_failed")
    def decide_and_restart(opened: dict, round1: list[dict], round2: list[dict] | None) -> dict:
        """Decide (faulty, stragglers, undecided) → take the faulty nodes out (blast-radius limit, cordon or
        drain) → choose the checkpoint → restart."""
        from acme_airflow.recovery import finish_in_task

        # Round 2 launches no world when round 1 found nothing to confirm: its mapped task is skipped.
        return finish_in_task(opened, list(round1), list(round2 or []))

    @task
    def page_oncall(opened: dict | None) -> dict:
        """Page on-call with the recovery's final state from its action log (docs/notifications.md)."""
        from acme_airflow.notify import page_recovery_in_task

        return page_recovery_in_task(get_current_context(), opened)

    @task
    def release(opened: dict | None) -> bool:
        """Release the job's recovery marker; nothing to release when the recovery never opened (bad Params)."""
        from acme.recovery.recover import RecoveryRequest, close_recovery
        from acme_airflow.tasks import lake_task

        if opened is None:
            return False
        with lake_task() as lake:
            return close_recovery(lake, RecoveryRequest.from_dict(opened["request"]))

    worlds = open_recovery()
    opened = worlds["opened"]
    round1 = check_round1.partial(opened=opened).expand(world=worlds)
    round2 = check_round2.partial(opened=opened).expand(world=plan_round2(opened, round1))
    restarted = decide_and_restart(opened, round1, round2)
    # A teardown: the marker is released whatever happened, and the run keeps the outcome of the restart.
    restarted >> release(opened).as_teardown()
    restarted >> page_oncall(opened).as_teardown()  # beside the release: one hand-over less to the page


recover_training()
