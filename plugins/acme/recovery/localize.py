"""Two-round fault localization of a crashed training job's nodes (after DLRover's node check).

Before a crashed pretraining job restarts, its nodes are checked so that a broken one is cordoned
instead of crashing the job again. A check is a short all-gather plus a matmul in a small *world*
of nodes (``acme.recovery.allgather_check``); a world fails when any of its nodes is broken, and its
nodes report how long the check took.

Round 1 splits the job's nodes, in the order given (usually the job's rank order, so neighbours in
a rack share a world), into 2-node worlds; with an odd count the last world has 3 nodes. All worlds
run at once. A node of a failed world is a *fault suspect*; a node of a passing world is *known
healthy*. The median check time of the known-healthy nodes is the job's *reference time*; a
known-healthy node slower than ``straggler_factor`` (2) x the reference is a *slow suspect*
(the all-gather waits for the slowest rank, so a straggler slows its partner too: round 1 alone
cannot say which of the two is slow). As the median is the reference, stragglers must slow fewer
than half of the nodes of passing worlds (about one straggler per four worlds at most); denser
slowness raises the median and hides them.

Round 2 pairs every fault suspect with a known-healthy partner, the slowest suspect (a node that
never reported counts as slowest) with the fastest healthy node, and so on; then every slow suspect
with the fastest healthy node left. When the fast nodes run out, slow suspects (they passed round 1)
partner the remaining fault suspects. Suspects still without a partner are paired with each other,
never with a node of their own round-1 world: such a world can clear nodes when it passes but cannot
blame anyone when it fails. Round 2 launches no world when round 1 found nothing to confirm.

The decision (``decide``) blames only on evidence from both rounds:

- **faulty**: the node's round-1 world failed, and its round-2 world failed although every other
  member of it had passed round 1;
- **straggler**: slower than the threshold in round 1 and again in round 2, where every other member
  of its round-2 world was fast in round 1.

Everything else that cannot be settled is returned as **undecided** with the reason, never blamed:
a fault suspect with no healthy partner left (too few healthy nodes, e.g. every round-1 world failed);
a round-2 world that failed with two or more unconfirmed members; a node that passed round 1 but
failed round 2 (intermittent fault, or a flaky partner); a failed round-1 world whose members all
passed round 2 (a transient failure or a bad link between those two nodes); a node slow in round 2
whose round 1 gave no timing or whose round-2 partner was itself slow.

When any failed world had no faulty member (a node that passed round 1 failing round 2, or a
failed round-1 world whose members all passed round 2: the check is flaky in this job), the nodes that would have been blamed are returned undecided too: two failures in a row are then
weak evidence. A healthy node that fails twice by chance, in a job where the check showed no other
flakiness, cannot be told from a faulty one in two rounds; with a world failure probability p that
happens to about 2p^2 of the round-1 worlds (see ``benchmarks/bench_locate_faults.py``), which is
one reason cordoning also passes ``acme.recovery.blast_radius``.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from acme.errors import InputError

STRAGGLER_FACTOR = 2.0
"""A node is slow when its check takes longer than this multiple of the job's reference time."""

NEVER_REPORTED = float("inf")
"""Sort key of a node without a timing: a node that never reported is treated as the slowest."""


@dataclass(frozen=True)
class WorldResult:
    """Outcome of one all-gather check in one world.

    ``nodes`` are the world's nodes in rank order; ``ok`` is true when every rank finished the
    all-gather and the matmul with correct data; ``seconds`` holds, per node that reported, the
    duration of the check (all-gather + matmul, start-up excluded); ``error`` says why it failed.
    """

    nodes: tuple[str, ...]
    ok: bool
    seconds: Mapping[str, float] = field(default_factory=dict)
    error: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "seconds", dict(self.seconds))

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "ok": self.ok, "seconds": dict(self.seconds), "error": self.error}


