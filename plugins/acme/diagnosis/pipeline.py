"""The diagnosis of one failed job, end to end: locate its log, compress, rules, retrieval, LLM, learn, store.

Order, stopping at the first confident answer (``ACME_DIAGNOSIS_MIN_CONFIDENCE``, 0.7):

1. **Locate** the job's log files with ``ACME_DIAGNOSIS_LOG_PATTERN`` (default
   ``{lake}/logs/cluster={cluster}/job={job_id}/*.log*``), or at the location a manual run gives, which
   must lie under ``ACME_DIAGNOSIS_LOG_ROOT`` (default ``{lake}/logs``): ``..`` and absolute paths outside
   it are refused. Local and object-store logs (plain or ``.gz``) stream through fsspec.
2. **Compress** with the job family's stored filter rules first, then the bundled ones.
3. **Rules**: the bundled rules plus those learned before (``acme.diagnosis.learning``).
4. **Retrieval**: unless a rule already decided confidently (then nothing is looked up, and a crash's
   own diagnosis loads no embedding model: its case is stored later, ``acme.diagnosis.deferred_cases``),
   the nearest past cases are looked up (they are shown as similar cases). When the rules are not confident their similarity-weighted vote decides if no rule matched at all, and otherwise
   can only confirm the rule's reason (raising its confidence): a past case never overrules a rule.
5. **LLM agent**, only when still not confident and an endpoint is configured. When it is unavailable
   the diagnosis falls back to retrieval (or the rules) and the record's note says so.
6. **Learning**: a confident agent answer with a signature regex may become a rule.
7. **Store**: a confident rule or agent diagnosis becomes a case of the vector store (retrieval's own
   answers do not, so retrieval never feeds on itself).
8. **Triage**: an Unknown or unsure diagnosis of a big job (or one only an untrusted model made) becomes a
   question for an operator, once per log template (``acme.diagnosis.triage``); the answer is learned.

No log, no rule match, no similar case and no agent give ``Unknown`` with source ``none``: never a guess.
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime
from typing import IO, TYPE_CHECKING, Any, cast

from acme.diagnosis.records import DiagnosisRecord
from acme.diagnosis.routing import Route, route
from acme.errors import InputError

if TYPE_CHECKING:
    from pathlib import Path
    from typing import TypeAlias

    from acme.diagnosis.baseline import Baseline
    from acme.diagnosis.compress import CompressedLog
    from acme.diagnosis.rules import Diagnosis, Rule
    from acme.lake import Lake

    # The last good run of the job's family: its templates, its log file, or what the lake lookup found.
    BaselineInput: TypeAlias = set[str] | frozenset[str] | str | Path | Baseline | None

__all__ = ["CONFIGURED_AGENT", "DiagnosisRecord", "Route", "diagnose_job", "diagnose_log_lines", "route"]

CONFIGURED_AGENT = "configured"  # use FailureAgent.from_config() (None when no endpoint is configured)
_MAX_EVIDENCE = 5
_SAFE_JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+-]*$")
_GLOB_CHARS = ("*", "?", "[")


# ------------------------------------------------------------------------------------------ locating logs
def _is_url(text: str) -> bool:
    return "://" in text and not text.startswith("file://")


def _local(text: str) -> str:
    return text[len("file://") :] if text.startswith("file://") else text


def _inside(candidate: str, root: str) -> bool:
    if _is_url(root) or _is_url(candidate):
        root = root.rstrip("/")
        return candidate.rstrip("/") == root or candidate.startswith(root + "/")
    real_root = os.path.realpath(_local(root))
    real = os.path.realpath(_local(candidate))
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def resolve_log_location(location: str, root: str) -> str:
    """A log location from a manual run's Params, made absolute under ``root``; anything leaving it raises."""
    if not isinstance(location, str) or not location.strip() or "\x00" in location:
        raise InputError(repr(location), "log location is empty or not text")
    location = location.strip()
    if ".." in re.split(r"[/\\]", location):
        raise InputError(location, "log location may not contain '..'")
    if _is_url(location) or location.startswith(("/", "file://")):
        candidate = location
    else:
        candidate = f"{root.rstrip('/')}/{location}"
    if not _inside(candidate, root):
        raise InputError(location, f"log location is outside the log root {root}")
    return candidate


