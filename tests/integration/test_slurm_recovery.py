"""Recovery through a real Slurm 22.05 (Debian's slurmctld, slurmd, munge) on one machine, on loopback.

The fixture installs the packages when missing, starts munged on its own socket, a slurmctld and one
slurmd per node name (five nodes ``acme-n1..5``, all at 127.0.0.1 on their own ports), and stops
every process it started. A training job is submitted on four nodes and fails; recovery then runs the
all-gather check worlds with ``srun -w`` (gloo on CPU; node ``acme-n3`` made to fail through the
check's ``--fail`` switch), drains the faulty node with ``scontrol update … State=DRAIN`` and
resubmits the job with ``sbatch --exclude`` and the resume variables, which the new job writes out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from acme.lake import Lake
from acme.recovery.actions import ActionLog
from acme.recovery.recover import RecoveryRequest
from acme.recovery.slurm_backend import SlurmBackend, SlurmCommandError, parse_oneliner
from acme.recovery.synth_checkpoints import write_checkpoint
from acme.settings import recovery as recovery_settings
from tests.debian_packages import ensure_commands
from tests.integration.conftest import free_port
from tests.recovery_support import recover

pytestmark = pytest.mark.integration

NODES = [f"acme-n{i}" for i in range(1, 6)]
JOB_NODES = NODES[:4]
DAEMONS = ["slurmctld", "slurmd", "munged", "scontrol", "srun", "sbatch"]


def ensure_slurm() -> None:
    ensure_commands(DAEMONS, ["slurmctld", "slurmd", "slurm-client", "munge"])


def slurm_conf(work: Path, hostname: str) -> str:
    ports = {name: free_port() for name in ["ctld", "d", *NODES]}
    nodes = "\n".join(
        f"NodeName={n} NodeHostname={hostname} NodeAddr=127.0.0.1 Port={ports[n]} CPUs=1 State=UNKNOWN"
        for n in NODES
    )
    return f"""ClusterName=acmetest
SlurmctldHost={hostname}(127.0.0.1)
SlurmctldPort={ports["ctld"]}
SlurmdPort={ports["d"]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={work}/munge/socket
CredType=cred/munge
StateSaveLocation={work}/state
SlurmdSpoolDir={work}/spool-%n
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd-%n.pid
SlurmctldLogFile={work}/slurmctld.log
SlurmdLogFile={work}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
MinJobAge=600
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=10 State=UP
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    ensure_slurm()
    work = tmp_path_factory.mktemp("slurm")
    (work / "munge").mkdir()
    (work / "state").mkdir()
    for node in NODES:
        (work / f"spool-{node}").mkdir()
    key = work / "munge" / "key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    hostname = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    conf = work / "slurm.conf"
    conf.write_text(slurm_conf(work, hostname))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    processes: list[subprocess.Popen] = []
    logs = (work / "daemons.log").open("w")

    def start(command: list[str]) -> None:
        processes.append(
            subprocess.Popen(command, env=env, stdout=logs, stderr=subprocess.STDOUT, start_new_session=True)
        )

    try:
        start(["munged", "-F", "--force", f"--socket={work}/munge/socket", f"--key-file={key}",
               f"--pid-file={work}/munge/pid", f"--seed-file={work}/munge/seed", f"--log-file={work}/munge/log"])  # fmt: skip
        _wait_for(lambda: (work / "munge" / "socket").exists(), "munged socket")
        start(["slurmctld", "-D", "-c", "-f", str(conf)])
        _wait_for(lambda: _run(["scontrol", "ping"], env).returncode == 0, "slurmctld")
        for node in NODES:
            start(["slurmd", "-D", "-N", node, "-f", str(conf)])
        _wait_for(lambda: _idle_nodes(env) == set(NODES), "five idle nodes")
        yield {"env": env, "work": work, "conf": conf}
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in reversed(processes):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()
        logs.close()


def _run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)


def _idle_nodes(env: dict) -> set[str]:
    done = _run(["sinfo", "--noheader", "--Node", "--format=%N %t"], env)
    return {line.split()[0] for line in done.stdout.splitlines() if line.split()[1:] == ["idle"]}


def _wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _job(job_id: str, env: dict) -> dict[str, str]:
    return parse_oneliner(_run(["scontrol", "show", "job", "--oneliner", job_id], env).stdout)


@pytest.fixture
def slurm_env(slurm, monkeypatch, tmp_path):
    """The recovery settings for this cluster; ``acme-n3`` fails its checks (the check's ``--fail``)."""
    for key, value in slurm["env"].items():
        if key == "SLURM_CONF":
            monkeypatch.setenv(key, value)
    wrapper = tmp_path / "python-with-a-faulty-node"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$ACME_NODE_NAME" = "acme-n3" ]; then exec {sys.executable} "$@" --fail; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("ACME_RECOVERY_BACKEND", "slurm")
    monkeypatch.setenv("ACME_RECOVERY_SLURM_PYTHON", str(wrapper))
    monkeypatch.setenv("ACME_RECOVERY_CHECK_TIMEOUT_S", "10")
    monkeypatch.setenv(
        "ACME_RECOVERY_CHECK_ARGS", "--backend gloo --allgather-mb 1 --matmul-size 128 --matmul-repeats 2"
    )
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return slurm


