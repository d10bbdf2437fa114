"""The two detectors on one job's telemetry grid (:class:`acme.detection.telemetry.Telemetry`).

* **Hang** -- every reporting GPU of the job shows no tensor-core work (``tensor_active`` <=
  ``hang_tensor_max``) and at most a spinning kernel's SM activity (``sm_active`` <= ``hang_sm_max``), and
  every reporting node moves no RDMA traffic (``ib_tx + ib_rx`` <= ``ib_idle_bps``), in every step of the
  last ``hang_minutes``, while at least half of the GPUs read ``gpu_util`` >= ``busy_util_min`` (a
  collective is resident and spinning). GPUs at low utilization while their peers spin are named: they
  left the collective (a crashed rank, a lost GPU) and are the first suspects. The same quiet for
  ``stall_minutes`` without a resident kernel is a **stall**. Neither rule counts a step in which a node
  writes at least ``storage_write_bps`` to the shared file system (``storage_write``): that is a
  checkpoint, whose end -- all ranks wait in a barrier for the slowest writer -- is a hang's exact
  signature. Spinning that began right after a pause is a hang only when the storage writes show that no
  node is still writing; where they are not published it waits for the stall rule's longer time, the
  only thing then telling a hang there from a slow writer.
* **Fail-slow** -- in each of the last ``slow_windows`` windows of ``slow_window_minutes``, while the job
  computes (its peers' median SM activity >= ``slow_active_sm_min``), a node's median GPU SM activity or its
  InfiniBand traffic is below ``slow_ratio`` x the median of the other nodes. Jobs of fewer than
  ``slow_min_nodes`` nodes have no majority to compare with; a slowdown of half the nodes or more is the
  job's own, not a straggler's.

A step counts only when at least ``min_coverage`` of the GPUs (and nodes, for InfiniBand) reported in it;
steps at the end of the window with no sample yet (scrape lag) are left out. Missing data is never taken
for idleness: a job whose telemetry stopped is not called hung.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from acme.detection.telemetry import Telemetry
    from acme.settings import DetectionSettings

HANG, STALL, FAIL_SLOW = "hang", "stall", "fail-slow"


@dataclass
class Finding:
    """What a detector saw: the kind, since when, for how long, on which nodes, with evidence lines."""

    kind: str
    since: str
    minutes: float
    nodes: list[str]  # the suspect nodes (all of the job's for a hang without a culprit)
    evidence: list[str]
    measures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _last_reported_step(t: Telemetry) -> int:
    """The newest step at which any GPU reported (-1 when none did)."""
    import numpy as np

    seen = np.flatnonzero((~np.isnan(t.tensor)).any(axis=0)) if t.gpus else np.array([], dtype=np.int64)
    return int(seen[-1]) if len(seen) else -1


def _trailing_run(flags: np.ndarray) -> int:
    """How many True values end the array."""
    import numpy as np

    false = np.flatnonzero(~flags)
    return len(flags) if not len(false) else len(flags) - 1 - int(false[-1])


def _fmt_bps(value: float) -> str:
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B/s"


@dataclass
class _Signals:
    """Per step of a window (up to the newest reported step): what the hang and stall rules read."""

    reporting: np.ndarray  # (gpus, steps) the GPU reported
    spinning: np.ndarray  # (gpus, steps) gpu_util >= busy_util_min
    quiet: np.ndarray  # (steps,) covered, no GPU computes, no node moves RDMA traffic
    spin_share: np.ndarray  # (steps,) share of the reporting GPUs spinning
    writing: np.ndarray  # (steps,) some node writes >= storage_write_bps to the shared file system
    nobody_writes: np.ndarray  # (steps,) enough nodes reported storage writes and none wrote
    has_ib: bool


def _signals(t: Telemetry, s: DetectionSettings, last: int) -> _Signals:
    import numpy as np

    sl = slice(0, last + 1)
    tensor, sm, util, ib, write = t.tensor[:, sl], t.sm[:, sl], t.util[:, sl], t.ib[:, sl], t.write[:, sl]
    reporting = ~np.isnan(tensor) & ~np.isnan(sm)
    covered = reporting.sum(axis=0) >= s.min_coverage * t.gpus
    with np.errstate(invalid="ignore"):
        quiet_gpu = (np.nan_to_num(tensor, nan=np.inf) <= s.hang_tensor_max) & (
            np.nan_to_num(sm, nan=np.inf) <= s.hang_sm_max
        )
        spinning = np.nan_to_num(util, nan=-1) >= s.busy_util_min
    quiet = covered & np.all(quiet_gpu | ~reporting, axis=0)
    has_ib = bool((~np.isnan(ib)).any())
    if has_ib:
        ib_reporting = ~np.isnan(ib)
        ib_covered = ib_reporting.sum(axis=0) >= s.min_coverage * len(t.nodes)
        quiet &= ib_covered & np.all((np.nan_to_num(ib, nan=np.inf) <= s.ib_idle_bps) | ~ib_reporting, axis=0)
    writing = (np.nan_to_num(write, nan=0.0) >= s.storage_write_bps).any(axis=0)
    write_known = (~np.isnan(write)).sum(axis=0) >= max(1.0, s.min_coverage * len(t.nodes))
    spin_share = spinning.sum(axis=0) / np.maximum(reporting.sum(axis=0), 1)
    return _Signals(reporting, spinning, quiet, spin_share, writing, write_known & ~writing, has_ib)


def detect_hang(t: Telemetry, s: DetectionSettings) -> Finding | None:
    """A hang (collective spinning) or stall (no kernel) that lasts until the newest reported step."""
    last = _last_reported_step(t)
    if last < 0:
        return None
    g = _signals(t, s, last)
    # A node writing to the shared file system means a checkpoint: neither rule runs through it.
    stuck = g.quiet & (g.spin_share >= 0.5) & ~g.writing
    for kind, flags, minutes in (
        (HANG, stuck, s.hang_minutes),
        (STALL, g.quiet & ~g.writing, s.stall_minutes),
    ):
        run = _trailing_run(flags)
        duration = run * t.step_s / 60
        if run == 0 or duration + 1e-9 < minutes:
            continue
        first = last + 1 - run
        if kind == HANG and first > 0 and g.quiet[first - 1] and not g.nobody_writes[first:].all():
            # Spinning right after a pause without kernels is how a checkpoint ends (every rank writes,
            # then waits in a barrier for the slowest writer). Unless storage writes show that no node
            # is still writing, only the stall rule's longer time applies.
            continue
        return _hang_finding(t, s, g, kind, first, last, duration)
    return None


def _hang_finding(
    t: Telemetry, s: DetectionSettings, g: _Signals, kind: str, first: int, last: int, duration: float
) -> Finding:
    """The finding of a hang or stall over steps [first, last]: its evidence lines and measures."""
    import numpy as np

    window = slice(first, last + 1)
    sm, tensor, ib, write = t.sm[:, window], t.tensor[:, window], t.ib[:, window], t.write[:, window]
    lagging = np.flatnonzero(
        np.nanmean(np.where(g.reporting[:, window], g.spinning[:, window], np.nan), axis=1) < 0.5
    )
    culprits = sorted({t.nodes[t.gpu_node[i]] for i in lagging}) if kind == HANG else []
    outside = [f"{t.nodes[t.gpu_node[i]]}/gpu{t.gpu_index[i]}" for i in lagging][:16] if kind == HANG else []
    reported = g.reporting[:, window].any()
    max_sm = float(np.nanmax(sm)) if reported else 0.0
    max_tensor = float(np.nanmax(tensor)) if reported else 0.0
    max_ib = float(np.nanmax(ib)) if g.has_ib and (~np.isnan(ib)).any() else None
    max_write = float(np.nanmax(write)) if g.nobody_writes[window].all() else None
    spin = int(round(float(np.mean(g.spin_share[window])) * t.gpus))
    what = (
        f"{spin}/{t.gpus} GPUs at gpu_util>={s.busy_util_min:g}% (a collective spinning)"
        if kind == HANG
        else f"{spin}/{t.gpus} GPUs at gpu_util>={s.busy_util_min:g}% on average (no progress, pause or spin)"
    )
    ib_text = (
        f"InfiniBand tx+rx<={_fmt_bps(s.ib_idle_bps)} on {len(t.nodes)}/{len(t.nodes)} nodes "
        f"(max {_fmt_bps(max_ib)})"
        if max_ib is not None
        else "no InfiniBand telemetry for these nodes (GPU signals only)"
    )
    write_text = (
        f", no node writing to storage (<{_fmt_bps(s.storage_write_bps)}, max {_fmt_bps(max_write)}: "
        f"not a checkpoint)"
        if max_write is not None
        else ""
    )
    evidence = [
        f"acme-detect: {kind}: {t.gpus}/{t.gpus} GPUs tensor_active<={s.hang_tensor_max:g}% "
        f"(max {max_tensor:.1f}%) and sm_active<={s.hang_sm_max:g}% (max {max_sm:.1f}%), {what}, "
        f"{ib_text}{write_text}, for {duration:.1f} min since {t.iso(first)} on nodes {','.join(t.nodes)}"
    ]
    if outside:
        evidence.append(
            f"acme-detect: {kind}: GPUs not in the collective while their peers spin: {', '.join(outside)}"
        )
    return Finding(
        kind, t.iso(first), round(duration, 2), culprits or list(t.nodes), evidence,
        {"gpus": t.gpus, "nodes": len(t.nodes), "max_sm": max_sm, "max_tensor": max_tensor,
         "max_ib_bps": max_ib, "max_storage_write_bps": max_write, "spinning_gpus": spin,
         "outside_collective": outside},
    )  # fmt: skip


def _window_comparison(t: Telemetry, s: DetectionSettings, span: slice) -> tuple[np.ndarray, tuple]:
    """One window: which nodes are slow against their peers while the job computes, and the
    (node SM, peers' SM, node IB, peers' IB) medians behind it."""
    import numpy as np

    nodes = len(t.nodes)
    gpu_sm = np.nanmean(t.sm[:, span], axis=1)
    node_sm = np.array([np.nanmedian(gpu_sm[t.gpu_node == n]) if (t.gpu_node == n).any() else np.nan
                        for n in range(nodes)])  # fmt: skip
    node_ib = (
        np.nanmean(t.ib[:, span], axis=1) if (~np.isnan(t.ib[:, span])).any() else np.full(nodes, np.nan)
    )
    peer_sm = np.array([np.nanmedian(np.delete(node_sm, n)) for n in range(nodes)])
    peer_ib = np.array([np.nanmedian(np.delete(node_ib, n)) for n in range(nodes)])
    active = np.nan_to_num(peer_sm) >= s.slow_active_sm_min
    slow_sm = np.nan_to_num(node_sm, nan=np.inf) < s.slow_ratio * peer_sm
    ib_known = np.nan_to_num(peer_ib) >= 10 * s.ib_idle_bps
    slow_ib = ib_known & (np.nan_to_num(node_ib, nan=np.inf) < s.slow_ratio * np.nan_to_num(peer_ib))
    return active & (slow_sm | slow_ib), (node_sm, peer_sm, node_ib, peer_ib)


def _fail_slow_evidence(
    t: Telemetry, s: DetectionSettings, n: int, rows: list[tuple], since: str
) -> tuple[str, dict[str, Any]]:
    """The evidence line and measures of slow node ``n`` over the windows' medians ``rows``."""
    import numpy as np

    sm_ratio = float(np.nanmean([r[0][n] / r[1][n] for r in rows if r[1][n] > 0]))
    ib_pairs = [(r[2][n], r[3][n]) for r in rows if r[3][n] and r[3][n] == r[3][n] and r[3][n] > 0]
    ib_ratio = float(np.nanmean([a / b for a, b in ib_pairs])) if ib_pairs else None
    node_sm = float(np.nanmean([r[0][n] for r in rows]))
    peer_sm = float(np.nanmean([r[1][n] for r in rows]))
    ib_text = (
        f", InfiniBand {_fmt_bps(float(np.nanmean([a for a, _ in ib_pairs])))} vs "
        f"{_fmt_bps(float(np.nanmean([b for _, b in ib_pairs])))} ({ib_ratio:.2f}x)"
        if ib_ratio is not None
        else ""
    )
    line = (
        f"acme-detect: fail-slow: node {t.nodes[n]} median sm_active {node_sm:.1f}% vs peers' {peer_sm:.1f}% "
        f"({sm_ratio:.2f}x){ib_text}, below {s.slow_ratio:g}x of its {len(t.nodes) - 1} peers in "
        f"{s.slow_windows} consecutive {s.slow_window_minutes:g}-min windows since {since}"
    )
    return line, {
        "sm_ratio": round(sm_ratio, 3),
        "ib_ratio": None if ib_ratio is None else round(ib_ratio, 3),
    }


