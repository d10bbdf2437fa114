"""Validation of cordoned nodes on the simulated backend: the checks, the verdict, the uncordon, re-runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acme.errors import ConfigError, InputError
from acme.lake import Lake
from acme.recovery.backend import SimulatedBackend
from acme.recovery.node_selftest import (
    ValidationSpec,
    read_node_output,
    simulated_node_output,
)
from acme.recovery.validation import (
    bus_bandwidth_gbps,
    cordons_in_lake,
    judge,
    node_log,
    nodes_to_validate,
    validate_node,
    validation_spec,
)
from acme.settings import ValidationSettings
from acme.settings import recovery as recovery_settings
from acme.settings import validation as validation_settings
from tests.recovery_support import manual_request, recover, simulated_jobs_file

NODES = [f"n{i:02d}" for i in range(8)]
SPEC = ValidationSpec("v1", ranks=8, dcgm_level=2, timeout_s=60)


@pytest.fixture
def jobs_file(tmp_path: Path) -> Path:
    return simulated_jobs_file(
        tmp_path, {"job-1": {"nodes": NODES, "faulty": ["n05"]}, "job-2": {"nodes": NODES, "faulty": ["n02"]}}
    )


def settings(**overrides: str) -> ValidationSettings:
    return ValidationSettings.from_env({f"ACME_VALIDATION_{k.upper()}": v for k, v in overrides.items()})


def measured(fault: str | None, spec: ValidationSpec = SPEC):
    return read_node_output(
        simulated_node_output("n05", spec, fault, "2026-12-02T08:00:00Z"), "n05", "simulated", spec.dcgm_level
    )


def test_a_healthy_node_passes_every_check_with_its_figures():
    checks = {c["check"]: c for c in judge(measured(None), settings())}
    assert [c["status"] for c in checks.values()] == ["pass"] * 4
    assert checks["allgather"]["figures"]["ranks_reported"] == 8
    assert checks["dcgm_diag"]["figures"]["tests"]["memory"] == ["pass"]
    assert checks["gpu_memory"]["figures"]["gpus"] == 8
    assert 190 < checks["nccl_bandwidth"]["figures"]["slowest_busbw_gbps"] < 220
    assert checks["dcgm_diag"]["started_at"] == "2026-12-02T08:00:00Z"


@pytest.mark.parametrize("fault", ["allgather", "dcgm_diag", "gpu_memory", "nccl_bandwidth"])
def test_each_simulated_fault_fails_its_check(fault):
    checks = {c["check"]: c for c in judge(measured(fault), settings())}
    assert checks[fault]["status"] == "fail", checks[fault]
    others = {name: c["status"] for name, c in checks.items() if name != fault}
    # A failed self-test leaves no bandwidth to measure; every other fault fails its own check only.
    expected = {"nccl_bandwidth": "fail"} if fault == "allgather" else {}
    assert {n: s for n, s in others.items() if s != "pass"} == expected


def test_the_reasons_name_what_failed():
    reasons = {c["check"]: c["reason"] for c in judge(measured("dcgm_diag"), settings())}
    assert reasons["dcgm_diag"] == "failed tests: memory"
    reasons = {c["check"]: c["reason"] for c in judge(measured("gpu_memory"), settings())}
    assert reasons["gpu_memory"] == "cuda:1: 62% free"
    reasons = {c["check"]: c["reason"] for c in judge(measured("nccl_bandwidth"), settings())}
    assert reasons["nccl_bandwidth"].endswith("< 100 GB/s")


def test_bus_bandwidth_is_nccl_tests_busbw():
    # 8 ranks each sending 64 MiB in 2.5 ms: 7 * 64 MiB / 2.5 ms = 187.9 GB/s.
    report = {"world_size": 8, "allgather_mb": 64, "phases": {"allgather_s": 0.0025}}
    assert bus_bandwidth_gbps(report) == pytest.approx(7 * 64 * 2**20 / 0.0025 / 1e9)
    assert bus_bandwidth_gbps({**report, "world_size": 1}) is None


def test_a_node_without_dcgmi_or_gpus_fails_unless_gpus_are_not_required():
    output = (
        "acme-validate selftest-start 2026-12-02T08:00:00Z\n"
        + json.dumps({"check": "acme-allgather-check", "node": "c1", "rank": 0, "world_size": 2, "ok": True,
                      "backend": "gloo", "device": "cpu", "allgather_mb": 1, "gpu_memory": None,
                      "phases": {"allgather_s": 0.01}}) + "\n"
        + json.dumps({"check": "acme-allgather-check", "node": "c1", "rank": 1, "world_size": 2, "ok": True,
                      "backend": "gloo", "device": "cpu", "allgather_mb": 1, "gpu_memory": None,
                      "phases": {"allgather_s": 0.01}}) + "\n"
        "acme-validate selftest-end 2026-12-02T08:00:05Z 0\n"
        "acme-validate dcgm-start 2026-12-02T08:00:05Z\n"
        "sh: 1: dcgmi: not found\n"
        "acme-validate dcgm-end 2026-12-02T08:00:05Z 127\n"
    )  # fmt: skip
    node = read_node_output(output, "c1", "slurm", 1)
    strict = {c["check"]: c["status"] for c in judge(node, settings(ranks_per_node="2", dcgm_level="1"))}
    assert strict == {
        "allgather": "pass",
        "dcgm_diag": "fail",
        "gpu_memory": "fail",
        "nccl_bandwidth": "fail",
    }
    lenient = settings(ranks_per_node="2", dcgm_level="1", gpu_required="false", min_busbw_gbps="0.1")
    assert {c["check"]: c["status"] for c in judge(node, lenient)} == {
        "allgather": "pass", "dcgm_diag": "skipped", "gpu_memory": "skipped", "nccl_bandwidth": "pass",
    }  # fmt: skip


def test_output_without_the_program_is_a_problem_and_fails_every_check():
    node = read_node_output("ssh: connect to host n05 port 22: Connection refused\n", "n05", "slurm", 2)
    assert node.problem.startswith("the validation did not start: ssh: connect to host n05")
    assert all(c["status"] == "fail" for c in judge(node, settings()))


def test_bad_fault_settings_are_clear_errors():
    with pytest.raises(ConfigError, match="ACME_VALIDATION_SIMULATED_FAULTS has 'n1:fans'"):
        settings(simulated_faults="n1:fans")
    assert settings(simulated_faults="n1, n2:gpu_memory").simulated_faults == {
        "n1": "dcgm_diag",
        "n2": "gpu_memory",
    }


# --- on the simulated backend, from a real recovery's cordons ---------------------------------------


def recover_both_jobs(lake: Lake, jobs_file: Path, checkpoints: Path) -> SimulatedBackend:
    for job in ("job-1", "job-2"):
        backend = SimulatedBackend("seren", jobs_file, lake, job)
        recover(lake, manual_request(checkpoints, job, NODES, f"r-{job}"), backend, recovery_settings())
    return SimulatedBackend("seren", jobs_file, lake)


def test_cordoned_nodes_are_validated_and_only_the_passing_one_returns(
    lake, jobs_file, checkpoints, monkeypatch
):
    monkeypatch.setenv("ACME_VALIDATION_SIMULATED_FAULTS", "n05:nccl_bandwidth")
    backend = recover_both_jobs(lake, jobs_file, checkpoints)
    assert cordons_in_lake(lake) == {("seren", "n02"): ["job-2/r-job-2"], ("seren", "n05"): ["job-1/r-job-1"]}
    targets = nodes_to_validate(lake, None, [], lambda cluster: backend)
    assert [t["node"] for t in targets] == ["n02", "n05"]
    spec = validation_spec("run-1", validation_settings(), recovery_settings())

    outcomes = {t["node"]: validate_node(lake, backend, "seren", t["node"], spec, validation_settings(), False)
                for t in targets}  # fmt: skip

    assert outcomes["n02"]["uncordoned"] and outcomes["n02"]["passed"]
    assert outcomes["n05"] == {**outcomes["n05"], "passed": False, "uncordoned": False,
                               "failed_checks": ["nccl_bandwidth"], "kept_cordoned": "failed nccl_bandwidth"}  # fmt: skip
    assert backend.cordoned(NODES) == {"n05"}
    steps = [r["step"] for r in node_log(lake, "seren", "n02", "run-1").records()]
    assert steps == ["validate", "uncordon"]
    assert [r["step"] for r in node_log(lake, "seren", "n05", "run-1").records()] == ["validate"]

    # The same run again: nothing measured, recorded or uncordoned twice.
    again = validate_node(lake, backend, "seren", "n02", spec, validation_settings(), False)
    assert again["skipped"].startswith("already recorded at")
    assert [r["step"] for r in node_log(lake, "seren", "n02", "run-1").records()] == ["validate", "uncordon"]
    assert len(lake.read_json("recovery/simulated/cluster=seren/state.json")["uncordoned"]) == 1
    # A later run leaves the returned node alone and validates the one still cordoned.
    assert [t["node"] for t in nodes_to_validate(lake, None, [], lambda cluster: backend)] == ["n05"]
    # Cordoned again by a person after its return: not recovery's cordon, so only a run naming it validates it.
    backend.cordon("n02", "maintenance window")
    assert [t["node"] for t in nodes_to_validate(lake, None, [], lambda cluster: backend)] == ["n05"]
    assert [t["node"] for t in nodes_to_validate(lake, "seren", ["n02"], lambda cluster: backend)] == ["n02"]


def test_a_dry_run_measures_and_only_plans_the_uncordon(lake, jobs_file, checkpoints):
    backend = recover_both_jobs(lake, jobs_file, checkpoints)
    spec = validation_spec("dry-1", validation_settings(), recovery_settings())
    outcome = validate_node(lake, backend, "seren", "n02", spec, validation_settings(), True)
    assert (
        outcome["passed"]
        and not outcome["uncordoned"]
        and outcome["planned"].startswith("would uncordon n02")
    )
    assert backend.cordoned(NODES) == {"n02", "n05"}
    validate_node(lake, backend, "seren", "n02", spec, validation_settings(), True)
    records = node_log(lake, "seren", "n02", "dry-1").records()
    assert [(r["step"], r["status"], r["dry_run"]) for r in records] == [
        ("validate", "done", True), ("uncordon", "planned", True),
    ]  # fmt: skip


def test_named_nodes_need_their_cluster_and_nodes_in_service_are_left_alone(lake, jobs_file, checkpoints):
    backend = recover_both_jobs(lake, jobs_file, checkpoints)
    with pytest.raises(InputError, match="the nodes Param needs the cluster"):
        nodes_to_validate(lake, None, ["n02"], lambda cluster: backend)
    with pytest.raises(InputError, match="node"):
        nodes_to_validate(lake, "seren", ["../n02"], lambda cluster: backend)
    named = nodes_to_validate(lake, "seren", ["n02", "n03"], lambda cluster: backend)
    assert [(t["node"], t["cordoned_by"]) for t in named] == [("n02", ["named by the run"])]
