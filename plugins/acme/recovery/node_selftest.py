"""What validating one cordoned node runs on it, and how its output reads (the same program on every backend).

One shell line on the node (a command over ``ACME_VALIDATION_NODE_COMMAND`` on Slurm, a pod pinned to the
node on Kubernetes; the simulated backend writes the same output) runs, with standard error folded in:

1. the **self-test**: ``python -m torch.distributed.run --standalone --nnodes=1 --nproc-per-node=R
   allgather_check.py --timeout-s T …`` (``ACME_NODE_NAME=NODE``): R ranks (one per GPU) all-gather and multiply
   matrices; each rank's report line (``acme.recovery.allgather_check``) carries its all-gather time, the
   data it sent, its device and that GPU's free and total memory;
2. when the level is above 0, **``dcgmi diag -r LEVEL -j``** (NVIDIA DCGM's diagnostic, JSON).

Marker lines (``acme-validate <part>-start|end <UTC time> [exit status]``) frame both parts, so
``read_node_output`` finds each part's time, exit status and output. The judgement against the thresholds
is ``acme.recovery.validation``'s.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from acme.recovery.allgather_check import check_reports

MARKER = "acme-validate"

# A constant script: the level and the self-test's argument list are positional arguments ("$@").
NODE_SCRIPT = (
    "exec 2>&1; level=$1; shift; "
    f'echo "{MARKER} selftest-start $(date -u +%Y-%m-%dT%H:%M:%SZ)"; "$@"; status=$?; '
    f'echo "{MARKER} selftest-end $(date -u +%Y-%m-%dT%H:%M:%SZ) $status"; '
    'if [ "$level" -gt 0 ]; then '
    f'echo "{MARKER} dcgm-start $(date -u +%Y-%m-%dT%H:%M:%SZ)"; dcgmi diag -r "$level" -j; status=$?; '
    f'echo "{MARKER} dcgm-end $(date -u +%Y-%m-%dT%H:%M:%SZ) $status"; fi'
)


@dataclass(frozen=True)
class ValidationSpec:
    """How one validation runs on a node: its id (names pods), ranks, DCGM level, self-test timeout and
    extra self-test arguments (``ACME_RECOVERY_CHECK_ARGS``)."""

    validation_id: str
    ranks: int
    dcgm_level: int
    timeout_s: float
    check_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeMeasurements:
    """What came back from one node: the self-test's rank reports and the DCGM diagnostic, with times.

    ``problem`` says why the node could not be measured at all (no output, a launcher error); the checks
    then fail with it. ``dcgm`` is dcgmi's JSON document (None when it did not run or printed none).
    """

    node: str
    backend: str
    reports: tuple[dict[str, Any], ...] = ()
    selftest_exit: int | None = None
    selftest_started_at: str = ""
    selftest_ended_at: str = ""
    dcgm_level: int = 0
    dcgm: dict[str, Any] | None = None
    dcgm_exit: int | None = None
    dcgm_started_at: str = ""
    dcgm_ended_at: str = ""
    dcgm_output: str = ""
    problem: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def node_program(spec: ValidationSpec, node: str, python: str, script: str) -> list[str]:
    """The argument list run on ``node`` (``sh -c NODE_SCRIPT`` with the level and the self-test)."""
    # The node's name goes in the environment: torchrun's parser would take ``--node`` for ``--node-rank``.
    selftest = [
        "env", f"ACME_NODE_NAME={node}", python, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
        f"--nproc-per-node={spec.ranks}", script, "--timeout-s", f"{spec.timeout_s:g}", *spec.check_args,
    ]  # fmt: skip
    return ["sh", "-c", NODE_SCRIPT, "sh", str(spec.dcgm_level), *selftest]


def _markers(lines: Sequence[str]) -> dict[str, tuple[int, str, int | None]]:
    """``part-start``/``part-end`` → (line index, time, exit status)."""
    found: dict[str, tuple[int, str, int | None]] = {}
    for index, line in enumerate(lines):
        words = line.split()
        if len(words) >= 3 and words[0] == MARKER:
            status = int(words[3]) if len(words) > 3 and words[3].lstrip("-").isdigit() else None
            found[words[1]] = (index, words[2], status)
    return found


def dcgm_document(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (dcgmi prints it indented over many lines), None when none."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start >= 0:
        try:
            document, _ = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(document, dict):
            return document
        start = text.find("{", start + 1)
    return None


def read_node_output(text: str, node: str, backend: str, level: int) -> NodeMeasurements:
    """The measurements in the node's output (module docstring); ``problem`` when the program never ran."""
    lines = text.splitlines()
    marks = _markers(lines)
    if "selftest-start" not in marks:
        tail = "\n".join(lines[-5:]).strip() or "no output"
        return NodeMeasurements(
            node, backend, dcgm_level=level, problem=f"the validation did not start: {tail}"
        )
    begin, end = marks["selftest-start"], marks.get("selftest-end")
    selftest_text = "\n".join(lines[begin[0] + 1 : end[0] if end else len(lines)])
    values: dict[str, Any] = {
        "reports": tuple(check_reports(selftest_text)),
        "selftest_exit": end[2] if end else None,
        "selftest_started_at": begin[1],
        "selftest_ended_at": end[1] if end else "",
    }
    if "dcgm-start" in marks:
        dcgm_begin, dcgm_end = marks["dcgm-start"], marks.get("dcgm-end")
        output = "\n".join(lines[dcgm_begin[0] + 1 : dcgm_end[0] if dcgm_end else len(lines)])
        values.update(
            dcgm=dcgm_document(output), dcgm_exit=dcgm_end[2] if dcgm_end else None,
            dcgm_started_at=dcgm_begin[1], dcgm_ended_at=dcgm_end[1] if dcgm_end else "",
            dcgm_output=output[-2000:],
        )  # fmt: skip
    return NodeMeasurements(node, backend, dcgm_level=level, **values)