@dataclass(frozen=True)
class Undecided:
    """A node the two rounds could neither blame nor clear, and why."""

    node: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"node": self.node, "reason": self.reason}


@dataclass(frozen=True)
class Localization:
    """What the two rounds found, with the worlds' results kept as evidence."""

    faulty: tuple[str, ...]
    stragglers: tuple[str, ...]
    undecided: tuple[Undecided, ...]
    worlds_launched: int
    reference_seconds: float | None
    unexplained_failures: int = 0
    round1: tuple[WorldResult, ...] = ()
    round2: tuple[WorldResult, ...] = ()

    @property
    def undecided_nodes(self) -> tuple[str, ...]:
        return tuple(item.node for item in self.undecided)

    def to_dict(self, evidence: bool = True) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "faulty": list(self.faulty),
            "stragglers": list(self.stragglers),
            "undecided": [item.to_dict() for item in self.undecided],
            "worlds_launched": self.worlds_launched,
            "reference_seconds": self.reference_seconds,
            "unexplained_failures": self.unexplained_failures,
        }
        if evidence:
            summary["round1"] = [world.to_dict() for world in self.round1]
            summary["round2"] = [world.to_dict() for world in self.round2]
        return summary


RunWorld = Callable[[list[str], int], WorldResult]
"""Runs the check on one world (its nodes in rank order) in the given round (1 or 2)."""


# --- planning ---------------------------------------------------------------------------------


def plan_round1(nodes: Sequence[str]) -> list[list[str]]:
    """Round-1 worlds: consecutive pairs of ``nodes``; the last world has 3 nodes when the count is odd.

    A job of one node gets one world of one node (nothing to pair it with).
    """
    checked = _checked_node_list(nodes, "nodes")
    if len(checked) == 1:
        return [checked]
    worlds = [checked[i : i + 2] for i in range(0, len(checked) - len(checked) % 2, 2)]
    if len(checked) % 2:
        worlds[-1].append(checked[-1])
    return worlds


def plan_round2(round1: Sequence[WorldResult], straggler_factor: float = STRAGGLER_FACTOR) -> list[list[str]]:
    """Round-2 worlds from the round-1 results: each suspect with a known-healthy partner when one is left.

    Fault suspects come first (slowest with the fastest healthy node), then slow suspects; suspects
    left over are paired across round-1 worlds (see the module docstring). Empty when round 1 found
    nothing to confirm.
    """
    first = _analyse_round1(round1, straggler_factor)
    partners = list(first.fast_first)
    worlds: list[list[str]] = []
    leftover_fault: list[str] = []
    for suspect in first.fault_suspects:
        if partners:
            worlds.append([suspect, partners.pop(0)])
        else:
            leftover_fault.append(suspect)
    # Slow suspects passed round 1, so they are healthy partners for the fault check when the fast
    # nodes run out; a slow node used that way gets no straggler check (faults matter more).
    slow_left = list(first.slow)
    while leftover_fault and slow_left:
        worlds.append([leftover_fault.pop(0), slow_left.pop(-1)])
    leftover_slow: list[str] = []
    for suspect in slow_left:
        if partners:
            worlds.append([suspect, partners.pop(0)])
        else:
            leftover_slow.append(suspect)
    worlds += _pair_across_round1_worlds(leftover_fault, first.world_of)
    worlds += _pair_across_round1_worlds(leftover_slow, first.world_of)
    return worlds


