"""Iteration times from training logs: a detection input beside the telemetry (fail-slow, issue 26).

One function per format, each returning :class:`IterationTimes` (step, seconds, wall time when the line has
one), and :func:`parse_training_log` choosing the format from the text when not told:

* **Megatron-LM** (``megatron/training.py``'s ``training_log``, printed every ``--log-interval`` steps by
  the last rank): ``[<date time>] iteration      100/  500000 | consumed samples: ... | elapsed time per
  iteration (ms): 1234.5 | ...`` -- the time is the mean over the interval; older versions print the
  ``datetime.now()`` without brackets, or none.
* **DeepSpeed** (the engine's ``wall_clock_breakdown``): ``[<asctime>] [INFO] [...] [Rank 0] time (ms) |
  fwd: 123.4 | bwd: 234.5 | ... | step: 12.3`` -- the global (not ``_microstep``) forward, backward and step
  timers summed; without them the ``ThroughputTimer`` line ``epoch=0/micro_step=200/global_step=100,
  RunningAvgSamplesPerSec=..., CurrSamplesPerSec=12.5, ...`` gives seconds per sample (``unit``
  ``s/sample``: relative, which is all a slowdown needs).
* **Hugging Face Trainer** (its tqdm progress bar, ``\\r``-separated in a log file): ``100/1000
  [01:40<15:00,  1.02s/it]`` or ``2.50it/s`` -- tqdm's smoothed rate, one value per bar update (repeated
  updates of one step are kept once). The Trainer's ``{'loss': ...}`` lines carry no timing.
* **Greyhound** (ATC'25, its local controller's log): ``[<date time>] Esimated iteration time: {'rank0':
  1126199.5, ...}`` in microseconds, estimated per rank from the NCCL call pattern; the job's time is the
  slowest rank's (the others wait for it).

A line that looks like its format but does not parse is an :class:`acme.errors.InputError` naming the file and
line; lines of other kinds are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from acme.errors import InputError

FORMATS = ("megatron", "deepspeed", "hf-trainer", "greyhound")

_STAMP = r"(?P<stamp>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)"
_MEGATRON = re.compile(
    rf"^\s*\[?{_STAMP}?\]?\s*iteration\s+(?P<step>\d+)\s*/\s*\d+\s*\|"
    r".*?elapsed time per iteration \(ms\):\s*(?P<ms>[^\s|]+)"
)
_DS_TIMERS = re.compile(rf"^\s*(?:\[{_STAMP}\])?.*?\btime \(ms\)\s*\|(?P<timers>.*)$")
_DS_TIMER = re.compile(r"\s*(?P<name>[A-Za-z_]+):\s*(?P<ms>[^\s|]+)\s*")
_DS_THROUGHPUT = re.compile(
    rf"^\s*(?:\[{_STAMP}\])?.*?global_step=(?P<step>\d+),.*?CurrSamplesPerSec=(?P<rate>[^\s,]+)"
)
_TQDM = re.compile(
    r"(?P<step>\d+)/(?P<total>\d+)\s*\[[\d:]+<[\d:?]+,\s*(?P<rate>[\d.]+)(?P<unit>s/it|it/s)\]"
)
_GREYHOUND = re.compile(rf"\[{_STAMP}\]\s*Esimated iteration time:\s*\{{(?P<ranks>[^}}]*)\}}")
_RANK = re.compile(r"'(?P<rank>[^']+)':\s*(?P<us>[-+\d.eE]+)")


@dataclass
class IterationTimes:
    """One training run's iteration times in log order."""

    source: str
    framework: str
    unit: str = "s"  # "s" per iteration, or "s/sample" (DeepSpeed's throughput line)
    steps: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    at: list[datetime | None] = field(default_factory=list)
    ranks: dict[str, list[float]] = field(default_factory=dict)  # per-rank seconds (Greyhound)

    def add(self, step: int, seconds: float, at: datetime | None) -> None:
        self.steps.append(step)
        self.seconds.append(seconds)
        self.at.append(at)

    def __len__(self) -> int:
        return len(self.seconds)


def _stamp(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace(",", ".").replace(" ", "T")) if text else None


