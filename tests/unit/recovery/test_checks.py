"""The check of one world behind one interface (``acme.recovery.checks``), and round 2's size."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from acme.errors import ConfigError
from acme.lake import Lake
from acme.recovery.backend import SimulatedBackend
from acme.recovery.checks import BackendChecker, PodChecker, world_checker
from acme.recovery.localize import WorldResult, plan_round1, plan_round2
from acme.recovery.recover import RecoveryRequest, action_log
from acme.settings import recovery as recovery_settings

NODES = [f"n{i:02d}" for i in range(8)]
STARTED = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def request(dry_run: bool = False) -> RecoveryRequest:
    params = {
        "cluster": "seren",
        "job_id": "job-1",
        "nodes": NODES,
        "checkpoint_uri": "/c",
        "dry_run": dry_run,
    }
    return RecoveryRequest.from_params(params, "r1", "manual__1", STARTED)


@pytest.fixture
def lake(tmp_path: Path, monkeypatch) -> Lake:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(f"clusters:\n  seren:\n    job-1: {{nodes: {NODES}, faulty: [n05]}}\n")
    monkeypatch.setenv("ACME_RECOVERY_SIMULATED_JOBS", str(jobs))
    return Lake(str(tmp_path / "lake"))


def simulated(lake: Lake):
    return lambda: SimulatedBackend("seren", recovery_settings().simulated_jobs_file, lake, "job-1", NODES)


def test_the_simulated_backend_checks_through_the_backend_and_records(lake, monkeypatch):
    monkeypatch.delenv("ACME_RECOVERY_BACKEND", raising=False)
    checker = world_checker(recovery_settings(), request(), simulated(lake))
    assert isinstance(checker, BackendChecker)
    assert checker.check(lake, request(), ["n04", "n05"], 1)["ok"] is False
    assert checker.check(lake, request(), ["n00", "n01"], 1)["ok"] is True
    steps = [r["step"] for r in action_log(lake, request()).records()]
    assert steps == ["check_round1", "check_round1"]


def test_kubernetes_runs_a_live_world_as_pods_and_reuses_a_recorded_result(lake, monkeypatch):
    monkeypatch.setenv("ACME_RECOVERY_BACKEND", "kubernetes")
    launched = []

    def launch(world, round_number, check_id, labels):
        launched.append((list(world), round_number, labels))
        return WorldResult(tuple(world), True, {n: 1.0 for n in world}), [{"pod": f"p-{n}"} for n in world]

    def no_backend():
        raise AssertionError("a live Kubernetes check does not go through the backend")

    checker = world_checker(recovery_settings(), request(), no_backend, launch)
    assert isinstance(checker, PodChecker)
    first = checker.check(lake, request(), ["n00", "n01"], 1)
    again = checker.check(lake, request(), ["n00", "n01"], 1)
    assert first["ok"] and again["reused"] and len(launched) == 1
    assert launched[0][2] == {"acme.io/job": "job-1", "acme.io/recovery": request().check_id}
    (record,) = action_log(lake, request()).records()
    assert record["inputs"]["backend"] == "kubernetes" and record["inputs"]["pods"][0] == {"pod": "p-n00"}
    with pytest.raises(ConfigError, match="pod launcher"):
        world_checker(recovery_settings(), request(), no_backend)
    # A dry run on Kubernetes starts no pod: the backend records the plan.
    assert isinstance(world_checker(recovery_settings(), request(dry_run=True), no_backend), BackendChecker)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 9, 16, 33])
def test_round2_never_needs_more_worlds_than_round1(count):
    """Round 2's worlds are disjoint sets of round 1's nodes: random outcomes never plan more worlds."""
    rng = random.Random(count)
    nodes = [f"x{i:03d}" for i in range(count)]
    for _ in range(200):
        round1 = []
        for world in plan_round1(nodes):
            ok = rng.random() < 0.6
            seconds = {n: rng.choice([1.0, 1.1, 3.5]) for n in world if ok or rng.random() < 0.5}
            round1.append(WorldResult(tuple(world), ok, seconds, "" if ok else "failed"))
        assert len(plan_round2(round1)) <= len(round1)
