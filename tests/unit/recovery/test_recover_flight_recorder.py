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


# --- dumps found by a location pattern (a recovery the diagnosis starts names none) -----------------


def clusters_file(tmp_path: Path, seren_extra: str = "") -> Path:
    path = tmp_path / "clusters.yaml"
    path.write_text(
        "clusters:\n"
        f"  seren:\n    jobs: {{format: acmetrace, input: x}}\n{seren_extra}"
        "  kalos:\n    jobs: {format: acmetrace, input: y}\n"
    )
    return path


@pytest.fixture
def dump_pattern(tmp_path: Path, monkeypatch) -> Path:
    """ACME_FLIGHT_RECORDER_URI_PATTERN set, the clusters' configuration without a pattern of its own."""
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(clusters_file(tmp_path)))
    monkeypatch.setenv("ACME_FLIGHT_RECORDER_URI_PATTERN", str(tmp_path / "fr" / "{cluster}" / "{job_id}"))
    return tmp_path / "fr"


def requested(lake: Lake, checkpoints: Path, **params) -> RecoveryRequest:
    """The request as recover_training checks it (the diagnosis' conf has no flight_recorder_uri)."""
    from acme.recovery.recover import request_from_run

    values = {"cluster": "seren", "job_id": "job-h", "nodes": NODES, "checkpoint_uri": str(checkpoints),
              "recovery_id": "r1", **params}  # fmt: skip
    return request_from_run(lake, values, "manual__1", STARTED)


def test_the_setting_finds_the_dumps_the_hung_job_wrote_and_the_two_rounds_are_skipped(
    lake, backend, checkpoints, dump_pattern
):
    shutil.copytree(DUMPS, dump_pattern / "seren" / "job-h")
    request = requested(lake, checkpoints)
    assert request.flight_recorder_uri == str(dump_pattern / "seren" / "job-h")
    assert request.flight_recorder_from == "ACME_FLIGHT_RECORDER_URI_PATTERN"
    outcome = recover(lake, request, backend, recovery_settings())
    assert outcome["verdict"]["faulty"] == ["n03"] and outcome["verdict"]["source"] == "flight_recorder"
    dumps = step(lake, "flight_recorder")
    assert dumps["inputs"]["from"] == "ACME_FLIGHT_RECORDER_URI_PATTERN"
    assert "check_round1" not in [r["step"] for r in records(lake)]


@pytest.mark.parametrize("folder", ["empty", "absent"])
def test_a_pattern_where_the_job_wrote_no_dumps_says_so_and_the_two_rounds_run(
    lake, backend, checkpoints, dump_pattern, folder
):
    if folder == "empty":  # the folder is there, no rank wrote a dump
        (dump_pattern / "seren" / "job-h").mkdir(parents=True)
    outcome = recover(lake, requested(lake, checkpoints), backend, recovery_settings())
    dumps = step(lake, "flight_recorder")
    assert dumps["result"]["verdict"]["why"] == (
        f"no dumps at {dump_pattern}/seren/job-h (ACME_FLIGHT_RECORDER_URI_PATTERN): the job wrote none"
    )
    assert dumps["result"]["two_round_check"].startswith("runs: the dumps are not conclusive (no dumps at")
    assert outcome["verdict"]["faulty"] == ["n01"] and "source" not in outcome["verdict"]


def test_the_param_comes_first_then_the_clusters_pattern_then_the_setting(
    lake, checkpoints, tmp_path, monkeypatch
):
    from acme.recovery.checkpoint_location import flight_recorder_location
    from acme.recovery.request import FLIGHT_RECORDER_PARAM

    configured = clusters_file(tmp_path, '    flight_recorder_uri_pattern: "s3://seren-fr/{job_id}"\n')
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(configured))
    monkeypatch.delenv("ACME_FLIGHT_RECORDER_URI_PATTERN", raising=False)
    found = flight_recorder_location("seren", "job-h", "s3://lake")
    assert (found.uri, found.source) == (
        "s3://seren-fr/job-h",
        f"flight_recorder_uri_pattern of cluster seren in {configured}",
    )
    assert flight_recorder_location("kalos", "7", "s3://lake") is None  # nothing set: no dumps looked for
    given = requested(lake, checkpoints, flight_recorder_uri=" /fr/given ")
    assert (given.flight_recorder_uri, given.flight_recorder_from) == ("/fr/given", FLIGHT_RECORDER_PARAM)
    monkeypatch.setenv("ACME_FLIGHT_RECORDER_URI_PATTERN", "{lake}/fr/{cluster}/{job_id}")
    found = flight_recorder_location("kalos", "7", "s3://lake/")
    assert (found.uri, found.source) == ("s3://lake/fr/kalos/7", "ACME_FLIGHT_RECORDER_URI_PATTERN")
    blank = requested(lake, checkpoints, flight_recorder_uri="  ")  # blank as the checkpoint_uri's: not given
    assert blank.flight_recorder_uri == "s3://seren-fr/job-h" and blank.flight_recorder_from.startswith(
        "flight_recorder_uri_pattern of cluster seren"
    )


def test_a_bad_dump_pattern_is_a_configuration_error_naming_it(tmp_path, monkeypatch):
    from acme.clusters import load_clusters
    from acme.errors import ConfigError

    monkeypatch.setenv("ACME_FLIGHT_RECORDER_URI_PATTERN", "/fr/{user}/{job_id}")
    with pytest.raises(ConfigError, match=r"ACME_FLIGHT_RECORDER_URI_PATTERN: unknown placeholder \{user\}"):
        recovery_settings()
    path = clusters_file(tmp_path, "    flight_recorder_uri_pattern: 3\n")
    with pytest.raises(
        ConfigError, match="cluster 'seren': flight_recorder_uri_pattern: must be a non-empty"
    ):
        load_clusters(path)
