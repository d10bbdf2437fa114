"""Slurm ``sacct`` job source: ``sacct --parsable2`` text into canonical job records.

Input
-----
``sacct --parsable2`` output ('|' between fields, none at the end of a line), with its header
line, or header-less (``--noheader``) with the field list given as ``fields`` (the CLI's
``--fields``; ``%width`` suffixes are ignored, names are case-insensitive). ``--parsable``
output (a trailing '|' on every line) is accepted too, and so is another ``--delimiter``
(``delimiter=``, any string). When a header is present it wins over ``fields`` (a note says so
if they differ); a header written as a comment (``#jobid|state…``) is read as one. Required
fields: JobID, State and a time (Start, End or Submit; in practice Start and End, or one of them
with Elapsed; or, with ``day``, Elapsed alone); a header or field list without them raises
:class:`SchemaDriftError` naming the missing ones and where to add them (and ``--day`` when the
export has Elapsed). Without Submit, submit and queue times are null (a note
says so); without End, End = Start + Elapsed for jobs that ended; without Start,
Start = End − Elapsed. Empty input raises ``InputError("empty")``;
no header and no ``fields`` raises :class:`InputError`. A header with no data lines is valid
(sacct prints it when nothing matched) and gives zero jobs.

Every other problem is per line: the line becomes a reject (its physical 1-based line number,
a specific reason, the raw line as ``record``) and parsing goes on.

Steps, arrays, heterogeneous jobs
---------------------------------
One canonical row per *job line*. Step lines (``123.batch``, ``123.extern``, ``123.0``,
``123_4.batch``, ``123+0.batch``, ``123.0+1``) are folded into their job: the job's own line
gives the state, times, user, partition and counts; steps only fill what the job line leaves
empty (NodeList — the ``extern`` step first, as it spans every node of the allocation —,
ExitCode — the ``batch`` step first —, TRES, NCPUS). Array tasks (``123_4``) and
heterogeneous components (``123+0``, ``123+1``) are jobs of their own, ``job_id`` is sacct's
JobID as printed. A not-yet-expanded array range (``123_[5-9]``, ``123_[3-4%2]``) is one
record (skipped if PENDING, see below; e.g. a CANCELLED range is one CANCELLED job).

A step whose job line is absent from the input (a cut or filtered extract) is **rejected**
("orphan step"), not promoted to a job: a step lacks the job's user, partition, allocation
submit time and overall state (``.extern`` is COMPLETED when the job FAILED), so promoting it
would invent a record. Step lines are not records of their own (``rows_in`` counts jobs after
folding, plus lines that could not be folded: malformed lines and orphan steps).

A JobID seen twice (``--duplicates``, or concatenated extracts) keeps the *later* line, which
is the newer record in sacct's order; the earlier one is skipped and counted
(``ParseResult.skipped``), not rejected: it is an older record, not a defect. Lines starting
with ``#`` are comments, skipped and counted too.

States
------
``CANCELLED by 1234`` -> CANCELLED (the first word counts). COMPLETED, FAILED, CANCELLED,
PREEMPTED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, RUNNING are kept. Outside that vocabulary:

- BOOT_FAIL -> NODE_FAIL (the allocation's nodes failed to boot), DEADLINE -> TIMEOUT (ended
  by its time limit), REVOKED -> CANCELLED (a federated sibling ran instead).
- COMPLETING, CONFIGURING, RESIZING, SUSPENDED, STOPPED, SIGNALING, STAGE_OUT, REQUEUED,
  REQUEUE_FED, REQUEUE_HOLD -> RUNNING: the job was allocated and has not reached an end
  state; a later extract supersedes it (``acme.jobs.ingest.merge_job_tables``: terminal beats RUNNING).
- PENDING -> skipped and counted (``SKIP_PENDING``), not rejected: a pending job has no outcome
  and no start yet; it arrives in a later extract once it runs or ends. :func:`sacct_command` asks
  sacct for non-pending states only (``--state``), so live extracts carry none.
- Any other state is **kept as printed** (first word, upper case) in ``state`` with a null
  ``state_group``, so the validation step's in-set check quarantines it and it is visible
  there; the parser does not crash or guess.

Times and time zones
--------------------
sacct prints local wall-clock time without an offset. Those times are read in ``tz`` (the
cluster's IANA time zone, default UTC) and converted to UTC. A time that carries an offset
(``SLURM_TIME_FORMAT`` with ``%z``) is read with its own offset. ``Unknown``, ``None``, empty
-> null (End is Unknown while RUNNING; Start is None for a job cancelled before it started).
A wall-clock time in the repeated hour when ``tz`` leaves summer time is ambiguous: it is read
as summer time, and one in the skipped spring hour is shifted forward; a note counts either.
Elapsed (``1-02:03:04``, ``02:03:04``, ``03:04.123``; or ElapsedRaw seconds) is kept as
``source_duration_s``. A job that ended with ``End=Unknown`` gets End = Start + Elapsed (noted).
A job line with no time at all (Submit, Start and End empty) is rejected, unless ``day`` is given
and it has an Elapsed (see "Days").

Resources
---------
GPUs come from AllocTRES, or from ReqTRES when nothing was allocated (a job that never
started): the untyped ``gres/gpu=N`` when present, else the sum of the typed
``gres/gpu:TYPE=N`` entries, never both (sacct prints both for typed requests). A TRES
without any ``gres/gpu`` entry means 0 GPUs; no TRES at all (field absent or empty on the
job and its steps) means null, and such jobs are classified as if they had no GPU. ``cpu_num``
is NCPUS (AllocCPUS when the export names it so; or the TRES ``cpu=`` when NCPUS is absent or
0), ``node_num`` NNodes (or TRES ``node=``), ``node_list`` NodeList as printed (``None assigned`` -> null). ExitCode
``code:signal`` -> ``exit_code`` = code (``0:9``, killed by signal 9, gives 0; the canonical
record has one exit column).

``user`` and ``job_name`` are kept as printed (only an empty value is null; a job may be
named "None"). ``job_type`` comes from the job-type classifier (name, partition, gpu_num;
``load_classifier()`` unless one is passed); ``source`` is ``sacct``; ``source_line`` the
job line's physical 1-based line number.

Days
----
A sacct window extract contains jobs submitted before the day that ran or ended in it; they
are state updates for those jobs, so all are kept: ``skipped_other_days`` is always 0. The day
shapes the live command (:func:`sacct_command`), and it is what an export whose only time is
Elapsed (seff-style: no Submit, Start or End) needs: with ``day`` such a job is a row with submit,
start and end null, ``run_s`` = Elapsed once ended, and the ingest files it under that day
(:class:`acme.jobs.ingest.DayPublisher`); without ``day`` the field list is refused.

Encoding
--------
:func:`read_sacct_file` decodes UTF-8 (a BOM is dropped). Bytes that are not UTF-8 (a
Latin-1 job name, say) are replaced by U+FFFD rather than failing the whole extract, and
:func:`parse_sacct` adds a note counting the affected lines (with the first line number);
``strict=True`` raises :class:`InputError` naming the file, byte offset and line instead.
A NUL byte (UTF-16 or binary input) always raises. :func:`run_sacct` decodes the same way.

Memory
------
:func:`parse_sacct_file` (what the ingest uses) gives :func:`parse_sacct`'s result while reading
the file 8 MB at a time, in two passes: an index of job ids (their last job line; steps printed
before their job or more than 10,000 lines after it), then the rows, built 50,000 jobs at a time
(``on_jobs`` takes them batch by batch instead of holding them). What grows with the input is
the index (~100 bytes per job id) and, without ``on_jobs``, the result. A line longer than
``acme.text_input.MAX_LINE_BYTES`` (1 MiB) is rejected with its length and never held whole;
a file above ``ACME_MAX_INPUT_BYTES`` (default 1 GiB: the day's table is validated whole) is
refused before it is read.
"""

