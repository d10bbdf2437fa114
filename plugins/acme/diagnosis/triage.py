"""Triage: an operator is asked for the reason of a failure the diagnosis could not settle, and the answer
becomes a labelled case and a candidate rule.

**Who is asked about.** A diagnosis of a job that lost at least ``ACME_TRIAGE_MIN_GPU_HOURS`` GPU-hours
(default 64) that ended ``Unknown``, below ``ACME_TRIAGE_MIN_CONFIDENCE`` (default 0.5), or was made by the
LLM agent with a model not listed in ``ACME_DIAGNOSIS_TRUSTED_MODELS`` (:func:`triage_reason`). Only jobs
with a log: the question rests on its decisive line. ``ACME_TRIAGE=false`` asks nobody.

**Never twice.** A question is keyed by the *template* of the decisive line (the first root-cause or
unexplained error line, masked as the compressor's dedup key masks it: ranks, pids, times, addresses,
hex), one JSON document per template under ``diagnosis/triage/questions/<key>.json``. A second job
failing with the same template is not asked about: while the first question is open it waits for that
answer, and once answered the learned rule (or case) diagnoses it.

**The question** (:func:`triage_form`): the job, its GPU-hours lost, the diagnosis so far, the evidence
lines; the options are the taxonomy's reasons, the likeliest first (the diagnosis' own, the similar past
cases', the weakly matching rules'), then the others, and ``Unknown`` ("cannot tell": nothing is learned).

**The answer** (:func:`apply_answer`) becomes

* a labelled case of the vector store (source ``operator``, confidence 1), found by retrieval from then on;
* a candidate rule: the decisive line's template as a regex (literal text kept, masked parts as bounded
  wildcards), validated as the LLM agent's rules are (``acme.diagnosis.learning.learn_rule``): it must
  match its own case, match no stored case of another reason, and change the outcome of no labelled
  corpus line to a reason its label does not accept.

An unanswered question expires after ``ACME_TRIAGE_TIMEOUT_S`` (default 12 h): nothing is learned and the
template is not asked about again (:func:`expire_question`).

Statuses of a question: ``new`` (proposed by a diagnosis) → ``asked`` (claimed by a run's form) →
``answered`` or ``expired``. No Airflow import here: ``acme_airflow.triage`` adapts it to the HITL operator.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from acme import lake_keys
from acme.errors import InputError

if TYPE_CHECKING:
    from acme.diagnosis.records import DiagnosisRecord
    from acme.diagnosis.rules import Rule
    from acme.lake import Lake
    from acme.settings import DiagnosisSettings

NEW, ASKED, ANSWERED, EXPIRED = "new", "asked", "answered", "expired"
CANNOT_TELL = "Unknown"
_PLACEHOLDER_RE = re.compile(r"<[A-Z]+>")
_WILDCARD = ".{1,120}?"
_MAX_TEMPLATE_CHARS = 300
_MAX_EVIDENCE = 5


@dataclass(frozen=True)
class TriageQuestion:
    """One question for an operator (the module docstring): everything the form shows and the answer needs."""

    key: str
    template: str
    cluster: str
    job_id: str
    day: str
    why: str
    diagnosed_reason: str
    diagnosed_source: str
    confidence: float
    gpu_hours: float
    options: tuple[str, ...]
    evidence: tuple[tuple[int, str], ...]
    decisive_line: tuple[int, str]
    signature: str
    error_text: str
    model: str | None = None
    status: str = NEW
    claimed_by: str | None = None
    asked_at: str | None = None
    answer: dict[str, Any] = field(default_factory=dict)
    outcome: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["options"] = list(self.options)
        data["evidence"] = [{"line": n, "text": t} for n, t in self.evidence]
        data["decisive_line"] = {"line": self.decisive_line[0], "text": self.decisive_line[1]}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TriageQuestion:
        return cls(
            **{
                **data,
                "options": tuple(data["options"]),
                "evidence": tuple((int(e["line"]), str(e["text"])) for e in data["evidence"]),
                "decisive_line": (int(data["decisive_line"]["line"]), str(data["decisive_line"]["text"])),
            }
        )


# ------------------------------------------------------------------------------------------ who is asked
def gpu_hours(job: dict[str, Any] | None) -> float:
    """GPU-hours a failed job used (``gpu_time`` in GPU-seconds, else GPUs x run seconds); 0 when unknown."""
    job = job or {}
    gpu_time = _number(job.get("gpu_time"))
    if gpu_time is None:
        gpus = _number(job.get("gpu_share")) or _number(job.get("gpu_num"))
        run_s = _number(job.get("run_s")) or _number(job.get("duration"))
        gpu_time = gpus * run_s if gpus is not None and run_s is not None else 0.0
    return round(gpu_time / 3600.0, 3)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN is unknown


def triage_reason(
    record: DiagnosisRecord, job: dict[str, Any] | None, settings: DiagnosisSettings, model: str | None = None
) -> str | None:
    """Why this diagnosis goes to an operator, or None when it does not (the module docstring)."""
    from acme.diagnosis.rules import UNKNOWN

    if not settings.triage:
        return None
    hours = gpu_hours(job)
    if hours < settings.triage_min_gpu_hours:
        return None
    big = f"a job that lost {hours:g} GPU-hours (at least {settings.triage_min_gpu_hours:g})"
    if record.reason == UNKNOWN:
        return f"the diagnosis ended Unknown for {big}"
    if record.source == "llm" and (model or "") not in settings.trusted_models:
        return (
            f"only the LLM agent ({model or 'an unnamed model'}, not in ACME_DIAGNOSIS_TRUSTED_MODELS) says "
            f"{record.reason} for {big}"
        )
    if record.confidence < settings.triage_min_confidence:
        return f"{record.reason} at confidence {record.confidence:.2f} (below {settings.triage_min_confidence:g}) for {big}"
    return None


# ------------------------------------------------------------------------------------------ templates
def line_template(text: str) -> str:
    """The template of a log line: its prefix stripped and the parts that vary masked (the dedup key)."""
    from acme.diagnosis.compress import error_key, strip_prefix

    return " ".join(error_key(strip_prefix(text)[0]).split())


def template_key(template: str) -> str:
    return hashlib.sha256(template.encode()).hexdigest()[:20]


def template_regex(template: str) -> str | None:
    """A rule regex for a template: its literal text escaped (whitespace as ``\\s+``), each masked part a
    bounded wildcard; cut at a masked part to stay under 300 template characters. None when nothing
    literal is left to match."""
    parts = _PLACEHOLDER_RE.split(template[:_MAX_TEMPLATE_CHARS])
    pieces = []
    for index, part in enumerate(parts):
        literal = r"\s+".join(re.escape(word) for word in part.split())
        if literal:
            pieces.append(literal)
        if index < len(parts) - 1 and pieces and pieces[-1] != _WILDCARD:
            pieces.append(_WILDCARD)
    while pieces and pieces[-1] == _WILDCARD:
        pieces.pop()
    literal_chars = sum(len(p) for p in pieces if p != _WILDCARD)
    return "".join(pieces) if literal_chars >= 8 else None


# ------------------------------------------------------------------------------------------ the question
def question_for(
    record: DiagnosisRecord,
    job: dict[str, Any] | None,
    signature_lines: Sequence[tuple[int, str]],
    rules: list[Rule],
    why: str,
    model: str | None = None,
) -> TriageQuestion | None:
    """The question about ``record`` (None when its log has no line to ask about)."""
    from acme.diagnosis.retrieval import decisive_lines, error_signature
    from acme.diagnosis.rules import redact

    decisive = decisive_lines(signature_lines, rules)
    if not decisive:
        return None
    number, text = decisive[0]
    template = line_template(text)
    if not template_regex(template):
        return None
    evidence = tuple((n, redact(t)[:500]) for n, t in decisive[:_MAX_EVIDENCE])
    return TriageQuestion(
        key=template_key(template),
        template=template,
        cluster=record.cluster,
        job_id=record.job_id,
        day=record.date.isoformat(),
        why=why,
        diagnosed_reason=record.reason,
        diagnosed_source=record.source,
        confidence=float(record.confidence),
        gpu_hours=gpu_hours(job),
        options=tuple(reason_options(record, rules, [t for _, t in decisive])),
        evidence=evidence,
        decisive_line=(number, redact(text)[:500]),
        signature=redact(error_signature(signature_lines, rules)),
        error_text=redact("\n".join(t for _, t in signature_lines))[:4_000],
        model=model,
    )


def reason_options(record: DiagnosisRecord, rules: list[Rule], lines: Iterable[str]) -> list[str]:
    """The taxonomy's reasons, the likeliest first: the diagnosis' own, the similar past cases' (by
    similarity), the rules matching the lines (by priority); then the others by name; ``Unknown`` last."""
    from acme.diagnosis.rules import EXTRA_REASONS, TAXONOMY, UNKNOWN

    likely: list[str] = []
    if record.reason != UNKNOWN:
        likely.append(record.reason)
    similar = sorted(record.similar_cases or [], key=lambda s: -float(s.get("similarity") or 0))
    likely += [str(s["reason"]) for s in similar if s.get("reason")]
    texts = list(lines)
    matching = sorted((r for r in rules if any(r.search(t) for t in texts)), key=lambda r: -r.priority)
    likely += [r.reason for r in matching]
    known = {**TAXONOMY, **EXTRA_REASONS}
    ordered = [reason for reason in dict.fromkeys(likely) if reason in known]
    ordered += sorted(reason for reason in known if reason not in ordered)
    return [*ordered, CANNOT_TELL]


def propose_question(lake: Lake, question: TriageQuestion) -> bool:
    """Store the question unless its template was asked about before; True when it is new."""
    key = lake_keys.triage_question(question.key)
    with lake.lock(f"diagnosis-triage-{question.key}"):
        if lake.exists(key):
            return False
        lake.write_json(key, question.to_dict())
    return True


def load_question(lake: Lake, key: str) -> TriageQuestion:
    document = lake.read_json(lake_keys.triage_question(key))
    if not document:
        raise InputError(f"triage question {key}", "no such question in the lake")
    return TriageQuestion.from_dict(document)


def _save(lake: Lake, question: TriageQuestion) -> None:
    lake.write_json(lake_keys.triage_question(question.key), question.to_dict())


def claim_questions(lake: Lake, run_id: str, limit: int, now: datetime | None = None) -> list[TriageQuestion]:
    """The new questions (and those this run claimed before: a retry), the largest jobs first, at most
    ``limit``; each is marked ``asked`` by ``run_id``, so no other run puts it to a form."""
    stamp = (now or datetime.now(UTC)).isoformat()
    found = []
    for key in lake.list(lake_keys.TRIAGE_QUESTIONS):
        if key.endswith(".json"):
            question = TriageQuestion.from_dict(lake.read_json(key))
            if question.status == NEW or (question.status == ASKED and question.claimed_by == run_id):
                found.append(question)
    found.sort(key=lambda q: (-q.gpu_hours, q.key))
    claimed = []
    for question in found[: max(limit, 0)]:
        with lake.lock(f"diagnosis-triage-{question.key}"):
            current = load_question(lake, question.key)
            if current.status == NEW or current.claimed_by == run_id:
                current = _replace(
                    current, status=ASKED, claimed_by=run_id, asked_at=current.asked_at or stamp
                )
                _save(lake, current)
                claimed.append(current)
    return claimed


def _replace(question: TriageQuestion, **changes: Any) -> TriageQuestion:
    from dataclasses import replace

    return replace(question, **changes)


def triage_form(question: TriageQuestion) -> tuple[str, str]:
    """The question's subject and Markdown body."""
    subject = (
        f"What failed job {question.job_id} on {question.cluster}? ({question.gpu_hours:g} GPU-hours lost)"
    )
    evidence = "\n".join(f"    line {n}: {t}" for n, t in question.evidence)
    model = f", model {question.model}" if question.model else ""
    body = "\n".join(
        [
            f"**Why you are asked**: {question.why}.",
            f"**Diagnosis so far**: {question.diagnosed_reason} (by {question.diagnosed_source}{model}, "
            f"confidence {question.confidence:.2f})",
            "",
            "**Evidence lines** (the first is the decisive one):",
            "",
            evidence,
            "",
            f"**Template** (asked about once; later jobs with it are diagnosed by your answer): `{question.template}`",
            "",
            "Choose the reason (the likeliest first). It becomes a labelled case for retrieval and, if it "
            "passes validation, a rule. **Unknown** means you cannot tell: nothing is learned.",
        ]
    )
    return subject, body


