"""One attribution function (issue 30, part 4): ``rules.attribution_of`` decides who a reason is attributed to,
for the bundled rules, the root-cause layers, the agent and the rules the diagnosis learns.

Before, ``learning.py`` worked attribution out again from the paper's taxonomy alone and called every reason
outside it "user": a learned FailSlow or NCCLError rule (infrastructure) would have routed to the user.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from acme.diagnosis.learning import learn_rule, load_learned_rules
from acme.diagnosis.retrieval import CaseStore, LexicalEmbedder, case_from_lines
from acme.diagnosis.rules import (
    ATTRIBUTIONS,
    EXTERNAL_ATTRIBUTION,
    EXTRA_REASONS,
    TAXONOMY,
    attribution_of,
    category_of,
    load_rules,
)
from acme.lake import Lake

EVERY_REASON = sorted({**TAXONOMY, **EXTRA_REASONS})


def test_every_bundled_rule_is_attributed_as_its_reason():
    for rule in load_rules():
        assert rule.attribution == attribution_of(rule.reason), rule.id
        assert rule.category == category_of(rule.reason), rule.id


@pytest.mark.parametrize("reason", EVERY_REASON)
def test_every_reason_has_one_attribution(reason):
    attribution = attribution_of(reason)
    assert attribution in ATTRIBUTIONS
    category = category_of(reason)
    if category == "External":
        assert attribution == EXTERNAL_ATTRIBUTION[reason]
    else:
        assert attribution == ("infrastructure" if category == "Infrastructure" else "user")


def test_the_reasons_outside_the_papers_taxonomy_are_attributed_by_their_category():
    assert attribution_of("FailSlow") == attribution_of("NCCLError") == "infrastructure"
    assert attribution_of("SideServiceError") == attribution_of("GPUDriverFault") == "infrastructure"
    assert attribution_of("LossSpike") == attribution_of("UserCancelled") == "user"
    assert attribution_of("Unknown") is None


@pytest.fixture
def lake(tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")
    return Lake(str(tmp_path / "lake"))


@pytest.mark.parametrize(
    ("reason", "signature"),
    [
        ("FailSlow", "acme-detect: fail-slow: node gpu-17 step time 3.1x its peers"),
        ("NCCLError", "FooNetFault 7"),
    ],
)
def test_a_learned_rule_is_attributed_by_the_same_function(lake, reason, signature):
    # The case says "user" (an operator's slip, or an older agent); the learned rule follows the taxonomy.
    case = case_from_lines(
        "seren", "9001", [(1, signature)], reason=reason, category=category_of(reason), attribution="user",
        source="operator", confidence=1.0,
    )  # fmt: skip
    CaseStore(lake, LexicalEmbedder()).upsert([case])
    outcome = learn_rule(
        lake, case, r"FooNetFault \d+|fail-slow: node", source="operator", confidence=1.0,
        now=datetime(2026, 12, 2, 4, 0, tzinfo=UTC), min_confidence=0.85,
    )  # fmt: skip
    assert outcome.accepted, outcome
    learned = [r for r in load_learned_rules(lake) if r.reason == reason]
    assert learned and all(r.attribution == "infrastructure" == attribution_of(reason) for r in learned)