from __future__ import annotations

import gc
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from acme.errors import ConfigError, InputError, SchemaDriftError
from acme.jobs.base import ParseResult, ParseSummary, finish_jobs_frame
from acme.jobs.schema import JOB_COLUMNS, STATES
from acme.rejects import rejects_frame
from acme.text_input import CHUNK_BYTES, MAX_LINE_BYTES, check_input_size, iter_raw_lines, long_line_reason

if TYPE_CHECKING:
    import pandas as pd

    from acme.jobs.classify import JobTypeClassifier

__all__ = [
    "DEFAULT_FIELDS",
    "LIVE_STATES",
    "REQUIRED_FIELDS",
    "parse_sacct",
    "parse_sacct_file",
    "read_sacct_file",
    "run_sacct",
    "sacct_command",
]

SOURCE = "sacct"

# What the live mode asks for. JobID (not JobIDRaw) keeps array (123_4) and heterogeneous
# (123+0) identities visible; NCPUS/NNodes/NodeList/AllocTRES give the allocation, ReqTRES the
# request of jobs that never started; ExitCode the batch script's exit status.
DEFAULT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobName",
    "User",
    "Partition",
    "State",
    "Submit",
    "Start",
    "End",
    "Elapsed",
    "NNodes",
    "NCPUS",
    "NodeList",
    "AllocTRES",
    "ReqTRES",
    "ExitCode",
)

REQUIRED_FIELDS: tuple[str, ...] = ("JobID", "State")
# At least one of these places a job in time (Submit is optional: without it the queue time is
# unknown). End is derived from Start + Elapsed, or Start from End − Elapsed, when absent.
TIME_FIELDS: tuple[str, ...] = ("Start", "End", "Submit")
SKIP_PENDING = "pending (has not started; a later extract carries the job once it runs)"
SKIP_SUPERSEDED = "superseded by a later line of the same job (sacct --duplicates or concatenated extracts)"
SKIP_COMMENT = "comment line (starts with #)"
ELAPSED_ONLY_HINT = (
    ", or, for an export whose only time is Elapsed (seff-style), give the UTC day its jobs belong to "
    "with --day: they are stored with unknown (null) times"
)

# sacct --state for the live window: every state except PENDING (PD). With -S/-E, sacct
# selects the jobs that were in one of these states during the window: jobs that ran, ended
# or were cancelled in the day, but not those that only waited.
LIVE_STATES: tuple[str, ...] = (
    "BF",
    "CA",
    "CD",
    "DL",
    "F",
    "NF",
    "OOM",
    "PR",
    "R",
    "RQ",
    "RS",
    "RV",
    "S",
    "TO",
)

_STATE_MAP: dict[str, str] = {s: s for s in STATES}
_STATE_MAP.update({"BOOT_FAIL": "NODE_FAIL", "DEADLINE": "TIMEOUT", "REVOKED": "CANCELLED"})
_STATE_MAP.update(
    dict.fromkeys(
        (
            "COMPLETING",
            "CONFIGURING",
            "RESIZING",
            "SUSPENDED",
            "STOPPED",
            "SIGNALING",
            "STAGE_OUT",
            "REQUEUED",
            "REQUEUE_FED",
            "REQUEUE_HOLD",
        ),
        "RUNNING",
    )
)
_PENDING_STATES = frozenset({"PENDING"})

# Values sacct prints for "no value".
_NULLS = frozenset({"", "Unknown", "None", "N/A", "(null)", "None assigned"})

# job[_task|_[range]][+hetcomponent][.step]; a step may itself carry +component (123.0+1).
_JOBID_RE = re.compile(r"(?P<job>\d+(?:_(?:\d+|\[[^\]]+\]))?(?:\+\d+)?)(?:\.(?P<step>[^.\s]+))?")
_FIELD_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:%-?\d+)?")
_INT_RE = re.compile(r"\d+")
_EXIT_RE = re.compile(r"(\d+)(?::(\d+))?")
_NAIVE_TIME = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}"
_AWARE_TIME = _NAIVE_TIME + r"(?:Z|[+-]\d{2}:?\d{2})"
_ELAPSED_RE = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)")
BUILD_CHUNK_JOBS = 50_000  # job lines turned into canonical rows at a time
_STEP_WINDOW = 10_000  # steps up to this many lines after their job line are "near" (not indexed)


# --------------------------------------------------------------------------- live mode


def sacct_command(
    day: date,
    base_command: Sequence[str] = ("sacct",),
    fields: Sequence[str] = DEFAULT_FIELDS,
    *,
    tz: str = "UTC",
) -> list[str]:
    """argv for one UTC day's extract: ``[*base_command, --parsable2, ...]``.

    The window is the UTC day [00:00, next 00:00) written in the cluster's wall-clock time
    ``tz``, because sacct reads -S/-E in its own local time. The header is kept (no
    ``--noheader``) so :func:`parse_sacct` reads the field names from the output and notices
    drift. ``--allocations``: one line per job (the job line carries everything canonical;
    steps only add per-step usage, and skipping them cuts output and slurmdbd load about
    threefold). No ``--duplicates``: sacct then prints only the latest record of a requeued
    job. ``--state`` leaves out PENDING (see the module docstring). No argument needs shell
    quoting, so ``base_command=("ssh", "login1", "sacct")`` works as is.
    """
    names = [str(f) for f in fields]
    missing = _missing_required(names)
    if missing:
        raise ConfigError(f"sacct fields lack the required {', '.join(missing)}: {','.join(names)}")
    zone = _zone(tz)
    start_utc = datetime.combine(day, time(0), tzinfo=UTC)
    end_utc = start_utc + timedelta(days=1)
    fmt = "%Y-%m-%dT%H:%M:%S"
    return [
        *base_command,
        "--parsable2",
        "--allusers",
        "--allocations",
        f"--starttime={start_utc.astimezone(zone).strftime(fmt)}",
        f"--endtime={end_utc.astimezone(zone).strftime(fmt)}",
        f"--state={','.join(LIVE_STATES)}",
        f"--format={','.join(names)}",
    ]


