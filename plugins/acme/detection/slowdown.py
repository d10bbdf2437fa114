"""Slowdowns of a training run from its iteration times (:mod:`acme.detection.trainlog`): an online CUSUM.

Iteration times are compared in log space with a robust baseline -- the median of the last ``reference``
iterations judged normal, with 1.4826 x their median absolute deviation as the noise ``σ`` (at least
``noise_floor``). Each new iteration adds ``z - k`` to the upper CUSUM ``S`` (``z = (log t - μ) / σ``; ``k``
is half of the smallest slowdown of interest, ``min_slowdown``, in units of ``σ``, and at least 0.5); ``z`` is
clipped to ``k + h/2`` so that one outlier -- a checkpoint save, an evaluation, a garbage collection -- cannot
raise the alarm alone: it takes two slow iterations at least. ``S >= h`` raises it; the slow period's onset is
the iteration after ``S`` last left 0 (the CUSUM's own change-point estimate) and it ends when the mirror
CUSUM of fast iterations against the frozen baseline reaches ``h``. The baseline keeps adapting while no
alarm is raised, so a slow drift is followed rather than flagged.

Why a CUSUM of our own and not ``ruptures``: detection here is online -- each new log line must say now
whether the run is slow -- while ruptures' searches (PELT, binary segmentation, windows) are offline: used
online they must be re-run on a trailing window at every line. ``benchmarks/bench_trainlog_slowdown.py``
compares both on the same logs (delay, false alarms, time per line) when ruptures is installed.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class SlowdownSettings:
    min_slowdown: float = 0.10  # the smallest slowdown of interest (10 % longer iterations)
    threshold: float = 5.0  # h, in units of σ
    reference: int = 50  # iterations in the baseline
    min_reference: int = 10  # iterations needed before anything is flagged
    warmup: int = 3  # first iterations skipped (compilation, allocator warm-up)
    noise_floor: float = 0.005  # σ at least 0.5 % (a perfectly steady log would flag any wiggle)


@dataclass
class SlowPeriod:
    """A detected slowdown: iteration indexes (into the log's series) of its estimated onset, of the alarm and
    of its estimated end (None while it lasts), and its slowdown factor."""

    onset: int
    detected: int
    end: int | None
    factor: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


class SlowdownDetector:
    """Feed iteration times one at a time (:meth:`update`); :attr:`periods` holds what was found."""

    def __init__(self, settings: SlowdownSettings | None = None):
        self.s = settings or SlowdownSettings()
        self.reference: deque[float] = deque(maxlen=self.s.reference)
        self.periods: list[SlowPeriod] = []
        self.index = -1
        self.up = 0.0
        self.down = 0.0
        self.since_zero = 0
        self.baseline: tuple[float, float] | None = None  # frozen (μ, σ) while slow
        self.slow_values: list[float] = []

    def _level(self) -> tuple[float, float]:
        mu = _median(list(self.reference))
        mad = _median([abs(v - mu) for v in self.reference])
        return mu, max(1.4826 * mad, self.s.noise_floor)

    def update(self, seconds: float) -> SlowPeriod | None:
        """Take the next iteration time; return the period when this iteration raised an alarm."""
        self.index += 1
        if self.index < self.s.warmup or not seconds > 0:
            return None
        x = math.log(seconds)
        if len(self.reference) < self.s.min_reference:
            self.reference.append(x)
            return None
        h = self.s.threshold
        if self.baseline is not None:
            self._while_slow(x, h)
            return None
        mu, sigma = self._level()
        k = max(0.5, math.log1p(self.s.min_slowdown) / 2 / sigma)
        z = min((x - mu) / sigma, k + h / 2)
        self.up = max(0.0, self.up + z - k)
        if self.up == 0.0:
            self.since_zero = self.index + 1
            self.reference.append(x)
            return None
        if self.up < h:
            if z < k:  # not slow by itself: part of the baseline
                self.reference.append(x)
            return None
        period = SlowPeriod(max(self.since_zero, self.s.warmup), self.index, None, math.exp(x - mu))
        self.periods.append(period)
        self.baseline, self.up, self.down, self.slow_values = (mu, sigma), 0.0, 0.0, [x]
        return period

    def _while_slow(self, x: float, h: float) -> None:
        mu, sigma = self.baseline or (0.0, 1.0)
        k = max(0.5, math.log1p(self.s.min_slowdown) / 2 / sigma)
        z = min((mu + math.log1p(self.s.min_slowdown) - x) / sigma, k + h / 2)
        self.down = max(0.0, self.down + z - k)
        if self.down == 0.0:
            self.since_zero = self.index + 1
        self.slow_values.append(x)
        period = self.periods[-1]
        if self.down >= h:
            period.end = max(period.detected, self.since_zero - 1)
            kept = self.slow_values[: period.end - period.detected + 1]
            period.factor = math.exp(_median(kept) - mu) if kept else period.factor
            self.baseline, self.down, self.since_zero = None, 0.0, self.index + 1
            self.reference.clear()
            self.reference.extend([mu] * min(self.s.min_reference, self.s.reference))
        else:
            period.factor = math.exp(_median(self.slow_values) - mu)


def detect_slowdowns(seconds: list[float], settings: SlowdownSettings | None = None) -> list[SlowPeriod]:
    """The slow periods of a whole series (what the online detector would have raised, line by line)."""
    detector = SlowdownDetector(settings)
    for value in seconds:
        detector.update(value)
    return detector.periods


def score(
    periods: list[SlowPeriod], truth: list[tuple[int, int]], seconds: list[float], grace: int = 0
) -> dict[str, Any]:
    """Detection delay and false alarms of ``periods`` against the known slow periods ``truth`` ([start, end]
    iteration indexes): an alarm inside a true period (up to ``grace`` iterations after its end) detects it,
    its delay the iterations and seconds from the period's start to the alarm; any other alarm is false."""
    delays_it, delays_s, false_alarms, found = [], [], 0, set()
    for period in periods:
        hit = next((i for i, (a, b) in enumerate(truth) if a <= period.detected <= b + grace), None)
        if hit is None:
            false_alarms += 1
        elif hit not in found:
            found.add(hit)
            start = truth[hit][0]
            delays_it.append(period.detected - start)
            delays_s.append(sum(seconds[start : period.detected + 1]))
    hours = sum(seconds) / 3600
    return {
        "slow_periods": len(truth), "detected": len(found), "missed": len(truth) - len(found),
        "false_alarms": false_alarms, "false_alarms_per_hour": false_alarms / hours if hours else None,
        "delays_iterations": delays_it, "delays_s": delays_s,
    }  # fmt: skip


def slowdowns_of_log(path: str, framework: str | None = None, min_slowdown: float = 0.10) -> dict[str, Any]:
    """``python -m acme detect-slowdowns``: a training log's format, iterations and slow periods, with the
    log's steps and times of each period's onset, alarm and end."""
    from dataclasses import replace
    from pathlib import Path

    from acme.detection.trainlog import parse_training_log
    from acme.errors import InputError

    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        raise InputError(path, f"cannot read the training log: {exc.strerror or exc}") from None
    times = parse_training_log(text, path, framework)
    periods = detect_slowdowns(times.seconds, replace(SlowdownSettings(), min_slowdown=min_slowdown))

    def where(index: int | None) -> dict[str, Any] | None:
        if index is None:
            return None
        at = times.at[index]
        return {"step": times.steps[index], "at": at.isoformat() if at else None}

    return {
        "log": path, "framework": times.framework, "unit": times.unit, "iterations": len(times),
        "median_s": _median(times.seconds), "slow_periods": [
            {"onset": where(p.onset), "detected": where(p.detected), "end": where(p.end), "factor": round(p.factor, 3)}
            for p in periods
        ],
    }  # fmt: skip
