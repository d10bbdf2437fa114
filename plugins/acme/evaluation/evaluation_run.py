"""One evaluation of a checkpoint from start to finish: plan it, then collect its results.

``prepare_evaluation`` is the DAG's plan task: it names the evaluation (``EvalRun``), plans it
with the priors learned so far (``eval/priors/priors.json``), publishes the plan — or reuses the
one a previous run of the same evaluation published, so a re-run maps the same trials and skips
those already done — and returns the small manifest the DAG maps over.

``collect_results`` is the aggregation task: per-dataset scores from every trial's metrics, the
results table (Parquet), the Markdown report, this run's measured times
(``eval/priors/measurements/…``) and their fold into the priors for the next plan (EMA; the
evaluation is recorded in the priors file, in the same write, so a re-run never folds it twice).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from acme.errors import InputError
from acme.evaluation.layout import PRIORS_KEY, EvalRun, run_key_for
from acme.evaluation.planner import Plan, build_plan
from acme.evaluation.precursor import model_id_for
from acme.evaluation.priors import Hardware, Measurement, RuntimePriors, parse_model_size
from acme.evaluation.scoring import METRIC_NAMES
from acme.evaluation.suite import Suite, read_suite
from acme.lake import Lake

BUNDLED_SUITES = {"real": "real_suite.csv", "tiny": "tiny_suite.csv", "default": "default_suite.csv"}


def resolve_suite_path(suite: str) -> Path:
    """``real`` / ``tiny`` / ``default`` (bundled in ``include/eval/``) or a path to a suite CSV."""
    from acme import settings

    if suite in BUNDLED_SUITES:
        return settings.project().include_dir / "eval" / BUNDLED_SUITES[suite]
    return Path(suite)


@dataclass(frozen=True)
class EvaluationRequest:
    """What the DAG was asked to evaluate (from Params or a checkpoint Asset event)."""

    model_location: str
    model_size: str
    suite_path: str
    nodes: int
    gpus_per_node: int = 8


def request_from(params: dict[str, Any], announced: dict[str, Any], gpus_per_node: int) -> EvaluationRequest:
    """The request of a DAG run: its Params, completed by the checkpoint event that triggered it.

    A location given as a Param wins (a manual run); otherwise the event's ``location`` is used and
    its ``model_size``, when present, replaces the Param's default.
    """
    location = params.get("model_location") or announced.get("location") or ""
    size = announced.get("model_size") if not params.get("model_location") else None
    return EvaluationRequest(
        model_location=str(location),
        model_size=str(size or params.get("model_size") or "7B"),
        suite_path=str(resolve_suite_path(str(params.get("suite") or "tiny"))),
        nodes=int(params.get("nodes") or 1),
        gpus_per_node=gpus_per_node,
    )


def load_priors(lake: Lake, hardware: Hardware) -> tuple[RuntimePriors, list[str]]:
    """The learned priors and the evaluations already folded into them."""
    data = lake.read_json(PRIORS_KEY)
    if data is None:
        return RuntimePriors(hardware=hardware), []
    priors = RuntimePriors.from_dict(data, source=lake.url(PRIORS_KEY))
    # The hardware is this deployment's; only the load throughput is learned.
    priors.hardware = replace(hardware, shm_read_gbytes_s=priors.hardware.shm_read_gbytes_s)
    return priors, list(data.get("folded_runs", []))


def prepare_evaluation(lake: Lake, request: EvaluationRequest) -> dict[str, Any]:
    """Plan (or re-use the plan of) this evaluation; returns the manifest the DAG maps over."""
    if not request.model_location:
        raise InputError("params", "no model location: set model_location or trigger from a checkpoint")
    model = parse_model_size(request.model_size)
    suite = read_suite(request.suite_path)
    run = EvalRun(model_id_for(request.model_location), run_key_for(request.suite_path, model.name))
    warnings = list(suite.warnings)
    if lake.exists(run.plan_key):
        plan = Plan.from_json(lake.read_bytes(run.plan_key).decode(), source=lake.url(run.plan_key))
        reused = True
        if plan.nodes != request.nodes:
            warnings.append(f"re-using the evaluation's plan for {plan.nodes} node(s), not {request.nodes}")
    else:
        priors, _ = load_priors(lake, Hardware(gpus_per_node=request.gpus_per_node))
        plan = build_plan(suite, request.nodes, model, priors)
        lake.write_bytes(run.plan_key, plan.to_json().encode())
        reused = False
    return {
        **run.to_dict(),
        "model_location": request.model_location,
        "model_size": model.name,
        "suite": str(request.suite_path),
        "plan": lake.url(run.plan_key),
        "plan_reused": reused,
        "expected_makespan_s": plan.expected_makespan_s,
        "precursors": [{"node": p.node, "nodes": plan.nodes} for p in plan.precursors],
        "trials": [
            {
                "trial_id": t.trial_id,
                "node": t.node,
                "gpus": list(t.gpus),
                "nodes": plan.nodes,
                "gpus_per_trial": plan.gpus_per_trial,
                **run.to_dict(),
            }
            for t in plan.trials_in_order()
        ],
        "warnings": warnings,
    }


def simulate_evaluation(request: EvaluationRequest) -> dict[str, Any]:
    """A dry run: plan the suite and simulate it against the baselines; nothing is written."""
    from acme.evaluation.simulator import compare

    suite = read_suite(request.suite_path)
    result = compare(
        suite, request.nodes, request.model_size, hardware=Hardware(gpus_per_node=request.gpus_per_node)
    )
    assert (
        result.ours is not None and result.naive is not None and result.opencompass is not None
    )  # simulated
    ours, naive, opencompass = result.ours.makespan_s, result.naive.makespan_s, result.opencompass.makespan_s
    return {
        "trials": len(result.plan.trials),
        "makespan_s": round(ours, 1),
        "naive_makespan_s": round(naive, 1),
        "opencompass_makespan_s": round(opencompass, 1),
        "lower_bound_s": round(result.bound.value_s, 1),
        "speedup_vs_naive": round(naive / ours, 3),
        "speedup_vs_opencompass": round(opencompass / ours, 3),
        "warnings": list(result.warnings),
    }


def plan_evaluation(
    params: dict[str, Any], announced: dict[str, Any], gpus_per_node: int, lake: Callable[[], Lake]
) -> dict[str, Any]:
    """The DAG's plan step: a dry run's simulation, or the published plan split into what the steps map over.

    ``lake`` is called only when the evaluation is really planned (a dry run writes nothing).
    """
    request = request_from(params, announced, gpus_per_node)
    if params.get("dry_run"):
        return {"evaluation": {}, "precursors": [], "trials": [], "simulation": simulate_evaluation(request)}
    manifest = prepare_evaluation(lake(), request)
    return {
        "evaluation": {k: manifest[k] for k in ("model_id", "run", "model_location", "suite")},
        "precursors": manifest["precursors"],
        "trials": manifest["trials"],
        "summary": {k: manifest[k] for k in ("plan", "plan_reused", "expected_makespan_s", "warnings")},
    }


def _measurements(lake: Lake, run: EvalRun, plan: Plan, metrics: dict[str, dict]) -> list[dict]:
    """Per slice: samples, inference and metric seconds (what the priors learn from), tokens."""
    rows = []
    for trial in plan.trials:
        timings = lake.read_json(run.timings_key(trial.trial_id))
        if timings is None:  # outputs from a run that crashed before writing timings: nothing to learn
            continue
        metric_s = {(s["dataset"], s["start"]): s["metric_s"] for s in metrics[trial.trial_id]["slices"]}
        for piece in timings["slices"]:
            rows.append(
                {
                    "trial_id": trial.trial_id,
                    "dataset": piece["dataset"],
                    "n_samples": piece["n_samples"],
                    "infer_s": piece["infer_s"],
                    "metric_s": metric_s.get((piece["dataset"], piece["start"])),
                    "model_size": plan.model,
                    "gpus": plan.gpus_per_trial,
                    "load_s": timings["load_s"],
                    "model_bytes": timings["model_bytes"],
                    "setup_s": timings["setup_s"],
                    "model": timings.get("model"),
                    "sample_s": piece.get("sample_s", []),
                    "tokens_read": piece.get("tokens_read", 0),
                    "tokens_written": piece.get("tokens_written", 0),
                }
            )
    return rows


def wilson_interval(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion (sound at 0 and n correct, unlike p ± 1.96·SE)."""
    if n <= 0:
        return 0.0, 1.0
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def fold_into_priors(lake: Lake, run: EvalRun, measurements: list[dict], suite: Suite | None) -> dict:
    """Blend this evaluation's measurements into ``eval/priors/priors.json`` once (under a lock)."""
    evaluation = f"{run.model_id}/{run.run}"
    with lake.lock("eval-priors"):
        priors, folded = load_priors(lake, Hardware())
        if evaluation in folded:
            return {"folded": False, "reason": "already folded", "priors": lake.url(PRIORS_KEY)}
        skipped = priors.update([Measurement.from_mapping(m) for m in measurements], suite)
        for trial_id in sorted({m["trial_id"] for m in measurements}):
            first = next(m for m in measurements if m["trial_id"] == trial_id)
            priors.update_shm_load(first["model_bytes"], first["load_s"])
            # The trial's own set-up and model load, so the next plan's per-trial costs are measured ones.
            if first.get("setup_s") is not None:
                skipped += [
                    f"trial {trial_id}: {why}"
                    for why in priors.update_trial(first["setup_s"], first["load_s"], first["model_size"])
                ]
        document = priors.to_dict()
        document["folded_runs"] = [*folded, evaluation]
        lake.write_json(PRIORS_KEY, document)
    return {"folded": True, "skipped": skipped, "priors": lake.url(PRIORS_KEY)}


