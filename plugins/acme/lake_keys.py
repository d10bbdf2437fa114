"""The lake's layout: one function for every kind of key, by area.

Keys are relative to the lake's root and use Hive-style ``name=value`` folders where a partition is
meant to be pruned (cluster, date, metric). Code outside this module never spells a key out: it asks
here, and reads, writes, lists and removes through :class:`acme.lake.Lake`. Changing the layout is a
change to this file (and a migration of the stored data), nothing else.

Areas, in the order data flows::

    raw/jobs/…            copies of the scheduler records as they came
    staging/<step>/<run>/ a run's hand-over between its tasks; removed when the run has published
    jobs/…                job partitions (one file per cluster and submit day)
    quarantine/…          rows or samples that failed validation, with their reason
    validation/…          validation reports per input
    metrics/…             metric partitions (per metric, cluster and day); metrics_snapshots/… one-off scrapes
    checkpoints/…         checkpoint events of training campaigns
    logs/…                training jobs' runtime logs (the default log location)
    diagnoses/…           diagnosis records per cluster and day; diagnosis/… the diagnosis's own state
    detection/…           hang and fail-slow episodes
    recovery/…            recovery action logs and the simulated backend's state
    notify/…              messages waiting to go out (queue) and what was sent (ledger)
    eval/…                evaluation runs and the learned priors
    reports/…             published characterization reports
"""

from __future__ import annotations

import re
from datetime import date

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(value: str) -> str:
    """``value`` as one key component: characters other than letters, digits, ``._-`` become ``_``."""
    return _UNSAFE.sub("_", value).lstrip(".") or "_"


def partition_values(key: str) -> dict[str, str]:
    """The ``name=value`` folders of a key: ``jobs/cluster=seren/date=2023-07-01/…`` → cluster, date."""
    return dict(part.split("=", 1) for part in key.split("/") if "=" in part)


def _day(day: date | str | None) -> str:
    if day is None:
        return "undated"
    return day.isoformat() if isinstance(day, date) else day


# --- jobs ------------------------------------------------------------------------------------------

JOBS = "jobs"
JOBS_FILE = "jobs.parquet"


def jobs_cluster(cluster: str) -> str:
    """The folder of one cluster's job partitions."""
    return f"{JOBS}/cluster={cluster}"


def jobs_partition(cluster: str, day: date | str) -> str:
    """One cluster's jobs submitted on ``day``."""
    return f"{jobs_cluster(cluster)}/date={_day(day)}/{JOBS_FILE}"


def jobs_validation_record(cluster: str, day: date | str) -> str:
    """Which inputs wrote a job partition, with their validation results."""
    return f"{jobs_cluster(cluster)}/date={_day(day)}/_validation.json"


def raw_jobs(cluster: str, day: date | str | None, name: str) -> str:
    """The raw copy of one job input, as it came."""
    return f"raw/jobs/cluster={cluster}/date={_day(day)}/{name}"


def job_input_artifact(area: str, cluster: str, day: date | str | None, name: str) -> str:
    """A per-input artifact of the job ingest: its rejected rows (``area`` ``quarantine``, under
    :data:`QUARANTINE_JOBS`) or its validation report (``validation``)."""
    return f"{area}/jobs/cluster={cluster}/date={_day(day)}/{name}"


QUARANTINE_JOBS = "quarantine/jobs"


# --- staging ---------------------------------------------------------------------------------------


def staging(step: str, run_id: str) -> str:
    """One run's staging folder for ``step`` (a DAG id): removed once the run has published."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", run_id).strip("-.")[:160] or "run"
    return f"staging/{step}/{safe}"


# --- metrics ---------------------------------------------------------------------------------------

METRICS = "metrics"
METRICS_SNAPSHOTS = "metrics_snapshots"


def metric_partition(metric: str, cluster: str, day: date | str, area: str = METRICS) -> str:
    """The folder of one metric's samples of one cluster and day (``area``: metrics or metrics_snapshots)."""
    return f"{area}/metric={metric}/cluster={cluster}/date={_day(day)}"


def metric_samples(metric: str, cluster: str, day: date | str) -> str:
    return f"{metric_partition(metric, cluster, day)}/samples.parquet"


