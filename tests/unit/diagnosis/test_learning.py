"""Learned rules (checks, refusals, versions, provenance) and filter rules stored per job family."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml

from acme import lake_keys
from acme.diagnosis.compress import compress_log, load_filter_rules
from acme.diagnosis.learning import (
    family_key,
    learn_rule,
    load_family_filter_rules,
    load_learned_rules,
    rules_with_learned,
    save_family_filter_rules,
)
from acme.diagnosis.retrieval import CaseStore, LexicalEmbedder, case_from_lines
from acme.diagnosis.rules import diagnose_lines
from acme.errors import ConfigError, InputError
from acme.lake import Lake
from tests.diagnosis_support import confirm_case

WIDGET = [
    (10, "[rank0]: Traceback (most recent call last):"),
    (11, '[rank0]:   File "/workspace/train.py", line 9, in <module>'),
    (12, "[rank0]: widgetlib.FluxCapacitorFault: flux capacitor drained on device 3"),
]
NOW = datetime(2023, 7, 2, 3, 0, tzinfo=UTC)


@pytest.fixture
def lake(tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")  # the stored text matters here, not the model
    return Lake(str(tmp_path / "lake"))


def widget_case(reason="CUDAError", job_id="101", lines=WIDGET):
    return case_from_lines(
        "seren", job_id, lines, reason=reason, category="Infrastructure", attribution="infrastructure",
        source="llm", confidence=0.9,
    )  # fmt: skip


def store(lake, *cases):
    CaseStore(lake, LexicalEmbedder()).upsert(list(cases))


def test_a_confident_agent_rule_is_added_with_provenance_and_then_diagnoses(lake):
    outcome = learn_rule(
        lake,
        widget_case(),
        r"FluxCapacitorFault",
        source="agent",
        confidence=0.92,
        now=NOW,
        min_confidence=0.85,
    )
    assert (outcome.status, outcome.version) == ("added", 1)
    (rule,) = load_learned_rules(lake)
    assert rule.id == outcome.rule_id and rule.reason == "CUDAError" and rule.category == "Infrastructure"
    assert rule.priority == 90  # the priority of the bundled CUDA rules: root causes stay above symptoms
    assert "seren/101" in rule.provenance and "agent" in rule.provenance and "0.92" in rule.provenance
    document = yaml.safe_load(lake.read_bytes(lake_keys.LEARNED_RULES))
    assert document["rules"][0]["learned_from"] == {
        "case_id": "seren/101", "source": "agent", "confidence": 0.92, "by": None, "at": NOW.isoformat(),
    }  # fmt: skip
    assert lake.exists("diagnosis/rules/history/learned-v0001.yaml")

    lines = [(3, "[rank5]: widgetlib.FluxCapacitorFault: flux capacitor drained on device 1")]
    assert diagnose_lines(lines).reason == "Unknown"  # the bundled rules alone do not know it
    learned = diagnose_lines(lines, rules_with_learned(lake))
    assert (learned.reason, learned.rule_id) == ("CUDAError", outcome.rule_id)


def test_learning_the_same_rule_again_changes_nothing(lake):
    first = learn_rule(lake, widget_case(), "FluxCapacitorFault", source="operator", by="ops-alice")
    again = learn_rule(lake, widget_case(), "FluxCapacitorFault", source="operator", by="ops-alice")
    assert (again.status, again.rule_id, again.version) == ("exists", first.rule_id, 1)
    assert again.accepted and len(load_learned_rules(lake)) == 1
    second = learn_rule(lake, widget_case(), r"flux capacitor drained", source="operator", by="ops-alice")
    assert second.version == 2 and len(load_learned_rules(lake)) == 2
    assert lake.exists("diagnosis/rules/history/learned-v0001.yaml")  # older versions stay
    assert lake.exists("diagnosis/rules/history/learned-v0002.yaml")


@pytest.mark.parametrize(
    ("regex", "kwargs", "why"),
    [
        ("FluxCapacitorFault", {"source": "agent", "confidence": 0.6}, "below"),
        ("FluxCapacitorFault", {"source": "agent", "confidence": None}, "below"),
        ("FluxCapacitorFault", {"source": "retrieval"}, "cannot teach"),
        ("FluxCapacitor(Fault", {"source": "operator"}, "does not compile"),
        ("(a+)+$", {"source": "operator"}, "unsafe"),
        ("x*", {"source": "operator"}, "empty"),
        ("TotallyDifferentError", {"source": "operator"}, "does not match its own case"),
        ("", {"source": "operator"}, "no regex"),
    ],
)
def test_refusals(lake, regex, kwargs, why):
    outcome = learn_rule(lake, widget_case(), regex, min_confidence=0.85, **kwargs)
    assert outcome.status == "refused" and why in outcome.why
    assert not lake.exists(lake_keys.LEARNED_RULES)


def test_a_rule_matching_a_stored_case_of_another_reason_is_refused(lake):
    other = [(7, "[rank1]: widgetlib.FluxCapacitorFault: config key 'flux' missing (KeyError upstream)")]
    store(lake, widget_case(reason="KeyError", job_id="55", lines=other))
    outcome = learn_rule(lake, widget_case(), "FluxCapacitorFault", source="operator")
    assert outcome.status == "refused" and "seren/55" in outcome.why
    narrower = learn_rule(
        lake, widget_case(), "FluxCapacitorFault: flux capacitor drained", source="operator"
    )
    assert narrower.status == "added"


def test_a_reason_outside_the_taxonomy_is_refused(lake):
    outcome = learn_rule(lake, widget_case(reason="CosmicRay"), "FluxCapacitorFault", source="operator")
    assert outcome.status == "refused" and "taxonomy" in outcome.why


def test_an_operator_correction_relabels_the_case_and_teaches_the_rule(lake):
    store(lake, widget_case(reason="CUDAError"))
    outcome = confirm_case(lake, "seren", "101", "ECCError", r"flux capacitor drained", by="ops-bob")
    assert outcome.status == "added"
    (rule,) = load_learned_rules(lake)
    assert rule.reason == "ECCError" and "operator" in rule.provenance
    (row,) = CaseStore(lake, LexicalEmbedder()).read("seren")
    assert (row["reason"], row["source"]) == ("ECCError", "operator")
    with pytest.raises(InputError, match="no stored diagnosis case"):
        confirm_case(lake, "seren", "999", "ECCError", "x", by="ops-bob")


def test_a_broken_learned_rules_file_names_itself(lake):
    lake.write_bytes(lake_keys.LEARNED_RULES, b"rules: [{id: x, reason: Nope}]\n")
    with pytest.raises(ConfigError, match="learned.yaml"):
        load_learned_rules(lake)


# ------------------------------------------------------------------------------------------ family filter rules
def test_family_key_drops_run_numbers_dates_and_ids():
    base = {"job_type": "Pretrain", "user": "u8eb7"}
    assert family_key({**base, "job_name": "llama2-7b-pretrain-run42"}) == "pretrain.u8eb7.llama2-7b-pretrain"
    assert (
        family_key({**base, "job_name": "llama2-7b-pretrain-20230701"}) == "pretrain.u8eb7.llama2-7b-pretrain"
    )
    assert family_key({**base, "job_name": None}) == "pretrain.u8eb7.any"
    assert family_key(None) == "any.any.any"


HEARTBEAT = {
    "id": "fam-heartbeat",
    "regex": r"^heartbeat ok \d+$",
    "description": "trainer heartbeat",
    "version": 1,
}


def test_family_filter_rules_are_stored_versioned_and_reused(lake):
    family = family_key({"job_type": "SFT", "user": "u1", "job_name": "chat-sft-run3"})
    assert load_family_filter_rules(lake, family) == []
    version = save_family_filter_rules(lake, family, [HEARTBEAT], {"source": "log_agent", "job_id": "7"}, NOW)
    assert version == 1
    (rule,) = load_family_filter_rules(lake, family)
    assert rule.id == "fam-heartbeat" and rule.pattern.search("heartbeat ok 17")
    # The same proposal again (a retry) changes nothing; a new regex for the id is a new version.
    assert save_family_filter_rules(lake, family, [HEARTBEAT], {"source": "log_agent"}) == 1
    changed = {**HEARTBEAT, "regex": r"^heartbeat (ok|late) \d+$"}
    assert save_family_filter_rules(lake, family, [changed], "operator edit") == 2
    (rule,) = load_family_filter_rules(lake, family)
    assert rule.version == 2 and rule.pattern.search("heartbeat late 3")
    assert lake.exists(f"diagnosis/filter_rules/family={family}/history/v0001.yaml")
    # The stored rules drop the family's routine lines; errors are kept whatever a filter rule says.
    log = [f"heartbeat {'late' if i % 7 else 'ok'} {i}" for i in range(50)]
    log.append("RuntimeError: CUDA error: misaligned address")
    with_family = compress_log(log, rules=load_family_filter_rules(lake, family) + load_filter_rules())
    assert [k.kind for k in with_family.lines] == ["context", "context", "error"]  # 2 lines of context kept
    assert with_family.stats["dropped_by_rule"]["fam-heartbeat"] == 50
    assert "template" in {k.kind for k in compress_log(log).lines}  # the bundled rules alone keep a template
    # Another family does not see them.
    assert load_family_filter_rules(lake, family_key({"job_type": "SFT", "user": "u2"})) == []


def test_bad_family_rules_and_keys_are_refused(lake):
    with pytest.raises(ConfigError, match="invalid regex"):
        save_family_filter_rules(lake, "sft.u1.x", [{**HEARTBEAT, "regex": "("}], "test")
    with pytest.raises(InputError, match="family key"):
        save_family_filter_rules(lake, "../../etc", [HEARTBEAT], "test")
