"""The check run on every node of one world: a short torch.distributed all-gather plus a matmul.

Each rank prints ONE JSON line (marked ``"check": "acme-allgather-check"``) with its rank, the world
size, the backend, per-phase timings and ok/error, then exits 0 when the check passed and 1 when it
failed. ``parse_check_output`` turns the lines of all ranks into the world's ``WorldResult`` for
``acme.recovery.localize``.

Run one process per node, with torchrun::

    torchrun --nnodes 2 --nproc-per-node 1 --node-rank R --rdzv-backend c10d \\
        --rdzv-endpoint HOST:29400 allgather_check.py --timeout-s 60

or with the launcher's environment (a Slurm step or a pod per node)::

    MASTER_ADDR=HOST MASTER_PORT=29500 RANK=R WORLD_SIZE=2 python allgather_check.py

NCCL on GPUs, gloo on CPU (``--backend`` overrides). ``--timeout-s`` bounds the rendezvous and each
collective; a watchdog ends the process with a report after ``--deadline-s`` whatever hangs (NCCL
does not always honour its timeout). ``--fail`` makes this rank fail on purpose after joining, which
is how tests and drills make a world fail. torch is imported inside ``main`` only: this module is
imported where torch is absent (the parser runs in Airflow), and the file runs on its own when
copied alone into a training image.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

try:
    from acme.errors import ConfigError, InputError
except ImportError:  # copied alone into a training image without the acme package

    class ConfigError(Exception):  # type: ignore[no-redef]
        """A launch setting is missing or invalid."""

    class InputError(Exception):  # type: ignore[no-redef]
        def __init__(self, source: str, problem: str):
            super().__init__(f"{source}: {problem}")


if TYPE_CHECKING:
    from acme.recovery.localize import WorldResult

CHECK_MARKER = "acme-allgather-check"
"""Value of the ``check`` key that tells the check's report lines from the rest of a log."""

EXIT_FAILED = 1
EXIT_DEADLINE = 3


class DeliberateFailure(RuntimeError):
    """Raised on a rank started with ``--fail``."""


