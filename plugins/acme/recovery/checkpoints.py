"""Which checkpoint a crashed training job restarts from, and which data batches it skips.

A run's checkpoints live in an object store, one folder per step (found anywhere under the listed
prefix; the first ``step_<N>`` component of a path names its checkpoint)::

    …/step_<N>/manifest.json          written last, once every shard is stored
    …/step_<N>/<shard paths>          the files the manifest names

    manifest.json = {"step": N,       optional; when present it must equal the folder's N
                     "shards": [{"path": "model/rank_00.pt", "size": 1234, "sha256": "<64 hex>"}, …]}

Shard paths are relative to the folder. A checkpoint is **healthy** when its manifest parses and is
well formed, and every shard it names is present with the manifest's size (and the manifest's
sha256, when the listing carries a checksum or a shard reader is supplied). A folder without a
manifest is a save that did not finish.

Training metrics (CSV with a header, or JSON lines; columns ``step``, ``loss`` and optionally
``grad_norm``) give the first **loss spike**: the first step whose loss or grad norm is NaN/Inf, or
whose loss is above ``spike_factor`` (1.5) x the *running loss*. The running loss is the median of
the finite losses of the previous ``window`` (20) metric rows, once at least ``min_history`` (5)
are there; a median, not an EMA, so that one earlier outlier does not move it and there is no decay
to tune. When a step is logged twice (a run resumed from a checkpoint logs those steps again) the
later row counts.

The choice: the newest healthy checkpoint saved before the first spike (newest overall when there
is none). A checkpoint at step C holds the weights after C updates; the loss logged at step S was
computed before update S, which is already in a checkpoint at step S, so a checkpoint at the spike's
step counts as after it. With a spike, the batches to skip run from C + 1 (the first batch the
resumed run would read) through S + ``margin_steps`` (100; PaLM skipped about 200–500 batches around
each spike), numbering batches like steps (one global batch per optimizer step). Checkpoints are
verified newest first and only until the choice is made, so older ones are never read.

When no checkpoint can be chosen — none in the listing, or none healthy before the spike — a
``NeedsOperatorError`` lists every checkpoint's problem: a person decides, the code never guesses.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, BinaryIO

from acme.errors import AcmeError, InputError

if TYPE_CHECKING:
    from acme.lake import Lake

SPIKE_FACTOR = 1.5
SPIKE_WINDOW = 20
SPIKE_MIN_HISTORY = 5
MARGIN_STEPS = 100

_STEP_FOLDER = re.compile(r"step_(\d+)")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_HASH_CHUNK = 8 * 2**20


class NeedsOperatorError(AcmeError):
    """No checkpoint can be chosen safely; a person has to decide how the job restarts."""

    def __init__(self, problem: str, skipped: Sequence[SkippedCheckpoint] = ()):
        self.problem = problem
        self.skipped = tuple(skipped)
        details = "; ".join(f"step {s.step}: {s.reason}" for s in self.skipped)
        message = f"{problem}: a person must decide how to restart"
        super().__init__(f"{message} ({details})" if details else message)


@dataclass(frozen=True)
class StoredObject:
    """One object of the listing: its path, size in bytes and, when the store knows it, its sha256 (hex)."""

    path: str
    size: int
    checksum: str | None = None


@dataclass(frozen=True)
class CheckpointFolder:
    """The objects of one ``step_<N>/`` folder, by path relative to the folder."""

    step: int
    path: str
    objects: dict[str, StoredObject] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricRow:
    step: int
    loss: float
    grad_norm: float | None = None


@dataclass(frozen=True)
class LossSpike:
    """The first step whose loss or grad norm says the training diverged, and why."""

    step: int
    loss: float
    grad_norm: float | None
    running_loss: float | None
    why: str


@dataclass(frozen=True)
class SkippedCheckpoint:
    step: int
    path: str
    reason: str


@dataclass(frozen=True)
class BatchRange:
    """Batches ``first`` through ``last`` (inclusive), numbered like the steps that read them."""

    first: int
    last: int


@dataclass(frozen=True)
class CheckpointChoice:
    """The checkpoint to restart from, why, the newer ones passed over, and the batches to skip."""

    step: int
    path: str
    reason: str
    skipped: tuple[SkippedCheckpoint, ...] = ()
    skip_batches: tuple[BatchRange, ...] = ()
    spike: LossSpike | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "path": self.path,
            "reason": self.reason,
            "skipped": [{"step": s.step, "path": s.path, "reason": s.reason} for s in self.skipped],
            "skip_batches": [{"first": r.first, "last": r.last} for r in self.skip_batches],
            "spike": None if self.spike is None else _spike_dict(self.spike),
        }


def _spike_dict(spike: LossSpike) -> dict[str, Any]:
    # JSON has no NaN/Inf: say them as text.
    def number(value: float | None) -> float | str | None:
        return value if value is None or math.isfinite(value) else str(value)

    return {
        "step": spike.step,
        "loss": number(spike.loss),
        "grad_norm": number(spike.grad_norm),
        "running_loss": spike.running_loss,
        "why": spike.why,
    }


# --- the listing --------------------------------------------------------------------------------


def find_checkpoints(listing: Iterable[StoredObject | tuple]) -> dict[int, CheckpointFolder]:
    """The listing's checkpoint folders by step; objects outside any ``step_<N>/`` folder are ignored."""
    folders: dict[int, CheckpointFolder] = {}
    for entry in listing:
        stored = _stored_object(entry)
        parts = stored.path.split("/")
        depth = next((i for i, part in enumerate(parts[:-1]) if _STEP_FOLDER.fullmatch(part)), None)
        if depth is None:
            continue
        step = int(parts[depth].removeprefix("step_"))
        folder_path = "/".join(parts[: depth + 1])
        folder = folders.setdefault(step, CheckpointFolder(step=step, path=folder_path))
        if folder.path != folder_path:
            raise InputError(
                "checkpoint listing",
                f"step {step} is in two folders, {folder.path} and {folder_path}: list one run's prefix",
            )
        folder.objects["/".join(parts[depth + 1 :])] = stored
    return folders