def _pair_across_round1_worlds(suspects: list[str], world_of: Mapping[str, int]) -> list[list[str]]:
    """Suspects in pairs whose members come from different round-1 worlds (a lone one joins a pair)."""
    by_world: dict[int, list[str]] = {}
    for node in suspects:
        by_world.setdefault(world_of[node], []).append(node)
    # Interleave the round-1 worlds, largest first, so that neighbours come from different worlds.
    groups = sorted(by_world.values(), key=len, reverse=True)
    interleaved = [
        g[i] for i in range(max((len(g) for g in groups), default=0)) for g in groups if i < len(g)
    ]
    worlds: list[list[str]] = []
    alone: list[str] = []
    remaining = interleaved
    while remaining:
        node = remaining.pop(0)
        partner = next((other for other in remaining if world_of[other] != world_of[node]), None)
        if partner is None:
            alone.append(node)
            continue
        remaining.remove(partner)
        worlds.append([node, partner])
    for node in alone:
        host = next(
            (w for w in worlds if len(w) == 2 and all(world_of[m] != world_of[node] for m in w)), None
        )
        if host is not None:
            host.append(node)
    return worlds


# --- deciding ---------------------------------------------------------------------------------


@dataclass
class _Round1:
    """Round 1 read for round 2: who is suspect, who is healthy, how fast."""

    world_of: dict[str, int]
    failed_worlds: list[WorldResult]
    fault_suspects: list[str]  # slowest (or silent) first
    healthy: set[str]  # nodes of passing worlds
    slow: list[str]  # healthy nodes above the threshold, slowest first
    fast_first: list[str]  # healthy nodes not slow, fastest first (untimed last)
    reference_seconds: float | None
    threshold_seconds: float | None

    def __post_init__(self) -> None:
        self._suspect_set = set(self.fault_suspects)
        self._slow_set = set(self.slow)
        self._fast_set = set(self.fast_first)

    def is_suspect(self, node: str) -> bool:
        return node in self._suspect_set

    def is_slow(self, node: str) -> bool:
        return node in self._slow_set

    def is_fast(self, node: str) -> bool:
        return node in self._fast_set


def _analyse_round1(round1: Sequence[WorldResult], straggler_factor: float) -> _Round1:
    if straggler_factor <= 1.0:
        raise InputError(
            "straggler_factor", f"must be above 1 (a multiple of the median); got {straggler_factor}"
        )
    if not round1:
        raise InputError("round 1 results", "no worlds: round 1 has to check every node of the job")
    world_of: dict[str, int] = {}
    order: dict[str, int] = {}
    for index, world in enumerate(round1):
        if not world.nodes:
            raise InputError("round 1 results", f"world {index} has no nodes")
        for node in world.nodes:
            if node in world_of:
                raise InputError(
                    "round 1 results", f"node {node!r} is in worlds {world_of[node]} and {index}"
                )
            world_of[node] = index
            order[node] = len(order)

    def seconds(node: str) -> float:
        value = round1[world_of[node]].seconds.get(node)
        return NEVER_REPORTED if value is None else float(value)

    healthy_nodes = [n for w in round1 if w.ok for n in w.nodes]
    timings = [seconds(n) for n in healthy_nodes if seconds(n) != NEVER_REPORTED]
    reference = statistics.median(timings) if timings else None
    threshold = straggler_factor * reference if reference else None
    slow = [n for n in healthy_nodes if threshold is not None and threshold < seconds(n) < NEVER_REPORTED]
    slow_set = set(slow)
    suspects = [n for w in round1 if not w.ok for n in w.nodes]
    return _Round1(
        world_of=world_of,
        failed_worlds=[w for w in round1 if not w.ok],
        fault_suspects=sorted(suspects, key=lambda n: (-seconds(n), order[n])),
        healthy=set(healthy_nodes),
        slow=sorted(slow, key=lambda n: (-seconds(n), order[n])),
        fast_first=sorted(
            (n for n in healthy_nodes if n not in slow_set), key=lambda n: (seconds(n), order[n])
        ),
        reference_seconds=reference,
        threshold_seconds=threshold,
    )