METRICS_5M = "metrics_5m"
METRICS_HIST = "metrics_hist"


def metric_snapshot(metric: str, cluster: str, day: date | str, input_key: str) -> str:
    """One input's one-off scrape of a metric and day (snapshot mode; one file per input)."""
    return f"{metric_partition(metric, cluster, day, METRICS_SNAPSHOTS)}/{input_key}.parquet"


def metric_rollup(metric: str, cluster: str, day: date | str) -> str:
    """Per series and 5 minutes: min/mean/max/count of one metric, cluster and day."""
    return f"{metric_partition(metric, cluster, day, METRICS_5M)}/rollup.parquet"


def metric_histogram(metric: str, cluster: str, day: date | str) -> str:
    """The fixed-bin histogram of one metric's day over all devices."""
    return f"{metric_partition(metric, cluster, day, METRICS_HIST)}/hist.parquet"


def metric_histograms(metric: str, cluster: str) -> str:
    """The folder of one metric's daily histograms of one cluster."""
    return f"{METRICS_HIST}/metric={metric}/cluster={cluster}"


def metric_snapshots(metric: str, cluster: str) -> str:
    """The folder of one metric's one-off snapshots of one cluster."""
    return f"{METRICS_SNAPSHOTS}/metric={metric}/cluster={cluster}"


QUARANTINE_METRICS = "quarantine/metrics"


def quarantine_metrics(cluster: str, day: date | str | None, name: str) -> str:
    return f"{QUARANTINE_METRICS}/cluster={cluster}/date={_day(day)}/{name}"


def validation_metrics(cluster: str, day: date | str | None, name: str) -> str:
    return f"validation/metrics/cluster={cluster}/date={_day(day)}/{name}"


# --- checkpoints and logs --------------------------------------------------------------------------


def checkpoint_events(cluster: str, day: date | str) -> str:
    """Checkpoint events of one cluster's training campaigns on ``day``."""
    return f"checkpoints/cluster={cluster}/date={_day(day)}/events.parquet"


def job_checkpoints(cluster: str, job_id: str) -> str:
    """The default folder of a job's checkpoints (when neither its record nor its cluster names one)."""
    return f"checkpoints/cluster={cluster}/job={job_id}"


def job_logs(cluster: str, job_id: str) -> str:
    """The default folder of a job's runtime logs."""
    return f"logs/cluster={cluster}/job={job_id}"


# --- diagnosis -------------------------------------------------------------------------------------

DIAGNOSES = "diagnoses"
DIAGNOSES_FILE = "diagnoses.parquet"


def diagnoses_cluster(cluster: str) -> str:
    return f"{DIAGNOSES}/cluster={cluster}"


def diagnoses_partition(cluster: str, day: date | str) -> str:
    """Diagnosis records of one cluster's jobs submitted on ``day``."""
    return f"{diagnoses_cluster(cluster)}/date={_day(day)}/{DIAGNOSES_FILE}"


def diagnosis_queue(cluster: str) -> str:
    """Failed jobs left over by a capped run, waiting for the next one."""
    return f"diagnosis/queue/cluster={cluster}/pending.json"


def diagnosis_message(cluster: str, day: date | str, job_id: str) -> str:
    """The hand-over of one diagnosis to recovery."""
    return f"diagnosis/messages/cluster={cluster}/date={_day(day)}/{safe_name(job_id)}.json"


DIAGNOSIS_CASES = "diagnosis/cases"


def diagnosis_cases(cluster: str) -> str:
    """The vector store's past failures of one cluster."""
    return f"{DIAGNOSIS_CASES}/cluster={cluster}/cases.parquet"


LEARNED_RULES = "diagnosis/rules/learned.yaml"


def learned_rules_version(version: int) -> str:
    """A past version of the learned diagnosis rules (kept for audit and rollback)."""
    return f"diagnosis/rules/history/learned-v{version:04d}.yaml"


DEFERRED_CASES = "diagnosis/cases_deferred"


def deferred_case(cluster: str, job_id: str) -> str:
    """A past failure waiting to be added to the case store."""
    return f"{DEFERRED_CASES}/cluster={cluster}/{safe_name(job_id)}.json"


