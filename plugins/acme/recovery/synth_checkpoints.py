"""Synthesized checkpoint folders (manifest + shards), the way a training job saves them: for the demo,
the benchmarks and the recovery tests (real files: the checkpoint checks read them as they would a job's)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def write_checkpoint(
    root: Path, step: int, shards: int = 2, missing: int = 0, manifest: str | None = None
) -> Path:
    """``root/step_<step>/`` with ``shards`` shard files and a manifest naming them.

    ``missing`` leaves out that many shard files (a save that did not finish); ``manifest`` replaces
    the manifest text (a corrupt manifest).
    """
    folder = root / f"step_{step}"
    (folder / "model").mkdir(parents=True, exist_ok=True)
    entries = []
    for rank in range(shards):
        data = f"weights of rank {rank} at step {step}\n".encode() * 64
        path = f"model/rank_{rank:02d}.pt"
        if rank < shards - missing:
            (folder / path).write_bytes(data)
        entries.append({"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    text = manifest if manifest is not None else json.dumps({"step": step, "shards": entries})
    (folder / "manifest.json").write_text(text)
    return folder
