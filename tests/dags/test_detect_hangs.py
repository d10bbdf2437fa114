"""The detect_hangs DAG run by Airflow (dag.test): a synthesized hang of a running Pretrain job is detected from
the metrics lake, diagnosed by diagnose_failures from the evidence log, and sent to recover_training, which runs
it as a dry run on the simulated cluster; an idle cluster short-circuits."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from acme.detection.scenario import JOB_ID, NODES, build_lake, step_of
from acme.metrics.synth import Episode
from acme.recovery.synth_checkpoints import write_checkpoint

ROOT = Path(__file__).resolve().parents[2]
HANG_AT = datetime(2024, 3, 10, 2, 0, tzinfo=UTC)  # the hang starts at 02:00 and lasts 30 min

pytestmark = pytest.mark.airflow


def load_dag(dag_id: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / f"{dag_id}.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags[dag_id]
    for task in dag.tasks:  # a failing test must fail now, not after the production retry delays
        task.retries = 0
    return dag


def task_states(run) -> dict[str, list[str]]:
    states: dict[str, list[str]] = {}
    for ti in run.get_task_instances():
        states.setdefault(ti.task_id, []).append(str(ti.state))
    return states


def triggered(dag_id: str) -> dict[str, dict]:
    from airflow.models import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        return {r.run_id: r.conf for r in session.query(DagRun).filter(DagRun.dag_id == dag_id).all()}


def forget_triggered_runs() -> None:
    """Drop the runs an earlier session triggered for this job (the test DB outlives a session, and a
    trigger skips a run id that exists, so its old conf -- with an old tmp path -- would be read back)."""
    from airflow.models import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        for run in session.query(DagRun).filter(DagRun.dag_id.in_(["diagnose_failures", "recover_training"])):
            if (
                run.run_id.startswith(f"detect__seren__{JOB_ID}__")
                or run.run_id == f"recover__seren__{JOB_ID}"
            ):
                session.delete(run)


@pytest.fixture
def hung_job(airflow_db, lake_dir, tmp_path, monkeypatch):
    """A running 4-node Pretrain job whose collective hangs at 02:00; its nodes as a simulated cluster job."""
    forget_triggered_runs()
    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")  # the model's load is not under test here
    monkeypatch.setenv("ACME_RECOVERY_BACKEND", "simulated")
    nodes = build_lake(lake_dir, tmp_path, [Episode("hang", tuple(range(NODES)), step_of(2), step_of(2, 30))])
    jobs = tmp_path / "simulated_jobs.yaml"
    jobs.write_text(json.dumps({"clusters": {"seren": {JOB_ID: {"nodes": nodes, "faulty": [], "seed": 0}}}}))
    monkeypatch.setenv("ACME_RECOVERY_SIMULATED_JOBS", str(jobs))
    checkpoints = tmp_path / "checkpoints" / JOB_ID
    write_checkpoint(checkpoints, 100)
    monkeypatch.setenv("ACME_CHECKPOINT_URI_PATTERN", str(tmp_path / "checkpoints" / "{job_id}"))
    return {"lake": lake_dir, "nodes": nodes, "checkpoints": checkpoints}


def test_a_hang_is_detected_diagnosed_and_sent_to_recovery_as_a_dry_run(hung_job):
    lake = hung_job["lake"]
    # The scheduled run at 02:04: the hang has lasted 4 minutes (the rule needs 2.5).
    run = load_dag("detect_hangs").test(logical_date=datetime(2024, 3, 10, 2, 4, tzinfo=UTC))
    assert run.state == "success", task_states(run)
    diagnoses = {k: v for k, v in triggered("diagnose_failures").items() if k.startswith("detect__")}
    assert list(diagnoses) == [f"detect__seren__{JOB_ID}__hang__20240310T020000Z"]
    (conf,) = diagnoses.values()
    assert conf == {
        "cluster": "seren",
        "job_id": JOB_ID,
        "log": f"detect/cluster=seren/job={JOB_ID}/hang-20240310T020000Z.log",
        "day": "2024-03-10",
    }
    evidence = (lake / "logs" / conf["log"]).read_text()
    assert "ERROR acme-detect: hang: 32/32 GPUs" in evidence and "since 2024-03-10T02:00:00Z" in evidence

    # The next run (02:06) sees the same hang: same episode, no second diagnosis.
    again = load_dag("detect_hangs").test(logical_date=datetime(2024, 3, 10, 2, 6, tzinfo=UTC))
    assert again.state == "success", task_states(again)
    assert [k for k in triggered("diagnose_failures") if k.startswith("detect__")] == list(diagnoses)

    # What the scheduler would run next: the diagnosis with that conf ...
    diagnosis = load_dag("diagnose_failures").test(
        logical_date=datetime(2024, 3, 10, 2, 5, tzinfo=UTC), run_conf=conf
    )
    assert diagnosis.state == "success", task_states(diagnosis)
    (record,) = pq.read_table(lake / "diagnoses/cluster=seren/date=2024-03-10/diagnoses.parquet").to_pylist()
    assert (record["job_id"], record["reason"], record["category"], record["source"]) == (
        JOB_ID, "NCCLTimeoutError", "Infrastructure", "rule",
    )  # fmt: skip
    assert "acme-detect: hang" in record["evidence"]
    recovery_conf = triggered("recover_training")[f"recover__seren__{JOB_ID}"]
    assert recovery_conf["dry_run"] is True and recovery_conf["nodes"] == hung_job["nodes"]
    assert recovery_conf["reason"] == "NCCLTimeoutError"
    # The diagnosis leaves the checkpoint location to recover_training (ACME_CHECKPOINT_URI_PATTERN).
    assert recovery_conf["checkpoint_uri"] == ""

    # ... and the recovery it triggers, as a dry run: every step planned, nothing cordoned or restarted.
    recovery = load_dag("recover_training").test(
        logical_date=datetime(2024, 3, 10, 2, 7, tzinfo=UTC), run_conf=recovery_conf
    )
    assert recovery.state == "success", task_states(recovery)
    (log,) = lake.glob(f"recovery/cluster=seren/job={JOB_ID}/*/actions.jsonl")
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    assert {a["dry_run"] for a in actions} == {True}
    assert actions[-1]["step"] == "restart" and actions[-1]["status"] == "planned"
    (chosen,) = [a for a in actions if a["step"] == "choose_checkpoint"]
    assert chosen["inputs"]["checkpoint_uri"] == str(hung_job["checkpoints"])
    assert not (lake / "recovery/simulated/cluster=seren/state.json").exists()


def test_no_running_gpu_job_short_circuits_before_any_telemetry_is_read(hung_job):
    # 02:04 the next day: the job's telemetry ends with the day, but the job is still RUNNING in the lake;
    # before it started (23:00 the day before) nothing ran.
    run = load_dag("detect_hangs").test(
        logical_date=datetime(2024, 3, 9, 23, 0, tzinfo=UTC), run_conf={"at": "2024-03-09T23:00:00+00:00"}
    )
    assert run.state == "success", task_states(run)
    states = task_states(run)
    assert states["running_jobs"] == ["success"]
    assert states["detect"] == ["skipped"] and states["start_diagnosis"] == ["skipped"]
    assert not (hung_job["lake"] / "logs" / "detect").exists()


def test_a_healthy_window_triggers_nothing(hung_job):
    run = load_dag("detect_hangs").test(logical_date=datetime(2024, 3, 10, 1, 30, tzinfo=UTC))
    assert run.state == "success", task_states(run)
    assert task_states(run)["start_diagnosis"] == ["skipped"]
    assert not [k for k in triggered("diagnose_failures") if k.startswith("detect__seren__") and "0130" in k]
    assert not (hung_job["lake"] / "logs" / "detect").exists()
