"""The general root-cause layers (issue 31): raised exceptions, errno inside exception texts, signals as the
launchers report them, read with the scheduler's statement.

Every message below is the fixed format of its tool (Python's traceback printer, the C library's strerror,
torchrun, DeepSpeed's launcher, accelerate, srun, Open MPI, LSF), not a phrase copied from one corpus log; each
test fails on the rules alone (the answer before the layers is in its comment).
"""

from __future__ import annotations

import pytest

from acme.diagnosis.metadata import job_fact_lines
from acme.diagnosis.rootcause import (
    errno_of,
    is_warning_record,
    launcher_signals,
    origin_of,
    raised_exceptions,
    reason_of_exception,
    worker_failure_line,
)
from acme.diagnosis.rules import diagnose_lines, load_rules


def _numbered(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.strip("\n").splitlines(), start=1))


def _diagnose(text: str, job: dict | None = None):
    return diagnose_lines(job_fact_lines(job) + _numbered(text), load_rules())


SAVE_FULL = """
Traceback (most recent call last):
  File "/home/u/proj/train.py", line 88, in <module>
    trainer.train()
  File "/opt/conda/lib/python3.11/site-packages/transformers/trainer.py", line 2328, in _inner_training_loop
    self._save_checkpoint(model, trial)
  File "/opt/conda/lib/python3.11/site-packages/safetensors/torch.py", line 286, in save_file
    serialize_file(_flatten(tensors), filename, metadata=metadata)
safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })
"""


def test_an_errno_inside_a_wrapper_is_the_cause():
    # Before: ModelLoadingError at 0.9 (the safetensors wrapper), the miss issue 31 reported.
    diagnosis = _diagnose(SAVE_FULL)
    assert diagnosis.reason == "OSError" and diagnosis.rule_id == "layer:errno"
    assert diagnosis.confidence >= 0.75 and "checkpoint save" in diagnosis.mitigation
    assert "save_total_limit" in diagnosis.mitigation


def test_a_quota_in_a_chained_traceback_is_the_root_of_the_chain():
    # Before: RuntimeError (the later exception of the chain); the innermost, printed first, is the cause.
    text = """
Traceback (most recent call last):
  File "/usr/lib/python3.10/site-packages/torch/serialization.py", line 652, in save
    _save(obj, opened_zipfile, pickle_module, pickle_protocol)
OSError: [Errno 122] Disk quota exceeded

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/home/u/train.py", line 40, in <module>
    torch.save(state, "ckpt/last.pt")
RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 1088 vs 1024
"""
    raised = raised_exceptions(_numbered(text))
    assert [exc.name for exc in raised] == ["OSError"]
    diagnosis = _diagnose(text)
    assert diagnosis.reason == "OSError" and "quota" in diagnosis.mitigation


def test_the_context_decides_data_storage_and_permission_outcomes():
    dataset = """
Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1344, in _next_data
    return self._process_data(data)
  File "/home/u/proj/data.py", line 51, in __getitem__
    with open(self.files[i], "rb") as f:
FileNotFoundError: [Errno 2] No such file or directory: '/scratch/u/shards/train-00017.parquet'
"""
    cache = """
Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/huggingface_hub/file_download.py", line 1364, in hf_hub_download
    os.makedirs(storage_folder, exist_ok=True)
PermissionError: [Errno 13] Permission denied: '/shared/.cache/huggingface/hub/models--gpt2'
"""
    assert _diagnose(dataset).reason == "DatasetLoadingError"  # before: FileNotFoundError
    permission = _diagnose(cache)
    assert permission.reason == "PermissionError" and "cache write" in permission.mitigation


def test_a_library_that_cannot_be_loaded_stays_an_import_error():
    text = """
Traceback (most recent call last):
  File "/home/u/train.py", line 3, in <module>
    import torch
ImportError: libcudart.so.12: cannot open shared object file: No such file or directory
"""
    assert _diagnose(text).reason == "ImportError"
    assert _diagnose(text.strip().splitlines()[-1]).reason == "ImportError"  # the line alone too


def test_a_tools_status_text_is_not_an_errno():
    # UCX prints its status code's text; no exception carries an errno here (the segfault stays the answer).
    text = """
[1579244748.838989] [cgpu12:56309:2]       ucp_rkey.c:250  UCX  ERROR Failed to unpack remote key from remote md[4]: Input/output error
[cgpu12:56309:0:56309] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x10)
srun: error: cgpu12: task 3: Segmentation fault
"""
    assert _diagnose(text).reason == "SegmentationFault"
    assert errno_of("OSError: [Errno 28] No space left on device") == "ENOSPC"
    assert errno_of("write error: Disk quota exceeded") == "EDQUOT"
    assert errno_of("(os error 30)") == "EROFS"


