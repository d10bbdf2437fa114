"""General root-cause layers over the rules: what a failure log says whatever the job (issue 31).

The rules of ``include/diagnosis/rules.yaml`` match signatures; these layers read the structure every Python
training log shares, so they work on logs nobody wrote a rule from:

* **Raised exceptions.** A Python exception is the final line of a traceback (or the exception a wrapper says
  it carries: ``BackendCompilerFailed: backend='inductor' raised:`` then ``FileNotFoundError: ...``). In a chain
  (``During handling of the above exception ...``, ``The above exception was the direct cause ...``) the
  innermost one -- printed first -- is the cause. An exception *named* elsewhere (a docstring in printed help
  text, a logger's ``[WARNING] FileNotFoundError: ...`` record, a library's message) was not raised, and the
  rules for Python exceptions do not count it when the log has raised ones. Launcher wrappers (torchrun's
  ``ChildFailedError``, accelerate's and DeepSpeed's ``CalledProcessError`` over the worker, ``SystemExit``)
  only report a worker's failure and are skipped. A class no rule names is mapped to the taxonomy through the
  built-in exception hierarchy (``NotImplementedError`` is a ``RuntimeError``, ``ModuleNotFoundError`` an
  ``ImportError``, ``UnicodeDecodeError`` a ``ValueError``, ``KeyboardInterrupt`` the user's Ctrl-C).
  The traceback's frames say where it was raised: the user's code, a library, or a framework (torch,
  DeepSpeed, Megatron, transformers, ...) -- :attr:`RaisedException.origin`.
* **Operating-system errors.** An errno inside any exception text (``[Errno 28]``, ``(os error 122)``,
  ``ENOSPC``, or its strerror, "No space left on device") is the cause, whatever wrapper carries it (a
  safetensors serialisation error, a RuntimeError, a compiler failure). The context -- a checkpoint save, a
  dataset read, a cache write, from the traceback's frames and the message -- decides between the storage,
  data and permission outcomes (:func:`errno_cause`).
* **Signals and launchers.** torchrun, DeepSpeed, accelerate, srun, mpirun, LSF and the shell each report a
  worker killed by a signal in their own words (``exitcode: -2``, ``exits with return code = -2``,
  ``died with <Signals.SIGINT: 2>``, ``task 3: Killed``, ``exited on signal 9``, ``Exited with exit code 130``);
  :func:`launcher_signals` reads them as one fact, the signal number, and :func:`signal_outcome` maps it:
  SIGINT is the user's interrupt, SIGKILL and SIGTERM a kill from outside, SIGSEGV a segmentation fault. Read
  together with the scheduler's statement when there is one: a time limit, a cancellation or a preemption is
  who sent the signal, so the scheduler outcome wins over the interrupt or kill it caused.

:func:`refine` applies the layers to the rules' answer (:func:`acme.diagnosis.rules.diagnose_lines` calls it).
"""

from __future__ import annotations

import builtins
import errno as errno_codes
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acme.diagnosis.rules import Rule

