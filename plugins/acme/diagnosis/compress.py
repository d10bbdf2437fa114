"""Streaming compression of job logs before diagnosis (the paper's log pre-processing step).

A failed LLM job can leave gigabytes of log: every rank prints its iteration metrics, progress bars, NCCL
chatter and warnings, and then the same error 512 times. Diagnosis needs the few lines that matter. This
module streams a log once, in constant memory, and keeps:

* every **error** line (severity words, exception names, CUDA/NCCL/Xid errors, NaN/Inf loss) and every line
  of a Python **traceback** (from ``Traceback (most recent call last):`` through the final exception line and
  its indented continuation), whatever the filter rules say;
* the few **context** lines just before each new error;
* one representative per **template** of the remaining lines, grouped by Drain (drain3) after masking
  numbers, hex, IPs and paths.

Routine lines (iteration metrics, progress bars, banners, config dumps, NCCL INFO, repeated warnings) are
dropped by regex rules loaded from ``include/diagnosis/filter_rules.yaml`` -- filtering first keeps Drain,
which is slow on progress-heavy logs, to the small remainder.

Interleaved multi-rank output (``[rank3]:``, ``3: ``, ``[default0]:``, Ray worker and host prefixes) is
normalised before deduplication, so an error printed by every rank is kept once, at its first line number,
with a count and the ranks seen. All dedup state is bounded (LRU), so memory does not grow with the log.

Logs repeat their lines (every rank prints the same ones, a job prints the same messages every epoch), so what
a line's text alone decides -- its prefix-stripped form, whether it is an error or a traceback start, its dedup
key, the filter rule that matches it, its mask -- is worked out once per distinct text and remembered (a bounded
memory, emptied when full); only what depends on the log so far is decided for every line.
"""

from __future__ import annotations

import gzip
import re
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acme.errors import ConfigError, InputError

KIND_ERROR = "error"
KIND_TRACEBACK = "traceback"
KIND_CONTEXT = "context"
KIND_TEMPLATE = "template"
# A NaN/Inf loss line that training recovered from (a finite loss was logged after it): kept and shown, but not
# diagnosed -- a transient spike is never blamed for a later failure.
KIND_RECOVERED = "recovered"

# Leading prefixes that say which rank/worker/host printed a line. Removed (repeatedly) before a line is
# compared with others; the rank id, when there is one, is recorded.
_PREFIX_RE = re.compile(
    r"""^(?:
        \s*\[rank(?P<r1>\d+)\]:\s?                            # torch elastic: [rank3]:
      | \s*\[default(?P<r2>\d+)\]:\s?                         # torchrun --tee: [default0]:
      | \s*(?P<r3>\d{1,5}):\s(?=\S)                           # srun -l / torchrun -l: 3: ...
      | \s*\((?:\w+)\s+pid=\d+(?:,\s*ip=[\d.]+)?\)\s?         # Ray: (RayWorkerWrapper pid=4009)
      | \s*\[\d{3,}\]\s(?=\S)                                 # pdsh-style sequence: [80746]
      | \s*(?P<host>[A-Za-z][\w.-]*-\d+|worker-\d+):\s(?=\S)  # pdsh host: worker-5:
      | \s*(?:stderr|stdout):\s?                              # launcher stream tags
    )""",
    re.VERBOSE,
)
_TS_PREFIX_RE = re.compile(
    r"^\s*\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?\s*"
)
_RANK_IN_TEXT_RE = re.compile(r"\[(?:PG \S+ )?Rank (\d+)\]|\bTP(\d+)\]|local_rank: (\d+)")

# Masks used for dedup keys and before template mining. The lookahead names every character a mask can start
# with, so the scan skips the other positions without trying the five alternatives there (half the time).
_MASK_RE = re.compile(
    r"""(?=[-+0-9a-f/])
        (?P<ts>\d{4}-\d{2}-\d{2}[ T-]\d{2}[:.]\d{2}[:.]\d{2}(?:[.,]\d+)?)
      | (?P<ip>\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+|<\d+>)?\b)
      | (?P<hex>\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b)
      | (?P<path>(?:/[\w.@+-]+){2,}/?)
      | (?P<num>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)""",
    re.VERBOSE,
)