def _number(text: str, source: str, line: int, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(source, f"{what} {text!r} is not a number", line=line) from None
    if not value > 0 or value == float("inf"):
        raise InputError(source, f"{what} {text!r} must be a positive number", line=line)
    return value


def parse_megatron(text: str, source: str = "<text>") -> IterationTimes:
    out = IterationTimes(source, "megatron")
    for number, line in enumerate(text.split("\n"), start=1):
        match = _MEGATRON.search(line)
        if match:
            ms = _number(match["ms"], source, number, "elapsed time per iteration (ms)")
            out.add(int(match["step"]), ms / 1000, _stamp(match["stamp"]))
    return out


def parse_deepspeed(text: str, source: str = "<text>") -> IterationTimes:
    timers = IterationTimes(source, "deepspeed")
    throughput = IterationTimes(source, "deepspeed", unit="s/sample")
    for number, line in enumerate(text.split("\n"), start=1):
        match = _DS_TIMERS.search(line)
        if match and "_microstep" not in match["timers"]:
            values = {m["name"]: m["ms"] for m in _DS_TIMER.finditer(match["timers"])}
            chosen = [values[n] for n in ("fwd", "bwd", "step") if n in values]
            if chosen:
                total = sum(_number(v, source, number, "timer (ms)") for v in chosen)
                timers.add(len(timers) + 1, total / 1000, _stamp(match["stamp"]))
            continue
        match = _DS_THROUGHPUT.search(line)
        if match:
            rate = _number(match["rate"], source, number, "CurrSamplesPerSec")
            throughput.add(int(match["step"]), 1 / rate, _stamp(match["stamp"]))
    return timers if len(timers) else throughput


def parse_hf_trainer(text: str, source: str = "<text>") -> IterationTimes:
    out = IterationTimes(source, "hf-trainer")
    for number, line in enumerate(text.split("\n"), start=1):
        for update in line.split("\r"):
            for match in _TQDM.finditer(update):
                step = int(match["step"])
                if step == 0 or (out.steps and step <= out.steps[-1]):
                    continue  # the bar's start, or an update repeating a step already seen
                rate = _number(match["rate"], source, number, f"tqdm rate {match['unit']}")
                out.add(step, rate if match["unit"] == "s/it" else 1 / rate, None)
    return out


def parse_greyhound(text: str, source: str = "<text>") -> IterationTimes:
    out = IterationTimes(source, "greyhound")
    for number, line in enumerate(text.split("\n"), start=1):
        match = _GREYHOUND.search(line)
        if not match:
            continue
        ranks = {m["rank"]: _number(m["us"], source, number, "iteration time (us)") / 1e6
                 for m in _RANK.finditer(match["ranks"])}  # fmt: skip
        if not ranks:
            raise InputError(source, "an estimated iteration time without any rank", line=number)
        for rank, seconds in ranks.items():
            out.ranks.setdefault(rank, []).append(seconds)
        out.add(len(out) + 1, max(ranks.values()), _stamp(match["stamp"]))
    return out


PARSERS = {
    "megatron": parse_megatron,
    "deepspeed": parse_deepspeed,
    "hf-trainer": parse_hf_trainer,
    "greyhound": parse_greyhound,
}


def detect_format(text: str, source: str = "<text>") -> str | None:
    """The format whose lines the text has (the first of ``FORMATS`` that parses a line), or None."""
    for name in FORMATS:
        if len(PARSERS[name](text, source)):
            return name
    return None


def parse_training_log(text: str, source: str = "<text>", framework: str | None = None) -> IterationTimes:
    """The iteration times of a training log in ``framework`` (one of ``FORMATS``; found from the text when
    None). A log without any iteration line is an InputError."""
    if framework is not None and framework not in PARSERS:
        raise InputError(source, f"unknown training-log format {framework!r}; one of {', '.join(FORMATS)}")
    name = framework or detect_format(text, source)
    times = PARSERS[name](text, source) if name else None
    if times is None or not len(times):
        raise InputError(
            source, f"no iteration time found (looked for {framework or ', '.join(FORMATS)} log lines)"
        )
    return times