def decide(
    round1: Sequence[WorldResult],
    round2: Sequence[WorldResult],
    straggler_factor: float = STRAGGLER_FACTOR,
) -> Localization:
    """Faulty nodes, stragglers and undecided nodes from both rounds' results (rules in the module doc)."""
    first = _analyse_round1(round1, straggler_factor)
    in_round2 = _round2_membership(round2, first)
    found = _Findings()
    for world in round2:
        if world.ok:
            found.cleared.update(world.nodes)
            _confirm_stragglers(world, first, found)
        else:
            _blame_in_failed_round2_world(world, first, found)
    _note_suspects_left_unpaired(first, in_round2, found)
    _explain_failed_round1_worlds(first, found)
    _withhold_blame_when_check_is_flaky(found)

    order = {node: index for index, node in enumerate(first.world_of)}
    return Localization(
        faulty=tuple(sorted(found.faulty, key=order.__getitem__)),
        stragglers=tuple(sorted(found.stragglers, key=order.__getitem__)),
        undecided=tuple(
            Undecided(node, "; ".join(found.reasons[node]))
            for node in sorted(found.reasons, key=order.__getitem__)
        ),
        worlds_launched=len(round1) + len(round2),
        reference_seconds=first.reference_seconds,
        unexplained_failures=found.unexplained,
        round1=tuple(round1),
        round2=tuple(round2),
    )


@dataclass
class _Findings:
    """What ``decide`` has concluded so far, filled in step by step."""

    faulty: list[str] = field(default_factory=list)
    stragglers: list[str] = field(default_factory=list)
    cleared: set[str] = field(default_factory=set)  # members of a passing round-2 world
    unexplained: int = 0  # failed worlds without a faulty member: the check itself is flaky in this job
    reasons: dict[str, list[str]] = field(default_factory=dict)  # undecided nodes, why

    def undecided(self, node: str, reason: str) -> None:
        self.reasons.setdefault(node, []).append(reason)


def _round2_membership(round2: Sequence[WorldResult], first: _Round1) -> dict[str, int]:
    """Node -> index of its round-2 world; InputError for a node not checked in round 1 or in two worlds."""
    in_round2: dict[str, int] = {}
    for index, world in enumerate(round2):
        for node in world.nodes:
            if node not in first.world_of:
                raise InputError("round 2 results", f"node {node!r} was not checked in round 1")
            if node in in_round2:
                raise InputError(
                    "round 2 results", f"node {node!r} is in worlds {in_round2[node]} and {index}"
                )
            in_round2[node] = index
    return in_round2


def _describe(world: WorldResult) -> str:
    return "[" + ", ".join(world.nodes) + "]"


def _blame_in_failed_round2_world(world: WorldResult, first: _Round1, found: _Findings) -> None:
    """A failed round-2 world blames its one member that round 1 did not clear; else nobody."""
    unconfirmed = [n for n in world.nodes if n not in first.healthy]
    if len(unconfirmed) == 1:
        found.faulty.append(unconfirmed[0])
        for node in world.nodes:
            if first.is_slow(node):
                found.undecided(
                    node,
                    "slow in round 1, but its round-2 world confirmed another node's fault "
                    "and gave no timing",
                )
    elif not unconfirmed:
        found.unexplained += 1
        for node in world.nodes:
            found.undecided(
                node,
                f"passed round 1 but its round-2 world {_describe(world)} failed although every "
                "member had passed round 1: an intermittent fault or a flaky check; run it again",
            )
    else:
        for node in unconfirmed:
            found.undecided(
                node,
                f"its round-1 world failed and its round-2 world {_describe(world)} failed too, but "
                f"with {len(unconfirmed)} unconfirmed members: cannot tell which is faulty",
            )


def _confirm_stragglers(world: WorldResult, first: _Round1, found: _Findings) -> None:
    """A passing round-2 world's timings: who was slow again, and whether its partners prove it."""
    threshold = first.threshold_seconds
    if threshold is None:
        return
    for node in world.nodes:
        if not (first.is_slow(node) or first.is_suspect(node)):
            continue
        took = world.seconds.get(node)
        if took is None:
            if first.is_slow(node):
                found.undecided(node, "slow in round 1 but reported no timing in round 2")
        elif took > threshold:
            partners_fast = all(first.is_fast(m) for m in world.nodes if m != node)
            _judge_slow_in_round2(node, took, threshold, partners_fast, first.is_suspect(node), found)