def log_space(url: str, lake: Lake) -> tuple[Any, str]:
    """Where a log location is read from: ``(lake, key)`` inside the lake (read through its methods), else
    ``(filesystem, path)`` of the fsspec filesystem of a log root outside it."""
    if lake.owns(url):
        return lake, lake.key_of(url)
    import fsspec

    return fsspec.core.url_to_fs(url)


def glob_regex(pattern: str) -> str:
    """A glob (``*``, ``?``, ``[...]`` within one path segment; ``**`` across segments) as a regex body."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            double = pattern[i : i + 2] == "**"
            out.append(".*" if double else "[^/]*")
            i += 2 if double else 1
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def find_logs(source: Any, pattern: str) -> list[str]:
    """The files matching ``pattern`` (a glob or a plain name) in ``source`` (a Lake: keys; else a filesystem:
    paths), sorted. In the lake, one listing of the folder before the first glob character."""
    from acme.lake import Lake

    globbed = any(char in pattern for char in _GLOB_CHARS)
    if isinstance(source, Lake):
        if not globbed:  # a file, not a folder (listing a file's key finds just that file)
            return [key for key in source.list(pattern) if key == pattern]
        head = pattern[: min(pattern.index(c) for c in _GLOB_CHARS if c in pattern)]
        matcher = re.compile(glob_regex(pattern) + r"\Z")
        return [key for key in source.list(head.rsplit("/", 1)[0]) if matcher.match(key)]
    found = sorted(source.glob(pattern)) if globbed else ([pattern] if source.exists(pattern) else [])
    return [path for path in found if source.isfile(path)]


def _escapes_root(lake: Lake, key: str, root: str) -> bool:
    """Whether a local lake's log file really lies outside the log root (reached through a link)."""
    if not lake.is_local:
        return False
    with lake.local_file(key) as local:
        return not _inside(local, _local(root))


def safe_job_id(job_id: Any) -> str:
    """A job id fit to be a path component (ids come from data: '../x' must not move the log search)."""
    text = str(job_id or "")
    if not _SAFE_JOB_ID_RE.match(text):
        raise InputError(f"job {text!r}", "job id cannot name a log path (letters, digits, ._:@+- only)")
    return text


def locate_logs(
    lake: Lake, cluster: str, job: dict[str, Any], location: str | None = None, day: date | None = None
) -> tuple[list[tuple[Any, str]], str]:
    """The job's log files as ``(lake, key)`` or ``(filesystem, path)`` pairs (see :func:`log_space`) in name
    order, and the pattern searched."""
    from acme import settings

    root = settings.diagnosis().log_root.format(lake=lake.uri)
    if location:
        pattern = resolve_log_location(location, root)
    else:
        pattern = settings.diagnosis().log_pattern.format(
            lake=lake.uri,
            cluster=cluster,
            job_id=safe_job_id(job.get("job_id")),
            date=(day or job_submit_day(job)).isoformat(),
        )
    source, where = log_space(pattern, lake)
    files = find_logs(source, where)
    if location:
        escaped = [p for p in files if source is lake and _escapes_root(lake, p, root)]
        if escaped:
            raise InputError(location, f"log location leads outside the log root {root} (via a link)")
        if not files:
            raise InputError(location, "no log file found at this location")
    return [(source, p) for p in files], pattern


