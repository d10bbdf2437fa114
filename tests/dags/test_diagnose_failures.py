"""The diagnosis DAG run by Airflow (dag.test) over a lake with an ingested jobs partition and failure logs."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from acme.diagnosis.synth_log import iter_training_log

ROOT = Path(__file__).resolve().parents[2]
DAY = "2023-07-01"
SAMPLE = ROOT / "include" / "sample_data" / "jobs" / "kalos" / f"{DAY}.csv"

pytestmark = pytest.mark.airflow


def load_dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "diagnose_failures.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["diagnose_failures"]


def run_dag(**conf):
    dag = load_dag()
    for task in dag.tasks:  # a failing test must fail now, not after the production retry delays
        task.retries = 0
    return dag.test(logical_date=datetime.fromisoformat(DAY).replace(tzinfo=UTC), run_conf=conf)


@pytest.fixture
def kalos_day(lake_dir, tmp_path, monkeypatch):
    """A kalos jobs partition (through the real ingest) with three failed jobs, two of them with logs."""
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake

    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")  # the model's 8 s load is not under test here
    header, *rows = SAMPLE.read_text().splitlines()
    failed = [r for r in rows if ",FAILED," in r][:3]
    completed = [r for r in rows if ",COMPLETED," in r][:2]
    failed[0] = failed[0].replace(",Eval,", ",SFT,")
    csv_path = tmp_path / "kalos.csv"
    csv_path.write_text("\n".join([header, *failed, *completed]) + "\n")
    lake = Lake(str(lake_dir))
    ingest_job_file(lake, JobInput("kalos", "acmetrace", str(csv_path)), csv_path)
    ids = [r.split(",", 1)[0] for r in failed]

    def write_log(job_id: str, failure: str) -> None:
        path = lake_dir / "logs" / "cluster=kalos" / f"job={job_id}" / "train.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(iter_training_log(3_000, seed=3, ranks=8, failure=failure)) + "\n")

    write_log(ids[0], "KeyError")  # the SFT job: the user's script -> owner message
    write_log(
        ids[1], "ECCError"
    )  # an Eval job on a bad GPU: infrastructure, but evaluations are not recovered
    return {"lake": lake, "ids": ids, "completed": [r.split(",", 1)[0] for r in completed]}


def records_of(lake_dir: Path, cluster: str, day: str) -> dict[str, dict]:
    path = lake_dir / f"diagnoses/cluster={cluster}/date={day}/diagnoses.parquet"
    return {row["job_id"]: row for row in pq.read_table(path).to_pylist()}


def records(lake_dir: Path) -> dict[str, dict]:
    return records_of(lake_dir, "kalos", DAY)


def test_nightly_run_diagnoses_every_failed_job_once_and_routes_them(airflow_db, lake_dir, kalos_day):
    run = run_dag(day=DAY, cluster="kalos")
    assert run.state == "success"
    ids = kalos_day["ids"]
    found = records(lake_dir)
    assert set(found) == set(ids)  # every failed job, no completed one
    assert (found[ids[0]]["reason"], found[ids[0]]["source"], found[ids[0]]["attribution"]) == (
        "KeyError",
        "rule",
        "user",
    )
    assert found[ids[1]]["reason"] == "ECCError" and found[ids[1]]["category"] == "Infrastructure"
    assert (found[ids[2]]["reason"], found[ids[2]]["source"]) == ("Unknown", "none")
    assert "no log found" in found[ids[2]]["note"]
    evidence = json.loads(found[ids[0]]["evidence"])
    assert evidence and all({"line", "text"} <= set(e) for e in evidence)

    message_path = lake_dir / f"diagnosis/messages/cluster=kalos/date={DAY}/{ids[0]}.json"
    message = json.loads(message_path.read_text())
    assert "KeyError" in message["text"] and message["to"] and message["mitigation"]
    assert len(list((lake_dir / "diagnosis/messages").rglob("*.json"))) == 1  # ECC of an Eval job: no message

    assert not [
        p for p in (lake_dir / "staging").rglob("*") if p.is_file()
    ]  # the plan is dropped once published
    assert run_dag(day=DAY, cluster="kalos").state == "success"  # a re-run replaces, never duplicates
    again = records(lake_dir)
    assert set(again) == set(ids)
    assert {k: (v["reason"], v["source"]) for k, v in again.items()} == {
        k: (v["reason"], v["source"]) for k, v in found.items()
    }


def test_manual_run_diagnoses_a_job_not_yet_ingested_from_the_given_log(airflow_db, lake_dir, kalos_day):
    log = lake_dir / "logs" / "adhoc" / "crash-4242.log"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(iter_training_log(2_000, seed=5, ranks=4, failure="ImportError")) + "\n")
    run = run_dag(cluster="kalos", job_id="crash-4242", log="adhoc/crash-4242.log", day=DAY)
    assert run.state == "success"
    row = records(lake_dir)["crash-4242"]
    assert row["reason"] == "ImportError" and row["date"] == date(2023, 7, 1)


def test_a_log_location_outside_the_log_root_fails_the_run(airflow_db, lake_dir, kalos_day, tmp_path):
    outside = tmp_path / "secret.log"
    outside.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    for location in ("../../secret.log", str(outside)):
        run = run_dag(cluster="kalos", job_id=kalos_day["ids"][0], log=location, day=DAY)
        assert run.state == "failed"
    assert not (lake_dir / "diagnoses").exists()


SACCT_FAILED_PRETRAIN = (
    "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|AllocTRES|ReqTRES|ExitCode\n"
    "8100|llama-pretrain-run3|alice|gpu|FAILED|2024-03-10T01:00:00|2024-03-10T01:05:00|2024-03-10T03:05:00|"
    "02:00:00|2|128|gpu[01-02]|billing=128,cpu=128,gres/gpu=16,mem=1T,node=2|"
    "billing=128,cpu=128,gres/gpu=16,mem=1T,node=2|1:0\n"
)


@pytest.mark.parametrize(
    "conf", [{"day": "2024-03-10", "cluster": "seren"}, {"day": "2024-03-10", "cluster": "seren", "job_id": "8100"}],
    ids=["nightly", "manual-after-the-crash"],
)  # fmt: skip
def test_infrastructure_failure_of_a_pretrain_job_triggers_recover_training(
    airflow_db, lake_dir, tmp_path, monkeypatch, conf
):
    """A Slurm job (sacct ingest gives its node list) dies of an ECC error: recover_training gets its conf,
    from the nightly run and from a manual run naming the job (diagnosed by plan_jobs, no diagnose step)."""
    from airflow.models import DagRun
    from airflow.utils.session import create_session

    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake

    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(SACCT_FAILED_PRETRAIN)
    ingest_job_file(Lake(str(lake_dir)), JobInput("seren", "sacct", str(sacct)), sacct)
    log = lake_dir / "logs/cluster=seren/job=8100/train.log"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(iter_training_log(2_000, seed=1, ranks=16, failure="ECCError")) + "\n")

    with create_session() as session:  # the other case's recovery run would make this trigger a no-op
        session.query(DagRun).filter(DagRun.dag_id == "recover_training").delete()
    dag = load_dag()
    for task in dag.tasks:
        task.retries = 0
    run = dag.test(logical_date=datetime(2024, 3, 10, tzinfo=UTC), run_conf=conf)
    assert run.state == "success"
    states = {(ti.task_id, ti.map_index): ti.state for ti in run.get_task_instances()}
    manual = "job_id" in conf
    assert states[("diagnose", 0 if not manual else -1)] == ("skipped" if manual else "success")
    assert states[("publish", -1)] == states[("trigger_recovery", 0)] == "success"
    assert records_of(lake_dir, "seren", "2024-03-10")["8100"]["reason"] == "ECCError"
    with create_session() as session:
        triggered = session.query(DagRun).filter(DagRun.dag_id == "recover_training").all()
        confs = {r.run_id: r.conf for r in triggered}
    assert confs["recover__seren__8100"] == {
        "cluster": "seren", "job_id": "8100", "nodes": ["gpu01", "gpu02"], "checkpoint_uri": "", "dry_run": True,
        "reason": "ECCError", "recovery_id": "diag-seren-8100", "detected_at": "2024-03-10T03:05:00+00:00",
        # What the approval form shows and the auto-approve policy reads:
        "diagnosis_source": "rule", "confidence": 0.9,
        "evidence": ["[rank5]: RuntimeError: CUDA error: uncorrectable ECC error encountered"],
    }  # fmt: skip


def test_a_capped_run_says_how_many_wait_and_the_next_run_diagnoses_them(
    airflow_db, lake_dir, kalos_day, monkeypatch
):
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    monkeypatch.setenv("ACME_DIAGNOSIS_MAX_JOBS", "1")  # two of the three failed jobs have a log
    ids = kalos_day["ids"]
    first = run_dag(day=DAY, cluster="kalos")
    assert first.state == "success"
    assert set(records(lake_dir)) == {ids[0], ids[2]}  # the first logged job, and the one without a log
    second = run_dag(day=DAY, cluster="kalos")
    assert second.state == "success"
    assert set(records(lake_dir)) == set(ids)
    with create_session() as session:
        extras = [
            e.extra
            for e in session.query(AssetEvent).order_by(AssetEvent.id)
            if e.extra and "waiting" in e.extra
        ]
    assert [(e["jobs"], e["waiting"]) for e in extras[-2:]] == [(2, 1), (1, 0)]
