"""PyTorch Flight Recorder dumps of a hung job: which ranks never entered the stuck collective, on which nodes.

When a collective times out, PyTorch's watchdog writes each rank's Flight Recorder ring buffer (its last
``TORCH_FR_BUFFER_SIZE`` / ``TORCH_NCCL_TRACE_BUFFER_SIZE`` collectives) to
``<TORCH_FR_DUMP_TEMP_FILE><rank>`` (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, default
``/tmp/nccl_trace_rank_<rank>``) when ``TORCH_NCCL_DUMP_ON_TIMEOUT=1``: one file per rank, a pickle of plain
dicts and lists (or the same document as JSON), in PyTorch's own format (``version`` "2.x"; the fields
below are those ``torch.distributed.flight_recorder``, PyTorch's analyzer ``torchfrtrace``, reads).

A dump holds ``entries`` (one per collective or point-to-point op the rank enqueued: ``process_group``
(name, description), ``collective_seq_id``, ``profiling_name`` ("nccl:all_reduce"), ``input_sizes``,
``output_sizes``, ``input_dtypes``, ``output_dtypes``, ``state`` scheduled/started/completed), ``pg_config``
(each process group's global ranks) and ``pg_status``. This module reads a folder of them without torch:
the pickles through an unpickler that builds only plain values (it refuses any other class a pickle names,
so a dump cannot run code), and a malformed dump is an ``InputError`` naming the file and the problem.

**What is derived** (:func:`analyse`), per process group: the *stuck collective* is the lowest sequence id
that some member recorded but did not complete; the reference call is the one most members made under that
id (operation, sizes, dtypes). A member is **blamed** when it *never entered* it (its last collective in the
group has a lower sequence id) or entered a *mismatched* one (another operation, other sizes or dtypes; when
it is in flight in the reference call under another sequence id, that is said too: it skipped or added a
collective earlier). A blamed rank maps to a node by the dump's own host name (a ``hostname`` field, or the
subfolder the dump lies in when that is a node of the job), else by the job's node list in rank order with
``world size / nodes`` ranks per node.

**Conclusive** only when every rank of the job wrote a readable dump, at least one collective is stuck, the
blamed ranks are a strict minority of each stuck group (one of two ranks is a tie: which side is wrong
cannot be told), no member's buffer had already dropped the stuck collective, and every blamed rank maps
to a node of the job. Otherwise the verdict says why (``why``), and recovery runs its two-round all-gather
test as it would without a dump (``acme.recovery.recover``): notably when every member entered the stuck
collective with matching arguments, the collective itself hangs (a link or GPU fault), which only the
test can place.
"""

from __future__ import annotations

import builtins
import io
import json
import pickle
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from acme.errors import InputError

COMPLETED = "completed"
DEFAULT_GROUP = "0"
SUPPORTED_MAJOR_VERSION = "2"
"""Dump format versions read ("2.x", written by torch 2.4 on); another major version is refused."""

_PLAIN_BUILTINS = frozenset({"list", "dict", "tuple", "set", "frozenset", "int", "float", "str", "bool"})
_STATE_FROM_RETIRED = frozenset({"gloo"})  # backends that record no state, only retirement
_HOST_FIELDS = ("hostname", "host_name", "host")
_TRAILING_NUMBER = re.compile(r"(\d+)(?:\.(?:pkl|pickle|json))?$")


def _plain_list(items: Any) -> list[Any]:
    return list(items)


def _drop_type_tag(value: Any, _tag: Any) -> Any:
    return value


# torch's C++ pickler writes its typed lists and dicts through these helpers; rebuilt here as plain values.
_TORCH_PICKLE_HELPERS = {
    "build_intlist": _plain_list,
    "build_floatlist": _plain_list,
    "build_boollist": _plain_list,
    "build_doublelist": _plain_list,
    "build_strlist": _plain_list,
    "restore_type_tag": _drop_type_tag,
}


