"""What a DAG run evaluates (Params or the checkpoint event), and the dry run's simulation."""

from __future__ import annotations

import pytest

from acme.errors import InputError
from acme.evaluation.evaluation_run import (
    EvaluationRequest,
    prepare_evaluation,
    request_from,
    resolve_suite_path,
    simulate_evaluation,
)
from acme.lake import Lake

PARAMS = {"model_location": None, "model_size": "7B", "suite": "tiny", "nodes": 2, "dry_run": False}


def test_a_checkpoint_event_supplies_location_and_size():
    request = request_from(PARAMS, {"location": "s3://ckpt/llama/step-9", "model_size": "13B"}, 8)
    assert request == EvaluationRequest(
        "s3://ckpt/llama/step-9", "13B", str(resolve_suite_path("tiny")), 2, gpus_per_node=8
    )


def test_a_manual_location_wins_over_the_event_and_keeps_its_own_size():
    params = {**PARAMS, "model_location": "/ckpt/manual.pt", "model_size": "70B", "suite": "default"}
    request = request_from(params, {"location": "s3://other", "model_size": "7B"}, 8)
    assert (request.model_location, request.model_size) == ("/ckpt/manual.pt", "70B")
    assert request.suite_path.endswith("include/eval/default_suite.csv")


def test_no_location_at_all_is_a_clear_error(tmp_path):
    request = request_from(PARAMS, {}, 8)
    with pytest.raises(InputError, match="no model location"):
        prepare_evaluation(Lake(str(tmp_path)), request)


def test_the_dry_run_simulates_the_default_suite_against_the_baselines():
    summary = simulate_evaluation(request_from({**PARAMS, "suite": "default", "nodes": 4}, {}, 8))
    assert summary["trials"] > 62
    assert summary["speedup_vs_opencompass"] >= 1.8
    assert summary["makespan_s"] >= summary["lower_bound_s"]
