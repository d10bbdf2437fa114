"""Prometheus ``/api/v1/query_range`` client: one UTC day of a catalog metric, as canonical samples.

Prometheus refuses a range query whose result would hold more than 11,000 points per series.
:func:`plan_windows` splits the day into windows of at most ``max_points_per_series`` points at
the step (a 15 s day has 5,760, so one window; a 5 s day has 17,280, so two), consecutive
windows starting one step after the previous one ends so no point is fetched twice.

When ``max_series_per_query`` is set, each window is also sharded by the metric's
``shard_label``: the series of the day are listed (``/api/v1/series``), their label values packed
greedily into groups of at most that many series, and each group queried with
``label=~"v1|v2|..."`` substituted for ``$shard`` in the catalog's PromQL.

Every answer is checked before it is used (:func:`check_answer`): ``status`` is ``success``, the
``resultType`` is the one asked for (``matrix`` for ``query_range``, ``vector`` for an instant
``query``, which snapshot mode uses), every series belongs to the query (its ``__name__``, when
present, is a metric named in the PromQL; its labels satisfy the query's matchers, shard
matchers included) and every point lies in the asked window. Otherwise
:class:`PrometheusQueryError` names the query and what came back: a server or proxy that answers
with the wrong series is not retried, since it would answer the same again.

Failures: connection errors, timeouts, HTTP 5xx and 429, and ``"status": "error"`` bodies are
retried with exponential backoff (``backoff_s × 2^attempt``, capped at ``max_backoff_s``) up to
``max_attempts`` attempts; then :class:`PrometheusQueryError` names the query, the window and the
last error. ``bad_data`` errors (HTTP 400: a malformed query) fail at once: retrying cannot help.

The client takes a ``requests.Session`` (tests pass their own) and a ``sleep`` function.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acme.errors import AcmeError

if TYPE_CHECKING:
    from acme.metrics.catalog import MetricSpec
    from acme.metrics.storage import Samples

PROMETHEUS_MAX_POINTS = 11_000
RETRY_STATUS = {429, 500, 502, 503, 504}


class PrometheusQueryError(AcmeError):
    """A query failed for good (after the allowed attempts, or at once for a malformed query)."""

    def __init__(self, query: str, window: tuple[float, float], step_s: float, problem: str, attempts: int):
        self.query, self.window, self.step_s, self.attempts = query, window, step_s, attempts
        start, end = (_iso(t) for t in window)
        super().__init__(
            f"Prometheus query {query!r} over [{start}, {end}] at step {step_s:g}s failed after "
            f"{attempts} attempt(s): {problem}"
        )


def _iso(epoch_s: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def plan_windows(
    start_s: float, end_s: float, step_s: float, max_points: int = PROMETHEUS_MAX_POINTS
) -> list[tuple[float, float]]:
    """Inclusive [start, end] windows covering [start, end) at ``step_s`` with <= max_points points each."""
    if step_s <= 0 or max_points < 1:
        raise ValueError("step and max_points must be positive")
    points = int((end_s - start_s) // step_s)  # points at start, start + step, ... < end
    if (end_s - start_s) % step_s:
        points += 1
    windows, first = [], 0
    while first < points:
        last = min(points, first + max_points) - 1
        windows.append((start_s + first * step_s, start_s + last * step_s))
        first = last + 1
    return windows


def shard_selectors(label: str, counts: dict[str, int], max_series: int) -> list[str]:
    """``label=~"a|b"`` matchers, each covering at most ``max_series`` series (a value never split)."""
    groups: list[list[str]] = []
    current: list[str] = []
    size = 0
    for value in sorted(counts):
        if current and size + counts[value] > max_series:
            groups.append(current)
            current, size = [], 0
        current.append(value)
        size += counts[value]
    if current:
        groups.append(current)
    return [f'{label}=~"{"|".join(_regex_escape(v) for v in group)}"' for group in groups]


def _regex_escape(value: str) -> str:
    escaped = re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", value)
    return escaped.replace("\\", "\\\\").replace('"', '\\"')  # inside a PromQL double-quoted string


def render_query(template: str, shard: str | None) -> str:
    """The catalog's PromQL with ``$shard`` replaced by matchers, or removed."""
    if shard:
        return template.replace("$shard", shard)
    return template.replace("{$shard}", "").replace(",$shard", "").replace("$shard", "")


