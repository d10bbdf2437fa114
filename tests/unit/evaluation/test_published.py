"""Scores beside a model card's published figures, with the sampling error of small subsets."""

from __future__ import annotations

import json

from acme.evaluation.published import compare_with_published, published_path


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