def _judge_slow_in_round2(
    node: str, took: float, threshold: float, partners_fast: bool, failed_round1: bool, found: _Findings
) -> None:
    """A node over the threshold in round 2 is a straggler only when round 1 timed it slow too and its
    round-2 partners were known to be fast."""
    if failed_round1:
        if partners_fast:
            found.undecided(
                node,
                f"possible straggler: {took:.3g} s in round 2 (threshold {threshold:.3g} s), but its "
                "round-1 world failed, so round 1 gave no timing to confirm it",
            )
    elif partners_fast:
        found.stragglers.append(node)
    else:
        found.undecided(
            node,
            f"slow in both rounds ({took:.3g} s in round 2, threshold {threshold:.3g} s), but its "
            "round-2 partner was not known to be fast: cannot tell which one is slow",
        )


def _note_suspects_left_unpaired(first: _Round1, in_round2: Mapping[str, int], found: _Findings) -> None:
    """Suspects that round 2 did not check stay undecided, with why no partner was left."""
    no_partner = (
        "every round-1 world failed, so no node is known to be healthy to pair it with"
        if not first.healthy
        else "its round-1 world failed and no healthy partner was left for round 2"
    )
    for node in first.fault_suspects:
        if node not in in_round2:
            found.undecided(node, no_partner)
    for node in first.slow:
        if node not in in_round2:
            found.undecided(node, "slow in round 1 but no fast partner was left for round 2")


def _explain_failed_round1_worlds(first: _Round1, found: _Findings) -> None:
    """Every failed round-1 world without a faulty member: a transient failure when all its members
    passed round 2; otherwise the member the others cleared is named as likely faulty."""
    blamed = set(found.faulty)
    for world in first.failed_worlds:
        members = list(world.nodes)
        if any(node in blamed for node in members):
            continue
        if all(node in found.cleared for node in members):
            found.unexplained += 1
            for node in members:
                found.undecided(
                    node,
                    f"its round-1 world {_describe(world)} failed but every member passed round 2: a "
                    "transient failure or a bad link between them; run the check again",
                )
        else:
            _point_at_likely_faulty(members, found)


def _point_at_likely_faulty(members: list[str], found: _Findings) -> None:
    """An undecided member of a failed round-1 world whose other members all passed round 2."""
    for node in members:
        others_cleared = all(m in found.cleared for m in members if m != node)
        if node in found.reasons and node not in found.cleared and others_cleared:
            found.reasons[node].append(
                "likely faulty: the rest of its round-1 world passed round 2; confirm with a healthy partner"
            )


def _withhold_blame_when_check_is_flaky(found: _Findings) -> None:
    """Two failures in a row are weak evidence when other worlds failed with no faulty member."""
    if not (found.faulty and found.unexplained):
        return
    for node in found.faulty:
        found.undecided(
            node,
            f"failed both rounds beside healthy partners, but {found.unexplained} failed world(s) of this "
            "check had no faulty member, so the check is flaky here: rerun it before cordoning",
        )
    found.faulty = []


# --- driving ----------------------------------------------------------------------------------


def locate_faults(
    nodes: Sequence[str],
    run_world: RunWorld,
    straggler_factor: float = STRAGGLER_FACTOR,
    max_parallel: int = 32,
) -> Localization:
    """Both rounds on ``nodes``, running each world's check through ``run_world``, and the decision.

    The worlds of a round run at once (up to ``max_parallel`` threads; 1 runs them in turn).
    ``run_world`` reports a failed check as ``ok=False``; an exception from it means the launcher
    itself broke (not a node), so it propagates and nothing is decided.
    """
    if max_parallel < 1:
        raise InputError("max_parallel", f"must be at least 1; got {max_parallel}")
    round1 = _run_round(plan_round1(nodes), 1, run_world, max_parallel)
    round2 = _run_round(plan_round2(round1, straggler_factor), 2, run_world, max_parallel)
    return decide(round1, round2, straggler_factor)