# Dedup keys of error lines: mask what differs between ranks, nodes and moments (timestamps, IPs, hex, paths,
# identifiers mixing letters and digits, long numbers, rank/GPU/pid numbers) but keep short codes such as
# an Xid number or an errno, which tell errors apart.
_KEY_MASK_RE = re.compile(
    r"""(?P<ts>\d{4}-\d{2}-\d{2}[ T-]\d{2}[:.]\d{2}[:.]\d{2}(?:[.,]\d+)?|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?
             |\b\d{4}[./-]\d{2}[./-]\d{2}\b)
      | (?P<ip>\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+|<\d+>)?)
      | (?P<hex>\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b)
      | (?P<path>(?:/[\w.@+-]+){2,}/?)
      | (?P<who>\b(?:[Rr]ank|GPU|gpu|device|cudaDev|pid|PID|local_rank|node|TP|DP|PP)[\s:=#]*\d+)
      | (?P<id>\b[\w:.-]*\w)
      | (?P<num>[-+]?\d+\.\d+(?:[eE][-+]?\d+)?|\d{4,})""",
    re.VERBOSE,
)
# Inside a run that is no identifier (no letter or no digit), only the other masks may start.
_KEY_MASK_NO_ID_RE = re.compile(_KEY_MASK_RE.pattern.replace("| (?P<id>\\b[\\w:.-]*\\w)\n", ""), re.VERBOSE)
_LETTER_RE = re.compile(r"[A-Za-z]")
_DIGIT_RE = re.compile(r"\d")
_HEXISH_RE = re.compile(r"[0-9a-f]{12}")
# The ends of a run after which a mask started inside it may go on past it: a date before " 09:00:03", a
# time before ",512", an IP before "<29500>", a rank word before " 31".
_CROSSING_END_RE = re.compile(
    r"(?:\d{4}-\d{2}-\d{2}|\d:\d{2}:\d{2}|\d{1,3}(?:\.\d{1,3}){3}"
    r"|[Rr]ank|GPU|gpu|device|cudaDev|pid|PID|local_rank|node|TP|DP|PP)\Z"
)
_CONTINUATION_RE = re.compile(r"[\s:=#,.<T-]{1,64}\d")  # what such a mask goes on with after the run
_MASK_REACH = 64  # how far past the run such a mask may extend


def error_key(text: str) -> str:
    """The dedup key of an error line: the same error from another rank, node or time maps to the same key.

    An identifier is a run of word characters, ``:``, ``.`` and ``-`` holding a letter and a digit. Each
    run is matched once and tested afterwards: a lookahead at every word boundary of a run made the time
    quadratic in its length (a 40 KB dotted run took 10 s, a 1 MB one hours).
    """
    out: list[str] = []
    pos = 0
    while (match := _KEY_MASK_RE.search(text, pos)) is not None:
        out.append(text[pos : match.start()])
        run = match.group()
        if match.lastgroup != "id" or (_LETTER_RE.search(run) and _DIGIT_RE.search(run)):
            out.append("<" + (match.lastgroup or "x").upper() + ">")
            pos = match.end()
            continue
        # No part of this run is an identifier either: apply the other masks that start inside it.
        pos, run_end = match.start(), match.end()
        crossing = (
            _CROSSING_END_RE.search(run) is not None and _CONTINUATION_RE.match(text, run_end) is not None
        )
        if not crossing and (len(run) < 3 or not (_DIGIT_RE.search(run) or _HEXISH_RE.search(run))):
            out.append(run)  # no mask can start inside it (the shortest, "1.5", has three characters)
            pos = run_end
            continue
        reach = _MASK_REACH if crossing else 0
        while (
            inner := _KEY_MASK_NO_ID_RE.search(text, pos, run_end + reach)
        ) is not None and inner.start() < run_end:
            out.append(text[pos : inner.start()] + "<" + (inner.lastgroup or "x").upper() + ">")
            pos = inner.end()
        if pos < run_end:
            out.append(text[pos:run_end])
            pos = run_end
    out.append(text[pos:])
    return "".join(out)


