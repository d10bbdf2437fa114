"""The lemon-node score on a lake written by the real writers (jobs ingest, diagnosis records, a recovery on
the simulated cluster, the metrics publisher); the ranking; the nightly suggestion with auto-cordon off and on."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from acme.errors import ConfigError, InputError
from acme.lake import Lake
from acme.notify.outbox import enqueue, queued
from acme.recovery.lemon import FailureEvent, ScoreWeights, event_weight, failure_counts, rank_nodes
from acme.recovery.lemon_evidence import collect_events
from acme.recovery.lemon_nightly import end_of_day, lemon_ranking, suggest_cordons
from acme.settings import LemonSettings
from tests.lemon_support import days_ago, simulated_jobs_file, write_history

UNTIL = end_of_day(datetime.now(UTC).date())  # for the tests of the score alone, which read no lake


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Lake, datetime]:
    """The history and the end of the day it was written as of (the ranking's "until")."""
    folder = tmp_path_factory.mktemp("lemon")
    lake = Lake(str(folder / "lake"))
    today = write_history(lake, folder)
    return lake, end_of_day(today)


@pytest.fixture(scope="module")
def history(written) -> Lake:
    return written[0]


@pytest.fixture(scope="module")
def until(written) -> datetime:
    return written[1]


@pytest.fixture
def lake(history, tmp_path) -> Lake:
    """A copy of the history per test (the nightly step writes its record and cordons)."""
    import shutil

    shutil.copytree(history.root, tmp_path / "lake")
    return Lake(str(tmp_path / "lake"))


@pytest.fixture
def simulated_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_RECOVERY_BACKEND", "simulated")
    monkeypatch.setenv("ACME_RECOVERY_SIMULATED_JOBS", str(simulated_jobs_file(tmp_path)))


def by_node(events):
    found = {}
    for event in events:
        found.setdefault(event.node, []).append(event)
    return found


def test_every_record_kind_becomes_events_on_the_right_nodes(history, until):
    evidence = collect_events(history, "seren", until, LemonSettings())
    nodes = by_node(evidence.events)
    assert sorted(nodes) == [
        "gpu03",
        "gpu04",
    ]  # the user's failure (103) and Xid 13 on gpu06 count for no one
    sources = sorted(e.sources for e in nodes["gpu03"])
    assert sources == [("diagnosis",), ("diagnosis", "localization"), ("node_fail",), ("telemetry",)]
    (ecc,) = nodes["gpu04"]
    assert ecc.job_id == "102" and ecc.blame == 0.5 and ecc.detail == "ECCError"
    assert ecc.gpu_hours == pytest.approx(16 * 5 / 2)  # 2 nodes x 8 GPUs x 5 h, half of it on gpu04
    (localized,) = [e for e in nodes["gpu03"] if "localization" in e.sources]
    assert localized.blame == 1.0  # the check named gpu03: the other 7 nodes of job 104 are not blamed
    (xid,) = [e for e in nodes["gpu03"] if e.is_telemetry]
    assert xid.detail == "xid_errors=79" and xid.at.hour == 10
    assert evidence.read == {"job_partitions": 4, "diagnosis_partitions": 3, "recovery_logs": 1}


def test_the_ranking_puts_the_repeat_offender_first_with_its_weights(history, until):
    ranking, _ = lemon_ranking(history, "seren", until, LemonSettings())
    assert [(s.rank, s.node) for s in ranking] == [(1, "gpu03"), (2, "gpu04")]
    worst = ranking[0]
    assert worst.by_source == {"diagnosis": 2, "node_fail": 1, "localization": 1, "telemetry": 1}
    ended = datetime.combine(days_ago(5, until.date()), datetime.min.time(), tzinfo=UTC) + timedelta(hours=6)
    age_days = (until - ended).total_seconds() / 86_400
    assert ranking[1].score == pytest.approx(
        0.5 * 0.5 ** (age_days / LemonSettings().half_life_days) * (1 + math.log10(1 + 40))
    )


def test_recent_failures_outweigh_old_ones_and_the_baseline_does_not_see_it():
    at = UNTIL - timedelta(days=1)
    old = UNTIL - timedelta(days=60)
    events = [FailureEvent("recent", at, ("node_fail",))] + [
        FailureEvent("repaired", old, ("node_fail",))
    ] * 2
    ranking = rank_nodes(events, UNTIL, ScoreWeights(half_life_days=14))
    assert [s.node for s in ranking] == ["recent", "repaired"]
    assert failure_counts(events, UNTIL) == [("repaired", 2), ("recent", 1)]
    assert (
        event_weight(FailureEvent("x", UNTIL + timedelta(hours=1), ("node_fail",)), UNTIL, ScoreWeights())
        == 0
    )


def test_gpu_hours_lost_and_blame_weigh_a_failure():
    at = UNTIL - timedelta(days=14)
    weights = ScoreWeights(half_life_days=14)
    small = event_weight(FailureEvent("a", at, ("diagnosis",), 1.0, 0.0), UNTIL, weights)
    large = event_weight(FailureEvent("a", at, ("diagnosis",), 1.0, 999.0), UNTIL, weights)
    spread = event_weight(FailureEvent("a", at, ("diagnosis",), 0.25, 0.0), UNTIL, weights)
    xid = event_weight(FailureEvent("a", at, ("telemetry",)), UNTIL, weights)
    assert (small, large, spread, xid) == pytest.approx((0.5, 0.5 * 4, 0.5 * 0.25, 0.5 * 0.5))


def test_the_nightly_step_suggests_only_when_auto_cordon_is_off(lake, simulated_cluster, until):
    settings = LemonSettings(suggest_top=2, min_score=0.1, auto_cordon=False)
    result = suggest_cordons(lake, "seren", until.date(), settings)
    assert [(s["node"], s["already_cordoned"], s["cordoned_by_us"]) for s in result["suggested"]] == [
        ("gpu03", True, False),  # the recovery of job 104 cordoned it already
        ("gpu04", False, False),
    ]
    state = lake.read_json("recovery/simulated/cluster=seren/state.json")
    assert sorted(state["cordoned"]) == ["gpu03"]
    record = lake.read_json(f"recovery/lemon/cluster=seren/date={until.date().isoformat()}/suggestion.json")
    assert record["suggested"] == result["suggested"] and record["auto_cordon"] is False
    assert result["notice"]["kind"] == "lemon" and result["notice"]["nodes"] == ["gpu03", "gpu04"]
    assert enqueue(lake, result["notice"]) and not enqueue(lake, result["notice"])
    assert [m["id"] for m in queued(lake)] == [result["notice"]["id"]]


def test_auto_cordon_on_cordons_the_suggested_node_once_through_the_backend(lake, simulated_cluster, until):
    settings = LemonSettings(suggest_top=2, min_score=0.1, auto_cordon=True)
    result = suggest_cordons(lake, "seren", until.date(), settings)
    (cordoned,) = [s for s in result["suggested"] if "cordon" in s]
    assert cordoned["node"] == "gpu04" and cordoned["cordon"]["backend"] == "simulated"
    state = lake.read_json("recovery/simulated/cluster=seren/state.json")
    assert sorted(state["cordoned"]) == ["gpu03", "gpu04"]
    assert state["cordoned"]["gpu04"].startswith("acme lemon-node score")
    again = suggest_cordons(lake, "seren", until.date(), settings)
    assert not [s for s in again["suggested"] if "cordon" in s]  # a re-run cordons nothing twice
    assert [s["cordoned_by_us"] for s in again["suggested"]] == [False, True]


def test_nothing_to_suggest_needs_no_backend_and_sends_no_notice(lake, until):
    def no_backend(cluster, lake):
        raise AssertionError("no node to suggest: the backend is not asked")

    result = suggest_cordons(lake, "seren", until.date(), LemonSettings(min_score=1000), no_backend)
    assert result["suggested"] == [] and result["notice"] is None and result["nodes_ranked"] == 2


def test_the_setting_turns_auto_cordon_on_and_is_off_by_default(monkeypatch):
    from acme import settings

    monkeypatch.delenv("ACME_LEMON_AUTO_CORDON", raising=False)
    assert settings.lemon().auto_cordon is False
    monkeypatch.setenv("ACME_LEMON_AUTO_CORDON", "on")
    assert settings.lemon().auto_cordon is True
    monkeypatch.setenv("ACME_LEMON_HALF_LIFE_DAYS", "0")
    with pytest.raises(ConfigError, match="ACME_LEMON_HALF_LIFE_DAYS='0' must be between"):
        settings.lemon()


def test_a_diagnosis_partition_without_its_columns_is_named(lake, until):
    import pyarrow as pa

    key = f"diagnoses/cluster=seren/date={days_ago(1, until.date()).isoformat()}/diagnoses.parquet"
    lake.write_parquet(key, pa.table({"job_id": ["9"]}))
    with pytest.raises(InputError, match=r"diagnoses\.parquet.*attribution"):
        collect_events(lake, "seren", until, LemonSettings())


def test_an_unknown_telemetry_metric_is_a_configuration_error(lake, until):
    with pytest.raises(ConfigError, match="unknown metric 'ecc_nope'"):
        collect_events(lake, "seren", until, LemonSettings(telemetry_metrics=("ecc_nope",)))
