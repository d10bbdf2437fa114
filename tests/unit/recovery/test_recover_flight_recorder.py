"""Recovery with PyTorch Flight Recorder dumps (acme.recovery.recover.read_flight_recorder): a conclusive dump
names the faulty node and the two-round all-gather test is skipped; an inconclusive or unreadable one is
said in the action log and the two rounds run as without dumps. The dumps are the real ones of
tests/fixtures/flight_recorder/ (rank 3 of 4 never entered the stuck all_reduce)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from acme.lake import Lake
from acme.recovery.actions import ActionLog
from acme.recovery.backend import SimulatedBackend
from acme.recovery.recover import RecoveryRequest
from acme.recovery.synth_checkpoints import write_checkpoint
from acme.settings import recovery as recovery_settings
from tests.recovery_support import recover

DUMPS = Path(__file__).resolve().parents[2] / "fixtures" / "flight_recorder" / "skip_rank3_of4"
NODES = ["n00", "n01", "n02", "n03"]  # 4 ranks on 4 nodes: rank 3 ran on n03
STARTED = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(str(tmp_path / "lake"))


@pytest.fixture
def backend(tmp_path: Path, lake: Lake) -> SimulatedBackend:
    jobs = tmp_path / "jobs.yaml"
    # The simulated check would blame n01: a recovery that ran the two rounds says so.
    jobs.write_text(f"clusters:\n  seren:\n    job-h: {{nodes: {NODES}, faulty: [n01]}}\n")
    return SimulatedBackend("seren", jobs, lake)


@pytest.fixture
def checkpoints(tmp_path: Path) -> Path:
    root = tmp_path / "ckpt"
    write_checkpoint(root, 100)
    return root


def request(checkpoints: Path, dumps: Path | str, **params) -> RecoveryRequest:
    values = {"cluster": "seren", "job_id": "job-h", "nodes": NODES, "checkpoint_uri": str(checkpoints),
              "flight_recorder_uri": str(dumps), **params}  # fmt: skip
    return RecoveryRequest.from_params(values, "r1", "manual__1", STARTED)


def records(lake: Lake) -> list[dict]:
    return ActionLog(lake, "seren", "job-h", "r1").records()


def step(lake: Lake, name: str) -> dict:
    (found,) = [r for r in records(lake) if r["step"] == name]
    return found


def test_a_conclusive_real_dump_names_the_faulty_node_and_the_two_round_test_is_skipped(
    lake, backend, checkpoints
):
    outcome = recover(lake, request(checkpoints, DUMPS), backend, recovery_settings())
    assert outcome["verdict"]["faulty"] == ["n03"] and outcome["verdict"]["source"] == "flight_recorder"
    assert "rank 3 never entered collective #7 of group 0" in outcome["verdict"]["why"]["n03"]
    steps = [r["step"] for r in records(lake)]
    assert "check_round1" not in steps and "check_round2" not in steps
    dumps = step(lake, "flight_recorder")
    assert dumps["status"] == "done" and dumps["result"]["verdict"]["conclusive"]
    assert dumps["result"]["two_round_check"].startswith("skipped: the dumps name the faulty node(s) n03")
    cordon = step(lake, "cordon")
    assert "named by the Flight Recorder dumps: rank 3 never entered" in cordon["inputs"]["reason"]
    state = lake.read_json("recovery/simulated/cluster=seren/state.json")
    assert list(state["cordoned"]) == ["n03"]
    assert state["submitted"][0]["nodes_excluded"] == ["n03"]


def test_an_inconclusive_dump_says_why_and_the_two_rounds_run(lake, backend, checkpoints, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    for rank in range(3):  # rank 3's dump is missing (its process died before writing it)
        shutil.copy(DUMPS / f"nccl_trace_rank_{rank}", partial)
    outcome = recover(lake, request(checkpoints, partial), backend, recovery_settings())
    dumps = step(lake, "flight_recorder")
    assert not dumps["result"]["verdict"]["conclusive"]
    assert dumps["result"]["two_round_check"] == (
        "runs: the dumps are not conclusive (rank(s) 3 of 4 wrote no dump)"
    )
    steps = [r["step"] for r in records(lake)]
    assert (
        steps.count("check_round1") == 2 and steps.count("check_round2") == 2
    )  # n00, n01 beside healthy ones
    assert outcome["verdict"]["faulty"] == ["n01"] and "source" not in outcome["verdict"]
    assert "failed the all-gather check twice" in step(lake, "cordon")["inputs"]["reason"]


def test_an_unreadable_dump_is_named_in_the_action_log_and_the_two_rounds_run(
    lake, backend, checkpoints, tmp_path
):
    broken = tmp_path / "broken"
    shutil.copytree(DUMPS, broken)
    (broken / "nccl_trace_rank_2").write_bytes((DUMPS / "nccl_trace_rank_2").read_bytes()[:500])
    outcome = recover(lake, request(checkpoints, broken), backend, recovery_settings())
    why = step(lake, "flight_recorder")["result"]["verdict"]["why"]
    assert why.startswith(f"the dumps cannot be read: {broken}/nccl_trace_rank_2: not a readable pickle")
    assert outcome["verdict"]["faulty"] == ["n01"]


def test_a_dry_run_reads_the_dumps_for_real_and_plans_the_cordon(lake, backend, checkpoints):
    outcome = recover(lake, request(checkpoints, DUMPS, dry_run=True), backend, recovery_settings())
    assert outcome["verdict"]["faulty"] == ["n03"]
    assert step(lake, "cordon")["result"]["planned"] == "would cordon n03 through simulated"
    assert lake.read_json("recovery/simulated/cluster=seren/state.json", default={}) in ({}, None)


def test_a_rerun_reuses_the_recorded_verdict(lake, backend, checkpoints):
    recover(lake, request(checkpoints, DUMPS), backend, recovery_settings())
    again = recover(lake, request(checkpoints, DUMPS), backend, recovery_settings())
    assert again["verdict"]["faulty"] == ["n03"] and "already restarted" in again["restart"]["skipped"]
    assert [r["step"] for r in records(lake)].count("flight_recorder") == 1


def test_without_dumps_nothing_changes(lake, backend, checkpoints):
    outcome = recover(lake, request(checkpoints, ""), backend, recovery_settings())
    assert "flight_recorder" not in [r["step"] for r in records(lake)]
    assert outcome["verdict"]["faulty"] == ["n01"]
