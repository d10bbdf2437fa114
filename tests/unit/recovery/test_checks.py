"""The check of one world behind one interface (``acme.recovery.checks``), and round 2's slots."""

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
from acme.recovery.recover import RecoveryRequest, action_log, round2_world
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


def test_round2_slots_cover_the_plan_and_a_dry_run_needs_none():
    round1 = [
        {"nodes": ["n00", "n01"], "ok": True, "seconds": {"n00": 1.0, "n01": 1.1}},
        {"nodes": ["n02", "n03"], "ok": True, "seconds": {"n02": 1.0, "n03": 1.0}},
        {"nodes": ["n04", "n05"], "ok": False, "seconds": {"n04": 60.0}, "error": "timed out"},
        {"nodes": ["n06", "n07"], "ok": True, "seconds": {"n06": 1.0, "n07": 1.2}},
    ]
    slots = range(len(plan_round1(NODES)))
    assert [round2_world(request(dry_run=True), round1, slot) for slot in slots] == [None] * 4
    worlds = [round2_world(request(), round1, slot) for slot in slots]
    assert worlds[2:] == [None, None]
    assert sorted(n for w in worlds if w for n in w if n in ("n04", "n05")) == ["n04", "n05"]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 9, 16, 33])
def test_round2_never_needs_more_worlds_than_round1(count):
    """The slots are as many as round 1's worlds: random outcomes never plan more."""
    rng = random.Random(count)
    nodes = [f"x{i:03d}" for i in range(count)]
    for _ in range(200):
        round1 = []
        for world in plan_round1(nodes):
            ok = rng.random() < 0.6
            seconds = {n: rng.choice([1.0, 1.1, 3.5]) for n in world if ok or rng.random() < 0.5}
            round1.append(WorldResult(tuple(world), ok, seconds, "" if ok else "failed"))
        assert len(plan_round2(round1)) <= len(round1)
