"""Validation of drained nodes through a real Slurm 22.05 on one machine (the cluster of
tests/integration/test_slurm_recovery.py, its fixtures reused): the node's real self-test (torchrun, two
gloo ranks) runs on it through the node command, and ``scontrol update NodeName=… State=RESUME`` happens
only for the node that passed; ``acme-n3`` fails its self-test (the check's ``--fail``) and stays drained.

A drained node takes no Slurm job, so the checks run on the node itself (``ACME_VALIDATION_NODE_COMMAND``,
``ssh`` in production); every node of this test cluster is this machine, so the command here is a script
that runs the command line locally as that node (``ACME_NODE_NAME``). There is no GPU and no ``dcgmi``:
``ACME_VALIDATION_GPU_REQUIRED=false`` records those checks as skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acme.lake import Lake
from acme.recovery.slurm_backend import SlurmBackend, parse_oneliner
from acme.recovery.validation import node_log, validate_node, validation_spec
from acme.settings import recovery as recovery_settings
from acme.settings import validation as validation_settings
from tests.integration.test_slurm_recovery import _run, slurm, slurm_env  # noqa: F401 (fixtures)

pytestmark = pytest.mark.integration


@pytest.fixture
def validation_env(request, monkeypatch, tmp_path: Path):
    cluster = request.getfixturevalue("slurm_env")
    run_on_node = tmp_path / "run-on-node"
    run_on_node.write_text('#!/bin/sh\nACME_NODE_NAME=$1; export ACME_NODE_NAME; exec sh -c "$2"\n')
    run_on_node.chmod(0o755)
    monkeypatch.setenv("ACME_VALIDATION_NODE_COMMAND", f"{run_on_node} {{node}}")
    monkeypatch.setenv("ACME_VALIDATION_RANKS_PER_NODE", "2")
    monkeypatch.setenv("ACME_VALIDATION_DCGM_LEVEL", "1")
    monkeypatch.setenv("ACME_VALIDATION_GPU_REQUIRED", "false")
    monkeypatch.setenv("ACME_VALIDATION_MIN_BUSBW_GBPS", "0.001")  # gloo on loopback, two shared cores
    monkeypatch.setenv("ACME_RECOVERY_CHECK_TIMEOUT_S", "30")
    return cluster


def state_of(node: str, env: dict) -> str:
    return parse_oneliner(_run(["scontrol", "show", "node", "--oneliner", node], env).stdout)["State"]


def test_only_the_node_that_passes_is_resumed_on_a_real_slurm(validation_env, tmp_path):
    env = validation_env["env"]
    backend = SlurmBackend(recovery_settings())
    for node in ("acme-n3", "acme-n5"):
        backend.cordon(node, f"acme recovery incident-9: {node} failed twice")
    assert backend.cordoned(["acme-n3", "acme-n4", "acme-n5"]) == {"acme-n3", "acme-n5"}
    lake = Lake(str(tmp_path / "lake"))
    settings = validation_settings()
    spec = validation_spec("validate-1", settings, recovery_settings())

    healthy = validate_node(lake, backend, "slurmtest", "acme-n5", spec, settings, False)
    faulty = validate_node(lake, backend, "slurmtest", "acme-n3", spec, settings, False)

    assert healthy["passed"] and healthy["uncordoned"], healthy
    assert "DRAIN" not in state_of("acme-n5", env)
    assert not faulty["passed"] and not faulty["uncordoned"] and "allgather" in faulty["failed_checks"]
    assert "DRAIN" in state_of("acme-n3", env)
    reason = _run(["sinfo", "--noheader", "--Node", "--nodes=acme-n3", "--format=%E"], env).stdout
    assert "incident-9" in reason

    passed = node_log(lake, "slurmtest", "acme-n5", "validate-1").records()
    assert [r["step"] for r in passed] == ["validate", "uncordon"]
    assert passed[1]["result"]["command"] == ["scontrol", "update", "NodeName=acme-n5", "State=RESUME"]
    checks = {c["check"]: c for c in passed[0]["result"]["checks"]}
    assert checks["allgather"]["figures"] == {
        **checks["allgather"]["figures"],
        "ranks_reported": 2,
        "backend": "gloo",
    }
    assert (
        checks["nccl_bandwidth"]["status"] == "pass"
        and checks["nccl_bandwidth"]["figures"]["slowest_busbw_gbps"] > 0
    )
    assert checks["dcgm_diag"]["status"] == "skipped" and checks["gpu_memory"]["status"] == "skipped"
    failed = node_log(lake, "slurmtest", "acme-n3", "validate-1").records()
    assert [r["step"] for r in failed] == ["validate"]
    allgather = next(c for c in failed[0]["result"]["checks"] if c["check"] == "allgather")
    assert "DeliberateFailure" in allgather["reason"]

    # Drained again by a person: re-running the same validation neither measures nor resumes it again.
    backend.cordon("acme-n5", "drained by hand after the validation")
    again = validate_node(lake, backend, "slurmtest", "acme-n5", spec, settings, False)
    assert again["skipped"].startswith("already recorded at")
    assert "DRAIN" in state_of("acme-n5", env)
    assert [r["step"] for r in node_log(lake, "slurmtest", "acme-n5", "validate-1").records()] == [
        "validate",
        "uncordon",
    ]
    for node in ("acme-n3", "acme-n5"):  # the module's cluster goes on with every node in service
        _run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], env)