@dataclass
class PrometheusClient:
    base_url: str
    session: Any = None  # requests.Session
    timeout_s: float = 60.0
    max_attempts: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    max_points_per_series: int = PROMETHEUS_MAX_POINTS
    max_series_per_query: int | None = None
    sleep: Callable[[float], None] = time.sleep
    requests_made: int = 0
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.session is None:
            import requests

            self.session = requests.Session()
        self.base_url = self.base_url.rstrip("/")

    # --- HTTP with retries ----------------------------------------------------------------
    def _get(self, path: str, params: dict, query: str, window: tuple[float, float], step_s: float) -> Any:
        import requests

        problem = "no attempt made"
        for attempt in range(1, self.max_attempts + 1):
            self.requests_made += 1
            try:
                response = self.session.get(f"{self.base_url}{path}", params=params, timeout=self.timeout_s)
            except (requests.Timeout, requests.ConnectionError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                body = _json(response)
                if response.status_code == 400 or (body and body.get("errorType") == "bad_data"):
                    detail = (body or {}).get("error") or response.text[:300]
                    raise PrometheusQueryError(
                        query, window, step_s, f"bad query (HTTP {response.status_code}): {detail}", attempt
                    )
                if response.status_code in RETRY_STATUS or response.status_code >= 500:
                    problem = (
                        f"HTTP {response.status_code}: {(body or {}).get('error') or response.text[:200]}"
                    )
                elif body is None:
                    problem = (
                        f"HTTP {response.status_code}: the response is not JSON: {response.text[:200]!r}"
                    )
                elif body.get("status") != "success":
                    problem = f"status {body.get('status')!r} ({body.get('errorType')}): {body.get('error')}"
                elif response.status_code != 200:
                    problem = f"HTTP {response.status_code}"
                else:
                    self.warnings.extend(body.get("warnings") or [])
                    return body.get("data")
            if attempt < self.max_attempts:
                self.sleep(min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))
        raise PrometheusQueryError(query, window, step_s, problem, self.max_attempts)

    # --- API ---------------------------------------------------------------------------------
    def query_range(self, query: str, start_s: float, end_s: float, step_s: float) -> list[dict]:
        """Matrix result of one inclusive window (no splitting), checked: ``[{metric, values}, ...]``."""
        params = {"query": query, "start": _num(start_s), "end": _num(end_s), "step": _num(step_s)}
        data = self._get("/api/v1/query_range", params, query, (start_s, end_s), step_s)
        problem = check_answer(data, query, "matrix", (start_s, end_s), step_s)
        if problem:
            raise PrometheusQueryError(query, (start_s, end_s), step_s, problem, 1)
        return data.get("result") or []

    def query_instant(self, query: str, time_s: float) -> list[dict]:
        """Instant-vector result at ``time_s`` (snapshot mode), checked: ``[{metric, value}, ...]``."""
        params = {"query": query, "time": _num(time_s)}
        data = self._get("/api/v1/query", params, query, (time_s, time_s), 0)
        problem = check_answer(data, query, "vector", (time_s, time_s), 0)
        if problem:
            raise PrometheusQueryError(query, (time_s, time_s), 0, problem, 1)
        return data.get("result") or []

    def series_counts(self, selector: str, label: str, start_s: float, end_s: float) -> dict[str, int]:
        """How many series each value of ``label`` has among those matching ``selector``."""
        params = {"match[]": selector, "start": _num(start_s), "end": _num(end_s)}
        data = self._get("/api/v1/series", params, selector, (start_s, end_s), 0)
        counts: dict[str, int] = {}
        for labels in data or []:
            value = labels.get(label)
            if value is not None:
                counts[value] = counts.get(value, 0) + 1
        return counts

    def fetch(self, spec: MetricSpec, start_s: float, end_s: float, step_s: float) -> list[dict]:
        """All series of ``spec`` over [start, end) at ``step_s``: split by points, sharded if set."""
        if not spec.promql:
            raise AcmeError(f"metric {spec.name} has no promql in the catalog")
        shards: list[str | None] = [None]
        if self.max_series_per_query and spec.shard_label:
            selector = _selector_of(spec)
            counts = self.series_counts(selector, spec.shard_label, start_s, end_s)
            if counts:
                shards = list(shard_selectors(spec.shard_label, counts, self.max_series_per_query))
        results = []
        for shard in shards:
            query = render_query(spec.promql, shard)
            for window in plan_windows(start_s, end_s, step_s, self.max_points_per_series):
                results.extend(self.query_range(query, window[0], window[1], step_s))
        return results


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![a-zA-Z0-9_:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![a-zA-Z0-9_:]|\s*\()")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
             "unless", "offset", "inf", "nan", "atan2", "topk", "bottomk"}  # fmt: skip


