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

Each trial is retried on its own; a re-run skips trials whose outputs and metrics exist.
**Warm start**: size the GPU pool at 2 × GPU slots so the next trial of a GPU does its set-up
while the current one infers (see `include/eval/ASSUMPTIONS.md`).

**Manual runs**: `model_location` (lake key or URL of the checkpoint), `model_size`, `suite`
(`real`, `tiny`, `default` or a CSV path), `nodes`, `dry_run` (plan and simulate only).
"""

from __future__ import annotations

from airflow.sdk import Param, dag, get_current_context, task, task_group

from acme import config
from acme.evaluation import settings
from acme_airflow.assets import CHECKPOINTS
from acme_airflow.defaults import DEFAULT_ARGS, Tag


@dag(
    dag_id="evaluate_checkpoint",
    schedule=[CHECKPOINTS],
    start_date=config.start_date(),  # the project's; a manual run's logical date may be any day since
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
        from acme.evaluation.evaluation_run import prepare_evaluation, request_from, simulate_evaluation
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        context = get_current_context()
        params = context["params"]
        events = context.get("triggering_asset_events") or {}
        announced = events[CHECKPOINTS][-1].extra if events and events.get(CHECKPOINTS) else {}
        with no_retry_for_bad_input():
            request = request_from(params, announced, settings.gpus_per_node())
            if params["dry_run"]:
                return {
                    "evaluation": {},
                    "precursors": [],
                    "trials": [],
                    "simulation": simulate_evaluation(request),
                }
            manifest = prepare_evaluation(task_lake(), request)
        evaluation = {k: manifest[k] for k in ("model_id", "run", "model_location", "suite")}
        return {
            "evaluation": evaluation,
            "precursors": manifest["precursors"],
            "trials": manifest["trials"],
            "summary": {k: manifest[k] for k in ("plan", "plan_reused", "expected_makespan_s", "warnings")},
        }

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
        from acme.evaluation.precursor import preload_model as copy_to_shared_memory
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        if settings.model_backend() == "openai":  # the trials call a server that holds the model
            return {
                "node": precursor["node"],
                "copied": False,
                "reason": "openai backend: nothing to preload",
            }
        if settings.backend() == "kubernetes":
            from acme.evaluation.kubernetes_pods import precursor_pod
            from acme_airflow.gpu_pod import GpuPodOperator

            with no_retry_for_bad_input():
                pod = precursor_pod(evaluation, precursor["node"], precursor["nodes"])
            GpuPodOperator(**pod).execute(get_current_context())
            return {"node": precursor["node"], "pod": pod["name"], "node_name": pod["node_name"]}
        location = evaluation["model_location"]
        options = task_lake().storage_options if location.startswith("s3://") else None
        with no_retry_for_bad_input():
            result = copy_to_shared_memory(location, settings.shm_dir(), evaluation["model_id"], options)
        return {"node": precursor["node"], **result.to_dict()}

    @task(pool=settings.gpu_pool())
    def infer(trial: dict) -> dict:
        from acme.evaluation.layout import EvalRun
        from acme.evaluation.trial_steps import run_inference
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        if settings.backend() == "kubernetes":
            return infer_in_pod(trial)
        with no_retry_for_bad_input():
            return run_inference(
                task_lake(),
                EvalRun(trial["model_id"], trial["run"]),
                trial["trial_id"],
                settings.shm_dir(),
                settings.data_dir(),
                settings.gpu_lease_timeout_s(),
            )

    def infer_in_pod(trial: dict) -> dict:
        """kubernetes backend: the trial's inference as a GPU pod on its precursor's node."""
        from acme.evaluation.kubernetes_pods import inference_pod
        from acme.evaluation.layout import EvalRun
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.gpu_pod import GpuPodOperator
        from acme_airflow.lake import task_lake

        lake = task_lake()
        outputs = EvalRun(trial["model_id"], trial["run"]).outputs_key(trial["trial_id"])
        if lake.exists(outputs):  # done by an earlier run: no pod, no GPU
            return {"trial_id": trial["trial_id"], "skipped": True, "outputs": lake.url(outputs)}
        with no_retry_for_bad_input():
            pod = inference_pod(trial, trial["nodes"], trial["gpus_per_trial"])
        GpuPodOperator(**pod).execute(get_current_context())
        if not lake.exists(outputs):
            raise RuntimeError(f"pod {pod['name']} finished without writing {lake.url(outputs)}")
        return {
            "trial_id": trial["trial_id"],
            "skipped": False,
            "outputs": lake.url(outputs),
            "pod": pod["name"],
        }

    @task(pool=settings.cpu_pool())
    def score(trial: dict, inferred: dict) -> dict:
        from acme.evaluation.layout import EvalRun
        from acme.evaluation.trial_steps import run_metric
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        with no_retry_for_bad_input():
            return run_metric(
                task_lake(),
                EvalRun(trial["model_id"], trial["run"]),
                inferred["trial_id"],
                settings.data_dir(),
                settings.code_timeout_s(),
            )

    @task_group
    def trial(trial: dict):
        score(trial, infer(trial))

    @task
    def collect_results(evaluation: dict) -> dict:
        from acme.evaluation.evaluation_run import collect_results as collect
        from acme.evaluation.layout import EvalRun
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        with no_retry_for_bad_input():
            return collect(
                task_lake(), EvalRun(evaluation["model_id"], evaluation["run"]), evaluation["suite"]
            )

    planned = plan()
    evaluation = evaluation_of(planned)
    preloaded = preload_model.partial(evaluation=evaluation).expand(precursor=precursors_of(planned))
    trials = trial.expand(trial=trials_of(planned))
    preloaded >> trials >> collect_results(evaluation)


evaluate_checkpoint()