# ------------------------------------------------------------------------------------------------ exceptions
# An exception line: a (dotted) class name at the start of the line, then ": message", ":" or nothing.
_EXC_RE = re.compile(r"^(?P<name>(?:[A-Za-z_]\w*\.)*(?P<cls>[A-Z]\w*))(?::\s?(?P<msg>.*)|\s*)$")
_FRAME_RE = re.compile(r'^\s+File "(?P<path>[^"]+)", line \d+')
_CHAIN_RE = re.compile(
    r"^(?:During handling of the above exception|The above exception was the direct cause)"
)
_TB_START_RE = re.compile(r"Traceback \(most recent call last\)")
# Wrappers that only report that a worker failed; the worker's own exception is the cause.
_LAUNCHER_WRAPPERS = {"ChildFailedError", "SystemExit", "SignalException", "ProcessRaisedException"}
_LAUNCHER_FRAME_RE = re.compile(
    r"accelerate/commands/|deepspeed/launcher/|torch/distributed/(?:run\.py|elastic/|launch\.py)|/bin/(?:torchrun|accelerate|deepspeed)\b"
)
# A logger's record of a warning: an exception named in it was not raised.
_WARNING_RECORD_RE = re.compile(
    r"\[(?:WARNING|WARN|W)\]|\bWARNING\s*[:\]|-]|^W\d{4} \d\d:\d\d|\b\w*Warning:\s|\bwarnings\.warn\b"
)
# Frameworks (a path component): what the job is built on, as opposed to other libraries.
_FRAMEWORK_RE = re.compile(
    r"/(?:torch|torchvision|torchaudio|jax|jaxlib|flax|tensorflow|keras|deepspeed|megatron|transformers|accelerate"
    r"|peft|trl|lightning|pytorch_lightning|apex|vllm|nemo|colossalai|torchtune|torchtitan|xformers|flash_attn"
    r"|triton|datasets|tokenizers|safetensors)/"
)
_LIBRARY_RE = re.compile(r"/(?:site-packages|dist-packages)/|/lib/python\d+(?:\.\d+)?/|^<frozen ")
# Exceptions of the standard library outside builtins, by their builtin base class.
_STDLIB_BASES = {
    "JSONDecodeError": "ValueError", "UnpicklingError": "Exception", "PicklingError": "Exception",
    "BadZipFile": "Exception", "TimeoutExpired": "Exception", "CancelledError": "BaseException",
    "IncompleteReadError": "EOFError", "LinAlgError": "ValueError",
}  # fmt: skip
# Builtin classes whose taxonomy reason is not their own name.
_BUILTIN_REASONS = {
    "KeyboardInterrupt": "UserCancelled", "MemoryError": "OutOfMemoryError", "ModuleNotFoundError": "ImportError",
    "UnboundLocalError": "NameError", "ConnectionError": "ConnectionError",
}  # fmt: skip


@dataclass(frozen=True)
class RaisedException:
    """An exception the log shows raised: its line, class, taxonomy reason and where it was raised."""

    line: int
    text: str
    name: str  # as printed, e.g. "torch.OutOfMemoryError"
    reason: str | None  # the taxonomy reason through the exception hierarchy; None when it has none
    origin: str | None  # "user code", "library" or "framework": the innermost frame; None without frames
    frames: tuple[str, ...] = ()  # the traceback's frame paths, outermost first


def reason_of_exception(name: str) -> str | None:
    """The taxonomy reason of an exception class (by its last name), through the built-in hierarchy."""
    from acme.diagnosis.taxonomy import EXTRA_REASONS, TAXONOMY

    known = {**TAXONOMY, **EXTRA_REASONS}
    cls_name = name.rsplit(".", 1)[-1]
    if cls_name in known:
        return cls_name
    cls = getattr(builtins, cls_name, None)
    if cls is None and cls_name in _STDLIB_BASES:
        cls = getattr(builtins, _STDLIB_BASES[cls_name])
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        return None
    for base in cls.__mro__:
        reason = _BUILTIN_REASONS.get(base.__name__) or (base.__name__ if base.__name__ in known else None)
        if reason:
            return reason
    return None


def origin_of(frames: Sequence[str]) -> str | None:
    """Where the innermost frame is: the user's code, a framework, or another library."""
    if not frames:
        return None
    path = frames[-1].replace("\\", "/")
    if _FRAMEWORK_RE.search(path) and _LIBRARY_RE.search(path):
        return "framework"
    if _LIBRARY_RE.search(path):
        return "library"
    return "user code"


def _is_exception_line(text: str) -> re.Match[str] | None:
    if not text or text[0] in " \t|":
        return None
    match = _EXC_RE.match(text)
    if match is None:
        return None
    cls = match.group("cls")
    looks = cls.endswith(("Error", "Exception", "Interrupt", "Exit", "Failed", "Fault")) or hasattr(
        builtins, cls
    )
    return match if looks else None


def raised_exceptions(kept: Sequence[tuple[int, str]]) -> list[RaisedException]:
    """The root exception of every traceback (or chain of tracebacks) in the kept lines, in log order.

    A traceback is a ``Traceback (most recent call last):`` header or frame lines, closed by an exception
    line. A chain line (``During handling ...``) links the next traceback to the one before: its exception is
    a consequence, and the first one of the chain is kept. An exception line right after a wrapper's
    ``...raised:`` is the exception the wrapper carries. Launcher wrappers are left out.
    """
    from acme.diagnosis.compress import strip_prefix

    out: list[RaisedException] = []
    state = _TracebackState()
    for number, raw in kept:
        text = strip_prefix(raw.split("\r")[-1])[0]
        if state.feed_structure(text):
            continue
        match = _is_exception_line(text) if (state.in_tb or state.carried) else None
        if match is None:
            state.close_unless_continuation(text)
            continue
        exc = _raised(number, raw, match, state.frames)
        if exc is not None and not state.chained:
            out.append(exc)
        state.after_exception(carries=(match.group("msg") or "").rstrip().endswith("raised:"))
    return out


