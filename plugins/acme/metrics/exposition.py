"""dcgm-exporter scrape files (Prometheus text exposition format) into canonical samples.

A file is what ``curl :9400/metrics`` saves, or several such pages concatenated. The time of a
sample, in order of precedence:

1. the sample's own timestamp (``name{...} value 1688169615000``: milliseconds, as the
   Prometheus text format defines; in OpenMetrics mode, seconds);
2. ``scrape_time_ms`` when the caller gives one (``--scrape-time``): the operator knows when;
3. the last ``# scrape_time <time>`` comment before it, which this project writes in front of
   each page when scrapes are concatenated (``<time>``: RFC 3339 such as
   ``2023-07-01T00:00:15Z``, or epoch seconds);
4. the time in the file name: ``...20230701T000015Z...`` (UTC) or a 10-digit epoch in seconds
   (``dcgm-1688169615.prom``);
5. ``default_time_ms``: for a file, its modification time (when ``curl`` wrote it).

How many samples took their time from each is counted in ``time_sources`` (the ingest summary
shows it). A sample with no time from any of these (text without a file) is rejected.

A sample's series is (node, gpu, uuid, gpu_instance), from the labels the catalog maps (see
:func:`series_key`); a sample without a node label takes ``default_node`` (``--node``, for a
scrape taken at one host's exporter) or is rejected saying so.

What is parsed: ``# HELP`` (with ``\\\\`` and ``\\n`` escapes) and ``# TYPE`` lines, other
comments ignored; label values with ``\\"``, ``\\\\`` and ``\\n`` escapes; values as floats
including ``NaN``, ``+Inf``, ``-Inf`` (kept: validation quarantines them with a reason). A
malformed line (bad metric name, unterminated label set, unparseable value or timestamp, invalid
TYPE) becomes a reject with its line number and the reason; parsing never stops on one. Samples of metrics that are not in the catalog are counted per name and skipped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acme.errors import InputError
from acme.timestamps import parse_scrape_time

if TYPE_CHECKING:
    import pandas as pd

    from acme.metrics.catalog import Catalog, MetricSpec
    from acme.metrics.storage import Samples

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})?[ \t]+(\S+)(?:[ \t]+(\S+))?[ \t]*$")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(,|$)')
_TYPES = {
    "counter",
    "gauge",
    "histogram",
    "summary",
    "untyped",
    "unknown",
    "info",
    "stateset",
    "gaugehistogram",
}
_FILE_TIME = re.compile(r"(\d{8}T\d{6}Z)|(?<!\d)(\d{10})(?!\d)")
_VALUES = {"nan": float("nan"), "+inf": float("inf"), "inf": float("inf"), "-inf": float("-inf")}
_FLUSH_SAMPLES = 1 << 20  # a metric's samples move from Python lists into arrays this many at a time


@dataclass
class ExpositionResult:
    samples: dict[str, Samples]  # canonical metric name -> samples (input order)
    rejects: pd.DataFrame  # source_file, source_line, reason, record
    lines: int
    help: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    skipped_metrics: dict[str, int] = field(default_factory=dict)  # not in the catalog: samples per name
    scrapes: int = 0
    time_sources: dict[str, int] = field(default_factory=dict)  # where samples' times came from
    samples_in: int = 0  # sample lines read (catalog or not, good or rejected)
    # samples added into another of the same node and time (an alias with ``sum_over``: the PSUs
    # of a node), per exporter metric name: each is part of a stored sample, not one of its own
    summed: dict[str, int] = field(default_factory=dict)


def unescape(text: str, quote: bool = True) -> str:
    """Undo the exposition format's escapes (``\\\\``, ``\\n``, and ``\\"`` in label values)."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "n":
                out.append("\n")
            elif nxt == "\\" or (quote and nxt == '"'):
                out.append(nxt)
            else:
                out.append("\\" + nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_labels(text: str) -> dict[str, str] | None:
    """Label set ``a="1",b="x\\"y"`` (trailing comma allowed) as a dict; None when malformed."""
    labels: dict[str, str] = {}
    position, text = 0, text.strip()
    while position < len(text):
        match = _LABEL.match(text, position)
        if not match:
            return None
        labels[match.group(1)] = unescape(match.group(2))
        position = match.end()
        if match.group(3) == "" and position < len(text):
            return None
    return labels


def parse_value(text: str) -> float | None:
    special = _VALUES.get(text.lower())
    if special is not None:
        return special
    try:
        return float(text)
    except ValueError:
        return None


def time_from_file_name(name: str) -> int | None:
    """Epoch ms from ``YYYYMMDDTHHMMSSZ`` or a 10-digit epoch in a file name."""
    match = _FILE_TIME.search(Path(name).name)
    if not match:
        return None
    if match.group(1):
        moment = datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        return round(moment.timestamp() * 1000)
    return int(match.group(2)) * 1000


@dataclass(frozen=True)
class TimeOptions:
    """Where samples without their own timestamp get a time, and the node of node-less samples."""

    scrape_time_ms: int | None = None  # --scrape-time
    default_time_ms: int | None = None  # the last resort (a file's mtime)
    default_source: str = "file mtime"
    default_node: str | None = None  # --node


def parse_exposition_file(
    path: str | Path,
    catalog: Catalog,
    *,
    source_file: str | None = None,
    default_time_ms: int | None = None,
    scrape_time_ms: int | None = None,
    default_node: str | None = None,
    openmetrics: bool | None = None,
    chunk_bytes: int | None = None,
    max_line_bytes: int | None = None,
) -> ExpositionResult:
    """Parse an exposition file read ``chunk_bytes`` at a time (undecodable bytes
    replaced): the same result without the text in memory, only the samples (20 bytes each).
    A line above ``max_line_bytes`` (default ``acme.text_input.MAX_LINE_BYTES``) is rejected
    with its length, only its head read into memory. Without ``default_time_ms`` the file's
    modification time is the last-resort time of its samples."""
    import contextlib
    import os

    from acme import text_input

    name = source_file or str(path)
    options = TimeOptions(scrape_time_ms, default_time_ms, "default time", default_node)
    if default_time_ms is None:
        with contextlib.suppress(OSError):  # open() below reports it
            options = TimeOptions(
                scrape_time_ms, round(os.stat(path).st_mtime * 1000), "file mtime", default_node
            )
    chunk_bytes = chunk_bytes or text_input.CHUNK_BYTES
    max_line_bytes = max_line_bytes or text_input.MAX_LINE_BYTES
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc}") from exc
    with handle:
        if openmetrics is None:
            openmetrics = _ends_with_eof(handle)
            handle.seek(0)
        raw_lines = text_input.iter_raw_lines(handle, chunk_bytes=chunk_bytes, max_line_bytes=max_line_bytes)
        numbered = (  # a CRLF line end loses its \r, as when the file was read as text before
            (
                line.number,
                line.data.removesuffix(b"\r").decode("utf-8", errors="replace"),
                line.length * line.too_long,
            )
            for line in raw_lines
        )
        return _parse_lines(numbered, catalog, name, options, openmetrics, max_line_bytes)