class _PlainUnpickler(pickle.Unpickler):
    """Builds only plain values: a pickle naming any other class or function is refused, not imported."""

    def __init__(self, data: bytes, source: str):
        super().__init__(io.BytesIO(data))
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _PLAIN_BUILTINS:
            return getattr(builtins, name)
        if module == "torch.jit._pickle" and name in _TORCH_PICKLE_HELPERS:
            return _TORCH_PICKLE_HELPERS[name]
        raise InputError(
            self.source,
            f"the pickle names {module}.{name}: a Flight Recorder dump holds only plain values, so it is "
            "not read (is this a dump?)",
        )


# --- one rank's dump ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collective:
    """One entry of a rank's ring buffer: a collective the rank enqueued, and how far it got."""

    record_id: int
    group: str  # process group name ("0" is the default group)
    seq_id: int  # collective_seq_id within the group
    op: str  # profiling_name without the backend: "all_reduce"
    input_sizes: str  # as text: "[[8]]" (compares and hashes fast, and reads the same in a message)
    output_sizes: str
    dtypes: str  # input then output dtypes: "[['Float'], ['Float']]"
    state: str  # scheduled, started or completed
    done: bool  # finished (see ``_finished``)

    @property
    def call(self) -> tuple[Any, ...]:
        """What must agree across ranks for the collective to match."""
        return (self.op, self.input_sizes, self.output_sizes, self.dtypes)

    def describe(self) -> str:
        return f"#{self.seq_id} {self.op} {self.input_sizes}->{self.output_sizes} ({'finished' if self.done else 'in flight'})"


@dataclass(frozen=True)
class RankDump:
    """One rank's dump: its collectives and the process groups it knew (name -> global ranks)."""

    rank: int
    source: str
    version: str
    host: str | None
    groups: Mapping[str, tuple[int, ...]]
    collectives: tuple[Collective, ...]  # point-to-point entries (send/recv) are left out

    def in_group(self, group: str) -> dict[int, Collective]:
        """This rank's collectives in ``group`` by sequence id (the last record of a coalesced id)."""
        found: dict[int, Collective] = {}
        for entry in sorted(self.collectives, key=lambda c: c.record_id):
            if entry.group == group:
                found[entry.seq_id] = entry
        return found


def load_dump_document(data: bytes, source: str) -> dict[str, Any]:
    """The dump's top-level dict from its bytes (pickle, or JSON when it starts with ``{``)."""
    head = data.lstrip()[:1]
    if not head:
        raise InputError(source, "empty file: not a Flight Recorder dump")
    if head == b"{":
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(source, f"not valid JSON ({exc}): not a Flight Recorder dump") from None
    else:
        try:
            document = _PlainUnpickler(data, source).load()
        except InputError:
            raise
        except Exception as exc:  # a truncated or foreign pickle raises any of a dozen types
            raise InputError(
                source, f"not a readable pickle ({type(exc).__name__}: {exc}): truncated, or not a dump"
            ) from None
    if not isinstance(document, dict):
        raise InputError(
            source, f"the dump is a {type(document).__name__}, expected a dict with entries and version"
        )
    return document


def parse_dump(data: bytes, source: str, folder_host: str | None = None) -> RankDump:
    """One rank's dump from its file's bytes; ``source`` names the file in every error."""
    document = load_dump_document(data, source)
    missing = [key for key in ("entries", "version") if key not in document]
    if missing:
        raise InputError(source, f"no {' or '.join(missing)} field: not a Flight Recorder dump")
    version = str(document["version"])
    if version.split(".")[0] != SUPPORTED_MAJOR_VERSION:
        raise InputError(
            source, f"dump format version {version}: this reader knows {SUPPORTED_MAJOR_VERSION}.x only"
        )
    entries = document["entries"]
    if not isinstance(entries, list):
        raise InputError(source, f"entries is a {type(entries).__name__}, expected a list")
    parsed = [_parse_entry(entry, index, source) for index, entry in enumerate(entries)]
    collectives = [entry for entry in parsed if entry is not None]
    return RankDump(
        rank=_rank_of(document, source),
        source=source,
        version=version,
        host=_host_of(document, source) or folder_host,
        groups=_groups_of(document.get("pg_config") or {}, source),
        collectives=tuple(collectives),
    )