class _TracebackState:
    """Where :func:`raised_exceptions` is in a traceback: frames seen, chained, carried by a wrapper."""

    def __init__(self) -> None:
        self.frames: list[str] = []
        self.in_tb = self.chained = self.carried = False

    def feed_structure(self, text: str) -> bool:
        """A traceback header, frame or chain line (consumed); False for any other line."""
        frame = _FRAME_RE.match(text)
        if frame or _TB_START_RE.search(text):
            self.in_tb = True
            if frame:
                self.frames.append(frame.group("path"))
            return True
        if _CHAIN_RE.match(text):
            self.chained = True
            return True
        return False

    def close_unless_continuation(self, text: str) -> None:
        if not text.startswith((" ", "\t")):
            self.in_tb = self.carried = False

    def after_exception(self, carries: bool) -> None:
        self.in_tb = False
        self.carried = carries
        if not carries:
            self.frames = []
            self.chained = False


def _raised(number: int, raw: str, match: re.Match[str], frames: list[str]) -> RaisedException | None:
    """The exception of one exception line, or None for a launcher's wrapper."""
    cls = match.group("cls")
    if cls in _LAUNCHER_WRAPPERS or (
        cls == "CalledProcessError" and frames and _LAUNCHER_FRAME_RE.search(frames[-1])
    ):
        return None
    if (match.group("msg") or "").rstrip().endswith("raised:"):
        return None  # a wrapper announcing the exception it carries, on the next line
    return RaisedException(
        line=number, text=raw, name=match.group("name"), reason=reason_of_exception(match.group("name")),
        origin=origin_of(frames), frames=tuple(frames),
    )  # fmt: skip


def is_warning_record(text: str) -> bool:
    """A logger's warning record (``[WARNING]``, ``W1206 ...``, ``UserWarning: ...``): what it names was not
    raised."""
    return bool(_WARNING_RECORD_RE.search(text))


# ------------------------------------------------------------------------------------------------ errno
_ERRNO_NAMES = ("ENOSPC", "EDQUOT", "EACCES", "EPERM", "ENOENT", "ESTALE", "EIO", "EROFS")
_ERRNO_BY_NUMBER = {getattr(errno_codes, name): name for name in _ERRNO_NAMES if hasattr(errno_codes, name)}
_ERRNO_BY_NUMBER.setdefault(122, "EDQUOT")  # Linux; the errno module of another platform may differ
_STRERROR = {
    "No space left on device": "ENOSPC", "Disk quota exceeded": "EDQUOT", "Permission denied": "EACCES",
    "Operation not permitted": "EPERM", "No such file or directory": "ENOENT", "Stale file handle": "ESTALE",
    "Stale NFS file handle": "ESTALE", "Input/output error": "EIO", "Read-only file system": "EROFS",
}  # fmt: skip
_ERRNO_RE = re.compile(
    r"\[Errno (?P<num>\d+)\]|\(os error (?P<num2>\d+)\)|\berrno[ =:]+(?P<num3>\d+)"
    r"|\b(?P<name>" + "|".join(_ERRNO_NAMES) + r")\b|(?P<text>" + "|".join(map(re.escape, _STRERROR)) + ")",
    re.IGNORECASE,
)
_CONTEXTS = (
    ("checkpoint save", re.compile(
        r"(?i)torch\.save|save_pretrained|save_model|save_checkpoint|_save_checkpoint|serializ|StreamWriter"
        r"|save_file|\.save\(|checkpoint.{0,40}(?:writ|sav)|(?:writ|sav).{0,40}checkpoint|torch/serialization\.py")),
    ("dataset read", re.compile(
        r"(?i)/datasets/|dataloader|data_loader|load_dataset|__getitem__|\bdataset\b|indexed_dataset|read_csv"
        r"|\.(?:parquet|arrow|jsonl|tfrecord|npy|idx)\b|/dali/|webdataset")),
    ("cache write", re.compile(r"(?i)[/._-]cache\b|/\.cache/|_cache\b|HF_HOME|TRANSFORMERS_CACHE|torch_extensions")),
)  # fmt: skip
# errno -> (reason, priority): storage full / read-only / failing storage outrank every wrapper and every
# library root cause below the hardware and memory ones; a missing file or a refused permission only the
# generic exceptions and wrappers (a model- or dataset-loading error naming the path stays what it is).
_ERRNO_OUTCOME = {
    "ENOSPC": ("OSError", 80), "EDQUOT": ("OSError", 80), "EROFS": ("OSError", 80), "EIO": ("OSError", 80),
    "ESTALE": ("OSError", 80), "ENOENT": ("FileNotFoundError", 63), "EACCES": ("PermissionError", 63),
    "EPERM": ("PermissionError", 63),
}  # fmt: skip
_MITIGATION = {
    "ENOSPC": "The file system the job writes to is full ({where}); free space or write elsewhere (a larger scratch or project file system), keep fewer checkpoints (save_total_limit), then resume from the last complete checkpoint.",
    "EDQUOT": "The job's user or project is over its disk (or inode) quota ({where}); clean up or ask for more quota, write checkpoints and caches to project/scratch storage, then resume from the last complete checkpoint.",
    "EROFS": "The job wrote to a read-only file system ({where}); point the output, checkpoint and cache directories at a writable one.",
    "EIO": "The storage returned an I/O error ({where}); check the file system's health on that node (dmesg, the storage's status), then resume elsewhere.",
    "ESTALE": "A network file system handle went stale ({where}); the file was replaced or the mount was remounted under the job. Check the storage and resume.",
    "ENOENT": "A file the job needs does not exist ({where}); fix the path or make sure the file is on every node.",
    "EACCES": "The job's user may not access the path ({where}); fix ownership or permissions, or choose a directory the job can write.",
    "EPERM": "The operation was not permitted ({where}); fix ownership or permissions, or choose a directory the job can write.",
}  # fmt: skip