def query_names(query: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, keywords, labels and durations left out)."""
    text = re.sub(r"\{[^}]*\}", " ", _STRING.sub('""', query))
    text = re.sub(r"\[[^\]]*\]", " ", _GROUPING.sub(" ", text))
    return {name for name in _IDENT.findall(text) if name.lower() not in _KEYWORDS}


def query_matchers(query: str) -> list[tuple[str, str, str]]:
    """(label, operator, value) of every label matcher in the query (values unescaped)."""
    from acme.metrics.exposition import unescape

    matchers: list[tuple[str, str, str]] = []
    for block in re.findall(r"\{([^}]*)\}", query):
        matchers.extend((label, op, unescape(value)) for label, op, value in _MATCHER.findall(block))
    return matchers


def check_answer(
    data: Any, query: str | None, result_type: str, window: tuple[float, float] | None, step_s: float
) -> str | None:
    """What is wrong with an answer's ``data`` for ``query`` (None when nothing): see the module doc.

    ``query`` None (a saved answer whose query is unknown) checks only the shape."""
    if not isinstance(data, dict):
        return f"expected a {result_type} result, got {type(data).__name__}"
    kind = data.get("resultType")
    if kind != result_type:
        return f"expected a {result_type} result, got {kind}"
    result = data.get("result")
    if result is None:
        return None
    if not isinstance(result, list):
        return f"the {result_type} result is a {type(result).__name__}, not a list of series"
    names = query_names(query) if query else set()
    matchers = [(label, op, value, _matcher(op, value)) for label, op, value in query_matchers(query or "")]
    for number, item in enumerate(result, start=1):
        problem = _series_problem(number, item, result_type, names, matchers, window, max(step_s, 1.0))
        if problem:
            return problem
    return None


def _series_problem(number, item, result_type, names, matchers, window, slack) -> str | None:
    """What is wrong with one series of an answer (None when nothing)."""
    labels = item.get("metric") if isinstance(item, dict) else None
    points = (
        (item.get("values") if result_type == "matrix" else [item.get("value")])
        if labels is not None
        else None
    )
    if not isinstance(labels, dict) or not isinstance(points, list):
        return (
            f"series {number} is not a {{metric, {'values' if result_type == 'matrix' else 'value'}}} object"
        )
    name = labels.get("__name__")
    if name is not None and names and name not in names:
        return f"the answer does not belong to the query: series {number} is {name}, not {' or '.join(sorted(names))}"
    for label, op, value, accepts in matchers:
        if label != "__name__" and label in labels and not accepts(labels[label]):
            return (
                f"the answer does not belong to the query: series {number} has {label}={labels[label]!r}, "
                f"the query asks {label}{op}{value!r}"
            )
    return _points_problem(number, points, window, slack) if window is not None else None


def _points_problem(number, points, window, slack) -> str | None:
    for point in points[:1] + points[-1:]:  # Prometheus returns a series' points in time order
        t = _point_time(point)
        if t is None:
            return f"series {number} has a point that is not [time, value]: {str(point)[:60]}"
        if t < window[0] - slack or t > window[1] + slack:
            return (
                f"series {number} has a point at {_iso(t)}, outside the asked "
                f"[{_iso(window[0])}, {_iso(window[1])}]"
            )
    return None


def _matcher(op: str, value: str) -> Callable[[str], bool]:
    """Whether a label value satisfies ``label <op> "value"`` (a regex Python cannot read accepts all)."""
    if op == "=":
        return lambda actual: actual == value
    if op == "!=":
        return lambda actual: actual != value
    try:
        pattern = re.compile(value)
    except re.error:  # PromQL regexes are RE2; the few Python lacks are not checked
        return lambda actual: True
    if op == "=~":
        return lambda actual: pattern.fullmatch(actual) is not None
    return lambda actual: pattern.fullmatch(actual) is None


def _point_time(point: Any) -> float | None:
    if not isinstance(point, list | tuple) or len(point) != 2:
        return None
    try:
        return float(point[0])
    except (TypeError, ValueError):
        return None


def vector_to_matrix(result: list[dict]) -> list[dict]:
    """Instant-vector series as one-point matrix series (for :func:`matrix_to_samples`)."""
    return [
        {"metric": item.get("metric") or {}, "values": [item["value"]]}
        for item in result
        if item.get("value")
    ]


def _selector_of(spec: MetricSpec) -> str:
    """A series selector for listing a metric's shard values: its first metric name in the PromQL."""
    names = re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{", spec.promql or "")
    return names[0] if names else (spec.exporter or spec.name)


def _num(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _json(response) -> dict | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def matrix_to_samples(result: list[dict], spec: MetricSpec, default_node: str | None = None) -> Samples:
    """Canonical samples from matrix results (several windows/shards of the same metric)."""
    import numpy as np

    from acme.metrics.exposition import series_key
    from acme.metrics.storage import Samples, empty_samples, series_frame

    if not result:
        return empty_samples(spec.name)
    index: dict[tuple, int] = {}
    rows: list[tuple] = []
    ids, stamps, values = [], [], []
    skipped = 0
    for item in result:
        key = series_key(item.get("metric") or {}, spec, default_node)
        if key is None:
            skipped += 1
            continue
        identity = (key[0], key[1], key[2], key[4])
        sid = index.get(identity)
        if sid is None:
            sid = index[identity] = len(rows)
            rows.append(key)
        points = item.get("values") or []
        if not points:
            continue
        pairs = np.array(points, dtype=object)
        stamps.append(np.round(pairs[:, 0].astype(np.float64) * 1000).astype(np.int64))
        values.append(pairs[:, 1].astype(np.float64))  # "NaN", "+Inf" parse as floats
        ids.append(np.full(len(points), sid, dtype=np.int32))
    samples = Samples(
        spec.name,
        series_frame(rows),
        np.concatenate(ids) if ids else np.zeros(0, np.int32),
        np.concatenate(stamps) if stamps else np.zeros(0, np.int64),
        np.concatenate(values) if values else np.zeros(0),
    )
    if skipped:
        samples.notes.append(f"{skipped} series of {spec.name} had no label giving the node and were skipped")
    return samples
