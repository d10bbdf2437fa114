"""The recovery steps end to end on the simulated backend, idempotency, dry run and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acme.errors import InputError
from acme.lake import Lake
from acme.recovery.actions import ActionLog, RecoveryInProgressError, acquire_job
from acme.recovery.backend import SimulatedBackend, UnknownJobError
from acme.recovery.recover import NeedsPersonError, RecoveryRequest
from acme.recovery.synth_checkpoints import write_checkpoint
from acme.settings import recovery as recovery_settings
from tests.recovery_support import manual_request, recover, simulated_jobs_file, write_metrics

NODES = [f"n{i:02d}" for i in range(8)]
BIG = [f"n{i:02d}" for i in range(16)]


@pytest.fixture
def jobs_file(tmp_path: Path) -> Path:
    return simulated_jobs_file(
        tmp_path,
        {
            "job-1": {"nodes": NODES, "faulty": ["n05"]},
            "job-3": {"nodes": BIG, "faulty": ["n01", "n05", "n09"]},
            "job-ok": {"nodes": NODES},
        },
    )


def request(checkpoints: Path, job: str = "job-1", **params) -> RecoveryRequest:
    return manual_request(
        checkpoints, job, params.pop("nodes", NODES), params.pop("recovery_id", "r1"), **params
    )


def backend_state(lake: Lake) -> dict:
    return lake.read_json("recovery/simulated/cluster=seren/state.json", default={}) or {}


def test_one_faulty_node_is_found_cordoned_and_the_job_restarts_from_the_newest_checkpoint(
    lake, jobs_file, checkpoints
):
    backend = SimulatedBackend("seren", jobs_file, lake)
    outcome = recover(lake, request(checkpoints), backend, recovery_settings())
    assert outcome["verdict"]["faulty"] == ["n05"]
    assert outcome["checkpoint"]["step"] == 200
    assert outcome["restart"]["new_job_id"] == "job-1-r1"
    assert outcome["restart"]["detection_to_restart_s"] > 0
    state = backend_state(lake)
    assert list(state["cordoned"]) == ["n05"]
    (submitted,) = state["submitted"]
    assert submitted["nodes_excluded"] == ["n05"]
    assert submitted["environment"]["ACME_RESUME_FROM"].endswith("step_200")
    steps = [r["step"] for r in ActionLog(lake, "seren", "job-1", "r1").records()]
    assert steps[0] == "open" and steps[-1] == "restart" and "cordon" in steps
    assert (
        steps.count("check_round1") == 4 and steps.count("check_round2") == 2
    )  # n04 and n05 each beside a healthy node
    assert not lake.exists("recovery/cluster=seren/job=job-1/_active.json")  # released


def test_a_rerun_of_the_same_recovery_neither_cordons_nor_restarts_again(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake)
    recover(lake, request(checkpoints), backend, recovery_settings())
    again = recover(lake, request(checkpoints), backend, recovery_settings())
    assert "already restarted" in again["restart"]["skipped"]
    assert again["taken_out"]["cordoned"][0]["skipped"].startswith("already done")
    assert len(backend_state(lake)["submitted"]) == 1
    records = ActionLog(lake, "seren", "job-1", "r1").records()
    assert [r["step"] for r in records].count("cordon") == 1


def test_a_dry_run_records_every_step_and_touches_nothing(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake)
    outcome = recover(lake, request(checkpoints, dry_run=True), backend, recovery_settings())
    assert backend_state(lake) == {}
    assert outcome["checkpoint"]["step"] == 200  # reading checkpoints touches no cluster
    records = ActionLog(lake, "seren", "job-1", "r1").records()
    assert {r["dry_run"] for r in records} == {True}
    assert [r["step"] for r in records][-1] == "restart"
    assert records[-1]["status"] == "planned"


def test_too_many_faulty_nodes_stop_for_a_person_and_nothing_is_cordoned(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake, "job-3")
    with pytest.raises(
        NeedsPersonError, match=r"needs a person: cordoning 3 nodes exceeds the blast-radius limit of 2"
    ):
        recover(lake, request(checkpoints, job="job-3", nodes=BIG), backend, recovery_settings())
    assert backend_state(lake) == {}
    last = ActionLog(lake, "seren", "job-3", "r1").records()[-1]
    assert (last["step"], last["status"]) == ("blast_radius", "needs-person")


def test_a_healthy_job_restarts_on_all_its_nodes(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake, "job-ok")
    outcome = recover(lake, request(checkpoints, job="job-ok"), backend, recovery_settings())
    assert outcome["verdict"]["faulty"] == [] and outcome["taken_out"]["excluded"] == []
    assert backend_state(lake)["submitted"][0]["nodes_excluded"] == []


def test_a_loss_spike_picks_the_checkpoint_before_it_and_skips_batches(lake, jobs_file, checkpoints):
    write_metrics(checkpoints, 250, spike_at=180)
    backend = SimulatedBackend("seren", jobs_file, lake)
    outcome = recover(lake, request(checkpoints, metrics_file="metrics.jsonl"), backend, recovery_settings())
    assert outcome["checkpoint"]["step"] == 100
    assert outcome["checkpoint"]["skip_batches"] == [{"first": 101, "last": 280}]
    assert backend_state(lake)["submitted"][0]["environment"]["ACME_SKIP_BATCHES"] == "101-280"


# --- bad input: clear errors, nothing cordoned or restarted ---------------------------------------


def test_an_unknown_job_is_a_clear_error(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake)
    with pytest.raises(UnknownJobError, match="job job-404: not a job of simulated cluster seren"):
        recover(lake, request(checkpoints, job="job-404"), backend, recovery_settings())
    assert backend_state(lake) == {}


@pytest.mark.parametrize("nodes", [[], "", None])
def test_an_empty_node_list_is_a_clear_error(checkpoints, nodes):
    with pytest.raises(InputError, match="nodes: empty node list"):
        request(checkpoints, nodes=nodes)


def test_nodes_outside_the_job_are_refused(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake)
    with pytest.raises(InputError, match="other-7 did not run job job-1"):
        recover(lake, request(checkpoints, nodes=["n00", "other-7"]), backend, recovery_settings())
    assert backend_state(lake) == {}


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"checkpoint_uri": " "}, "checkpoint_uri: missing"),
        ({"detected_at": "yesterday"}, "detected_at: 'yesterday' is not an ISO 8601 time"),
        ({"detected_at": "2026-11-29T14:00:00"}, "has no time zone"),
        ({"nodes": ["n01", "n01"]}, "listed twice"),
        ({"cluster": "../x"}, "cluster"),
    ],
)
def test_bad_params_are_clear_errors(checkpoints, params, problem):
    with pytest.raises(InputError, match=problem):
        request(checkpoints, **params)


@pytest.mark.parametrize("bad", ["../etc", "job 1", "job;rm", ""])
def test_unsafe_job_ids_are_refused(checkpoints, bad):
    with pytest.raises(InputError, match="job_id"):
        request(checkpoints, job=bad)


def test_partial_shards_and_a_corrupt_manifest_are_passed_over_for_an_older_checkpoint(
    lake, jobs_file, tmp_path
):
    root = tmp_path / "ckpt2"
    write_checkpoint(root, 100)
    write_checkpoint(root, 200, missing=1)
    write_checkpoint(root, 300, manifest="{not json")
    backend = SimulatedBackend("seren", jobs_file, lake)
    outcome = recover(lake, request(root), backend, recovery_settings())
    assert outcome["checkpoint"]["step"] == 100
    reasons = {s["step"]: s["reason"] for s in outcome["checkpoint"]["skipped"]}
    assert reasons[300].startswith("corrupt manifest")
    assert reasons[200].startswith("partial: 1 of 2 shards missing")


def test_no_healthy_checkpoint_stops_for_a_person_before_any_restart(lake, jobs_file, tmp_path):
    root = tmp_path / "ckpt3"
    write_checkpoint(root, 100, missing=2)
    write_checkpoint(root, 200, manifest=json.dumps({"shards": "all of them"}))
    backend = SimulatedBackend("seren", jobs_file, lake, "job-3")
    with pytest.raises(NeedsPersonError, match=r"needs a person: none of the 2 checkpoints is healthy"):
        recover(lake, request(root), backend, recovery_settings())
    assert backend_state(lake).get("submitted", []) == []


def test_one_recovery_per_job_at_a_time(lake, jobs_file, checkpoints):
    acquire_job(lake, "seren", "job-1", "other-recovery", "manual__0", ttl_s=3600)
    backend = SimulatedBackend("seren", jobs_file, lake)
    with pytest.raises(RecoveryInProgressError, match="recovery other-recovery"):
        recover(lake, request(checkpoints), backend, recovery_settings())
    assert backend_state(lake) == {}
