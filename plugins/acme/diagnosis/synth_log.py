"""Deterministic generator of realistic multi-rank LLM training logs with an injected failure.

There is no long real training log in the repository, so compression and diagnosis are measured on logs
made here: a torchrun/Megatron/DeepSpeed-style job on ``ranks`` GPUs that prints what real jobs print --
launcher banners, an argument dump and a DeepSpeed JSON config, NCCL INFO chatter from every rank, warnings
repeated by every rank, iteration metrics (loss, lr, throughput, grad norm), tqdm bars rewritten with
``\\r``, checkpoint saves -- and then fails with the cascade of a given failure reason: the root-cause error on
one rank followed by the symptoms on all ranks (NCCL watchdog timeouts, RuntimeErrors, torchrun's
ChildFailedError), or a Python traceback printed by every rank for script errors.

A real excerpt (for example one of ``tests/fixtures/diagnosis/labelled_errors.yaml``) can be spliced in
instead of the synthetic failure with ``excerpt=``.

``iter_training_log(..., labelled=True)`` yields ``(text, label)`` with label ``routine``, ``error`` or
``traceback``: the oracle the compression tests check against. Everything streams, so a 1,000,000-line log
costs no memory.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

ROUTINE = "routine"
ERROR = "error"
TRACEBACK = "traceback"

_ARGS = [
    "accumulate_allreduce_grads_in_fp32", "adam_beta1", "adam_beta2", "adam_eps", "apply_query_key_layer_scaling",
    "attention_dropout", "bf16", "clip_grad", "consumed_train_samples", "data_parallel_size", "data_path",
    "distributed_backend", "ffn_hidden_size", "global_batch_size", "hidden_dropout", "hidden_size", "init_method_std",
    "log_interval", "lr", "lr_decay_style", "lr_warmup_iters", "make_vocab_size_divisible_by", "micro_batch_size",
    "min_lr", "num_attention_heads", "num_layers", "optimizer", "pipeline_model_parallel_size", "save",
    "save_interval", "seed", "seq_length", "sequence_parallel", "tensor_model_parallel_size", "tokenizer_type",
    "train_iters", "use_distributed_optimizer", "use_flash_attn", "vocab_file", "weight_decay", "world_size",
]  # fmt: skip

_WARNINGS = [
    "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: "
    "the use_reentrant parameter should be passed explicitly.",
    "/usr/local/lib/python3.10/dist-packages/transformer_engine/pytorch/module/base.py:630: UserWarning: "
    "To guarantee overlapping TP and SP collectives with the backward GEMMs, set environment variable "
    "CUDA_DEVICE_MAX_CONNECTIONS = 1",
    "/usr/local/lib/python3.10/dist-packages/torch/distributed/c10d_logger.py:72: FutureWarning: "
    "`torch.distributed._all_gather_base` is a private function and will be deprecated.",
]

# The final exception line printed for each script/framework reason.
_EXCEPTION_LINES = {
    "AttributeError": "AttributeError: 'NoneType' object has no attribute 'dp_process_group'",
    "AssertionError": "AssertionError: num_layers should be divisible by pipeline_model_parallel_size",
    "ValueError": "ValueError: The global train batch size (7 x 1) must be evenly divisible by the number of generations",
    "ZeroDivisionError": "ZeroDivisionError: division by zero",
    "RuntimeError": "RuntimeError: shape '[4, 2048, 32, 128]' is invalid for input of size 8388608",
    "FileNotFoundError": "FileNotFoundError: [Errno 2] No such file or directory: '/mnt/data/tokenizer/tokenizer.model'",
    "OSError": "OSError: [Errno 28] No space left on device",
    "TypeError": "TypeError: forward() got an unexpected keyword argument 'position_ids'",
    "NameError": "NameError: name 'flash_attn_varlen_func' is not defined",
    "PermissionError": "PermissionError: [Errno 13] Permission denied: '/mnt/shared/checkpoints/iter_0001000'",
    "ImportError": "ModuleNotFoundError: No module named 'flash_attn'",
    "KeyError": "KeyError: 'input_ids'",
    "SyntaxError": "SyntaxError: invalid syntax",
    "IndexError": "IndexError: index 50304 is out of bounds for dimension 0 with size 50304",
    "CalledProcessError": "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
    "ModelLoadingError": "RuntimeError: Error(s) in loading state_dict for GPTModel:",
    "DatasetLoadingError": "FileNotFoundError: Couldn't find a dataset script at /data/pile/pile.py or any data file in the same directory.",
}

_HARDWARE_ROOTS = {
    "NVLinkError": "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
    "ECCError": "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "CUDAError": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "OutOfMemoryError": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
    "capacity of 79.15 GiB of which 1.12 GiB is free.",
}

SUPPORTED_FAILURES = sorted(
    set(_EXCEPTION_LINES)
    | set(_HARDWARE_ROOTS)
    | {"NCCLTimeoutError", "NCCLRemoteError", "NetworkError", "ConnectionError", "LossSpike", "DataloaderKilled",
       "NodeFailure", "S3StorageError", "ArgumentError", "GPUDriverFault"}
)  # fmt: skip


def _ts(second: int) -> str:
    day, rest = divmod(second, 86_400)
    hour, rest = divmod(rest, 3_600)
    minute, sec = divmod(rest, 60)
    return f"2024-03-{1 + day % 28:02d} {hour:02d}:{minute:02d}:{sec:02d}"


def _prefix(rank: int, style: str) -> str:
    if style == "torchrun":
        return f"[rank{rank}]:"
    if style == "srun":
        return f"{rank}: "
    return f"[default{rank}]:"


def _traceback(exception_line: str, frames: int = 6) -> list[tuple[str, str]]:
    lines = [("Traceback (most recent call last):", TRACEBACK)]
    files = [
        ("/workspace/Megatron-LM/pretrain_gpt.py", 243, "<module>", "pretrain(train_valid_test_datasets_provider,"),
        ("/workspace/Megatron-LM/megatron/training/training.py", 285, "pretrain", "iteration, num_floating_point_operations_so_far = train("),
        ("/workspace/Megatron-LM/megatron/training/training.py", 1229, "train", "train_step(forward_step_func,"),
        ("/workspace/Megatron-LM/megatron/training/training.py", 744, "train_step", "losses_reduced = forward_backward_func("),
        ("/workspace/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", 447, "forward_backward_no_pipelining", "output_tensor = forward_step("),
        ("/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", 1541, "_call_impl", "return forward_call(*args, **kwargs)"),
    ]  # fmt: skip
    for path, number, func, code in files[:frames]:
        lines.append((f'  File "{path}", line {number}, in {func}', TRACEBACK))
        lines.append((f"    {code}", TRACEBACK))
    lines.append((exception_line, ERROR))
    return lines


def failure_cascade(
    reason: str, ranks: int, rng: random.Random, style: str = "torchrun"
) -> list[tuple[str, str]]:
    """The lines a job prints when it fails for ``reason``: root cause on one rank, symptoms on all ranks."""
    bad = rng.randrange(ranks)
    out: list[tuple[str, str]] = []

    def on(rank: int, text: str, label: str = ERROR) -> None:
        out.append(
            (f"{_prefix(rank, style)} {text}" if style != "srun" else f"{_prefix(rank, style)}{text}", label)
        )

    def watchdog_all(skip: int | None = None) -> None:
        for r in range(ranks):
            if r == skip:
                continue
            on(
                r,
                f"[E{rng.randint(300, 399)} 10:{rng.randint(10, 59)}:12.{rng.randint(100000, 999999)} "
                f"ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation timeout: "
                f"WorkNCCL(SeqNum=80412, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
                f"Timeout(ms)=600000) ran for {600000 + rng.randint(1, 99)} milliseconds before timing out.",
            )

    def child_failed() -> None:
        out.append(
            (f"E0314 10:44:01.{rng.randint(100000, 999999)} torch/distributed/elastic/multiprocessing/api.py:826] "
             f"failed (exitcode: 1) local_rank: {bad % 8} (pid: {40000 + bad}) of binary: /usr/bin/python", ERROR)
        )  # fmt: skip
        out.append(("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", ERROR))

    if reason in _HARDWARE_ROOTS:
        for text, label in _traceback(_HARDWARE_ROOTS[reason]):
            on(bad, text, label)
        if reason != "OutOfMemoryError":
            on(
                bad,
                "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
            )
        watchdog_all(skip=bad)
    elif reason == "GPUDriverFault":
        out.append(
            (
                f"[{rng.randint(10000, 99999)}.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                ERROR,
            )
        )
        watchdog_all(skip=bad)
    elif reason == "NCCLTimeoutError":
        watchdog_all()
    elif reason == "NCCLRemoteError":
        for r in range(ranks):
            on(
                r,
                "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, remote process exited or there was a network error, NCCL version 2.21.5",
            )
            on(
                r,
                "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
            )
    elif reason == "NetworkError":
        on(
            bad,
            f"node-{bad // 8}:4242:4311 [{bad % 8}] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.{bad}.7<41234> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
        )
        watchdog_all(skip=bad)
    elif reason == "ConnectionError":
        for r in range(ranks):
            on(
                r,
                "[W314 10:44:01.831041000 TCPStore.cpp:347] [c10d] TCP client failed to connect/validate to host 10.0.0.1:29500 - retrying (try=6, timeout=1800000ms, delay=5241ms): Connection reset by peer",
            )
    elif reason == "LossSpike":
        for it in range(3):
            out.append(
                (f" iteration    {81000 + it}/  500000 | consumed samples:     {(81000 + it) * 1024} | elapsed time per iteration (ms): 4247.9 | "
                 "learning rate: 2.999E-04 | global batch size:  1024 | lm loss: nan | loss scale: 1.0 | grad norm: nan | "
                 "number of skipped iterations:   0 | number of nan iterations:   1 |", ERROR)
            )  # fmt: skip
    elif reason == "DataloaderKilled":
        for text, label in _traceback(
            "RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.", frames=3
        ):
            on(bad, text, label)
        watchdog_all(skip=bad)
    elif reason == "NodeFailure":
        out.append(
            (
                f"slurmstepd: error: *** STEP 4242.0 ON node-{bad // 8} CANCELLED AT 2024-03-14T10:44:01 DUE TO NODE FAILURE ***",
                ERROR,
            )
        )
    elif reason == "S3StorageError":
        for text, label in _traceback(
            "botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the PutObject operation: Please reduce your request rate.",
            frames=3,
        ):
            on(0, text, label)
    elif reason == "ArgumentError":
        for r in range(ranks):
            on(r, "pretrain_gpt.py: error: unrecognized arguments: --local_rank=0")
    elif reason in _EXCEPTION_LINES:
        for r in range(ranks):
            for text, label in _traceback(_EXCEPTION_LINES[reason]):
                on(r, text, label)
    else:
        raise ValueError(f"no synthetic failure for reason {reason!r}; choose one of {SUPPORTED_FAILURES}")
    child_failed()
    return out


def iter_training_log(
    n_lines: int = 100_000,
    *,
    seed: int = 0,
    ranks: int = 16,
    failure: str | None = "ECCError",
    excerpt: Sequence[str] | None = None,
    style: str = "torchrun",
    labelled: bool = False,
) -> Iterator:
    """Yield about ``n_lines`` lines of a training log that fails near its end (streaming, deterministic)."""
    rng = random.Random(seed)
    emitted = 0

    def emit(text: str, label: str = ROUTINE):
        return (text, label) if labelled else text

    header: list[str] = ["*****************************************"]
    header.append("Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.")  # fmt: skip
    header.append("*****************************************")
    header.append(f"using world size: {ranks}, data-parallel size: {max(ranks // 8, 1)}, context-parallel size: 1, tensor-model-parallel size: 8, pipeline-model-parallel size: 1")  # fmt: skip
    header.append("------------------------ arguments ------------------------")
    for name in _ARGS:
        value = rng.choice(
            [
                "True",
                "False",
                "None",
                str(rng.randint(1, 8192)),
                f"{rng.random():.6f}",
                "/mnt/data/pile/pile_text_document",
            ]
        )
        header.append(f"  {name} {'.' * (48 - len(name))} {value}")
    header.append("-------------------- end of arguments ---------------------")
    header.append("> initializing torch distributed ...")
    header.append("[2024-03-14 09:00:03,512] [INFO] [config.py:1000:print] DeepSpeedEngine configuration:")
    header.extend(["{", '    "train_batch_size": 1024,', '    "gradient_clipping": 1.0,', '    "bf16": {', '        "enabled": true', "    },", '    "zero_optimization": {', '        "stage": 1', "    }", "}"])  # fmt: skip
    for text in header:
        yield emit(text)
        emitted += 1

    for rank in range(ranks):
        host, local = rank // 8, rank % 8
        for channel in range(4):
            yield emit(f"node-{host}:{3000 + local}:{3100 + local} [{local}] NCCL INFO Channel {channel:02d}/24 :    0   1   2   3   4   5   6   7")  # fmt: skip
        yield emit(f"node-{host}:{3000 + local}:{3100 + local} [{local}] NCCL INFO comm 0x{rng.getrandbits(40):x} rank {rank} nranks {ranks} cudaDev {local} busId {local + 1}b000 - Init COMPLETE")  # fmt: skip
        emitted += 5

    failure_at = int(n_lines * 0.97)
    iteration = 0
    second = 32_400
    while emitted < failure_at:
        iteration += 1
        second += 4
        kind = rng.random()
        if kind < 0.55:
            loss = 2.0 + 6.0 / (1 + iteration / 500) + rng.uniform(-0.05, 0.05)
            yield emit(
                f" iteration {iteration:>8}/  500000 | consumed samples: {iteration * 1024:>12} | elapsed time per iteration (ms): "
                f"{rng.uniform(3900, 4400):.1f} | throughput per GPU (TFLOP/s/GPU): {rng.uniform(180, 210):.1f} | learning rate: "
                f"{3e-4 * min(1, iteration / 2000):.6E} | global batch size:  1024 | lm loss: {loss:.6E} | loss scale: 1.0 | "
                f"grad norm: {rng.uniform(0.2, 1.5):.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |"
            )
        elif kind < 0.75:
            rank = rng.randrange(ranks)
            done = iteration % 500
            bar = "█" * (done * 20 // 500)
            parts = [f"Epoch 0: {p:3d}%|{'█' * (p // 5):<20}| {p * 5}/500 [00:{p % 60:02d}<01:40,  4.81it/s]" for p in range(done, min(done + 4, 100))]  # fmt: skip
            yield emit(
                f"{_prefix(rank, style)} "
                + "\r".join(parts)
                + f"\rEpoch 0: {done % 100:3d}%|{bar:<20}| {done}/500"
            )
        elif kind < 0.85:
            rank = rng.randrange(ranks)
            warning = rng.choice(_WARNINGS)
            yield emit(f"{_prefix(rank, style)} {warning}")
            yield emit(f"{_prefix(rank, style)}   warnings.warn(")
            emitted += 1
        elif kind < 0.93:
            rank = rng.randrange(ranks)
            yield emit(
                f"[{_ts(second)},{rng.randint(100, 999)}] [INFO] [logging.py:96:log_dist] [Rank {rank}] step={iteration}, "
                f"skipped=0, lr=[{3e-4:.6e}], mom=[(0.9, 0.95)]"
            )
        elif kind < 0.97:
            rank = rng.randrange(ranks)
            yield emit(
                f"node-{rank // 8}:{3000 + rank % 8}:{3100 + rank % 8} [{rank % 8}] NCCL INFO Using network IB"
            )
        elif kind < 0.985:
            yield emit(f"saving checkpoint at iteration {iteration:>8} to /mnt/ckpt/gpt-175b")
            yield emit(f"  successfully saved checkpoint at iteration {iteration:>8} to /mnt/ckpt/gpt-175b")
            emitted += 1
        else:
            yield emit(f"[{_ts(second)}] (min, max) time across ranks (ms):")
            yield emit(f"    forward-backward ...............................: ({rng.uniform(3000, 3200):.2f}, {rng.uniform(3200, 3400):.2f})")  # fmt: skip
            emitted += 1
        emitted += 1

    if excerpt is not None:
        for text in excerpt:
            yield emit(text, ERROR)
    elif failure is not None:
        for text, label in failure_cascade(failure, ranks, rng, style=style):
            yield emit(text, label)
