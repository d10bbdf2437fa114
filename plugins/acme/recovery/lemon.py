"""The lemon-node score: which nodes of a cluster keep failing, across jobs and users.

A *failure event* is one node's share of one infrastructure failure (``acme.recovery.lemon_evidence`` reads
them from the lake): a failed job attributed to the infrastructure (its diagnosis, a NODE_FAIL state, a
recovery's localization of it, each job counted once however many of these say so), or one hardware Xid or
ECC event of the node's GPUs. A job failure localized by recovery blames the nodes the two-round check found
(each fully); one that was not is spread over the job's nodes (1/n each): a 64-node job's NCCL timeout says
little about any one of its nodes.

Each event weighs::

    weight = base × blame × 0.5 ** (age_days / half_life_days) × (1 + log10(1 + gpu_hours))

``base`` is 1 for a job failure and ``ACME_LEMON_TELEMETRY_WEIGHT`` for a telemetry event; ``blame`` the
node's share; the decay forgets a node repaired long ago (half-life ``ACME_LEMON_HALF_LIFE_DAYS``);
``gpu_hours`` the GPU-hours the failed job had run (the node's share of them), on a log scale so that one
failure of a huge job does not outweigh a run of small ones. A node's score is the sum of its events'
weights; the ranking is by score (ties by name). :func:`failure_counts` is the plain baseline the benchmark
compares with: every event counts 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

JOB_SOURCES = ("diagnosis", "node_fail", "localization")
TELEMETRY = "telemetry"
SOURCES = (*JOB_SOURCES, TELEMETRY)


@dataclass(frozen=True)
class FailureEvent:
    """One node's share of one infrastructure failure."""

    node: str
    at: datetime  # tz-aware UTC: when the job ended, the check decided, or the telemetry saw the fault
    sources: tuple[str, ...]  # which records said so (see SOURCES)
    blame: float = (
        1.0  # the node's share: 1 when localized or seen on the node itself, 1/n spread over n nodes
    )
    gpu_hours: float = 0.0  # GPU-hours the failed job had run, the node's share of them
    job_id: str | None = None
    detail: str = ""  # the reason, the Xid code, the recovery id

    @property
    def is_telemetry(self) -> bool:
        return self.sources == (TELEMETRY,)


@dataclass(frozen=True)
class ScoreWeights:
    """The knobs of :func:`event_weight` (``acme.settings.LemonSettings`` gives the configured ones)."""

    half_life_days: float = 28.0
    telemetry_weight: float = 0.5
    use_blame: bool = True
    use_gpu_hours: bool = True

    @classmethod
    def from_settings(cls, settings: Any) -> ScoreWeights:
        return cls(half_life_days=settings.half_life_days, telemetry_weight=settings.telemetry_weight)


@dataclass
class NodeScore:
    """A node's place in the ranking and what it is made of."""

    node: str
    score: float = 0.0
    events: int = 0
    by_source: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))
    gpu_hours_lost: float = 0.0
    last_failure: datetime | None = None
    rank: int = 0

    def to_row(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "node": self.node,
            "score": round(self.score, 3),
            "events": self.events,
            **{f"{source}_events": self.by_source[source] for source in SOURCES},
            "gpu_hours_lost": round(self.gpu_hours_lost, 2),
            "last_failure": self.last_failure.isoformat() if self.last_failure else None,
        }


def event_weight(event: FailureEvent, until: datetime, weights: ScoreWeights) -> float:
    """The event's weight at ``until`` (module docstring); 0 for an event after ``until``."""
    age_days = (until - event.at).total_seconds() / 86_400
    if age_days < 0:
        return 0.0
    base = weights.telemetry_weight if event.is_telemetry else 1.0
    blame = event.blame if weights.use_blame else 1.0
    cost = 1.0 + math.log10(1.0 + max(event.gpu_hours, 0.0)) if weights.use_gpu_hours else 1.0
    return base * blame * 0.5 ** (age_days / weights.half_life_days) * cost


def rank_nodes(
    events: Iterable[FailureEvent], until: datetime, weights: ScoreWeights | None = None
) -> list[NodeScore]:
    """Every node with an event up to ``until``, worst first (ties by node name), ranks from 1."""
    weights = weights or ScoreWeights()
    scores: dict[str, NodeScore] = {}
    for event in events:
        if event.at > until:
            continue
        entry = scores.setdefault(event.node, NodeScore(event.node))
        entry.score += event_weight(event, until, weights)
        entry.events += 1
        for source in event.sources:
            entry.by_source[source] += 1
        entry.gpu_hours_lost += event.gpu_hours
        if entry.last_failure is None or event.at > entry.last_failure:
            entry.last_failure = event.at
    ranking = sorted(scores.values(), key=lambda s: (-s.score, s.node))
    for rank, entry in enumerate(ranking, start=1):
        entry.rank = rank
    return ranking


def failure_counts(events: Iterable[FailureEvent], until: datetime) -> list[tuple[str, int]]:
    """The plain baseline: (node, events up to ``until``), most first (ties by name)."""
    counts: dict[str, int] = {}
    for event in events:
        if event.at <= until:
            counts[event.node] = counts.get(event.node, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def worst_nodes(ranking: list[NodeScore], top: int, min_score: float) -> list[NodeScore]:
    """The nodes to keep cordoned: the first ``top`` of the ranking whose score reaches ``min_score``."""
    return [entry for entry in ranking[:top] if entry.score >= min_score]