@dataclass(frozen=True)
class ErrnoCause:
    errno: str  # the errno's name, e.g. "ENOSPC"
    context: str | None  # "checkpoint save", "dataset read", "cache write" or None
    reason: str
    priority: int
    line: int
    text: str
    mitigation: str


def errno_of(text: str) -> str | None:
    """The first errno named in a line of text (its symbolic name), or None."""
    for match in _ERRNO_RE.finditer(text):
        number = match.group("num") or match.group("num2") or match.group("num3")
        if number is not None:
            name = _ERRNO_BY_NUMBER.get(int(number))
        else:
            name = (match.group("name") or "").upper() or _STRERROR_LOWER.get(match.group("text").lower())
        if name:
            return name
    return None


_STRERROR_LOWER = {k.lower(): v for k, v in _STRERROR.items()}


def _context_of(text: str, frames: Sequence[str]) -> str | None:
    where = " ".join((*frames, text))
    for name, pattern in _CONTEXTS:
        if pattern.search(where):
            return name
    return None


def errno_cause(kept: Sequence[tuple[int, str]], raised: Sequence[RaisedException]) -> ErrnoCause | None:
    """The first operating-system error inside an exception text (a raised exception, or an error line
    that is not a warning record), with its context."""
    frames_of = {exc.line: exc.frames for exc in raised}
    # A library that cannot be loaded ("ImportError: libcudart.so.12: cannot open shared object file: No such
    # file or directory") is an import problem whatever errno the loader saw.
    if raised:
        candidates = [(exc.line, exc.text) for exc in raised if exc.reason != "ImportError"]
    else:
        candidates = [(n, t) for n, t in kept if not is_warning_record(t) and _is_exception_text(t)]
    for number, text in sorted(candidates):
        name = errno_of(text)
        if name is None:
            continue
        context = _context_of(text, frames_of.get(number, ()))
        reason, priority = _ERRNO_OUTCOME[name]
        if context == "dataset read" and name in ("ENOENT", "EACCES", "EPERM", "EIO", "ESTALE"):
            reason, priority = "DatasetLoadingError", max(priority, 77)
        where = f"during a {context}" if context else "see the evidence line"
        return ErrnoCause(
            name, context, reason, priority, number, text, _MITIGATION[name].format(where=where)
        )
    return None


_EXPLICIT_ERRNO_RE = re.compile(r"\[Errno \d+\]|\(os error \d+\)|\b(?:" + "|".join(_ERRNO_NAMES) + r")\b")


