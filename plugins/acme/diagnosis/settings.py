"""Configuration of the diagnosis pipeline: environment variables with defaults, read when asked.

Kept here, inside the diagnosis package, so the pipeline's knobs live next to the code that uses them
(``acme.config`` holds the project-wide ones). Every function reads the environment at call time, so a
test or a task can change a value with ``monkeypatch.setenv`` / the worker environment.
"""

from __future__ import annotations

from acme.config import env as _env
from acme.config import env_number
from acme.errors import ConfigError

EMBEDDINGS = ("minilm", "lexical")
DEFAULT_LOG_PATTERN = "{lake}/logs/cluster={cluster}/job={job_id}/*.log*"


def _number(name: str, default: str, low: float, high: float) -> float:
    return env_number(name, default, low=low, high=high)


def log_pattern() -> str:
    """Where a job's log files are (``ACME_DIAGNOSIS_LOG_PATTERN``): a glob with ``{lake}``, ``{cluster}``,
    ``{job_id}`` and ``{date}`` (the job's submit day) placeholders."""
    import string

    pattern = _env("ACME_DIAGNOSIS_LOG_PATTERN", DEFAULT_LOG_PATTERN)
    known = {"lake", "cluster", "job_id", "date"}
    for _, field, _, _ in string.Formatter().parse(pattern):
        if field is not None and field not in known:
            raise ConfigError(f"ACME_DIAGNOSIS_LOG_PATTERN has an unknown placeholder {{{field}}}")
    return pattern


def log_root() -> str:
    """The folder (or URL prefix) every log must be under (``ACME_DIAGNOSIS_LOG_ROOT``, default
    ``{lake}/logs``): a log location given in a manual run's Params may not leave it."""
    return _env("ACME_DIAGNOSIS_LOG_ROOT", "{lake}/logs")


def embedding() -> str:
    """Which embedding the vector store uses (``ACME_DIAGNOSIS_EMBEDDING``): ``minilm`` (the packaged
    all-MiniLM-L6-v2, falling back to lexical when it cannot load) or ``lexical`` (hashed TF-IDF)."""
    value = _env("ACME_DIAGNOSIS_EMBEDDING", "lexical").lower()
    if value not in EMBEDDINGS:
        raise ConfigError(f"ACME_DIAGNOSIS_EMBEDDING={value!r} must be one of {', '.join(EMBEDDINGS)}")
    return value


def min_confidence() -> float:
    """A diagnosis at least this confident stops the pipeline (``ACME_DIAGNOSIS_MIN_CONFIDENCE``, 0.7):
    below it, retrieval and then the LLM agent are asked."""
    return _number("ACME_DIAGNOSIS_MIN_CONFIDENCE", "0.7", 0.0, 1.0)


def retrieval_min_similarity() -> float | None:
    """Past cases less similar than this do not vote (``ACME_DIAGNOSIS_RETRIEVAL_MIN_SIMILARITY``); unset:
    the embedder's own threshold, measured on the labelled set (0.6 for the model, 0.3 for lexical)."""
    if not _env("ACME_DIAGNOSIS_RETRIEVAL_MIN_SIMILARITY", ""):
        return None
    return _number("ACME_DIAGNOSIS_RETRIEVAL_MIN_SIMILARITY", "0.5", 0.0, 1.0)


def retrieval_k() -> int:
    """How many nearest past cases are returned and vote (``ACME_DIAGNOSIS_RETRIEVAL_K``, 5)."""
    return int(_number("ACME_DIAGNOSIS_RETRIEVAL_K", "5", 1, 100))


def learn_min_confidence() -> float:
    """An agent answer at least this confident may teach a rule (``ACME_DIAGNOSIS_LEARN_MIN_CONFIDENCE``)."""
    return _number("ACME_DIAGNOSIS_LEARN_MIN_CONFIDENCE", "0.85", 0.0, 1.0)


def max_jobs_per_run() -> int:
    """At most this many failed jobs *with a log* are diagnosed by one DAG run (``ACME_DIAGNOSIS_MAX_JOBS``,
    500); the others wait in the carry-over queue for the next run. Jobs without a log are not capped:
    their bulk diagnosis from metadata takes seconds for thousands."""
    return int(_number("ACME_DIAGNOSIS_MAX_JOBS", "500", 1, 100_000))


def chunks() -> int:
    """At most this many mapped tasks diagnose one run's jobs with a log (``ACME_DIAGNOSIS_CHUNKS``, 4):
    each loads the embedding model at most once for its whole chunk."""
    return int(_number("ACME_DIAGNOSIS_CHUNKS", "4", 1, 64))


def claim_ttl_s() -> float:
    """A queued job claimed by a run that did not diagnose it is taken by another run after this many
    seconds (``ACME_DIAGNOSIS_CLAIM_TTL_S``, 21600: a run that failed for good, not one still working)."""
    return _number("ACME_DIAGNOSIS_CLAIM_TTL_S", "21600", 60, 30 * 86_400)


def concurrency() -> int:
    """Diagnose tasks running at once (``ACME_DIAGNOSIS_CONCURRENCY``, 2: model memory, LLM pressure)."""
    return int(_number("ACME_DIAGNOSIS_CONCURRENCY", "2", 1, 256))


def recovery_dry_run() -> bool:
    """Whether recovery requests ask ``recover_training`` for a dry run (``ACME_RECOVERY_DRY_RUN``, the
    same setting as that DAG's own default: see ``acme.settings.RecoverySettings.dry_run``)."""
    from acme.settings import recovery

    return recovery().dry_run
