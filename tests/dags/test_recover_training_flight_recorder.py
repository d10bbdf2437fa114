"""recover_training run by Airflow (dag.test) with the real Flight Recorder dumps of
tests/fixtures/flight_recorder/ (rank 3 of 4 never entered the stuck all_reduce): a conclusive dump maps no
check world and cordons rank 3's node; an inconclusive one runs both rounds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.dags.test_recover_training import actions, run_dag, task_states

DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "flight_recorder" / "skip_rank3_of4"
NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]  # a job the simulated file does not list: all healthy

pytestmark = pytest.mark.airflow


@pytest.fixture
def simulated(monkeypatch, lake_dir):
    monkeypatch.setenv("ACME_RECOVERY_BACKEND", "simulated")
    return lake_dir


def conf(checkpoints: Path, dumps: Path) -> dict:
    return {"cluster": "seren", "job_id": "8200", "nodes": NODES, "checkpoint_uri": str(checkpoints),
            "recovery_id": "hang-1", "dry_run": False, "diagnosis_source": "rule",
            "flight_recorder_uri": str(dumps)}  # fmt: skip


@pytest.fixture
def checkpoints(tmp_path) -> Path:
    from acme.recovery.synth_checkpoints import write_checkpoint

    root = tmp_path / "checkpoints"
    write_checkpoint(root, 100)
    return root


def test_a_conclusive_dump_skips_the_check_rounds_and_cordons_the_stuck_ranks_node(
    airflow_db, simulated, checkpoints
):
    run = run_dag(**conf(checkpoints, DUMPS))
    assert run.state == "success", task_states(run)
    states = task_states(run)
    assert states["check_round1"] == ["skipped"] and states["decide_and_restart"] == ["success"]
    state = json.loads((simulated / "recovery/simulated/cluster=seren/state.json").read_text())
    assert list(state["cordoned"]) == ["gpu04"]
    assert state["submitted"][0]["nodes_excluded"] == ["gpu04"]
    steps = {r["step"]: r for r in actions(simulated, "seren", "8200")}
    assert "check_round1" not in steps
    assert steps["flight_recorder"]["result"]["two_round_check"].startswith("skipped: the dumps name")
    assert steps["decide"]["result"]["source"] == "flight_recorder"


def test_an_inconclusive_dump_runs_both_rounds(airflow_db, simulated, checkpoints, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    for rank in range(3):
        shutil.copy(DUMPS / f"nccl_trace_rank_{rank}", partial)
    run = run_dag(**conf(checkpoints, partial))
    assert run.state == "success", task_states(run)
    assert task_states(run)["check_round1"] == ["success", "success"]
    steps = [r["step"] for r in actions(simulated, "seren", "8200")]
    assert steps.count("check_round1") == 2 and "cordon" not in steps
    record = next(r for r in actions(simulated, "seren", "8200") if r["step"] == "flight_recorder")
    assert (
        record["result"]["two_round_check"]
        == "runs: the dumps are not conclusive (rank(s) 3 of 4 wrote no dump)"
    )


def test_a_run_without_the_param_reads_the_dumps_where_the_setting_puts_them(
    airflow_db, simulated, checkpoints, tmp_path, monkeypatch
):
    """The diagnosis' conf names no dumps: ACME_FLIGHT_RECORDER_URI_PATTERN says where the job wrote them."""
    monkeypatch.setenv("ACME_FLIGHT_RECORDER_URI_PATTERN", str(tmp_path / "fr" / "{cluster}" / "{job_id}"))
    shutil.copytree(DUMPS, tmp_path / "fr" / "seren" / "8200")
    params = conf(checkpoints, DUMPS)
    del params["flight_recorder_uri"]
    run = run_dag(**params)
    assert run.state == "success", task_states(run)
    assert task_states(run)["check_round1"] == ["skipped"]
    steps = {r["step"]: r for r in actions(simulated, "seren", "8200")}
    assert steps["flight_recorder"]["inputs"]["flight_recorder_uri"] == str(
        tmp_path / "fr" / "seren" / "8200"
    )
    assert steps["flight_recorder"]["inputs"]["from"] == "ACME_FLIGHT_RECORDER_URI_PATTERN"
    state = json.loads((simulated / "recovery/simulated/cluster=seren/state.json").read_text())
    assert list(state["cordoned"]) == ["gpu04"]
