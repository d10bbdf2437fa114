"""The cordon limit: at most N nodes and at most P% of the job, whichever is fewer."""

from __future__ import annotations

import pytest

from acme.errors import ConfigError, InputError
from acme.recovery.blast_radius import BlastRadiusLimit, check_blast_radius


@pytest.mark.parametrize(
    ("job_nodes", "expected"),
    [(1, 0), (3, 0), (4, 1), (8, 2), (16, 4), (512, 4)],
)
def test_default_limit_is_four_nodes_or_a_quarter_of_the_job(job_nodes, expected):
    assert BlastRadiusLimit().nodes_allowed(job_nodes) == expected


def test_within_the_limit_cordoning_is_allowed():
    decision = check_blast_radius(["node-003"], 64)
    assert decision.allowed
    assert decision.reason == "1 of 64 nodes is within the limit of 4"
    assert decision.nodes == ("node-003",)


def test_the_node_count_limit_binds_on_a_large_job():
    decision = check_blast_radius([f"node-{i:03d}" for i in range(5)], 512)
    assert not decision.allowed
    assert "exceeds the blast-radius limit of 4 (at most 4 nodes): a person must confirm" in decision.reason


def test_the_share_limit_binds_on_a_small_job():
    limit = BlastRadiusLimit(max_nodes=10, max_share=0.1)
    decision = check_blast_radius(["a", "b"], 16, limit)
    assert not decision.allowed and decision.limit == 1
    assert "at most 10% of the job's 16 nodes" in decision.reason
    assert BlastRadiusLimit(max_nodes=10, max_share=0.3).nodes_allowed(10) == 3  # no float rounding loss


def test_nodes_already_cordoned_for_the_job_count():
    decision = check_blast_radius(["node-009"], 64, already_cordoned=4)
    assert not decision.allowed
    assert "(4 already cordoned + 1 now)" in decision.reason
    assert check_blast_radius(["node-009"], 64, already_cordoned=3).allowed


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
