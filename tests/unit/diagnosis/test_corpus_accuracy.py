"""The diagnosis scored on the labelled corpus of real public failures, leave-one-source-out.

The scoring is benchmarks/bench_diagnosis_accuracy.py's; this test runs it -- the rules alone, and the rules
with retrieval (lexical, and MiniLM when it loads) -- and fails when a goal of issues 15 and 31 is missed:
the accuracy goals on the rules, the confidently-wrong goal on every path. Timing is not measured here.

The set of logs diagnosed wrong is also pinned to the misses docs/diagnosis-accuracy.md explains, so any new miss
(or a fixed one) fails the suite and the page must be updated with it.
"""

from __future__ import annotations

import gzip

import pytest
from benchmarks.bench_diagnosis_accuracy import GOALS, evaluate, load_corpus, rules_without

from acme.diagnosis.rules import EXTRA_REASONS, TAXONOMY, UNKNOWN, load_rules


@pytest.fixture(scope="module")
def result():
    return evaluate(embeddings=("lexical", "minilm"))


def test_the_corpus_is_big_and_varied_enough():
    lines, logs = load_corpus()
    assert len(lines) >= 300 and len({c.source for c in lines}) >= 60
    assert {c.reason for c in lines} >= {"CUDAError", "NCCLError", "NetworkError", "SideServiceError",
                                         "LossSpike", "NodeFailure", "OutOfMemoryError", "KilledBySignal"}  # fmt: skip
    # The issue asks for at least 30 whole logs (60 lines or more each) with their decisive lines.
    whole = [log for log in logs if not log.excerpt]
    assert len(whole) >= 30 and all(log.decisive for log in logs)
    assert all(_newlines(log.path) >= 59 for log in whole)  # 60 lines, the last without a newline
    assert len({log.source for log in whole}) >= 20


def _newlines(path) -> int:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.count(b"\n")


def test_labels_are_known_reasons_and_rule_sources_are_corpus_sources():
    lines, logs = load_corpus()
    known = {**TAXONOMY, **EXTRA_REASONS, UNKNOWN: None}
    for case in [*lines, *logs]:
        assert case.reason in known and set(case.alternatives) <= set(known), case
    sources = {c.source for c in lines} | {c.source for c in logs}
    for rule in load_rules():
        assert set(rule.sources) <= sources, (rule.id, set(rule.sources) - sources)


def test_leave_one_source_out_drops_the_rules_written_from_that_source():
    rules = load_rules()
    sourced = next(r for r in rules if r.sources)
    assert sourced not in rules_without(sourced.sources[0], rules)
    assert sourced in rules_without("no/such#1", rules)


def test_single_lines_meet_the_goals(result):
    lines = result["variants"]["rules"]["lines"]
    print(f"\nsingle lines: reason {lines['reason']:.3f}, category {lines['category']:.3f}, "
          f"attribution {lines['attribution']:.3f}, unknown {lines['unknown_share']:.3f} of {lines['total']}")  # fmt: skip
    fresh = lines["never_tuned_on"]
    print(f"the {fresh['total']} lines of sources never tuned on: reason {fresh['reason']:.3f}, "
          f"category {fresh['category']:.3f}")  # fmt: skip
    for miss in lines["misses"]:
        print("MISS", miss["source"], miss["expected"], "->", miss["got"], miss["where"][:100])
    assert lines["reason"] >= GOALS["line_reason"]
    assert lines["category"] >= GOALS["line_category"]


def test_confidently_wrong_answers_stay_rare(result):
    """Issue 31: a wrong reason at confidence >= 0.5 on no more than 2% of lines and of logs (a wrong answer
    said with confidence costs more than an Unknown, which goes to the agent or an operator)."""
    lines = result["variants"]["rules"]["lines"]
    logs = result["variants"]["rules"]["logs"]
    print(f"\nconfidently wrong: lines {lines['confidently_wrong']:.3f} ({lines['confidently_wrong_n']} of "
          f"{lines['total']}), logs {logs['confidently_wrong']:.3f} ({logs['confidently_wrong_n']} of {logs['total']}); "
          f"Unknown: lines {lines['unknown_share']:.3f}, logs {logs['unknown_share']:.3f}; "
          f"evidence holds a decisive line on {logs['evidence_has_decisive']:.3f} of the logs")  # fmt: skip
    for miss in lines["misses"] + logs["misses"]:
        if miss["got"] != "Unknown" and miss["confidence"] >= 0.5:
            print(
                "CONFIDENTLY WRONG",
                miss["where"][:100],
                miss["expected"],
                "->",
                miss["got"],
                miss["confidence"],
            )
    assert lines["confidently_wrong"] <= GOALS["line_confidently_wrong"]
    assert logs["confidently_wrong"] <= GOALS["log_confidently_wrong"]