def test_the_raised_exception_wins_over_one_only_named():
    # Before: AttributeError -- a docstring of printed help text names it; the traceback raised a TypeError.
    text = """
 |          AttributeError: If the target string references an invalid
Traceback (most recent call last):
  File "/home/u/proj/train_lora.py", line 190, in <module>
    main()
  File "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", line 1520, in _call_impl
    return forward_call(*args, **kwargs)
TypeError: EsmModel.forward() got an unexpected keyword argument 'labels'
[2025-06-11 15:01:15,036] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 (pid: 1366391) of binary: /opt/venv/bin/python
Traceback (most recent call last):
  File "/opt/venv/bin/torchrun", line 33, in <module>
  File "/opt/venv/lib/python3.12/site-packages/torch/distributed/launcher/api.py", line 268, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
"""
    raised = raised_exceptions(_numbered(text))
    assert [exc.name for exc in raised] == ["TypeError"]  # torchrun's wrapper is not a cause
    assert raised[0].origin == "framework"
    assert _diagnose(text).reason == "TypeError"


def test_an_exception_no_rule_names_maps_through_the_builtin_hierarchy():
    # Before: Unknown (no rule names NotImplementedError), the reward-function miss.
    text = """
Traceback (most recent call last):
  File "/home/u/rl/train_grpo.py", line 61, in <module>
    trainer.train()
  File "/home/u/rl/rewards.py", line 12, in format_reward
    raise NotImplementedError("format reward for multi-turn samples")
NotImplementedError: format reward for multi-turn samples
"""
    diagnosis = _diagnose(text)
    assert diagnosis.reason == "RuntimeError" and diagnosis.origin == "user code"
    assert reason_of_exception("NotImplementedError") == "RuntimeError"
    assert reason_of_exception("ModuleNotFoundError") == "ImportError"
    assert reason_of_exception("UnicodeDecodeError") == "ValueError"
    assert reason_of_exception("json.decoder.JSONDecodeError") == "ValueError"
    assert reason_of_exception("KeyboardInterrupt") == "UserCancelled"
    assert reason_of_exception("torch.OutOfMemoryError") == "OutOfMemoryError"
    assert reason_of_exception("StopIteration") is None  # no reason in the taxonomy: left to the rules


def test_a_wrapper_that_says_what_it_raised_carries_its_cause():
    text = """
Traceback (most recent call last):
  File "/opt/venv/lib/python3.10/site-packages/torch/_dynamo/eval_frame.py", line 490, in catch_errors
    raise BackendCompilerFailed(self.compiler_fn, e).with_traceback(
torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:
FileNotFoundError: [Errno 2] No such file or directory: 'ldconfig'
"""
    assert [exc.name for exc in raised_exceptions(_numbered(text))] == ["FileNotFoundError"]
    assert _diagnose(text).reason == "FileNotFoundError"


def test_an_exception_in_a_warning_record_was_not_raised():
    # Before: FileNotFoundError (priority 60) over LSF's run limit (50).
    text = """
[2023-11-28 15:33:12,004] torch._dynamo.convert_frame: [WARNING] FileNotFoundError: [Errno 2] No such file or directory: 'ldconfig'
User defined signal 2
TERM_RUNLIMIT: job killed after reaching LSF run time limit.
Exited with exit code 140.
"""
    assert is_warning_record(_numbered(text)[0][1])
    assert _diagnose(text).reason == "SchedulerTimeLimit"