def read_log_lines(files: list[tuple[Any, str]]) -> Iterator[str]:
    """The lines of the log files one after another, streamed (plain or gzip), undecodable bytes replaced.
    ``files``: ``(lake, key)`` or ``(filesystem, path)`` pairs, as :func:`locate_logs` gives them.

    Only ``\\n`` ends a line (a progress bar's bare ``\\r`` stays inside it). Memory is bounded
    whatever the log: it is read in chunks, and a line above ``acme.text_input.MAX_LINE_BYTES``
    (binary garbage, a runaway print) is never held whole: its head is yielded with a note of its
    length (the compressor keeps at most 2,000 characters of a line anyway).
    """
    from acme.diagnosis.compress import LOG_READ_ERRORS, read_problem
    from acme.lake import Lake
    from acme.text_input import iter_raw_lines

    for fs, path in files:
        with fs.open(path) if isinstance(fs, Lake) else fs.open(path, "rb") as raw:
            stream = cast("IO[bytes]", gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw)
            try:
                for line in iter_raw_lines(stream):
                    text = line.data.decode("utf-8", errors="replace")
                    if line.too_long:
                        text += f" [line of {line.length:,} bytes cut to its first {len(line.data):,}]"
                    yield text
            except LOG_READ_ERRORS as exc:
                raise InputError(path, read_problem(exc)) from exc


# ------------------------------------------------------------------------------------------ job metadata
def job_submit_day(job: dict[str, Any] | None, default: date | None = None) -> date:
    """The UTC day the job was submitted (its record's partition); ``default`` or today if unknown."""
    job = job or {}
    value = job.get("submit_time") or job.get("date")
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo else value).date()
    if isinstance(value, date):
        return value
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InputError(f"job {job.get('job_id')}", f"submit_time {value!r} is not an ISO time") from exc
        return (parsed.astimezone(UTC) if parsed.tzinfo else parsed).date()
    return default or datetime.now(UTC).date()


def json_safe_job(job: dict[str, Any] | None) -> dict[str, Any]:
    """Job metadata with times as ISO text and missing values as None (for XCom, prompts and messages)."""
    out: dict[str, Any] = {}
    for key, value in (job or {}).items():
        if hasattr(value, "isoformat"):
            value = value.isoformat()
        elif value is not None and not isinstance(value, (str, int, float, bool)):
            value = str(value)
        if isinstance(value, float) and value != value:  # NaN
            value = None
        out[key] = value
    return out


# ------------------------------------------------------------------------------------------ diagnosis
class AgentOnDemand:
    """An agent made by ``make()`` the first time a diagnosis asks for one (None: no agent). Inside Airflow,
    finding the LLM connection is an API call, which a diagnosis a rule decided never needs."""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._made = False
        self._agent: Any = None

    def get(self) -> Any:
        if not self._made:
            self._agent, self._made = self._make(), True
        return self._agent


def _agent_for(agent: Any) -> Any:
    if isinstance(agent, AgentOnDemand):
        agent = agent.get() or CONFIGURED_AGENT
    if agent != CONFIGURED_AGENT:
        return agent
    from acme.diagnosis.llm_agent import FailureAgent

    return FailureAgent.from_config()


def _mitigation_for(reason: str, rules: list[Rule]) -> str | None:
    return next((r.mitigation for r in rules if r.reason == reason), None)


def _evidence(lines: list[tuple[int, str]], novel: set[int] | None = None) -> list[dict[str, Any]]:
    """The first lines as evidence, those new since the last good run (``novel``) first."""
    from acme.diagnosis.baseline import novel_first
    from acme.diagnosis.rules import redact

    return [{"line": n, "text": redact(t)[:500]} for n, t in novel_first(lines, novel)[:_MAX_EVIDENCE]]


def _from_rule(diagnosis: Diagnosis, novel: set[int] | None = None) -> dict[str, Any]:
    from acme.diagnosis.baseline import novel_first

    shown = novel_first(((e["line"], e) for e in diagnosis.evidence), novel)
    return {
        "source": "rule",
        "reason": diagnosis.reason,
        "category": diagnosis.category,
        "attribution": diagnosis.attribution,
        "confidence": float(diagnosis.confidence),
        "mitigation": diagnosis.mitigation,
        "rule_id": diagnosis.rule_id,
        "rule_version": diagnosis.rule_version,
        "evidence": [evidence for _, evidence in shown],
    }