def collect_results(lake: Lake, run: EvalRun, suite_path: str | None = None) -> dict[str, Any]:
    """Results table + report + measured times of a finished evaluation; priors updated."""
    import pyarrow as pa

    from acme.evaluation.trial_steps import load_plan

    plan = load_plan(lake, run)
    metrics: dict[str, dict] = {}
    for trial in plan.trials:
        key = run.metrics_key(trial.trial_id)
        if not lake.exists(key):
            raise InputError(lake.url(key), "missing: the trial's metric step has not finished")
        metrics[trial.trial_id] = json.loads(lake.read_bytes(key))
    measurements = _measurements(lake, run, plan, metrics)
    timing: dict[str, dict[str, Any]] = {}
    for m in measurements:
        entry = timing.setdefault(m["dataset"], {"infer_s": 0.0, "sample_s": [], "read": 0, "written": 0})
        entry["infer_s"] += m["infer_s"]
        entry["sample_s"] += m["sample_s"]
        entry["read"] += m["tokens_read"]
        entry["written"] += m["tokens_written"]
    datasets: dict[str, dict] = {}
    for document in metrics.values():
        for s in document["slices"]:
            entry = datasets.setdefault(
                s["dataset"],
                {"dataset": s["dataset"], "metric_kind": s["metric_kind"], "metric": s["metric"]}
                | {"n_samples": 0, "correct": 0, "trials": 0, "metric_s": 0.0},
            )
            entry["n_samples"] += s["n_samples"]
            entry["correct"] += s["correct"]
            entry["trials"] += 1
            entry["metric_s"] += s["metric_s"]
    rows = []
    for name in sorted(datasets):
        entry = datasets[name]
        entry["score"] = entry["correct"] / entry["n_samples"]
        entry["score_low"], entry["score_high"] = wilson_interval(entry["correct"], entry["n_samples"])
        measured = timing.get(name)
        entry["infer_s"] = None if measured is None else measured["infer_s"]
        samples = sorted(measured["sample_s"]) if measured else []
        entry["sample_s_median"] = samples[len(samples) // 2] if samples else None
        entry["sample_s_max"] = samples[-1] if samples else None
        entry["tokens_read"] = measured["read"] if measured else None
        entry["tokens_written"] = measured["written"] if measured else None
        rows.append(entry)
    table = pa.Table.from_pylist(rows)
    lake.write_parquet(run.results_key, table)
    lake.write_json(run.measurements_key, {"evaluation": run.to_dict(), "measurements": measurements})
    model = next((m["model"] for m in measurements if m.get("model")), None)
    lake.write_bytes(run.report_key, render_report(run, plan, rows, model).encode())
    suite = read_suite(suite_path) if suite_path and Path(suite_path).exists() else None
    folded = fold_into_priors(lake, run, measurements, suite)
    return {
        **run.to_dict(),
        "results": lake.url(run.results_key),
        "report": lake.url(run.report_key),
        "scores": {r["dataset"]: round(r["score"], 4) for r in rows},
        "priors": folded,
    }


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _rate(count: float | None, seconds: float | None) -> str:
    return "—" if not count or not seconds else f"{count / seconds:.0f}"


def render_report(run: EvalRun, plan: Plan, rows: list[dict], model: str | None = None) -> str:
    """A short Markdown report: one line per dataset in fixed units, then how the plan ran.

    Scores are percentages with one decimal and their 95% Wilson interval; times are seconds with
    two decimals; token rates are whole tokens per second (read: prompts and scored options;
    written: generated tokens).
    """
    lines = [
        f"# Evaluation of `{run.model_id}` ({plan.model}{', ' + model if model else ''})",
        "",
        f"Suite run `{run.run}`: {len(rows)} datasets, {sum(r['n_samples'] for r in rows)} samples, "
        f"{len(plan.trials)} trials on {plan.nodes} node(s); planned makespan "
        f"{plan.expected_makespan_s:,.0f} s.",
        "",
        "| dataset | metric | score % | 95% interval % | samples | trials | inference s | s/sample (median) "
        "| s/sample (max) | read tok/s | written tok/s | metric s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        low, high = r.get("score_low"), r.get("score_high")
        interval = "—" if low is None or high is None else f"{100 * low:.1f}–{100 * high:.1f}"
        lines.append(
            f"| {r['dataset']} | {r['metric']} | {100 * r['score']:.1f} | {interval} | {r['n_samples']} "
            f"| {r['trials']} | {_seconds(r['infer_s'])} | {_seconds(r.get('sample_s_median'))} "
            f"| {_seconds(r.get('sample_s_max'))} | {_rate(r.get('tokens_read'), r['infer_s'])} "
            f"| {_rate(r.get('tokens_written'), r['infer_s'])} | {_seconds(r['metric_s'])} |"
        )
    lines += ["", f"Metrics: {', '.join(f'{k} → {v}' for k, v in METRIC_NAMES.items())}.", ""]
    return "\n".join(lines)


def collect_evaluation(lake: Lake, evaluation: dict[str, Any]) -> dict[str, Any]:
    """The DAG's collect step for an evaluation dict (``model_id``, ``run``, ``suite``) of the plan step."""
    return collect_results(lake, EvalRun(evaluation["model_id"], evaluation["run"]), evaluation["suite"])
