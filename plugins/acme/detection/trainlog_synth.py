"""Synthesized training runs with known slow periods, written as Megatron-LM, DeepSpeed and HF Trainer logs.

No public training log says when its slowdowns happened (Greyhound's published run does not record its
injections; ``docs/fail-slow-logs.md``), so the detector is scored on these. The slow periods follow
Greyhound's own injection schedule (``detector/injection/injection.py``: arrivals of a Poisson process with a
mean gap of 240 s, each lasting N(120 s, 20 s), then at least 60 s normal) with the slowdowns its README
reports for a locked GPU clock (10-30 %) and, for a third of them, a congested link (up to 2x). Around them:
lognormal noise of 0.5-3 %, a checkpoint save every ``checkpoint_every`` iterations (3-8x one iteration) and
rare single outliers (0.3 % of iterations, 1.3-3x: an evaluation, a garbage collection).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta


@dataclass
class SynthRun:
    seconds: list[float]
    truth: list[tuple[int, int]]  # [first, last] iteration index of each slow period
    factors: list[float] = field(default_factory=list)


def synth_run(seed: int, iterations: int = 3000, checkpoint_every: int = 500) -> SynthRun:
    """One run's iteration times and its slow periods (module doc)."""
    rng = random.Random(f"trainlog:{seed}")
    base, noise = rng.uniform(0.5, 5.0), rng.uniform(0.005, 0.03)
    factor_at = [1.0] * iterations
    truth, factors = [], []
    t = rng.expovariate(1 / 240) + 120  # seconds of training; no slowdown in the first two minutes
    while True:
        first = int(t / base)
        length = max(2, int(max(1.0, rng.gauss(120, 20)) / base))
        if first + length >= iterations:
            break
        factor = rng.uniform(1.1, 1.3) if rng.random() < 2 / 3 else rng.uniform(1.3, 2.0)
        for i in range(first, first + length):
            factor_at[i] = factor
        truth.append((first, first + length - 1))
        factors.append(factor)
        t = (first + length) * base + 60 + rng.expovariate(1 / 240)
    seconds = []
    for i in range(iterations):
        value = base * factor_at[i] * rng.lognormvariate(0, noise)
        if i and i % checkpoint_every == 0:
            value *= rng.uniform(3, 8)
        elif rng.random() < 0.003:
            value *= rng.uniform(1.3, 3.0)
        seconds.append(value)
    return SynthRun(seconds, truth, factors)


def _times(seconds: list[float], start: datetime) -> list[datetime]:
    out, now = [], start
    for value in seconds:
        now += timedelta(seconds=value)
        out.append(now)
    return out


def megatron_log(seconds: list[float], start: datetime | None = None) -> str:
    """Megatron-LM's ``training_log`` lines at ``--log-interval 1``."""
    at = _times(seconds, start or datetime(2025, 5, 4, tzinfo=UTC))
    total = len(seconds)
    return "".join(
        f" [{when:%Y-%m-%d %H:%M:%S}] iteration {i + 1:8d}/{total:8d} | consumed samples: {512 * (i + 1):12d} | "
        f"elapsed time per iteration (ms): {1000 * value:.1f} | learning rate: 3.000E-04 | global batch size: "
        f"  512 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.876 | number of skipped iterations:"
        f"   0 | number of nan iterations:   0 |\n"
        for i, (value, when) in enumerate(zip(seconds, at, strict=True))
    )


def deepspeed_log(seconds: list[float], start: datetime | None = None) -> str:
    """DeepSpeed's ``wall_clock_breakdown`` lines (forward 30 %, backward 60 %, step 10 % of each iteration)."""
    at = _times(seconds, start or datetime(2025, 5, 4, tzinfo=UTC))
    lines = []
    for value, when in zip(seconds, at, strict=True):
        ms = 1000 * value
        stamp = f"{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d}"
        lines.append(
            f"[{stamp}] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd: {0.3 * ms:.2f} | bwd: "
            f"{0.6 * ms:.2f} | bwd_inner: {0.45 * ms:.2f} | bwd_allreduce: {0.15 * ms:.2f} | step: {0.1 * ms:.2f}\n"
        )
    return "".join(lines)


def hf_trainer_log(seconds: list[float]) -> str:
    """The HF Trainer's tqdm bar as a log file holds it: ``\\r``-separated updates, one per step."""
    total, elapsed, parts = len(seconds), 0.0, []
    for i, value in enumerate(seconds, start=1):
        elapsed += value
        remaining = value * (total - i)
        rate = f"{value:.2f}s/it" if value >= 1 else f"{1 / value:.2f}it/s"
        parts.append(
            f"{100 * i // total:3d}%|{'#' * (10 * i // total):<10}| {i}/{total} "
            f"[{_clock(elapsed)}<{_clock(remaining)}, {rate}]"
        )
    return "\r".join(parts) + "\n"


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"
