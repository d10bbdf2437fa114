"""
### Evaluate a checkpoint: decoupled trials (Hu et al., NSDI'24, §6.2)

Triggered when a training job announces a checkpoint (the `acme_checkpoints` Asset; event extra
`{"location": URI, "model_size": "7B"}`) or by hand (Params below). Steps:

1. `plan` — names the evaluation (checkpoint × suite), plans its trials from the runtime priors
   learned so far (split large datasets, batch small ones, longest critical path first) and
   publishes the plan to `eval/runs/<model-id>/<run>/plan.json`; a re-run re-uses that plan.
2. `preload_model` — one per node: copies the checkpoint from remote storage into the node's
   shared memory (`ACME_EVAL_SHM_DIR`, default `/dev/shm/acme-models/<model-id>`) once
   (size + SHA-256 check, atomic rename); nothing with `ACME_EVAL_MODEL_BACKEND=openai`.
3. `trial` (mapped task group, one per trial, in plan order):
   `infer` (pool `acme_eval_gpu`) sets up, leases a GPU of its planned node, loads the real model
   from shared memory with the configured runtime (`ACME_EVAL_MODEL_BACKEND`: llama.cpp by default,
   HF transformers, or an OpenAI-compatible server such as vLLM), writes `outputs/<trial>.jsonl`
   (answers, per-sample seconds and tokens) and frees the GPU; `score` (pool `acme_eval_cpu`)
   starts as soon as *its* inference is done and writes `metrics/<trial>.json`.
4. `collect_results` — results table (`results.parquet`: dataset, metric, score, samples, times),
   `report.md`, the measured times (`eval/priors/measurements/…`) folded into the priors.

Where `preload_model` and `infer` run is the configured `acme.evaluation.runners.TrialRunner`
(`ACME_EVAL_BACKEND`: `local` in the task's process, `kubernetes` as GPU pods pinned to the plan's
nodes); each task body is the lake (`lake_task()`) and one call.

Each trial is retried on its own; a re-run skips trials whose outputs and metrics exist.
**Warm start**: size the GPU pool at 2 × GPU slots so the next trial of a GPU does its set-up
while the current one infers (see `include/eval/ASSUMPTIONS.md`).

**Manual runs**: `model_location` (lake key or URL of the checkpoint), `model_size`, `suite`
(`real`, `tiny`, `default` or a CSV path), `nodes`, `dry_run` (plan and simulate only).
"""

from __future__ import annotations

from airflow.sdk import Param, dag, get_current_context, task, task_group

from acme import settings
from acme_airflow.assets import CHECKPOINTS
from acme_airflow.defaults import DEFAULT_ARGS, Tag


def run_gpu_pod(pod: dict) -> None:
    """The Kubernetes runner's pod runner; imports the Kubernetes provider (0.6 s) only when a pod runs."""
    from acme_airflow.gpu_pod import run_gpu_pod as run

    run(pod)


@dag(
    dag_id="evaluate_checkpoint",
    schedule=[CHECKPOINTS],
    start_date=settings.project().start_date,  # the project's; a manual run's logical date may be any day since
    catchup=False,
    max_active_runs=2,
    default_args=DEFAULT_ARGS,
    tags=[Tag.EVALUATION],
    doc_md=__doc__,
    description="On a new checkpoint, or by hand: plan trials, preload once per node, infer, score, collect results",
    params={
        "model_location": Param(
            None,
            type=["null", "string"],
            title="Model location",
            description="Checkpoint file or folder: a URL (s3://…, file://…) or a path. "
            "Empty = the location in the triggering checkpoint event.",
        ),
        "model_size": Param(
            "7B",
            type="string",
            pattern=r"^\s*\d+(\.\d+)?\s*[bBmM]?\s*$",
            title="Model size (parameters)",
            description="Parameters, e.g. 7B or 350M: sizes the trials and the memory each node preloads.",
        ),
        "suite": Param(
            "tiny", type="string", title="Suite", description="real, tiny, default, or a suite CSV path."
        ),
        "nodes": Param(
            1,
            type="integer",
            minimum=1,
            maximum=256,
            title="Nodes available",
            description="GPU nodes the trials may use at once (1-256).",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run: plan and simulate only",
            description="Plan the trials and simulate their timing; load no model and write no results.",
        ),
    },
)
def evaluate_checkpoint():
    @task
    def plan() -> dict:
        from acme.evaluation.evaluation_run import plan_evaluation
        from acme_airflow.tasks import lake_task

        context = get_current_context()
        events = (context.get("triggering_asset_events") or {}).get(CHECKPOINTS) or []
        announced = events[-1].extra if events else {}
        with lake_task() as lake:
            gpus_per_node = settings.evaluation().gpus_per_node
            return plan_evaluation(context["params"], announced, gpus_per_node, lambda: lake)

    # XCom keys of a task cannot be mapped over: these hand the parts of the plan to the steps.
    @task
    def precursors_of(planned: dict) -> list[dict]:
        return planned["precursors"]

    @task
    def trials_of(planned: dict) -> list[dict]:
        return planned["trials"]

    @task
    def evaluation_of(planned: dict) -> dict:
        return planned["evaluation"]

    @task(map_index_template="node {{ precursor['node'] }}")
    def preload_model(precursor: dict, evaluation: dict) -> dict:
        from acme.evaluation.runners import trial_runner
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            return trial_runner(run_gpu_pod).preload(lake, evaluation, precursor)

    @task(pool=settings.evaluation().gpu_pool)
    def infer(trial: dict) -> dict:
        from acme.evaluation.runners import trial_runner
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            return trial_runner(run_gpu_pod).infer(lake, trial)

    @task(pool=settings.evaluation().cpu_pool)
    def score(trial: dict, inferred: dict) -> dict:
        from acme.evaluation.trial_steps import score_trial
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            return score_trial(lake, trial, inferred["trial_id"])

    @task_group
    def trial(trial: dict):
        score(trial, infer(trial))

    @task
    def collect_results(evaluation: dict) -> dict:
        from acme.evaluation.evaluation_run import collect_evaluation
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            return collect_evaluation(lake, evaluation)

    planned = plan()
    evaluation = evaluation_of(planned)
    preloaded = preload_model.partial(evaluation=evaluation).expand(precursor=precursors_of(planned))
    trials = trial.expand(trial=trials_of(planned))
    preloaded >> trials >> collect_results(evaluation)


evaluate_checkpoint()
