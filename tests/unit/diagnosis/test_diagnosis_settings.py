"""The diagnosis section of acme.settings: defaults, values read from an environment, and refusals."""

from __future__ import annotations

import pytest

from acme.errors import ConfigError
from acme.settings import DEFAULT_DIAGNOSIS_LOG_PATTERN, DiagnosisSettings


def test_defaults():
    got = DiagnosisSettings.from_env({})
    assert got.log_pattern == DEFAULT_DIAGNOSIS_LOG_PATTERN and got.log_root == "{lake}/logs"
    assert (got.embedding, got.min_confidence, got.retrieval_min_similarity, got.retrieval_k) == (
        "lexical", 0.7, None, 5,
    )  # fmt: skip
    assert (got.learn_min_confidence, got.max_jobs_per_run, got.chunks, got.concurrency) == (0.85, 500, 4, 2)
    assert got.claim_ttl_s == 21600


def test_values_from_the_environment():
    got = DiagnosisSettings.from_env(
        {"ACME_DIAGNOSIS_EMBEDDING": "MiniLM", "ACME_DIAGNOSIS_RETRIEVAL_MIN_SIMILARITY": "0.42",
         "ACME_DIAGNOSIS_LOG_PATTERN": "s3://logs/{date}/{cluster}/{job_id}.log", "ACME_DIAGNOSIS_CHUNKS": "8"}
    )  # fmt: skip
    assert got.embedding == "minilm" and got.retrieval_min_similarity == 0.42 and got.chunks == 8
    assert got.log_pattern == "s3://logs/{date}/{cluster}/{job_id}.log"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ACME_DIAGNOSIS_LOG_PATTERN", "{lake}/{user}/x.log", "unknown placeholder {user}"),
        ("ACME_DIAGNOSIS_EMBEDDING", "bert", "must be one of minilm, lexical"),
        ("ACME_DIAGNOSIS_MIN_CONFIDENCE", "1.5", "must be between 0 and 1"),
        ("ACME_DIAGNOSIS_RETRIEVAL_K", "0", "must be between 1 and 100"),
        ("ACME_DIAGNOSIS_CLAIM_TTL_S", "10", "must be between 60 and 2.592e+06"),
        ("ACME_DIAGNOSIS_MAX_JOBS", "many", "is not a number"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(name, value, message):
    with pytest.raises(ConfigError, match=name) as raised:
        DiagnosisSettings.from_env({name: value})
    assert message in str(raised.value)
