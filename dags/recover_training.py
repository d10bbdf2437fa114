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

**Flight Recorder dumps** (docs/flight_recorder.md): with the `flight_recorder_uri` Param (empty: where the
cluster's `flight_recorder_uri_pattern` or `ACME_FLIGHT_RECORDER_URI_PATTERN` puts them), a conclusive
dump of the hung job names the faulty nodes in `open_recovery` and the check rounds map no world (skipped);
otherwise the action log's `flight_recorder` step says why and the rounds run.

**Approval** (docs/approvals.md): a live run that the auto-approve policy does not cover
(`ACME_RECOVERY_AUTO_APPROVE*`: a rule-decided failure, at most one node to cordon) stops in
`decide_and_restart` before the first cordon; `approve` asks in Airflow's human-in-the-loop form (the
diagnosis, evidence lines, suspect nodes, blast radius, checkpoint) and `restart_approved` cordons and
restarts once approved. Rejected, or unanswered after `ACME_RECOVERY_APPROVAL_TIMEOUT_S`, the recovery
ends as a plan. Every approval event is an `approval` record of the action log. Dry runs ask nothing.

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

from datetime import timedelta

from airflow.sdk import dag, get_current_context, task

from acme import settings
from acme.recovery.request import conf_json_schema
from acme.settings import recovery as recovery_settings
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.hitl import RecoveryApprovalOperator
from acme_airflow.params import params_from_schema

# The Params are the recovery request's JSON schema (acme.recovery.request), the conf the diagnosis sends.
PARAMS = params_from_schema(conf_json_schema(recovery_settings().dry_run)["properties"])


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
        from acme_airflow.recovery import plan_in_task

        return plan_in_task(opened, list(round1))

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
    def restart_approved(opened: dict, finished: dict) -> dict:
        """After the approval question: cordon and restart when approved; rejected or timed out, the
        recovery ends as a plan (recorded, nothing touched)."""
        from acme_airflow.recovery import restart_in_task

        return restart_in_task(opened, finished)

    @task
    def page_oncall(opened: dict | None) -> dict:
        """Page on-call with the recovery's final state from its action log (docs/notifications.md)."""
        from acme_airflow.notify import page_recovery_in_task

        return page_recovery_in_task(get_current_context(), opened)

    @task
    def release(opened: dict | None) -> bool:
        """Release the job's recovery marker; nothing to release when the recovery never opened (bad Params)."""
        from acme_airflow.recovery import release_in_task

        return release_in_task(opened)

    worlds = open_recovery()
    opened = worlds["opened"]
    round1 = check_round1.partial(opened=opened).expand(world=worlds)
    round2 = check_round2.partial(opened=opened).expand(world=plan_round2(opened, round1))
    restarted = decide_and_restart(opened, round1, round2)
    # Live and not auto-approved: ask before the first cordon (skipped when nothing is to be approved).
    approval = RecoveryApprovalOperator(
        task_id="approve", opened=opened, finished=restarted,
        response_timeout=timedelta(seconds=recovery_settings().approval_timeout_s),
    )  # fmt: skip
    after_approval = restart_approved(opened, restarted)
    approval >> after_approval
    # A teardown: the marker is released whatever happened, and the run keeps the outcome of the restart.
    after_approval >> release(opened).as_teardown()
    # The final state (restarted, planned, rejected, timed out) once the approval is settled, beside the release.
    after_approval >> page_oncall(opened).as_teardown()


recover_training()
