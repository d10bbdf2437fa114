"""The all-gather check program: arguments, launch environment, its one report line, and the parser.

torch is not installed here. The check's control flow (phases, --fail, wrong data, the report, the
deadline watchdog) runs against a stand-in ``torch`` module that mimics the few calls it makes; the
real collectives (NCCL/gloo) are not exercised by these tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from acme.errors import ConfigError, InputError
from acme.recovery import allgather_check
from acme.recovery.allgather_check import (
    CHECK_MARKER,
    build_parser,
    main,
    parse_check_output,
    read_launch_env,
)
from tests.recovery_support import torchrun_command

ROOT = Path(__file__).resolve().parents[3]
ENV = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500"}


# --- arguments and launch environment ---------------------------------------------------------


def test_defaults_and_flags():
    args = build_parser().parse_args([])
    assert (args.timeout_s, args.deadline_s, args.backend, args.fail) == (60.0, None, "auto", False)
    args = build_parser().parse_args(
        ["--fail", "--backend", "gloo", "--timeout-s", "5", "--matmul-size", "64"]
    )
    assert (args.fail, args.backend, args.timeout_s, args.matmul_size) == (True, "gloo", 5.0, 64)


@pytest.mark.parametrize(
    "argv",
    [
        ["--timeout-s", "0"],
        ["--timeout-s", "soon"],
        ["--matmul-size", "-4"],
        ["--backend", "mpi"],
        ["--deadline-s", "-1"],
    ],
)
def test_bad_arguments_exit_with_usage(argv, capsys):
    with pytest.raises(SystemExit) as raised:
        build_parser().parse_args(argv)
    assert raised.value.code == 2
    assert "error" in capsys.readouterr().err


def test_launch_environment_from_torchrun_or_the_launcher():
    launch = read_launch_env({**ENV, "LOCAL_RANK": "0"})
    assert (launch.rank, launch.world_size, launch.local_rank, launch.master_addr, launch.master_port) == (
        1,
        2,
        0,
        "10.0.0.5",
        29500,
    )
    assert read_launch_env(ENV).local_rank == 0


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"RANK": ""}, "RANK not set"),
        ({"MASTER_ADDR": "", "MASTER_PORT": ""}, "MASTER_ADDR, MASTER_PORT not set"),
        ({"RANK": "2"}, "RANK=2 is not below WORLD_SIZE=2"),
        ({"RANK": "-1"}, "RANK='-1' is not a non-negative"),
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two'"),
        ({"WORLD_SIZE": "0", "RANK": "0"}, "WORLD_SIZE=0 must be at least 1"),
        ({"MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a TCP port"),
    ],
)
def test_bad_launch_environment_is_named(change, problem):
    with pytest.raises(ConfigError, match=problem):
        read_launch_env({**ENV, **change})


# --- the check without torch (this machine) ---------------------------------------------------


def report_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if CHECK_MARKER in line]


def test_without_torch_the_rank_reports_one_failed_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed, even where it is
    status = main(["--node", "node-007"], environ=ENV)
    (report,) = report_lines(capsys.readouterr().out)
    assert status == 1
    assert report["ok"] is False and "torch is not installed" in report["error"]
    assert (report["node"], report["rank"], report["world_size"]) == ("node-007", 1, 2)


def test_a_bad_environment_is_reported_on_the_line(capsys):
    status = main([], environ={"ACME_NODE_NAME": "node-003"})
    (report,) = report_lines(capsys.readouterr().out)
    assert status == 1 and report["node"] == "node-003" and report["rank"] is None
    assert "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set" in report["error"]


# --- the check's control flow, against a stand-in torch ---------------------------------------


class FakeTensor:
    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value

    def min(self):
        return self

    def max(self):
        return self

    def all(self):
        return self


class FakeDevice:
    def __init__(self, kind, index=None):
        self.type, self.index = kind, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


def fake_torch(monkeypatch, world_size=2, cuda=False, corrupt_rank=None):
    """Install a stand-in torch whose collectives act as if ``world_size`` healthy ranks took part."""
    torch = types.ModuleType("torch")
    dist = types.ModuleType("torch.distributed")
    calls: dict[str, object] = {}
    torch.float32, torch.float16 = "float32", "float16"
    torch.cuda = types.SimpleNamespace(
        is_available=lambda: cuda,
        set_device=lambda index: calls.setdefault("set_device", index),
        synchronize=lambda d=None: None,
        mem_get_info=lambda d=None: (79_000_000_000, 80_000_000_000),  # free, total bytes
    )
    torch.device = FakeDevice
    torch.ones = lambda n, device=None: FakeTensor(1.0)
    torch.full = lambda shape, value, dtype=None, device=None: FakeTensor(value)
    torch.empty_like = lambda tensor: FakeTensor(None)
    torch.randn = lambda *shape, dtype=None, device=None: FakeTensor(0.5)
    torch.matmul = lambda a, b: FakeTensor(1.0)
    torch.isfinite = lambda tensor: FakeTensor(True)

    def init_process_group(**kwargs):
        calls["init"] = kwargs

    def all_reduce(tensor):
        tensor.value *= world_size

    def all_gather(out, tensor):
        for rank, received in enumerate(out):
            received.value = float(rank + (rank == corrupt_rank))

    dist.init_process_group = init_process_group
    dist.all_reduce = all_reduce
    dist.all_gather = all_gather
    dist.destroy_process_group = lambda: calls.setdefault("destroyed", True)
    torch.distributed = dist
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    return calls


def test_a_passing_rank_reports_every_phase(monkeypatch, capsys):
    calls = fake_torch(monkeypatch)
    status = main(["--node", "node-001", "--timeout-s", "7"], environ=ENV)
    (report,) = report_lines(capsys.readouterr().out)
    assert status == 0
    assert report["ok"] is True and report["error"] == "" and report["phase"] == "done"
    assert (report["backend"], report["device"]) == ("gloo", "cpu")
    assert set(report["phases"]) == {"init_s", "connect_s", "allgather_s", "matmul_s", "shutdown_s"}
    assert report["check_s"] == pytest.approx(
        report["phases"]["allgather_s"] + report["phases"]["matmul_s"], abs=1e-5
    )
    init = calls["init"]
    assert (init["backend"], init["rank"], init["world_size"], init["init_method"]) == (
        "gloo",
        1,
        2,
        "env://",
    )
    assert init["timeout"].total_seconds() == 7
    assert calls["destroyed"] is True


def test_on_a_gpu_the_backend_is_nccl_on_the_local_device(monkeypatch, capsys):
    calls = fake_torch(monkeypatch, cuda=True)
    monkeypatch.delenv("TORCH_NCCL_BLOCKING_WAIT", raising=False)
    assert main([], environ={**ENV, "LOCAL_RANK": "0"}) == 0
    (report,) = report_lines(capsys.readouterr().out)
    assert (report["backend"], report["device"]) == ("nccl", "cuda:0")
    assert report["gpu_memory"] == {"free_gb": 79.0, "total_gb": 80.0}  # read by node validation
    assert calls["set_device"] == 0
    assert os.environ.pop("TORCH_NCCL_BLOCKING_WAIT") == "1"


def test_nccl_without_a_gpu_is_a_clear_failure(monkeypatch, capsys):
    fake_torch(monkeypatch, cuda=False)
    assert main(["--backend", "nccl"], environ=ENV) == 1
    (report,) = report_lines(capsys.readouterr().out)
    assert "nccl needs a GPU" in report["error"]


def test_fail_flag_makes_this_rank_fail_after_joining(monkeypatch, capsys):
    calls = fake_torch(monkeypatch)
    assert main(["--fail"], environ=ENV) == 1
    (report,) = report_lines(capsys.readouterr().out)
    assert "init" in calls
    assert report["error"].startswith("DeliberateFailure in phase connect: --fail given")
    assert "check_s" not in report


def test_wrong_all_gather_data_fails_the_check(monkeypatch, capsys):
    fake_torch(monkeypatch, corrupt_rank=1)
    assert main([], environ=ENV) == 1
    (report,) = report_lines(capsys.readouterr().out)
    assert "all-gather returned wrong data for rank 1" in report["error"]


def write_fake_torch_package(folder: Path, init_body: str) -> None:
    package = folder / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from types import SimpleNamespace\n"
        "cuda = SimpleNamespace(is_available=lambda: False)\n"
        "class device:\n"
        "    def __init__(self, kind, index=None):\n"
        "        self.type = kind\n"
        "    def __str__(self):\n"
        "        return self.type\n"
    )
    (package / "distributed.py").write_text(f"def init_process_group(**kwargs):\n    {init_body}\n")


def test_the_deadline_ends_a_hung_rank_with_a_report(tmp_path):
    write_fake_torch_package(tmp_path, "import time; time.sleep(60)")
    env = {**os.environ, **ENV, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'plugins'}"}
    done = subprocess.run(
        [sys.executable, "-m", "acme.recovery.allgather_check", "--deadline-s", "0.5", "--node", "node-001"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    (report,) = report_lines(done.stdout)
    assert done.returncode == allgather_check.EXIT_DEADLINE
    assert report["error"] == "deadline of 0.5 s passed during phase init"


def test_the_file_runs_alone_without_the_acme_package(tmp_path):
    """A training image may carry only this file: it must run without ``acme`` importable.

    With torch installed it runs a real one-rank gloo world on loopback and passes; without torch it
    reports exactly that (and fails), still as one JSON line."""
    import importlib.util
    import socket

    script = tmp_path / "allgather_check.py"
    shutil.copy(allgather_check.__file__, script)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # acme is importable from this venv: block it, as in a training image that only has the file.
    run_alone = (
        "import runpy, sys; sys.modules['acme'] = None; "
        f"sys.argv = [{str(script)!r}, '--node', 'node-000', '--backend', 'gloo']; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    done = subprocess.run(
        [sys.executable, "-c", run_alone], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    (report,) = report_lines(done.stdout)
    assert report["rank"] == 0
    if importlib.util.find_spec("torch") is None:
        assert done.returncode == 1, done.stderr
        assert "torch is not installed" in report["error"]
    else:
        assert done.returncode == 0, done.stderr
        assert report["ok"] is True and report["node"] == "node-000"


# --- parsing the reports of a world -----------------------------------------------------------


def report(rank, node, ok=True, check_s=2.0, world_size=2, error=""):
    fields = {
        "check": CHECK_MARKER,
        "rank": rank,
        "node": node,
        "world_size": world_size,
        "ok": ok,
        "error": error,
    }
    if ok:
        fields["check_s"] = check_s
    return json.dumps(fields)


def test_reports_of_all_ranks_among_log_noise_make_a_passing_world():
    text = "\n".join(
        [
            "W0416 12:00:01 torch/distributed/run.py: Setting OMP_NUM_THREADS",
            f"[default1]:{report(1, 'node-b', check_s=2.5)}",
            "NCCL INFO Bootstrap : Using eth0:10.0.0.6",
            '{"unrelated": "json"}',
            f"[default0]:{report(0, 'node-a', check_s=2.1)} trailing text",
        ]
    )
    result = parse_check_output(text, ["node-a", "node-b"])
    assert result.ok and result.error == ""
    assert result.nodes == ("node-a", "node-b")
    assert result.seconds == {"node-a": 2.1, "node-b": 2.5}


def test_a_missing_rank_fails_the_world_with_the_reason():
    result = parse_check_output(report(0, "node-a"), ["node-a", "node-b"])
    assert not result.ok
    assert result.error == "no report from node-b"
    assert result.seconds == {"node-a": 2.0}


def test_a_failing_rank_and_a_truncated_line():
    text = (
        report(0, "node-a", ok=False, error="DistBackendError in phase allgather: timeout")
        + "\n"
        + report(1, "node-b")[:30]
    )
    result = parse_check_output(text, ["node-a", "node-b"])
    assert not result.ok
    assert (
        result.error == "node-a (rank 0): DistBackendError in phase allgather: timeout; no report from node-b"
    )
    assert result.seconds == {}


def test_reports_are_matched_by_node_name_before_rank():
    text = report(0, "node-b", check_s=3.0) + "\n" + report(1, "node-a", check_s=1.0)
    result = parse_check_output(text, ["node-a", "node-b"])
    assert result.ok and result.seconds == {"node-a": 1.0, "node-b": 3.0}
    by_rank = parse_check_output(
        report(0, "host-x", check_s=3.0) + "\n" + report(1, "host-y"), ["node-a", "node-b"]
    )
    assert by_rank.ok and by_rank.seconds == {"node-a": 3.0, "node-b": 2.0}


def test_a_restarted_rank_counts_its_last_report():
    text = "\n".join(
        [report(0, "node-a", ok=False, error="first try"), report(0, "node-a"), report(1, "node-b")]
    )
    assert parse_check_output(text, ["node-a", "node-b"]).ok


def test_reports_from_another_world_fail_this_one():
    text = "\n".join(
        [
            report(0, "node-a", world_size=3),
            report(1, "node-b", world_size=3),
            report(2, "node-c", world_size=3),
        ]
    )
    result = parse_check_output(text, ["node-a", "node-b"])
    assert not result.ok
    assert "rank 2 is not part of this 2-node world" in result.error
    assert "node-a reports a world of 3 ranks" in result.error


def test_no_output_at_all_and_no_nodes():
    assert parse_check_output("", ["node-a"]).error == "no report from node-a"
    with pytest.raises(InputError, match="no nodes"):
        parse_check_output("", [])


def test_what_main_prints_parses_back(monkeypatch, capsys):
    fake_torch(monkeypatch)
    for rank, node in enumerate(["node-a", "node-b"]):
        main(["--node", node], environ={**ENV, "RANK": str(rank)})
    result = parse_check_output(capsys.readouterr().out, ["node-a", "node-b"])
    assert result.ok and set(result.seconds) == {"node-a", "node-b"}


def test_torchrun_command_for_one_node_of_a_world():
    command = torchrun_command(1, 2, "node-a:29400", ["--timeout-s", "30"], script="/opt/check.py")
    assert command == [
        "torchrun",
        "--nnodes=2",
        "--nproc-per-node=1",
        "--node-rank=1",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=node-a:29400",
        "--max-restarts=0",
        "/opt/check.py",
        "--timeout-s",
        "30",
    ]
    with pytest.raises(InputError, match="outside a world"):
        torchrun_command(2, 2, "node-a:29400")
    with pytest.raises(InputError, match="HOST:PORT"):
        torchrun_command(0, 2, "node-a")