def _is_exception_text(text: str) -> bool:
    """Without a traceback, an errno counts in an exception line (``OSError: ...``) or where it is spelled
    as an errno; a tool's own message that only shares the strerror (UCX's "Input/output error" for its
    status code) does not."""
    from acme.diagnosis.compress import strip_prefix

    bare = strip_prefix(text.split("\r")[-1])[0]
    match = _is_exception_line(bare)
    if match is not None and reason_of_exception(match.group("name")) == "ImportError":
        return False  # a library that cannot be loaded is an import problem (see errno_cause)
    return bool(match or _EXPLICIT_ERRNO_RE.search(bare))


# ------------------------------------------------------------------------------------------------ signals
_SIGNAL_NUMBERS = {
    "SIGHUP": 1,
    "SIGINT": 2,
    "SIGABRT": 6,
    "SIGBUS": 7,
    "SIGKILL": 9,
    "SIGSEGV": 11,
    "SIGTERM": 15,
}
_SIGNAL_WORDS = {
    "Killed": 9, "Terminated": 15, "Interrupt": 2, "Segmentation fault": 11, "Aborted": 6, "Bus error": 7,
    "Hangup": 1,
}  # fmt: skip
_LAUNCHER_SIGNAL_RES = (
    # torchrun / torch elastic: "failed (exitcode: -9)", "exitcode  : -2 (pid: ...)", the agent's own signal
    ("torchrun", re.compile(r"exitcode\s*:\s*-(?P<num>\d+)\b")),
    ("torchrun", re.compile(r"Received (?:(?P<num>\d+)|Signals\.(?P<name>SIG[A-Z]+)) death signal")),
    ("torchrun", re.compile(r"SignalException: Process \d+ got signal: (?P<num>\d+)")),
    # DeepSpeed's launcher: "[...] exits with return code = -2"
    ("deepspeed", re.compile(r"exits with return code = -(?P<num>\d+)\b")),
    # accelerate (subprocess): "died with <Signals.SIGINT: 2>."
    ("accelerate", re.compile(r"died with <Signals\.(?P<name>SIG[A-Z]+): (?P<num>\d+)>")),
    # srun: "srun: error: host: task 3: Killed" (strsignal's text)
    ("srun", re.compile(r"srun: error: \S+: tasks? [\d,-]+: (?P<word>Killed|Terminated|Interrupt|Segmentation fault|Aborted|Bus error|Hangup)\b")),
    # Open MPI: "... exited on signal 9 (Killed)."
    ("mpirun", re.compile(r"exited on signal (?P<num>\d+)\b")),
    # LSF's summary: "Exited with exit code 130." (128 + the signal)
    ("lsf", re.compile(r"^Exited with exit code (?P<code>1(?:29|3[0-9]|4[0-3]))\.")),
    # the shell's job control: "line 14: 94460 Killed   python main.py"
    ("shell", re.compile(r"^(?:.*: )?(?:line \d+:\s+)?\d+ (?P<word>Killed|Terminated|Interrupt|Segmentation fault|Aborted)\s+\S")),
)  # fmt: skip
# signal -> (reason, priority): the user's interrupt is a scheduler-level outcome; a segfault and a kill are
# symptoms that any root cause in the log outranks. SIGABRT has no outcome: an abort follows a C++ exception
# or an assertion, which is the cause.
_SIGNAL_OUTCOME = {
    2: ("UserCancelled", 50), 11: ("SegmentationFault", 12), 9: ("KilledBySignal", 10), 15: ("KilledBySignal", 10),
    1: ("KilledBySignal", 10),
}  # fmt: skip


@dataclass(frozen=True)
class LauncherSignal:
    signal: int
    launcher: str
    line: int
    text: str


def launcher_signals(kept: Sequence[tuple[int, str]]) -> list[LauncherSignal]:
    """Workers killed by a signal, as the launchers and schedulers report them, in log order."""
    from acme.diagnosis.compress import strip_prefix

    out = []
    for number, raw in kept:
        text = strip_prefix(raw.split("\r")[-1])[0]
        for launcher, pattern in _LAUNCHER_SIGNAL_RES:
            match = pattern.search(text)
            signal = _signal_number(match) if match else None
            if signal is not None:
                out.append(LauncherSignal(signal, launcher, number, raw))
                break
    return out


def _signal_number(match: re.Match[str]) -> int | None:
    groups = match.groupdict()
    if groups.get("num"):
        return int(groups["num"])
    if groups.get("name"):
        return _SIGNAL_NUMBERS.get(groups["name"])
    if groups.get("word"):
        return _SIGNAL_WORDS.get(groups["word"])
    if groups.get("code"):
        return int(groups["code"]) - 128
    return None