# ------------------------------------------------------------------------------------------ the answer
def apply_answer(
    lake: Lake,
    key: str,
    reason: str,
    by: str,
    note: str = "",
    *,
    labelled: Sequence[tuple[str, str, tuple[str, ...]]] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Turn an operator's answer into a labelled case and a candidate rule (module docstring); returns the
    outcome (``case_id``, ``rule_id``, ``rule_status``: added, exists or refused, ``why``). Answering an
    answered question again returns its first outcome and changes nothing."""
    from acme.diagnosis.learning import learn_rule
    from acme.diagnosis.retrieval import Case, CaseStore
    from acme.diagnosis.rules import attribution_of, category_of

    question = load_question(lake, key)
    if question.status == ANSWERED:
        return question.outcome
    if reason not in question.options:
        raise InputError(f"triage question {key}", f"{reason!r} is not one of its options")
    at = (now or datetime.now(UTC)).isoformat()
    outcome: dict[str, Any] = {"case_id": None, "rule_id": None, "rule_status": None}
    if reason == CANNOT_TELL:
        outcome["why"] = "the operator could not tell either: nothing learned"
    else:
        case = Case(
            cluster=question.cluster, job_id=question.job_id, reason=reason, category=category_of(reason),
            attribution=attribution_of(reason), source="operator", confidence=1.0,
            signature=question.signature, error_text=question.error_text,
        )  # fmt: skip
        CaseStore(lake).upsert([case])
        learned = learn_rule(
            lake,
            case,
            template_regex(question.template),
            source="operator",
            by=by,
            labelled=labelled,
            now=now,
        )
        outcome.update(
            case_id=case.case_id, rule_id=learned.rule_id, rule_status=learned.status, why=learned.why
        )
    answered = _replace(
        question,
        status=ANSWERED,
        answer={"reason": reason, "by": by, "note": note, "at": at},
        outcome=outcome,
    )
    _save(lake, answered)
    return outcome


def expire_question(lake: Lake, key: str, now: datetime | None = None) -> dict[str, Any]:
    """Nobody answered in time: the question expires, nothing is learned, the template stays asked."""
    question = load_question(lake, key)
    if question.status == ANSWERED:
        return question.outcome
    at = (now or datetime.now(UTC)).isoformat()
    outcome = {"case_id": None, "rule_id": None, "rule_status": None,
               "why": f"expired unanswered at {at}: nothing learned"}  # fmt: skip
    _save(lake, _replace(question, status=EXPIRED, answer={"by": "timeout", "at": at}, outcome=outcome))
    return outcome


def consider(
    lake: Lake,
    record: DiagnosisRecord,
    job: dict[str, Any] | None,
    signature_lines: Sequence[tuple[int, str]],
    rules: list[Rule],
    model: str | None = None,
) -> str | None:
    """The pipeline's hook: propose a question about ``record`` when it needs one; a note for the record."""
    from acme import settings

    why = triage_reason(record, job, settings.diagnosis(), model)
    if why is None:
        return None
    question = question_for(record, job, signature_lines, rules, why, model)
    if question is None:
        return f"triage: {why}, but no log line to ask about"
    if propose_question(lake, question):
        return f"triage: an operator is asked ({why}; question {question.key})"
    return f"triage: the same log template was asked about before (question {question.key}): not asked again"