def _parse_entry(entry: Any, index: int, source: str) -> Collective | None:
    """A collective entry; None for a point-to-point op (send/recv have no collective sequence id)."""
    where = f"{source}: entry {index}"
    if not isinstance(entry, dict):
        raise InputError(where, f"is a {type(entry).__name__}, expected a dict")
    if entry.get("is_p2p"):
        return None
    missing = [
        key
        for key in ("collective_seq_id", "profiling_name", "state", "process_group")
        if entry.get(key) is None
    ]
    if missing:
        raise InputError(where, f"has no {', '.join(missing)}")
    group = entry["process_group"]
    if not isinstance(group, list | tuple) or not group:
        raise InputError(where, f"process_group {group!r} is not (name, description)")
    name = str(entry["profiling_name"])
    return Collective(
        record_id=_whole_number(entry.get("record_id", index), where, "record_id"),
        group=str(group[0]),
        seq_id=_whole_number(entry["collective_seq_id"], where, "collective_seq_id"),
        op=name.split(":", 1)[1] if ":" in name else name,
        input_sizes=_text(entry.get("input_sizes")),
        output_sizes=_text(entry.get("output_sizes")),
        dtypes=_text([entry.get("input_dtypes"), entry.get("output_dtypes")]),
        state=str(entry["state"]),
        done=_finished(name, str(entry["state"]), entry.get("retired")),
    )


def _finished(profiling_name: str, state: str, retired: Any) -> bool:
    """Whether the collective had finished when the dump was taken.

    NCCL's ``state`` comes from the GPU's events (completed = done). Gloo records no events, so its state
    stays "scheduled" and only ``retired`` says the work is over; gloo also retires a collective that
    raised its timeout, so a gloo dump must be taken while the collective is still in flight.
    """
    if profiling_name.split(":", 1)[0] in _STATE_FROM_RETIRED:
        return retired is True
    return state == COMPLETED


def _whole_number(value: Any, where: str, what: str) -> int:
    # torch writes ints; its analyzer's tests write sequence ids as strings of digits: both are read
    if isinstance(value, bool) or not (
        isinstance(value, int) or (isinstance(value, str) and value.isdigit())
    ):
        raise InputError(where, f"{what} {value!r} is not a whole number")
    return int(value)


def _rank_of(document: Mapping[str, Any], source: str) -> int:
    """The dump's ``rank`` field, else the number its file name ends with (``nccl_trace_rank_3``)."""
    if "rank" in document:
        return _whole_number(document["rank"], source, "rank")
    match = _TRAILING_NUMBER.search(source.rsplit("/", 1)[-1])
    if match is None:
        raise InputError(
            source, "no rank field, and the file name does not end with the rank (<prefix><rank>)"
        )
    return int(match.group(1))


def _host_of(document: Mapping[str, Any], source: str) -> str | None:
    for key in _HOST_FIELDS:
        value = document.get(key)
        if value is not None:
            if not isinstance(value, str) or not value:
                raise InputError(source, f"{key} {value!r} is not a host name")
            return value
    return None


def _groups_of(pg_config: Any, source: str) -> dict[str, tuple[int, ...]]:
    """Process group name -> global ranks, from ``pg_config`` (ranks are written as a string "[0, 1]")."""
    if not isinstance(pg_config, dict):
        raise InputError(source, f"pg_config is a {type(pg_config).__name__}, expected a dict")
    groups = {}
    for name, config in pg_config.items():
        ranks = config.get("ranks") if isinstance(config, dict) else None
        if isinstance(ranks, str):
            try:
                ranks = json.loads(ranks)
            except ValueError:
                ranks = None
        if not isinstance(ranks, list) or not all(isinstance(r, int) and r >= 0 for r in ranks):
            raise InputError(source, f"pg_config of group {name!r}: ranks {config!r} is not a list of ranks")
        groups[str(name)] = tuple(ranks)
    return groups


def _text(value: Any) -> str:
    # repr, not json.dumps: a fifth of the time per entry, and a dump's lists read the same either way
    return repr(value)


# --- a folder of dumps ------------------------------------------------------------------------------


class NoDumps(InputError):
    """The folder or prefix holds no dump at all (or is not there)."""


