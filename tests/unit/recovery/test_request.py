"""The typed recovery request (acme.recovery.request): one schema for the diagnosis' conf, the DAG's Params
and the recovery's check."""

from __future__ import annotations

from datetime import UTC, date, datetime

import jsonschema
import pytest

from acme.diagnosis.records import DiagnosisRecord
from acme.diagnosis.routing import RECOVERY, route
from acme.errors import InputError
from acme.recovery.request import RecoveryRequest, conf_json_schema, conf_schema, opened_request

STARTED = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
JOB = {
    "job_id": "7",
    "job_type": "Pretrain",
    "node_list": "node[01-02,07]",
    "end_time": "2026-11-29T13:58:00+00:00",
}


def ecc_record(**changes) -> DiagnosisRecord:
    values = {"cluster": "seren", "job_id": "7", "date": date(2026, 11, 29), "reason": "ECCError",
              "category": "Infrastructure", "attribution": "infrastructure", "confidence": 0.9, "source": "rule",
              "evidence": [{"line": 12, "text": "NVRM: Xid 48: DBE (double bit error)"}]}  # fmt: skip
    return DiagnosisRecord(**{**values, **changes})


def test_the_conf_the_diagnosis_builds_is_valid_under_the_schema_and_checks_into_the_same_request():
    decided = route(ecc_record(), JOB)
    assert decided.kind == RECOVERY
    conf = decided.recovery_conf
    jsonschema.validate(conf, conf_json_schema())
    assert conf["diagnosis_source"] == "rule" and conf["confidence"] == 0.9
    assert conf["evidence"] == ["NVRM: Xid 48: DBE (double bit error)"]
    checked = RecoveryRequest.from_params(
        {**conf, "checkpoint_uri": "/ckpt"}, conf["recovery_id"], "run-1", STARTED
    )
    assert checked.nodes == ("node01", "node02", "node07") and checked.detected_at == JOB["end_time"]
    assert (checked.diagnosis_source, checked.confidence, checked.evidence) == (
        "rule", 0.9, ("NVRM: Xid 48: DBE (double bit error)",),
    )  # fmt: skip


def test_the_dag_params_are_the_schema():
    from airflow.dag_processing.dagbag import DagBag

    from tests.unit.property.test_params_properties import ROOT

    dag = DagBag(dag_folder=str(ROOT / "dags" / "recover_training.py")).dags["recover_training"]
    schema = conf_schema(False)
    assert sorted(dag.params) == sorted(schema)
    for name, spec in schema.items():
        param = dag.params.get_param(name)
        assert param.description == spec["description"], name
        assert {k: v for k, v in spec.items() if k not in ("default", "description")} == param.schema, name


def test_a_request_survives_the_hand_over_and_an_unknown_field_is_refused():
    request = RecoveryRequest.from_params(
        {"cluster": "seren", "job_id": "7", "nodes": ["a", "b"], "checkpoint_uri": "/ckpt", "evidence": ["x"]},
        "r1", "run-1", STARTED,
    )  # fmt: skip
    assert opened_request({"request": request.to_dict()}) == request
    with pytest.raises(InputError, match="unknown fields extra"):
        RecoveryRequest.from_dict({**request.to_dict(), "extra": 1})


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"diagnosis_source": "gut feeling"}, "diagnosis_source"),
        ({"confidence": 1.5}, "confidence"),
        ({"evidence": "one line"}, "evidence"),
    ],
)
def test_bad_diagnosis_fields_are_refused_by_name(params, problem):
    base = {"cluster": "seren", "job_id": "7", "nodes": ["a"], "checkpoint_uri": "/ckpt"}
    with pytest.raises(InputError, match=problem):
        RecoveryRequest.from_params({**base, **params}, "r1", "run-1", STARTED)
