"""The trial coordinator's plan: splitting, batching, ordering (LPT), placement, precursors, JSON."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from acme.errors import ConfigError, InputError
from acme.evaluation.planner import Plan, PlannerConfig, build_plan
from acme.evaluation.priors import Hardware, RuntimePriors, TrialOverheads, parse_model_size, remote_fetch_s
from acme.evaluation.suite import load_default_suite, parse_suite

NO_OVERHEADS = TrialOverheads(setup_s=0.0, preprocess_s_per_sample=0.0, metric_task_setup_s=0.0)
HEADER = "dataset,n_samples,metric_kind,gpu_s_per_sample,cpu_s_per_sample\n"


def covered(plan: Plan) -> dict[str, list[tuple[int, int]]]:
    ranges = defaultdict(list)
    for trial in plan.trials:
        for s in trial.slices:
            ranges[s.dataset].append((s.start, s.stop))
    return {name: sorted(r) for name, r in ranges.items()}


def test_long_datasets_are_split_and_small_ones_batched():
    rows = ["big,1000,match,1.0,0"] + [f"tiny{i:02d},10,match,0.1,0" for i in range(20)]
    suite = parse_suite(HEADER + "\n".join(rows) + "\n")
    config = PlannerConfig(max_trial_fraction=0.01, min_trial_s=100.0, batch_fraction=0.5, warm_start=False)
    overheads = TrialOverheads(setup_s=0.0, preprocess_s_per_sample=0.002, metric_task_setup_s=0.0)
    plan = build_plan(suite, nodes=1, priors=RuntimePriors(), overheads=overheads, config=config)
    assert plan.max_trial_s == 100.0
    big = [t for t in plan.trials if t.slices[0].dataset == "big"]
    assert len(big) == 11  # ceil(1000 × 1.002 / 100)
    assert all(t.expected_infer_s <= 100.0 for t in big)
    assert covered(plan)["big"][0][0] == 0 and covered(plan)["big"][-1][1] == 1000
    batched = [t for t in plan.trials if t.slices[0].dataset.startswith("tiny")]
    assert len(batched) == 1 and len(batched[0].slices) == 20  # one model load for twenty datasets
    assert len(plan.trials) == 12


def test_every_sample_is_planned_exactly_once_and_trials_stay_short():
    suite = load_default_suite()
    plan = build_plan(suite, nodes=4)
    ranges = covered(plan)
    for dataset in suite.datasets:
        spans = ranges[dataset.name]
        assert spans[0][0] == 0 and spans[-1][1] == dataset.n_samples
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    overheads = 0.002
    for trial in plan.trials:
        gpu = sum(s.expected_infer_s + overheads * s.n_samples for s in trial.slices)
        assert gpu <= plan.max_trial_s * 1.0001 or len(trial.slices) == 1


def test_slices_too_small_to_split_stay_whole():
    suite = parse_suite(HEADER + "slow,20,match,100.0,0\n")
    config = PlannerConfig(min_trial_s=100.0, max_trial_fraction=0.01, min_slice_samples=16)
    plan = build_plan(suite, nodes=1, overheads=NO_OVERHEADS, config=config)
    assert len(plan.trials) == 1 and plan.trials[0].slices[0].n_samples == 20


def test_lpt_places_longest_first_on_the_earliest_free_gpu():
    rows = [
        "a,100,match,5.0,0",
        "b,100,match,4.0,0",
        "c,100,match,3.0,0",
        "d,100,match,3.0,0",
        "e,100,match,3.0,0",
    ]
    suite = parse_suite(HEADER + "\n".join(rows) + "\n")
    priors = RuntimePriors(hardware=Hardware(gpus_per_node=2))
    config = PlannerConfig(max_trial_fraction=1.0, min_trial_s=1e9, batch_fraction=1e-9, warm_start=False)
    plan = build_plan(suite, nodes=1, priors=priors, overheads=NO_OVERHEADS, config=config)
    placed = [
        (t.slices[0].dataset, t.gpus, t.expected_start_s, t.expected_gpu_release_s)
        for t in plan.trials_in_order()
    ]
    fetch = remote_fetch_s(parse_model_size("7B"), priors.hardware)  # the precursor: 4.48 s
    shm = 1.4
    assert placed == [
        ("a", (0,), 0.0, pytest.approx(fetch + shm + 500)),
        ("b", (1,), 0.0, pytest.approx(fetch + shm + 400)),
        ("c", (1,), pytest.approx(fetch + shm + 400), pytest.approx(fetch + 2 * shm + 700)),
        ("d", (0,), pytest.approx(fetch + shm + 500), pytest.approx(fetch + 2 * shm + 800)),
        ("e", (1,), pytest.approx(fetch + 2 * shm + 700), pytest.approx(fetch + 3 * shm + 1000)),
    ]
    assert plan.expected_makespan_s == pytest.approx(fetch + 3 * shm + 1000)


def test_trials_with_long_cpu_metrics_start_first_and_lead_their_trial():
    rows = [
        "gen,100,match,1.0,0",
        "code,100,code_exec,0.8,0.5",
        "tiny_code,10,code_exec,0.1,1.0",
        "tiny_gen,10,match,0.1,0",
    ]
    suite = parse_suite(HEADER + "\n".join(rows) + "\n")
    config = PlannerConfig(max_trial_fraction=1.0, min_trial_s=1000.0, batch_fraction=0.05, warm_start=False)
    plan = build_plan(suite, nodes=1, overheads=NO_OVERHEADS, config=config)
    ordered = [[s.dataset for s in t.slices] for t in plan.trials_in_order()]
    # code: 80 s inference + 50 s metric after it beats gen's 100 s; the batch runs its code slice first.
    assert ordered == [["code"], ["gen"], ["tiny_code", "tiny_gen"]]


def test_default_plan_is_ordered_by_critical_path():
    plan = build_plan(load_default_suite(), nodes=1)
    paths = []
    for trial in plan.trials_in_order():
        elapsed, finish = 0.0, 0.0
        for s in trial.slices:
            elapsed += s.expected_infer_s + 0.002 * s.n_samples
            finish = max(finish, elapsed + 5.0 + s.expected_metric_s)
        paths.append(max(elapsed, finish))
    assert paths == sorted(paths, reverse=True)
    for trial in plan.trials:
        metrics = [s.expected_metric_s for s in trial.slices]
        assert metrics == sorted(metrics, reverse=True)


def test_one_precursor_per_node_and_trials_spread_over_nodes():
    plan = build_plan(load_default_suite(), nodes=3)
    fetch = remote_fetch_s(parse_model_size("7B"), Hardware())
    assert [(p.node, p.checkpoint_bytes, p.expected_ready_s) for p in plan.precursors] == [
        (n, 14e9, pytest.approx(fetch)) for n in range(3)
    ]
    assert {t.node for t in plan.trials} == {0, 1, 2}
    assert {t.gpus for t in plan.trials} == {(g,) for g in range(8)}
    assert plan.slots == 24


def test_large_models_take_several_gpus_per_trial():
    plan = build_plan(load_default_suite(), nodes=1, model="70B")
    assert plan.gpus_per_trial == 4
    assert {t.gpus for t in plan.trials} == {(0, 1, 2, 3), (4, 5, 6, 7)}


def test_warm_start_is_scheduled_before_the_gpu_frees():
    plan = build_plan(load_default_suite(), nodes=1)
    assert plan.warm_start
    for trial in plan.trials:
        gpu = sum(s.expected_infer_s + 0.002 * s.n_samples for s in trial.slices)
        assert 0.0 <= trial.warm_next_after_s <= gpu


def test_plan_round_trips_through_json():
    plan = build_plan(load_default_suite(), nodes=2)
    text = plan.to_json()
    assert Plan.from_json(text) == plan
    data = json.loads(text)
    assert data["format"] == "acme.evaluation.plan" and len(data["trials"]) == len(plan.trials)
    assert set(data["trials"][0]) >= {"trial_id", "node", "gpus", "slices", "order", "expected_end_s"}


def test_bad_plans_and_configs_are_rejected():
    with pytest.raises(InputError, match="not an acme.evaluation.plan"):
        Plan.from_json('{"format": "x"}')
    with pytest.raises(InputError, match="not JSON"):
        Plan.from_json("[")
    with pytest.raises(ConfigError, match="max_trial_fraction"):
        PlannerConfig(max_trial_fraction=0.0)
    with pytest.raises(ConfigError, match="nodes must be at least 1"):
        build_plan(load_default_suite(), nodes=0)


def test_plan_eval_plans_from_measured_priors_and_says_which(tmp_path):
    """plan-eval --priors: datasets with measured per-sample times are planned from them."""
    from acme.evaluation.priors import Measurement, RuntimePriors
    from acme.evaluation.simulator import plan_eval_cli

    suite = tmp_path / "s.csv"
    suite.write_text("dataset,n_samples,metric_kind\ngsm8k_gen,30,\narc_ppl,19,\n")
    priors = RuntimePriors()
    # gsm8k measured 100x slower than its suite default on a 135M model: the plan must grow with it.
    priors.update([Measurement("gsm8k_gen", 30, infer_s=30 * 2.0, model_size="135M", gpus=1)])
    path = tmp_path / "priors.json"
    path.write_text(priors.to_json())
    default = plan_eval_cli(suite, 1, 1, "135M", simulate=False)
    measured = plan_eval_cli(suite, 1, 1, "135M", simulate=False, priors_source=str(path))
    said = measured["priors"]
    assert {k: said[k] for k in ("source", "measured", "not_measured")} == {
        "source": str(path), "measured": ["gsm8k_gen"], "not_measured": ["arc_ppl"]
    }  # fmt: skip
    # No real trial measured set-up and load yet: the paper's set-up and a load from the checkpoint's bytes.
    assert (said["trial_setup"], said["model_load"]) == (
        "calibrated to the paper",
        "modelled from checkpoint bytes",
    )
    assert default["priors"] == "kind and suite defaults"
    assert measured["makespan_s"] > default["makespan_s"] + 50  # 30 samples x 2 s were measured
    assert measured["lower_bound_s"] <= measured["makespan_s"]


def test_plan_eval_refuses_a_missing_priors_file(tmp_path):
    from acme.errors import InputError
    from acme.evaluation.simulator import plan_eval_cli

    suite = tmp_path / "s.csv"
    suite.write_text("dataset,n_samples,metric_kind\nx,3,match\n")
    with pytest.raises(InputError, match="cannot read the priors"):
        plan_eval_cli(suite, 1, 1, "7B", simulate=False, priors_source=str(tmp_path / "nope.json"))
