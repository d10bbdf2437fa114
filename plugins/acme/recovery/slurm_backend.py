"""Recovery on Slurm: the job's nodes, check worlds pinned with ``srun -w``, drain, and resubmission.

Every command is an argument list run without a shell; every string that comes from outside (job
ids, node names, user names, paths, reasons) is checked against a strict pattern first, so a
crafted job id or node name cannot become an option or a second command. ``ACME_RECOVERY_SLURM_
COMMAND_PREFIX`` (e.g. ``ssh slurm-login``) runs the commands on a login node.

- ``describe_job``: ``scontrol show job --oneliner <id>`` (node list expanded with ``scontrol show
  hostnames``), and the batch script with ``scontrol write batch_script <id> -``;
- a check world: ``srun --nodes=N --ntasks=N --ntasks-per-node=1 -w <nodes> … allgather_check.py``;
  rank 0's node is the rendezvous address; the ranks' reports are read from srun's output;
- taking a node out: ``scontrol update NodeName=<node> State=DRAIN Reason=<reason>``;
- validating a drained node (``acme.recovery.validation``): a drained node takes no Slurm job, so the
  self-test and ``dcgmi diag`` (``acme.recovery.node_selftest.node_program``) run on it through
  ``ACME_VALIDATION_NODE_COMMAND`` (default ``ssh -o BatchMode=yes {node}``: one command line, quoted);
  a node still running a job (``DRAINING``) is not validated; returning it:
  ``scontrol update NodeName=<node> State=RESUME`` (only when it is drained);
- the restart: ``sbatch --parsable --exclude=<drained> --nodes=N --comment=acme-recovery:<id>``
  with the original batch script on standard input and the resume variables
  (``RestartPlan.environment``) in its environment (``--export=ALL``). Before submitting, ``squeue``
  is asked for a job carrying the same comment, so a repeated restart submits nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from acme.errors import AcmeError, InputError
from acme.recovery.allgather_check import parse_check_output
from acme.recovery.backend import JobInfo, RestartPlan, UnknownJobError
from acme.recovery.node_selftest import node_program, read_node_output, unmeasured

if TYPE_CHECKING:
    from acme.recovery.localize import WorldResult
    from acme.recovery.node_selftest import NodeMeasurements, ValidationSpec
    from acme.settings import RecoverySettings

JOB_ID = re.compile(r"^[0-9]{1,12}(_[0-9]{1,9})?$")
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
USER_NAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
PATH = re.compile(r"^[A-Za-z0-9_./:@+=-]{1,1024}$")
RECOVERY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
REASON_CHARS = re.compile(r"[^A-Za-z0-9 .,:;_()/+-]")
CHECK_PORT = 29500

# Slurm sets SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID per task; the check reads torch's names.
# A constant script: every variable part is a positional argument ("$@"), never shell text.
_RANK_FROM_SLURM = (
    "export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID "
    'ACME_NODE_NAME=$SLURMD_NODENAME; exec "$@"'
)


class SlurmCommandError(AcmeError):
    """A Slurm command failed or could not run: nothing was decided on its output."""


def checked(value: Any, pattern: re.Pattern[str], what: str) -> str:
    if not isinstance(value, str) or not pattern.match(value) or ".." in value.split("/"):
        raise InputError(what, f"{value!r} is not a valid {what} (allowed: {pattern.pattern})")
    return value


def checked_nodes(nodes: Sequence[str]) -> list[str]:
    if isinstance(nodes, str) or not nodes:
        raise InputError("node list", "expected a non-empty list of node names")
    return [checked(node, NODE_NAME, "node name") for node in nodes]


def drain_reason(reason: str) -> str:
    """The reason as Slurm stores it: printable, no quotes or shell characters, at most 200 characters."""
    cleaned = REASON_CHARS.sub("_", reason).strip() or "acme recovery"
    return cleaned[:200]


def parse_oneliner(text: str) -> dict[str, str]:
    """``Key=Value`` pairs of a ``scontrol show … --oneliner`` line (values without spaces)."""
    fields: dict[str, str] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


# --- the argument lists (pure, tested on their own) ----------------------------------------------


def show_job_args(job_id: str) -> list[str]:
    return ["scontrol", "show", "job", "--oneliner", checked(job_id, JOB_ID, "job id")]


def batch_script_args(job_id: str) -> list[str]:
    return ["scontrol", "write", "batch_script", checked(job_id, JOB_ID, "job id"), "-"]


def hostnames_args(node_list: str) -> list[str]:
    if not re.fullmatch(r"[A-Za-z0-9._,\[\]-]{1,4096}", node_list):
        raise InputError("node list", f"{node_list!r} is not a Slurm node list expression")
    return ["scontrol", "show", "hostnames", node_list]


def show_node_args(node: str) -> list[str]:
    return ["scontrol", "show", "node", "--oneliner", checked(node, NODE_NAME, "node name")]


def drain_args(node: str, reason: str) -> list[str]:
    node = checked(node, NODE_NAME, "node name")
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={drain_reason(reason)}"]


def resume_args(node: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={checked(node, NODE_NAME, 'node name')}", "State=RESUME"]


def node_command_args(node_command: Sequence[str], node: str, program: Sequence[str]) -> list[str]:
    """``program`` run on ``node`` through the node command (``{node}`` filled in), as one quoted command
    line: what ``ssh host 'line'`` hands to the node's shell."""
    import shlex

    node = checked(node, NODE_NAME, "node name")
    if not node_command:
        raise InputError(
            "ACME_VALIDATION_NODE_COMMAND", "is empty: it must say how to run a command on a node"
        )
    return [*(part.replace("{node}", node) for part in node_command), shlex.join(program)]


