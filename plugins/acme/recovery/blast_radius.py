"""The limit on how many of a job's nodes recovery may cordon on its own.

Fault localization can be wrong (a flaky check, a bug, a switch failure that looks like many bad
nodes); cordoning too many nodes would take a job, or a cluster, down on a guess. Recovery may
cordon at most ``max_nodes`` nodes *and* at most ``max_share`` of the job's nodes, whichever is
fewer, counting the nodes already cordoned for the same job (so repeated incidents cannot add up
past the limit). Above the limit a person decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from acme.errors import ConfigError, InputError


@dataclass(frozen=True)
class BlastRadiusLimit:
    """At most ``max_nodes`` nodes and at most ``max_share`` (0–1) of the job's nodes."""

    max_nodes: int = 4
    max_share: float = 0.25

    def __post_init__(self) -> None:
        if isinstance(self.max_nodes, bool) or not isinstance(self.max_nodes, int) or self.max_nodes < 0:
            raise ConfigError(f"blast radius max_nodes={self.max_nodes!r} must be a whole number >= 0")
        if not 0.0 <= self.max_share <= 1.0:
            raise ConfigError(f"blast radius max_share={self.max_share!r} must be between 0 and 1")

    def nodes_allowed(self, job_nodes: int) -> int:
        """How many of a ``job_nodes``-node job's nodes may be cordoned in all."""
        # A small tolerance so that e.g. 0.3 x 10 allows 3 despite binary fractions.
        return min(self.max_nodes, math.floor(self.max_share * job_nodes + 1e-9))


@dataclass(frozen=True)
class CordonDecision:
    allowed: bool
    reason: str
    nodes: tuple[str, ...]
    limit: int


def check_blast_radius(
    nodes_to_cordon: Sequence[str],
    job_nodes: int,
    limit: BlastRadiusLimit | None = None,
    already_cordoned: int = 0,
) -> CordonDecision:
    """Whether ``nodes_to_cordon`` may be cordoned in a job of ``job_nodes`` nodes, and if not why."""
    limit = limit or BlastRadiusLimit()
    if isinstance(job_nodes, bool) or not isinstance(job_nodes, int) or job_nodes < 1:
        raise InputError("job_nodes", f"a job has at least one node; got {job_nodes!r}")
    if already_cordoned < 0 or already_cordoned > job_nodes:
        raise InputError(
            "already_cordoned", f"{already_cordoned} is not between 0 and the job's {job_nodes} nodes"
        )
    nodes = tuple(nodes_to_cordon)
    if len(set(nodes)) != len(nodes):
        raise InputError("nodes_to_cordon", "a node is listed twice")
    allowed_total = limit.nodes_allowed(job_nodes)
    total = already_cordoned + len(nodes)
    if total > job_nodes:
        raise InputError("nodes_to_cordon", f"{total} nodes to cordon in all, but the job has {job_nodes}")
    if not nodes:
        return CordonDecision(True, "nothing to cordon", nodes, allowed_total)
    if total <= allowed_total:
        return CordonDecision(
            True, f"{total} of {job_nodes} nodes is within the limit of {allowed_total}", nodes, allowed_total
        )
    earlier = f" ({already_cordoned} already cordoned + {len(nodes)} now)" if already_cordoned else ""
    binding = (
        f"at most {limit.max_nodes} nodes"
        if limit.max_nodes <= math.floor(limit.max_share * job_nodes + 1e-9)
        else f"at most {limit.max_share:.0%} of the job's {job_nodes} nodes"
    )
    reason = (
        f"cordoning {total} nodes{earlier} exceeds the blast-radius limit of {allowed_total} "
        f"({binding}): a person must confirm"
    )
    return CordonDecision(False, reason, nodes, allowed_total)