def run_sacct(
    day: date,
    base_command: Sequence[str] = ("sacct",),
    fields: Sequence[str] = DEFAULT_FIELDS,
    timeout_s: float = 300,
    *,
    tz: str = "UTC",
) -> str:
    """Run :func:`sacct_command` (argv list, no shell) and return its stdout as text.

    Raises :class:`InputError` naming the command when it cannot be started, exits non-zero
    (with the end of its stderr) or runs longer than ``timeout_s``.
    """
    argv = sacct_command(day, base_command, fields, tz=tz)
    where = f"command `{shlex.join(argv)}`"
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False)
    except FileNotFoundError as exc:
        raise InputError(where, f"cannot start {argv[0]!r}: command not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise InputError(where, f"timed out after {timeout_s:g} s") from exc
    except OSError as exc:
        raise InputError(where, f"cannot start: {exc}") from exc
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", errors="replace").strip()
        tail = stderr[-500:] if stderr else "(nothing on stderr)"
        raise InputError(where, f"exited with status {proc.returncode}: {tail}")
    return proc.stdout.decode("utf-8", errors="replace")


def read_sacct_file(path: str | Path, *, strict: bool = False) -> str:
    """The text of a saved sacct extract (see "Encoding" in the module docstring)."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror or exc}") from exc
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError(
            name,
            f"NUL byte at byte offset {nul}: not sacct text (UTF-16 or binary?)",
            data.count(b"\n", 0, nul) + 1,
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if strict:
            raise InputError(
                name,
                f"not UTF-8: byte 0x{data[exc.start]:02x} at byte offset {exc.start}",
                data.count(b"\n", 0, exc.start) + 1,
            ) from exc
        return data.decode("utf-8-sig", errors="replace")


# --------------------------------------------------------------------------- parsing


class _Job:
    """A job line, kept as its text (split again when built: a list of fields costs ~4x the line)."""

    __slots__ = ("line", "raw", "steps")

    def __init__(self, line: int, raw: str):
        self.line = line
        self.raw = raw
        self.steps: list[tuple[str, str]] = []  # (step name, step line)


def parse_sacct(
    text: str,
    cluster: str,
    *,
    source_file: str,
    fields: Sequence[str] | str | None = None,
    day: date | None = None,
    classifier: JobTypeClassifier | None = None,
    tz: str = "UTC",
    delimiter: str = "|",
) -> ParseResult:
    """Parse sacct output into canonical jobs and rejects (see the module docstring)."""
    lines = text.split("\n")

    def read_lines() -> Iterator[tuple[int, str, int]]:
        return ((number, line, 0) for number, line in enumerate(lines, 1))

    with _gc_paused():
        result = _parse(read_lines, cluster, source_file, fields, classifier, tz, delimiter, day=day)
    assert isinstance(result, ParseResult)  # no on_jobs: the rows are returned
    return result


def parse_sacct_file(
    path: str | Path,
    cluster: str,
    *,
    source_file: str | None = None,
    fields: Sequence[str] | str | None = None,
    day: date | None = None,
    classifier: JobTypeClassifier | None = None,
    tz: str = "UTC",
    delimiter: str = "|",
    strict: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
    max_line_bytes: int = MAX_LINE_BYTES,
    on_jobs: Callable[[pd.DataFrame], None] | None = None,
) -> ParseResult | ParseSummary:
    """:func:`read_sacct_file` then :func:`parse_sacct`, reading the file ``chunk_bytes`` at a time.

    The same result without the file's text or a list of its lines in memory: what is held is
    the job lines (about the input's size; their fields are split only when built, 50,000 jobs
    at a time) and the output. A file above ``ACME_MAX_INPUT_BYTES`` is refused before reading;
    a line above ``max_line_bytes`` is rejected with its length (only its head is read into
    memory and kept as the record). A NUL byte, or with ``strict`` bytes that are not UTF-8,
    refuse the file as :func:`read_sacct_file` does (a pass over the bytes first).

    With ``on_jobs``, the canonical rows go to it in batches of up to ``BUILD_CHUNK_JOBS`` (a job
    id seen twice comes in the batch of its last line) and a :class:`ParseSummary` is returned.
    """
    name = source_file or str(path)
    check_input_size(path, name)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror or exc}") from exc
    with handle:
        _check_bytes(handle, name, strict, chunk_bytes, max_line_bytes)

        def read_lines() -> Iterator[tuple[int, str, int]]:
            handle.seek(0)
            return _decoded_lines(
                iter_raw_lines(handle, chunk_bytes=chunk_bytes, max_line_bytes=max_line_bytes)
            )

        with _gc_paused():
            return _parse(
                read_lines, cluster, name, fields, classifier, tz, delimiter, max_line_bytes, on_jobs, day=day
            )


def _decoded_lines(raw_lines: Iterator[Any]) -> Iterator[tuple[int, str, int]]:
    """(line number, text, length in bytes when above the limit else 0), decoded as
    :func:`read_sacct_file` does (a BOM dropped, bytes that are not UTF-8 replaced by U+FFFD)."""
    for line in raw_lines:
        data = line.data
        if line.number == 1 and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        yield line.number, data.decode("utf-8", errors="replace"), line.length if line.too_long else 0


def _check_bytes(handle: Any, name: str, strict: bool, chunk_bytes: int, max_line_bytes: int) -> None:
    """Refuse a file with a NUL byte or, when ``strict``, bytes that are not UTF-8, before parsing
    (as :func:`read_sacct_file` does), reading ``chunk_bytes`` at a time."""
    offset = newlines = 0
    while chunk := handle.read(chunk_bytes):
        nul = chunk.find(b"\x00")
        if nul >= 0:
            raise InputError(
                name,
                f"NUL byte at byte offset {offset + nul}: not sacct text (UTF-16 or binary?)",
                newlines + chunk.count(b"\n", 0, nul) + 1,
            )
        offset += len(chunk)
        newlines += chunk.count(b"\n")
    if not strict:
        return
    handle.seek(0)
    for line in iter_raw_lines(handle, chunk_bytes=chunk_bytes, max_line_bytes=max_line_bytes):
        bom = 3 if line.number == 1 and line.data.startswith(b"\xef\xbb\xbf") else 0
        try:
            line.data[bom:].decode("utf-8")
        except UnicodeDecodeError as exc:
            at = exc.start + bom
            if line.too_long and at >= len(line.data) - 3:
                continue  # the kept head may end inside a character; the line is rejected as too long
            raise InputError(
                name, f"not UTF-8: byte 0x{line.data[at]:02x} at byte offset {line.offset + at}", line.number
            ) from exc


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC: building ~10^5 small lists otherwise triggers repeated full
    collections that cost more than the parsing itself (nothing here makes cycles)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parse(
    read_lines: Callable[[], Iterator[tuple[int, str, int]]],
    cluster: str,
    source_file: str,
    fields: Sequence[str] | str | None,
    classifier: JobTypeClassifier | None,
    tz: str,
    delimiter: str,
    max_line_bytes: int = 0,
    on_jobs: Callable[[pd.DataFrame], None] | None = None,
    *,
    day: date | None = None,
) -> ParseResult | ParseSummary:
    """Two passes over ``read_lines()`` -- (physical line number, text without its \\n, byte length
    if above the limit else 0) -- so that job lines are never all held at once:

    1. an index (:func:`_index_lines`): each job id's last job line (the one that wins), the line
       after each superseded one, steps that come before their job's line (held, as they were
       before), and steps far (more than ``_STEP_WINDOW`` lines) after their job's line (held;
       sacct prints steps right after their job);
    2. the build (:class:`_Build`): job lines are collected and turned into rows
       ``BUILD_CHUNK_JOBS`` at a time, a job once no near step can follow; rows are put back in
       the order of each job id's first line at the end (the order a dict of job ids gave before).

    With ``on_jobs``, each batch of rows is handed to it instead (in the order of each job id's
    last line) and a :class:`ParseSummary` is returned: the rows are never all in memory.
    """
    if not delimiter:
        raise ConfigError("sacct delimiter must not be empty")
    zone_name = _zone(tz).key
    notes: list[str] = []
    layout = _read_layout(read_lines, fields, delimiter, source_file, notes, day)
    if classifier is None:
        from acme.jobs.classify import load_classifier

        classifier = load_classifier()
    classify = _line_classifier(layout, max_line_bytes)
    index = _index_lines(layout.data_lines(read_lines), classify)
    build = _Build(layout, index, cluster, source_file, zone_name, classifier, on_jobs, day)
    build.run(layout.data_lines(read_lines), classify)
    notes += _parse_notes(layout.col, build, zone_name, day)
    build.rejects.sort(key=lambda r: r["source_line"])
    if on_jobs is not None:
        return ParseSummary(
            rejects=rejects_frame(build.rejects), rows_in=build.rows_in, rows_ok=build.rows_ok,
            notes=notes, skipped=build.skipped,
        )  # fmt: skip
    return ParseResult(
        jobs=_in_first_line_order(build.frames, index.first_line_of),
        rejects=rejects_frame(build.rejects), rows_in=build.rows_in, notes=notes, skipped=build.skipped,
    )  # fmt: skip


@dataclass(frozen=True)
class _Layout:
    """Where the data lines start and how they are split: the header's (or field list's) columns."""

    delimiter: str
    names: list[str]  # field keys (lower case) in column order
    col: dict[str, int]  # field key -> its first column
    data_from: int  # first physical line that may hold data

    @property
    def n_fields(self) -> int:
        return len(self.names)

    def data_lines(
        self, read_lines: Callable[[], Iterator[tuple[int, str, int]]]
    ) -> Iterator[tuple[int, str, int]]:
        data_from = self.data_from
        for line_no, raw, too_long in read_lines():
            if raw[-1:] == "\r":  # CRLF line ends; physical line numbers stay the same
                raw = raw[:-1]
            if raw and not raw.isspace() and line_no >= data_from:
                yield line_no, raw, too_long

    def split(self, raw: str) -> list[str]:
        tokens = raw.split(self.delimiter)
        if len(tokens) == self.n_fields + 1:  # a trailing delimiter (--parsable)
            tokens.pop()
        return tokens


def _read_layout(
    read_lines: Callable[[], Iterator[tuple[int, str, int]]],
    fields: Sequence[str] | str | None,
    delimiter: str,
    source_file: str,
    notes: list[str],
    day: date | None = None,
) -> _Layout:
    """The header (or the given field list) and where data starts; the required fields checked
    (an export whose only time is Elapsed needs ``day``)."""
    first = next(
        (
            (no, raw.lstrip().lstrip("#") if raw.lstrip()[:1] == "#" else raw, long)
            for no, raw, long in read_lines()
            if raw.strip() and not (raw.lstrip()[:1] == "#" and not _commented_header(raw, delimiter))
        ),
        None,
    )  # the header, or the first data line; comment lines before it are not records
    if first is None:
        if fields is None:  # sacct --parsable2 prints its header even for an idle day
            raise InputError(
                source_file, "empty: not even sacct's header line (a failed or unfinished export?)"
            )
        first = (1, "", 0)  # --noheader output of a day without jobs: the field list names the columns
    first_line = "" if first[2] else first[1]  # a line above the length limit is no header
    header, header_consumed, from_header = _header(
        first[0], first_line, fields, delimiter, source_file, notes
    )
    # without a header, data (and comment lines, counted as skipped) start at the first line that is not blank
    first_text = next((no for no, raw, _ in read_lines() if raw.strip()), first[0])
    data_from = first[0] + 1 if header_consumed else min(first[0], first_text)
    missing = _missing_required(header, elapsed_only_ok=day is not None)
    if missing:
        what = "header line" if from_header else "field list"
        flag = "sacct --format" if from_header else "--fields (or clusters.yaml jobs.fields)"
        raise SchemaDriftError(
            source_file,
            f"the {what} lacks the required field(s) {', '.join(missing)} (it has: {', '.join(header)}); "
            f"add them to {flag}" + (ELAPSED_ONLY_HINT if _has_elapsed(header) else ""),
        )
    names = [_field_key(f) for f in header]
    col: dict[str, int] = {}
    for i, key in enumerate(names):
        col.setdefault(key, i)
    return _Layout(delimiter, names, col, data_from)


def _line_classifier(layout: _Layout, max_line_bytes: int) -> Callable[[str, int], tuple[str, str, str]]:
    """``classify(raw, too_long)`` -> (job id, step or "", "") for a usable line, else ("", "",
    reject reason); the line is split only as far as the JobID (it is split whole when built).
    A closure over locals: it runs once per line in each pass."""
    delimiter = layout.delimiter
    n_fields = layout.n_fields
    n_trailing = n_fields + 1
    i_jobid = layout.col["jobid"]
    one_char = len(delimiter) == 1  # then counting delimiters gives split()'s field count

    def classify(raw: str, too_long: int) -> tuple[str, str, str]:
        if too_long:
            return "", "", long_line_reason(too_long, len(raw.encode()), max_line_bytes)
        if raw[:1] == "#" or raw.lstrip()[:1] == "#":
            return "", "", SKIP_COMMENT
        if one_char:
            count = raw.count(delimiter) + 1
            trailing = count == n_trailing and raw.endswith(delimiter)
        else:
            tokens = raw.split(delimiter)
            count, trailing = len(tokens), len(tokens) == n_trailing and not tokens[-1]
        if count != n_fields and not trailing:
            return (
                "",
                "",
                f"wrong field count: expected {n_fields} {delimiter!r}-separated fields, got {count}",
            )
        job_id = (
            raw.partition(delimiter)[0] if i_jobid == 0 else raw.split(delimiter, i_jobid + 1)[i_jobid]
        ).strip()
        base, dot, step = job_id.partition(".")
        if not (base.isdigit() and job_id.isascii() and (not dot or step.isalnum())):  # fast: 123, 123.batch
            match = _JOBID_RE.fullmatch(job_id)
            if match is None:
                return "", "", "missing JobID" if not job_id else f"malformed JobID {job_id!r}"
            base, step = match.group("job"), match.group("step") or ""
        return base, step, ""

    return classify


@dataclass
class _Index:
    """The first pass's findings (see :func:`_parse`)."""

    last_line: dict[str, int] = dataclass_field(default_factory=dict)  # job id -> its last job line
    first_line_of: dict[str, int] = dataclass_field(
        default_factory=dict
    )  # job id -> first job line, if seen twice
    early_steps: dict[str, list[tuple[int, str, str]]] = dataclass_field(
        default_factory=dict
    )  # before their job
    far_steps: dict[str, list[tuple[int, str, str]]] = dataclass_field(
        default_factory=dict
    )  # far after their job