# Error detection. STRONG signals always make an error line; WEAK ones (a lowercase "error"/"failed") do
# not when the line states a benign level itself (BGL "RAS KERNEL INFO ... error corrected").
_STRONG_ERROR_RE = re.compile(
    r"""Traceback\ \(most\ recent\ call\ last\)
      | \b[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?=[:\s(]|$)
      | \bCUDA(?:\ error|_ERROR_\w+)|\bcudaError\w+|\bCUBLAS_STATUS_\w+|\bNCCL\ WARN\b|\bncclRemoteError|\bncclSystemError
      | \bncclInternalError|\bncclUnhandledCudaError|\b(?i:xid)\b|fallen\ off\ the\ bus|(?i:out\ of\ memory)|\bOOM(?:Killed)?\b
      | \bHIP\ (?:error|failure)|\bhipError\w+|\bHIP_ERROR_\w+|Memory\ access\ fault\ by\ GPU|(?i:GPU\ (?:is\ )?lost)
      | Got\ completion\ (?:from\ peer|with\ error)|\bEvicted\b|(?i:low\ on\ resource|\bpreempted\b)
      | (?i:\bloss\ is\ (?:nan|inf))|^\W*loss\s*\|\s*(?:nan|inf)\b
      | \bException:|^Exception\ in\ thread\b|RESOURCE_EXHAUSTED|Resource\ exhausted|\[Errno\ -?\d+\]
      | \b(?:lm\ )?loss\b[^|,;]{0,20}?[:=]\s*-?(?:nan|inf)\b|\bgrad[\ _]norm\b[^|,;]{0,20}?[:=]\s*(?:nan|inf)\b
      | \bnan\ (?:loss|in\ (?:local\ )?grad)|\bNaN\ (?:in|detected)
      | Segmentation\ fault|core\ dumped|\bKilled\b|\bSIG(?:KILL|SEGV|ABRT|BUS|TERM)\b|killed\ by\ signal
      | \bexit\ ?code\b|exit\ status\ [1-9]|exitcode\b|terminate\ called|\bwhat\(\):|\bdeath\ signal\b
      | \b(?:FATAL|FAILURE|FAILED|SEVERE|ERROR|CRITICAL|PANIC|EMERG|ALERT)\b|\bpanic\b
      | ^\s*\[?E\d{0,4}[\s\]]\S|\[E\ [\w.]+:\d+\]|^\s*E\d{4}\ \d
      | Watchdog\ caught|watchdog\ thread\ terminated|DUE\ TO\ (?:NODE\ FAILURE|TIME\ LIMIT)|NODE_FAIL
      | slurmstepd:\ error|\berror:\ unrecognized\ arguments|\berror:\ (?:argument|the\ following)
      | \bTERM_[A-Z_]+:|^\s*(?:Ambiguous\ value\ for\ argument|Could\ not\ override)\ '""",
    re.VERBOSE,
)
_WEAK_ERROR_RE = re.compile(
    r"\b(?:error|errors|failed|failure|fatal|abort(?:ed)?|timed ?out|refused|unreachable)\b"
    r"|connection (?:reset|closed)|no space left|permission denied|no such file",
    re.IGNORECASE,
)
_BENIGN_LEVEL_RE = re.compile(r"\b(?:INFO|DEBUG|TRACE|NOTICE)\b|\[I\s|^\s*I\d{4}\s")
_WEAK_EXTRA_RE = re.compile(r"(?i)\b(?:cannot|unable to|could not) connect\b")
# Loss values: a non-finite one (an error line) and a finite one (training goes on: an earlier NaN recovered).
_NONFINITE_LOSS_RE = re.compile(
    r"(?i)\b(?:lm[ _])?loss\b[^|,;]{0,20}?[:=]\s*-?(?:nan|inf)\b|\bgrad[ _]norm\b[^|,;]{0,20}?[:=]\s*(?:nan|inf)\b"
    r"|\bloss is (?:nan|inf)|^\W*loss\s*\|\s*(?:nan|inf)\b"
)
_FINITE_LOSS_RE = re.compile(r"(?i)\b(?:lm[ _])?loss\b[^|,;:=]{0,20}?(?:[:=]|\bis\b)\s*[-+]?\d")

_TB_START_RE = re.compile(r"Traceback \(most recent call last\)")
_TB_BODY_RE = re.compile(
    r"^\s+\S|^\s*$|^During handling of the above exception|^The above exception was the direct cause"
)
_EXC_LINE_RE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Fault)?\b:?")

_DEFAULT_RULES = "filter_rules.yaml"


@dataclass
class KeptLine:
    """One line of the compressed log, at the line number of its first occurrence."""

    line: int
    text: str
    kind: str
    count: int = 1
    ranks: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "text": self.text,
            "kind": self.kind,
            "count": self.count,
            "ranks": list(self.ranks),
        }


@dataclass
class CompressedLog:
    """Kept lines in input order, the mined templates, and how much was dropped."""

    lines: list[KeptLine]
    templates: list[dict[str, Any]]
    stats: dict[str, Any]

    def to_text(self) -> str:
        out = []
        for kept in self.lines:
            suffix = ""
            if kept.count > 1:
                ranks = f" ranks={','.join(kept.ranks)}" if kept.ranks else ""
                suffix = f"  [x{kept.count}{ranks}]"
            out.append(f"{kept.line:>8} {kept.kind[:5]:<5} {kept.text}{suffix}")
        return "\n".join(out) + ("\n" if out else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "lines": [k.to_dict() for k in self.lines],
            "templates": list(self.templates),
            "stats": dict(self.stats),
        }


def _search_of_the_pattern(text: str) -> object:
    """Stands for "not given" as a FilterRule's search: replaced by rule_search(pattern) when built."""
    raise AssertionError("a FilterRule's search is set when it is built")


