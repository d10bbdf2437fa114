"""Command line: thin wrappers that call the same functions as the Airflow tasks.

Each command prints one JSON object on stdout; on unusable input it prints a one-line
error naming the input and the problem on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from datetime import date

from acme.errors import AcmeError
from acme.jobs.formats import FORMAT_NAMES
from acme.metrics.formats import FORMAT_NAMES as METRIC_FORMATS


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a day (YYYY-MM-DD)") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m acme", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_ingest_jobs(commands)

    summary = commands.add_parser("lake-summary", help="what the lake holds: jobs per partition, quarantine")
    summary.add_argument("--lake", help="lake root (default: ACME_LAKE_URI or ./lake)")
    summary.add_argument("--json", action="store_true", help="print JSON instead of a table")
    summary.set_defaults(handler=_lake_summary)

    notify = commands.add_parser(
        "notify-status",
        help="where the messages went: sent (from the ledger) and waiting in the lake's queue",
    )
    notify.add_argument("--lake", help="lake root (default: ACME_LAKE_URI or ./lake)")
    notify.add_argument("--json", action="store_true", help="print JSON instead of lines")
    notify.set_defaults(handler=_notify_status)
    release = commands.add_parser(
        "notify-release",
        help="resend an in-doubt message (its sender died between sending and recording): you checked it "
        "did not arrive",
    )
    release.add_argument("message_id", help="the id the delivery log and notify-status name")
    release.add_argument("--by", required=True, help="who checked (recorded in the ledger)")
    release.add_argument("--lake", help="lake root (default: ACME_LAKE_URI or ./lake)")
    release.set_defaults(handler=_notify_release)

    _add_synth_trace(commands)

    metrics = commands.add_parser(
        "ingest-metrics", help="parse, validate, store and roll up one day of telemetry"
    )
    metrics.add_argument("--format", required=True, choices=list(METRIC_FORMATS))
    metrics.add_argument("--cluster", required=True)
    metrics.add_argument(
        "--input", required=True,
        help="scrape file or folder, saved Prometheus API answer, folder of wide CSVs, or Prometheus base URL",
    )  # fmt: skip
    metrics.add_argument("--lake", required=True)
    metrics.add_argument("--day", type=_day, help="the UTC day (required for a daily prometheus ingest)")
    metrics.add_argument("--step", type=int, default=15, help="scrape step in seconds")
    metrics.add_argument(
        "--snapshot", action="store_true",
        help="one-off scrapes or instant queries: stored as snapshots, no daily coverage check",
    )  # fmt: skip
    metrics.add_argument(
        "--scrape-time",
        help="when samples without a timestamp were scraped (RFC 3339 or epoch s); the time of a "
        "prometheus snapshot",
    )
    metrics.add_argument("--node", help="the host of samples without a node label (a scrape of one host)")
    metrics.add_argument(
        "--metric", help="the catalog metric of saved-answer series without __name__ (prometheus-json)"
    )
    metrics.set_defaults(handler=_ingest_metrics)

    _add_synth_metrics(commands)
    _add_compress(commands)
    _add_diagnose(commands)
    _add_locate_faults(commands)
    _add_plan_eval(commands)
    _add_report(commands)
    _add_detect_hangs(commands)
    _add_synth_campaigns(commands)
    _add_detect_slowdowns(commands)
    _add_lemon_nodes(commands)
    return parser


def _add_ingest_jobs(commands: argparse._SubParsersAction) -> None:
    ingest = commands.add_parser("ingest-jobs", help="parse, validate and publish one job-trace input")
    ingest.add_argument("--format", required=True, choices=list(FORMAT_NAMES))
    ingest.add_argument("--cluster", required=True)
    where = ingest.add_mutually_exclusive_group(required=True)
    where.add_argument("--input", help="local path or URL (s3://…) of the input")
    where.add_argument(
        "--command",
        help="live sacct: the command to run for --day, e.g. 'ssh login1 sacct' (clusters.yaml jobs.command)",
    )
    ingest.add_argument("--lake", required=True, help="lake root: a folder or s3://bucket/prefix")
    ingest.add_argument("--day", type=_day, help="only jobs submitted on this UTC day (AcmeTrace)")
    ingest.add_argument("--fields", help="comma-separated sacct fields of a header-less input")
    ingest.add_argument(
        "--timezone",
        default="UTC",
        help="IANA zone of sacct's local times, e.g. Europe/Amsterdam (default UTC)",
    )
    ingest.add_argument(
        "--delimiter",
        default="|",
        type=_delimiter,
        help="sacct --delimiter of the export: any string; \\t for a tab (default |)",
    )
    ingest.add_argument(
        "--max-quarantine-share", type=float, help="fail above this share of bad rows (default 0.01)"
    )
    ingest.set_defaults(handler=_ingest_jobs)


def _add_synth_trace(commands: argparse._SubParsersAction) -> None:
    synth = commands.add_parser("synth-trace", help="write a synthetic AcmeTrace CSV calibrated to the paper")
    synth.add_argument("--cluster", required=True, choices=["seren", "kalos"])
    synth.add_argument("--start", required=True, type=_day)
    synth.add_argument("--days", required=True, type=int)
    synth.add_argument("--scale", type=float, default=1.0, help="multiplier of the real daily job count")
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument(
        "--per-day", action="store_true", help="-o is a folder: one YYYY-MM-DD.csv per UTC day"
    )
    synth.add_argument("-o", "--output", required=True)
    synth.set_defaults(handler=_synth_trace)


def _add_synth_metrics(commands: argparse._SubParsersAction) -> None:
    synth_metrics = commands.add_parser("synth-metrics", help="write synthetic DCGM/node/IPMI telemetry")
    synth_metrics.add_argument("--cluster", required=True, choices=["seren", "kalos"])
    synth_metrics.add_argument("--nodes", required=True, type=int)
    synth_metrics.add_argument("--start", required=True, type=_day)
    synth_metrics.add_argument("--days", type=int, default=1)
    synth_metrics.add_argument(
        "--format", required=True, choices=["prometheus-openmetrics", "exporter-text", "acmetrace-csv"]
    )
    synth_metrics.add_argument("--trace", help="AcmeTrace job CSV: GPUs are busy while jobs run")
    synth_metrics.add_argument("--seed", type=int, default=0)
    synth_metrics.add_argument("-o", "--output", required=True)
    synth_metrics.set_defaults(handler=_synth_metrics)


def _add_compress(commands: argparse._SubParsersAction) -> None:
    compress = commands.add_parser(
        "compress", help="compress a training log: drop routine lines, keep errors"
    )
    compress.add_argument("log")
    compress.add_argument("-o", "--output", required=True)
    compress.set_defaults(handler=_compress)


def _add_diagnose(commands: argparse._SubParsersAction) -> None:
    diagnose = commands.add_parser(
        "diagnose", help="root cause of a failed job from its log (rules, then past cases with --lake)"
    )
    diagnose.add_argument("log")
    diagnose.add_argument("--job", help="job metadata as JSON (or a JSON file)")
    diagnose.add_argument(
        "--lake", help="also use the lake's learned rules and similar past cases (read only)"
    )
    diagnose.add_argument(
        "--baseline-log",
        help="the log of the last good run of the job's family (default with --lake and a job id: looked up)",
    )
    diagnose.set_defaults(handler=_diagnose)


def _add_locate_faults(commands: argparse._SubParsersAction) -> None:
    locate = commands.add_parser(
        "locate-faults", help="two-round all-gather fault localization on a simulated cluster"
    )
    locate.add_argument("--nodes", required=True, type=int, help="number of nodes in the job")
    locate.add_argument("--faulty", default="", help="faulty nodes: indexes or names, comma-separated")
    locate.add_argument("--stragglers", default="", help="slow nodes: indexes or names, comma-separated")
    locate.add_argument("--seed", type=int, default=0)
    locate.set_defaults(handler=_locate_faults)


def _add_plan_eval(commands: argparse._SubParsersAction) -> None:
    plan = commands.add_parser(
        "plan-eval", help="plan an evaluation suite's trials; simulate against baselines"
    )
    plan.add_argument(
        "--suite", help="CSV: dataset,n_samples,metric_kind[,gpu_s_per_sample,cpu_s_per_sample]"
    )
    plan.add_argument("--nodes", required=True, type=int)
    plan.add_argument("--gpus-per-node", type=int, default=8)
    plan.add_argument("--model-size", default="7B", help="parameters, e.g. 7B, 20B, 70B")
    plan.add_argument("--simulate", action="store_true", help="simulate the plan and the baselines")
    plan.add_argument(
        "--prior-error", type=float, default=0.0, help="true times differ from priors by up to ±X"
    )
    plan.add_argument("--seed", type=int, default=0)
    plan.add_argument(
        "--priors",
        help="plan from measured runtime priors: a priors.json, or 'lake' for the lake's eval/priors/priors.json",
    )
    plan.set_defaults(handler=_plan_eval)


def _add_report(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser(
        "report", help="characterization report (the paper's figures and tables) of a cluster and period"
    )
    report.add_argument("--lake", help="lake root (default: ACME_LAKE_URI or ./lake)")
    report.add_argument("--cluster", required=True)
    report.add_argument("--period", required=True, help="a month YYYY-MM, a UTC day YYYY-MM-DD, or all")
    report.add_argument(
        "--definition",
        choices=["run", "paper"],
        help="run time: end-start (run) or the source's duration (paper)",
    )
    report.add_argument("-o", "--output", help="local folder for the report (default: reports/ in the lake)")
    report.set_defaults(handler=_report)


def _add_detect_hangs(commands: argparse._SubParsersAction) -> None:
    detect = commands.add_parser(
        "detect-hangs", help="hung and fail-slow running GPU jobs from recent telemetry (JSON of suspects)"
    )
    detect.add_argument("--lake", help="lake root (default: ACME_LAKE_URI or ./lake)")
    detect.add_argument("--cluster", action="append", help="a configured cluster (repeatable; default all)")
    detect.add_argument("--at", help="end of the window, ISO 8601 with a time zone (default now)")
    detect.add_argument(
        "--window", type=float, help="minutes of telemetry to read (default: what the rules need, 16)"
    )
    detect.set_defaults(handler=_detect_hangs)


def _add_synth_campaigns(commands: argparse._SubParsersAction) -> None:
    campaigns = commands.add_parser(
        "synth-campaigns",
        help="publish the synthesized 104B/123B pretraining campaigns (ETTR demo) into a lake",
    )
    campaigns.add_argument("--lake", help="lake root (default: ACME_LAKE_URI or ./lake)")
    campaigns.add_argument("--cluster", default="seren")
    campaigns.add_argument("--seed", type=int, default=0)
    campaigns.set_defaults(handler=_synth_campaigns)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        summary = args.handler(args)
    except AcmeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if summary is not None:
        print(json.dumps(summary, default=str))
    return 0


def _delimiter(text: str) -> str:
    value = text.replace("\\t", "\t")
    if not value:
        raise argparse.ArgumentTypeError("the delimiter must not be empty")
    return value


def _ingest_jobs(args: argparse.Namespace) -> dict:
    import shlex
    import tempfile

    from acme.errors import ConfigError
    from acme.jobs.formats import FORMATS
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import open_lake

    fields = tuple(f.strip() for f in args.fields.split(",") if f.strip()) if args.fields else None
    uri = args.input
    job_format = FORMATS[args.format]
    if args.command:
        if not job_format.live or args.day is None:
            live = ", ".join(f"--format {name}" for name, spec in FORMATS.items() if spec.live)
            raise ConfigError(f"--command (live export) needs {live} and --day")
        uri = f"{args.format}://" + "/".join(shlex.split(args.command))
    job_input = JobInput(
        cluster=args.cluster, format=args.format, uri=uri, day=args.day, fields=fields,
        timezone=args.timezone, delimiter="|" if args.command else args.delimiter,
    )  # fmt: skip
    lake = open_lake(args.lake)
    if args.command:
        data = job_format.load().live_export(job_input, shlex.split(args.command))
        with tempfile.NamedTemporaryFile("wb", suffix=job_format.raw_suffix) as handle:
            handle.write(data)
            handle.flush()
            return ingest_job_file(lake, job_input, handle.name, args.max_quarantine_share)
    with _local_copy(args.input) as local_path:
        return ingest_job_file(lake, job_input, local_path, args.max_quarantine_share)


def _notify_status(args: argparse.Namespace) -> dict | None:
    from acme.lake import open_lake
    from acme.notify.outbox import status

    found = status(open_lake(args.lake))
    if args.json:
        return found
    for what, count in found["sent"].items():
        print(f"  sent: {count} {what}")
    for what, count in found["waiting"].items():
        print(f"  waiting in the lake ({found['queue']}/): {count} {what}")
    if not found["sent"] and not found["waiting"]:
        print(f"  no messages (queue: {found['queue']}/)")
    return None


def _notify_release(args: argparse.Namespace) -> dict:
    from acme.errors import InputError
    from acme.lake import open_lake
    from acme.notify.outbox import queued, release_in_doubt

    lake = open_lake(args.lake)
    message = next((m for m in queued(lake) if m["id"] == args.message_id), None)
    if message is None:
        raise InputError(args.message_id, "no such message waits in the queue")
    return {"message_id": args.message_id, "released": release_in_doubt(lake, message, by=args.by)}


def _lake_summary(args: argparse.Namespace) -> dict | None:
    from acme.lake import open_lake, summarize_jobs
    from acme.metrics.summary import summarize_metrics

    lake = open_lake(args.lake)
    summary = {**summarize_jobs(lake), **summarize_metrics(lake)}
    if args.json:
        return summary
    print(f"lake: {summary['lake']}")
    print(f"{'cluster':<10} {'date':<12} {'jobs':>8}  path")
    for partition in summary["partitions"]:
        print(
            f"{partition['cluster']:<10} {partition['date']:<12} {partition['rows']:>8}  {partition['path']}"
        )
    for item in summary["quarantine"]:
        print(f"{item['cluster']:<10} {item['date']:<12} {item['rows']:>8}  {item['path']}  (quarantine)")
    print(
        f"total: {summary['jobs']} jobs in {len(summary['partitions'])} partitions, "
        f"{summary['quarantined']} rows quarantined"
    )
    _print_telemetry(summary)
    return None


def _print_telemetry(summary: dict) -> None:
    def days(pairs: list) -> str:
        return ", ".join(f"{cluster} {day}" for cluster, day in pairs)

    if summary["metric_partitions"]:
        print(
            f"telemetry: {summary['metric_samples']} samples in {summary['metric_partitions']} metric "
            f"partitions ({days(summary['metric_days'])}) under {summary['lake']}/metrics"
        )
    if summary["snapshot_files"]:
        print(
            f"snapshots: {summary['snapshot_samples']} samples in {summary['snapshot_files']} snapshot "
            f"files ({days(summary['snapshot_days'])}) under {summary['lake']}/metrics_snapshots"
        )
    if summary["metric_quarantined"]:
        print(f"telemetry quarantine: {summary['metric_quarantined']} samples under quarantine/metrics")


def _ingest_metrics(args: argparse.Namespace) -> dict:
    from acme.lake import open_lake
    from acme.metrics.ingest import ingest_metrics_file

    return ingest_metrics_file(
        open_lake(args.lake), args.format, args.cluster, args.input, args.day, step_s=args.step,
        snapshot=args.snapshot, scrape_time=args.scrape_time, node=args.node, metric=args.metric,
    )  # fmt: skip


def _synth_metrics(args: argparse.Namespace) -> dict:
    from acme.metrics.synth import write_synth_metrics

    return write_synth_metrics(
        args.cluster, args.nodes, args.start, args.days, args.format, args.output, seed=args.seed,
        trace_path=args.trace,
    )  # fmt: skip


def _compress(args: argparse.Namespace) -> dict:
    from acme.diagnosis.compress import compress_cli

    return compress_cli(args.log, args.output)


def _diagnose(args: argparse.Namespace) -> dict:
    from acme.diagnosis.diagnose_cli import diagnose_log_cli

    return diagnose_log_cli(args.log, args.job, args.lake, args.baseline_log)


def _locate_faults(args: argparse.Namespace) -> dict:
    from acme.recovery.localize import locate_faults_cli

    return locate_faults_cli(args.nodes, args.faulty, args.stragglers, args.seed)


def _plan_eval(args: argparse.Namespace) -> dict:
    from acme import settings
    from acme.evaluation import plan_eval_cli

    suite = args.suite or str(settings.project().include_dir / "eval" / "default_suite.csv")
    return plan_eval_cli(
        suite,
        args.nodes,
        args.gpus_per_node,
        args.model_size,
        args.simulate,
        args.prior_error,
        args.seed,
        priors_source=args.priors,
    )


def _report(args: argparse.Namespace) -> dict:
    from acme.lake import open_lake
    from acme.report.build import build_report

    return build_report(open_lake(args.lake), args.cluster, args.period, args.output, args.definition)


def _detect_hangs(args: argparse.Namespace) -> dict:
    from acme.detection.run import detect_hangs_cli

    return detect_hangs_cli(args.lake, args.cluster, args.at, args.window)


def _add_detect_slowdowns(commands: argparse._SubParsersAction) -> None:
    slow = commands.add_parser(
        "detect-slowdowns",
        help="slow periods of a training run from its log (Megatron, DeepSpeed, HF Trainer)",
    )
    slow.add_argument("--log", required=True, help="the training log (local path)")
    slow.add_argument("--format", choices=["megatron", "deepspeed", "hf-trainer", "greyhound"])
    slow.add_argument("--min-slowdown", type=float, default=0.10, help="smallest slowdown of interest (0.10)")
    slow.set_defaults(handler=_detect_slowdowns)


def _detect_slowdowns(args: argparse.Namespace) -> dict:
    from acme.detection.slowdown import slowdowns_of_log

    return slowdowns_of_log(args.log, args.format, args.min_slowdown)


def _synth_campaigns(args: argparse.Namespace) -> dict:
    from acme.lake import open_lake
    from acme.report.synth_campaigns import write_synth_campaigns

    return write_synth_campaigns(open_lake(args.lake), args.cluster, args.seed)


def _synth_trace(args: argparse.Namespace) -> dict:
    from acme.jobs.synth import write_synth_trace

    return write_synth_trace(
        args.cluster,
        args.start,
        args.days,
        args.output,
        scale=args.scale,
        seed=args.seed,
        per_day=args.per_day,
    )


@contextlib.contextmanager
def _local_copy(uri: str) -> Iterator[str]:
    """A local path for ``uri``: itself when local, else a downloaded temporary copy."""
    import os

    from acme.errors import InputError

    if "://" not in uri or uri.startswith("file://"):
        path = uri.removeprefix("file://")
        if not os.path.exists(path):
            raise InputError(uri, "no such file")
        yield path
        return
    import tempfile

    import fsspec

    with tempfile.NamedTemporaryFile(suffix=os.path.splitext(uri)[1]) as handle:
        try:
            fsspec.open(uri, "rb").fs.get_file(uri, handle.name)
        except (OSError, FileNotFoundError) as exc:
            raise InputError(uri, f"cannot fetch: {exc}") from exc
        yield handle.name


def _add_lemon_nodes(commands: argparse._SubParsersAction) -> None:
    lemon = commands.add_parser(
        "lemon-nodes",
        help="rank a cluster's nodes by their recent infrastructure failures (docs/lemon-nodes.md)",
    )
    lemon.add_argument("--cluster", required=True)
    lemon.add_argument("--lake", help="lake root (default: ACME_LAKE_URI or ./lake)")
    lemon.add_argument(
        "--day",
        type=_day,
        help="rank as of the end of this UTC day (default: the newest day with job records)",
    )
    lemon.add_argument("--top", type=int, default=20, help="nodes shown (default 20)")
    lemon.add_argument("--json", action="store_true", help="print JSON instead of a table")
    lemon.set_defaults(handler=_lemon_nodes)


def _lemon_nodes(args: argparse.Namespace) -> dict | None:
    from datetime import UTC, datetime

    from acme.lake import open_lake
    from acme.recovery.lemon_nightly import end_of_day, lemon_ranking, ranking_rows
    from acme.report.build import cluster_days

    lake = open_lake(args.lake)
    day = args.day or (cluster_days(lake, args.cluster) or [datetime.now(UTC).date()])[-1]
    ranking, evidence = lemon_ranking(lake, args.cluster, end_of_day(day))
    rows = ranking_rows(ranking, args.top)
    result = {"cluster": args.cluster, "day": day.isoformat(), "nodes_ranked": len(ranking), "read": evidence.read,
              "unattributed": evidence.unattributed, "ranking": rows}  # fmt: skip
    if args.json:
        return result
    print(f"lemon nodes of {args.cluster} as of {day} ({len(ranking)} nodes with failure events)")
    print(
        f"{'rank':>4}  {'node':<20} {'score':>8} {'events':>6} {'diag':>5} {'nfail':>5} {'local':>5} {'xid':>5} {'GPU-h':>9}"
    )
    for row in rows:
        print(
            f"{row['rank']:>4}  {row['node']:<20} {row['score']:>8.2f} {row['events']:>6} {row['diagnosis_events']:>5} "
            f"{row['node_fail_events']:>5} {row['localization_events']:>5} {row['telemetry_events']:>5} "
            f"{row['gpu_hours_lost']:>9.1f}"
        )
    return None
