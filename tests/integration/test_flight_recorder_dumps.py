"""Real Flight Recorder dumps written live by the installed torch: a 4-rank gloo job on 127.0.0.1 in which
rank 3 skips an all_reduce (tests/flight_recorder_job.py), read by acme.recovery.flight_recorder, checked
against PyTorch's own analyzer (``torchfrtrace``) and against the committed fixture, then used by a
recovery that skips the two-round test."""

from __future__ import annotations

import pickle
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from acme.lake import Lake
from acme.recovery.actions import ActionLog
from acme.recovery.backend import SimulatedBackend
from acme.recovery.flight_recorder import analyse, read_dump_folder
from acme.recovery.recover import RecoveryRequest
from acme.recovery.synth_checkpoints import write_checkpoint
from acme.settings import recovery as recovery_settings
from tests.recovery_support import recover

# Four torch processes and the analyzer: about 40 s on two quiet cores, minutes on a loaded machine.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "flight_recorder_job.py"
FIXTURE = ROOT / "tests" / "fixtures" / "flight_recorder" / "skip_rank3_of4"
NODES = ["gpu-a", "gpu-b"]


def hang(out: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, str(JOB), "--out", str(out), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def live_dumps(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("flight_recorder") / "dumps"
    hang(out, "--ranks", "4", "--skip-rank", "3")
    return out


def calls(folder: Path) -> dict[int, list[tuple]]:
    """Each rank's (seq id, op, sizes, finished) as recorded: what must not differ between two runs."""
    found = {}
    for dump in read_dump_folder(str(folder)):
        found[dump.rank] = [(c.seq_id, c.op, c.input_sizes, c.output_sizes, c.done) for c in dump.collectives]
    return found


def test_the_live_dump_names_the_rank_that_skipped_the_all_reduce_and_its_node(live_dumps):
    assert sorted(p.name for p in live_dumps.iterdir()) == [f"nccl_trace_rank_{r}" for r in range(4)]
    verdict = analyse(read_dump_folder(str(live_dumps), NODES), NODES)
    assert verdict.conclusive, verdict.why
    assert [(b.rank, b.node, b.problem) for b in verdict.blamed] == [(3, "gpu-b", "never entered")]
    assert verdict.stuck[0].seq_id == 7 and verdict.stuck[0].call == "all_reduce [[8]]->[[8]]"


def test_the_live_dump_says_what_the_committed_fixture_says(live_dumps):
    assert calls(live_dumps) == calls(FIXTURE)


def test_pytorchs_own_analyzer_finds_the_same_missing_rank(live_dumps, tmp_path):
    # gloo's dumps list the default group's config under the name "", where torchfrtrace looks it up by
    # "0" (its entries' group name) and stops with a KeyError; a copy with the name set is read.
    for path in live_dumps.iterdir():
        document = pickle.loads(path.read_bytes())
        config = document["pg_config"].pop("")
        document["pg_config"]["0"] = {**config, "name": "0", "desc": "default_pg"}
        (tmp_path / path.name).write_bytes(pickle.dumps(document))
    analyzer = Path(sys.executable).with_name("torchfrtrace")
    done = subprocess.run([str(analyzer), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = done.stdout + done.stderr  # the analyzer reports through its logger
    assert "Not all ranks joining collective, sequence number: 7" in report
    assert "missing ranks: {3}" in report


def test_recovery_on_the_live_dump_cordons_rank_3s_node_without_the_two_round_test(live_dumps, tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    jobs = tmp_path / "jobs.yaml"
    nodes = ["n00", "n01", "n02", "n03"]
    jobs.write_text(f"clusters:\n  seren:\n    job-h: {{nodes: {nodes}}}\n")
    write_checkpoint(tmp_path / "ckpt", 100)
    request = RecoveryRequest.from_params(
        {"cluster": "seren", "job_id": "job-h", "nodes": nodes, "checkpoint_uri": str(tmp_path / "ckpt"),
         "flight_recorder_uri": str(live_dumps)},
        "r1", "manual__1", datetime(2026, 11, 29, 14, 0, tzinfo=UTC),
    )  # fmt: skip
    outcome = recover(lake, request, SimulatedBackend("seren", jobs, lake), recovery_settings())
    assert outcome["verdict"]["faulty"] == ["n03"]
    steps = [r["step"] for r in ActionLog(lake, "seren", "job-h", "r1").records()]
    assert "flight_recorder" in steps and "check_round1" not in steps and steps[-1] == "restart"