def _stored_object(entry: StoredObject | tuple) -> StoredObject:
    if isinstance(entry, StoredObject):
        stored = entry
    elif isinstance(entry, tuple | list) and len(entry) in (2, 3):
        stored = StoredObject(*entry)
    else:
        raise InputError("checkpoint listing", f"{entry!r} is not (path, size) or (path, size, sha256)")
    if not isinstance(stored.path, str) or not stored.path:
        raise InputError("checkpoint listing", f"{entry!r} has no path")
    if isinstance(stored.size, bool) or not isinstance(stored.size, int) or stored.size < 0:
        raise InputError("checkpoint listing", f"{stored.path}: size {stored.size!r} is not a byte count")
    return stored


def check_checkpoint(
    folder: CheckpointFolder,
    read_object: Callable[[str], bytes],
    read_shard: Callable[[str], bytes | BinaryIO] | None = None,
) -> str | None:
    """Why the checkpoint cannot be restarted from, or None when it is healthy.

    ``read_object`` reads the manifest; ``read_shard`` (bytes or a binary file) is only called to
    compare each shard's sha256 with the manifest, which reads every byte of the checkpoint.
    """
    try:
        shards = _read_manifest(folder, read_object)
        _check_listed_shards(folder, shards)
        if read_shard is not None:
            _check_shard_contents(folder, shards, read_shard)
    except _Unhealthy as problem:
        return str(problem)
    return None


class _Unhealthy(Exception):
    """Why a checkpoint cannot be restarted from (``check_checkpoint`` returns the message)."""