@dataclass(frozen=True)
class LaunchEnv:
    """Where this rank sits in its world, from the variables torchrun or the launcher sets."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="allgather_check", description="all-gather + matmul check of one world; prints one JSON line"
    )
    parser.add_argument(
        "--timeout-s", type=_positive_float, default=60.0, help="rendezvous and collective timeout"
    )
    parser.add_argument(
        "--deadline-s",
        type=_positive_float,
        help="end the process with a report after this long, whatever hangs (default 3 x timeout + 30)",
    )
    parser.add_argument("--backend", choices=["auto", "nccl", "gloo"], default="auto")
    parser.add_argument("--allgather-mb", type=_positive_float, default=16.0, help="data each rank sends")
    parser.add_argument("--matmul-size", type=_positive_int, default=2048, help="side of the square matrices")
    parser.add_argument("--matmul-repeats", type=_positive_int, default=10)
    parser.add_argument(
        "--node", help="this node's name in the report (default $ACME_NODE_NAME, $NODE_NAME or the hostname)"
    )
    parser.add_argument("--fail", action="store_true", help="make this rank fail on purpose (tests, drills)")
    return parser


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive whole number")
    return int(text)


def read_launch_env(environ: Mapping[str, str]) -> LaunchEnv:
    """Rank, world size and rendezvous address from ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``PORT``."""
    missing = [name for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if not environ.get(name)]
    if missing:
        raise ConfigError(
            f"{', '.join(missing)} not set: run under torchrun or set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT"
        )

    def whole(name: str, default: str | None = None) -> int:
        raw = environ.get(name, default) or ""
        if not raw.strip().isdigit():
            raise ConfigError(f"{name}={raw!r} is not a non-negative whole number")
        return int(raw)

    launch = LaunchEnv(
        rank=whole("RANK"),
        world_size=whole("WORLD_SIZE"),
        local_rank=whole("LOCAL_RANK", "0"),
        master_addr=environ["MASTER_ADDR"].strip(),
        master_port=whole("MASTER_PORT"),
    )
    if launch.world_size < 1:
        raise ConfigError(f"WORLD_SIZE={launch.world_size} must be at least 1")
    if launch.rank >= launch.world_size:
        raise ConfigError(f"RANK={launch.rank} is not below WORLD_SIZE={launch.world_size}")
    if not 1 <= launch.master_port <= 65535:
        raise ConfigError(f"MASTER_PORT={launch.master_port} is not a TCP port")
    return launch


def default_node_name(environ: Mapping[str, str]) -> str:
    return environ.get("ACME_NODE_NAME") or environ.get("NODE_NAME") or socket.gethostname()


class _Report:
    """The one JSON line this rank prints, whoever gets to print it first (the check or the watchdog)."""

    def __init__(self, node: str):
        self.started = time.perf_counter()
        self.fields: dict[str, Any] = {
            "check": CHECK_MARKER,
            "node": node,
            "rank": None,
            "world_size": None,
            "local_rank": None,
            "backend": None,
            "device": None,
            "ok": False,
            "error": "",
            "phase": "start",
            "phases": {},
        }
        self._lock = threading.Lock()
        self._printed = False

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Marks ``name`` as the running phase and records its duration when it ends without an error."""
        self.fields["phase"] = name
        started = time.perf_counter()
        yield
        self.fields["phases"][f"{name}_s"] = round(time.perf_counter() - started, 6)

    def emit(self, ok: bool, error: str = "") -> bool:
        with self._lock:
            if self._printed:
                return False
            self._printed = True
            phases = self.fields["phases"]
            if "allgather_s" in phases and "matmul_s" in phases:
                self.fields["check_s"] = round(phases["allgather_s"] + phases["matmul_s"], 6)
            self.fields.update(ok=ok, error=error, total_s=round(time.perf_counter() - self.started, 6))
            if ok:
                self.fields["phase"] = "done"
            sys.stdout.write(json.dumps(self.fields) + "\n")
            sys.stdout.flush()
            return True


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run the check on this rank, print its report line, return the exit status (0 passed, 1 failed)."""
    args = build_parser().parse_args(argv)
    environ = os.environ if environ is None else environ
    report = _Report(args.node or default_node_name(environ))
    deadline_s = args.deadline_s or 3 * args.timeout_s + 30
    watchdog = threading.Timer(deadline_s, _deadline_passed, args=(report, deadline_s))
    watchdog.daemon = True
    watchdog.start()
    try:
        launch = read_launch_env(environ)
        report.fields.update(rank=launch.rank, world_size=launch.world_size, local_rank=launch.local_rank)
        try:
            import torch
            import torch.distributed as dist
        except ImportError as exc:
            raise ConfigError(f"torch is not installed in this environment ({exc})") from exc
        _run_check(torch, dist, args, launch, report)
    except Exception as exc:
        report.emit(False, f"{type(exc).__name__} in phase {report.fields['phase']}: {exc}")
        return EXIT_FAILED
    finally:
        watchdog.cancel()
    report.emit(True)
    return 0


def _deadline_passed(report: _Report, deadline_s: float) -> None:
    if report.emit(False, f"deadline of {deadline_s:g} s passed during phase {report.fields['phase']}"):
        os._exit(EXIT_DEADLINE)


def _run_check(torch: Any, dist: Any, args: argparse.Namespace, launch: LaunchEnv, report: _Report) -> None:
    """The check's phases in order, each timed in the report; any failure raises (``main`` reports it)."""
    from datetime import timedelta

    backend, device = _backend_and_device(torch, args.backend, launch.local_rank)
    report.fields.update(
        backend=backend,
        device=str(device),
        allgather_mb=args.allgather_mb,
        gpu_memory=_gpu_memory(torch, device),
    )
    with report.phase("init"):
        dist.init_process_group(
            backend=backend,
            init_method="env://",
            rank=launch.rank,
            world_size=launch.world_size,
            timeout=timedelta(seconds=args.timeout_s),
        )
    # The first collective sets up the communicators (NCCL does it lazily): timed apart.
    with report.phase("connect"):
        if args.fail:
            raise DeliberateFailure("--fail given: this rank stops before the first collective")
        _all_reduce_ones(torch, dist, device, launch.world_size)
    with report.phase("allgather"):
        gathered = _all_gather_ranks(torch, dist, device, launch, args.allgather_mb)
    _check_gathered(gathered)
    with report.phase("matmul"):
        product = _repeated_matmul(torch, device, args.matmul_size, args.matmul_repeats)
    if not bool(torch.isfinite(product).all().item()):
        raise RuntimeError("matmul of random matrices gave non-finite values")
    with report.phase("shutdown"):
        dist.destroy_process_group()


def _backend_and_device(torch: Any, requested: str, local_rank: int) -> tuple[str, Any]:
    """NCCL on this rank's GPU when there is one (or when asked), else gloo on the CPU."""
    cuda = bool(torch.cuda.is_available())
    backend = requested if requested != "auto" else ("nccl" if cuda else "gloo")
    if backend != "nccl":
        return backend, torch.device("cpu")
    if not cuda:
        raise ConfigError("backend nccl needs a GPU and torch sees none")
    torch.cuda.set_device(local_rank)
    # Make a collective that outlives the timeout raise here (and be reported) instead of
    # aborting the process from NCCL's watchdog thread.
    os.environ.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")
    return backend, torch.device("cuda", local_rank)


