"""The per-node precursor: copy a checkpoint from remote storage into node shared memory, once.

Decoupled model loading (Hu et al., NSDI'24, §6.2): instead of every trial streaming the checkpoint
over the node's NIC, one precursor per node fetches it into ``<shm_dir>/<model-id>/`` and every
trial on that node loads it from there.

Idempotent and safe under concurrency:

- the copy is written to ``<shm_dir>/.<model-id>.tmp-<uuid>/`` and published by one ``rename``,
  so a trial never sees half a model (the next precursor removes the staging folder of a killed one);
- ``<model-id>/_manifest.json`` records each file's size and SHA-256; a later precursor (a retry,
  a re-run, a second "node" on the same host) checks the sizes against the source and the
  checksums against the manifest and copies nothing when they match (a mismatch replaces the copy);
- an ``flock`` on ``<shm_dir>/.<model-id>.lock`` makes concurrent precursors of one host wait for
  the first instead of copying twice.

The source is a single file or a folder (sharded checkpoints), given as a local path, ``file://``
or any fsspec URL (``s3://…`` with the lake's storage options).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acme.errors import AcmeError, InputError

MANIFEST = "_manifest.json"
CHUNK = 8 << 20


def model_id_for(location: str) -> str:
    """A stable, path-safe id for a checkpoint location: readable tail + hash of the full URL."""
    stripped = location.rstrip("/")
    parts = [p for p in re.split(r"[/\\]", stripped) if p and not p.endswith(":")]
    parts = [re.sub(r"\.(pt|pth|bin|safetensors|ckpt|gguf)$", "", p) for p in parts]
    tail = "-".join(parts[-2:]) if parts else "model"
    tail = re.sub(r"[^A-Za-z0-9_.-]+", "-", tail).strip("-.")[:60] or "model"
    return f"{tail}-{hashlib.sha256(stripped.encode()).hexdigest()[:8]}"


class ModelNotPreloaded(AcmeError):
    """A trial found no model in its node's shared memory (transient: the precursor may still run)."""


@dataclass(frozen=True)
class PreloadResult:
    model_id: str
    path: str
    files: int
    bytes: int
    copied: bool
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _source_files(location: str, storage_options: dict | None) -> tuple[Any, list[tuple[str, str, int]]]:
    """(fs, [(source path, relative name, size)]) of a checkpoint file or folder."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(location, **(storage_options or {}))
    try:
        if fs.isdir(root):
            found = fs.find(root, detail=True)
            files = [
                (path, path[len(root.rstrip("/")) + 1 :], int(info["size"]))
                for path, info in sorted(found.items())
                if info.get("type") != "directory"
            ]
        else:
            files = [(root, os.path.basename(root.rstrip("/")), int(fs.size(root)))]
    except FileNotFoundError:
        raise InputError(location, "checkpoint not found") from None
    if not files:
        raise InputError(location, "checkpoint folder is empty")
    return fs, files


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _valid_copy(target: Path, expected: list[tuple[str, str, int]]) -> bool:
    manifest_path = target / MANIFEST
    if not manifest_path.exists():
        return False
    try:
        manifest = json.loads(manifest_path.read_text())["files"]
    except (ValueError, KeyError):
        return False
    if {name: size for _, name, size in expected} != {n: m["bytes"] for n, m in manifest.items()}:
        return False
    for name, meta in manifest.items():
        local = target / name
        if not local.is_file() or local.stat().st_size != meta["bytes"] or _sha256(local) != meta["sha256"]:
            return False
    return True


@contextlib.contextmanager
def _host_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def preload_model(
    location: str, shm_dir: Path, model_id: str | None = None, storage_options: dict | None = None
) -> PreloadResult:
    """Make ``<shm_dir>/<model-id>`` an exact copy of the checkpoint at ``location``."""
    started = time.perf_counter()
    model_id = model_id or model_id_for(location)
    shm_dir = Path(shm_dir)
    target = shm_dir / model_id
    fs, files = _source_files(location, storage_options)
    with _host_lock(shm_dir / f".{model_id}.lock"):
        if _valid_copy(target, files):
            total = sum(size for _, _, size in files)
            return PreloadResult(
                model_id, str(target), len(files), total, False, time.perf_counter() - started
            )
        # Copies are staged only under this lock: a staging folder seen now is a killed precursor's.
        for orphan in shm_dir.glob(f".{model_id}.tmp-*"):
            shutil.rmtree(orphan, ignore_errors=True)
        staging = shm_dir / f".{model_id}.tmp-{uuid.uuid4().hex}"
        try:
            manifest = {}
            for source, name, size in files:
                local = staging / name
                local.parent.mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha256()
                with fs.open(source, "rb") as reader, open(local, "wb") as writer:
                    while chunk := reader.read(CHUNK):
                        digest.update(chunk)
                        writer.write(chunk)
                if local.stat().st_size != size:
                    raise InputError(
                        location, f"{name}: copied {local.stat().st_size} bytes, source has {size}"
                    )
                manifest[name] = {"bytes": size, "sha256": digest.hexdigest()}
            (staging / MANIFEST).write_text(json.dumps({"source": location, "files": manifest}, indent=1))
            if target.exists():  # an invalid earlier copy: replace it
                shutil.rmtree(target)
            os.rename(staging, target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    total = sum(size for _, _, size in files)
    return PreloadResult(model_id, str(target), len(files), total, True, time.perf_counter() - started)


def loaded_model_file(shm_dir: Path, model_id: str) -> Path:
    """What a trial loads from node shared memory (the precursor must have run): the checkpoint's file,
    or its folder when it has several files (an HF checkpoint folder, shards)."""
    target = Path(shm_dir) / model_id
    manifest_path = target / MANIFEST
    if not manifest_path.exists():
        raise ModelNotPreloaded(f"{target}: model not in node shared memory; has this node's precursor run?")
    names = sorted(json.loads(manifest_path.read_text())["files"])
    return target / names[0] if len(names) == 1 else target