def signal_outcome(signal: int) -> tuple[str, int] | None:
    """The reason and priority of a worker's death by ``signal`` when nothing else explains it."""
    return _SIGNAL_OUTCOME.get(signal)


# ------------------------------------------------------------------------------------------------ teardown
# A launcher's report that one of its workers failed, with its exit status: torchrun's agent ("failed
# (exitcode: 1) local_rank: 0 (pid: 123) of binary: ...") and DeepSpeed's launcher ("[...] ['python', ...]
# exits with return code = 1").
_WORKER_FAILED_RES = (
    re.compile(r"failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\) of binary"),
    re.compile(r"\] exits with return code = -?\d+\b"),
)
# What breaks when the job tears itself down after that report: the other nodes' agents lose the rendezvous
# store the failed node's agent hosted, and their sockets are reset.
TEARDOWN_REASONS = frozenset({"ConnectionError"})


def in_teardown(reason: str, line: int, failed_at: int | None) -> bool:
    """Whether a ``reason`` found at ``line`` is the job's teardown: a connection error logged after the
    launcher's worker-failure report at ``failed_at`` (:func:`worker_failure_line`)."""
    return failed_at is not None and reason in TEARDOWN_REASONS and line >= failed_at


def worker_failure_line(kept: Sequence[tuple[int, str]]) -> int | None:
    """The first line where a launcher reports a worker failed (torchrun, DeepSpeed), or None.

    Connection errors logged after it are the job's teardown (the rendezvous store's host has exited), not
    its cause; logged before it, they can be the cause, and they stay."""
    from acme.diagnosis.compress import strip_prefix

    for number, raw in kept:
        text = strip_prefix(raw.split("\r")[-1])[0]
        if any(pattern.search(text) for pattern in _WORKER_FAILED_RES):
            return number
    return None


# ------------------------------------------------------------------------------------------------ combining
GENERIC_EXCEPTION_PRIORITY = 62  # rules at or below this priority that name a builtin exception


@dataclass(frozen=True)
class Candidate:
    """An answer of a layer, ranked against the rules' answer by (priority, earliest line)."""

    reason: str
    priority: int
    line: int
    text: str
    layer: str  # "traceback", "errno" or "signal"
    mitigation: str | None = None
    origin: str | None = None


def is_generic_exception_rule(rule: Rule) -> bool:
    """A rule that names a Python exception class (the generic tier): it counts only raised exceptions when
    the log shows some, and never a warning record. ConnectionError's rule is left out: its signatures are
    messages (socket errors), not the class name."""
    cls = getattr(builtins, rule.reason, None)
    return (
        rule.priority <= GENERIC_EXCEPTION_PRIORITY and rule.reason != "ConnectionError"
        and isinstance(cls, type) and issubclass(cls, BaseException)
    )  # fmt: skip


def layer_candidates(
    kept: Sequence[tuple[int, str]], rules: Sequence[Rule], raised: Sequence[RaisedException]
) -> list[Candidate]:
    """What the layers say about the kept lines: one candidate per raised exception, the first errno in an
    exception text, and one per worker a launcher reports killed by a signal."""
    out = [
        Candidate(
            exc.reason,
            _exception_priority(exc.reason, rules),
            exc.line,
            exc.text,
            "traceback",
            origin=exc.origin,
        )
        for exc in raised
        if exc.reason
    ]
    cause = errno_cause(kept, raised)
    if cause is not None:
        origin = next((exc.origin for exc in raised if exc.line == cause.line), None)
        out.append(
            Candidate(cause.reason, cause.priority, cause.line, cause.text, "errno", cause.mitigation, origin)
        )
    for sig in launcher_signals(kept):
        outcome = signal_outcome(sig.signal)
        if outcome is not None:
            out.append(Candidate(outcome[0], outcome[1], sig.line, sig.text, "signal"))
    return out


def _exception_priority(reason: str, rules: Sequence[Rule]) -> int:
    """A raised exception ranks as the generic rule for its reason (a RuntimeError as a bare RuntimeError);
    a reason only a root-cause rule names (MemoryError is out of memory) as that rule."""
    priorities = [r.priority for r in rules if r.reason == reason]
    generic = [p for p in priorities if p <= GENERIC_EXCEPTION_PRIORITY]
    if generic:
        return max(generic)
    return min(priorities) if priorities else 60
