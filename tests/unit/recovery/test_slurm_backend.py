"""The Slurm commands recovery runs: argument lists only, every outside string checked first.

The real commands run against a real Slurm in tests/integration/test_slurm_recovery.py; here a fake
``scontrol`` (a script on PATH) shows that a failing scontrol is an error and drains nothing.
"""

from __future__ import annotations

import pytest

from acme.errors import InputError
from acme.recovery.slurm_backend import (
    SlurmBackend,
    SlurmCommandError,
    check_world_args,
    drain_args,
    drain_reason,
    node_command_args,
    resubmit_args,
    resume_args,
    show_job_args,
)
from acme.settings import recovery as recovery_settings


def test_drain_is_one_scontrol_update_with_a_cleaned_reason():
    assert drain_args("gpu-a01", "failed the check 'twice'; $(reboot)") == [
        "scontrol", "update", "NodeName=gpu-a01", "State=DRAIN", "Reason=failed the check _twice_; _(reboot)",
    ]  # fmt: skip
    assert len(drain_reason("x" * 500)) == 200


def test_the_check_world_is_pinned_with_srun_w_and_rank_0_is_the_rendezvous():
    args = check_world_args(
        ["n1", "n2", "n3"], "/opt/acme/check.py", 30, partition="gpu", master_addr="10.0.0.7"
    )
    assert args[:6] == ["srun", "--nodes=3", "--ntasks=3", "--ntasks-per-node=1", "-w", "n1,n2,n3"]
    assert "--export=ALL,MASTER_ADDR=10.0.0.7,MASTER_PORT=29500" in args
    assert "--immediate=60" in args and "--partition=gpu" in args
    assert args[-3:] == ["/opt/acme/check.py", "--timeout-s", "30"]


def test_resubmission_excludes_drained_nodes_and_carries_the_recovery_id():
    args = resubmit_args("llm-train", 4, ["n3"], "incident-7", partition="gpu", workdir="/home/alice/run")
    assert args == [
        "sbatch", "--parsable", "--job-name=llm-train", "--nodes=4", "--comment=acme-recovery:incident-7",
        "--export=ALL", "--exclude=n3", "--partition=gpu", "--chdir=/home/alice/run",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("build", "what"),
    [
        (lambda: show_job_args("123; rm -rf /"), "job id"),
        (lambda: show_job_args("--help"), "job id"),
        (lambda: drain_args("-n1", "x"), "node name"),
        (lambda: drain_args("n1 n2", "x"), "node name"),
        (lambda: check_world_args(["n1", "$(id)"], "/c.py", 10), "node name"),
        (lambda: check_world_args(["n1"], "/c.py; id", 10), "check script path"),
        (lambda: check_world_args([], "/c.py", 10), "node list"),
        (lambda: resubmit_args("job", 2, ["n1"], "id", workdir="/tmp/../etc"), "working directory"),
        (lambda: resubmit_args("job", 2, ["n1"], "id;x"), "recovery id"),
        (lambda: resubmit_args("job", 0, [], "id"), "node count"),
    ],
)
def test_untrusted_strings_are_refused_before_any_command_runs(build, what):
    with pytest.raises(InputError, match=what):
        build()


@pytest.fixture
def failing_scontrol(tmp_path, monkeypatch):
    """A fake scontrol that fails like one that cannot reach slurmctld, and logs its calls."""
    calls = tmp_path / "calls"
    script = tmp_path / "scontrol"
    script.write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\necho "slurm_load_node error: Unable to contact slurm controller" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    return calls


def test_a_failing_scontrol_is_an_error_and_nothing_is_drained_fake(failing_scontrol):
    backend = SlurmBackend(recovery_settings())
    with pytest.raises(SlurmCommandError, match="Unable to contact slurm controller"):
        backend.cordon("n3", "failed twice")
    with pytest.raises(SlurmCommandError, match="scontrol show job 42 exited 1"):
        backend.describe_job("42")
    calls = failing_scontrol.read_text().splitlines()
    assert calls == ["show node --oneliner n3", "show job --oneliner 42"]  # no "update" was attempted


def test_validation_resumes_with_scontrol_and_runs_on_the_node_as_one_quoted_line():
    assert resume_args("gpu-a01") == ["scontrol", "update", "NodeName=gpu-a01", "State=RESUME"]
    args = node_command_args(
        ["ssh", "-o", "BatchMode=yes", "{node}"], "gpu-a01", ["sh", "-c", "echo $1; id", "sh", "x y"]
    )
    assert args == ["ssh", "-o", "BatchMode=yes", "gpu-a01", "sh -c 'echo $1; id' sh 'x y'"]
    with pytest.raises(InputError, match="node name"):
        node_command_args(["ssh", "{node}"], "-oProxyCommand=id", ["true"])
    with pytest.raises(InputError, match="ACME_VALIDATION_NODE_COMMAND"):
        node_command_args([], "gpu-a01", ["true"])
