"""A small real torch.distributed job (gloo on CPU, ranks on 127.0.0.1) that hangs on purpose and writes
PyTorch Flight Recorder dumps, one file per rank, as a watchdog timeout would.

Run as ``python tests/flight_recorder_job.py --out DIR [--ranks 4] [--skip-rank 3] [--format pickle|json]``:
every rank does a few collectives (all_reduce, all_gather, broadcast), then all but ``--skip-rank`` enter
one more all_reduce, which times out (``--timeout-s``) because the skipping rank never calls it (it waits
in host code instead, as a rank stuck outside the collectives would). ``--mismatch-rank`` instead makes
that rank call the stuck all_reduce with another size.

Gloo records into the Flight Recorder in torch 2.13 (``TORCH_FR_BUFFER_SIZE``), but only
ProcessGroupNCCL's watchdog writes dumps by itself (``TORCH_NCCL_DUMP_ON_TIMEOUT``); gloo raises the timeout
in the rank instead. So each timed-out rank writes its dump from the exception through PyTorch's own dump
function, ``torch._C._distributed_c10d._dump_fr_trace()`` (``_dump_fr_trace_json()`` for JSON), to
``<TORCH_FR_DUMP_TEMP_FILE><rank>`` as the watchdog would, and then tells the other ranks through the
job's store, where the skipping rank (like NCCL's heartbeat monitor on a rank that did not time out) dumps
too. A rank listed in ``--no-dump-rank`` writes none (a rank whose process died).
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

DUMP_SIGNAL = "acme_fr_dump"
DUMPED = "acme_fr_dumped"
GLOO_TIMEOUT_FACTOR = 10  # gloo raises well after the dump


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_rank(args: argparse.Namespace, rank: int) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{args.port}",
        rank=rank,
        world_size=args.ranks,
        timeout=datetime.timedelta(seconds=args.timeout_s * GLOO_TIMEOUT_FACTOR),
    )
    store = dist.distributed_c10d._get_default_store()
    values = torch.full((8,), float(rank))
    for _ in range(2):  # a short healthy history before the hang
        dist.all_reduce(values)
        dist.all_gather([torch.zeros(8) for _ in range(args.ranks)], values)
        dist.broadcast(values, src=0)
    if rank == args.skip_rank:
        # Stuck outside the collectives: wait until a timed-out rank asks for the dumps.
        store.wait([DUMP_SIGNAL], datetime.timedelta(seconds=args.timeout_s * 20))
    else:
        size = 16 if rank == args.mismatch_rank else 8
        work = dist.all_reduce(torch.ones(size), async_op=True)
        if wait_for(work, args.timeout_s):
            print(f"rank {rank}: the last all_reduce completed", file=sys.stderr)
        else:
            # The watchdog's part: the collective is past its timeout and still in flight, so dump now
            # (gloo's own timeout is longer: once it raises, gloo retires the entry like a finished one).
            print(
                f"rank {rank}: the last all_reduce still in flight after {args.timeout_s} s", file=sys.stderr
            )
        store.set(DUMP_SIGNAL, str(rank))
    if rank not in args.no_dump_rank:
        write_dump(args, rank)
    store.add(DUMPED, 1)
    if rank == 0:  # rank 0 holds the job's store: the others need it until they have dumped
        deadline = time.monotonic() + args.timeout_s * 20
        while store.add(DUMPED, 0) < args.ranks and time.monotonic() < deadline:
            time.sleep(0.1)
    os._exit(0)  # the hung collective's threads would keep a normal exit waiting


def wait_for(work: object, seconds: float) -> bool:
    """Whether the collective completed within ``seconds`` (polled, as the watchdog does)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if work.is_completed():  # type: ignore[attr-defined]
            return True
        time.sleep(0.05)
    return False


def write_dump(args: argparse.Namespace, rank: int) -> None:
    import torch

    c10d = torch._C._distributed_c10d
    data = c10d._dump_fr_trace_json() if args.format == "json" else c10d._dump_fr_trace()
    prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
    target = Path(f"{prefix}{rank}")
    partial = target.with_name(target.name + ".tmp")
    partial.write_bytes(data)
    partial.rename(target)


def launch(args: argparse.Namespace) -> int:
    """Start every rank as its own process and wait for them; returns the worst exit code."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "TORCH_FR_BUFFER_SIZE": str(args.buffer_size),
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_DUMP_TEMP_FILE": str(out / args.prefix),
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
    }
    common = [sys.executable, __file__, "--out", str(out), "--ranks", str(args.ranks), "--port", str(port),
              "--skip-rank", str(args.skip_rank), "--mismatch-rank", str(args.mismatch_rank),
              "--timeout-s", str(args.timeout_s), "--format", args.format, "--prefix", args.prefix,
              *[f"--no-dump-rank={r}" for r in args.no_dump_rank]]  # fmt: skip
    processes = [subprocess.Popen([*common, "--rank", str(rank)], env=env) for rank in range(args.ranks)]
    deadline = time.monotonic() + args.timeout_s * 30 + 120
    codes = []
    for process in processes:
        try:
            codes.append(process.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            process.kill()
            codes.append(process.wait())
    return max(codes)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--skip-rank", type=int, default=3)
    parser.add_argument("--mismatch-rank", type=int, default=-1)
    parser.add_argument("--no-dump-rank", type=int, action="append", default=[])
    parser.add_argument("--timeout-s", type=float, default=3.0)
    parser.add_argument("--buffer-size", type=int, default=64)
    parser.add_argument("--format", choices=("pickle", "json"), default="pickle")
    parser.add_argument("--prefix", default="nccl_trace_rank_")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rank is not None:
        run_rank(args, args.rank)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