def detect_fail_slow(t: Telemetry, s: DetectionSettings) -> Finding | None:
    """Nodes below their peers in each of the last ``slow_windows`` windows (see the module doc)."""
    import numpy as np

    nodes = len(t.nodes)
    if nodes < s.slow_min_nodes or not t.gpus:
        return None
    last = _last_reported_step(t)
    width = max(1, int(round(s.slow_window_minutes * 60 / t.step_s)))
    if last + 1 < width * s.slow_windows:
        return None
    first = last + 1 - width * s.slow_windows
    slow_in_all = np.ones(nodes, dtype=bool)
    rows = []
    with np.errstate(invalid="ignore"), _quiet_nan_warnings():
        for w in range(s.slow_windows):
            slow, medians = _window_comparison(t, s, slice(first + w * width, first + (w + 1) * width))
            slow_in_all &= slow
            rows.append(medians)
        suspects = np.flatnonzero(slow_in_all)
        if not len(suspects) or len(suspects) * 2 >= nodes:
            return None
        found = [_fail_slow_evidence(t, s, int(n), rows, t.iso(first)) for n in suspects]
    minutes = round(width * s.slow_windows * t.step_s / 60, 2)
    return Finding(
        FAIL_SLOW, t.iso(first), minutes, [t.nodes[n] for n in suspects], [line for line, _ in found],
        {t.nodes[n]: measures for n, (_, measures) in zip(suspects, found, strict=True)},
    )  # fmt: skip


def detect_job(t: Telemetry, s: DetectionSettings) -> Finding | None:
    """A hang (or stall) first -- a hung job has no straggler to speak of -- else a fail-slow node."""
    return detect_hang(t, s) or detect_fail_slow(t, s)


class _quiet_nan_warnings:
    """numpy warns on the median of all-NaN slices, which here just means "no data"."""

    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._catch.__exit__(*exc)