def _index_lines(
    lines: Iterator[tuple[int, str, int]], classify: Callable[[str, int], tuple[str, str, str]]
) -> _Index:
    index = _Index()
    last_line, first_line_of = index.last_line, index.first_line_of
    for line_no, raw, too_long in lines:
        base, step, problem = classify(raw, too_long)
        if problem:
            continue
        seen = last_line.get(base)
        if not step:
            if seen is not None:
                first_line_of.setdefault(base, seen)
            last_line[base] = line_no
        elif seen is None:
            index.early_steps.setdefault(base, []).append((line_no, step, raw))
        elif line_no - seen > _STEP_WINDOW:
            index.far_steps.setdefault(base, []).append((line_no, step, raw))
    return index


class _Build:
    """The second pass: every line accounted for (a job, a step folded into it, a reject or a
    skip with its reason); job lines built into rows ``BUILD_CHUNK_JOBS`` at a time."""

    def __init__(
        self, layout: _Layout, index: _Index, cluster: str, source_file: str, zone_name: str,
        classifier: Any, on_jobs: Callable[[pd.DataFrame], None] | None, day: date | None = None,
    ) -> None:  # fmt: skip
        self.layout, self.index, self.cluster, self.source_file = layout, index, cluster, source_file
        self.zone_name, self.classifier, self.on_jobs, self.day = zone_name, classifier, on_jobs, day
        self.rejects: list[dict[str, Any]] = []
        self.skipped: dict[str, int] = {}
        self.rows_in = self.rows_ok = self.batches = 0
        self.bad_utf8_lines = [0, 0]  # how many, the first
        self.time_notes: dict[tuple[str, str], int] = {}
        self.frames: list[pd.DataFrame] = []
        self.window: dict[str, _Job] = {}  # job lines not built yet, in line order

    def reject(self, line_no: int, reason: str, raw: str) -> None:
        self.rejects.append(
            {"source_file": self.source_file, "source_line": line_no, "reason": reason, "record": raw}
        )

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def run(
        self, lines: Iterator[tuple[int, str, int]], classify: Callable[[str, int], tuple[str, str, str]]
    ) -> None:
        last_line, window = self.index.last_line, self.window
        for line_no, raw, too_long in lines:
            if "\ufffd" in raw:
                self.bad_utf8_lines[0] += 1
                self.bad_utf8_lines[1] = self.bad_utf8_lines[1] or line_no
            base, step, problem = classify(raw, too_long)
            if problem:
                self.rows_in += 1
                if problem == SKIP_COMMENT:
                    self.skip(SKIP_COMMENT)
                else:
                    self.reject(line_no, problem, raw)
                continue
            last = last_line.get(base)
            if not step:
                self.job_line(base, line_no, raw, last)
            elif last is None:
                self.rows_in += 1
                self.reject(
                    line_no, f"orphan step {base}.{step}: job {base} has no job line in this input", raw
                )
            elif last < line_no <= last + _STEP_WINDOW:
                window[base].steps.append((step, raw))
            # else: an early step (held in the index) or a far one (ditto), or a step between two
            # lines of a job id, which belongs to a superseded line and is dropped with it
        if window or not self.batches:
            self.build(list(window.items()))
            window.clear()

    def job_line(self, base: str, line_no: int, raw: str, last: int | None) -> None:
        self.rows_in += 1
        if line_no != last:  # the later line of a job id wins; this one is an older record
            self.skip(SKIP_SUPERSEDED)
            return
        window = self.window
        window[base] = _Job(line_no, raw)
        if len(window) < BUILD_CHUNK_JOBS:
            return
        oldest = next(iter(window.values())).line
        if line_no - oldest > _STEP_WINDOW:  # no near step of the older jobs can follow
            ready = [(b, job) for b, job in window.items() if line_no - job.line > _STEP_WINDOW]
            for b, _ in ready:
                del window[b]
            self.build(ready)

    def build(self, jobs: list[tuple[str, _Job]]) -> None:
        far_steps, early_steps = self.index.far_steps, self.index.early_steps
        for base, job in jobs:  # steps after the job's line, far ones after near ones, then early ones
            job.steps += [(step, raw) for line_no, step, raw in far_steps.pop(base, ()) if line_no > job.line]
            job.steps += [(step, raw) for _, step, raw in early_steps.get(base, ())]
        frame, job_rejects = _build_jobs(
            jobs, self.layout.split, self.layout.col, self.cluster, self.source_file, self.zone_name,
            self.classifier, self.time_notes, self.skipped, day_known=self.day is not None,
        )  # fmt: skip
        self.rejects.extend(job_rejects)
        self.batches += 1
        self.rows_ok += len(frame)
        if self.on_jobs is None:
            self.frames.append(frame)
        else:
            self.on_jobs(frame)


