"""The limit on how many of a job's nodes recovery may cordon on its own.

Fault localization can be wrong (a flaky check, a bug, a switch failure that looks like many bad
nodes); cordoning too many nodes would take a job, or a cluster, down on a guess. Above the limit
recovery stops and a person decides.

Semantics of "at most ``max_nodes`` nodes or ``max_share`` of the job": **the larger of the two**,
``max(max_nodes, floor(max_share x job_nodes))``, and never more than half of the job. Defaults 2
and 0.05 (5%):

- the larger, because a fixed count alone would stop every recovery of a big job that lost a rack
  switch's worth of nodes, and a share alone would allow nothing on a small job (5% of 16 nodes is
  0): small jobs (up to 59 nodes) may lose 2 nodes, big ones 5% (25 of 512, 51 of 1,024);
- 2 nodes, because two nodes failing together is common (the paper's NVLink/ECC and NIC faults come
  in pairs sharing a board or a switch port) while three at once in a small job points at the check,
  the network or the scheduler rather than at the nodes;
- 5%, because a training job cannot absorb more without a person re-planning its parallelism, and
  the paper's infrastructure failures each touch a handful of nodes, not a twentieth of a large job;
- never more than half, because the two-round check blames a node only next to a healthy partner:
  a verdict against most of a job means the check itself is broken.

Nodes already cordoned for the same job count against the limit, so repeated incidents cannot add
up past it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from acme.errors import ConfigError, InputError


@dataclass(frozen=True)
class BlastRadiusLimit:
    """At most the larger of ``max_nodes`` nodes and ``max_share`` (0–1) of the job, and half of it."""

    max_nodes: int = 2
    max_share: float = 0.05

    def __post_init__(self) -> None:
        if isinstance(self.max_nodes, bool) or not isinstance(self.max_nodes, int) or self.max_nodes < 0:
            raise ConfigError(f"blast radius max_nodes={self.max_nodes!r} must be a whole number >= 0")
        if not 0.0 <= self.max_share <= 1.0:
            raise ConfigError(f"blast radius max_share={self.max_share!r} must be between 0 and 1")

    def nodes_allowed(self, job_nodes: int) -> int:
        """How many of a ``job_nodes``-node job's nodes may be cordoned in all."""
        return min(max(self.max_nodes, self._share_of(job_nodes)), job_nodes // 2)

    def _share_of(self, job_nodes: int) -> int:
        # A small tolerance so that e.g. 0.3 x 10 allows 3 despite binary fractions.
        return math.floor(self.max_share * job_nodes + 1e-9)


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
    if allowed_total == job_nodes // 2 and allowed_total < max(limit.max_nodes, limit._share_of(job_nodes)):
        binding = f"never more than half of the job's {job_nodes} nodes"
    elif limit.max_nodes >= limit._share_of(job_nodes):
        binding = f"at most {limit.max_nodes} nodes, the larger of {limit.max_nodes} nodes and {limit.max_share:.0%}"
    else:
        binding = f"at most {limit.max_share:.0%} of the job's {job_nodes} nodes, the larger of the two"
    reason = (
        f"cordoning {total} nodes{earlier} exceeds the blast-radius limit of {allowed_total} "
        f"({binding}): a person must confirm"
    )
    return CordonDecision(False, reason, nodes, allowed_total)
