"""The cordon limit: the larger of N nodes and P% of the job (default 2 and 5%), never over half of it."""

from __future__ import annotations

import pytest

from acme.errors import ConfigError, InputError
from acme.recovery.blast_radius import BlastRadiusLimit, check_blast_radius


@pytest.mark.parametrize(
    ("job_nodes", "expected"),
    [(1, 0), (2, 1), (3, 1), (4, 2), (16, 2), (59, 2), (60, 3), (512, 25), (1024, 51)],
)
def test_default_limit_is_the_larger_of_two_nodes_and_five_percent_never_over_half(job_nodes, expected):
    assert BlastRadiusLimit().nodes_allowed(job_nodes) == expected


def test_within_the_limit_cordoning_is_allowed():
    decision = check_blast_radius(["node-003"], 64)
    assert decision.allowed
    assert decision.reason == "1 of 64 nodes is within the limit of 3"
    assert decision.nodes == ("node-003",)


def test_the_node_count_binds_on_a_small_job():
    decision = check_blast_radius(["a", "b", "c"], 16)
    assert not decision.allowed and decision.limit == 2
    assert (
        "exceeds the blast-radius limit of 2 (at most 2 nodes, the larger of 2 nodes and 5%)"
        in decision.reason
    )
    assert decision.reason.endswith("a person must confirm")


def test_the_share_binds_on_a_large_job():
    assert check_blast_radius([f"node-{i:03d}" for i in range(25)], 512).allowed
    decision = check_blast_radius([f"node-{i:03d}" for i in range(26)], 512)
    assert not decision.allowed and decision.limit == 25
    assert "at most 5% of the job's 512 nodes, the larger of the two" in decision.reason
    assert BlastRadiusLimit(max_nodes=0, max_share=0.3).nodes_allowed(10) == 3  # no float rounding loss


def test_never_more_than_half_of_the_job():
    decision = check_blast_radius(["a", "b"], 2)
    assert not decision.allowed and decision.limit == 1
    assert "never more than half of the job's 2 nodes" in decision.reason


def test_nodes_already_cordoned_for_the_job_count():
    decision = check_blast_radius(["node-009"], 64, already_cordoned=3)
    assert not decision.allowed
    assert "(3 already cordoned + 1 now)" in decision.reason
    assert check_blast_radius(["node-009"], 64, already_cordoned=2).allowed


def test_nothing_to_cordon_is_always_allowed():
    decision = check_blast_radius([], 2)
    assert decision.allowed and decision.reason == "nothing to cordon"


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"max_nodes": -1}, "max_nodes=-1"),
        ({"max_share": 1.5}, "max_share=1.5"),
        ({"max_nodes": 2.5}, "max_nodes=2.5"),
    ],
)
def test_bad_limits_are_configuration_errors(kwargs, problem):
    with pytest.raises(ConfigError, match=problem):
        BlastRadiusLimit(**kwargs)


@pytest.mark.parametrize(
    ("nodes", "job_nodes", "already", "problem"),
    [
        (["a", "a"], 8, 0, "listed twice"),
        (["a"], 0, 0, "at least one node"),
        (["a", "b", "c"], 2, 0, "3 nodes to cordon in all, but the job has 2"),
        (["a"], 8, -1, "not between 0"),
    ],
)
def test_bad_requests_are_input_errors(nodes, job_nodes, already, problem):
    with pytest.raises(InputError, match=problem):
        check_blast_radius(nodes, job_nodes, already_cordoned=already)