def read_dump_folder(uri: str, job_nodes: Sequence[str] = ()) -> list[RankDump]:
    """Every rank's dump under ``uri`` (a folder or ``s3://`` prefix), one file per rank, in rank order.

    A dump in a subfolder named like one of ``job_nodes`` is that node's. Files starting with a dot and
    README files are skipped; any other file must be a dump. Two dumps of one rank are an error.
    """
    from pathlib import Path

    from acme.lake import open_lake

    if "://" not in uri and not Path(uri).is_dir():
        raise NoDumps(uri, "no such folder: where are the Flight Recorder dumps?")
    store = open_lake(uri)
    nodes = set(job_nodes)
    dumps: dict[int, RankDump] = {}
    for item in store.find(""):
        parts = item.key.split("/")
        if parts[-1].startswith(".") or parts[-1].upper().startswith("README"):
            continue
        folder_host = parts[-2] if len(parts) > 1 and parts[-2] in nodes else None
        dump = parse_dump(store.read_bytes(item.key), store.url(item.key), folder_host)
        if dump.rank in dumps:
            raise InputError(
                dump.source, f"a second dump of rank {dump.rank} (the first is {dumps[dump.rank].source})"
            )
        dumps[dump.rank] = dump
    if not dumps:
        raise NoDumps(uri, "no dump in this folder (one file per rank, <prefix><rank>)")
    return [dumps[rank] for rank in sorted(dumps)]


# --- the verdict -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlamedRank:
    """A rank that never entered the stuck collective, or entered a mismatched one, and its node."""

    rank: int
    node: str | None
    group: str
    problem: str  # "never entered" or "mismatched"
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "node": self.node, "group": self.group, "problem": self.problem,
                "detail": self.detail}  # fmt: skip


@dataclass(frozen=True)
class StuckCollective:
    """The lowest collective of a group that some member recorded and did not complete."""

    group: str
    seq_id: int
    call: str  # the reference call: "all_reduce [[4]]->[[4]]"
    members: tuple[int, ...]
    entered: tuple[int, ...]  # members whose call under this sequence id matches the reference

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "seq_id": self.seq_id, "call": self.call, "members": list(self.members),
                "entered": list(self.entered)}  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """What the dumps say: the stuck collectives, the blamed ranks and nodes, and whether that is enough."""

    conclusive: bool
    why: str
    ranks: tuple[int, ...]  # ranks that wrote a dump
    world_size: int
    stuck: tuple[StuckCollective, ...] = ()
    blamed: tuple[BlamedRank, ...] = ()
    faulty_nodes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # what made it inconclusive

    def to_dict(self) -> dict[str, Any]:
        return {
            "conclusive": self.conclusive,
            "why": self.why,
            "ranks": list(self.ranks),
            "world_size": self.world_size,
            "stuck": [item.to_dict() for item in self.stuck],
            "blamed": [item.to_dict() for item in self.blamed],
            "faulty_nodes": list(self.faulty_nodes),
            "problems": list(self.problems),
        }


