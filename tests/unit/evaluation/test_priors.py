"""Runtime priors: model sizes, seeding, the paper calibration, load times, learning, storage."""

from __future__ import annotations

import json

import pytest

from acme.errors import ConfigError, InputError
from acme.evaluation.priors import (
    CODE_EXEC_CPU_S_PER_SAMPLE,
    PAPER_HUMANEVAL_LOAD_SHARE,
    PAPER_HUMANEVAL_METRIC_IDLE_SHARE,
    Hardware,
    Measurement,
    RuntimePriors,
    calibrate_to_paper,
    parse_model_size,
    remote_fetch_s,
    remote_load_s,
    shm_load_s,
)
from acme.evaluation.suite import EvalDataset, parse_suite


@pytest.mark.parametrize(
    ("text", "params", "gpus"),
    [
        ("7B", 7e9, 1),
        ("13b", 13e9, 1),
        ("20B", 20e9, 1),
        ("34B", 34e9, 2),
        ("70B", 70e9, 4),
        ("500M", 5e8, 1),
    ],
)
def test_model_sizes_and_gpus_per_trial(text, params, gpus):
    model = parse_model_size(text)
    assert model.params == params
    assert model.checkpoint_bytes == params * 2  # bf16
    assert model.gpus_per_trial() == gpus


def test_bad_model_sizes_are_config_errors():
    with pytest.raises(ConfigError, match="not like 7B"):
        parse_model_size("seven billion")
    with pytest.raises(ConfigError, match="needs 16 GPUs"):
        parse_model_size("300B").gpus_per_trial(max_gpus=4)


def test_seeding_uses_measured_then_suite_then_kind():
    priors = RuntimePriors()
    model = parse_model_size("7B")
    mc = EvalDataset("mc", 100, "ppl", n_choices=5)
    gen = EvalDataset("gen", 100, "match")
    given = EvalDataset("cot", 100, "match", gpu_s_per_sample=0.9, cpu_s_per_sample=0.05)
    assert priors.runtime(mc, model).infer_s_per_sample == pytest.approx(0.0125 * 5)
    assert priors.runtime(gen, model).infer_s_per_sample == pytest.approx(0.12)
    assert priors.runtime(gen, model).source == "kind"
    runtime = priors.runtime(given, model)
    assert (runtime.infer_s_per_sample, runtime.metric_s_per_sample, runtime.source) == (0.9, 0.05, "suite")
    code = EvalDataset("humaneval", 164, "code_exec")
    assert priors.runtime(code, model).metric_s_per_sample == pytest.approx(CODE_EXEC_CPU_S_PER_SAMPLE)


def test_inference_scales_with_parameter_count_and_tensor_parallel_gpus():
    priors = RuntimePriors()
    gen = EvalDataset("gen", 100, "match")
    base = priors.runtime(gen, parse_model_size("7B")).infer_s_per_sample
    assert priors.runtime(gen, parse_model_size("13B")).infer_s_per_sample == pytest.approx(base * 13 / 7)
    # 70B needs 4 GPUs per trial at 85% scaling: per-sample wall time 10 / (4 × 0.85) of 7B's.
    assert priors.runtime(gen, parse_model_size("70B")).infer_s_per_sample == pytest.approx(base * 10 / 3.4)
    # Metric time does not depend on the evaluated model.
    assert priors.runtime(gen, parse_model_size("70B")).metric_s_per_sample == pytest.approx(0.002)


def test_load_times_from_checkpoint_bytes_and_shared_nic():
    hardware = Hardware()
    model = parse_model_size("7B")
    assert remote_fetch_s(model, hardware) == pytest.approx(14e9 / (25e9 / 8))
    assert remote_fetch_s(model, hardware, concurrent=8) == pytest.approx(8 * 14e9 / 3.125e9)
    assert remote_load_s(model, hardware) == pytest.approx(14e9 / 3.125e9 + 14e9 / 16e9)
    assert shm_load_s(model, hardware) == pytest.approx(1.4)
    assert remote_fetch_s(parse_model_size("70B"), hardware) == pytest.approx(10 * 14e9 / 3.125e9)


def test_calibration_reproduces_the_paper_humaneval_shares():
    calibration = calibrate_to_paper()
    trial = calibration.humaneval_trial_s
    assert calibration.load_and_preprocess_s / trial == pytest.approx(PAPER_HUMANEVAL_LOAD_SHARE)
    assert calibration.metric_s / trial == pytest.approx(PAPER_HUMANEVAL_METRIC_IDLE_SHARE)
    inference = 164 * 0.6
    assert (trial - calibration.load_and_preprocess_s - calibration.metric_s) == pytest.approx(inference)
    # 56.4 s before inference = set-up + 8-way shared fetch (35.8 s) + GPU copy + preprocessing.
    assert calibration.setup_s == pytest.approx(56.365 - 35.84 - 0.875 - 0.328, abs=0.01)
    assert calibration.code_exec_cpu_s_per_sample == pytest.approx(calibration.metric_s / 164)