def check_world_args(
    world: Sequence[str],
    script: str,
    timeout_s: float,
    partition: str | None = None,
    python: str = "python3",
    master_addr: str | None = None,
    check_args: Sequence[str] = (),
) -> list[str]:
    """``srun`` running the check once per node of ``world`` (one task per node, pinned with ``-w``).

    ``master_addr`` is rank 0's address (its Slurm ``NodeAddr``; default its node name).
    """
    nodes = checked_nodes(world)
    master = checked(master_addr or nodes[0], NODE_NAME, "rank 0 address")
    script = checked(script, PATH, "check script path")
    python = checked(python, PATH, "python path")
    args = [
        "srun",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        "-w",
        ",".join(nodes),
        "--job-name=acme-allgather-check",
        f"--time={max(1, int(timeout_s * 3 + 30) // 60 + 1)}",
        "--kill-on-bad-exit=0",
        # Fail instead of queueing when a node is busy, down or drained: waiting is not a verdict.
        "--immediate=60",
        f"--export=ALL,MASTER_ADDR={master},MASTER_PORT={CHECK_PORT}",
    ]
    if partition:
        args.append(f"--partition={checked(partition, NODE_NAME, 'partition')}")
    extra = [checked(arg, PATH, "check argument") for arg in check_args]
    return [
        *args,
        "sh",
        "-c",
        _RANK_FROM_SLURM,
        "sh",
        python,
        script,
        "--timeout-s",
        f"{timeout_s:g}",
        *extra,
    ]


def resubmit_args(
    job_name: str,
    node_count: int,
    exclude_nodes: Sequence[str],
    recovery_id: str,
    partition: str | None = None,
    workdir: str | None = None,
) -> list[str]:
    """``sbatch`` resubmitting the job (script on standard input) away from ``exclude_nodes``."""
    if isinstance(node_count, bool) or not isinstance(node_count, int) or node_count < 1:
        raise InputError("node count", f"{node_count!r} must be a positive whole number")
    args = [
        "sbatch",
        "--parsable",
        f"--job-name={checked(job_name, NODE_NAME, 'job name')}",
        f"--nodes={node_count}",
        f"--comment=acme-recovery:{checked(recovery_id, RECOVERY_ID, 'recovery id')}",
        "--export=ALL",
    ]
    if exclude_nodes:
        args.append(f"--exclude={','.join(checked_nodes(exclude_nodes))}")
    if partition:
        args.append(f"--partition={checked(partition, NODE_NAME, 'partition')}")
    if workdir:
        args.append(f"--chdir={checked(workdir, PATH, 'working directory')}")
    return args


def find_resubmitted_args(user: str, job_name: str) -> list[str]:
    return [
        "squeue",
        "--noheader",
        "--format=%i|%k",
        f"--user={checked(user, USER_NAME, 'user name')}",
        f"--name={checked(job_name, NODE_NAME, 'job name')}",
    ]


# --- the backend --------------------------------------------------------------------------------