def _run_round(
    worlds: list[list[str]], round_number: int, run_world: RunWorld, max_parallel: int
) -> list[WorldResult]:
    if max_parallel == 1 or len(worlds) <= 1:
        results = [run_world(list(world), round_number) for world in worlds]
    else:
        with ThreadPoolExecutor(max_workers=min(max_parallel, len(worlds))) as pool:
            results = list(pool.map(lambda world: run_world(list(world), round_number), worlds))
    for world, result in zip(worlds, results, strict=True):
        if not isinstance(result, WorldResult) or sorted(result.nodes) != sorted(world):
            got = list(result.nodes) if isinstance(result, WorldResult) else type(result).__name__
            raise InputError(
                "run_world", f"round {round_number}: asked to check {world}, got a result for {got}"
            )
    return results


# --- simulation and command line --------------------------------------------------------------


class SimulatedCluster:
    """A job's nodes, some faulty, some slow, answering all-gather checks like real worlds would.

    A world fails when it holds a faulty node, or (no faulty node) with ``flaky_probability``.
    Timing of a node: the all-gather waits for the world's slowest member, the matmul is the node's
    own (``allgather_seconds`` x the slowest member's slowdown + ``matmul_seconds`` x its own), with
    Gaussian ``noise``; a straggler's slowdown is ``straggler_slowdown``. In a failed world the healthy
    members report the collective timeout and a faulty member either never reports (it crashed) or
    also reports the timeout (it hung). Each world's outcome depends only on the seed, the round and
    its nodes, so worlds may run in any order or at once.
    """

    def __init__(
        self,
        nodes: Sequence[str],
        faulty: Iterable[str] = (),
        stragglers: Iterable[str] = (),
        seed: int = 0,
        flaky_probability: float = 0.0,
        allgather_seconds: float = 1.0,
        matmul_seconds: float = 1.0,
        straggler_slowdown: float = 3.0,
        noise: float = 0.03,
        timeout_seconds: float = 300.0,
    ):
        self.nodes = _checked_node_list(nodes, "nodes")
        known = set(self.nodes)
        self.faulty = frozenset(_checked_members(faulty, known, "faulty"))
        self.stragglers = frozenset(_checked_members(stragglers, known, "stragglers"))
        if not 0.0 <= flaky_probability < 1.0:
            raise InputError("flaky_probability", f"must be in [0, 1); got {flaky_probability}")
        self.seed = seed
        self.flaky_probability = flaky_probability
        self.allgather_seconds = allgather_seconds
        self.matmul_seconds = matmul_seconds
        self.straggler_slowdown = straggler_slowdown
        self.noise = noise
        self.timeout_seconds = timeout_seconds

    def run_world(self, world: list[str], round_number: int) -> WorldResult:
        unknown = [n for n in world if n not in self.nodes]
        if unknown:
            raise InputError("world", f"nodes {unknown} are not in the simulated job")
        rng = random.Random(f"{self.seed}:{round_number}:{'|'.join(world)}")
        broken = [n for n in world if n in self.faulty]
        flaky = not broken and self.flaky_probability > 0 and rng.random() < self.flaky_probability
        if broken or flaky:
            seconds: dict[str, float] = {}
            silent = []
            for node in world:
                if node in self.faulty and rng.random() < 0.5:
                    silent.append(node)
                else:
                    seconds[node] = self.timeout_seconds
            cause = f"no report from {', '.join(silent)}; " if silent else ""
            kind = "transient failure" if flaky else "all-gather timed out"
            error = f"{cause}{kind} after {self.timeout_seconds:g} s"
            return WorldResult(nodes=tuple(world), ok=False, seconds=seconds, error=error)
        slowdown = {n: self.straggler_slowdown if n in self.stragglers else 1.0 for n in world}
        collective = self.allgather_seconds * max(slowdown.values())
        seconds = {
            node: (collective + self.matmul_seconds * slowdown[node])
            * max(0.1, 1.0 + rng.gauss(0.0, self.noise))
            for node in world
        }
        return WorldResult(nodes=tuple(world), ok=True, seconds=seconds)