def _from_vote(
    voted: Any, signature_lines: list[tuple[int, str]], rules: list[Rule], novel: set[int] | None = None
) -> dict[str, Any]:
    from acme.diagnosis.retrieval import decisive_lines

    return {
        "source": "retrieval",
        "reason": voted.reason,
        "category": voted.category,
        "attribution": voted.attribution,
        "confidence": float(voted.confidence),
        "mitigation": _mitigation_for(voted.reason, rules),
        "rule_id": None,
        "rule_version": None,
        "evidence": _evidence(decisive_lines(signature_lines, rules), novel),
    }


def _from_answer(
    answer: Any, compressed: CompressedLog, fallback: list[tuple[int, str]], novel: set[int] | None = None
) -> dict[str, Any]:
    by_line = {k.line: k.text for k in compressed.lines}
    cited = [(n, by_line[n]) for n in answer.evidence_lines if n in by_line]
    return {
        "source": "llm",
        "reason": answer.reason,
        "category": answer.category,
        "attribution": answer.attribution,
        "confidence": float(answer.confidence),
        "mitigation": answer.mitigation or None,
        "rule_id": None,
        "rule_version": None,
        "evidence": _evidence(cited or fallback, novel),
    }


def _weigh_vote(
    voted: Any,
    candidates: list[dict[str, Any]],
    signature_lines: list[tuple[int, str]],
    rules: list[Rule],
    novel: set[int] | None = None,
) -> list[str]:
    """Let the similar cases' vote decide when no rule matched -- only when the log's own lines name a failure
    (``retrieval.vote_alone``; otherwise the vote is a hint in the note and the answer stays Unknown); when a
    rule did (weakly), the vote can only confirm it (raising its confidence) -- a past case never overrules a
    matching rule, it is noted."""
    if voted is None:
        return []
    from acme.diagnosis.retrieval import vote_alone

    ruled = next((c for c in candidates if c["source"] == "rule"), None)
    if ruled is None:
        alone = vote_alone(voted, signature_lines, rules)
        if alone is None:
            return [
                f"similar past cases point at {voted.reason} ({voted.confidence:.2f}), but the log's own "
                f"lines name no failure (traceback frames, launcher summaries, progress): left Unknown"
            ]
        candidates.append(_from_vote(alone, signature_lines, rules, novel))
        return []
    if voted.reason == ruled["reason"]:
        ruled["confidence"] = max(ruled["confidence"], float(voted.confidence))
        return [f"{len(voted.support)} similar past case(s) agree"]
    return [f"similar past cases point at {voted.reason} ({voted.confidence:.2f})"]