TRIAGE_QUESTIONS = "diagnosis/triage/questions"


def triage_question(template_key: str) -> str:
    """One triage question put to an operator, keyed by the template of its decisive log line (asked once)."""
    return f"{TRIAGE_QUESTIONS}/{safe_name(template_key)}.json"


def learned_filter_rules(family: str) -> str:
    """Filter rules learned for one log family."""
    return f"diagnosis/filter_rules/family={family}"


# --- detection -------------------------------------------------------------------------------------


def detection_episode(cluster: str, job_id: str, kind: str) -> str:
    """The current episode of one hang or fail-slow suspect."""
    return f"detection/episodes/cluster={cluster}/job={safe_name(job_id)}/{kind}.json"


def detection_evidence_log(cluster: str, job_id: str, kind: str, episode: str) -> str:
    """The evidence log of one episode, relative to the log root (where diagnosis reads logs)."""
    return f"detect/cluster={cluster}/job={safe_name(job_id)}/{kind}-{episode}.log"


# --- recovery --------------------------------------------------------------------------------------


def recovery_job(cluster: str, job_id: str) -> str:
    """The folder of one job's recovery action logs (names are checked by the caller)."""
    return f"recovery/cluster={cluster}/job={job_id}"


def recovery_node(cluster: str, node: str) -> str:
    """The folder of one node's validation action logs (names are checked by the caller)."""
    return f"recovery/cluster={cluster}/node={node}"


def simulated_backend_state(cluster: str) -> str:
    """The simulated cluster's node and job state."""
    return f"recovery/simulated/cluster={cluster}/state.json"


def recovery_cluster(cluster: str) -> str:
    """The folder of every recovery action log of one cluster (``recovery_job`` folders)."""
    return f"recovery/cluster={cluster}"


def lemon_suggestions(cluster: str) -> str:
    """The folder of one cluster's nightly lemon-node suggestions (``lemon_suggestion``, one per day)."""
    return f"recovery/lemon/cluster={cluster}"


def lemon_suggestion(cluster: str, day: date | str) -> str:
    """The nightly lemon-node suggestion of one cluster as of ``day``: the worst nodes, and what was cordoned."""
    return f"{lemon_suggestions(cluster)}/date={_day(day)}/suggestion.json"


# --- notifications ---------------------------------------------------------------------------------

NOTIFY_QUEUE = "notify/queue"
NOTIFY_LEDGER = "notify/ledger"


def notify_queued(cluster: str, day: date | str | None, message_id: str) -> str:
    """One message waiting to go out (owner digest, page, late notice), with its last failure."""
    return f"{NOTIFY_QUEUE}/cluster={cluster}/date={_day(day)}/{safe_name(message_id)}.json"


def notify_ledger_day(cluster: str, day: date | str | None) -> str:
    """The folder of the ledger entries of one cluster's messages about one day."""
    return f"{NOTIFY_LEDGER}/cluster={cluster}/date={_day(day)}"


def notify_ledger(cluster: str, day: date | str | None, message_id: str) -> str:
    """The delivery record of one message: its attempts, and when and where it was sent."""
    return f"{notify_ledger_day(cluster, day)}/{safe_name(message_id)}.json"


# --- evaluation ------------------------------------------------------------------------------------

EVAL_PRIORS = "eval/priors/priors.json"
EVAL_RUNS = "eval/runs"
"""Every evaluation's folder, by model (``eval_run``)."""


def eval_run(model_id: str, run: str) -> str:
    """The folder of one evaluation (checkpoint × suite)."""
    return f"{EVAL_RUNS}/{model_id}/{run}"


def eval_measurements(model_id: str, run: str) -> str:
    """Per-sample timings measured by one evaluation, for the learned priors."""
    return f"eval/priors/measurements/{model_id}/{run}.json"


# --- reports ---------------------------------------------------------------------------------------

REPORTS = "reports"


def report(cluster: str, period: str, root: str = REPORTS) -> str:
    """The folder of one published report (``root`` is ``""`` when publishing to a plain folder)."""
    return "/".join(p for p in (root, f"cluster={cluster}", f"period={period}") if p)