def _parse_notes(col: dict[str, int], build: _Build, zone_name: str, day: date | None = None) -> list[str]:
    """What the operator should know about the input: missing fields, replaced bytes, skips, times."""
    notes = []
    if build.time_notes.get(("all", "unknown")):
        notes.append(
            f"{build.time_notes[('all', 'unknown')]} job(s) with Elapsed as their only time (no Submit, Start "
            f"or End): stored with submit, start and end unknown (null), run_s = Elapsed, filed under --day "
            f"{day}; the report counts them on that day and leaves them out of queueing statistics"
        )
    if build.bad_utf8_lines[0]:
        notes.append(
            f"{build.bad_utf8_lines[0]} line(s) contain U+FFFD: bytes that were not UTF-8 were replaced "
            f"when decoding (first at line {build.bad_utf8_lines[1]})"
        )
    if "alloctres" not in col and "reqtres" not in col:
        notes.append("no AllocTRES/ReqTRES field: gpu_num is null and job types assume no GPUs")
    if "submit" not in col:
        notes.append(
            "no Submit field: submit and queue times are unknown (null) and these jobs are left out of "
            "queueing statistics; jobs are filed under their Start (else End) day"
        )
    if "user" not in col:
        notes.append("no User field: user is null")
    if "end" not in col and "start" in col and ("elapsed" in col or "elapsedraw" in col):
        notes.append("no End field: End = Start + Elapsed for jobs that ended")
    elif "start" not in col and "end" in col and ("elapsed" in col or "elapsedraw" in col):
        notes.append("no Start field: Start = End − Elapsed")
    for reason, count in sorted(build.skipped.items()):
        notes.append(f"{count} skipped: {reason}")
    return notes + _time_notes(build.time_notes, zone_name)


def _in_first_line_order(frames: list[pd.DataFrame], first_line_of: dict[str, int]) -> pd.DataFrame:
    """The built rows as one frame; a job id seen twice keeps the place of its first line."""
    import pandas as pd

    frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    if not first_line_of:
        return frame
    import numpy as np

    first_lines = [
        first_line_of.get(job_id, line)
        for job_id, line in zip(frame["job_id"], frame["source_line"], strict=True)
    ]
    order = np.argsort(np.asarray(first_lines, dtype=np.int64), kind="stable")
    return frame.iloc[order].reset_index(drop=True)


def _header(
    line_no: int,
    line: str,
    fields: Sequence[str] | str | None,
    delimiter: str,
    source_file: str,
    notes: list[str],
) -> tuple[list[str], bool, bool]:
    """(field names, whether ``line`` -- the first that is not blank -- was consumed as the header,
    whether the names come from a header line)."""
    tokens = line.rstrip("\r").split(delimiter)
    if len(tokens) > 1 and tokens[-1] == "":
        tokens.pop()
    tokens = [t.strip() for t in tokens]
    given: list[str] | None = None
    if fields is not None:
        given = [f.strip() for f in (fields.split(",") if isinstance(fields, str) else fields) if f.strip()]
    if _looks_like_header(tokens):
        if given is not None and [_field_key(f) for f in given] != [_field_key(t) for t in tokens]:
            notes.append("the header line differs from the given field list; the header was used")
        return tokens, True, True
    if given is None:
        raise InputError(
            source_file,
            "no header line and no field list: pass fields (the --format list) for --noheader output",
            line_no,
        )
    if not given:
        raise InputError(source_file, "the field list is empty")
    return given, False, False


def _commented_header(raw: str, delimiter: str) -> bool:
    """Whether a line starting with '#' is a header written as a comment (``#jobid<TAB>state…``)."""
    tokens = raw.lstrip().lstrip("#").rstrip("\r").split(delimiter)
    return len(tokens) > 1 and _looks_like_header([t.strip() for t in tokens if t.strip()])


def _looks_like_header(tokens: list[str]) -> bool:
    keys = {_field_key(t) for t in tokens}
    return ("jobid" in keys or "jobidraw" in keys) and all(_FIELD_NAME_RE.fullmatch(t) for t in tokens)


def _field_key(name: str) -> str:
    return name.strip().split("%", 1)[0].lower()


def _missing_required(names: Sequence[str], *, elapsed_only_ok: bool = False) -> list[str]:
    """The required fields ``names`` lacks; with ``elapsed_only_ok`` (a day to file the jobs under
    is known) Elapsed alone is a time, as in seff-style exports."""
    have = {_field_key(n) for n in names}
    missing = [r for r in REQUIRED_FIELDS if r.lower() not in have]
    if not have & {t.lower() for t in TIME_FIELDS} and not (elapsed_only_ok and _has_elapsed(names)):
        missing.append("Start and End (or Start with Elapsed)")
    return missing


def _has_elapsed(names: Sequence[str]) -> bool:
    return bool({_field_key(n) for n in names} & {"elapsed", "elapsedraw"})


def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"time zone {tz!r} is not a known IANA time zone") from exc


