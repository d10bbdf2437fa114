"""
### Recover a crashed training job

Started by the failure diagnosis for an infrastructure failure of a training job (with the same
conf as these Params), or by hand right after a crash. In minutes it finds the job's faulty nodes,
takes them out of scheduling, picks the checkpoint to resume from and resubmits the job on healthy
nodes — or stops with **"needs a person: …"** and the reason.

`open_recovery` (the job and its nodes exist on the cluster; one recovery per job at a time) →
`check_round1` (one mapped task per 2-node world, a 3-node world for an odd count: an all-gather +
matmul check) → `plan_round2` (each node of a failed world beside a node that passed) →
`check_round2` → `decide` (faulty = failed both rounds; stragglers; undecided with reasons) →
`take_out_faulty` (blast-radius limit, then cordon + taint on Kubernetes or `scontrol … State=DRAIN`
on Slurm) → `restart` (from `choose_checkpoint`: the newest complete checkpoint before any loss
spike, with the batches to skip; drained nodes excluded; detection-to-restart time) → `release`.

Backend by `ACME_RECOVERY_BACKEND`: `kubernetes` (each rank a GPU pod pinned to its node),
`slurm` (`srun -w`), or `simulated` (default, offline: `include/recovery/simulated_jobs.yaml`).
Every step, with its times, inputs and result, is in the lake at
`recovery/cluster=<c>/job=<job_id>/<recovery_id>/actions.jsonl`. **Dry run** records every step and
touches no cluster. Re-running the same run never cordons or restarts twice.
"""

from __future__ import annotations

from airflow.sdk import Param, dag, get_current_context, task

from acme import config
from acme_airflow.defaults import DEFAULT_ARGS, Tag

