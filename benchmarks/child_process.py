"""Wall time, CPU time and peak RSS of a command run in a fresh process (shared by the benchmarks).

``subprocess.run`` reaps its child, so the peak RSS and CPU time of exactly one command are taken
from a wrapper process that runs nothing else: its ``RUSAGE_CHILDREN`` is that command's.
"""

from __future__ import annotations

import json
import subprocess
import sys

WRAPPER = (
    "import json, resource, subprocess, sys, time;"
    "t = time.perf_counter();"
    "p = subprocess.run(sys.argv[1:], capture_output=True);"
    "wall = time.perf_counter() - t;"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN);"
    "print(json.dumps({'rc': p.returncode, 'wall_s': wall, 'cpu_s': u.ru_utime + u.ru_stime,"
    " 'peak_rss_mb': u.ru_maxrss / 1024, 'out': p.stdout.decode(), 'err': p.stderr.decode()[-2000:]}))"
)


def measured_child(command: list[str], env: dict[str, str] | None = None) -> dict:
    """Run ``command``; returns ``wall_s``, ``cpu_s`` (user + system), ``peak_rss_mb`` and its
    stdout as ``out``. Exits with the command's stderr when it failed."""
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *command], capture_output=True, text=True, env=env, check=True
    )
    result = json.loads(done.stdout)
    if result["rc"] != 0:
        raise SystemExit(f"{' '.join(command[:4])} … failed (exit {result['rc']}): {result['err']}")
    del result["rc"], result["err"]
    return result