@dataclass(frozen=True)
class FilterRule:
    id: str
    pattern: re.Pattern[str]
    description: str
    version: int
    keep_first: int | None = None
    # Whether the rule matches a line: what ``pattern.search`` finds, found faster (see rule_search).
    search: Callable[[str], object] = field(default=_search_of_the_pattern, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.search is _search_of_the_pattern:
            object.__setattr__(self, "search", rule_search(self.pattern))


_GLOBAL_FLAGS_RE = re.compile(r"\(\?[aiLmsux]+\)")
# What makes splitting a regex at its top-level "|" unsafe: group references and conditionals (their group
# numbers would change) and verbose mode (a "|" may sit in a comment).
_UNSPLITTABLE_RE = re.compile(r"\\[1-9]|\(\?P=|\(\?\(|\(\?[aiLmsu]*x")


def top_level_alternatives(source: str) -> list[str]:
    """The alternatives of a regex's source at its top level (outside groups and character classes)."""
    parts: list[str] = []
    depth, start, index, in_class = 0, 0, 0, False
    while index < len(source):
        char = source[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            index += 1
            if source.startswith("^", index):
                index += 1
            if source.startswith("]", index):  # a "]" first in a class is a literal
                index += 1
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(source[start:index])
            start = index + 1
        index += 1
    parts.append(source[start:])
    return parts


def rule_search(pattern: re.Pattern[str]) -> Callable[[str], object]:
    """A function true exactly where ``pattern.search`` finds a match, usually faster.

    A regex whose top-level alternatives mix anchored ones (``^...``) with unanchored ones is searched as two
    regexes, the anchored alternatives and the others: ``A|B`` matches somewhere exactly when ``A`` or ``B``
    does. Apart, the unanchored alternatives can start with literal characters, which lets the regex engine
    skip to the positions holding one of them instead of trying every alternative at every position (the
    mixed regex is tried at every position); the anchored ones are tried at the start only.
    """
    source = pattern.pattern
    flags = pattern.flags
    if _UNSPLITTABLE_RE.search(source) or flags & re.VERBOSE:
        return pattern.search
    lead = _GLOBAL_FLAGS_RE.match(source)  # the flags apply to every part: they are passed to each
    parts = top_level_alternatives(source[lead.end() :] if lead else source)
    anchored = [part for part in parts if part.startswith("^")]
    floating = [part for part in parts if not part.startswith("^")]
    if not anchored or not floating:
        return pattern.search
    try:
        at_start = re.compile("|".join(anchored), flags).search
        anywhere = re.compile("|".join(floating), flags).search
    except re.error:  # not split where the parts are not regexes of their own
        return pattern.search

    def search(text: str) -> bool:
        return at_start(text) is not None or anywhere(text) is not None

    return search


class _LRU(OrderedDict):
    """A bounded mapping that forgets its least recently used keys."""

    def __init__(self, maxsize: int):
        super().__init__()
        self.maxsize = maxsize

    def touch(self, key, default=None):
        value = self.get(key, default)
        if key in self:
            self.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.maxsize:
            self.popitem(last=False)


def default_filter_rules_path() -> Path:
    from acme import settings

    return settings.project().include_dir / "diagnosis" / _DEFAULT_RULES


def load_filter_rules(path: str | Path | None = None) -> list[FilterRule]:
    """Load and compile the filter rules once per file version; a bad rule raises ConfigError naming it."""
    from acme.diagnosis.rulefiles import load_rule_file

    rules_path = Path(path) if path is not None else default_filter_rules_path()
    return load_rule_file(rules_path, parse_filter_rules, "filter rules file")


def parse_filter_rules(document: Any, source: str = "<filter rules>") -> list[FilterRule]:
    """Validate a parsed filter-rules document (``{"rules": [...]}`` or a bare list)."""
    entries = document.get("rules") if isinstance(document, dict) else document
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{source}: expected a non-empty list under 'rules'")
    rules: list[FilterRule] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: rule #{index} is not a mapping")
        rule_id = entry.get("id")
        if not isinstance(rule_id, str) or not rule_id:
            raise ConfigError(f"{source}: rule #{index} has no id")
        if rule_id in seen:
            raise ConfigError(f"{source}: filter rule {rule_id!r} is defined twice")
        seen.add(rule_id)
        for required in ("regex", "description", "version"):
            if required not in entry:
                raise ConfigError(f"{source}: filter rule {rule_id!r} has no {required!r}")
        try:
            pattern = re.compile(str(entry["regex"]))
        except re.error as exc:
            raise ConfigError(f"{source}: filter rule {rule_id!r} has an invalid regex: {exc}") from exc
        keep_first = entry.get("keep_first")
        if keep_first is not None and (not isinstance(keep_first, int) or keep_first < 0):
            raise ConfigError(f"{source}: filter rule {rule_id!r}: keep_first must be a non-negative integer")
        rules.append(
            FilterRule(
                id=rule_id,
                pattern=pattern,
                description=str(entry["description"]),
                version=int(entry["version"]),
                keep_first=keep_first,
            )
        )
    return rules


# What reading a log can raise: OSError (gzip.BadGzipFile is one), EOFError (a gzip stream cut short) and
# zlib.error (corrupt deflate data) -- the last two are not OSErrors.
LOG_READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error)


def read_problem(exc: BaseException) -> str:
    """What is wrong with a log that could not be read, in words (for an InputError naming the file)."""
    if isinstance(exc, EOFError):
        return f"truncated gzip data: the stream ends before its end-of-stream marker ({exc}); the file was cut short"
    if isinstance(exc, gzip.BadGzipFile):
        return f"not valid gzip data ({exc}), although the file is read as gzip (.gz)"
    if isinstance(exc, zlib.error):
        return f"corrupt gzip data: the compressed stream cannot be inflated ({exc})"
    return f"cannot read log: {exc}"


@contextmanager
def _lines_of(source: str | Path | Iterable[str]) -> Iterator[Iterable[str]]:
    """The raw lines of a log file (plain or gzip, read as it streams) or of an iterable of lines."""
    if not isinstance(source, (str, Path)):
        yield source
        return
    path = Path(source)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        # Only a newline ends a line: a tqdm bar's bare carriage returns stay inside it.
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="\n") as handle:
            yield handle
    except LOG_READ_ERRORS as exc:
        raise InputError(str(path), read_problem(exc)) from exc


