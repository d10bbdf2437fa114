"""
### Failure diagnosis of the day's failed jobs

Runs after every nightly job-trace ingest (it is scheduled on the `acme_job_traces` Asset and
takes the clusters and days that ingest published) and on a manual trigger right after a
crash. `plan_jobs` splits the failed jobs by one listing of `ACME_DIAGNOSIS_LOG_PATTERN`:

- **without a log** (most of them): one mapped `diagnose` step classifies them all from the
  scheduler's facts (state, exit code, signal, reasons) with the rules: no model, seconds for thousands;
- **with a log**: at most `ACME_DIAGNOSIS_CHUNKS` more `diagnose` steps (chunks of jobs, the
  embedding model loaded at most once per chunk): **compress** (family filter rules, then the
  bundled ones) → **rules** (bundled and learned) → **retrieval** of similar past diagnoses → the
  **LLM agent** only when still not confident and an endpoint is configured. At most
  `ACME_DIAGNOSIS_MAX_JOBS` per run: the others wait in the carry-over queue in the lake
  (`diagnosis/queue/cluster=<c>/pending.json`) and the next runs take them, oldest first; the run's
  log and the Asset event say how many wait.

**A crash's own diagnosis** (a manual run naming one `job_id`) is made inside `plan_jobs`, and no
`diagnose` step is mapped: planning one job is reading its record, so that boundary would buy no useful
retry, only a hand-over and a task start on the way from the crash to its restart.

`publish` writes nothing itself (records are in `diagnoses/cluster=<c>/date=<d>/`) but updates the
`acme_diagnoses` Asset with the run's counts.

**Routing**: Infrastructure failures of Pretrain/SFT jobs trigger `recover_training` with
`{"cluster", "job_id", "nodes", "checkpoint_uri", "dry_run", "reason"}`; user failures get an
owner message at `diagnosis/messages/cluster=<c>/date=<d>/<job_id>.json`. `notify` sends each owner one
digest of the run and pages on-call for infrastructure failures of large jobs (`docs/notifications.md`).

**Triage** (docs/approvals.md): an Unknown or unsure diagnosis of a job that lost at least
`ACME_TRIAGE_MIN_GPU_HOURS` (or one only an untrusted LLM made) becomes a question, once per log template;
`plan_triage` claims the open ones (none in a manual run: a crash's diagnosis never waits for a person) and
each `triage` form asks an operator for the reason, the likeliest first. The answer becomes a labelled
case and, validated, a learned rule.

**Manual runs**: `cluster` and `job_id` (and `log`, a location under the log root, when the
log is elsewhere than the pattern says): that job is always diagnosed again. Or `cluster` and `day`:
the day's jobs still without a diagnosis (`rediagnose` for all of them). A retry or re-run never
diagnoses or stores a job twice; a recovery is triggered at most once per job (`trigger_run_id` is
the job's).
"""

from __future__ import annotations

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import Param, dag, get_current_context, task

from acme import settings
from acme_airflow.assets import DIAGNOSES, JOB_TRACES
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.hitl import triage_after
from acme_airflow.notify import nightly_deadline
from acme_airflow.params import cluster_param

RECOVERY_DAG_ID = "recover_training"