def _gpu_memory(torch: Any, device: Any) -> dict[str, float] | None:
    """Free and total memory of this rank's GPU in GB (None on the CPU): node validation reads it."""
    if getattr(device, "type", "cpu") != "cuda":
        return None
    free, total = torch.cuda.mem_get_info(device)
    return {"free_gb": round(free / 1e9, 3), "total_gb": round(total / 1e9, 3)}


def _synchronize(torch: Any, device: Any) -> None:
    """Wait for the GPU's queued work, so that a phase's time includes it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _all_reduce_ones(torch: Any, dist: Any, device: Any, world_size: int) -> None:
    ping = torch.ones(1, device=device)
    dist.all_reduce(ping)
    _synchronize(torch, device)
    if int(ping.item()) != world_size:
        raise RuntimeError(f"all-reduce of ones gave {ping.item()}, expected {world_size}")


def _all_gather_ranks(torch: Any, dist: Any, device: Any, launch: LaunchEnv, megabytes: float) -> list[Any]:
    """Every rank sends ``megabytes`` of its own rank number; returns what arrived from each rank."""
    elements = max(1, int(megabytes * 2**20 / 4))
    mine = torch.full((elements,), float(launch.rank), dtype=torch.float32, device=device)
    gathered = [torch.empty_like(mine) for _ in range(launch.world_size)]
    dist.all_gather(gathered, mine)
    _synchronize(torch, device)
    return gathered


def _check_gathered(gathered: list[Any]) -> None:
    for rank, received in enumerate(gathered):
        if received.min().item() != rank or received.max().item() != rank:
            raise RuntimeError(f"all-gather returned wrong data for rank {rank}")


def _repeated_matmul(torch: Any, device: Any, size: int, repeats: int) -> Any:
    """``repeats`` products of two random ``size`` x ``size`` matrices (fp16 on GPU); returns the last."""
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    left = torch.randn(size, size, dtype=dtype, device=device)
    right = torch.randn(size, size, dtype=dtype, device=device)
    for _ in range(repeats):
        product = torch.matmul(left, right)
    _synchronize(torch, device)
    return product


# --- reading the reports back (runs where the worlds are launched, no torch needed) ------------


def parse_check_output(text: str, nodes: Sequence[str]) -> WorldResult:
    """The world's result from the logs of all its ranks (any order, mixed with other output).

    ``nodes`` are the world's nodes in rank order. A report is matched to a node by the node name it
    carries when that is one of ``nodes``, else by its rank. The world passed only when every node
    reported ok; a missing report, a wrong world size or a rank outside the world fails it with the
    reason. A node's time is its ``check_s`` (all-gather + matmul). When a rank reported twice
    (torchrun restarted it) the last report counts.
    """
    from acme.recovery.localize import WorldResult

    world = list(nodes)
    if not world:
        raise InputError("parse_check_output", "no nodes: a world has at least one node")
    reports, problems = _reports_by_node(text, world)
    seconds: dict[str, float] = {}
    for node in world:
        report = reports.get(node)
        if report is None:
            problems.append(f"no report from {node}")
            continue
        took = report.get("check_s")
        if isinstance(took, int | float) and not isinstance(took, bool):
            seconds[node] = float(took)
        if report.get("ok") is not True:
            problems.append(
                f"{node} (rank {report.get('rank')}): {report.get('error') or 'failed without a reason'}"
            )
    return WorldResult(nodes=tuple(world), ok=not problems, seconds=seconds, error="; ".join(problems))


def _reports_by_node(text: str, world: list[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each node's last report, and the problems of reports that do not fit this world."""
    reports: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for report in _check_reports(text):
        rank, name = report.get("rank"), report.get("node")
        if name in world:
            node = name
        elif isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < len(world):
            node = world[rank]
        else:
            problems.append(
                f"a report from node {name!r} rank {rank!r} is not part of this {len(world)}-node world"
            )
            continue
        size = report.get("world_size")
        if size is not None and size != len(world):
            problems.append(f"{node} reports a world of {size} ranks, this world has {len(world)} nodes")
        reports[node] = report
    return reports, problems


def check_reports(text: str) -> list[dict[str, Any]]:
    """Every report object among the lines of ``text``, in order (several ranks of one node, too)."""
    return list(_check_reports(text))


def _check_reports(text: str) -> Iterator[dict[str, Any]]:
    """The check's report objects among the lines of ``text``, in order."""
    decoder = json.JSONDecoder()
    for line in text.splitlines():
        start = line.find("{")
        if start < 0 or CHECK_MARKER not in line:
            continue
        try:
            report, _ = decoder.raw_decode(line, start)
        except ValueError:
            continue  # a truncated or interleaved line: the rank counts as silent unless it reported again
        if isinstance(report, dict) and report.get("check") == CHECK_MARKER:
            yield report


if __name__ == "__main__":
    sys.exit(main())