def _split_lines(raw_lines: Iterator[str]) -> Iterator[str]:
    """Yield logical lines without their line ending (\\n or \\r\\n); a bare \\r inside a line (tqdm) stays."""
    for raw in raw_lines:
        if raw.endswith("\n"):
            raw = raw[:-1]
        for line in raw.split("\n") if "\n" in raw else (raw,):
            yield line[:-1] if line.endswith("\r") else line


def strip_prefix(text: str) -> tuple[str, str | None]:
    """Remove rank/worker/host/timestamp prefixes; return the bare message and the rank or host seen."""
    rank = None
    while True:
        match = _PREFIX_RE.match(text)
        if not match or match.end() == 0:
            break
        found = match.group("r1") or match.group("r2") or match.group("r3") or match.group("host")
        if found is not None and rank is None:
            rank = found
        text = text[match.end() :]
    ts = _TS_PREFIX_RE.match(text)
    if ts and ts.end() < len(text):
        text = text[ts.end() :]
    if rank is None and ("Rank " in text or "TP" in text or "local_rank" in text):
        inner = _RANK_IN_TEXT_RE.search(text)
        if inner:
            rank = next(g for g in inner.groups() if g is not None)
    return text, rank


_MASK_PLACEHOLDERS = {name: f"<{name.upper()}>" for name in _MASK_RE.groupindex}


def _mask_placeholder(match: re.Match[str]) -> str:
    return _MASK_PLACEHOLDERS[match.lastgroup or ""]


def mask(text: str) -> str:
    """Replace timestamps, IPs, hex, paths and numbers by placeholders (dedup keys, template mining)."""
    return _MASK_RE.sub(_mask_placeholder, text)


# Cheap substring gates: the regexes above are only run on lines containing one of these (lower-cased),
# which keeps error detection off the hot path of routine lines.
_ERROR_TRIGGERS = (
    "error", "exception", "traceback", "cuda error", "cuda_error", "cudaerror", "cublas_status", "nccl warn",
    "ncclremote", "ncclsystem", "ncclinternal", "ncclunhandled", "xid", "fallen off", "out of memory", "oom", ": nan",
    "=nan", "= nan", ": inf", "=inf", ": -inf", "nan in ", "nan detected", "segmentation", "core dumped", "killed",
    "sigkill", "sigsegv", "sigabrt", "sigbus", "sigterm", "exit", "terminate called", "what():", "fatal", "fail",
    "severe", "critical", "panic", "emerg", "alert", "watchdog", "due to", "slurmstepd", "abort", "timed out",
    "timeout", "refused", "unreachable", "connection reset", "connection closed", "no space left",
    "permission denied", "no such file", "fault", "evicted", "preempt", "low on resource", "lost",
    "got completion", "loss is", "| nan", "| inf", "cannot connect", "unable to connect", "exhausted",
    "interrupt", "death signal", "term_", "ambiguous value for argument", "could not override",
)  # fmt: skip