def test_update_blends_measurements_with_an_ema():
    suite = parse_suite("dataset,n_samples,metric_kind\ngen,100,match\n")
    priors = RuntimePriors(alpha=0.5)
    skipped = priors.update([Measurement("gen", 100, infer_s=20.0, metric_s=1.0)], suite)
    assert skipped == []
    model = parse_model_size("7B")
    gen = suite.datasets[0]
    # seed 0.12 s, observed 0.20 s → 0.16 s; metric seed 0.002, observed 0.01 → 0.006.
    assert priors.runtime(gen, model).infer_s_per_sample == pytest.approx(0.16)
    assert priors.runtime(gen, model).metric_s_per_sample == pytest.approx(0.006)
    assert priors.runtime(gen, model).source == "measured"
    # A 14B measurement is normalized to the 7B reference before blending: 0.4 s at 14B = 0.2 s at 7B.
    priors.update([{"dataset": "gen", "n_samples": 50, "infer_s": 20.0, "model_size": "14B"}])
    assert priors.learned["gen"]["gpu_s_per_sample_ref"] == pytest.approx(0.18)
    assert priors.learned["gen"]["observations"] == 2


def test_update_skips_unusable_measurements():
    priors = RuntimePriors()
    skipped = priors.update(
        [
            {"dataset": "x", "n_samples": 0, "infer_s": 1.0},
            {"dataset": "x", "n_samples": 10, "infer_s": -1.0},
            {"dataset": "x"},
            {"dataset": "x", "n_samples": 10, "infer_s": 1.0, "model_size": "huge"},
        ]
    )
    assert len(skipped) == 4
    assert priors.learned.get("x", {}).get("observations", 0) == 0
    # Without a seed the first measurement is taken as is.
    priors.update([Measurement("new", 10, infer_s=3.0)])
    assert priors.learned["new"]["gpu_s_per_sample_ref"] == pytest.approx(0.3)


def test_priors_round_trip_through_json():
    priors = RuntimePriors(hardware=Hardware(cpu_cores_per_node=128), alpha=0.3)
    priors.update([Measurement("gsm8k", 1319, infer_s=1200.0, metric_s=3.0)])
    again = RuntimePriors.from_json(priors.to_json())
    assert again == priors
    assert json.loads(priors.to_json())["datasets"]["gsm8k"]["observations"] == 1


def test_malformed_priors_are_input_errors():
    with pytest.raises(InputError, match="not JSON"):
        RuntimePriors.from_json("{", source="p.json")
    with pytest.raises(InputError, match="not acme.evaluation.priors"):
        RuntimePriors.from_json('{"format": "other"}')
    with pytest.raises(InputError, match="malformed priors"):
        RuntimePriors.from_json(
            '{"format": "acme.evaluation.priors", "version": 1, "datasets": {"x": {"observations": "many"}}}'
        )


def test_trial_set_up_and_model_load_are_learned_and_planned_with():
    """Measured per-trial costs replace the paper-calibrated set-up and the bytes-modelled load."""
    from acme.evaluation.planner import build_plan
    from acme.evaluation.priors import default_overheads

    suite = parse_suite("dataset,n_samples,metric_kind\ngen,10,match\n")
    priors = RuntimePriors(alpha=0.5)
    calibrated = default_overheads(priors.hardware)
    assert priors.trial_overheads("135M") == calibrated  # nothing measured yet
    before = build_plan(suite, 1, "135M", priors)

    assert priors.update_trial(0.8, 0.2, "135M") == []
    assert priors.update_trial(1.2, 0.4, "135M") == []
    assert priors.trial["setup_s"] == pytest.approx(0.5 * 0.8 + 0.5 * 1.2)  # EMA from the first measurement
    assert priors.trial["setup_observations"] == 2
    overheads = priors.trial_overheads("135M")
    assert overheads.setup_s == pytest.approx(1.0) and overheads.load_s == pytest.approx(0.3)
    assert priors.trial_overheads("7B").load_s is None  # a load is learned per model size
    after = build_plan(suite, 1, "135M", priors)
    # One trial: its start-up went from the calibrated set-up + modelled load to the measured ones.
    gained = (calibrated.setup_s + shm_load_s(parse_model_size("135M"), priors.hardware)) - (1.0 + 0.3)
    assert before.expected_makespan_s - after.expected_makespan_s == pytest.approx(gained, rel=1e-6)

    assert len(priors.update_trial(float("nan"), -1.0, "135M")) == 2  # not times: nothing learned
    assert priors.trial["setup_observations"] == 2
    again = RuntimePriors.from_json(priors.to_json())
    assert again.trial == priors.trial and again.trial_overheads("135M") == overheads