# --- the simulated node -------------------------------------------------------------------------------

DCGM_TESTS = {
    1: [("Deployment", ["software"])],
    2: [("Deployment", ["software"]), ("Integration", ["pcie"]), ("Hardware", ["memory"])],
    3: [("Deployment", ["software"]), ("Integration", ["pcie"]), ("Hardware", ["memory", "diagnostic"]),
        ("Stress", ["targeted_stress", "targeted_power", "memory_bandwidth"])],
}  # fmt: skip
DCGM_TESTS[4] = [*DCGM_TESTS[3], ("Stress", ["memtest", "pulse_test"])]
SIMULATED_GPU_GB = 80.0
SIMULATED_BUSBW_GBPS = 205.0


def _simulated_dcgm(level: int, gpus: int, failing: bool) -> dict[str, Any]:
    """A ``dcgmi diag -j`` document: every test of the level passes on every GPU, except (``failing``)
    the memory test on GPU 3 with a double-bit ECC error."""
    categories = []
    for category, tests in DCGM_TESTS[min(level, 4)]:
        entries = []
        for name in tests:
            results = []
            for gpu in range(gpus):
                broken = failing and name == "memory" and gpu == min(3, gpus - 1)
                result: dict[str, Any] = {"entity_id": gpu, "status": "Fail" if broken else "Pass"}
                if broken:
                    result["warnings"] = [{"message": f"GPU {gpu}: ecc_dbe_volatile_total is 2 (DBE)"}]
                results.append(result)
            entries.append({"name": name, "results": results})
        categories.append({"category": category, "tests": entries})
    return {"DCGM GPU Diagnostic": {"test_categories": categories}, "version": "4.3.1"}


def _simulated_report(node: str, rank: int, spec: ValidationSpec, fault: str, rng: random.Random) -> dict:
    megabytes = 64.0
    busbw = SIMULATED_BUSBW_GBPS * (0.2 if fault == "nccl_bandwidth" else 1.0) * (1 + rng.gauss(0, 0.02))
    allgather_s = (spec.ranks - 1) * megabytes * 2**20 / (busbw * 1e9) if spec.ranks > 1 else 0.0004
    free = SIMULATED_GPU_GB * (0.62 if fault == "gpu_memory" and rank == 1 else 0.99)
    report = {
        "check": "acme-allgather-check", "node": node, "rank": rank, "world_size": spec.ranks,
        "local_rank": rank, "backend": "nccl", "device": f"cuda:{rank}", "allgather_mb": megabytes,
        "gpu_memory": {"free_gb": round(free, 2), "total_gb": SIMULATED_GPU_GB},
        "phases": {"init_s": 1.1, "connect_s": 0.4, "allgather_s": round(allgather_s, 6), "matmul_s": 0.31},
        "ok": True, "error": "", "phase": "done",
    }  # fmt: skip
    if fault == "allgather" and rank == 0:
        report.update(ok=False, phase="allgather", error="DistBackendError in phase allgather: NCCL error: "
                      "unhandled cuda error (run with NCCL_DEBUG=INFO for details)")  # fmt: skip
    return report


def simulated_node_output(node: str, spec: ValidationSpec, fault: str | None, started_at: str) -> str:
    """What ``node_program`` would print on a healthy node, or on one with ``fault`` (a check's name)."""
    rng = random.Random(f"{spec.validation_id}:{node}")
    lines = [f"{MARKER} selftest-start {started_at}"]
    reports = [_simulated_report(node, rank, spec, fault or "", rng) for rank in range(spec.ranks)]
    lines += [json.dumps(report) for report in reports]
    lines.append(f"{MARKER} selftest-end {started_at} {1 if fault == 'allgather' else 0}")
    if spec.dcgm_level > 0:
        failing = fault == "dcgm_diag"
        lines.append(f"{MARKER} dcgm-start {started_at}")
        lines += json.dumps(_simulated_dcgm(spec.dcgm_level, spec.ranks, failing), indent=2).splitlines()
        lines.append(f"{MARKER} dcgm-end {started_at} {226 if failing else 0}")
    return "\n".join(lines) + "\n"


def unmeasured(
    node: str, backend: str, problem: str, details: Mapping[str, Any] | None = None
) -> NodeMeasurements:
    """A node that could not be measured, and why (its checks fail with ``problem``)."""
    return NodeMeasurements(node, backend, problem=problem, details=dict(details or {}))