def _null(value: str | None) -> bool:
    return value is None or value.strip() in _NULLS


def _cached(values: Sequence[str | None], parse: Any) -> list[Any]:
    """``parse`` of every value, each distinct value parsed once (sacct repeats a lot)."""
    cache: dict[str | None, Any] = {}
    out = []
    for value in values:
        try:
            out.append(cache[value])
        except KeyError:
            cache[value] = result = parse(value)
            out.append(result)
    return out


def _build_jobs(
    items: list[tuple[str, _Job]],
    split: Any,
    col: dict[str, int],
    cluster: str,
    source_file: str,
    zone_name: str,
    classifier: JobTypeClassifier,
    time_notes: dict[tuple[str, str], int],
    skipped: dict[str, int],
    *,
    day_known: bool = False,
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Canonical frame of the job lines that parse, and rejects for those that do not.

    ``split`` gives a line's fields; ``time_notes`` counts times in a change of UTC offset;
    ``skipped`` counts job lines that are not job records (PENDING). With ``day_known`` a job line
    whose only time is Elapsed is a job with unknown times (filed under the input's day).
    """
    batch = _Batch(items, split, col, zone_name, time_notes, day_known=day_known)
    out: dict[str, list[Any]] = {name: [] for name in JOB_COLUMNS}
    keep: list[int] = []
    rejects: list[dict[str, Any]] = []
    tres_cache: dict[str | None, Any] = {}
    exit_cache: dict[str | None, Any] = {}

    for k, (job_id, job) in enumerate(items):
        if batch.states[k][0] == "PENDING":
            skipped[SKIP_PENDING] = skipped.get(SKIP_PENDING, 0) + 1
            continue
        values, errors = batch.values(k)
        if errors:
            rejects.append(
                {
                    "source_file": source_file,
                    "source_line": job.line,
                    "reason": "; ".join(errors),
                    "record": job.raw,
                }
            )
            continue
        node_num, cpu_num, exit_code, tres, seconds = values
        raw_nodes = batch.raw_nodelist[k]
        node_list = None if raw_nodes is None or _null(raw_nodes) else raw_nodes.strip()
        if job.steps and (node_list is None or exit_code is None or tres is None or not cpu_num):
            steps = [(step, split(raw)) for step, raw in job.steps]
            node_list, exit_code, tres, cpu_num = _fill_from_steps(
                steps, col, node_list, exit_code, tres, cpu_num, tres_cache, exit_cache
            )
        gpu_num = tres[0] if tres else None
        if not cpu_num and tres and tres[1] is not None:
            cpu_num = tres[1]
        if node_num is None and tres and tres[2] is not None:
            node_num = tres[2]
        keep.append(k)
        for name, value in (
            ("job_id", job_id), ("state", batch.states[k][0]), ("gpu_num", gpu_num), ("cpu_num", cpu_num),
            ("node_num", node_num), ("node_list", node_list), ("exit_code", exit_code),
            ("source_line", job.line), ("source_duration_s", seconds),
        ):  # fmt: skip
            out[name].append(value)
    return _batch_frame(out, keep, batch, cluster, source_file, classifier), rejects


class _Batch:
    """One batch of job lines split into columns, each parsed once (values seen before are cached)."""

    def __init__(
        self, items: list[tuple[str, _Job]], split: Any, col: dict[str, int], zone_name: str,
        time_notes: dict[tuple[str, str], int], *, day_known: bool = False,
    ) -> None:  # fmt: skip
        import numpy as np

        columns = list(zip(*(split(job.raw) for _, job in items), strict=True)) if items else []

        def column(name: str) -> Sequence[str | None]:
            i = col.get(name)
            return [None] * len(items) if i is None or not columns else columns[i]

        self.raw_submit, self.raw_start, self.raw_end = column("submit"), column("start"), column("end")
        self.submit, self.submit_bad = _parse_times(self.raw_submit, zone_name, time_notes, "submit")
        self.start, self.start_bad = _parse_times(self.raw_start, zone_name, time_notes, "start")
        self.end, self.end_bad = _parse_times(self.raw_end, zone_name, time_notes, "end")
        self.elapsed_field = "Elapsed" if "elapsed" in col else "ElapsedRaw"
        self.raw_elapsed = column(self.elapsed_field.lower())
        parse_elapsed = _parse_elapsed if self.elapsed_field == "Elapsed" else _parse_elapsed_raw
        self.elapsed = _cached(self.raw_elapsed, parse_elapsed)
        self.states = _cached(column("state"), _canonical_state)
        if "elapsed" in col or "elapsedraw" in col:
            self._times_from_elapsed(col, time_notes)
        self.no_time = np.isnat(self.submit) & np.isnat(self.start) & np.isnat(self.end)
        # Elapsed is the only time (a seff-style export): with a day to file it under, the job is
        # stored with its times unknown (null) and run_s = Elapsed, instead of being rejected
        self.times_unknown = (
            self.no_time & day_known & np.array([e[0] is not None for e in self.elapsed], bool)
        )
        if self.times_unknown.any():
            time_notes[("all", "unknown")] = time_notes.get(("all", "unknown"), 0) + int(
                self.times_unknown.sum()
            )
        self.nnodes = _cached(column("nnodes"), lambda v: _parse_count(v, "NNodes"))
        # AllocCPUS is sacct's other name of NCPUS ("Count of allocated CPUs. Equivalent to NCPUS")
        self.ncpus = _cached(
            column("ncpus" if "ncpus" in col else "alloccpus"), lambda v: _parse_count(v, "NCPUS")
        )
        self.exits = _cached(column("exitcode"), _parse_exit)
        self.alloc = _cached(column("alloctres"), _parse_tres)
        self.raw_req = column("reqtres")  # the request only counts where nothing was allocated
        self.req_cache: dict[str | None, Any] = {}
        self.raw_nodelist = column("nodelist")
        self.raw_user, self.raw_name, self.raw_partition = (
            column("user"),
            column("jobname"),
            column("partition"),
        )

    def _times_from_elapsed(self, col: dict[str, int], time_notes: dict[tuple[str, str], int]) -> None:
        """End = Start + Elapsed for a job that ended without an End (the field is not in the
        export, or sacct prints Unknown: a cancelled job whose end slurmdbd never recorded);
        Start = End − Elapsed when the export has End but no Start."""
        import numpy as np

        start, end = self.start, self.end
        ended = np.array([st[0] not in (None, "RUNNING", "PENDING") for st in self.states], dtype=bool)
        no_end = ended & np.isnat(end) & ~np.isnat(start) & ~self.end_bad
        no_start = np.isnat(start) & ~np.isnat(end) & ("start" not in col)
        if not (no_end.any() or no_start.any()):
            return
        seconds = np.array([np.nan if e[0] is None else e[0] for e in self.elapsed], dtype="float64")
        delta = (seconds * 1e6).astype("timedelta64[us]")  # NaN becomes NaT
        self.end = end = np.where(no_end, start + delta, end)
        self.start = np.where(no_start, end - delta, start)
        if "end" in col and no_end.any():
            filled = int((no_end & ~np.isnat(end)).sum())
            time_notes[("end", "from_elapsed")] = time_notes.get(("end", "from_elapsed"), 0) + filled

    def values(self, k: int) -> tuple[tuple[Any, ...], list[str]]:
        """Line ``k``'s (nodes, CPUs, exit code, TRES, elapsed seconds), and why it cannot be a row."""
        node_num, nodes_error = self.nnodes[k]
        cpu_num, cpus_error = self.ncpus[k]
        exit_code, exit_error = self.exits[k]
        alloc_tres, alloc_error = self.alloc[k]
        req_tres = req_error = None
        if alloc_tres is None and not alloc_error:
            text = self.raw_req[k]
            if text not in self.req_cache:
                self.req_cache[text] = _parse_tres(text)
            req_tres, req_error = self.req_cache[text]
        seconds, elapsed_error = self.elapsed[k]
        tres = alloc_tres if alloc_tres is not None else req_tres  # allocated, else the request
        values = (node_num, cpu_num, exit_code, tres, seconds)
        start_bad, end_bad = self.start_bad[k], self.end_bad[k]
        no_time = self.no_time[k] and not (start_bad or end_bad or self.times_unknown[k])
        state_error = self.states[k][1]
        if not (state_error or self.submit_bad[k] or no_time or start_bad or end_bad or elapsed_error
                or nodes_error or cpus_error or exit_error or alloc_error or req_error):  # fmt: skip
            return values, []
        errors = [state_error] if state_error else []
        if self.submit_bad[k]:
            errors.append(f"unparseable Submit {self.raw_submit[k]!r}")
        elif no_time:
            errors.append(
                f"no time at all (Submit={self.raw_submit[k]!r}, Start={self.raw_start[k]!r}, End={self.raw_end[k]!r})"
            )
        if start_bad:
            errors.append(f"unparseable Start {self.raw_start[k]!r}")
        if end_bad:
            errors.append(f"unparseable End {self.raw_end[k]!r}")
        if elapsed_error:
            errors.append(f"unparseable {self.elapsed_field} {self.raw_elapsed[k]!r}")
        errors += [e for e in (nodes_error, cpus_error, exit_error) if e]
        if alloc_error:
            errors.append(f"AllocTRES: {alloc_error}")
        if req_error:
            errors.append(f"ReqTRES: {req_error}")
        return values, errors


def _batch_frame(
    out: dict[str, list[Any]], keep: list[int], batch: _Batch, cluster: str, source_file: str, classifier: Any
) -> pd.DataFrame:
    """The kept rows as a canonical frame: names, users, job types, times and constants added."""
    import numpy as np
    import pandas as pd

    n = len(keep)
    # Names are free text: only an empty one is null (a job may be called "None").
    names = [batch.raw_name[k] or None for k in keep]
    partitions = [batch.raw_partition[k] or None for k in keep]
    out["job_name"] = names
    raw_user = batch.raw_user
    out["user"] = [(user.strip() or None) if (user := raw_user[k]) is not None else None for k in keep]
    out["job_type"] = _classify_all(classifier, names, partitions, out["gpu_num"])
    out["cluster"] = [cluster] * n
    out["source"] = [SOURCE] * n
    out["source_file"] = [source_file] * n
    rows = np.asarray(keep, dtype=np.int64)
    for name, values in (("submit_time", batch.submit), ("start_time", batch.start), ("end_time", batch.end)):
        out[name] = pd.Series(values[rows]).dt.tz_localize("UTC")
    for name in ("state_group", "queue_s", "gpu_share", "gpu_time", "source_gpu_time"):
        out[name] = [None] * n
    # no time at all (an Elapsed-only export filed under --day): the run time is Elapsed, once ended
    unknown = batch.times_unknown[rows] if n else []
    out["run_s"] = [
        seconds if gone and state != "RUNNING" else None
        for gone, state, seconds in zip(unknown, out["state"], out["source_duration_s"], strict=True)
    ]
    frame = pd.DataFrame({name: out[name] for name in JOB_COLUMNS})
    return finish_jobs_frame(frame)


def _classify_all(
    classifier: JobTypeClassifier,
    names: list[str | None],
    partitions: list[str | None],
    gpus: list[int | None],
) -> list[str]:
    """Job type per job, each distinct (name, partition, gpus) decided once.

    A job with unknown GPUs (no TRES) is classified as having none.
    """
    keys = list(zip(names, partitions, (g or 0 for g in gpus), strict=True))
    unique = list(dict.fromkeys(keys))
    if _plain_rules(classifier):
        types = _classify_rulewise(classifier.rules, unique)
    else:
        types = [classifier.classify(name, partition, gpu_num=gpu) for name, partition, gpu in unique]
    lookup = dict(zip(unique, types, strict=True))
    return [lookup[key] for key in keys]


_RULE_FIELDS = frozenset({"job_type", "name", "partition", "label_key", "label_value", "gpus"})


def _plain_rules(classifier: Any) -> bool:
    """Whether :func:`_classify_rulewise` decides exactly as ``classifier.classify`` would."""
    from dataclasses import fields, is_dataclass

    from acme.jobs.classify import JobTypeClassifier

    if type(classifier) is not JobTypeClassifier:
        return False
    return all(is_dataclass(r) and {f.name for f in fields(r)} == _RULE_FIELDS for r in classifier.rules)


def _classify_rulewise(rules: Sequence[Any], keys: list[tuple[str | None, str | None, int]]) -> list[str]:
    """``JobTypeClassifier.classify`` for many jobs, one rule at a time (first match wins).

    Same conditions as ``JobTypeRule.matches`` with no labels (sacct jobs have none, so a
    label rule never matches); about three times faster than a call per job.
    """
    names = [name or "" for name, _, _ in keys]
    parts = [partition or "" for _, partition, _ in keys]
    gpus = [gpu for _, _, gpu in keys]
    result: list[str | None] = [None] * len(keys)
    todo = list(range(len(keys)))
    for rule in rules:
        if not todo:
            break
        if rule.label_key is not None:
            continue
        hits = todo
        if rule.gpus == "zero":
            hits = [i for i in hits if gpus[i] == 0]
        elif rule.gpus == "positive":
            hits = [i for i in hits if gpus[i] > 0]
        if rule.name is not None:
            search = rule.name.search
            hits = [i for i in hits if search(names[i])]
        if rule.partition is not None:
            search = rule.partition.search
            hits = [i for i in hits if search(parts[i])]
        if hits:
            for i in hits:
                result[i] = rule.job_type
            todo = [i for i in todo if result[i] is None]
    for i in todo:
        result[i] = "CPU" if gpus[i] == 0 else "Other"
    return result  # type: ignore[return-value]


def _fill_from_steps(
    steps: list[tuple[str, list[str]]],
    col: dict[str, int],
    node_list: str | None,
    exit_code: int | None,
    tres: tuple[int | None, int | None, int | None] | None,
    cpu_num: int | None,
    tres_cache: dict,
    exit_cache: dict,
) -> tuple[str | None, int | None, tuple[int | None, int | None, int | None] | None, int | None]:
    """Fill what the job line left empty from its steps; unusable step values are skipped."""

    def ordered(first: str) -> list[list[str]]:
        return [t for s, t in steps if s == first] + [t for s, t in steps if s != first]

    def value(tokens: list[str], name: str) -> str | None:
        i = col.get(name)
        return None if i is None or _null(tokens[i]) else tokens[i].strip()

    def first_usable(first: str, name: str, parse, cache: dict):
        """The first step value of ``name`` that parses without an error (``first`` step first)."""
        for tokens in ordered(first):
            text = value(tokens, name)
            if text is not None:
                if text not in cache:
                    cache[text] = parse(text)
                if cache[text][1] is None:
                    return cache[text][0]
        return None

    if node_list is None:
        node_list = next((v for t in ordered("extern") if (v := value(t, "nodelist"))), None)
    if exit_code is None:
        exit_code = first_usable("batch", "exitcode", _parse_exit, exit_cache)
    if tres is None:
        tres = first_usable("extern", "alloctres", _parse_tres, tres_cache)
    if not cpu_num:
        for tokens in ordered("extern"):
            count, error = _parse_count(value(tokens, "ncpus"), "NCPUS")
            if count and not error:
                cpu_num = count
                break
    return node_list, exit_code, tres, cpu_num


def _canonical_state(text: str | None) -> tuple[str | None, str | None]:
    """(canonical state, reject reason)."""
    text = text or ""
    word = text.strip().split(" ", 1)[0].rstrip("+").upper()
    if not word:
        return None, "empty State"
    if word in _PENDING_STATES:
        return "PENDING", None  # skipped with a count by the caller: not a job record yet
    return _STATE_MAP.get(word, word), None


def _parse_count(text: str | None, field: str) -> tuple[int | None, str | None]:
    if text is None or _null(text):
        return None, None
    value = text.strip()
    if _INT_RE.fullmatch(value):
        return int(value), None
    return None, f"unparseable {field} {value!r}"


def _parse_exit(text: str | None) -> tuple[int | None, str | None]:
    if text is None or _null(text):
        return None, None
    match = _EXIT_RE.fullmatch(text.strip())
    if match is None:
        return None, f"unparseable ExitCode {text.strip()!r}"
    return int(match.group(1)), None


def _parse_tres(text: str | None) -> tuple[tuple[int | None, int | None, int | None] | None, str | None]:
    """((gpu_num, cpu, node), error) from a TRES list like ``cpu=8,gres/gpu:a100=2,mem=64G``.

    (None, None) for an empty TRES.
    """
    if text is None or _null(text):
        return None, None
    untyped: int | None = None
    typed: int | None = None
    cpu: int | None = None
    node: int | None = None
    for item in text.strip().split(","):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            return None, f"malformed TRES entry {item!r}"
        key = key.strip()
        is_gpu = key == "gres/gpu" or key.startswith("gres/gpu:")
        if not (is_gpu or key in ("cpu", "node")):
            continue
        value = value.strip()
        if not _INT_RE.fullmatch(value):
            return None, f"unparseable {key} count {value!r}"
        count = int(value)
        if key == "gres/gpu":
            untyped = count
        elif is_gpu:
            typed = (typed or 0) + count
        elif key == "cpu":
            cpu = count
        else:
            node = count
    gpu = untyped if untyped is not None else typed if typed is not None else 0
    return (gpu, cpu, node), None


def _parse_times(
    values: Sequence[str | None], zone_name: str, time_notes: dict[tuple[str, str], int], field: str
) -> tuple[Any, Any]:
    """(naive UTC datetime64[us] array, bad-value mask) for sacct times read in ``zone_name``;
    times in a repeated or skipped hour are counted in ``time_notes[(field, kind)]``."""
    import numpy as np
    import pandas as pd

    result = np.full(len(values), np.datetime64("NaT"), dtype="datetime64[us]")
    if not values:
        return result, np.zeros(0, dtype=bool)
    text = pd.Series(values, dtype="object").fillna("").astype(str).str.strip()
    null = text.isin(_NULLS).to_numpy()
    naive = text.str.fullmatch(_NAIVE_TIME).to_numpy(dtype=bool)
    aware = ~naive & text.str.fullmatch(_AWARE_TIME).to_numpy(dtype=bool)
    bad = ~null & ~naive & ~aware
    if naive.any():
        wall = pd.to_datetime(text[naive], format="%Y-%m-%dT%H:%M:%S", errors="coerce").astype(
            "datetime64[us]"
        )
        bad[naive] |= wall.isna().to_numpy()
        if zone_name != "UTC":
            local = wall.dt.tz_localize(zone_name, ambiguous="NaT", nonexistent="NaT")
            odd = (local.isna() & wall.notna()).to_numpy()
            if odd.any():
                redo = wall[odd]
                ambiguous = redo.dt.tz_localize(
                    zone_name, ambiguous="NaT", nonexistent="shift_forward"
                ).isna()
                fixed = redo.dt.tz_localize(
                    zone_name, ambiguous=np.ones(len(redo), dtype=bool), nonexistent="shift_forward"
                )
                local = local.where(~odd, fixed)
                n_amb = int(ambiguous.sum())
                for kind, count in (("repeated", n_amb), ("skipped", len(redo) - n_amb)):
                    time_notes[(field, kind)] = time_notes.get((field, kind), 0) + count
            wall = local.dt.tz_convert("UTC").dt.tz_localize(None)
        result[naive] = wall.to_numpy(dtype="datetime64[us]")
    if aware.any():
        parsed = pd.to_datetime(text[aware], utc=True, format="ISO8601", errors="coerce")
        bad[aware] |= parsed.isna().to_numpy()
        result[aware] = parsed.dt.tz_localize(None).to_numpy(dtype="datetime64[us]")
    return result, bad


def _time_notes(time_notes: dict[tuple[str, str], int], zone_name: str) -> list[str]:
    """The notes for times in a change of UTC offset, per field (Submit, Start, End) in turn."""
    notes = []
    if time_notes.get(("end", "from_elapsed")):
        notes.append(
            f"{time_notes[('end', 'from_elapsed')]} ended job(s) without an End time (End=Unknown): "
            "End = Start + Elapsed"
        )
    for field in ("submit", "start", "end"):
        if time_notes.get((field, "repeated")):
            notes.append(
                f"{time_notes[(field, 'repeated')]} time(s) fell in the repeated hour when {zone_name} left "
                "summer time; read as summer time"
            )
        if time_notes.get((field, "skipped")):
            notes.append(
                f"{time_notes[(field, 'skipped')]} time(s) fell in the hour skipped when {zone_name} entered "
                "summer time; shifted forward"
            )
    return notes


def _parse_elapsed(text: str | None) -> tuple[float | None, str | None]:
    """(seconds, error) for sacct ``[D-][HH:]MM:SS[.fff]`` durations."""
    if text is None or _null(text):
        return None, None
    match = _ELAPSED_RE.fullmatch(text.strip())
    if match is None:
        return None, "bad"
    days, hours, minutes, seconds = match.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds), None


def _parse_elapsed_raw(text: str | None) -> tuple[float | None, str | None]:
    if text is None or _null(text):
        return None, None
    return (float(text), None) if _INT_RE.fullmatch(text.strip()) else (None, "bad")


# --------------------------------------------------------------------------- format registry


def parse_input(job_input: Any, local_path: str | Path) -> tuple[ParseResult, str]:
    """The format registry's entry point (:mod:`acme.jobs.formats`): streamed from the file, so
    neither the text nor its lines are held."""
    result = parse_sacct_file(
        local_path, job_input.cluster, source_file=job_input.uri, fields=job_input.fields,
        day=job_input.day, tz=job_input.timezone, delimiter=job_input.delimiter,
    )  # fmt: skip
    assert isinstance(result, ParseResult)
    return result, "sacct"


def stream_input(
    job_input: Any, local_path: str | Path, on_jobs: Callable[[pd.DataFrame], None]
) -> tuple[ParseSummary, str]:
    """:func:`parse_input` in bounded memory: the canonical rows go to ``on_jobs`` in batches."""
    summary = parse_sacct_file(
        local_path, job_input.cluster, source_file=job_input.uri, fields=job_input.fields,
        day=job_input.day, tz=job_input.timezone, delimiter=job_input.delimiter, on_jobs=on_jobs,
    )  # fmt: skip
    assert isinstance(summary, ParseSummary)
    return summary, "sacct"


def live_export(job_input: Any, command: Sequence[str]) -> bytes:
    """Run the cluster's sacct for the input's day (``--parsable2``, ``|``-delimited)."""
    if job_input.day is None:
        raise InputError(job_input.uri, "live sacct needs a day")
    return run_sacct(
        job_input.day, command, fields=job_input.fields or DEFAULT_FIELDS, tz=job_input.timezone
    ).encode()
