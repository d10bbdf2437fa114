"""Job-type rules for sources without a type: defaults, order, and configuration errors."""

from __future__ import annotations

import pytest

from acme.errors import ConfigError
from acme.jobs.classify import JobTypeClassifier, load_classifier


@pytest.mark.parametrize(
    ("name", "partition", "labels", "gpus", "expected"),
    [
        ("opencompass_eval_7b", "gpu", {}, 8, "Eval"),
        ("internlm-20b-pretrain", "gpu", {}, 256, "Pretrain"),
        ("llama2-sft-chat", "gpu", {}, 16, "SFT"),
        ("llava-vl-stage2", "gpu", {}, 8, "MLLM"),
        ("bash", "gpu", {}, 1, "Debug"),
        ("train", "debug", {}, 1, "Debug"),
        ("preprocess", "cpu", {}, 0, "CPU"),
        ("opencompass_eval", "cpu", {}, 0, "CPU"),  # no GPU decides first
        ("job-42", "gpu", {"acme.io/job-type": "pretrain"}, 64, "Pretrain"),  # a label beats the name
        ("job-42", "gpu", {}, 4, "Other"),
    ],
)
def test_default_rules(name, partition, labels, gpus, expected):
    assert load_classifier().classify(name, partition, labels, gpus) == expected


def test_rules_are_validated_with_the_file_and_rule_named(tmp_path):
    bad_type = tmp_path / "types.yaml"
    bad_type.write_text("rules:\n  - {job_type: Training, name: x}\n")
    with pytest.raises(ConfigError, match=r"types.yaml rule 1: job_type 'Training'"):
        JobTypeClassifier.from_yaml(bad_type)
    bad_regex = tmp_path / "regex.yaml"
    bad_regex.write_text("rules:\n  - {job_type: Eval, name: '('}\n")
    with pytest.raises(ConfigError, match="regex.yaml rule 1: bad regex"):
        JobTypeClassifier.from_yaml(bad_regex)
    empty = tmp_path / "empty.yaml"
    empty.write_text("rules: []\n")
    with pytest.raises(ConfigError, match="empty"):
        JobTypeClassifier.from_yaml(empty)
