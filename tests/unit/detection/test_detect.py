"""The hang and fail-slow detectors on synthesized training telemetry (acme.metrics.synth episodes, the nodes'
storage writes of acme.detection.scenario), and the healthy pauses they must leave alone."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from acme.detection.detect import FAIL_SLOW, HANG, STALL, detect_job
from acme.detection.scenario import storage_writes
from acme.detection.telemetry import telemetry_from_synth
from acme.metrics.synth import Episode, TrainingJob, synth_training_cluster
from acme.settings import DetectionSettings

STEP_S = 15
PER_MIN = 60 // STEP_S
SETTINGS = DetectionSettings()
NODES = 4


def minute(m: float) -> int:
    return int(m * PER_MIN)


def job_telemetry(episodes: list[Episode], nodes: int = NODES, seed: int = 3, storage: bool = True):
    """A ``nodes``-node job running the whole (short) day, with ``episodes``; all of its nodes
    (``storage``: with their storage writes, else those are unknown)."""
    job = TrainingJob("j", 0, nodes, 0, 86400 // STEP_S)
    synth = synth_training_cluster(
        "seren", nodes, date(2024, 4, 1), 1, [job], episodes, seed=seed, step_s=STEP_S
    )
    return telemetry_from_synth(synth, storage_writes(synth, [job], seed) if storage else None)


def window(t, end_step: int, minutes: float | None = None):
    """What a detection at ``end_step`` sees: the trailing window (the DAG's default length)."""
    return t.span(max(0, end_step - minute(minutes or SETTINGS.lookback_minutes)), end_step)


ALL = tuple(range(NODES))
ONSET = minute(120)


def test_healthy_training_raises_nothing():
    t = job_telemetry([])
    assert all(detect_job(window(t, minute(m)), SETTINGS) is None for m in range(20, 600, 7))


def test_a_stuck_collective_is_a_hang_after_hang_minutes_and_not_before():
    t = job_telemetry([Episode("hang", ALL, ONSET, ONSET + minute(30))])
    assert detect_job(window(t, ONSET + minute(2.25)), SETTINGS) is None
    found = detect_job(window(t, ONSET + minute(2.5)), SETTINGS)
    assert found is not None and found.kind == HANG and found.minutes == 2.5
    assert found.since == "2024-04-01T02:00:00Z"
    assert found.nodes == list(t.nodes)  # no culprit: the whole job is suspect
    assert "32/32 GPUs" in found.evidence[0] and "max 0 B/s" in found.evidence[0]
    assert detect_job(window(t, ONSET + minute(31)), SETTINGS) is None  # the watchdog killed it: over


def test_the_gpus_out_of_the_collective_are_named():
    t = job_telemetry(
        [Episode("hang", ALL, ONSET, ONSET + minute(30)), Episode("stall", (2,), ONSET, ONSET + minute(30))]
    )
    found = detect_job(window(t, ONSET + minute(3)), SETTINGS)
    assert found.kind == HANG and found.nodes == [t.nodes[2]]
    assert f"{t.nodes[2]}/gpu0" in found.evidence[1] and t.nodes[1] not in found.evidence[1]


def test_a_stall_without_kernels_waits_for_stall_minutes():
    t = job_telemetry([Episode("stall", ALL, ONSET, ONSET + minute(30))])
    assert detect_job(window(t, ONSET + minute(9.75)), SETTINGS) is None
    found = detect_job(window(t, ONSET + minute(10)), SETTINGS)
    assert found is not None and found.kind == STALL and found.minutes == 10


@pytest.mark.parametrize(
    "episodes",
    [
        [Episode("checkpoint", ALL, ONSET, ONSET + minute(6))],
        # every rank writes 3 min, then all but node 1 wait 5 min in a barrier for it: a hang's signature
        [Episode("checkpoint", ALL, ONSET, ONSET + minute(3)),
         Episode("barrier", (0, 2, 3), ONSET + minute(3), ONSET + minute(8)),
         Episode("checkpoint", (1,), ONSET + minute(3), ONSET + minute(8))],
        [Episode("data_stall", ALL, ONSET, ONSET + minute(3))],
        [Episode("eval", ALL, ONSET, ONSET + minute(10))],
    ],
    ids=["checkpoint-6min", "checkpoint-then-barrier-5min", "data-stall-3min", "eval-10min"],
)  # fmt: skip
@pytest.mark.parametrize("storage", [True, False], ids=["storage-writes", "no-storage-telemetry"])
def test_healthy_pauses_are_not_hangs(episodes, storage):
    t = job_telemetry(episodes, storage=storage)
    for m in np.arange(0.25, 12, 0.25):
        assert detect_job(window(t, ONSET + minute(m)), SETTINGS) is None, m


def checkpoint_then_hang(storage: bool):
    """Every node writes its checkpoint from 3 min before the onset; at the onset the collective hangs (the
    write stops, the kernels spin): what the GPUs show is a checkpoint ending in its barrier."""
    return job_telemetry(
        [Episode("checkpoint", ALL, ONSET - minute(3), ONSET + minute(3)),
         Episode("hang", ALL, ONSET, ONSET + minute(30))],
        storage=storage,
    )  # fmt: skip


def test_a_hang_that_begins_during_a_checkpoint_write_is_found_in_hang_minutes_from_storage_writes():
    t = checkpoint_then_hang(storage=True)
    assert detect_job(window(t, ONSET + minute(2.25)), SETTINGS) is None
    found = detect_job(window(t, ONSET + minute(2.5)), SETTINGS)
    assert found is not None and found.kind == HANG and found.since == "2024-04-01T02:00:00Z"
    assert "no node writing to storage (<10.0 MB/s" in found.evidence[0]
    assert found.measures["max_storage_write_bps"] < SETTINGS.storage_write_bps


def test_without_storage_telemetry_a_hang_after_a_write_waits_for_the_stall_rule():
    t = checkpoint_then_hang(storage=False)
    for m in (2.5, 5, 6.75):  # a barrier wait for a slow writer would look the same
        assert detect_job(window(t, ONSET + minute(m)), SETTINGS) is None, m
    found = detect_job(window(t, ONSET + minute(7)), SETTINGS)  # 10 min since the pause began
    assert found is not None and found.kind == STALL and found.since == "2024-04-01T01:57:00Z"
    assert "not a checkpoint" not in found.evidence[0]


def test_a_writer_that_stops_mid_barrier_leaves_a_hang():
    """The ranks wait for node 1's write; 2 min in, the writer stops writing while the others still spin."""
    t = job_telemetry(
        [Episode("checkpoint", ALL, ONSET - minute(3), ONSET),
         Episode("barrier", (0, 2, 3), ONSET, ONSET + minute(30)),
         Episode("checkpoint", (1,), ONSET, ONSET + minute(2)),
         Episode("stall", (1,), ONSET + minute(2), ONSET + minute(30))],
    )  # fmt: skip
    assert detect_job(window(t, ONSET + minute(4.25)), SETTINGS) is None
    found = detect_job(window(t, ONSET + minute(4.5)), SETTINGS)
    assert found is not None and found.kind == HANG and found.since == "2024-04-01T02:02:00Z"
    assert found.nodes == [t.nodes[1]]  # the rank out of the collective


def test_storage_writes_keep_a_long_checkpoint_from_looking_like_a_stall():
    """A 6-min write then a 6-min barrier wait: 12 min without progress. Writing, it is no stall; without
    storage telemetry the stall rule cannot tell (what the benchmark's fallback row measures)."""
    episodes = [Episode("checkpoint", ALL, ONSET, ONSET + minute(6)),
                Episode("barrier", (0, 2, 3), ONSET + minute(6), ONSET + minute(12)),
                Episode("checkpoint", (1,), ONSET + minute(6), ONSET + minute(12))]  # fmt: skip
    t = job_telemetry(episodes)
    assert all(detect_job(window(t, ONSET + minute(m)), SETTINGS) is None for m in np.arange(0.25, 14, 0.25))
    blind = job_telemetry(episodes, storage=False)
    assert detect_job(window(blind, ONSET + minute(10)), SETTINGS).kind == STALL


def test_missing_telemetry_is_not_idleness():
    t = job_telemetry([Episode("hang", ALL, ONSET, ONSET + minute(30))])
    gone = ONSET + minute(1)
    for grid in (t.sm, t.tensor, t.util, t.ib, t.write):
        grid[:, gone:] = np.nan  # the exporters stopped answering a minute into the hang
    for m in (3, 5, 12):
        assert detect_job(window(t, ONSET + minute(m)), SETTINGS) is None


def test_a_job_without_infiniband_telemetry_is_judged_on_gpu_signals_and_says_so():
    t = job_telemetry([Episode("hang", ALL, ONSET, ONSET + minute(30))])
    t.ib[:] = np.nan
    found = detect_job(window(t, ONSET + minute(3)), SETTINGS)
    assert found.kind == HANG and "no InfiniBand telemetry" in found.evidence[0]


def test_a_straggler_is_fail_slow_after_three_windows_with_its_node_named():
    t = job_telemetry([Episode("straggler", (1,), ONSET, ONSET + minute(120), factor=0.5)])
    # The oldest of the three windows must be mostly slow too: about 13 min after the onset.
    assert detect_job(window(t, ONSET + minute(12)), SETTINGS) is None
    found = detect_job(window(t, ONSET + minute(15)), SETTINGS)
    assert found is not None and found.kind == FAIL_SLOW and found.nodes == [t.nodes[1]]
    assert 0.4 < found.measures[t.nodes[1]]["sm_ratio"] < 0.6
    assert "3 consecutive 5-min windows" in found.evidence[0]


def test_fail_slow_needs_a_majority_to_compare_with():
    two = job_telemetry([Episode("straggler", (1,), ONSET, ONSET + minute(120), factor=0.4)], nodes=2)
    assert detect_job(window(two, ONSET + minute(30)), SETTINGS) is None
    half = job_telemetry([Episode("straggler", (0, 1), ONSET, ONSET + minute(120), factor=0.4)])
    assert detect_job(window(half, ONSET + minute(30)), SETTINGS) is None  # the job's own slowdown


def test_an_evaluation_pause_is_not_compared_across_nodes():
    t = job_telemetry([Episode("eval", ALL, ONSET, ONSET + minute(20))])
    assert all(detect_job(window(t, ONSET + minute(m)), SETTINGS) is None for m in range(1, 25))


def test_settings_come_from_the_environment_and_bad_values_are_named(monkeypatch):
    from acme.errors import ConfigError

    monkeypatch.setenv("ACME_DETECT_HANG_MINUTES", "4")
    monkeypatch.setenv("ACME_DETECT_SLOW_RATIO", "0.5")
    monkeypatch.setenv("ACME_DETECT_STORAGE_WRITE_BPS", "5e6")
    monkeypatch.setenv("ACME_DETECT_STORAGE_WRITE_PROMQL", "none")
    settings = DetectionSettings.from_env()
    assert (settings.hang_minutes, settings.slow_ratio) == (4.0, 0.5)
    assert (settings.storage_write_bps, settings.storage_write_promql) == (5e6, "")
    monkeypatch.setenv("ACME_DETECT_STORAGE_WRITE_BPS", "0")
    with pytest.raises(ConfigError, match="ACME_DETECT_STORAGE_WRITE_BPS"):
        DetectionSettings.from_env()
    monkeypatch.delenv("ACME_DETECT_STORAGE_WRITE_BPS")
    monkeypatch.setenv("ACME_DETECT_SLOW_RATIO", "1.5")
    with pytest.raises(ConfigError, match="ACME_DETECT_SLOW_RATIO"):
        DetectionSettings.from_env()
