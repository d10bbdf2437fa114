"""ETTR of pretraining campaigns: the linking rule, the time accounting on a hand-computed campaign (hangs, MTBF,
MTTR, where each figure comes from), the what-if model and its check on held-out simulated campaigns, and the
report's section 10 on the synthesized 104B/123B campaigns and on AcmeTrace data."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from acme.lake import Lake
from acme.report import goodput
from acme.report.ettr import FailureEvidence, account, base_name, link_campaigns


def t(hour: float, day: int = 1) -> pd.Timestamp:
    return pd.Timestamp(datetime(2023, 3, day, tzinfo=UTC)) + pd.Timedelta(hours=hour)


def jobs_frame(rows: list[tuple]) -> pd.DataFrame:
    """(job_id, name, user, state, submit, start, end, gpus) rows."""
    columns = ["job_id", "job_name", "user", "state", "submit_time", "start_time", "end_time", "gpu_num"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["job_type"] = "Pretrain"
    return frame


def events_frame(rows: list[tuple]) -> pd.DataFrame:
    """(job_id, event, step, at, duration_s, source_job_id) rows."""
    return pd.DataFrame(rows, columns=["job_id", "event", "step", "at", "duration_s", "source_job_id"])


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("gpt-104b-pretrain", "gpt-104b-pretrain"),
        ("gpt-104b-pretrain-r3", "gpt-104b-pretrain"),
        ("GPT-104B-Pretrain_retry2", "gpt-104b-pretrain"),
        ("llama-65b.restart-1-2", "llama-65b"),
        ("internlm-123b-resume4", "internlm-123b"),
        ("run-7b-attempt2", "run-7b"),
        ("pretrain-2023", "pretrain-2023"),  # four digits: a date or a version, not a restart counter
        ("123", "123"),
    ],
)
def test_restart_markers_are_stripped_from_the_name(name, base):
    assert base_name(name) == base


def test_campaigns_link_by_lineage_then_by_name_user_and_gap():
    jobs = jobs_frame([
        ("1", "gpt-pretrain", "alice", "FAILED", t(0), t(0), t(5), 16),
        ("2", "gpt-pretrain-r1", "alice", "FAILED", t(6), t(6.5), t(10), 16),  # same base name, 1 h later
        ("3", "something-else", "alice", "COMPLETED", t(11), t(11), t(20), 16),  # lineage: resumes job 2
        ("4", "gpt-pretrain-r2", "bob", "FAILED", t(21), t(21), t(22), 16),  # another user
        ("5", "gpt-pretrain-r3", "alice", "FAILED", t(3, day=3), t(3, day=3), t(4, day=3), 16),  # 31 h gap
        ("6", "gpt-pretrain-r4", "alice", "FAILED", t(3.5, day=3), t(3.5, day=3), t(9, day=3), 16),  # overlaps 5
    ])  # fmt: skip
    events = events_frame([("3", "resume", 200, t(11.5), None, "2")])
    campaign = link_campaigns(jobs, events)
    assert campaign["1"] == campaign["2"] == campaign["3"]
    assert len({campaign["1"], campaign["4"], campaign["5"], campaign["6"]}) == 4


def one_failure(resume_step_of_b: int, reason: str = "NVLinkError", evidence=None) -> dict[str, pd.DataFrame]:
    """A: start 0:00, resume 0:30, saves at 2:30 (step 100) and 4:30 (step 200) each stalling 60 s, fails 5:30
    (``reason``); B: submitted 6:00, starts 6:30, resumes at 7:00 from A's step ``resume_step_of_b``, completes
    at 10:00. 16 GPUs each."""
    jobs = jobs_frame([
        ("A", "gpt-pretrain", "alice", "FAILED", t(0), t(0), t(5.5), 16),
        ("B", "gpt-pretrain-r1", "alice", "COMPLETED", t(6), t(6.5), t(10), 16),
    ])  # fmt: skip
    events = events_frame([
        ("A", "resume", 0, t(0.5), None, None),
        ("A", "save", 100, t(2.5), 60.0, None),
        ("A", "save", 200, t(4.5), 60.0, None),
        ("B", "resume", resume_step_of_b, t(7), None, "A"),
    ])  # fmt: skip
    return account(jobs, events, {"A": reason}, link_campaigns(jobs, events), t(12), evidence)


def test_time_accounting_of_a_campaign_with_one_failure():
    tables = one_failure(200)
    (row,) = tables["ettr_campaigns"].to_dict("records")
    assert row["jobs"] == 2 and row["interruptions"] == 1
    assert row["wall_h"] == pytest.approx(10)
    assert row["lost_since_checkpoint_h"] == pytest.approx(1)  # 4:30 -> 5:30
    assert row["restart_latency_h"] == pytest.approx(1)  # start-up 0:30 of A, restart 0:30 of B
    assert row["queue_after_crash_h"] == pytest.approx(1)  # 5:30 -> 6:30
    assert row["checkpoint_stall_h"] == pytest.approx(120 / 3600)
    assert row["productive_h"] == pytest.approx(10 - 3 - 120 / 3600)
    assert row["ettr"] == pytest.approx((10 - 3 - 120 / 3600) / 10)
    assert row["gpu_hours_lost"] == pytest.approx(16 * 2.5)  # A's start-up is not lost to a failure
    assert row["checkpoint_interval_min"] == pytest.approx(120)
    (lost,) = tables["ettr_interruptions"].to_dict("records")
    assert (lost["job_id"], lost["reason"], lost["state"]) == ("A", "NVLinkError", "FAILED")
    # lost since checkpoint 1 h + B's restart latency 0.5 h + queueing 1 h, at 16 GPUs
    assert lost["gpu_hours_lost"] == pytest.approx(16 * 2.5)
    assert tables["ettr_reasons"].to_dict("records")[0]["reason"] == "NVLinkError"
    kinds = tables["ettr_progress"]["kind"].tolist()
    assert kinds.count("failure") == 1 and kinds.count("end") == 1


def test_a_rollback_to_an_older_checkpoint_loses_more():
    (row,) = one_failure(100)["ettr_campaigns"].to_dict("records")
    assert row["lost_since_checkpoint_h"] == pytest.approx(3)  # 2:30 -> 5:30


def test_without_checkpoint_events_only_the_queueing_is_known():
    jobs = jobs_frame([
        ("A", "gpt-pretrain", "alice", "NODE_FAIL", t(0), t(0), t(5), 8),
        ("B", "gpt-pretrain-r1", "alice", "COMPLETED", t(6), t(7), t(10), 8),
    ])  # fmt: skip
    empty = events_frame([])
    (row,) = account(jobs, empty, {}, link_campaigns(jobs, empty), t(12))["ettr_campaigns"].to_dict("records")
    assert row["queue_after_crash_h"] == pytest.approx(2) and row["restart_latency_h"] == 0
    assert row["checkpoint_events"] is False


def test_mtbf_mttr_and_where_each_figure_comes_from():
    tables = one_failure(200)
    (row,) = tables["ettr_campaigns"].to_dict("records")
    assert row["mtbf_h"] == pytest.approx(5.5 + 3.5)  # A ran 5.5 h to its crash, B 3.5 h without failing
    assert row["mttr_min"] == pytest.approx(90)  # crash 5:30 -> B's first step 7:00
    assert row["hang_before_detection_h"] == 0 and row["hangs"] == 0
    sources = tables["ettr_sources"].set_index("component")
    assert sources.loc["rework since the last checkpoint", "hours"] == pytest.approx(1)
    assert sources.loc["productive", "share_of_wall"] == pytest.approx(row["ettr"])
    assert "no recovery action log" in sources.loc["queueing after a crash", "estimate"]
    assert sources.loc["start-up to the first step", "coverage"] == "2 of 2 jobs resumed"


def test_a_detected_hang_splits_rework_hang_and_queueing():
    # A hung at 5:00 (after its 4:30 save), the detector saw it at 5:10, the job was killed at 5:30.
    evidence = FailureEvidence(hangs={"A": (t(5).to_pydatetime(), t(5 + 10 / 60).to_pydatetime())},
                               recoveries={"A": 40 * 60.0})  # fmt: skip
    tables = one_failure(200, "NCCLTimeoutError", evidence)
    (row,) = tables["ettr_campaigns"].to_dict("records")
    assert row["lost_since_checkpoint_h"] == pytest.approx(0.5)  # 4:30 -> 5:00
    assert row["hang_before_detection_h"] == pytest.approx(10 / 60)
    assert row["queue_after_crash_h"] == pytest.approx(6.5 - (5 + 10 / 60))  # detected -> B's start
    assert row["productive_h"] == pytest.approx(10 - 3 - 120 / 3600)  # the same lost time, split differently
    assert row["mtbf_h"] == pytest.approx(5 + 3.5)  # the hang's onset ends A's run
    assert row["hangs_with_evidence"] == 1 and row["recoveries_logged"] == 1
    (lost,) = tables["ettr_interruptions"].to_dict("records")
    assert lost["hang_evidence"] == "detection episode" and lost["recovery_actions_h"] == pytest.approx(
        40 / 60
    )
    sources = tables["ettr_sources"].set_index("component")
    assert sources.loc["hangs before detection", "coverage"] == "1 of 1 hangs"
    assert "0.7 h of it inside recover_training" in sources.loc["queueing after a crash", "source"]


def test_a_hang_without_evidence_is_estimated_as_the_watchdog_timeout():
    tables = one_failure(200, "NCCLTimeoutError")
    (row,) = tables["ettr_campaigns"].to_dict("records")
    assert row["hang_before_detection_h"] == pytest.approx(10 / 60)
    assert row["lost_since_checkpoint_h"] == pytest.approx(1 - 10 / 60)
    (lost,) = tables["ettr_interruptions"].to_dict("records")
    assert lost["hang_evidence"] == "watchdog timeout (estimated)"
    estimate = tables["ettr_sources"].set_index("component").loc["hangs before detection", "estimate"]
    assert estimate.startswith("1 NCCLTimeoutError hangs without evidence")


def test_failure_evidence_is_read_from_the_detector_and_recovery_lake_paths(tmp_path):
    from acme.report.ettr import failure_evidence
    from acme.report.synth_campaigns import CAMPAIGNS, simulate, write_evidence

    lake = Lake(str(tmp_path / "lake"))
    sim = simulate(CAMPAIGNS[1], seed=0)
    episodes, logs = write_evidence(lake, "seren", sim)
    assert episodes == len(sim.hangs) > 0 and logs == len(sim.recoveries) > 0
    found = failure_evidence(lake, "seren", [j["job_id"] for j in sim.jobs])
    hang = sim.hangs[0]
    onset, detected = found.hangs[hang["job_id"]]
    assert onset == hang["since"].replace(microsecond=0) and detected == hang["detected_at"]
    recovery = sim.recoveries[0]
    expected = (recovery["restarted_at"] - recovery["started_at"]).total_seconds()
    assert found.recoveries[recovery["job_id"]] == pytest.approx(expected)


def test_young_daly_advice_and_whatif_move_the_expected_way():
    (row,) = one_failure(200)["ettr_campaigns"].to_dict("records")
    (advice,) = goodput.advice(pd.DataFrame([row])).to_dict("records")
    assert advice["young_daly_interval_min"] == pytest.approx(60 * (2 * (60 / 3600) * row["mtbf_h"]) ** 0.5)
    assert advice["model_ettr_young_daly"] >= advice["model_ettr_used_interval"]
    assert advice["model_ettr_best"] >= advice["model_ettr_young_daly"] - 1e-9
    assert advice["model_ettr_used_interval"] == pytest.approx(row["ettr"], abs=0.1)
    whatif = goodput.whatif(pd.DataFrame([row]))
    latency = whatif[(whatif["knob"] == "restart latency") & ~whatif["measured"]]
    assert latency["ettr"].tolist() == sorted(latency["ettr"], reverse=True)
    hangs = whatif[(whatif["knob"] == "hang-detection delay") & ~whatif["measured"]]
    assert hangs["ettr"].nunique() == 1  # no hang, no effect


def test_the_model_matches_hand_values():
    p = goodput.Params(mtbf=10.0, interval=1.0, stall=0.0, startup=0.0, queue=0.0)
    # No stall, no start-up, no queueing: a failure loses half a segment on average (to first order).
    assert goodput.expected_ettr(p) == pytest.approx(1 - 0.5 / 10, abs=0.002)
    with_hangs = goodput.Params(10.0, 1.0, 0.0, 0.0, 0.0, hang_share=0.5, hang_delay=2.0)
    assert goodput.expected_ettr(with_hangs) == pytest.approx(goodput.expected_ettr(p) * 10 / 11)
    assert goodput.young_daly_interval(0.1, 20.0) == pytest.approx(2.0)
    assert goodput.best_interval(goodput.Params(20.0, 1.0, 0.1, 0.0, 0.0)) == pytest.approx(2.0, rel=0.1)


def test_the_model_predicts_held_out_simulated_campaigns_within_5_points():
    """Calibrated on three simulated runs of each held-out campaign, scored on the mean of three others with a
    setting changed (benchmarks/bench_ettr_whatif.py runs the full set)."""
    from acme.report.goodput_validation import validate

    rows = validate(
        campaigns=3, observed=3, runs=3, seed=7, only=("interval x2", "interval Young", "restart", "hang")
    )
    assert len(rows) >= 9
    errors = [abs(r["error_points"]) for r in rows]
    assert max(errors) <= 5, rows


@pytest.fixture(scope="module")
def campaign_lake(tmp_path_factory):
    from acme.report.synth_campaigns import write_synth_campaigns

    lake = Lake(str(tmp_path_factory.mktemp("ettr") / "lake"))
    manifest = write_synth_campaigns(lake, "seren", seed=0)
    return lake, manifest


def test_the_synthesized_campaigns_show_what_the_paper_describes(campaign_lake):
    from acme.report.ettr import campaign_jobs, checkpoint_events, diagnosed_reasons

    lake, manifest = campaign_lake
    days = [d.isoformat() for d in pd.date_range("2023-02-28", "2023-04-30").date]
    jobs, unnamed = campaign_jobs(lake, "seren", days)
    assert unnamed == 0 and len(jobs) == manifest["jobs"] and set(jobs["job_type"]) == {"Pretrain"}
    events = checkpoint_events(lake, "seren", days)
    from acme.report.ettr import failure_evidence

    evidence = failure_evidence(lake, "seren", [str(j) for j in jobs["job_id"]])
    tables = account(
        jobs, events, diagnosed_reasons(lake, "seren", days), link_campaigns(jobs, events), t(0, 30), evidence
    )
    campaigns = tables["ettr_campaigns"].set_index("user")
    assert len(campaigns) == 2  # every restart found its campaign
    early, later = campaigns.loc["u-llm104"], campaigns.loc["u-llm123"]
    assert early["ettr"] < 0.6 < 0.85 < later["ettr"] < 0.97
    assert (
        early["lost_since_checkpoint_h"] / early["wall_h"]
        > 3 * later["lost_since_checkpoint_h"] / later["wall_h"]
    )
    assert set(tables["ettr_reasons"]["reason"]) <= {
        "NVLinkError", "CUDAError", "NodeFailure", "ECCError", "NetworkError", "NCCLTimeoutError",
        "S3StorageError", "OutOfMemoryError", "LossSpike", "COMPLETED", "FAILED",
    }  # fmt: skip
    for row in tables["ettr_advice"].to_dict("records"):
        assert row["model_ettr_used_interval"] == pytest.approx(row["measured_ettr"], abs=0.05)
    assert campaigns.loc["u-llm123", "hangs_with_evidence"] == campaigns.loc["u-llm123", "hangs"] > 0
    assert campaigns.loc["u-llm104", "hangs_with_evidence"] == 0 < campaigns.loc["u-llm104", "hangs"]


def test_the_report_has_the_ettr_section_with_its_figure_and_tables(campaign_lake, tmp_path):
    from acme.report.build import build_report

    lake, _ = campaign_lake
    out = tmp_path / "reports"
    build_report(lake, "seren", "2023-03", out_dir=str(out))
    base = out / "cluster=seren" / "period=2023-03"
    html = (base / "index.html").read_text()
    assert '<h2 id="section-10">10. Effective training time of pretraining campaigns (ETTR)</h2>' in html
    assert 'src="figures/ettr_progress.png"' in html and "gpt-104b-pretrain (u-llm104, 2023-03-01)" in html
    assert "GPU-hours lost by interrupting reason" in html and "Checkpoint-interval advice" in html
    assert (
        "hangs before detection" in html
        and "young_daly_interval_min" in html
        and "hang-detection delay" in html
    )
    assert (base / "figures" / "ettr_progress.png").stat().st_size > 10_000
    summary = json.loads((base / "report.json").read_text())
    assert summary["findings"]["ettr_progress"].startswith("gpt-104b-pretrain (u-llm104, 2023-03-01): ETTR ")
    assert set(summary["ettr"]) == {"gpt-104b-pretrain (u-llm104, 2023-03-01)"}
    campaigns = json.loads((base / "tables" / "ettr_campaigns.json").read_text())
    assert campaigns[0]["interruptions"] > 10


def test_acmetrace_data_without_job_names_says_so(tmp_path):
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.report.build import build_report

    sample = Path(__file__).resolve().parents[3] / "include/sample_data/jobs/kalos/2023-07-01.csv"
    lake = Lake(str(tmp_path / "lake"))
    ingest_job_file(lake, JobInput("kalos", "acmetrace", str(sample)), sample)
    build_report(lake, "kalos", "2023-07-01", out_dir=str(tmp_path / "out"))
    summary = json.loads((tmp_path / "out/cluster=kalos/period=2023-07-01/report.json").read_text())
    assert summary["findings"]["ettr_progress"].startswith("no named Pretrain GPU job in this period")
    assert "ettr_progress" not in summary["figures"]


def test_the_demo_whole_history_report_shows_both_campaigns(tmp_path):
    """What ``make demo`` publishes: the AcmeTrace sample days and the synthesized campaigns in one Seren lake,
    then the monthly run's whole-history report (period ``all``): its ETTR section has both campaigns, and
    the AcmeTrace jobs (no names) do not form one."""
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.report.build import build_report
    from acme.report.synth_campaigns import write_synth_campaigns

    lake = Lake(str(tmp_path / "lake"))
    sample = Path(__file__).resolve().parents[3] / "include/sample_data/jobs/seren/2023-07-01.csv"
    ingest_job_file(lake, JobInput("seren", "acmetrace", str(sample)), sample)
    write_synth_campaigns(lake, "seren", seed=0)
    build_report(lake, "seren", "all", out_dir=str(tmp_path / "out"))
    base = tmp_path / "out" / "cluster=seren" / "period=all"
    summary = json.loads((base / "report.json").read_text())
    assert set(summary["ettr"]) == {
        "gpt-104b-pretrain (u-llm104, 2023-03-01)", "gpt-123b-pretrain (u-llm123, 2023-04-03)",
    }  # fmt: skip
    assert (
        summary["ettr"]["gpt-104b-pretrain (u-llm104, 2023-03-01)"]
        < summary["ettr"]["gpt-123b-pretrain (u-llm123, 2023-04-03)"]
    )
    assert "ettr_progress" in summary["figures"]
    html = (base / "index.html").read_text()
    assert "10. Effective training time of pretraining campaigns (ETTR)" in html
    assert "gpt-123b-pretrain (u-llm123, 2023-04-03)" in html


def test_ettr_settings_come_from_the_environment_and_bad_values_are_named(monkeypatch):
    from acme import settings
    from acme.errors import ConfigError

    assert settings.EttrSettings.from_env({}) == settings.EttrSettings(("Pretrain",), 24.0)
    monkeypatch.setenv("ACME_ETTR_JOB_TYPES", " Pretrain, SFT ,")
    monkeypatch.setenv("ACME_ETTR_MAX_GAP_HOURS", "6")
    assert settings.ettr() == settings.EttrSettings(("Pretrain", "SFT"), 6.0)
    monkeypatch.setenv("ACME_ETTR_MAX_GAP_HOURS", "2000")
    with pytest.raises(ConfigError, match="ACME_ETTR_MAX_GAP_HOURS='2000' must be between 0 and 1440"):
        settings.ettr()