@dataclass
class _Reading:
    """What :func:`analyse` has found so far."""

    stuck: list[StuckCollective] = field(default_factory=list)
    blamed: list[BlamedRank] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def analyse(dumps: Sequence[RankDump], job_nodes: Sequence[str] = ()) -> Verdict:
    """The verdict of a job's dumps (rules in the module docstring); ``job_nodes`` in rank order."""
    if not dumps:
        raise InputError("flight recorder dumps", "none given")
    by_rank = {dump.rank: dump for dump in dumps}
    world_size = _world_size(dumps)
    reading = _Reading()
    silent = [rank for rank in range(world_size) if rank not in by_rank]
    if silent:
        reading.problems.append(f"rank(s) {_ranks(silent)} of {world_size} wrote no dump")
    for group, members in _stuck_groups(dumps, world_size):
        _read_group(group, members, by_rank, reading)
    node_of = rank_nodes(dumps, world_size, job_nodes, reading.problems)
    blamed = [BlamedRank(b.rank, node_of.get(b.rank), b.group, b.problem, b.detail) for b in reading.blamed]
    unplaced = [b.rank for b in blamed if b.node is None]
    if unplaced:
        reading.problems.append(f"rank(s) {_ranks(unplaced)} cannot be placed on a node of the job")
    faulty = tuple(dict.fromkeys(b.node for b in blamed if b.node is not None))
    if not reading.stuck and not reading.problems:
        reading.problems.append(
            "no collective is in flight: every recorded collective completed on every rank (the hang is "
            "outside the collectives, e.g. data loading, or the dumps were taken before it)"
        )
    elif reading.stuck and not blamed and not reading.problems:
        reading.problems.append(
            "every member entered the stuck collective with matching arguments: the collective itself "
            "hangs (a link or GPU fault), which a dump cannot place"
        )
    conclusive = not reading.problems and bool(faulty)
    why = (
        "; ".join(f"rank {b.rank} on {b.node} {b.problem} {b.detail}" for b in blamed)
        if conclusive
        else "; ".join(reading.problems)
    )
    return Verdict(
        conclusive=conclusive,
        why=why,
        ranks=tuple(sorted(by_rank)),
        world_size=world_size,
        stuck=tuple(reading.stuck),
        blamed=tuple(blamed),
        faulty_nodes=faulty if conclusive else (),
        problems=tuple(reading.problems),
    )


def _world_size(dumps: Sequence[RankDump]) -> int:
    """One more than the highest rank any dump or group configuration names."""
    seen = [dump.rank for dump in dumps] + [
        r for dump in dumps for ranks in dump.groups.values() for r in ranks
    ]
    return max(seen) + 1


def _members(group: str, dump: RankDump, dumps: Sequence[RankDump], world_size: int) -> tuple[int, ...]:
    """The group's ranks as ``dump``'s rank knows them; the default group "0" is every rank (gloo's dumps
    list it under the name ""), and a group no config lists is every rank that recorded it."""
    if group in dump.groups:
        return dump.groups[group]
    if group == DEFAULT_GROUP:
        return tuple(range(world_size))
    return tuple(sorted(d.rank for d in dumps if any(c.group == group for c in d.collectives)))


def _stuck_groups(dumps: Sequence[RankDump], world_size: int) -> list[tuple[str, tuple[int, ...]]]:
    """Each group some rank has an unfinished collective in, with its members (from that rank's config).

    A group name can stand for different rank sets on different ranks (``split_group``), so members come
    with the name; a group no config lists is taken to be every rank that recorded it.
    """
    found: dict[tuple[str, tuple[int, ...]], None] = {}
    for dump in dumps:
        for entry in dump.collectives:
            if not entry.done:
                found[(entry.group, _members(entry.group, dump, dumps, world_size))] = None
    return sorted(found, key=lambda key: (key[0], key[1]))


def _read_group(
    group: str, members: tuple[int, ...], by_rank: Mapping[int, RankDump], reading: _Reading
) -> None:
    """The stuck collective of one group, and which members never entered it or entered another."""
    calls = {rank: by_rank[rank].in_group(group) for rank in members if rank in by_rank}
    unfinished = [seq for entries in calls.values() for seq, c in entries.items() if not c.done]
    if not unfinished:  # only a rank outside the group's configured members has it in flight
        reading.problems.append(
            f"group {group}: its configured members {_ranks(members)} have nothing in flight"
        )
        return
    seq_id = min(unfinished)
    made = {rank: entries[seq_id] for rank, entries in calls.items() if seq_id in entries}
    counts = Counter(c.call for c in made.values()).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        reading.problems.append(
            f"group {group}: ranks disagree about collective #{seq_id} and no call is made by more "
            f"ranks than another ({'; '.join(f'rank {r}: {c.describe()}' for r, c in sorted(made.items()))})"
        )
        return
    reference = next(c for c in made.values() if c.call == counts[0][0])
    entered = tuple(rank for rank, c in sorted(made.items()) if c.call == reference.call)
    reading.stuck.append(StuckCollective(group, seq_id, _call_text(reference), members, entered))
    blamed_here: list[BlamedRank] = []
    for rank in members:
        if rank in calls and rank not in entered:
            blamed = _blame(rank, group, seq_id, reference, calls[rank], reading.problems)
            if blamed is not None:
                blamed_here.append(blamed)
    if blamed_here and 2 * len(blamed_here) >= len(members):
        reading.problems.append(
            f"group {group}: {len(blamed_here)} of its {len(members)} ranks ({_ranks(b.rank for b in blamed_here)}) "
            f"did not enter collective #{seq_id} that ranks {_ranks(entered)} entered: not a minority, so "
            "which side is wrong cannot be told"
        )
    reading.blamed.extend(blamed_here)