def _read_manifest(
    folder: CheckpointFolder, read_object: Callable[[str], bytes]
) -> dict[str, tuple[int, str]]:
    """The manifest's shards (path -> size, sha256); a missing, unreadable or corrupt manifest is unhealthy."""
    if "manifest.json" not in folder.objects:
        raise _Unhealthy("partial: no manifest.json (the save did not finish)")
    try:
        raw = read_object(f"{folder.path}/manifest.json")
    except (OSError, KeyError) as exc:
        raise _Unhealthy(f"manifest unreadable: {exc}") from None
    try:
        return _manifest_shards(json.loads(raw), folder.step)
    except ValueError as exc:
        raise _Unhealthy(f"corrupt manifest: {exc}") from None


def _check_listed_shards(folder: CheckpointFolder, shards: dict[str, tuple[int, str]]) -> None:
    """Every shard is in the listing with the manifest's size (and sha256, when the listing has one)."""
    missing = [path for path in shards if path not in folder.objects]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise _Unhealthy(f"partial: {len(missing)} of {len(shards)} shards missing ({shown})")
    for path, (size, sha256) in shards.items():
        stored = folder.objects[path]
        if stored.size != size:
            raise _Unhealthy(f"partial: shard {path} is {stored.size} bytes, the manifest says {size}")
        if stored.checksum is not None and stored.checksum.lower() != sha256:
            raise _Unhealthy(
                f"checksum mismatch: shard {path} is stored with sha256 {stored.checksum}, "
                f"the manifest says {sha256}"
            )


def _check_shard_contents(
    folder: CheckpointFolder,
    shards: dict[str, tuple[int, str]],
    read_shard: Callable[[str], bytes | BinaryIO],
) -> None:
    """Every shard's bytes hash to the manifest's sha256 (reads the whole checkpoint)."""
    for path, (_, sha256) in shards.items():
        try:
            actual = _sha256_of(read_shard(f"{folder.path}/{path}"))
        except OSError as exc:
            raise _Unhealthy(f"shard {path} unreadable: {exc}") from None
        if actual != sha256:
            raise _Unhealthy(
                f"checksum mismatch: shard {path} has sha256 {actual}, the manifest says {sha256}"
            )


def _manifest_shards(manifest: Any, step: int) -> dict[str, tuple[int, str]]:
    """Shard path -> (size, sha256) from a parsed manifest; ValueError says what is wrong with it."""
    if not isinstance(manifest, dict):
        raise ValueError("not a JSON object")
    if "step" in manifest and manifest["step"] != step:
        raise ValueError(f"says step {manifest['step']!r} in the folder of step {step}")
    shards = manifest.get("shards")
    if not isinstance(shards, list) or not shards:
        raise ValueError("no 'shards' list")
    checked: dict[str, tuple[int, str]] = {}
    for number, shard in enumerate(shards, start=1):
        if not isinstance(shard, dict):
            raise ValueError(f"shard {number} is not an object")
        path, size, sha256 = shard.get("path"), shard.get("size"), shard.get("sha256")
        if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"shard {number} has no path inside the folder: {path!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"shard {path} has no byte size: {size!r}")
        if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256.lower()):
            raise ValueError(f"shard {path} has no sha256: {sha256!r}")
        if path in checked:
            raise ValueError(f"shard {path} is listed twice")
        checked[path] = (size, sha256.lower())
    return checked


def _sha256_of(content: bytes | BinaryIO) -> str:
    digest = hashlib.sha256()
    if isinstance(content, bytes | bytearray | memoryview):
        digest.update(content)
        return digest.hexdigest()
    try:
        while chunk := content.read(_HASH_CHUNK):
            digest.update(chunk)
    finally:
        content.close()
    return digest.hexdigest()


# --- training metrics -------------------------------------------------------------------------


