"""Validation of a node the latest lemon-node list flags (issue 25's follow-up): it is measured and its verdict
recorded, but its uncordon is held (recorded with the reason, on-call told once) unless an operator names it
with allow_lemon or the setting turns the hold off. The lake is the lemon tests' history, written by the real
writers: gpu03 failed four times and the recovery of job 104 cordoned it."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from acme.errors import ConfigError, InputError
from acme.lake import Lake
from acme.notify.outbox import enqueue, queued
from acme.recovery.backend import SimulatedBackend
from acme.recovery.lemon_nightly import latest_suggestion, suggest_cordons
from acme.recovery.validation import (
    node_log,
    nodes_to_validate,
    summarize_outcomes,
    validate_node,
    validation_spec,
)
from acme.settings import LemonSettings, ValidationSettings
from acme.settings import recovery as recovery_settings
from acme.settings import validation as validation_settings
from tests.lemon_support import simulated_jobs_file, write_history


def list_key(day: date) -> str:
    return f"recovery/lemon/cluster=seren/date={day.isoformat()}/suggestion.json"


@pytest.fixture
def flagged(tmp_path: Path, monkeypatch) -> tuple[Lake, SimulatedBackend, date]:
    """The history, and the nightly list of the day it was written as of, which flags gpu03 (rank 1) and gpu04
    (rank 2)."""
    monkeypatch.setenv("ACME_RECOVERY_BACKEND", "simulated")
    monkeypatch.setenv("ACME_RECOVERY_SIMULATED_JOBS", str(simulated_jobs_file(tmp_path)))
    monkeypatch.delenv("ACME_VALIDATION_LEMON_NODES", raising=False)
    lake = Lake(str(tmp_path / "lake"))
    today = write_history(lake, tmp_path)
    backend = SimulatedBackend("seren", simulated_jobs_file(tmp_path), lake)
    listed = suggest_cordons(
        lake, "seren", today, LemonSettings(suggest_top=2, min_score=0.1), lambda cluster, lake: backend
    )
    assert [(s["rank"], s["node"]) for s in listed["suggested"]] == [(1, "gpu03"), (2, "gpu04")]
    return lake, backend, today


def validate(lake, backend, run: str, dry_run: bool = False, allow_lemon: bool = False, **env: str) -> dict:
    settings = ValidationSettings.from_env(env) if env else validation_settings()
    spec = validation_spec(run, settings, recovery_settings())
    return validate_node(lake, backend, "seren", "gpu03", spec, settings, dry_run, allow_lemon)


def steps(lake, run: str) -> list[tuple[str, str]]:
    return [(r["step"], r["status"]) for r in node_log(lake, "seren", "gpu03", run).records()]


def test_a_flagged_lemon_node_that_passes_validation_stays_cordoned(flagged):
    lake, backend, today = flagged
    assert [t["node"] for t in nodes_to_validate(lake, None, [], lambda cluster: backend)] == ["gpu03"]
    score = lake.read_json(list_key(today))["suggested"][0]["score"]

    outcome = validate(lake, backend, "run-1")

    assert outcome["passed"] is True and outcome["uncordoned"] is False
    assert outcome["held"] == f"held: lemon node, score {score:.2f}, rank 1 in {list_key(today)}"
    assert backend.cordoned(["gpu03"]) == {"gpu03"}
    assert lake.read_json("recovery/simulated/cluster=seren/state.json").get("uncordoned", []) == []
    records = node_log(lake, "seren", "gpu03", "run-1").records()
    assert [(r["step"], r["status"]) for r in records] == [("validate", "done"), ("uncordon", "held")]
    held = records[1]
    assert held["result"]["held"] == outcome["held"] and "allow_lemon" in held["result"]["release"]
    assert held["inputs"]["lemon"] == {**outcome["lemon"], "rank": 1, "score": score, "list": list_key(today),
                                       "as_of": today.isoformat()}  # fmt: skip
    summary = summarize_outcomes([outcome])
    assert summary["held_lemon"] == {"seren/gpu03": outcome["held"]}
    assert summary["uncordoned"] == [] and summary["kept_cordoned"] == {} and summary["allowed_lemon"] == []

    notice = outcome["notice"]
    assert (notice["kind"], notice["recipient"], notice["cluster"], notice["date"]) == (
        "lemon_hold", "oncall", "seren", today.isoformat(),
    )  # fmt: skip
    assert notice["id"] == f"lemon-hold-seren-gpu03-{today.isoformat()}" and notice["nodes"] == ["gpu03"]
    assert "ranks it #1" in notice["text"]
    assert '"nodes": ["gpu03"], "allow_lemon": true, "dry_run": false' in notice["text"]
    assert enqueue(lake, notice)


def test_re_runs_hold_once_per_validation_and_tell_on_call_once_per_list(flagged):
    lake, backend, today = flagged
    first = validate(lake, backend, "run-1")
    assert enqueue(lake, first["notice"])

    again = validate(lake, backend, "run-1")  # the same run again (a cleared task, a retry)
    assert again["held"] == first["held"] and again["skipped"].startswith("already recorded at")
    assert steps(lake, "run-1") == [("validate", "done"), ("uncordon", "held")]
    assert again["notice"]["id"] == first["notice"]["id"] and not enqueue(lake, again["notice"])

    later = validate(lake, backend, "run-2")  # the next hour: validated and held again, no second notice
    assert steps(lake, "run-2") == [("validate", "done"), ("uncordon", "held")]
    assert not enqueue(lake, later["notice"])
    assert [m["id"] for m in queued(lake)] == [first["notice"]["id"]]
    assert backend.cordoned(["gpu03"]) == {"gpu03"}


def test_a_dry_run_records_the_hold_and_tells_no_one(flagged):
    lake, backend, today = flagged
    outcome = validate(lake, backend, "dry-1", dry_run=True)
    assert outcome["held"].startswith("held: lemon node") and outcome["notice"] is None
    assert "planned" not in outcome and summarize_outcomes([outcome])["planned_uncordon"] == []
    validate(lake, backend, "dry-1", dry_run=True)
    records = node_log(lake, "seren", "gpu03", "dry-1").records()
    assert [(r["step"], r["status"], r["dry_run"]) for r in records] == [
        ("validate", "done", True), ("uncordon", "held", True),
    ]  # fmt: skip


def test_an_operator_naming_the_node_with_allow_lemon_uncordons_it(flagged):
    lake, backend, today = flagged
    with pytest.raises(InputError, match="allow_lemon.*give them in the nodes Param"):
        nodes_to_validate(lake, "seren", [], lambda cluster: backend, allow_lemon=True)
    named = nodes_to_validate(lake, "seren", ["gpu03"], lambda cluster: backend, allow_lemon=True)
    assert [t["node"] for t in named] == ["gpu03"]

    outcome = validate(lake, backend, "manual-1", allow_lemon=True)

    assert outcome["uncordoned"] is True and "held" not in outcome and "notice" not in outcome
    assert backend.cordoned(["gpu03"]) == set()
    (uncordon,) = [
        r for r in node_log(lake, "seren", "gpu03", "manual-1").records() if r["step"] == "uncordon"
    ]
    assert uncordon["status"] == "done" and uncordon["inputs"]["lemon"]["rank"] == 1
    assert uncordon["inputs"]["allowed_by"] == "the run's allow_lemon Param (it names the node)"
    assert summarize_outcomes([outcome])["allowed_lemon"] == ["seren/gpu03"]


def test_the_setting_can_turn_the_hold_off_and_holds_by_default(flagged, monkeypatch):
    lake, backend, today = flagged
    assert validation_settings().lemon_nodes == "hold"
    with pytest.raises(ConfigError, match="ACME_VALIDATION_LEMON_NODES='keep' must be one of hold, uncordon"):
        ValidationSettings.from_env({"ACME_VALIDATION_LEMON_NODES": "keep"})
    outcome = validate(lake, backend, "run-1", ACME_VALIDATION_LEMON_NODES="uncordon")
    assert outcome["uncordoned"] is True and outcome["allowed_by"] == "ACME_VALIDATION_LEMON_NODES=uncordon"
    assert backend.cordoned(["gpu03"]) == set()


def test_only_the_latest_list_counts(flagged):
    lake, backend, today = flagged
    tomorrow = today + timedelta(days=1)
    empty = suggest_cordons(
        lake, "seren", tomorrow, LemonSettings(min_score=1000), lambda cluster, lake: backend
    )
    assert empty["suggested"] == []
    key, record = latest_suggestion(lake, "seren")
    assert key.endswith(f"date={tomorrow.isoformat()}/suggestion.json") and record["suggested"] == []

    outcome = validate(lake, backend, "run-1")  # today's list named it; the newer one does not

    assert outcome["uncordoned"] is True and "lemon" not in outcome
    assert steps(lake, "run-1") == [("validate", "done"), ("uncordon", "done")]
    assert latest_suggestion(Lake(str(Path(lake.root) / "elsewhere")), "seren") is None