@dag(
    dag_id="diagnose_failures",
    deadline=nightly_deadline("diagnose_failures", scheduled=False),  # late notice to on-call
    schedule=JOB_TRACES,
    start_date=settings.project().start_date,
    catchup=False,
    max_active_runs=settings.project().max_active_runs,
    default_args=DEFAULT_ARGS,
    tags=[Tag.NIGHTLY, Tag.JOBS, Tag.DIAGNOSIS],
    doc_md=__doc__,
    description="After each job ingest, or by hand after a crash: failed jobs' logs → root cause → owner message or recovery",
    params={
        "cluster": cluster_param(),
        "job_id": Param(
            None,
            type=["null", "string"],
            title="Job id",
            description="Diagnose this job only (needs a cluster).",
        ),
        "log": Param(
            None,
            type=["null", "string"],
            title="Log location",
            description="Path under the log root (ACME_DIAGNOSIS_LOG_ROOT), relative or absolute; "
            "empty = found by ACME_DIAGNOSIS_LOG_PATTERN.",
        ),
        "day": Param(
            None,
            type=["null", "string"],
            format="date",
            title="Day (UTC)",
            description="Submit day of the jobs; empty = the days the triggering ingest published, or yesterday.",
        ),
        "rediagnose": Param(
            False,
            type="boolean",
            title="Diagnose again",
            description="Also the day's jobs that already have a diagnosis (e.g. after the rules changed); "
            "otherwise a re-run diagnoses only the jobs still without one.",
        ),
    },
)
def diagnose_failures():
    @task
    def plan_jobs() -> list[dict]:
        """Plan the run into the lake (staging/diagnose_failures/<run>/plan.json); return the steps to map.
        A manual run of one job is diagnosed here instead (its summary is the XCom ``diagnosed``)."""
        from acme.clusters import load_clusters
        from acme.diagnosis.nightly import diagnose_step, diagnosis_targets, plan_run
        from acme.diagnosis.pipeline import AgentOnDemand
        from acme_airflow.context import run_day
        from acme_airflow.llm import failure_agent
        from acme_airflow.tasks import lake_task

        context = get_current_context()
        params = context["params"]
        events = (context.get("triggering_asset_events") or {}).get(JOB_TRACES) or []
        with lake_task() as lake:
            targets = diagnosis_targets(
                load_clusters(), params["cluster"], run_day(context), [e.extra for e in events],
                manual=bool(params.get("day") or params.get("job_id")),
            )  # fmt: skip
            plan = plan_run(
                lake, targets, run_id=context["run_id"], job_id=params.get("job_id"),
                log=params.get("log"), rediagnose=bool(params.get("rediagnose")),
            )  # fmt: skip
            manual = (
                [diagnose_step(lake, step, AgentOnDemand(failure_agent)) for step in plan["steps"]]
                if plan["manual"]
                else []
            )
        context["ti"].xcom_push(key="diagnosed", value=manual)
        print(
            f"planned {plan['without_log']} failed jobs without a log (bulk, from metadata) and "
            f"{plan['with_log']} with a log in {len(plan['chunks'])} chunk(s); {plan['waiting']} wait in the "
            f"carry-over queue (ACME_DIAGNOSIS_MAX_JOBS); {plan['already_diagnosed']} were diagnosed before"
        )
        return [] if plan["manual"] else plan["steps"]

    @task(
        max_active_tis_per_dag=settings.diagnosis().concurrency,
        map_index_template="{{ step['kind'] }} {{ step.get('chunk', '') }} ({{ step['jobs'] }} jobs)",
    )
    def diagnose(step: dict) -> dict:
        """All the planned jobs without a log in one go from their metadata (no model), or one chunk of those
        with a log: compress, rules, retrieval, agent, one job after another (the model loads once)."""
        from acme.diagnosis.nightly import diagnose_step
        from acme.diagnosis.pipeline import AgentOnDemand
        from acme_airflow.llm import failure_agent
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            # The LLM endpoint from the Airflow connection (ACME_LLM_CONN_ID), else the environment; None
            # offline; looked up only when a job needs the agent.
            return diagnose_step(lake, step, AgentOnDemand(failure_agent))

    # A run with nothing to diagnose maps no step (that task is skipped): publish all the same.
    @task(outlets=[DIAGNOSES], trigger_rule="none_failed")
    def publish(steps: list[dict] | None, diagnosed: list[dict] | None) -> list[dict]:
        """Summarize the run on the Asset; return the recovery requests (conf + a run id per job)."""
        from acme.diagnosis.nightly import plan_key, summarize
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            plan = lake.read_json(plan_key(get_current_context()["run_id"]))
        summary = summarize(list(steps or []) + list(diagnosed or []), plan["waiting"])
        print(
            f"diagnosed {summary['jobs']} failed jobs (sources {summary['sources']}); "
            f"{summary['waiting']} wait for a later run"
        )
        for error in summary["errors"]:
            print(f"  not diagnosed from its log: {error}")
        get_current_context()["outlet_events"][DIAGNOSES].extra = {
            **{k: summary[k] for k in ("jobs", "reasons", "sources", "routes", "partitions", "waiting")},
            "days": plan["targets"],  # the (cluster, day) pairs covered: characterize refreshes those
        }
        return [
            {"conf": conf, "trigger_run_id": f"recover__{conf['cluster']}__{conf['job_id']}"}
            for conf in summary["recoveries"]
        ]

    @task
    def drop_plan() -> None:
        """Remove the run's staged plan once published (a re-run of the whole run plans again)."""
        from acme.diagnosis.nightly import plan_folder
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            lake.delete_prefix(plan_folder(get_current_context()["run_id"]))

    @task(trigger_rule="none_failed")
    def notify() -> dict:
        """Owner digests (one per owner) and on-call pages of the run, queued in the lake (notify/queue/) and
        sent exactly once through the channels of include/config/notify.yaml (docs/notifications.md)."""
        from acme_airflow.notify import notify_run_in_task

        return notify_run_in_task(get_current_context())

    planned = plan_jobs()
    recoveries = publish(diagnose.expand(step=planned), planned["diagnosed"])
    recoveries >> notify() >> drop_plan()
    triage_after(recoveries)  # operators' questions on Unknown or unsure diagnoses (docs/approvals.md)
    # Mapped over the recovery requests: none (the usual night) -> the task is skipped, nothing is triggered.
    TriggerDagRunOperator.partial(
        task_id="trigger_recovery",
        trigger_dag_id=RECOVERY_DAG_ID,
        skip_when_already_exists=True,
        wait_for_completion=False,
    ).expand_kwargs(recoveries)


diagnose_failures()