class SlurmBackend:
    """Checks, drains and resubmissions through the Slurm commands (module docstring)."""

    name = "slurm"

    def __init__(self, settings: RecoverySettings):
        self.settings = settings

    def _run(
        self,
        args: list[str],
        stdin: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess:
        command = [*self.settings.slurm_command_prefix, *args]
        try:
            return subprocess.run(
                command,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=None if env is None else {**os.environ, **env},
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmCommandError(f"{' '.join(command[:4])}: could not run: {exc}") from exc

    def _checked_run(self, args: list[str], **kwargs: Any) -> str:
        done = self._run(args, **kwargs)
        if done.returncode != 0:
            raise SlurmCommandError(
                f"{' '.join(args[:4])} exited {done.returncode}: {(done.stderr or done.stdout).strip()[:500]}"
            )
        return done.stdout

    def describe_job(self, job_id: str) -> JobInfo:
        done = self._run(show_job_args(job_id))
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip()
            if "invalid job id" in message.lower():
                raise UnknownJobError(f"job {job_id}", f"Slurm does not know it ({message})")
            raise SlurmCommandError(f"scontrol show job {job_id} exited {done.returncode}: {message[:500]}")
        fields = parse_oneliner(done.stdout)
        node_list = fields.get("NodeList", "")
        if not node_list or node_list == "(null)":
            raise InputError(f"job {job_id}", "Slurm lists no nodes for it (it never started)")
        nodes = checked_nodes(self._checked_run(hostnames_args(node_list)).split())
        user = fields.get("UserId", "").split("(")[0]
        script = self._checked_run(batch_script_args(job_id))
        return JobInfo(
            job_id,
            tuple(nodes),
            {
                "job_name": fields.get("JobName", f"job-{job_id}"),
                "user": user,
                "partition": fields.get("Partition") or None,
                "workdir": fields.get("WorkDir") or None,
                "num_nodes": len(nodes),
                "batch_script": script,
            },
        )

    def node_address(self, node: str) -> str:
        """Where Slurm reaches ``node`` (``NodeAddr``): rank 0 of a check world listens there."""
        fields = parse_oneliner(self._checked_run(show_node_args(node)))
        return fields.get("NodeAddr") or node

    def run_world(self, world: list[str], round_number: int, check_id: str) -> WorldResult:
        args = check_world_args(
            world,
            self.settings.slurm_check_script,
            self.settings.check_timeout_s,
            self.settings.slurm_partition,
            self.settings.slurm_python,
            self.node_address(checked_nodes(world)[0]),
            self.settings.check_args,
        )
        done = self._run(args, timeout=self.settings.check_timeout_s * 3 + 120)
        result = parse_check_output(done.stdout, world)
        if not result.ok and not any(node in done.stdout for node in world) and done.returncode != 0:
            # srun itself failed (no allocation): not evidence against the nodes.
            raise SlurmCommandError(
                f"srun of world {world} exited {done.returncode}: {done.stderr.strip()[:500]}"
            )
        return result

    def cordoned(self, nodes: Sequence[str]) -> set[str]:
        drained = set()
        for node in checked_nodes(nodes):
            state = parse_oneliner(self._checked_run(show_node_args(node))).get("State", "")
            if "DRAIN" in state.upper():
                drained.add(node)
        return drained

    def cordon(self, node: str, reason: str) -> dict[str, Any]:
        if node in self.cordoned([node]):
            return {"node": node, "already_cordoned": True, "backend": self.name}
        args = drain_args(node, reason)
        self._checked_run(args)
        return {"node": node, "already_cordoned": False, "backend": self.name, "command": args}

    def run_validation(self, node: str, spec: ValidationSpec) -> NodeMeasurements:
        from acme.settings import validation as validation_settings

        state = parse_oneliner(self._checked_run(show_node_args(node))).get("State", "")
        if any(busy in state.upper() for busy in ("ALLOC", "MIX", "COMPLETING")):
            return unmeasured(node, self.name, f"node still runs a job (State={state}): validated once idle")
        program = node_program(spec, node, self.settings.slurm_python, self.settings.slurm_check_script)
        args = node_command_args(validation_settings().node_command, node, program)
        limit = spec.timeout_s * 3 + 60 + (3600 if spec.dcgm_level else 0)
        done = self._run(args, timeout=limit)
        measured = read_node_output(done.stdout + done.stderr, node, self.name, spec.dcgm_level)
        if measured.problem:
            return unmeasured(node, self.name, f"{measured.problem} (exit {done.returncode})")
        return measured

    def uncordon(self, node: str, reason: str) -> dict[str, Any]:
        if node not in self.cordoned([node]):
            return {"node": node, "already_uncordoned": True, "backend": self.name}
        args = resume_args(node)
        self._checked_run(args)
        return {"node": node, "already_uncordoned": False, "backend": self.name, "command": args}

    def restart(self, job: JobInfo, plan: RestartPlan) -> dict[str, Any]:
        spec = job.spec
        marker = f"acme-recovery:{plan.recovery_id}"
        if spec.get("user"):
            listed = self._checked_run(find_resubmitted_args(spec["user"], spec["job_name"]))
            for line in listed.splitlines():
                job_id, _, comment = line.strip().partition("|")
                if comment.strip() == marker:
                    return {"backend": self.name, "new_job_id": job_id, "already_submitted": True}
        args = resubmit_args(
            spec["job_name"],
            int(spec["num_nodes"]),
            plan.exclude_nodes,
            plan.recovery_id,
            spec.get("partition"),
            spec.get("workdir"),
        )
        environment = {
            key: checked(value, PATH, key) if value else ""
            for key, value in plan.environment().items()
            if key != "ACME_SKIP_BATCHES"
        }
        environment["ACME_SKIP_BATCHES"] = plan.skip_batches_text()
        output = self._checked_run(args, stdin=spec["batch_script"], env=environment)
        new_id = output.strip().split(";")[0]
        checked(new_id, JOB_ID, "job id sbatch printed")
        return {"backend": self.name, "new_job_id": new_id, "already_submitted": False, "command": args}
