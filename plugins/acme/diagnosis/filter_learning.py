"""Teach a job family new filter rules from its frequent unmatched templates (the paper's log agent).

After a log is compressed, the templates that no filter rule matched but that cover many lines are
routine output the rules do not know yet (a new progress bar, a framework's banner). When an LLM
endpoint is configured, :func:`acme.diagnosis.log_agent.propose_filter_rules` asks for a regex per
template in several independent samples and accepts one only when the samples agree, it compiles,
matches the template's lines and matches none of the log's error lines (held back). Accepted rules
are stored for the job's family (:func:`acme.diagnosis.learning.save_family_filter_rules`, versioned,
with provenance), so the next job of the family drops those lines at once.

Offline (no endpoint) nothing happens: the bundled and already learned rules still apply.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.diagnosis.compress import CompressedLog
    from acme.diagnosis.llm_endpoint import LLMEndpoint
    from acme.lake import Lake

MIN_TEMPLATE_LINES = 200  # a template worth a rule: it alone is this many of the log's kept-or-dropped lines
MAX_TEMPLATES_PER_LOG = 5  # bounds the LLM calls one log can cause (each template costs `samples` calls)


@dataclass
class FilterLearning:
    family: str
    asked: int = 0
    accepted: list[str] = field(default_factory=list)  # rule ids
    rejected: list[str] = field(default_factory=list)  # "template: why"
    version: int | None = None

    def note(self) -> str | None:
        if not self.asked:
            return None
        text = f"log agent: {len(self.accepted)} of {self.asked} frequent templates became filter rules"
        if self.version is not None:
            text += f" of family {self.family} (version {self.version})"
        return text


def frequent_unmatched_templates(
    compressed: CompressedLog, min_lines: int = MIN_TEMPLATE_LINES, limit: int = MAX_TEMPLATES_PER_LOG
) -> list[dict[str, Any]]:
    """The templates that no filter rule dropped and that cover at least ``min_lines`` lines, largest first."""
    frequent = [t for t in compressed.templates if int(t.get("count", 0)) >= min_lines]
    return sorted(frequent, key=lambda t: -int(t["count"]))[:limit]


def learn_family_filter_rules(
    lake: Lake,
    family: str,
    compressed: CompressedLog,
    endpoint: LLMEndpoint,
    *,
    job_id: str,
    min_lines: int = MIN_TEMPLATE_LINES,
    samples: int = 3,
    client: Any = None,
) -> FilterLearning:
    """Propose rules for ``compressed``'s frequent templates and store the accepted ones for ``family``."""
    from acme.diagnosis.learning import save_family_filter_rules
    from acme.diagnosis.log_agent import propose_filter_rules

    outcome = FilterLearning(family=family)
    templates = frequent_unmatched_templates(compressed, min_lines)
    if not templates:
        return outcome
    held_back = [k.text for k in compressed.lines if k.kind in ("error", "traceback")]
    proposals = propose_filter_rules(endpoint, templates, held_back, samples=samples, client=client)
    outcome.asked = len(proposals)
    accepted = []
    for proposal in proposals:
        if not proposal.accepted:
            outcome.rejected.append(f"{proposal.template[:60]}: {proposal.rejection}")
            continue
        rule_id = "learned-" + hashlib.sha1((proposal.regex or "").encode()).hexdigest()[:10]
        accepted.append(proposal.to_filter_rule(rule_id))
        outcome.accepted.append(rule_id)
    if accepted:
        outcome.version = save_family_filter_rules(
            lake,
            family,
            accepted,
            {"source": "llm-log-agent", "model": endpoint.model, "job_id": job_id, "samples": samples},
        )
    return outcome