def diagnose_log_lines(
    lines: str | Path | Iterable[str],
    job: dict[str, Any] | None,
    *,
    cluster: str,
    lake: Lake | None = None,
    day: date | None = None,
    agent: Any = CONFIGURED_AGENT,
    learn: bool = True,
    store_case: bool = True,
    defer_case: bool = True,
    notes: Iterable[str] = (),
    baseline: BaselineInput = None,
) -> DiagnosisRecord:
    """Diagnose an already located log (a local file or lines); see the module docstring for the steps.

    ``baseline`` -- the last good run of the job's family: its log file, its line templates
    (:func:`acme.diagnosis.baseline.baseline_keys`), or a :class:`acme.diagnosis.baseline.Baseline` found in
    the lake (its note joins the record's); the lines new since then rank first in the evidence and are sent
    to the agent first.

    Without a lake only the bundled rules (and the agent, if any) are used and nothing is written; with one,
    family filter rules, learned rules and retrieval join in, and -- unless ``learn`` / ``store_case`` are
    off (the command line turns them off) -- the lake learns from the result. When a rule decided,
    ``defer_case`` keeps the new case for a later embedding instead of loading the model now.
    """
    from acme import settings
    from acme.diagnosis import retrieval
    from acme.diagnosis.learning import rules_with_learned
    from acme.diagnosis.metadata import job_fact_lines
    from acme.diagnosis.rules import UNKNOWN, diagnose_lines

    job = dict(job or {})
    job_id = str(job.get("job_id") or "adhoc")
    notes = list(notes)
    compressed = _compress(lines, job, job_id, lake=lake, learn=learn, agent=agent, notes=notes)
    kept = [(k.line, k.text) for k in compressed.lines if k.kind in ("error", "traceback")]
    novel = _novel_lines(compressed, baseline, notes)
    rules = rules_with_learned(lake)
    threshold = settings.diagnosis().min_confidence

    candidates: list[dict[str, Any]] = []
    ruled = diagnose_lines(job_fact_lines(job) + kept, rules)
    if ruled.reason != UNKNOWN:
        candidates.append(_from_rule(ruled, novel))
    signature_lines = retrieval.signature_lines(compressed)
    similar: list[Any] = []
    store = None
    if lake is not None and _confident(candidates, threshold):
        # No past case can overrule a confident rule: the embedding model is not loaded (seconds on the
        # way from a crash to its restart), and the case waits in acme.diagnosis.deferred_cases.
        notes.append("a rule decided: similar past cases not looked up")
    elif lake is not None:
        store = retrieval.CaseStore(lake)
        similar = _retrieve(
            store, signature_lines, rules, (cluster, job_id), candidates, threshold, notes, novel
        )
    answer = None
    if not _confident(candidates, threshold):
        answer = _ask_agent(agent, compressed, similar, job, candidates, signature_lines, rules, notes, novel)

    chosen = _best(candidates) or {
        "source": "none", "reason": UNKNOWN, "category": None, "attribution": None, "confidence": 0.0,
        "mitigation": None, "rule_id": None, "rule_version": None, "evidence": [],
    }  # fmt: skip
    record = DiagnosisRecord(
        cluster=cluster,
        job_id=job_id,
        date=job_submit_day(job, day),
        similar_cases=[s.to_dict() for s in similar],
        **chosen,
    )
    if lake is not None and record.reason != UNKNOWN:
        case = retrieval.case_from_lines(
            cluster, job_id, signature_lines, reason=record.reason, category=record.category,
            attribution=record.attribution, source=record.source, confidence=record.confidence, rules=rules,
        )  # fmt: skip
        if learn and record.source == "llm" and answer is not None and answer.signature_regex:
            notes.append(_learn_from_answer(lake, case, answer))
        if store_case and record.source in ("rule", "llm") and record.confidence >= threshold:
            _store_case(lake, case, store, defer_case)
    if lake is not None and learn:
        notes += _triage(lake, record, job, signature_lines, rules, agent)
    record.note = "; ".join(notes) or None
    return record


def _triage(
    lake: Lake,
    record: DiagnosisRecord,
    job: dict[str, Any],
    signature_lines: list[tuple[int, str]],
    rules: list[Rule],
    agent: Any,
) -> list[str]:
    """Ask an operator about an unsettled diagnosis of a big job (``acme.diagnosis.triage``); its note."""
    from acme.diagnosis.triage import consider

    model = (
        getattr(getattr(_agent_for(agent), "endpoint", None), "model", None)
        if record.source == "llm"
        else None
    )
    note = consider(lake, record, job, signature_lines, rules, model)
    return [note] if note else []


def _best(candidates: list[dict[str, Any]]) -> dict[str, Any] | None:
    return max(candidates, key=lambda c: c["confidence"]) if candidates else None


def _confident(candidates: list[dict[str, Any]], threshold: float) -> bool:
    top = _best(candidates)
    return top is not None and top["confidence"] >= threshold


