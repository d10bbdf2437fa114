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
