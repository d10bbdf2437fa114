"""Scores beside a model card's published figures, with the sampling error of small subsets."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pytest

from acme import lake_keys
from acme.errors import InputError
from acme.evaluation.published import compare_with_published, latest_results, main, published_path
from acme.lake import Lake, open_lake


def test_a_published_figure_inside_our_interval_agrees_and_outside_is_said():
    published = {"scores_percent": {"a": {"published": 40.9}, "b": {"published": 29.3}}}
    rows = [
        {"dataset": "a", "correct": 8, "n_samples": 21},  # 38.1%, interval 20.8-59.1
        {"dataset": "b", "correct": 1, "n_samples": 23},  # 4.3%, interval 0.8-21.0
        {"dataset": "c", "correct": 0, "n_samples": 10},
    ]
    lines = {line["dataset"]: line for line in compare_with_published(rows, published)}
    assert lines["a"]["verdict"] == "agrees" and lines["a"]["interval_percent"] == [20.8, 59.1]
    assert lines["b"]["verdict"] == "outside our interval" and lines["b"]["score_percent"] == 4.3
    assert lines["c"]["verdict"] == "not published" and lines["c"]["interval_percent"] == [0.0, 27.8]
    assert lines["b"]["binomial_p"] < 0.01  # 1 of 23 against 29.3%: significant


def test_outside_the_wilson_interval_but_not_significant_is_said():
    """1 of 10 against a published 1.4%: Wilson's lower end is 1.8%, but P(>= 1 of 10 | 1.4%) = 13%."""
    (line,) = compare_with_published(
        [{"dataset": "g", "correct": 1, "n_samples": 10}], {"scores_percent": {"g": {"published": 1.4}}}
    )
    assert line["interval_percent"] == [1.8, 40.4]
    assert line["binomial_p"] == 0.132 and line["verdict"] == "outside our interval (not significant)"


def test_the_bundled_card_figures_name_their_source_and_the_real_suite_datasets():
    card = json.loads(published_path().read_text())
    assert card["model"] == "SmolLM2-135M-Instruct" and "huggingface.co" in card["source"]
    assert set(card["scores_percent"]) == {"hellaswag_ppl", "arc_ppl", "mmlu_ppl", "gsm8k_gen"}


def _write_results(lake: Lake, model_id: str, run: str, correct: int) -> str:
    key = f"{lake_keys.eval_run(model_id, run)}/results.parquet"
    lake.write_parquet(key, pa.table({"dataset": ["gsm8k"], "correct": [correct], "n_samples": [10]}))
    return key


def test_the_latest_results_of_a_suite_are_the_last_written(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    with pytest.raises(InputError, match="no evaluation of the real_suite suite"):
        latest_results(lake, "real_suite")
    newer = _write_results(lake, "model-a", "real_suite-0123abcd", correct=7)
    older = _write_results(lake, "model-b", "real_suite-89abcdef", correct=3)
    _write_results(lake, "model-c", "real_suite_v2-0123abcd", correct=1)  # another suite
    os.utime(lake.path(older), (1_000_000, 1_000_000))
    url, rows = latest_results(lake, "real_suite")
    assert url == lake.url(newer) and rows == [{"dataset": "gsm8k", "correct": 7, "n_samples": 10}]


@pytest.mark.integration
def test_the_latest_results_are_found_in_an_s3_lake(monkeypatch, capsys):
    """The same on a moto S3 server (a real S3 API on loopback), through the command line."""
    from tests.integration.conftest import start_s3_server

    with start_s3_server() as s3:
        for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                            ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_ENDPOINT_URL_S3", s3["endpoint"])):  # fmt: skip
            monkeypatch.setenv(name, value)
        lake = open_lake("s3://acme-lake/published")
        _write_results(lake, "model-b", "real_suite-89abcdef", correct=3)
        time.sleep(1.1)  # S3 keeps LastModified to the second
        newer = _write_results(lake, "model-a", "real_suite-0123abcd", correct=7)
        url, rows = latest_results(lake, "real_suite")
        assert url == lake.url(newer) == "s3://acme-lake/published/" + newer
        assert rows[0]["correct"] == 7
        assert main(["--lake", "s3://acme-lake/published"]) == 0
    assert f"results: {url}" in capsys.readouterr().out