def _compress(
    lines: str | Path | Iterable[str],
    job: dict[str, Any],
    job_id: str,
    *,
    lake: Lake | None,
    learn: bool,
    agent: Any,
    notes: list[str],
) -> CompressedLog:
    """The log compressed with the job family's filter rules (from the lake) before the bundled ones; with a
    lake and ``learn``, the log agent may then teach the family new filter rules (noted in ``notes``)."""
    from acme.diagnosis.compress import compress_log, load_filter_rules
    from acme.diagnosis.learning import family_key, load_family_filter_rules

    filter_rules = load_filter_rules()
    if lake is not None:
        filter_rules = load_family_filter_rules(lake, family_key(job)) + filter_rules
    compressed = compress_log(lines, rules=filter_rules)
    if lake is not None and learn:
        notes += _learn_filter_rules(lake, job, job_id, compressed, agent)
    return compressed


def _retrieve(
    store: Any,
    signature_lines: list[tuple[int, str]],
    rules: list[Rule],
    exclude: tuple[str, str],
    candidates: list[dict[str, Any]],
    threshold: float,
    notes: list[str],
    novel: set[int] | None = None,
) -> list[Any]:
    """The nearest past cases; when no candidate is confident yet, their vote is weighed into ``candidates``."""
    from acme import settings
    from acme.diagnosis import retrieval
    from acme.diagnosis.rules import redact

    wanted = settings.diagnosis()
    if wanted.embedding == "minilm" and isinstance(store.embedder, retrieval.LexicalEmbedder):
        notes.append(f"embedding model unavailable, lexical retrieval used ({retrieval.fallback_reason})")
    signature = redact(retrieval.error_signature(signature_lines, rules))
    similar = store.nearest(signature, wanted.retrieval_k, exclude=exclude)
    if not _confident(candidates, threshold):
        min_similarity = wanted.retrieval_min_similarity
        voted = retrieval.vote(
            similar, store.embedder.min_similarity if min_similarity is None else min_similarity
        )
        notes += _weigh_vote(voted, candidates, signature_lines, rules, novel)
    return similar


def _ask_agent(
    agent: Any,
    compressed: CompressedLog,
    similar: list[Any],
    job: dict[str, Any],
    candidates: list[dict[str, Any]],
    signature_lines: list[tuple[int, str]],
    rules: list[Rule],
    notes: list[str],
    novel: set[int] | None = None,
) -> Any:
    """The LLM agent's answer (None without an agent or when it is unavailable); a usable answer joins
    ``candidates`` unless a matching rule says otherwise (a rule is never overruled by the model). The lines
    new since the family's last good run (``novel``), when known, are sent first."""
    from acme.diagnosis import retrieval
    from acme.diagnosis.rules import UNKNOWN, redact

    agent = _agent_for(agent)
    if agent is None:
        return None
    from acme.diagnosis.llm_agent import AgentUnavailable

    try:
        answer = agent.diagnose(
            redact(compressed.to_text()), [s.to_dict() for s in similar], json_safe_job(job),
            **({"novel": novel} if novel is not None else {}),
        )  # fmt: skip
    except AgentUnavailable as exc:
        fallback = "retrieval" if any(c["source"] == "retrieval" for c in candidates) else "rules"
        notes.append(f"LLM agent unavailable ({exc}); fell back to {fallback}")
        return None
    by_rule = next((c for c in candidates if c["source"] == "rule"), None)
    if by_rule is not None and answer.reason not in (UNKNOWN, by_rule["reason"]):
        # A matching rule, however weak, is never overruled by the model: the answer is noted.
        notes.append(f"LLM agent answered {answer.reason}; the matching rule's {by_rule['reason']} stands")
    elif answer.reason != UNKNOWN:
        decisive = retrieval.decisive_lines(signature_lines, rules)
        candidates.append(_from_answer(answer, compressed, decisive, novel))
    return answer