def _ends_with_eof(handle: Any, block: int = 65536) -> bool:
    """Whether the file's text, trailing whitespace removed, ends with ``# EOF`` (OpenMetrics)."""
    end = handle.seek(0, 2)
    tail = ""
    while end > 0:
        start = max(0, end - block)
        handle.seek(start)
        tail = handle.read(end - start).decode("utf-8", errors="replace") + tail
        if tail.rstrip() or start == 0:
            break
        end = start
    return tail.rstrip().endswith("# EOF")


def _parse_lines(
    lines: Iterator[tuple[int, str, int]],
    catalog: Catalog,
    source_file: str,
    options: TimeOptions,
    openmetrics: bool,
    max_line_bytes: int,
) -> ExpositionResult:
    """``lines``: (line number, text without its \\n, byte length if above the limit else 0)."""
    import numpy as np

    from acme.metrics.storage import Samples, series_frame
    from acme.rejects import rejects_frame
    from acme.text_input import long_line_reason

    ts_factor = 1000 if openmetrics else 1
    wanted = catalog.by_exporter_name()
    aliases = catalog.exporter_aliases()  # other exporters' names (summed or selected series)
    sums: dict[tuple[str, int, int], float] = {}  # (metric, series, ms) -> the node's total so far
    summed: Counter[str] = Counter()
    file_time = time_from_file_name(source_file)
    flag_time, default_time, default_node = (
        options.scrape_time_ms,
        options.default_time_ms,
        options.default_node,
    )
    # the time of a sample without its own: the flag, else the last comment, else the first of these
    candidates = [
        (flag_time, "--scrape-time"),
        (file_time, "file name"),
        (default_time, options.default_source),
    ]
    fallback = next((c for c in candidates if c[0] is not None), (None, ""))
    time_counts: dict[str, int] = {}
    samples_in = 0
    scrape_time: int | None = None
    scrapes = 0
    series: dict[str, dict[tuple, int]] = {}
    series_rows: dict[str, list[tuple]] = {}
    columns: dict[str, tuple[list[int], list[int], list[float]]] = {}
    arrays: dict[str, list[tuple[Any, Any, Any]]] = {}  # samples already moved out of the lists
    rejects: list[dict[str, Any]] = []
    helps: dict[str, str] = {}
    types: dict[str, str] = {}
    skipped: Counter[str] = Counter()
    count = 0

    def reject(number: int, reason: str, line: str) -> None:
        rejects.append(
            {"source_file": source_file, "source_line": number, "reason": reason, "record": line[:500]}
        )

    def flush(metric: str) -> None:
        ids, stamps, values = columns[metric]
        arrays.setdefault(metric, []).append(
            (
                np.array(ids, dtype=np.int32),
                np.array(stamps, dtype=np.int64),
                np.array(values, dtype=np.float64),
            )
        )
        ids.clear()
        stamps.clear()
        values.clear()

    for number, raw, too_long in lines:
        count = number
        if too_long:
            reject(number, long_line_reason(too_long, len(raw.encode()), max_line_bytes), raw)
            continue
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line[1:].strip().split(None, 2)
            if not parts:
                continue
            keyword = parts[0]
            if keyword == "scrape_time":
                moment = parse_scrape_time(parts[1]) if len(parts) > 1 else None
                if moment is None:
                    reject(number, "scrape_time is neither RFC 3339 nor epoch seconds", raw)
                else:
                    scrape_time = moment
                    scrapes += 1
            elif keyword == "HELP":
                if len(parts) < 2 or not re.fullmatch(_NAME, parts[1]):
                    reject(number, "HELP line without a valid metric name", raw)
                else:
                    helps[parts[1]] = unescape(parts[2] if len(parts) > 2 else "", quote=False)
            elif keyword == "TYPE":
                if len(parts) < 3 or not re.fullmatch(_NAME, parts[1]) or parts[2].strip() not in _TYPES:
                    reject(
                        number, "TYPE line needs a metric name and one of " + ", ".join(sorted(_TYPES)), raw
                    )
                else:
                    types[parts[1]] = parts[2].strip()
            continue
        match = _SAMPLE.match(line)
        if not match:
            reject(number, _why_malformed(line), raw)
            continue
        samples_in += 1
        name, label_text, value_text, ts_text = match.groups()
        labels = parse_labels(label_text) if label_text else {}
        if labels is None:
            reject(number, 'malformed label set (expected name="value" pairs separated by commas)', raw)
            continue
        value = parse_value(value_text)
        if value is None:
            reject(number, f"value {value_text[:40]!r} is not a number", raw)
            continue
        if ts_text is not None:
            try:
                ts = round(float(ts_text) * ts_factor)
            except ValueError:
                reject(number, f"timestamp {ts_text[:40]!r} is not a number", raw)
                continue
            source = "sample timestamp"
        elif scrape_time is not None and flag_time is None:
            ts, source = scrape_time, "# scrape_time comment"
        else:
            fallback_ts, source = fallback
            if fallback_ts is None:
                reject(
                    number,
                    "no timestamp: none on the sample, no --scrape-time, no '# scrape_time' and none "
                    "in the file name",
                    raw,
                )
                continue
            ts = fallback_ts
        spec = wanted.get(name)
        alias = None
        if spec is None:
            if name not in aliases:
                skipped[name] += 1
                continue
            spec, alias = aliases[name]
            if not alias.matches(labels):  # e.g. a Redfish PowerControl of a subsystem, not the system
                skipped[f"{name} (series that are not the node's {spec.name})"] += 1
                continue
        key = series_key(labels, spec, default_node)
        if key is None:
            reject(number, no_node_reason(name, spec), raw)
            continue
        metric_series = series.setdefault(spec.name, {})
        identity = (key[0], key[1], key[2], key[4])
        sid = metric_series.get(identity)
        if sid is None:
            sid = metric_series[identity] = len(metric_series)
            series_rows.setdefault(spec.name, []).append(key)
        if alias is not None and alias.sum_over:  # a part (a PSU) of the node's value at that time
            part = (spec.name, sid, ts)
            if part in sums:
                sums[part] += value * spec.scale
                summed[name] += 1
                continue
            sums[part] = value * spec.scale
            time_counts[source] = time_counts.get(source, 0) + 1
            continue
        time_counts[source] = time_counts.get(source, 0) + 1
        ids, stamps, values = columns.setdefault(spec.name, ([], [], []))
        ids.append(sid)
        stamps.append(ts)
        values.append(value * spec.scale)
        if len(ids) >= _FLUSH_SAMPLES:
            flush(spec.name)

    for (metric, sid, ts), total in sums.items():  # the summed samples, in the order first seen
        ids, stamps, values = columns.setdefault(metric, ([], [], []))
        ids.append(sid)
        stamps.append(ts)
        values.append(total)
    samples = {}
    for metric in columns:
        flush(metric)
        chunks = arrays.pop(metric)
        merged_ids, merged_ms, merged_values = (
            np.concatenate([chunk[i] for chunk in chunks]) for i in range(3)
        )
        samples[metric] = Samples(
            metric, series_frame(series_rows[metric]), merged_ids, merged_ms, merged_values
        )
    return ExpositionResult(
        samples, rejects_frame(rejects), count, helps, types, dict(skipped), scrapes, time_counts, samples_in,
        dict(summed),
    )  # fmt: skip


