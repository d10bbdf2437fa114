"""SIGKILL a task's process at a chosen write of the lake, and compare lakes object by object.

A *write point* is one call of a lake write (``Lake.write_bytes``, which ``write_json``,
``write_parquet`` and ``upload_file`` go through; ``Lake.delete_prefix``; a ``rm`` on the lake's
filesystem; ``Lake.lock``) or of a local file step of the evaluation's precursor (``os.rename`` of
its staging folder). A clean run in *counting mode* lists the points in call order; a kill run gets
``(call, phase)`` and the process SIGKILLs itself there -- nothing is cleaned up, no ``finally``
runs, exactly as when a worker is killed:

- ``write_bytes``: ``before`` the call, ``partial`` (its temporary file holds half the bytes),
  ``unrenamed`` (the temporary file is complete but not yet renamed over the target), ``after``;
- ``delete_prefix``: ``before``, ``partial`` (every file under the prefix but the first in name order
  is gone: a recursive delete stopped half-way), ``after``;
- ``rm`` / ``rename``: ``before``, ``after``;
- ``lock``: ``acquired`` (before the guarded block), ``before_release`` (the block is done),
  ``after_release``.

Tasks run in forked children (:func:`run_forked`): the parent has imported the heavy libraries once,
each child is a fresh process for the task's own state (and its SIGKILL is a real one).

The comparison helpers read every file under a lake folder -- temporary files included, which the
lake's own listing hides -- and reduce each object to a comparable value with the fields listed in
:data:`VOLATILE_FIELDS` removed (times and measured durations; nothing else).
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import re
import signal
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PHASES = {
    "write_bytes": ("before", "partial", "unrenamed", "after"),
    "delete_prefix": ("before", "partial", "after"),
    "rm": ("before", "after"),
    "rename": ("before", "after"),
    "lock": ("acquired", "before_release", "after_release"),
}

KILLED = -signal.SIGKILL
"""``Process.exitcode`` of a child that SIGKILLed itself."""


@dataclass(frozen=True)
class WritePoint:
    call: int  # 1-based, in call order
    method: str
    key: str

    def to_dict(self) -> dict[str, Any]:
        return {"call": self.call, "method": self.method, "key": self.key}


@dataclass(frozen=True)
class KillAt:
    call: int
    phase: str

    def __str__(self) -> str:
        return f"call {self.call} ({self.phase})"


class _Hook:
    """Counts write points and SIGKILLs the process at ``kill`` (None: count only)."""

    def __init__(self, kill: KillAt | None):
        self.kill = kill
        self.points: list[WritePoint] = []
        self._depth = 0  # a rm inside delete_prefix is part of that call, not a point of its own

    def enter(self, method: str, key: str) -> int:
        call = len(self.points) + 1
        self.points.append(WritePoint(call, method, key))
        return call

    def maybe_kill(self, call: int, phase: str) -> None:
        if self.kill is not None and self.kill.call == call and self.kill.phase == phase:
            os.kill(os.getpid(), signal.SIGKILL)

    def install(self) -> None:
        """Patch the lake (and the precursor's rename) in this process; the process is ours alone."""
        import fsspec.implementations.local as local_fs

        from acme import lake as lake_module
        from acme.evaluation import precursor

        hook = self
        lake_class = lake_module.Lake
        original_write = lake_class.write_bytes
        original_delete = lake_class.delete_prefix
        original_lock = lake_class.lock
        original_rm = local_fs.LocalFileSystem.rm
        real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename

        def write_bytes(self, key, data):
            call = hook.enter("write_bytes", key)
            hook.maybe_kill(call, "before")
            chosen = hook.kill is not None and hook.kill.call == call
            if chosen and hook.kill.phase == "partial":

                def fsync_half(fd):  # the kernel got half of the bytes when the process died
                    os.ftruncate(fd, len(data) // 2)
                    real_fsync(fd)
                    os.kill(os.getpid(), signal.SIGKILL)

                os.fsync = fsync_half
            if chosen and hook.kill.phase == "unrenamed":

                def replace_never(src, dst):
                    os.kill(os.getpid(), signal.SIGKILL)

                os.replace = replace_never
            try:
                url = original_write(self, key, data)
            finally:
                os.fsync, os.replace = real_fsync, real_replace
            hook.maybe_kill(call, "after")
            return url

        def delete_prefix(self, prefix):
            call = hook.enter("delete_prefix", prefix)
            hook.maybe_kill(call, "before")
            if hook.kill is not None and hook.kill.call == call and hook.kill.phase == "partial":
                files = sorted(str(p) for p in Path(self.path(prefix)).rglob("*") if p.is_file())
                for path in files[1:]:
                    os.unlink(path)
                hook.maybe_kill(call, "partial")
            hook._depth += 1
            try:
                original_delete(self, prefix)
            finally:
                hook._depth -= 1
            hook.maybe_kill(call, "after")

        def rm(self, path, *args, **kwargs):
            if hook._depth:
                return original_rm(self, path, *args, **kwargs)
            call = hook.enter("rm", str(path))
            hook.maybe_kill(call, "before")
            try:
                return original_rm(self, path, *args, **kwargs)
            finally:
                # Also after a rm of a missing file (FileNotFoundError, which Lake.remove expects):
                # the process can die right after that call too.
                hook.maybe_kill(call, "after")

        @contextlib.contextmanager
        def lock(self, name, *args, **kwargs):
            call = hook.enter("lock", name)
            with original_lock(self, name, *args, **kwargs):
                hook.maybe_kill(call, "acquired")
                yield
                hook.maybe_kill(call, "before_release")
            hook.maybe_kill(call, "after_release")

        def rename(src, dst, *args, **kwargs):
            call = hook.enter("rename", str(dst))
            hook.maybe_kill(call, "before")
            real_rename(src, dst, *args, **kwargs)
            hook.maybe_kill(call, "after")

        lake_class.write_bytes = write_bytes
        lake_class.delete_prefix = delete_prefix
        lake_class.lock = lock
        local_fs.LocalFileSystem.rm = rm
        precursor.os = _OsWithRename(rename)


class _OsWithRename:
    """``os`` for the precursor module, with ``rename`` counted as a write point."""

    def __init__(self, rename: Callable[..., None]):
        self.rename = rename

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


@dataclass
class ChildRun:
    exitcode: int
    points: list[WritePoint]
    result: Any
    error: str | None

    @property
    def killed(self) -> bool:
        return self.exitcode == KILLED


def _child(task: Callable[[], Any], kill: KillAt | None, out: str) -> None:
    hook = _Hook(kill)
    hook.install()
    document: dict[str, Any] = {"points": [], "result": None, "error": None}
    try:
        document["result"] = task()
    except BaseException:  # the parent reports it; the exit code says it failed
        document["error"] = traceback.format_exc()
    document["points"] = [p.to_dict() for p in hook.points]
    Path(out).write_text(json.dumps(document, default=str))
    os._exit(1 if document["error"] else 0)


def run_forked(
    task: Callable[[], Any], kill: KillAt | None, scratch: Path, timeout_s: float = 300
) -> ChildRun:
    """Run ``task`` in a forked child with the hook installed; kill it at ``kill`` (None: count only)."""
    out = scratch / f"child-{os.getpid()}-{next(_serial)}.json"
    context = multiprocessing.get_context("fork")
    process = context.Process(target=_child, args=(task, kill, str(out)))
    process.start()
    process.join(timeout_s)
    if process.is_alive():
        process.kill()
        process.join()
        raise TimeoutError(f"task did not finish in {timeout_s} s (kill point {kill})")
    if not out.exists():
        return ChildRun(process.exitcode, [], None, None)
    document = json.loads(out.read_text())
    out.unlink()
    points = [WritePoint(**p) for p in document["points"]]
    return ChildRun(process.exitcode, points, document["result"], document["error"])


def _counter() -> Iterator[int]:
    n = 0
    while True:
        n += 1
        yield n


_serial = _counter()


def kill_choices(points: list[WritePoint]) -> list[KillAt]:
    """Every (call, phase) a clean run's write points offer."""
    return [KillAt(p.call, phase) for p in points for phase in PHASES[p.method]]


# --- reading and comparing lakes ------------------------------------------------------------------

VOLATILE_FIELDS = {
    # diagnosis record and stored case: when they were made
    "diagnosed_at",
    "created_at",
    # learned rules and family filter rules: when they were learned
    "updated_at",
    "at",
    "provenance",
    # recovery action log, job marker, simulated restart: wall-clock times and measured seconds
    "started_at",
    "ended_at",
    "seconds",
    "since",
    "since_epoch",
    "restarted_at",
    "detection_to_restart_s",
    "reused",
    # evaluation: measured durations (timings, results, measurements, priors)
    "load_s",
    "setup_s",
    "infer_s",
    "metric_s",
    "lease_wait_s",
    "sample_s",
    "sample_s_median",
    "sample_s_max",
}

ATTEMPT_LOGS = re.compile(r"(^|/)actions\.jsonl$")
"""Logs of attempts (the recovery's action log). A retry records again a step its killed try may have
recorded already, and records what *it* found (a node "already cordoned", 0 nodes left to cordon), so
these logs are compared as the sequence of their distinct steps -- name, idempotency key, inputs,
status -- in the order they were first recorded. What the steps did to the cluster is compared whole
(the simulated cluster's ``state.json``)."""

ATTEMPT_FIELDS = ("step", "idempotency_key", "inputs", "status", "dry_run")

GENERATED_AT = re.compile(rb"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC")
"""The generation time printed on a report page (``ReportWriter.write_report``'s ``generated_at``)."""

TEMPORARY = re.compile(r"\.tmp-")


def lake_files(root: Path) -> dict[str, Path]:
    """Every file under ``root`` by its key (temporary files included)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


def without_volatile(value: Any) -> Any:
    """``value`` (JSON-like) without the :data:`VOLATILE_FIELDS`, at every depth."""
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items() if k not in VOLATILE_FIELDS}
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


def comparable(key: str, data: bytes) -> Any:
    """The object's content without volatile fields; raises when the object is not complete."""
    if key.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(io.BytesIO(data))
        kept = [name for name in table.column_names if name not in VOLATILE_FIELDS]
        return ("parquet", table.select(kept))
    if key.endswith(".json"):
        return ("json", without_volatile(json.loads(data)))
    if key.endswith(".jsonl"):
        records = [without_volatile(json.loads(line)) for line in data.decode().splitlines()]
        if ATTEMPT_LOGS.search(key):
            steps = [json.dumps([record.get(name) for name in ATTEMPT_FIELDS]) for record in records]
            records = [json.loads(step) for step in dict.fromkeys(steps)]  # first records of each step
        return ("jsonl", records)
    if key.endswith((".yaml", ".yml")):
        import yaml

        return ("yaml", without_volatile(yaml.safe_load(data)))
    if key.endswith(".html"):
        return ("html", GENERATED_AT.sub(b"<generated>", data))
    return ("bytes", data)


def same(a: Any, b: Any) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "parquet":
        return a[1].schema.equals(b[1].schema) and a[1].equals(b[1])
    return a[1] == b[1]


def differences(lake: Path, expected: Path, ignore: Callable[[str], bool] = lambda key: False) -> list[str]:
    """How ``lake`` differs from ``expected``: missing, extra (leftover) and different objects."""
    got, want = lake_files(lake), lake_files(expected)
    problems = [f"missing {k}" for k in sorted(set(want) - set(got)) if not ignore(k)]
    problems += [f"leftover {k}" for k in sorted(set(got) - set(want)) if not ignore(k)]
    for key in sorted(set(got) & set(want)):
        if ignore(key) or key.startswith("_locks/"):
            continue
        try:
            if not same(comparable(key, got[key].read_bytes()), comparable(key, want[key].read_bytes())):
                problems.append(f"differs {key}")
        except Exception as exc:  # an unreadable object is the finding
            problems.append(f"unreadable {key}: {type(exc).__name__}: {exc}")
    return problems


def visible_problems(
    lake: Path,
    before: Path,
    after: Path,
    unpublished: Callable[[str], bool],
    rewritten_in_steps: Callable[[str], bool] = lambda key: False,
) -> list[str]:
    """What a reader could see wrong right after a kill.

    Every object outside the unpublished areas (staging, raw, locks) must be complete and equal to
    its state before the task or after a clean run of it (``rewritten_in_steps``: objects a task
    rewrites several times, e.g. an append log, need only be complete). Temporary files are
    invisible to the lake's readers and only counted.
    """
    problems = []
    old, new = lake_files(before), lake_files(after)
    for key, path in lake_files(lake).items():
        if unpublished(key) or TEMPORARY.search(key):
            continue
        try:
            value = comparable(key, path.read_bytes())
        except Exception as exc:
            problems.append(f"incomplete {key}: {type(exc).__name__}: {exc}")
            continue
        if rewritten_in_steps(key):
            continue
        states = [comparable(key, p.read_bytes()) for p in (old.get(key), new.get(key)) if p is not None]
        if not any(same(value, state) for state in states):
            problems.append(f"neither before nor after {key}")
    return problems


def temporary_files(root: Path) -> list[str]:
    return [key for key in lake_files(root) if TEMPORARY.search(key)]