PARAMS = {
    "cluster": Param("seren", type="string", title="Cluster", description="The cluster the job ran on."),
    "job_id": Param("demo-pretrain-1", type="string", minLength=1, title="Job id", description="The crashed job's id on its cluster's scheduler."),
    "nodes": Param(
        ["seren-n000", "seren-n001", "seren-n002", "seren-n003", "seren-n004", "seren-n005", "seren-n006", "seren-n007"],
        type="array",
        items={"type": "string"},
        minItems=1,
        title="Nodes",
        description="The job's nodes in rank order.",
    ),
    "checkpoint_uri": Param(
        "", type="string", title="Checkpoint location",
        description="Folder or s3:// prefix holding the job's step_<N>/ checkpoints.",
    ),
    "metrics_file": Param(
        None, type=["null", "string"], title="Training metrics",
        description="Metrics file (CSV or JSON lines, step/loss) relative to the checkpoint location.",
    ),
    "dry_run": Param(False, type="boolean", title="Dry run", description="Record every step, touch nothing."),
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
    start_date=config.start_date(),  # the project's; a manual run's logical date may be any day since
    catchup=False,
    max_active_runs=8,
    default_args=DEFAULT_ARGS,
    tags=[Tag.RECOVERY, Tag.TRAINING],
    doc_md=__doc__,
    description="After an infrastructure failure, or by hand: find faulty nodes, cordon them, restart from a healthy checkpoint",
    params=PARAMS,
)
def recover_training():
    @task
    def open_recovery() -> dict:
        from acme.recovery.recover import open_recovery as open_steps
        from acme.recovery.settings import recovery_settings
        from acme_airflow.lake import task_lake
        from acme_airflow.recovery import recovery_failures, request_from_context, task_backend

        with recovery_failures():
            request = request_from_context(get_current_context())
            lake = task_lake()
            backend = task_backend(request.cluster, lake, request.job_id)
            opened = open_steps(lake, request, backend, recovery_settings())
        return opened

    @task
    def plan_round1(opened: dict) -> list[list[str]]:
        return opened["round1"]

    def run_check(opened: dict, world: list[str], round_number: int) -> dict:
        from acme.recovery.recover import RecoveryRequest, check_world, earlier_check, record_world
        from acme.recovery.settings import recovery_settings
        from acme_airflow.lake import task_lake
        from acme_airflow.recovery import recovery_failures, task_backend

        request = RecoveryRequest.from_dict(opened["request"])
        settings = recovery_settings()
        lake = task_lake()
        with recovery_failures():
            if settings.backend != "kubernetes" or request.dry_run:
                return check_world(
                    lake, request, task_backend(request.cluster, lake, request.job_id), world, round_number
                )
            earlier = earlier_check(lake, request, world, round_number)
            if earlier is not None:
                return earlier
            from acme_airflow.check_pods import run_world_as_pods

            labels = {"acme.io/job": request.job_id, "acme.io/recovery": request.check_id}
            result, pods = run_world_as_pods(
                world, round_number, request.check_id, settings, get_current_context(), labels
            )
            return record_world(lake, request, result, round_number, {"backend": "kubernetes", "pods": pods})

    @task(map_index_template="{{ world | join(',') }}")
    def check_round1(opened: dict, world: list[str]) -> dict:
        return run_check(opened, world, 1)

    @task
    def plan_round2(opened: dict, round1: list[dict]) -> list[list[str]]:
        from acme.recovery.recover import RecoveryRequest, plan_second_round

        return plan_second_round(RecoveryRequest.from_dict(opened["request"]), list(round1))

    @task(map_index_template="{{ world | join(',') }}")
    def check_round2(opened: dict, world: list[str]) -> dict:
        return run_check(opened, world, 2)

    # Round 2 launches no world when round 1 found nothing to confirm: its mapped task is skipped.
    @task(trigger_rule="none_failed")
    def decide(opened: dict, round1: list[dict], round2: list[dict] | None) -> dict:
        from acme.recovery.recover import RecoveryRequest, decide_faults
        from acme_airflow.lake import task_lake
        from acme_airflow.recovery import recovery_failures

        with recovery_failures():
            request = RecoveryRequest.from_dict(opened["request"])
            return decide_faults(task_lake(), request, list(round1), list(round2 or []))

    @task
    def take_out_faulty(opened: dict, verdict: dict) -> dict:
        from acme.recovery.blast_radius import BlastRadiusLimit
        from acme.recovery.recover import RecoveryRequest
        from acme.recovery.recover import take_out_faulty as take_out
        from acme.recovery.settings import recovery_settings
        from acme_airflow.lake import task_lake
        from acme_airflow.recovery import recovery_failures, task_backend

        with recovery_failures():
            request = RecoveryRequest.from_dict(opened["request"])
            settings = recovery_settings()
            lake = task_lake()
            backend = task_backend(request.cluster, lake, request.job_id)
            limit = BlastRadiusLimit(settings.max_nodes, settings.max_share)
            return take_out(lake, request, backend, verdict, opened["job"]["nodes"], limit)

    @task
    def choose_checkpoint(opened: dict) -> dict:
        from acme.recovery.recover import RecoveryRequest, choose_restart_checkpoint
        from acme_airflow.lake import task_lake
        from acme_airflow.recovery import recovery_failures

        with recovery_failures():
            return choose_restart_checkpoint(task_lake(), RecoveryRequest.from_dict(opened["request"]))

    @task
    def restart(opened: dict, verdict: dict, taken_out: dict, checkpoint: dict) -> dict:
        from acme.recovery.recover import RecoveryRequest, restart_job
        from acme_airflow.lake import task_lake
        from acme_airflow.recovery import recovery_failures, task_backend

        with recovery_failures():
            request = RecoveryRequest.from_dict(opened["request"])
            lake = task_lake()
            backend = task_backend(request.cluster, lake, request.job_id)
            return restart_job(lake, request, backend, opened["job"], verdict, taken_out, checkpoint)

    @task
    def release(opened: dict | None) -> bool:
        """Release the job's recovery marker; nothing to release when the recovery never opened (bad Params)."""
        from acme.recovery.recover import RecoveryRequest, close_recovery
        from acme_airflow.lake import task_lake

        if opened is None:
            return False
        return close_recovery(task_lake(), RecoveryRequest.from_dict(opened["request"]))

    opened = open_recovery()
    round1 = check_round1.partial(opened=opened).expand(world=plan_round1(opened))
    round2 = check_round2.partial(opened=opened).expand(world=plan_round2(opened, round1))
    verdict = decide(opened, round1, round2)
    taken_out = take_out_faulty(opened, verdict)
    restarted = restart(opened, verdict, taken_out, choose_checkpoint(opened))
    # A teardown: the marker is released whatever happened, and the run keeps the outcome of `restart`.
    restarted >> release(opened).as_teardown()


recover_training()
