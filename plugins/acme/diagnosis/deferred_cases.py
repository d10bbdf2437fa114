"""Cases of the vector store whose embedding waits for a process that loads the model anyway.

When a rule decides a diagnosis, nothing needs the embedding model: no similar case can change a
confident rule. Loading it only to store the job as a past case would cost a crash's diagnosis about
9 s of its 10. Such a case is kept as plain text instead::

    diagnosis/cases_deferred/cluster=<c>/<job_id>.json      (the ``retrieval.Case`` fields)

and :func:`flush_deferred_cases` embeds and upserts them all at once, then removes them: the nightly
diagnosis does it at the end of each chunk (which loads the model at most once). Until then the case
is in the lake but not yet found by retrieval.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from acme import lake_keys

if TYPE_CHECKING:
    from acme.diagnosis.retrieval import Case
    from acme.lake import Lake


def deferred_key(case: Case) -> str:
    return lake_keys.deferred_case(case.cluster, case.job_id)


def defer_case(lake: Lake, case: Case) -> str:
    """Keep ``case`` for a later embedding (a re-run overwrites it); returns its URL."""
    return lake.write_json(deferred_key(case), asdict(case))


def deferred_case_keys(lake: Lake) -> list[str]:
    return [key for key in lake.list(lake_keys.DEFERRED_CASES) if key.endswith(".json")]


def flush_deferred_cases(lake: Lake) -> int:
    """Embed and store every deferred case (one upsert per cluster), then remove them; returns how many.

    Two processes flushing at once store the same cases twice over (an upsert by job replaces) and a
    case deferred meanwhile stays for the next flush: only the files read here are removed.
    """
    keys = deferred_case_keys(lake)
    if not keys:
        return 0
    from acme.diagnosis.retrieval import Case, CaseStore

    cases = [Case(**lake.read_json(key)) for key in keys]
    CaseStore(lake).upsert(cases)
    for key in keys:
        lake.remove(key)
    return len(cases)
