"""The all-gather check program for real: torch.distributed with gloo on CPU, two ranks on 127.0.0.1.

Each rank is started by torchrun exactly as a node of a world would be
(``tests.recovery_support.torchrun_command``, c10d rendezvous on loopback); the ranks' output is parsed
with ``parse_check_output`` into the world's result.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from acme.recovery import allgather_check
from acme.recovery.allgather_check import parse_check_output
from tests.integration.conftest import free_port
from tests.recovery_support import torchrun_command

pytestmark = pytest.mark.integration

TORCHRUN = Path(sys.executable).with_name("torchrun")
SMALL = [
    "--backend",
    "gloo",
    "--timeout-s",
    "20",
    "--allgather-mb",
    "1",
    "--matmul-size",
    "128",
    "--matmul-repeats",
    "2",
]


def run_world(nodes: list[str], failing: set[str] = frozenset()) -> str:
    """Start one torchrun per node at once and return their combined output."""
    endpoint = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    processes = []
    for rank, node in enumerate(nodes):
        extra = ["--fail"] if node in failing else []
        command = torchrun_command(
            rank, len(nodes), endpoint, [*SMALL, *extra], script=allgather_check.__file__
        )
        command[0] = str(TORCHRUN)
        # The node name goes by environment: torchrun's own parser rejects the check's "--node" as an
        # ambiguous abbreviation of its "--node-rank", even after the script name.
        node_env = {**env, "ACME_NODE_NAME": node}
        processes.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=node_env)
        )
    output = []
    try:
        for process in processes:
            out, _ = process.communicate(timeout=180)
            output.append(out)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return "\n".join(output)


def test_two_healthy_ranks_pass_with_their_timings():
    result = parse_check_output(run_world(["cpu-a", "cpu-b"]), ["cpu-a", "cpu-b"])
    assert result.ok, result.error
    assert set(result.seconds) == {"cpu-a", "cpu-b"}
    assert all(0 < seconds < 60 for seconds in result.seconds.values())


def test_a_rank_made_to_fail_fails_the_world_and_says_which():
    output = run_world(["cpu-a", "cpu-b"], failing={"cpu-b"})
    result = parse_check_output(output, ["cpu-a", "cpu-b"])
    assert not result.ok
    assert "cpu-b (rank 1): DeliberateFailure in phase connect: --fail given" in result.error
    assert "cpu-b" not in result.seconds
