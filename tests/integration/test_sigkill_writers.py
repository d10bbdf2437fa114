"""Every writing task of the six DAGs, SIGKILLed at random write points, then retried.

For each DAG a chain of its writing tasks runs on the bundled sample inputs against a local lake,
each task in a forked child (``tests/fakes/kill_points.py``) the way a worker runs it: the plain
``acme`` function the task body calls, with the same arguments (run id, staging prefix, recovery id)
an Airflow retry would pass. A clean run of the chain records the lake before and after every task
and the task's write points (lake writes, deletes, locks; the precursor's rename). Then, per task and
round, a seeded RNG picks a write point and a phase (before it, a half-written temporary file, a
complete but unrenamed one, after it; a lock just taken, about to be released, released), and:

1. the lake is reset to its state before the task and the task runs until it SIGKILLs itself there;
2. **nothing partial is visible**: every object outside ``staging/``, ``raw/``, ``logs/`` and
   ``_locks/`` is complete (Parquet readable, JSON/YAML parse) and equals its state before the task or
   after the clean run (the recovery's action log, appended several times by one task, need only be
   complete); temporary files are hidden from readers;
3. **the retry completes**: the task runs again in a fresh process, with the lock of the dead one
   released by the kernel (local ``flock``), and returns the clean run's manifest;
4. **the lake equals the clean run's**: the same keys (no staging, lock or temporary leftovers),
   tables ``equals``, documents equal -- without the volatile fields of
   ``kill_points.VOLATILE_FIELDS`` (times and measured durations) and a report page's generation
   time; the recovery's action log as its sequence of steps (``kill_points.ATTEMPT_LOGS``).

The evaluation's node "shared memory" (``ACME_EVAL_SHM_DIR``) is put under the lake's folder so that
the precursor's copy is checked the same way.

``ACME_SIGKILL_ROUNDS`` (default 1): kills per task; ``ACME_SIGKILL_TASKS`` (default 2): how many of
each DAG's writing tasks get them (seeded choice), or ``all``; ``ACME_SIGKILL_SEED`` (default 8);
``ACME_SIGKILL_FIGURES``: a JSON file that receives the figures per task. The campaign of
``docs/reliability.md``::

    ACME_SIGKILL_ROUNDS=25 ACME_SIGKILL_TASKS=all .venv/bin/pytest tests/integration/test_sigkill_writers.py
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.kill_points import (
    KillAt,
    WritePoint,
    differences,
    kill_choices,
    run_forked,
    temporary_files,
    visible_problems,
    without_volatile,
)

ROUNDS = int(os.environ.get("ACME_SIGKILL_ROUNDS", "1"))
TASKS = os.environ.get("ACME_SIGKILL_TASKS", "2")
SEED = int(os.environ.get("ACME_SIGKILL_SEED", "8"))
FIGURES = os.environ.get("ACME_SIGKILL_FIGURES")
DAY1, DAY2 = date(2023, 7, 1), date(2023, 7, 2)
RUN_ID = "scheduled__2023-07-01T00:00:00+00:00"


def unpublished(key: str) -> bool:
    return key.startswith(("staging/", "raw/", "_locks/", "logs/"))


@dataclass
class Step:
    """One task: ``call(lake, xcom)`` returns its manifest (XCom), stored under ``name``."""

    name: str
    call: Callable[[Any, dict[str, Any]], Any]
    campaign: bool = True  # False: a set-up step (another DAG's task), run once, never killed
    # The part of the manifest a retry must return as the clean run did (None: nothing, the step says why).
    same_result: Callable[[Any], Any] | None = lambda manifest: manifest


@dataclass
class Scenario:
    dag: str
    steps: list[Step]
    setup: Callable[[Path], None] = lambda base: None
    rewritten_in_steps: Callable[[str], bool] = lambda key: False
    env: dict[str, str] = field(default_factory=dict)
    preload: tuple[str, ...] = ()  # imported once in the parent, so that each forked task starts quickly


INGEST_MODULES = ("acme.jobs.ingest", "acme.jobs.validate", "great_expectations", "pyarrow.parquet", "pandas")
REPORT_MODULES = ("acme.report.build", "acme.report.characterize", "acme.report.figures", "duckdb")


# --- the DAGs' writing tasks ------------------------------------------------------------------------


def ingest_job_steps(cluster: str, day: date, campaign: bool = True) -> list[Step]:
    """``ingest_job_traces``: its one ingest task of one cluster-day (extract → parse → validate →
    publish, with the raw copy and the staged rows as retry points inside it)."""
    from acme.clusters import load_clusters
    from acme.jobs.ingest import plan_job_inputs

    tag = f"{cluster}-{day}"
    run_id = f"scheduled__{day}T00:00:00+00:00"

    def ingest(lake, xcom):
        from acme.jobs.ingest import ingest_planned

        (planned,) = plan_job_inputs(load_clusters(), day, cluster)
        return ingest_planned(lake, planned, run_id)

    return [Step(f"ingest {tag}", ingest, campaign)]


def ingest_jobs_scenario() -> Scenario:
    # Day 2 republishes jobs of day 1 (their partition is merged, not replaced).
    steps = ingest_job_steps("seren", DAY1) + ingest_job_steps("seren", DAY2)
    return Scenario("ingest_job_traces", steps, preload=INGEST_MODULES)


def metrics_scenario() -> Scenario:
    def setup(base: Path) -> None:
        from acme.metrics.synth import write_synth_metrics

        write_synth_metrics("seren", 1, DAY1, 1, "acmetrace-csv", base / "telemetry", seed=1)

    def ingest(lake, xcom):
        from acme.metrics.ingest import ingest_metrics_file

        summary = ingest_metrics_file(
            lake, "acmetrace-csv", "seren", str(Path(lake.root).parent / "telemetry"), DAY1
        )
        return {k: summary[k] for k in ("samples", "series", "quarantined", "metrics")}

    return Scenario("ingest_metrics", [Step("ingest seren", ingest)], setup, preload=("acme.metrics.ingest",))


DIAGNOSED_JOBS = 2


def diagnosis_scenario() -> Scenario:
    """``diagnose_failures``: two failed kalos jobs (records, case store, owner messages), then what the
    diagnosis learns -- a rule (as from an operator's confirmation or a confident LLM answer) and a job
    family's filter rules (as from the log agent), both versioned with their history. The learning
    steps are called directly: offline no LLM proposes them."""

    def write_logs(lake, xcom):
        from acme.diagnosis.nightly import failed_jobs, plan_run
        from acme.diagnosis.synth_log import iter_training_log

        jobs = failed_jobs(lake, "kalos", DAY1)[:DIAGNOSED_JOBS]
        for job, failure in zip(jobs, ("OutOfMemoryError", "NCCLTimeoutError"), strict=False):
            folder = Path(lake.path(f"logs/cluster=kalos/job={job['job_id']}"))
            folder.mkdir(parents=True, exist_ok=True)
            lines = iter_training_log(3000, failure=failure)
            (folder / "train.log").write_text("".join(line + "\n" for line in lines))
        # The nightly plan: the logged jobs in one chunk each (the jobs without a log are not run here).
        plan = plan_run(lake, [("kalos", DAY1)], run_id="kill-campaign", chunks=DIAGNOSED_JOBS)
        return {"plan": plan["plan"], "items": [{"job": job} for job in jobs]}

    def diagnose(index: int):
        def call(lake, xcom):
            from acme.diagnosis.nightly import diagnose_chunk

            # A retry skips the job its killed try already stored, then stores the deferred cases.
            diagnose_chunk(lake, xcom["plan and logs"]["plan"], index)
            return {"job_id": xcom["plan and logs"]["items"][index]["job"]["job_id"]}

        return call

    def learn(lake, xcom):
        from acme.diagnosis.learning import learn_rule
        from acme.diagnosis.retrieval import Case, CaseStore

        (stored,) = [c for c in CaseStore(lake).read("kalos") if c["job_id"] == xcom["diagnose 1"]["job_id"]]
        case = Case(**{name: stored[name] for name in Case.__dataclass_fields__ if name in stored})
        outcome = learn_rule(
            lake, case, r"CUDA out of memory\. Tried to allocate", source="operator",
            by="ops-kill-campaign", now=datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
        )  # fmt: skip
        # "added", or "exists" for a retry after the killed try had added it: accepted both times.
        return {"accepted": outcome.accepted, "rule_id": outcome.rule_id}

    steps = ingest_job_steps("kalos", DAY1, campaign=False)
    steps += [Step("plan and logs", write_logs, campaign=False)]
    steps += [Step(f"diagnose {i + 1}", diagnose(i)) for i in range(DIAGNOSED_JOBS)]

    def learn_filter_rules(lake, xcom):
        from acme.diagnosis.learning import family_key, save_family_filter_rules

        family = family_key(xcom["plan and logs"]["items"][0]["job"])
        rule = {
            "id": "learned-progress",
            "regex": r"^\[step \d+\] loss",
            "description": "progress",
            "version": 1,
        }
        when = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
        return save_family_filter_rules(lake, family, [rule], {"source": "kill-campaign"}, now=when)

    steps += [Step("learn rule", learn), Step("learn filter rules", learn_filter_rules)]
    modules = (*INGEST_MODULES, "acme.diagnosis.pipeline", "acme.diagnosis.retrieval")
    return Scenario("diagnose_failures", steps, env={"ACME_DIAGNOSIS_EMBEDDING": "lexical"}, preload=modules)


def report_scenario() -> Scenario:
    def build(period: str):
        def call(lake, xcom):
            from acme.report.build import build_report

            return {"report": build_report(lake, "seren", period, write_index=False)["report"]}

        return call

    def index(lake, xcom):
        from acme.report.publish import ReportWriter

        return ReportWriter(lake).write_index()

    steps = ingest_job_steps("seren", DAY1, campaign=False)
    steps += [Step("build seren 2023-07", build("2023-07"))]
    steps += [Step("publish_index", index)]
    return Scenario("characterize", steps, preload=INGEST_MODULES + REPORT_MODULES)


RECOVERY_NODES = [f"seren-n{i:03d}" for i in range(8)]


def recovery_scenario() -> Scenario:
    """``recover_training`` on the simulated cluster (the demo's job, seren-n005 faulty)."""

    def setup(base: Path) -> None:
        from acme.recovery.synth_checkpoints import write_checkpoint

        for step in (100, 200):
            write_checkpoint(base / "checkpoints", step)

    def request(lake):
        from acme.recovery.recover import RecoveryRequest

        params = {
            "cluster": "seren", "job_id": "demo-pretrain-1", "nodes": RECOVERY_NODES,
            "checkpoint_uri": str(Path(lake.root).parent / "checkpoints"),
            "detected_at": "2026-11-29T12:00:00+00:00",
        }  # fmt: skip
        return RecoveryRequest.from_params(
            params, "kill-campaign", RUN_ID, datetime(2026, 11, 29, tzinfo=UTC)
        )

    def backend(lake):
        from acme.recovery.backends import make_backend

        return make_backend("seren", lake, "demo-pretrain-1")

    def open_recovery(lake, xcom):
        from acme.recovery.recover import open_recovery as open_steps
        from acme.settings import recovery as recovery_settings

        return open_steps(lake, request(lake), backend(lake), recovery_settings())

    def check(round_number: int, index: int):
        def call(lake, xcom):
            from acme.recovery.recover import check_world, plan_second_round

            if round_number == 1:
                world = xcom["open_recovery"]["round1"][index]
            else:
                round1 = [xcom[f"check_round1 {i}"] for i in range(len(xcom["open_recovery"]["round1"]))]
                world = plan_second_round(request(lake), round1)[index]
            return check_world(lake, request(lake), backend(lake), world, round_number)

        return call

    def decide(lake, xcom):
        from acme.recovery.recover import decide_faults

        round1 = [xcom[f"check_round1 {i}"] for i in range(4)]
        return decide_faults(lake, request(lake), round1, [xcom[f"check_round2 {i}"] for i in range(2)])

    def take_out(lake, xcom):
        from acme.recovery.blast_radius import BlastRadiusLimit
        from acme.recovery.recover import take_out_faulty
        from acme.settings import recovery as recovery_settings

        settings = recovery_settings()
        limit = BlastRadiusLimit(settings.max_nodes, settings.max_share)
        return take_out_faulty(lake, request(lake), backend(lake), xcom["decide"], RECOVERY_NODES, limit)

    def choose(lake, xcom):
        from acme.recovery.recover import choose_restart_checkpoint

        return choose_restart_checkpoint(lake, request(lake))

    def restart(lake, xcom):
        from acme.recovery.recover import restart_job

        opened = xcom["open_recovery"]
        return restart_job(
            lake, request(lake), backend(lake), opened["job"], xcom["decide"], xcom["take_out_faulty"],
            xcom["choose_checkpoint"],
        )  # fmt: skip

    def release(lake, xcom):
        from acme.recovery.recover import close_recovery

        return close_recovery(lake, request(lake))

    steps = [Step("open_recovery", open_recovery)]
    steps += [Step(f"check_round1 {i}", check(1, i)) for i in range(4)]
    steps += [Step(f"check_round2 {i}", check(2, i)) for i in range(2)]
    steps += [
        Step("decide", decide),
        # A retry after the killed try cordoned reports the node as "already cordoned" or skipped.
        Step("take_out_faulty", take_out, same_result=lambda manifest: manifest["excluded"]),
        Step("choose_checkpoint", choose),
        # A retry after the killed try restarted reports the same new job, "skipped" when it was logged.
        Step("restart", restart, same_result=lambda manifest: manifest["new_job_id"]),
        # True when this call removed the marker: a retry after a kill past the removal finds none.
        Step("release", release, same_result=None),
    ]
    return Scenario(
        "recover_training", steps, setup, rewritten_in_steps=lambda key: key.endswith("/actions.jsonl")
    )


def evaluation_scenario() -> Scenario:
    """``evaluate_checkpoint``: plan, the node's precursor (a local copy into "shared memory"), every
    trial's inference and metric, results (the priors they fold into)."""

    def setup(base: Path) -> None:
        from tests.fakes.lookup_model import main as write_tiny_model

        write_tiny_model([str(base / "model" / "tiny.pt")])

    def plan(lake, xcom):
        from acme.evaluation.evaluation_run import prepare_evaluation, request_from

        base = Path(lake.root).parent
        params = {
            "model_location": str(base / "model" / "tiny.pt"),
            "model_size": "1B",
            "suite": "tiny",
            "nodes": 1,
        }
        manifest = prepare_evaluation(lake, request_from(params, {}, 8))
        return {k: manifest[k] for k in ("model_id", "run", "model_location", "suite", "trials")}

    def preload(lake, xcom):
        from acme import settings
        from acme.evaluation.precursor import preload_model

        planned = xcom["plan"]
        return preload_model(
            planned["model_location"], settings.evaluation().shm_dir, planned["model_id"]
        ).path

    def infer(index: int):
        def call(lake, xcom):
            from acme import settings
            from acme.evaluation.layout import EvalRun
            from acme.evaluation.trial_steps import run_inference
            from tests.fakes.lookup_model import TinyLookupModel

            trial = xcom["plan"]["trials"][index]
            return run_inference(
                lake, EvalRun(trial["model_id"], trial["run"]), trial["trial_id"], settings.evaluation().shm_dir,
                settings.evaluation().data_dir, 60, load_model=TinyLookupModel.load,
            )["trial_id"]  # fmt: skip

        return call

    def score(index: int):
        def call(lake, xcom):
            from acme import settings
            from acme.evaluation.layout import EvalRun
            from acme.evaluation.trial_steps import run_metric

            trial = xcom["plan"]["trials"][index]
            run = EvalRun(trial["model_id"], trial["run"])
            return run_metric(
                lake,
                run,
                trial["trial_id"],
                settings.evaluation().data_dir,
                settings.evaluation().code_timeout_s,
            )["trial_id"]

        return call

    def collect(lake, xcom):
        from acme.evaluation.evaluation_run import collect_results
        from acme.evaluation.layout import EvalRun

        planned = xcom["plan"]
        return collect_results(lake, EvalRun(planned["model_id"], planned["run"]), planned["suite"])["scores"]

    trials = _tiny_suite_trials()
    steps = [Step("plan", plan), Step("preload_model", preload)]
    steps += [
        step for i in range(trials) for step in (Step(f"infer {i}", infer(i)), Step(f"score {i}", score(i)))
    ]
    steps += [Step("collect_results", collect)]
    modules = (
        "torch",
        "acme.evaluation.evaluation_run",
        "acme.evaluation.trial_steps",
        "acme.evaluation.scoring",
    )
    # A generated program that never ends is stopped at the timeout: 3 s instead of the default 10.
    env = {"ACME_EVAL_CODE_TIMEOUT_S": "3"}
    return Scenario("evaluate_checkpoint", steps, setup, env=env, preload=modules)


def _tiny_suite_trials() -> int:
    """How many trials the plan of the tiny suite on one node has (planned in memory, nothing written)."""
    from acme.evaluation.evaluation_run import resolve_suite_path
    from acme.evaluation.planner import build_plan
    from acme.evaluation.priors import Hardware, RuntimePriors, parse_model_size
    from acme.evaluation.suite import read_suite

    priors = RuntimePriors(hardware=Hardware(gpus_per_node=8))
    return len(build_plan(read_suite(resolve_suite_path("tiny")), 1, parse_model_size("1B"), priors).trials)


# --- the campaign -----------------------------------------------------------------------------------


@dataclass
class TaskFigures:
    task: str
    write_points: int
    kill_choices: int
    clean_s: float
    kills: int = 0
    retries_ok: int = 0
    killed_at: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _reset(lake: Path, state: Path) -> None:
    shutil.rmtree(lake, ignore_errors=True)
    shutil.copytree(state, lake, symlinks=True)


def run_campaign(
    scenario: Scenario,
    base: Path,
    rounds: int,
    tasks: str,
    seed: int,
    pick: Callable[[str, list[WritePoint]], list[KillAt]] | None = None,
    stop_after: str | None = None,
) -> list[TaskFigures]:
    """The clean chain (states and write points per task), then ``rounds`` kills in each of ``tasks``
    (a number: that many of the DAG's writing tasks, chosen by the seeded RNG; or ``all``). ``pick``
    (task name, its write points) chooses the kills instead, in every task it returns some for; the
    chain then ends with the task ``stop_after``."""
    import importlib

    from acme.lake import Lake

    for module in scenario.preload:
        importlib.import_module(module)
    lake_dir, scratch = base / "lake", base / "scratch"
    scratch.mkdir(parents=True)
    lake_dir.mkdir()
    scenario.setup(base)
    xcom: dict[str, Any] = {}
    states: list[Path] = []
    points: list[list] = []
    seconds: list[float] = []
    if stop_after:
        names = [step.name for step in scenario.steps]
        scenario.steps = scenario.steps[: names.index(stop_after) + 1]
    for number, step in enumerate(scenario.steps):
        states.append(base / f"state-{number}")
        shutil.copytree(lake_dir, states[-1], symlinks=True)
        started = time.perf_counter()
        clean = run_forked(lambda step=step: step.call(Lake(str(lake_dir)), xcom), None, scratch)
        seconds.append(round(time.perf_counter() - started, 2))
        assert clean.exitcode == 0, f"{step.name}: the clean run failed:\n{clean.error}"
        xcom[step.name] = clean.result
        points.append(clean.points)
    states.append(base / "state-final")
    shutil.copytree(lake_dir, states[-1], symlinks=True)

    figures = []
    rng = random.Random(f"{seed}:{scenario.dag}")
    chosen = [number for number, step in enumerate(scenario.steps) if step.campaign]
    if pick is not None:
        chosen = [number for number in chosen if pick(scenario.steps[number].name, points[number])]
    elif tasks != "all":
        chosen = sorted(rng.sample(chosen, min(int(tasks), len(chosen))))
    for number in chosen:
        step = scenario.steps[number]
        choices = kill_choices(points[number])
        task = TaskFigures(f"{scenario.dag}.{step.name}", len(points[number]), len(choices), seconds[number])
        figures.append(task)
        if not choices:
            continue
        before, after = states[number], states[number + 1]
        kills = pick(step.name, points[number]) if pick else rng.sample(choices, min(rounds, len(choices)))
        for kill in kills:
            where = f"{kill} {points[number][kill.call - 1].method} {points[number][kill.call - 1].key}"
            _reset(lake_dir, before)
            killed = run_forked(lambda step=step: step.call(Lake(str(lake_dir)), xcom), kill, scratch)
            if not killed.killed:
                task.problems.append(f"{where}: not killed (exit {killed.exitcode}): {killed.error}")
                continue
            task.kills += 1
            task.killed_at.append(where)
            seen = visible_problems(lake_dir, before, after, unpublished, scenario.rewritten_in_steps)
            task.problems += [f"{where}: after the kill: {p}" for p in seen]
            retry = run_forked(lambda step=step: step.call(Lake(str(lake_dir)), xcom), None, scratch)
            if retry.exitcode != 0:
                task.problems.append(f"{where}: the retry failed: {retry.error}")
                continue
            task.retries_ok += 1
            task.problems += [f"{where}: after the retry: {p}" for p in differences(lake_dir, after)]
            if step.same_result and (
                without_volatile(step.same_result(retry.result))
                != without_volatile(step.same_result(xcom[step.name]))
            ):
                task.problems.append(
                    f"{where}: the retry returned {retry.result!r}, the clean run {xcom[step.name]!r}"
                )
    if FIGURES and pick is None:
        _record_figures(scenario.dag, figures)
    return figures


def _record_figures(dag: str, figures: list[TaskFigures]) -> None:
    path = Path(FIGURES)
    document = json.loads(path.read_text()) if path.exists() else {}
    document[dag] = [vars(f) for f in figures]
    path.write_text(json.dumps(document, indent=1))


SCENARIOS = {
    "ingest_job_traces": ingest_jobs_scenario,
    "ingest_metrics": metrics_scenario,
    "diagnose_failures": diagnosis_scenario,
    "characterize": report_scenario,
    "recover_training": recovery_scenario,
    "evaluate_checkpoint": evaluation_scenario,
}


@pytest.fixture
def campaign_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_LAKE_URI", str(tmp_path / "lake"))
    monkeypatch.setenv("ACME_EVAL_SHM_DIR", str(tmp_path / "lake" / "shm"))  # compared like the lake
    for name in ("ACME_LLM_BASE_URL", "ACME_LLM_MODEL", "ACME_LLM_API_KEY", "ACME_RECOVERY_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# The two longest scenarios (40-60 s each on 2026-12-04) are in the slow tier; the four others stay in
# the default run.
SLOW_SCENARIOS = {"characterize", "evaluate_checkpoint"}


@pytest.mark.parametrize(
    "dag", [pytest.param(dag, marks=pytest.mark.slow) if dag in SLOW_SCENARIOS else dag for dag in SCENARIOS]
)
def test_sigkill_at_random_write_points_leaves_nothing_partial_and_the_retry_equals_a_clean_run(
    dag, tmp_path, campaign_env
):
    scenario = SCENARIOS[dag]()
    for name, value in scenario.env.items():
        campaign_env.setenv(name, value)
    figures = run_campaign(scenario, tmp_path, ROUNDS, TASKS, SEED)
    assert figures and all(f.write_points for f in figures), [vars(f) for f in figures]
    problems = [f"{f.task}: {p}" for f in figures for p in f.problems]
    assert not problems, "\n".join(problems)
    assert sum(f.kills for f in figures) == sum(min(ROUNDS, f.kill_choices) for f in figures) > 0
    assert not temporary_files(tmp_path / "lake")


# --- the kills that found bugs, as fixed cases ---------------------------------------------------------


def kill_at(
    task: str, method: str, key_part: str, phase: str
) -> Callable[[str, list[WritePoint]], list[KillAt]]:
    """Kill ``task`` at its last ``method`` call on a key containing ``key_part``, in ``phase``."""

    def pick(name: str, points: list[WritePoint]) -> list[KillAt]:
        if name != task:
            return []
        (*_, point) = [p for p in points if p.method == method and key_part in p.key]
        return [KillAt(point.call, phase)]

    return pick


def assert_killed_once_and_recovered(figures: list[TaskFigures]) -> None:
    assert [(f.kills, f.retries_ok) for f in figures] == [(1, 1)], [vars(f) for f in figures]
    assert not figures[0].problems, "\n".join(figures[0].problems)


def test_ingest_retried_after_its_worker_died_past_the_staging_drop_returns_the_same_partitions(
    tmp_path, campaign_env
):
    """The ingest merged every partition and dropped its staging area; the worker died before the task
    was marked done. The retry (then from the start: no retry point is left) returns the same."""
    scenario = Scenario("ingest_job_traces", ingest_job_steps("seren", DAY1), preload=INGEST_MODULES)
    pick = kill_at("ingest seren-2023-07-01", "delete_prefix", "staging/", "after")
    assert_killed_once_and_recovered(run_campaign(scenario, tmp_path, 1, "all", SEED, pick))


def test_ingest_retried_after_its_staging_drop_stopped_half_way_keeps_the_input_s_validation_record(
    tmp_path, campaign_env
):
    """The staging area was half deleted. The retry must not publish from a partial staging area with
    an empty report (that used to erase the input's record in ``_validation.json``)."""
    scenario = Scenario("ingest_job_traces", ingest_job_steps("seren", DAY1), preload=INGEST_MODULES)
    pick = kill_at("ingest seren-2023-07-01", "delete_prefix", "staging/", "partial")
    assert_killed_once_and_recovered(run_campaign(scenario, tmp_path, 1, "all", SEED, pick))


def test_restart_retried_after_the_cluster_took_it_does_not_restart_the_job_twice(tmp_path, campaign_env):
    """The simulated cluster resubmitted the job; the worker died before the action log said so. The
    retry used to resubmit it again (``demo-pretrain-1-r2``)."""
    pick = kill_at("restart", "write_bytes", "recovery/simulated/", "after")
    figures = run_campaign(recovery_scenario(), tmp_path, 1, "all", SEED, pick, stop_after="restart")
    assert_killed_once_and_recovered(figures)


def test_preload_killed_before_its_rename_leaves_no_staging_copy_in_shared_memory_after_the_retry(
    tmp_path, campaign_env
):
    pick = kill_at("preload_model", "rename", "", "before")
    figures = run_campaign(evaluation_scenario(), tmp_path, 1, "all", SEED, pick, stop_after="preload_model")
    assert_killed_once_and_recovered(figures)


@pytest.mark.parametrize("phase", ["partial", "unrenamed"])
def test_a_write_killed_before_its_rename_is_never_read_and_the_next_write_removes_its_temporary_file(
    tmp_path, phase
):
    """A complete but unrenamed temporary file beside ``jobs.parquet`` used to be read by Hive-style
    dataset readers (``pyarrow.dataset``) as a second data file: every job twice."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from acme.lake import Lake

    lake_dir = tmp_path / "lake"
    key = "jobs/cluster=seren/date=2023-07-01/jobs.parquet"
    Lake(str(lake_dir)).write_parquet(key, pa.table({"job_id": ["a", "b"]}))
    newer = pa.table({"job_id": ["a", "b", "c"]})

    def write() -> None:
        Lake(str(lake_dir)).write_parquet(key, newer)

    killed = run_forked(write, KillAt(1, phase), tmp_path)
    assert killed.killed
    assert len(temporary_files(lake_dir)) == 1
    assert ds.dataset(lake_dir / "jobs", format="parquet", partitioning="hive").to_table().num_rows == 2
    assert run_forked(write, None, tmp_path).exitcode == 0
    assert not temporary_files(lake_dir)
    assert ds.dataset(lake_dir / "jobs", format="parquet", partitioning="hive").to_table().num_rows == 3
