"""Debian packages a test needs (Slurm, Prometheus, Chromium), installed with apt-get when missing.

Installs are serialized across processes with a lock file: the test workers of one run (pytest-xdist)
would otherwise meet on dpkg's own lock and fail.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

LOCK = Path(tempfile.gettempdir()) / "acme-tests-apt.lock"


def ensure_commands(commands: list[str], packages: list[str]) -> None:
    """Install ``packages`` unless every one of ``commands`` is on the PATH already."""
    if all(shutil.which(name) for name in commands):
        return
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if all(shutil.which(name) for name in commands):
            return  # another worker installed them while this one waited
        install = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if subprocess.run(install, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, check=True, capture_output=True)
            subprocess.run(install, env=env, check=True, capture_output=True)
    missing = [name for name in commands if not shutil.which(name)]
    if missing:
        raise RuntimeError(f"apt-get installed {' '.join(packages)} but {' '.join(missing)} is still missing")