def _blame(
    rank: int,
    group: str,
    seq_id: int,
    reference: Collective,
    entries: Mapping[int, Collective],
    problems: list[str],
) -> BlamedRank | None:
    """Why ``rank`` is not among those that entered the stuck collective (None when its dump cannot say)."""
    if seq_id in entries:
        made = entries[seq_id]
        detail = f"collective #{seq_id} of group {group}: {_difference(made, reference)}"
        elsewhere = [
            seq for seq, c in entries.items() if c.call == reference.call and not c.done and seq != seq_id
        ]
        if elsewhere:
            nearest = min(elsewhere, key=lambda seq: abs(seq - seq_id))
            detail += (
                f"; it made the reference call as #{nearest} instead (sequence ids differ by "
                f"{nearest - seq_id}: it skipped or added a collective earlier)"
            )
        return BlamedRank(rank, None, group, "mismatched", detail)
    if entries and min(entries) > seq_id:
        problems.append(
            f"rank {rank}'s buffer starts at collective #{min(entries)} of group {group}, after the stuck "
            f"#{seq_id}: its record of it was overwritten (raise TORCH_FR_BUFFER_SIZE)"
        )
        return None
    if entries and max(entries) > seq_id:
        problems.append(f"rank {rank} has no record of collective #{seq_id} of group {group} but later ones")
        return None
    last = f"its last one was {entries[max(entries)].describe()}" if entries else "it recorded none in it"
    return BlamedRank(
        rank,
        None,
        group,
        "never entered",
        f"collective #{seq_id} of group {group} ({_call_text(reference)}): {last}",
    )


def _difference(made: Collective, reference: Collective) -> str:
    if made.op != reference.op:
        return f"called {made.op} where the others called {reference.op}"
    if (made.input_sizes, made.output_sizes) != (reference.input_sizes, reference.output_sizes):
        return f"{made.op} of sizes {_call_text(made, False)} where the others used {_call_text(reference, False)}"
    return f"{made.op} with dtypes {made.dtypes} where the others used {reference.dtypes}"


def _call_text(call: Collective, with_op: bool = True) -> str:
    sizes = f"{call.input_sizes}->{call.output_sizes}"
    return f"{call.op} {sizes}" if with_op else sizes


def _ranks(ranks: Any) -> str:
    return ", ".join(str(rank) for rank in ranks)


# --- ranks to nodes ----------------------------------------------------------------------------------


def rank_nodes(
    dumps: Sequence[RankDump], world_size: int, job_nodes: Sequence[str], problems: list[str]
) -> dict[int, str]:
    """Each rank's node: the dump's host when it names a node of the job (exactly or by its short name),
    else by rank order over ``job_nodes`` with ``world_size / len(job_nodes)`` ranks per node.

    A host that is no node of the job is noted in ``problems``, which makes the verdict inconclusive.
    """
    nodes = list(job_nodes)
    short = {node.split(".")[0]: node for node in nodes}
    placed: dict[int, str] = {}
    for dump in dumps:
        if dump.host is None:
            continue
        node = dump.host if dump.host in nodes else short.get(dump.host.split(".")[0])
        if node is None:
            problems.append(f"rank {dump.rank}'s dump names host {dump.host}, which is no node of the job")
        else:
            placed[dump.rank] = node
    if nodes and world_size % len(nodes) == 0:
        per_node = world_size // len(nodes)
        for rank in range(world_size):
            placed.setdefault(rank, nodes[rank // per_node])
    elif nodes and len(placed) < world_size:
        problems.append(
            f"world size {world_size} is not a multiple of the job's {len(nodes)} nodes and the dumps name "
            "no host: ranks cannot be placed by rank order"
        )
    return placed