def read_training_metrics(data: bytes | str, source: str) -> list[MetricRow]:
    """Metric rows sorted by step from a CSV (with a header) or JSON-lines file named ``source``."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    lowered = source.lower()
    if lowered.endswith(".csv"):
        as_json = False
    elif lowered.endswith((".jsonl", ".ndjson", ".json")):
        as_json = True
    else:
        as_json = text.lstrip().startswith("{")
    rows = _metrics_from_json_lines(text, source) if as_json else _metrics_from_csv(text, source)
    by_step: dict[int, MetricRow] = {}
    for row in rows:
        by_step[row.step] = row  # a step logged again after a resume: the later row counts
    if not by_step:
        raise InputError(source, "no metric rows")
    return [by_step[step] for step in sorted(by_step)]


def _metrics_from_json_lines(text: str, source: str) -> list[MetricRow]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise InputError(source, f"not JSON: {exc}", line=number) from None
        if not isinstance(record, dict):
            raise InputError(source, "a JSON line is not an object", line=number)
        rows.append(_metric_row(record, source, number))
    return rows


def _metrics_from_csv(text: str, source: str) -> list[MetricRow]:
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip() for name in reader.fieldnames or []]
    if "step" not in header or "loss" not in header:
        raise InputError(source, f"the CSV header {header} lacks step and loss columns", line=1)
    reader.fieldnames = header
    return [_metric_row(record, source, reader.line_num) for record in reader]


def _metric_row(record: dict[str, Any], source: str, line: int) -> MetricRow:
    def number(name: str) -> float | None:
        value = record.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        try:
            return float(value)
        except (TypeError, ValueError):
            raise InputError(source, f"{name} {value!r} is not a number", line=line) from None

    def required(name: str) -> float:
        value = number(name)
        if value is None:
            raise InputError(source, f"no {name}", line=line)
        return value

    step = required("step")
    if not math.isfinite(step) or step < 0 or step != int(step):
        raise InputError(source, f"step {record.get('step')!r} is not a step number", line=line)
    return MetricRow(step=int(step), loss=required("loss"), grad_norm=number("grad_norm"))


def find_first_spike(
    metrics: Sequence[MetricRow],
    spike_factor: float = SPIKE_FACTOR,
    window: int = SPIKE_WINDOW,
    min_history: int = SPIKE_MIN_HISTORY,
) -> LossSpike | None:
    """The first row (by step) whose loss or grad norm is NaN/Inf, or whose loss jumps (module doc)."""
    if spike_factor <= 1.0 or window < 1 or not 1 <= min_history <= window:
        raise InputError(
            "spike rule",
            f"needs factor > 1 and 1 <= min_history <= window; got {spike_factor}, {min_history}, {window}",
        )
    history: list[float] = []
    for row in sorted(metrics, key=lambda r: r.step):
        if not math.isfinite(row.loss):
            return LossSpike(
                row.step, row.loss, row.grad_norm, _median(history, window), f"loss is {row.loss}"
            )
        if row.grad_norm is not None and not math.isfinite(row.grad_norm):
            why = f"grad norm is {row.grad_norm}"
            return LossSpike(row.step, row.loss, row.grad_norm, _median(history, window), why)
        running = _median(history, window) if len(history) >= min_history else None
        if running is not None and running > 0 and row.loss > spike_factor * running:
            why = f"loss {row.loss:.4g} > {spike_factor:g} x running median {running:.4g} of the previous {min(len(history), window)} rows"
            return LossSpike(row.step, row.loss, row.grad_norm, running, why)
        history.append(row.loss)
    return None


def _median(history: list[float], window: int) -> float | None:
    return statistics.median(history[-window:]) if history else None


# --- the choice -------------------------------------------------------------------------------


def choose_checkpoint(
    listing: Iterable[StoredObject | tuple],
    read_object: Callable[[str], bytes],
    metrics: Sequence[MetricRow] | None = None,
    read_shard: Callable[[str], bytes | BinaryIO] | None = None,
    spike_factor: float = SPIKE_FACTOR,
    window: int = SPIKE_WINDOW,
    min_history: int = SPIKE_MIN_HISTORY,
    margin_steps: int = MARGIN_STEPS,
) -> CheckpointChoice:
    """The newest healthy checkpoint before the first loss spike, with the batches to skip (module doc).

    Raises ``NeedsOperatorError`` when the listing holds no checkpoint or none is healthy and before
    the spike.
    """
    if margin_steps < 0:
        raise InputError("margin_steps", f"must be 0 or more; got {margin_steps}")
    entries = list(listing)
    folders = find_checkpoints(entries)
    if not folders:
        raise NeedsOperatorError(
            f"no checkpoint folder (…/step_<N>/) among the {len(entries)} listed objects"
        )
    spike = find_first_spike(metrics, spike_factor, window, min_history) if metrics else None
    skipped: list[SkippedCheckpoint] = []
    for step in sorted(folders, reverse=True):
        folder = folders[step]
        if spike is not None and step >= spike.step:
            reason = f"saved at or after the loss spike at step {spike.step} ({spike.why})"
            skipped.append(SkippedCheckpoint(step, folder.path, reason))
            continue
        problem = check_checkpoint(folder, read_object, read_shard)
        if problem is not None:
            skipped.append(SkippedCheckpoint(step, folder.path, problem))
            continue
        return CheckpointChoice(
            step=step,
            path=folder.path,
            reason=_choice_reason(step, spike, metrics, len(skipped)),
            skipped=tuple(skipped),
            skip_batches=(BatchRange(step + 1, spike.step + margin_steps),) if spike is not None else (),
            spike=spike,
        )
    where = f" before the loss spike at step {spike.step}" if spike is not None else ""
    raise NeedsOperatorError(f"none of the {len(folders)} checkpoints is healthy{where}", skipped)


def _choice_reason(
    step: int, spike: LossSpike | None, metrics: Sequence[MetricRow] | None, passed_over: int
) -> str:
    newer = f"; {passed_over} newer checkpoint(s) passed over" if passed_over else ""
    if spike is not None:
        return (
            f"newest healthy checkpoint before the first loss spike at step {spike.step} ({spike.why}){newer}"
        )
    if not metrics:
        return f"newest healthy checkpoint; no training metrics given, so no loss-spike check{newer}"
    last = max(row.step for row in metrics)
    unchecked = f"; metrics end at step {last}, so steps after it were not checked" if last < step else ""
    return f"newest healthy checkpoint; no loss spike in the metrics{unchecked}{newer}"


def listing_from_lake(lake: Lake, prefix: str) -> list[StoredObject]:
    """Every object under ``prefix`` with its size, from one listing of the store (keys, no checksums)."""
    return [StoredObject(item.key, item.size) for item in lake.find(prefix)]


def choose_checkpoint_in_lake(
    lake: Lake,
    prefix: str,
    metrics_key: str | None = None,
    verify_checksums: bool = False,
    **rules: Any,
) -> CheckpointChoice:
    """``choose_checkpoint`` on the checkpoints under ``prefix`` of the lake; paths come back as URLs.

    ``metrics_key`` is the run's metrics file (CSV or JSON lines); ``verify_checksums`` reads every
    shard of the candidate checkpoints to compare its sha256 with the manifest.
    """
    metrics = None
    if metrics_key is not None:
        if not lake.exists(metrics_key):
            raise InputError(lake.url(metrics_key), "no such metrics file")
        metrics = read_training_metrics(lake.read_bytes(metrics_key), lake.url(metrics_key))

    def open_shard(key: str) -> BinaryIO:
        return lake.open(key)

    try:
        choice = choose_checkpoint(
            listing_from_lake(lake, prefix),
            lake.read_bytes,
            metrics,
            read_shard=open_shard if verify_checksums else None,
            **rules,
        )
    except NeedsOperatorError as exc:
        raise NeedsOperatorError(
            f"{exc.problem} under {lake.url(prefix)}",
            [replace(s, path=lake.url(s.path)) for s in exc.skipped],
        ) from None
    return replace(
        choice,
        path=lake.url(choice.path),
        skipped=tuple(replace(s, path=lake.url(s.path)) for s in choice.skipped),
    )