def test_confidently_wrong_answers_stay_rare_with_retrieval(result):
    """Issue 31 on the retrieval path: when no rule matched and the nearest labelled cases of the other sources
    vote (``retrieval.vote_alone``, as in the pipeline), still no more than 2% confidently wrong and lines at
    their goal; and retrieval lowers no figure the rules reach on logs (it answers only where they say Unknown)."""
    variants = {
        name: v for name, v in result["variants"].items() if name != "rules" and "unavailable" not in v
    }
    assert "rules+lexical" in variants, result["variants"].keys()  # the offline embedding always loads
    rules_logs = result["variants"]["rules"]["logs"]
    for name, variant in variants.items():
        lines, logs = variant["lines"], variant["logs"]
        print(f"\n{name}: confidently wrong lines {lines['confidently_wrong']:.3f} ({lines['confidently_wrong_n']}), "
              f"logs {logs['confidently_wrong']:.3f} ({logs['confidently_wrong_n']}); retrieval {lines['retrieval']}")  # fmt: skip
        for miss in lines["misses"] + logs["misses"]:
            if miss["got"] != "Unknown" and miss["confidence"] >= 0.5:
                print("CONFIDENTLY WRONG", name, miss["where"][:100], miss["expected"], "->", miss["got"])
        assert lines["confidently_wrong"] <= GOALS["line_confidently_wrong"], name
        assert logs["confidently_wrong"] <= GOALS["log_confidently_wrong"], name
        # A vote on a line that names no failure is a hint, not an answer: lines stay at the goal too.
        assert lines["reason"] >= GOALS["line_reason"], name
        assert (
            logs["reason"] >= rules_logs["reason"]
            and logs["decisive_recall"] >= rules_logs["decisive_recall"]
        )


def _batches_in_corpus_order() -> list[str]:
    """The first-contact batches of logs.yaml (``batch``), oldest first: the order they were added in."""
    _, logs = load_corpus()
    return list(dict.fromkeys(log.batch for log in logs if log.batch))


def test_the_newest_batch_is_the_last_one_added():
    batches = _batches_in_corpus_order()
    assert batches[:2] == ["issue31", "issue31b"], batches  # a later batch goes after these


@pytest.mark.parametrize("batch_name", _batches_in_corpus_order())
def test_every_first_contact_batch_meets_the_goal(result, batch_name):
    """Each batch of whole logs (logs.yaml's ``batch``; the newest is the last added), scored now: at least 20
    whole logs, at least 85% right, at most 2% confidently wrong. Its figures at first contact, before the
    changes made for it, are in docs/diagnosis-accuracy.md."""
    batch = result["variants"]["rules"]["logs"]["batches"][batch_name]
    print(f"\nbatch {batch_name}: {batch['right']} of {batch['total']} right, confidently wrong "
          f"{batch['confidently_wrong']:.3f}, Unknown {batch['unknown_share']:.3f}, evidence holds a decisive "
          f"line {batch['evidence_has_decisive']:.3f}; misses {batch['misses']}")  # fmt: skip
    _, logs = load_corpus()
    assert batch["total"] >= 20 and all(not log.excerpt for log in logs if log.batch == batch_name)
    assert batch["reason"] >= GOALS["new_batch_reason"]
    assert batch["confidently_wrong"] <= GOALS["log_confidently_wrong"]


# The logs diagnosed wrong, each explained in docs/diagnosis-accuracy.md ("Every miss, and why").
DOCUMENTED_LOG_MISSES = {
    "bigscience-tr1-13b-faulty-gpu-oom",  # needs the job history (same node, previous ECC crash)
}


def test_compression_keeps_the_decisive_lines(result):
    logs = result["variants"]["rules"]["logs"]
    print(f"\nlogs: decisive lines kept {logs['decisive_recall']:.3f} of {logs['decisive_lines']}")
    assert logs["decisive_recall"] >= GOALS["decisive_recall"], logs["decisive_missed"]


def test_the_logs_diagnosed_wrong_are_the_documented_misses(result):
    logs = result["variants"]["rules"]["logs"]
    for miss in logs["misses"]:
        print("MISS", miss["where"], miss["expected"], "->", miss["got"], miss["rule"])
    assert {miss["where"] for miss in logs["misses"]} == DOCUMENTED_LOG_MISSES


def test_whole_logs_meet_the_root_cause_goal(result):
    whole = result["variants"]["rules"]["logs"]["whole_logs_reason"]
    print(f"\nwhole logs: root cause {whole['reason']:.3f} ({whole['right']} of {whole['total']})")
    assert whole["reason"] >= GOALS["log_reason"]
