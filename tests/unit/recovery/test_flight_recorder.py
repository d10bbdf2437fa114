"""Reading PyTorch Flight Recorder dumps (acme.recovery.flight_recorder) on real dumps written by torch 2.13
(tests/fixtures/flight_recorder/, README there), on copies of them edited one field at a time, and on
malformed files."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acme.errors import InputError
from acme.recovery.flight_recorder import analyse, parse_dump, read_dump_folder

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flight_recorder"
PICKLES = FIXTURES / "skip_rank3_of4"  # 4 ranks; rank 3 never entered all_reduce #7
JSONS = FIXTURES / "skip_rank1_of3_json"  # 3 ranks as JSON; rank 1 never entered all_reduce #7
TWO_NODES = ["gpu-a", "gpu-b"]


def documents(folder: Path) -> dict[int, dict[str, Any]]:
    return {
        int(path.name.rsplit("_", 1)[1]): pickle.loads(path.read_bytes()) for path in folder.glob("nccl_*")
    }


def edited(tmp_path: Path, edit: Callable[[dict[int, dict[str, Any]]], None], folder: Path = PICKLES) -> str:
    """A copy of the real dumps with ``edit`` applied to their documents (rank -> dict), as pickles."""
    docs = documents(folder)
    edit(docs)
    out = tmp_path / "dumps"
    out.mkdir()
    for rank, doc in docs.items():
        (out / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(doc))
    return str(out)


def last_entry(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["entries"][-1]


# --- real dumps ------------------------------------------------------------------------------------


def test_the_real_dump_names_the_rank_that_never_entered_the_stuck_all_reduce_and_its_node():
    verdict = analyse(read_dump_folder(str(PICKLES), TWO_NODES), TWO_NODES)
    assert verdict.conclusive, verdict.why
    assert verdict.world_size == 4 and verdict.ranks == (0, 1, 2, 3)
    (stuck,) = verdict.stuck
    assert (stuck.group, stuck.seq_id, stuck.call) == ("0", 7, "all_reduce [[8]]->[[8]]")
    assert stuck.entered == (0, 1, 2)
    (blamed,) = verdict.blamed
    # 4 ranks on 2 nodes: ranks 2 and 3 run on the second node
    assert (blamed.rank, blamed.node, blamed.problem) == (3, "gpu-b", "never entered")
    assert "its last one was #6 broadcast" in blamed.detail
    assert verdict.faulty_nodes == ("gpu-b",)


def test_the_real_json_dump_is_read_the_same_way():
    nodes = ["gpu-a", "gpu-b", "gpu-c"]
    verdict = analyse(read_dump_folder(str(JSONS), nodes), nodes)
    assert verdict.conclusive, verdict.why
    assert [(b.rank, b.node, b.problem) for b in verdict.blamed] == [(1, "gpu-b", "never entered")]


def test_the_real_pickle_names_only_plain_values_and_torchs_own_analyzer_fields():
    dump = parse_dump((PICKLES / "nccl_trace_rank_0").read_bytes(), "rank0")
    assert dump.rank == 0 and dump.version.startswith("2.")
    assert [c.op for c in dump.collectives] == ["all_reduce", "all_gather", "broadcast"] * 2 + ["all_reduce"]
    assert [c.done for c in dump.collectives] == [True] * 6 + [False]


def test_dumps_in_subfolders_named_after_nodes_are_placed_on_those_nodes(tmp_path):
    # rank order would put rank 3 on gpu-b; the folders say it ran on gpu-a
    for rank, node in {0: "gpu-b", 1: "gpu-b", 2: "gpu-a", 3: "gpu-a"}.items():
        (tmp_path / node).mkdir(exist_ok=True)
        shutil.copy(PICKLES / f"nccl_trace_rank_{rank}", tmp_path / node)
    verdict = analyse(read_dump_folder(str(tmp_path), TWO_NODES), TWO_NODES)
    assert verdict.conclusive and verdict.faulty_nodes == ("gpu-a",)


def test_a_host_name_in_the_dump_places_its_rank_by_the_short_name(tmp_path):
    def name_hosts(docs):
        for rank, doc in docs.items():
            doc["hostname"] = f"{TWO_NODES[1 - rank // 2]}.cluster.example"

    verdict = analyse(read_dump_folder(edited(tmp_path, name_hosts)), TWO_NODES)
    assert verdict.conclusive and verdict.faulty_nodes == ("gpu-a",)


# --- mismatched collectives (a real dump with one field changed) -------------------------------------


def test_a_rank_that_called_the_stuck_collective_with_another_size_is_named(tmp_path):
    def resize(docs):
        docs[3]["entries"].append({**last_entry(docs[0]), "input_sizes": [[16]], "output_sizes": [[16]]})

    verdict = analyse(read_dump_folder(edited(tmp_path, resize)), TWO_NODES)
    assert verdict.conclusive
    (blamed,) = verdict.blamed
    assert (blamed.rank, blamed.problem) == (3, "mismatched")
    assert "all_reduce of sizes [[16]]->[[16]] where the others used [[8]]->[[8]]" in blamed.detail


def test_a_rank_in_another_collective_is_named_with_its_shifted_sequence_id(tmp_path):
    def other_op(docs):
        # rank 2 skipped all_reduce #7, went on to an all_gather as #7, and is stuck in all_reduce as #8
        gather = next(e for e in docs[2]["entries"] if e["profiling_name"] == "gloo:all_gather")
        late = {**last_entry(docs[2]), "collective_seq_id": 8, "record_id": 7}
        docs[2]["entries"][-1:] = [{**gather, "collective_seq_id": 7, "record_id": 6, "retired": False}, late]
        docs[3]["entries"].append({**last_entry(docs[0]), "record_id": 6})  # rank 3 entered it this time

    verdict = analyse(read_dump_folder(edited(tmp_path, other_op)), TWO_NODES)
    assert verdict.conclusive
    (blamed,) = verdict.blamed
    assert (blamed.rank, blamed.node, blamed.problem) == (2, "gpu-b", "mismatched")
    assert "called all_gather where the others called all_reduce" in blamed.detail
    assert "as #8 instead (sequence ids differ by 1" in blamed.detail


# --- inconclusive dumps --------------------------------------------------------------------------


def test_a_rank_without_a_dump_makes_the_dumps_inconclusive(tmp_path):
    for rank in range(3):
        shutil.copy(PICKLES / f"nccl_trace_rank_{rank}", tmp_path)
    verdict = analyse(read_dump_folder(str(tmp_path)), TWO_NODES)
    assert not verdict.conclusive and verdict.faulty_nodes == ()
    assert verdict.why.startswith("rank(s) 3 of 4 wrote no dump")


def test_when_every_rank_entered_the_stuck_collective_the_dumps_cannot_place_the_fault(tmp_path):
    def all_enter(docs):
        docs[3]["entries"].append({**last_entry(docs[0]), "record_id": 6})

    verdict = analyse(read_dump_folder(edited(tmp_path, all_enter)), TWO_NODES)
    assert not verdict.conclusive
    assert "every member entered the stuck collective with matching arguments" in verdict.why
    assert verdict.stuck[0].entered == (0, 1, 2, 3)


def test_dumps_with_nothing_in_flight_are_inconclusive(tmp_path):
    def finish(docs):
        for doc in docs.values():
            doc["entries"] = doc["entries"][:6]

    verdict = analyse(read_dump_folder(edited(tmp_path, finish)), TWO_NODES)
    assert not verdict.conclusive and "no collective is in flight" in verdict.why


def test_one_of_two_ranks_is_a_tie_that_names_nobody(tmp_path):
    def two_ranks(docs):
        for rank in (2, 3):
            del docs[rank]
        for doc in docs.values():
            doc["pg_config"] = {"": {"name": "", "desc": "", "ranks": "[0, 1]"}}
        docs[1]["entries"] = docs[1]["entries"][:6]

    verdict = analyse(read_dump_folder(edited(tmp_path, two_ranks)), TWO_NODES)
    assert not verdict.conclusive and verdict.blamed[0].rank == 1
    assert "1 of its 2 ranks (1) did not enter collective #7" in verdict.why


def test_a_buffer_that_dropped_the_stuck_collective_is_inconclusive(tmp_path):
    def overwritten(docs):
        docs[3]["entries"] = [{**e, "collective_seq_id": 8 + i} for i, e in enumerate(docs[3]["entries"][:2])]

    verdict = analyse(read_dump_folder(edited(tmp_path, overwritten)), TWO_NODES)
    assert not verdict.conclusive and "raise TORCH_FR_BUFFER_SIZE" in verdict.why


def test_ranks_that_cannot_be_placed_make_the_dumps_inconclusive():
    nodes = ["gpu-a", "gpu-b", "gpu-c"]  # 4 ranks on 3 nodes: no whole number of ranks per node
    verdict = analyse(read_dump_folder(str(PICKLES)), nodes)
    assert not verdict.conclusive and "world size 4 is not a multiple of the job's 3 nodes" in verdict.why
    assert verdict.blamed[0].node is None


# --- malformed dumps: the file and the problem -------------------------------------------------------


MARKER = Path("/tmp/acme-h25c-flight-recorder-pickle-ran")


class Payload:
    """A pickle that would create ``MARKER`` if it were unpickled by plain ``pickle.loads``."""

    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty file"),
        ((PICKLES / "nccl_trace_rank_0").read_bytes()[:700], "not a readable pickle"),
        (pickle.dumps(Payload()), "the pickle names posix.system"),
        (pickle.dumps([1, 2]), "the dump is a list"),
        (b"{not json", "not valid JSON"),
        (json.dumps({"version": "2.10"}).encode(), "no entries field"),
        (json.dumps({"version": "1.0", "entries": []}).encode(), "dump format version 1.0"),
        (json.dumps({"version": "2.10", "entries": [{"state": "scheduled"}]}).encode(), "entry 0: has no"),
        (
            json.dumps({"version": "2.10", "entries": [], "pg_config": {"0": {"ranks": "all"}}}).encode(),
            "pg_config of group '0'",
        ),
    ],
)
def test_a_malformed_dump_is_refused_naming_the_file_and_the_problem(tmp_path, content, problem):
    (tmp_path / "nccl_trace_rank_0").write_bytes(content)
    with pytest.raises(InputError, match=problem) as caught:
        read_dump_folder(str(tmp_path))
    assert str(caught.value).startswith(f"{tmp_path}/nccl_trace_rank_0")
    assert not MARKER.exists()  # the refused pickle ran nothing


def test_a_folder_problem_is_named(tmp_path):
    with pytest.raises(InputError, match="no such folder"):
        read_dump_folder(str(tmp_path / "missing"))
    with pytest.raises(InputError, match="no dump in this folder"):
        read_dump_folder(str(tmp_path))
    (tmp_path / "dump").write_bytes(pickle.dumps({"version": "2.10", "entries": []}))
    with pytest.raises(InputError, match="the file name does not end with the rank"):
        read_dump_folder(str(tmp_path))
    (tmp_path / "dump").unlink()
    shutil.copy(PICKLES / "nccl_trace_rank_0", tmp_path / "nccl_trace_rank_0")
    shutil.copy(PICKLES / "nccl_trace_rank_0", tmp_path / "copy_of_rank_0")
    with pytest.raises(InputError, match="a second dump of rank 0"):
        read_dump_folder(str(tmp_path))


def test_a_host_name_that_is_no_node_of_the_job_makes_the_dumps_inconclusive(tmp_path):
    def name_hosts(docs):
        for rank, doc in docs.items():
            doc["hostname"] = f"elsewhere-{rank}"

    verdict = analyse(read_dump_folder(edited(tmp_path, name_hosts)), TWO_NODES)
    assert not verdict.conclusive
    assert "rank 3's dump names host elsewhere-3, which is no node of the job" in verdict.why