def node_names(count: int) -> list[str]:
    """``node-000`` … for a job of ``count`` nodes (more digits from 1,000 nodes on)."""
    width = max(3, len(str(count - 1)))
    return [f"node-{index:0{width}d}" for index in range(count)]


def locate_faults_cli(
    nodes: int,
    faulty: Sequence[str | int] | str = (),
    stragglers: Sequence[str | int] | str = (),
    seed: int = 0,
) -> dict[str, Any]:
    """Localize on a simulated job of ``nodes`` nodes with the given faulty and slow nodes.

    ``faulty`` and ``stragglers`` name nodes by 0-based index (``3`` or ``"3"``) or by name
    (``"node-003"``), as a list or one comma-separated string. Returns the command's JSON summary.
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int):
        raise InputError("--nodes", f"must be a whole number of nodes; got {nodes!r}")
    if nodes < 1:
        raise InputError("--nodes", f"a job has at least one node; got {nodes}")
    names = node_names(nodes)
    faulty_nodes = _resolve_nodes(faulty, names, "--faulty")
    slow_nodes = _resolve_nodes(stragglers, names, "--stragglers")
    both = sorted(set(faulty_nodes) & set(slow_nodes))
    if both:
        raise InputError(
            "--stragglers", f"{', '.join(both)} also listed in --faulty: a node is one or the other"
        )
    cluster = SimulatedCluster(names, faulty_nodes, slow_nodes, seed=seed)
    result = locate_faults(names, cluster.run_world, max_parallel=1)
    return {
        "rounds": 2,
        "faulty": list(result.faulty),
        "stragglers": list(result.stragglers),
        "worlds_launched": result.worlds_launched,
        "undecided": [item.to_dict() for item in result.undecided],
    }


def _resolve_nodes(items: Sequence[str | int] | str, names: list[str], option: str) -> list[str]:
    if isinstance(items, str):
        items = [part for part in items.split(",") if part.strip()]
    known = set(names)
    resolved: list[str] = []
    for item in items:
        if isinstance(item, bool):
            raise InputError(option, f"{item!r} is not a node index or name")
        text = item.strip() if isinstance(item, str) else item
        if isinstance(text, int) or text.isdigit():
            index = int(text)
            if index >= len(names):
                raise InputError(
                    option, f"node index {index} is out of range: the job has nodes 0..{len(names) - 1}"
                )
            node = names[index]
        elif text in known:
            node = text
        else:
            raise InputError(
                option, f"unknown node {text!r}: expected an index 0..{len(names) - 1} or {names[0]}…"
            )
        if node in resolved:
            raise InputError(option, f"{node} is listed twice")
        resolved.append(node)
    return resolved


def _checked_node_list(nodes: Sequence[str], what: str) -> list[str]:
    if isinstance(nodes, str):
        raise InputError(what, "expected a list of node names, got one string")
    checked = list(nodes)
    if not checked:
        raise InputError(what, "no nodes: a job has at least one node")
    seen: set[str] = set()
    for node in checked:
        if not isinstance(node, str) or not node:
            raise InputError(what, f"{node!r} is not a node name")
        if node in seen:
            raise InputError(what, f"{node} is listed twice")
        seen.add(node)
    return checked


def _checked_members(members: Iterable[str], known: set[str], what: str) -> list[str]:
    checked = list(members)
    for node in checked:
        if node not in known:
            raise InputError(what, f"{node!r} is not a node of the job")
    if len(set(checked)) != len(checked):
        raise InputError(what, "a node is listed twice")
    return checked
