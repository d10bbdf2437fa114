"""The validate_nodes DAG run by Airflow (dag.test) on the simulated backend: two nodes a real recovery
cordoned, one validated and returned, one failing validation and kept cordoned; the evidence read back
from the lake."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from acme.lake import Lake
from acme.recovery.backend import SimulatedBackend
from acme.recovery.synth_checkpoints import write_checkpoint
from acme.settings import recovery as recovery_settings
from tests.recovery_support import manual_request, recover, simulated_jobs_file

ROOT = Path(__file__).resolve().parents[2]
NODES = [f"seren-n{i:03d}" for i in range(8)]

pytestmark = pytest.mark.airflow


def run_dag(logical_date: datetime, **conf):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "validate_nodes.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["validate_nodes"]
    for task in dag.tasks:  # a failing test must fail now, not after the production retry delays
        task.retries = 0
    return dag.test(logical_date=logical_date, run_conf=conf)


@pytest.fixture
def cordoned_by_recoveries(lake_dir, tmp_path, monkeypatch) -> Lake:
    """Two live recoveries on the simulated cluster, each cordoning the node that failed its checks."""
    jobs = simulated_jobs_file(
        tmp_path,
        {
            "job-a": {"nodes": NODES, "faulty": ["seren-n002"]},
            "job-b": {"nodes": NODES, "faulty": ["seren-n006"]},
        },
    )
    monkeypatch.setenv("ACME_RECOVERY_SIMULATED_JOBS", str(jobs))
    checkpoints = tmp_path / "ckpt"
    write_checkpoint(checkpoints, 100)
    lake = Lake(str(lake_dir))
    for job in ("job-a", "job-b"):
        request = manual_request(checkpoints, job, NODES, f"incident-{job}")
        recover(lake, request, SimulatedBackend("seren", jobs, lake, job), recovery_settings())
    assert SimulatedBackend("seren", jobs, lake).cordoned(NODES) == {"seren-n002", "seren-n006"}
    return lake


def evidence(lake_dir: Path, node: str) -> list[dict]:
    logs = sorted(lake_dir.glob(f"recovery/cluster=seren/node={node}/*/actions.jsonl"))
    return [json.loads(line) for log in logs for line in log.read_text().splitlines()]


def test_one_node_is_validated_and_returned_the_other_fails_and_stays_cordoned(
    airflow_db, lake_dir, cordoned_by_recoveries, monkeypatch
):
    monkeypatch.setenv("ACME_VALIDATION_SIMULATED_FAULTS", "seren-n006:gpu_memory")
    run = run_dag(datetime(2026, 12, 2, 8, 40, tzinfo=UTC), cluster="seren", dry_run=False)

    assert str(run.state) == "success"
    states = sorted((ti.task_id, ti.map_index, str(ti.state)) for ti in run.get_task_instances())
    assert states == [("find_cordoned", -1, "success"), ("summarize", -1, "success"),
                      ("validate_node", 0, "success"), ("validate_node", 1, "success")]  # fmt: skip
    state = json.loads((lake_dir / "recovery/simulated/cluster=seren/state.json").read_text())
    assert list(state["cordoned"]) == ["seren-n006"]
    assert [u["node"] for u in state["uncordoned"]] == ["seren-n002"]

    returned = evidence(lake_dir, "seren-n002")
    assert [(r["step"], r["status"]) for r in returned] == [("validate", "done"), ("uncordon", "done")]
    checks = {c["check"]: c for c in returned[0]["result"]["checks"]}
    assert {name: c["status"] for name, c in checks.items()} == dict.fromkeys(
        ["allgather", "dcgm_diag", "gpu_memory", "nccl_bandwidth"], "pass"
    )
    assert checks["nccl_bandwidth"]["figures"]["slowest_busbw_gbps"] > 100
    assert checks["dcgm_diag"]["figures"]["level"] == 2 and checks["allgather"]["started_at"]
    kept = evidence(lake_dir, "seren-n006")
    assert [r["step"] for r in kept] == ["validate"]
    failed = next(c for c in kept[0]["result"]["checks"] if c["check"] == "gpu_memory")
    assert failed["status"] == "fail" and failed["reason"] == "cuda:1: 62% free"
    assert failed["figures"]["free_share"]["cuda:1"] == 0.62

    # The next hour: the returned node is left alone, the failing one validated again (its own evidence).
    later = run_dag(datetime(2026, 12, 2, 9, 40, tzinfo=UTC), cluster="seren", dry_run=False)
    assert str(later.state) == "success"
    assert [r["step"] for r in evidence(lake_dir, "seren-n002")] == ["validate", "uncordon"]
    assert [r["step"] for r in evidence(lake_dir, "seren-n006")] == ["validate", "validate"]


def summary_of(run) -> dict:
    (summarize,) = [ti for ti in run.get_task_instances() if ti.task_id == "summarize"]
    return summarize.xcom_pull(task_ids="summarize")


def test_a_lemon_node_that_passes_is_held_on_call_is_told_once_and_an_operator_returns_it(
    airflow_db, lake_dir, cordoned_by_recoveries, tmp_path, monkeypatch
):
    """Both cordoned nodes are on the latest lemon list (each localized once by its recovery): seren-n002
    passes but stays cordoned, with the reason in its log and the summary and one mail to on-call; seren-n006
    fails its check. A manual run naming seren-n002 with allow_lemon returns it."""
    import os

    from acme.recovery.lemon_nightly import suggest_cordons
    from acme.settings import LemonSettings
    from tests.notify_support import smtp_connection, smtp_server

    monkeypatch.setenv("ACME_VALIDATION_SIMULATED_FAULTS", "seren-n006:gpu_memory")
    monkeypatch.delenv("ACME_VALIDATION_LEMON_NODES", raising=False)
    lake = cordoned_by_recoveries
    backend = SimulatedBackend("seren", Path(os.environ["ACME_RECOVERY_SIMULATED_JOBS"]), lake)
    today = datetime.now(UTC).date()
    listed = suggest_cordons(
        lake, "seren", today, LemonSettings(suggest_top=2, min_score=0.5), lambda cluster, lake: backend
    )
    assert sorted(s["node"] for s in listed["suggested"]) == ["seren-n002", "seren-n006"]
    list_key = f"recovery/lemon/cluster=seren/date={today.isoformat()}/suggestion.json"
    rank, score = next((s["rank"], s["score"]) for s in listed["suggested"] if s["node"] == "seren-n002")
    routing = tmp_path / "notify.yaml"
    routing.write_text(
        "channels: {mail: {kind: smtp, connection: smtp_validate_dag}}\n"
        "oncall: {default: {channel: mail, to: oncall@acme.example}}\n"
    )
    monkeypatch.setenv("ACME_NOTIFY_FILE", str(routing))

    with smtp_server() as (mailbox, port):
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_VALIDATE_DAG", smtp_connection(port))
        run = run_dag(datetime(2026, 12, 2, 8, 40, tzinfo=UTC), cluster="seren", dry_run=False)
        assert str(run.state) == "success"
        state = json.loads((lake_dir / "recovery/simulated/cluster=seren/state.json").read_text())
        assert sorted(state["cordoned"]) == ["seren-n002", "seren-n006"] and not state.get("uncordoned")
        held = evidence(lake_dir, "seren-n002")
        assert [(r["step"], r["status"]) for r in held] == [("validate", "done"), ("uncordon", "held")]
        assert held[0]["result"]["passed"] is True
        reason = held[1]["result"]["held"]
        # the score decays with the hours between the recovery and the list's end of day: read, not fixed
        assert reason == f"held: lemon node, score {score:.2f}, rank {rank} in {list_key}"
        assert [(r["step"], r["result"]["passed"]) for r in evidence(lake_dir, "seren-n006")] == [
            ("validate", False)
        ]
        summary = summary_of(run)
        assert summary["held_lemon"] == {"seren/seren-n002": reason}
        assert (
            summary["kept_cordoned"] == {"seren/seren-n006": ["gpu_memory"]} and summary["uncordoned"] == []
        )
        (mail,) = mailbox.messages
        assert mail["To"] == "oncall@acme.example" and "seren-n002" in mail["Subject"]
        assert "allow_lemon" in mailbox.bodies()[0]

        # The next hour: validated and held again; on-call is not told twice.
        later = run_dag(datetime(2026, 12, 2, 9, 40, tzinfo=UTC), cluster="seren", dry_run=False)
        assert str(later.state) == "success" and summary_of(later)["held_lemon"] == {
            "seren/seren-n002": reason
        }
        assert [r["status"] for r in evidence(lake_dir, "seren-n002")].count("held") == 2
        assert len(mailbox.messages) == 1

        # An operator returns it on purpose.
        manual = run_dag(datetime(2026, 12, 2, 10, 5, tzinfo=UTC), cluster="seren", nodes=["seren-n002"],
                         allow_lemon=True, dry_run=False)  # fmt: skip
        assert str(manual.state) == "success"
        assert summary_of(manual)["uncordoned"] == summary_of(manual)["allowed_lemon"] == ["seren/seren-n002"]
        state = json.loads((lake_dir / "recovery/simulated/cluster=seren/state.json").read_text())
        assert list(state["cordoned"]) == ["seren-n006"]
        assert evidence(lake_dir, "seren-n002")[-1]["inputs"]["allowed_by"].startswith(
            "the run's allow_lemon"
        )
        assert len(mailbox.messages) == 1