NO_NODE = "no label gives the node of"


def no_node_reason(name: str, spec: MetricSpec) -> str:
    return (
        f"{NO_NODE} {name} (looked for {', '.join(spec.labels['node'])}; "
        "for a scrape of one host give its name with --node)"
    )


def series_key(labels: dict[str, str], spec: MetricSpec, default_node: str | None = None) -> tuple | None:
    """(node, gpu, uuid, model, instance) of a sample from its labels via the catalog's mapping;
    None when no label gives the node and there is no ``default_node``."""

    def first(kind: str) -> str | None:
        for label in spec.labels.get(kind, ()):
            if labels.get(label):
                return labels[label]
        return None

    node = first("node") or default_node
    if node is None:
        return None
    if ":" in node and node.rsplit(":", 1)[1].isdigit():  # instance="host:9400"
        node = node.rsplit(":", 1)[0]
    gpu_text = first("gpu") if spec.per_gpu else None
    gpu = int(gpu_text) if gpu_text is not None and gpu_text.isdigit() else None
    if not spec.per_gpu:
        return (node, None, None, None, None)
    parts = [f"{label}={labels[label]}" for label in spec.labels.get("gpu_instance", ()) if labels.get(label)]
    return (node, gpu, first("uuid"), first("model"), "/".join(parts) if parts else None)


def _why_malformed(line: str) -> str:
    if not re.match(_NAME, line):
        return "line does not start with a metric name"
    if "{" in line and "}" not in line:
        return "unterminated label set (no closing '}')"
    rest = re.sub(rf"^{_NAME}(\{{.*\}})?", "", line).strip()
    if not rest:
        return "sample has no value"
    return f"cannot parse {rest[:40]!r} as 'value [timestamp]'"


def read_exposition_files(
    paths: list[Path],
    catalog: Catalog,
    default_time_ms: int | None = None,
    scrape_time_ms: int | None = None,
    default_node: str | None = None,
):
    """Parse several scrape files (in name order) into one result per file, each streamed."""
    return [
        parse_exposition_file(
            path,
            catalog,
            source_file=str(path),
            default_time_ms=default_time_ms,
            scrape_time_ms=scrape_time_ms,
            default_node=default_node,
        )  # fmt: skip
        for path in sorted(paths)
    ]