def _novel_lines(compressed: CompressedLog, baseline: BaselineInput, notes: list[str]) -> set[int] | None:
    """The kept lines new since the last good run (None without one), noted in the record."""
    if baseline is None:
        return None
    from acme.diagnosis.baseline import Baseline, baseline_keys_of_log, novel_lines

    if isinstance(baseline, Baseline):
        if baseline.good_job_id is not None:  # a good run was found: which, or why its log is of no use
            notes.append(baseline.note)
        if baseline.keys is None:
            return None
        keys: set[str] | frozenset[str] = baseline.keys
    else:
        keys = baseline if isinstance(baseline, (set, frozenset)) else baseline_keys_of_log(baseline)
    novel = novel_lines(((k.line, k.text) for k in compressed.lines), keys)
    notes.append(
        f"{len(novel)} of {len(compressed.lines)} kept lines are new since the last good run: ranked first"
    )
    return novel


def _learn_from_answer(lake: Lake, case: Any, answer: Any) -> str:
    """Let the agent's regex become a rule if it passes every check; what happened, as a note."""
    from acme.diagnosis.learning import learn_rule

    outcome = learn_rule(
        lake, case, answer.signature_regex, source="agent", confidence=answer.confidence,
        mitigation=answer.mitigation or None,
    )  # fmt: skip
    return f"learned rule {outcome.rule_id}" if outcome.accepted else f"rule not learned: {outcome.why}"


def _store_case(lake: Lake, case: Any, store: Any, defer_case: bool) -> None:
    """Keep the case for retrieval: deferred (no model loaded) when no store was opened, else upserted."""
    from acme.diagnosis import retrieval

    if store is None and defer_case:
        from acme.diagnosis.deferred_cases import defer_case as defer

        defer(lake, case)
    else:
        (store or retrieval.CaseStore(lake)).upsert([case])


def _learn_filter_rules(
    lake: Lake, job: dict[str, Any], job_id: str, compressed: Any, agent: Any
) -> list[str]:
    """Let the LLM log agent turn the log's frequent unmatched templates into the family's filter rules
    (only with a configured endpoint; see :mod:`acme.diagnosis.filter_learning`)."""
    from acme.diagnosis.filter_learning import frequent_unmatched_templates, learn_family_filter_rules
    from acme.diagnosis.learning import family_key
    from acme.diagnosis.llm_endpoint import AgentUnavailable, LLMEndpoint

    if not frequent_unmatched_templates(compressed):
        return []
    endpoint = getattr(_agent_for(agent), "endpoint", None)
    if not isinstance(endpoint, LLMEndpoint):
        return []
    try:
        learned = learn_family_filter_rules(lake, family_key(job), compressed, endpoint, job_id=job_id)
    except AgentUnavailable as exc:
        return [f"log agent unavailable ({exc}); no filter rules learned"]
    note = learned.note()
    return [note] if note else []


def diagnose_job(
    lake: Lake,
    cluster: str,
    job: dict[str, Any],
    log_source: str | Iterable[str] | None = None,
    *,
    day: date | None = None,
    agent: Any = CONFIGURED_AGENT,
    defer_case: bool = True,
    baselines: Any = None,
) -> DiagnosisRecord:
    """Diagnose one failed job. ``log_source``: None (find the log by the configured pattern), a location
    from a manual run (checked against the log root), or the log's lines themselves. ``baselines``: an
    :class:`acme.diagnosis.baseline_lookup.BaselineFinder` (one per night), to compare the log with the
    family's last good run; none without it."""
    notes = []
    if log_source is None or isinstance(log_source, str):
        files, searched = locate_logs(lake, cluster, job, log_source, day)
        if not files:
            notes.append(f"no log found at {searched}: diagnosed from the job metadata alone")
        lines: Iterable[str] = read_log_lines(files)
    else:
        lines = log_source
    baseline = baselines.for_job(cluster, job) if baselines is not None else None
    return diagnose_log_lines(
        lines, job, cluster=cluster, lake=lake, day=day, agent=agent, defer_case=defer_case, notes=notes,
        baseline=baseline,
    )  # fmt: skip
