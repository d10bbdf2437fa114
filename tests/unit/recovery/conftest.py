"""Fixtures the recovery tests share: an empty lake and a checkpoint folder with two healthy saves."""

from __future__ import annotations

from pathlib import Path

import pytest

from acme.lake import Lake
from acme.recovery.synth_checkpoints import write_checkpoint


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(str(tmp_path / "lake"))


@pytest.fixture
def checkpoints(tmp_path: Path) -> Path:
    root = tmp_path / "ckpt"
    write_checkpoint(root, 100)
    write_checkpoint(root, 200)
    return root