def _literal_trie_pattern(words: Iterable[str]) -> str:
    """A regex matching wherever one of ``words`` occurs, their common prefixes shared (``err(?:or|no)``):
    the regex engine then tries one branch per first character instead of one per word."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here

    def branch(node: dict[str, Any]) -> str:
        if "" in node:
            return ""  # a shorter word is already a match: whatever follows it need not be tried
        alternatives = [re.escape(char) + branch(child) for char, child in sorted(node.items())]
        return alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"

    return branch(trie)


# All of them in one search of the lower-cased line (~4x faster than one alternative per trigger).
_ERROR_TRIGGER_RE = re.compile(_literal_trie_pattern(_ERROR_TRIGGERS))


def is_error_line(text: str) -> bool:
    """Whether a (prefix-stripped) line reports an error, by severity words and error signatures."""
    if _ERROR_TRIGGER_RE.search(text.lower()) is None:
        head = text.lstrip()[:5]
        if "[E" not in text and not (head[:1] == "E" and head[1:].isdigit()):
            return False
    if _STRONG_ERROR_RE.search(text):
        return True
    weak = _WEAK_ERROR_RE.search(text) or _WEAK_EXTRA_RE.search(text)
    return bool(weak) and not _BENIGN_LEVEL_RE.search(text)


_BLANK = "blank"
_ROUTINE = "routine"
_UNKNOWN_ORDER = -2
_ANY_ORDER = -1


@dataclass(slots=True)
class _Verdict:
    """What a line's prefix-stripped text alone says of it: computed once per distinct text, since logs repeat
    their lines (every rank prints the same ones). What depends on the log so far (tracebacks, dedup counts,
    keep_first, the order of the filter rules) is decided per line, outside it."""

    kind: str  # KIND_TRACEBACK (a traceback starts), KIND_ERROR, _BLANK or _ROUTINE
    key: str = ""  # error and traceback lines: the dedup key
    nonfinite: bool = False  # error lines: it reports a NaN/Inf loss or gradient norm
    rule: FilterRule | None = None  # routine lines: the first filter rule that matches it, in the order ...
    rule_order: int = _UNKNOWN_ORDER  # ... of this version (_ANY_ORDER: no rule matches it)
    masked: str | None = None  # routine lines: the masked text, once needed


def _classify(bare: str) -> _Verdict:
    if _TB_START_RE.search(bare):
        return _Verdict(KIND_TRACEBACK, error_key(bare))
    if is_error_line(bare):
        nonfinite = ("oss" in bare or "norm" in bare) and _NONFINITE_LOSS_RE.search(bare) is not None
        return _Verdict(KIND_ERROR, error_key(bare), nonfinite)
    return _Verdict(_ROUTINE if bare.strip() else _BLANK)


class LogCompressor:
    """Streaming compressor. Feed lines with :meth:`feed`, then call :meth:`result`.

    Memory is bounded by ``max_keys`` (dedup LRU and the per-text verdicts), ``max_kept`` (kept lines),
    ``max_templates`` and the ``context`` ring buffer, never by the length of the log.
    """

    def __init__(
        self,
        rules: list[FilterRule] | None = None,
        *,
        context: int = 2,
        max_keys: int = 20_000,
        max_kept: int = 5_000,
        max_templates: int = 1_000,
        max_ranks_listed: int = 16,
        max_line_chars: int = 2_000,
        drain_sim_th: float = 0.4,
        max_verdict_chars: int = 16_000_000,
    ):
        from drain3.drain import Drain

        self.rules = rules if rules is not None else load_filter_rules()
        self.context = context
        self.max_kept = max_kept
        self.max_templates = max_templates
        self.max_ranks_listed = max_ranks_listed
        self.max_line_chars = max_line_chars
        # Rules are tried one by one, most frequent first (re-sorted as the log goes): a routine line is
        # usually dropped by the first rule tried, which is much faster than one combined alternation.
        self._order: list[FilterRule] = list(self.rules)
        self._hits: dict[str, int] = {r.id: 0 for r in self.rules}
        self._order_version = 0  # counts the changes of _order
        self._drain = Drain(sim_th=drain_sim_th, max_clusters=max_templates, extra_delimiters=("=", ",", "|"))
        self._kept: list[KeptLine] = []
        self._kept_by_key: _LRU = _LRU(max_keys)  # (kind, key) -> KeptLine
        self._template_by_key: _LRU = _LRU(max_keys)  # masked text -> cluster id
        self._templates: dict[int, dict[str, Any]] = {}
        self._keep_first_seen: _LRU = _LRU(max_keys)
        self._recent: deque[tuple[int, str, bool]] = deque(maxlen=max(context, 1))
        self._tb_state: _LRU = _LRU(4_096)  # rank -> "tb" | "cont:<n>"
        # Lines seen (up to max_line_chars) with their prefix-stripped text and rank, and verdicts by stripped
        # text, all forgotten when their texts hold more than max_verdict_chars characters: both depend on
        # their text only, so forgetting one costs time, never a different result.
        self._stripped: dict[str, tuple[str, str | None]] = {}
        self._verdicts: dict[str, _Verdict] = {}
        self._verdict_chars = 0
        self.max_verdict_chars = max_verdict_chars
        self.lines_in = 0
        self.kept_errors = 0
        self.dropped_by_rule: dict[str, int] = {r.id: 0 for r in self.rules}
        self.truncated = 0
        self.blank_lines = 0
        self.last_finite_loss_line = 0  # the last line that logged a finite loss after a non-finite one
        self._nonfinite_pending = False  # a NaN/Inf loss was kept and no finite loss has followed yet
        self._started = time.perf_counter()

    # -- kept lines -------------------------------------------------------------------------------------
    def _keep(self, number: int, original: str, key: str, kind: str, rank: str | None) -> bool:
        """Record a kept line; return True when it is new (not a duplicate of a kept line)."""
        dedup_key = (kind if kind != KIND_CONTEXT else KIND_CONTEXT, key)
        existing = self._kept_by_key.touch(dedup_key)
        if existing is not None:
            existing.count += 1
            if (
                rank is not None
                and rank not in existing.ranks
                and len(existing.ranks) < self.max_ranks_listed
            ):
                existing.ranks.append(rank)
            return False
        if len(self._kept) >= self.max_kept:
            self.truncated += 1
            return False
        kept = KeptLine(line=number, text=original[: self.max_line_chars], kind=kind)
        if rank is not None:
            kept.ranks.append(rank)
        self._kept.append(kept)
        self._kept_by_key.put(dedup_key, kept)
        return True

    def _keep_error(self, number: int, original: str, key: str, kind: str, rank: str | None) -> None:
        self.kept_errors += 1
        if kind == KIND_ERROR and (KIND_ERROR, key) not in self._kept_by_key:
            # Context: the lines just before a new error, unless they were errors themselves.
            for ctx_number, ctx_text, ctx_was_error in self._recent:
                if not ctx_was_error:
                    ctx_bare, _ = strip_prefix(ctx_text)
                    self._keep(ctx_number, ctx_text, error_key(ctx_bare), KIND_CONTEXT, None)
        self._keep(number, original, key, kind, rank)

    # -- templates --------------------------------------------------------------------------------------
    def _template(self, number: int, original: str, masked: str) -> None:
        cluster_id = self._template_by_key.touch(masked)
        if cluster_id is None:
            cluster, _ = self._drain.add_log_message(masked)
            cluster_id = cluster.cluster_id
            self._template_by_key.put(masked, cluster_id)
        entry = self._templates.get(cluster_id)
        if entry is None:
            if len(self._templates) >= self.max_templates:
                self.truncated += 1
                return
            entry = {
                "cluster_id": cluster_id,
                "line": number,
                "text": original[: self.max_line_chars],
                "count": 0,
            }
            self._templates[cluster_id] = entry
        entry["count"] += 1

    def _match_rule(self, bare: str, verdict: _Verdict) -> FilterRule | None:
        """The first rule, in the current order, that matches the line (the verdict remembers it)."""
        if verdict.rule_order != self._order_version and verdict.rule_order != _ANY_ORDER:
            verdict.rule = next((rule for rule in self._order if rule.search(bare)), None)
            verdict.rule_order = self._order_version if verdict.rule is not None else _ANY_ORDER
        rule = verdict.rule
        if rule is not None:
            self._hits[rule.id] += 1
            if self.lines_in % 4096 == 0:
                order = sorted(self._order, key=lambda r: -self._hits[r.id])
                if order != self._order:
                    self._order = order
                    self._order_version += 1
        return rule

    # -- main loop --------------------------------------------------------------------------------------
    def feed(self, number: int, original: str) -> None:
        self.lines_in += 1
        if "\r" not in original:
            self._feed_segment(number, original)
            return
        # A progress bar redrawn with carriage returns makes one physical line of many screens, and an error
        # printed meanwhile lands after a "\r" -- possibly far beyond max_line_chars. The line stands for its
        # error segments when it has some (the bar's states dropped, so the error is kept whole and compared
        # with the same error printed elsewhere), else for the bar's last state.
        segments = [seg for seg in original.split("\r") if seg.strip()]
        if not segments:
            self.blank_lines += 1
            return
        if not is_error_line(original):  # the common case, a bar alone: one check for the whole line
            self._feed_segment(number, segments[-1])
            return
        flags = [is_error_line(strip_prefix(seg)[0]) for seg in segments]
        if not any(flags):
            self._feed_segment(number, segments[-1])
            return
        errors = "\r".join(seg for seg, flag in zip(segments, flags, strict=True) if flag)
        first = flags.index(True)
        # Shown with the bar's state when the error came (the job's progress), if that is short.
        lead = segments[first - 1] if first > 0 and len(segments[first - 1]) <= 500 else ""
        self._feed_segment(number, errors, shown=f"{lead}\r{errors}" if lead else errors)

    def _remembered(self, text: str) -> bool:
        """Whether a new line or stripped text may be remembered (the memory is emptied when full)."""
        if len(text) > self.max_line_chars:
            return False
        if self._verdict_chars > self.max_verdict_chars:
            self._stripped.clear()
            self._verdicts.clear()
            self._verdict_chars = 0
        self._verdict_chars += len(text)
        return True

    def _new_stripped(self, original: str) -> tuple[str, str | None]:
        stripped = strip_prefix(original)
        if self._remembered(original):
            self._stripped[original] = stripped
        return stripped

    def _new_verdict(self, bare: str) -> _Verdict:
        verdict = _classify(bare)
        if self._remembered(bare):
            self._verdicts[bare] = verdict
        return verdict

    def _feed_segment(self, number: int, original: str, shown: str | None = None) -> None:
        """Classify and keep one line (``shown`` is the text kept when it differs from ``original``)."""
        text = original if shown is None else shown
        bare, rank = self._stripped.get(original) or self._new_stripped(original)
        if self._tb_state and self._in_traceback(number, original, text, bare, rank):
            return
        verdict = self._verdicts.get(bare) or self._new_verdict(bare)
        kind = verdict.kind
        if kind == KIND_TRACEBACK:
            self._tb_state.put(rank or "", "tb")
            self._keep_error(number, text, verdict.key, KIND_TRACEBACK, rank)
            self._recent.append((number, original, True))
            return
        if kind == KIND_ERROR:
            self._nonfinite_pending = self._nonfinite_pending or verdict.nonfinite
            self._keep_error(number, text, verdict.key, KIND_ERROR, rank)
            self._recent.append((number, original, True))
            return
        self._recent.append((number, original, False))
        if kind == _BLANK:
            self.blank_lines += 1
            return
        if self._nonfinite_pending and "oss" in bare and _FINITE_LOSS_RE.search(bare):
            self.last_finite_loss_line = number
            self._nonfinite_pending = False
        self._feed_routine(number, original, bare, verdict)

    def _in_traceback(self, number: int, original: str, text: str, bare: str, rank: str | None) -> bool:
        """Keep a line that continues its rank's open traceback or multi-line exception message; whether it did
        (a line that does not continue it closes it)."""
        stream = rank or ""
        state = self._tb_state.touch(stream)
        if state is None:
            return False
        if state == "tb":
            if _TB_BODY_RE.match(bare) or _TB_START_RE.search(bare):
                if bare.strip():
                    self._keep_error(number, text, error_key(bare), KIND_TRACEBACK, rank)
                else:
                    self.blank_lines += 1
                self._recent.append((number, original, True))
                return True
            if _EXC_LINE_RE.match(bare):
                self._keep_error(number, text, error_key(bare), KIND_ERROR, rank)
                self._tb_state.put(stream, "cont:10")
                self._recent.append((number, original, True))
                return True
        else:  # continuation lines of a multi-line exception message
            remaining = int(state.split(":", 1)[1])
            if remaining > 0 and bare[:1] in (" ", "\t") and bare.strip():
                self._keep_error(number, text, error_key(bare), KIND_ERROR, rank)
                self._tb_state.put(stream, f"cont:{remaining - 1}")
                self._recent.append((number, original, True))
                return True
        self._tb_state.pop(stream, None)
        return False

    def _feed_routine(self, number: int, original: str, bare: str, verdict: _Verdict) -> None:
        """A routine line: dropped by a filter rule (beyond its ``keep_first``), else folded into a template."""
        rule = self._match_rule(bare, verdict)
        if rule is not None and rule.keep_first is None:
            self.dropped_by_rule[rule.id] += 1
            return
        masked = verdict.masked
        if masked is None:
            masked = verdict.masked = mask(bare)
        if rule is None:
            self._template(number, original, masked)
            return
        seen = self._keep_first_seen.touch(masked, 0)
        if seen >= rule.keep_first:
            self.dropped_by_rule[rule.id] += 1
            return
        self._keep_first_seen.put(masked, seen + 1)
        self._template(number, original, masked)

    def result(self) -> CompressedLog:
        templates = []
        for entry in sorted(self._templates.values(), key=lambda e: e["line"]):
            cluster = self._drain.id_to_cluster.get(entry["cluster_id"])
            template = cluster.get_template() if cluster is not None else entry["text"]
            templates.append(
                {"line": entry["line"], "template": template, "text": entry["text"], "count": entry["count"]}
            )
        # A NaN/Inf loss that a finite loss followed was a transient spike the training recovered from.
        for kept_line in self._kept:
            if (
                kept_line.kind == KIND_ERROR
                and kept_line.line < self.last_finite_loss_line
                and _NONFINITE_LOSS_RE.search(strip_prefix(kept_line.text)[0])
            ):
                kept_line.kind = KIND_RECOVERED
        # A context line that is also its template's representative is listed once, as the template.
        represented = {t["line"] for t in templates}
        kept = sorted(
            [k for k in self._kept if k.kind != KIND_CONTEXT or k.line not in represented]
            + [KeptLine(t["line"], t["text"], KIND_TEMPLATE, t["count"]) for t in templates],
            key=lambda k: (k.line, k.kind != KIND_CONTEXT),
        )
        stats = {
            "lines_in": self.lines_in,
            "lines_out": len(kept),
            "kept_errors": self.kept_errors,
            "seconds": round(time.perf_counter() - self._started, 4),
            "templates": len(templates),
            "truncated": self.truncated,
            "blank_lines": self.blank_lines,
            "last_finite_loss_line": self.last_finite_loss_line,
            "dropped_by_rule": dict(self.dropped_by_rule),
        }
        return CompressedLog(lines=kept, templates=templates, stats=stats)


def compress_log(
    path_or_lines: str | Path | Iterable[str],
    rules: list[FilterRule] | str | Path | None = None,
    **options: Any,
) -> CompressedLog:
    """Compress a log file (plain or ``.gz``) or an iterable of lines; see the module docstring."""
    if rules is None or isinstance(rules, (str, Path)):
        rules = load_filter_rules(rules)
    compressor = LogCompressor(rules, **options)
    with _lines_of(path_or_lines) as lines:
        for number, text in enumerate(_split_lines(iter(lines)), start=1):
            compressor.feed(number, text)
    return compressor.result()


def compress_cli(log_path: str | Path, out_path: str | Path) -> dict[str, Any]:
    """Compress ``log_path`` into ``out_path`` (secrets redacted); return the headline stats."""
    from acme.secrets import redact

    compressed = compress_log(log_path)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(redact(compressed.to_text()), encoding="utf-8")
    tmp.replace(out)
    return {key: compressed.stats[key] for key in ("lines_in", "lines_out", "kept_errors", "seconds")}