@pytest.mark.parametrize(
    ("line", "signal", "reason"),
    [
        ("[2024-08-02 03:43:23,037] [ERROR] [launch.py:325:sigkill_handler] ['python', '-u', 'train.py'] exits with return code = -2", 2, "UserCancelled"),
        ("[2024-08-02 03:43:23,037] [ERROR] [launch.py:325:sigkill_handler] ['python', '-u', 'train.py'] exits with return code = -9", 9, "KilledBySignal"),
        ("torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -15) local_rank: 0 (pid: 31) of binary: /usr/bin/python", 15, "KilledBySignal"),
        ("subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' died with <Signals.SIGINT: 2>.", 2, "UserCancelled"),
        ("srun: error: node17: task 3: Terminated", 15, "KilledBySignal"),
        ("mpirun noticed that process rank 5 with PID 0 on node gpu-3 exited on signal 11 (Segmentation fault).", 11, "SegmentationFault"),
        ("Exited with exit code 130.", 2, "UserCancelled"),
    ],
)  # fmt: skip
def test_launcher_signal_reports_are_one_fact(line, signal, reason):
    # Before: the DeepSpeed, accelerate, mpirun and LSF forms were Unknown (the DeepSpeed SIGINT miss).
    assert [s.signal for s in launcher_signals([(7, line)])] == [signal]
    assert diagnose_lines([(7, line)], load_rules()).reason == reason


def test_an_exit_status_that_is_no_signal_says_nothing():
    line = "[ERROR] [launch.py:325:sigkill_handler] ['python', 'train.py'] exits with return code = 1"
    assert launcher_signals([(1, line)]) == []
    assert diagnose_lines([(1, line)], load_rules()).reason == "Unknown"


def test_the_scheduler_says_who_sent_the_signal():
    # Before: UserCancelled -- bkill's SIGINT raised a KeyboardInterrupt logged before LSF's summary.
    lsf = """
Traceback (most recent call last):
  File "main.py", line 40, in <module>
KeyboardInterrupt
TERM_ADMIN: job killed by root or an administrator.
Exited with exit code 130.
"""
    assert _diagnose(lsf).reason == "JobCancelled"
    deepspeed = "[ERROR] [launch.py:325:sigkill_handler] ['python', 'train.py'] exits with return code = -2"
    assert _diagnose(deepspeed, {"state": "CANCELLED by 1042"}).reason == "JobCancelled"
    torchrun = "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -15) local_rank: 0"
    assert _diagnose(torchrun, {"state": "TIMEOUT"}).reason == "SchedulerTimeLimit"
    assert _diagnose(deepspeed).reason == "UserCancelled"  # no scheduler statement: the user's interrupt


def test_a_root_cause_still_outranks_the_signal():
    text = """
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.44 GiB. GPU 0 has a total capacity of 10.75 GiB
[2026-06-16 23:42:12,076] [ERROR] [launch.py:341:sigkill_handler] ['python', 'train.py'] exits with return code = -9
"""
    assert _diagnose(text).reason == "OutOfMemoryError"


@pytest.mark.parametrize(
    ("path", "origin"),
    [
        ("/home/u/proj/train.py", "user code"),
        ("/opt/conda/lib/python3.11/site-packages/deepspeed/runtime/engine.py", "framework"),
        ("/opt/conda/lib/python3.11/site-packages/wandb/sdk/wandb_run.py", "library"),
        ("/usr/lib/python3.10/multiprocessing/connection.py", "library"),
    ],
)
def test_the_innermost_frame_says_where_it_was_raised(path, origin):
    assert origin_of(["/home/u/proj/main.py", path]) == origin


# torchrun's agents after one node's workers failed: the agent hosting the c10d store exits, and the other
# nodes' agents lose it. Their connection errors are the teardown, not the cause.
TEARDOWN = """
E0207 17:32:12.377000 140552122837888 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) local_rank: 0 (pid: 1687537) of binary: /env/bin/python3.10
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
torch.distributed.DistNetworkError: Connection reset by peer
torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.
"""


def test_connection_errors_after_a_worker_failure_are_the_teardown():
    # The rules alone: ConnectionError (0.5), a confident wrong answer for a job whose workers failed first.
    assert diagnose_lines(_numbered(TEARDOWN), load_rules()).reason == "Unknown"
    assert worker_failure_line(_numbered(TEARDOWN)) == 1
    deepspeed = "[2024-01-01 00:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/env/bin/python', '-u', 'train.py'] exits with return code = 1"
    assert worker_failure_line([(7, deepspeed)]) == 7


def test_a_connection_error_before_any_worker_failure_is_still_the_cause():
    lines = _numbered(TEARDOWN)
    reordered = [(1, lines[3][1]), (2, lines[2][1]), (3, lines[0][1])]
    assert diagnose_lines(reordered, load_rules()).reason == "ConnectionError"


def test_tensorflows_allocator_reports_out_of_memory():
    text = "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[2,64,400,112,112] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc"
    assert diagnose_lines([(1, text)], load_rules()).reason == "OutOfMemoryError"