def submit_crashing_job(slurm: dict, out: Path) -> str:
    script = slurm["work"] / "train.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "job=$SLURM_JOB_ID nodes=$SLURM_JOB_NODELIST resume=$ACME_RESUME_FROM step=$ACME_RESUME_STEP '
        f'skip=$ACME_SKIP_BATCHES recovery=$ACME_RECOVERY_ID" > {out}/job-$SLURM_JOB_ID.txt\n'
        'test -n "$ACME_RESUME_FROM" || exit 1\n'
    )
    done = _run(["sbatch", "--parsable", "--job-name=llm-train", "--nodes=4", "-w", ",".join(JOB_NODES),
                 f"--chdir={slurm['work']}", str(script)], slurm["env"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    _wait_for(lambda: _job(job_id, slurm["env"]).get("JobState") == "FAILED", f"job {job_id} to fail")
    _wait_for(lambda: _idle_nodes(slurm["env"]) >= set(JOB_NODES), "the job's nodes to be free")
    return job_id


def test_a_real_slurm_recovery_drains_the_faulty_node_and_resubmits_without_it(slurm_env, tmp_path):
    env = slurm_env["env"]
    out = tmp_path / "out"
    out.mkdir()
    job_id = submit_crashing_job(slurm_env, out)
    checkpoints = tmp_path / "ckpt"
    write_checkpoint(checkpoints, 100)
    lake = Lake(str(tmp_path / "lake"))
    params = {
        "cluster": "slurmtest",
        "job_id": job_id,
        "nodes": JOB_NODES,
        "checkpoint_uri": str(checkpoints),
    }
    request = RecoveryRequest.from_params(params, "incident-42", "manual__1", datetime.now(UTC))
    backend = SlurmBackend(recovery_settings())

    outcome = recover(lake, request, backend, recovery_settings())

    assert outcome["verdict"]["faulty"] == ["acme-n3"], outcome["verdict"]
    node = parse_oneliner(_run(["scontrol", "show", "node", "--oneliner", "acme-n3"], env).stdout)
    assert "DRAIN" in node["State"]
    reason = _run(["sinfo", "--noheader", "--Node", "--nodes=acme-n3", "--format=%E"], env).stdout
    assert "acme recovery incident-42" in reason
    new_id = outcome["restart"]["new_job_id"]
    assert new_id != job_id
    new_job = _job(new_id, env)
    assert new_job["ExcNodeList"] == "acme-n3" and new_job["Comment"] == "acme-recovery:incident-42"
    _wait_for(lambda: (out / f"job-{new_id}.txt").exists(), "the restarted job to run")
    written = (out / f"job-{new_id}.txt").read_text()
    assert "acme-n3" not in written.split("nodes=")[1].split()[0]
    assert f"resume={checkpoints}/step_100 step=100 skip= recovery=incident-42" in written

    records = ActionLog(lake, "slurmtest", job_id, "incident-42").records()
    rounds = [r["step"] for r in records if r["step"].startswith("check")]
    assert rounds.count("check_round1") == 2 and rounds.count("check_round2") == 2
    failed_world = next(r for r in records if r["step"] == "check_round1" and not r["result"]["ok"])
    assert "acme-n3 (rank 0): DeliberateFailure" in failed_world["result"]["error"]

    # Re-running the same recovery neither drains nor resubmits again (slurmctld keeps ended jobs
    # for MinJobAge=600 s, so every job ever submitted here is listed).
    again = recover(lake, request, backend, recovery_settings())
    assert "already restarted" in again["restart"]["skipped"]
    all_jobs = _run(["scontrol", "show", "job", "--oneliner"], env).stdout.splitlines()
    assert sum("Comment=acme-recovery:incident-42" in line for line in all_jobs) == 1
    assert [r["step"] for r in ActionLog(lake, "slurmtest", job_id, "incident-42").records()].count(
        "cordon"
    ) == 1


def test_unknown_jobs_and_nodes_and_a_failing_scontrol_are_clear_errors(slurm_env):
    from acme.recovery.backend import UnknownJobError

    backend = SlurmBackend(recovery_settings())
    with pytest.raises(UnknownJobError, match="job 999999: Slurm does not know it"):
        backend.describe_job("999999")
    with pytest.raises(SlurmCommandError, match="scontrol show node"):
        backend.cordon("acme-n9", "test")  # not a node of this cluster: scontrol fails, nothing drained
    assert (
        "DRAIN"
        not in parse_oneliner(
            _run(["scontrol", "show", "node", "--oneliner", "acme-n5"], slurm_env["env"]).stdout
        )["State"]
    )
