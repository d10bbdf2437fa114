"""The query_range client against a FAKE Prometheus (http.server on 127.0.0.1 with canned answers).

Not a real Prometheus: each test scripts the responses (JSON bodies, 503s, slow answers that
time out, "status":"error" bodies). The test against a real Prometheus is an integration test.
"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from acme.metrics.prometheus import (
    PrometheusClient,
    PrometheusQueryError,
    matrix_to_samples,
    plan_windows,
    query_matchers,
    query_names,
    render_query,
    shard_selectors,
)
from tests.metrics_support import fetch_day

START = 1_688_169_600  # 2023-07-01T00:00:00Z
FIELD_API = Path(__file__).resolve().parents[2] / "fixtures" / "field" / "metrics" / "api"


class FakePrometheus:
    """Answers each request with the next scripted response, or with ``default``; records requests."""

    def __init__(self):
        self.script: list = []
        self.default = None
        self.requests: list[tuple[str, dict]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                url = urlparse(self.path)
                params = {k: v[0] for k, v in parse_qs(url.query).items()}
                fake.requests.append((url.path, params))
                answer = fake.script.pop(0) if fake.script else fake.default
                if callable(answer):
                    answer = answer(url.path, params)
                status, body, delay = answer if len(answer) == 3 else (*answer, 0)
                if delay:
                    time.sleep(delay)
                payload = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakePrometheus()
    yield server
    server.close()


def matrix(series: list[tuple[dict, list]]) -> tuple[int, dict]:
    return 200, {
        "status": "success",
        "data": {"resultType": "matrix", "result": [{"metric": m, "values": v} for m, v in series]},
    }


def echo_matrix(path, params):
    """A matrix answering the asked window with one GPU of the first host the query's shard asks
    for (n1 when unsharded), value = minutes since midnight."""
    start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
    values, t = [], start
    while t <= end:
        values.append([t, str((t - START) // 60)])
        t += step
    shard = re.search(r'Hostname=~"([^"|]+)', params.get("query", ""))
    host = shard.group(1) if shard else "n1"
    return matrix([({"Hostname": host, "gpu": "0", "UUID": "GPU-1"}, values)])


def client(fake, **kwargs):
    """A client that records its backoff sleeps instead of sleeping. Its timeout is long enough
    that no answer of the fake times out on a loaded machine unless a test scripts a delay."""
    sleeps = []
    options = {"timeout_s": 10.0, "max_attempts": 3, "backoff_s": 0.01, "sleep": sleeps.append, **kwargs}
    return PrometheusClient(fake.url, **options), sleeps


def test_windows_respect_the_point_limit_for_any_step():
    assert plan_windows(START, START + 86400, 15) == [(START, START + 86400 - 15)]  # 5,760 points
    five = plan_windows(START, START + 86400, 5)  # 17,280 points
    assert [(b - a) / 5 + 1 for a, b in five] == [11000, 6280] and five[1][0] == five[0][1] + 5
    small = plan_windows(START, START + 100, 10, max_points=3)
    assert small == [
        (START, START + 20),
        (START + 30, START + 50),
        (START + 60, START + 80),
        (START + 90, START + 90),
    ]


def test_shards_pack_label_values_and_queries_get_them():
    assert shard_selectors("Hostname", {"a": 8, "b": 8, "c.1": 8}, 16) == [
        'Hostname=~"a|b"',
        'Hostname=~"c\\\\.1"',
    ]
    assert render_query("100 * X{$shard}", 'Hostname=~"a"') == '100 * X{Hostname=~"a"}'
    assert render_query('rate(y{mode="idle",$shard}[1m]) / X{$shard}', None) == 'rate(y{mode="idle"}[1m]) / X'


def test_matrix_becomes_canonical_samples(fake, catalog):
    fake.script = [
        matrix(
            [
                (
                    {"Hostname": "n1", "gpu": "1", "UUID": "GPU-b", "modelName": "NVIDIA A100-SXM4-80GB"},
                    [[START, "97"], [START + 15, "NaN"]],
                ),
                ({"instance": "n2:9400", "gpu": "0", "UUID": "GPU-c"}, [[START, "+Inf"]]),
            ]
        )
    ]
    c, _ = client(fake)
    samples = matrix_to_samples(
        c.query_range("DCGM_FI_DEV_GPU_UTIL", START, START + 15, 15), catalog["gpu_util"]
    )
    assert samples.series["node"].tolist() == ["n1", "n2"] and samples.series["gpu"].tolist() == [1, 0]
    assert samples.ts_ms.tolist() == [START * 1000, (START + 15) * 1000, START * 1000]
    assert (
        samples.value[0] == 97 and samples.value[1] != samples.value[1] and samples.value[2] == float("inf")
    )
    path, params = fake.requests[0]
    assert (
        path == "/api/v1/query_range" and params["step"] == "15" and params["query"] == "DCGM_FI_DEV_GPU_UTIL"
    )


def test_503_timeout_and_error_bodies_are_retried_with_backoff(fake, catalog):
    error_body = {
        "status": "error",
        "errorType": "timeout",
        "error": "query timed out in expression evaluation",
    }
    fake.script = [(503, {"status": "error", "error": "overloaded"}), (200, {}, 3.0), (422, error_body)]
    fake.default = echo_matrix
    c, sleeps = client(fake, max_attempts=4, timeout_s=1.0)
    result = c.query_range("DCGM_FI_DEV_GPU_UTIL", START, START + 30, 15)
    assert len(result[0]["values"]) == 3
    assert c.requests_made == 4 and sleeps == [0.01, 0.02, 0.04]


def test_the_last_failure_names_the_query_and_window(fake):
    fake.default = (500, b"<html>internal error</html>")
    c, sleeps = client(fake)
    with pytest.raises(PrometheusQueryError) as caught:
        c.query_range("DCGM_FI_DEV_GPU_UTIL", START, START + 86385, 15)
    message = str(caught.value)
    assert "'DCGM_FI_DEV_GPU_UTIL'" in message and "[2023-07-01T00:00:00Z, 2023-07-01T23:59:45Z]" in message
    assert "after 3 attempt(s): HTTP 500" in message and len(sleeps) == 2


def test_a_malformed_query_fails_at_once(fake):
    fake.default = (400, {"status": "error", "errorType": "bad_data", "error": 'parse error: unexpected "}"'})
    c, sleeps = client(fake)
    with pytest.raises(PrometheusQueryError, match="bad query .HTTP 400.: parse error"):
        c.query_range("X{", START, START + 15, 15)
    assert c.requests_made == 1 and sleeps == []


def test_a_day_is_split_by_points_and_sharded_by_series(fake, catalog):
    def answer(path, params):
        if path == "/api/v1/series":
            return 200, {
                "status": "success",
                "data": [{"Hostname": h, "gpu": str(g)} for h in ("a", "b", "c") for g in range(8)],
            }
        return echo_matrix(path, params)

    fake.default = answer
    c, _ = client(fake, max_points_per_series=2000, max_series_per_query=16)
    samples = fetch_day(c, catalog, date(2023, 7, 1), step_s=15, metrics=["gpu_util"])["gpu_util"]
    queries = [p["query"] for path, p in fake.requests if path == "/api/v1/query_range"]
    assert (
        queries.count('DCGM_FI_DEV_GPU_UTIL{Hostname=~"a|b"}') == 3
        and queries.count('DCGM_FI_DEV_GPU_UTIL{Hostname=~"c"}') == 3
    )
    # the fake answers one series per query: every window's points once, no overlap between windows
    assert len(samples) == 6 * 2000 - 2 * (3 * 2000 - 5760) and len(set(samples.ts_ms.tolist())) == 5760


def test_an_answer_of_another_metric_fails_naming_the_query(fake, catalog):
    # The failure of issue 14: a server answering every query with the matrix of one metric.
    fake.default = matrix(
        [({"__name__": "DCGM_FI_DEV_FB_USED", "Hostname": "n1", "gpu": "0"}, [[START, "1"]])]
    )
    c, _ = client(fake)
    with pytest.raises(PrometheusQueryError) as raised:
        fetch_day(c, catalog, date(2023, 7, 1), step_s=3600, metrics=["gpu_util"])
    message = str(raised.value)
    assert (
        "'DCGM_FI_DEV_GPU_UTIL'" in message
        and "series 1 is DCGM_FI_DEV_FB_USED, not DCGM_FI_DEV_GPU_UTIL" in message
    )
    assert len(fake.requests) == 1, "a wrong answer is not retried"


def test_wrong_result_type_foreign_labels_and_points_outside_the_window_fail(fake):
    c, _ = client(fake)
    vector = {"status": "success", "data": {"resultType": "vector", "result": []}}
    fake.script = [(200, vector)]
    with pytest.raises(PrometheusQueryError, match="expected a matrix result, got vector"):
        c.query_range("DCGM_FI_DEV_GPU_UTIL", START, START + 60, 15)
    fake.script = [matrix([({"Hostname": "n9", "gpu": "0"}, [[START, "1"]])])]
    with pytest.raises(PrometheusQueryError, match="has Hostname='n9', the query asks Hostname=~'n1\\|n2'"):
        c.query_range('DCGM_FI_DEV_GPU_UTIL{Hostname=~"n1|n2"}', START, START + 60, 15)
    fake.script = [matrix([({"Hostname": "n1", "gpu": "0"}, [[START + 7200, "1"]])])]
    with pytest.raises(PrometheusQueryError, match="outside the asked"):
        c.query_range("DCGM_FI_DEV_GPU_UTIL", START, START + 60, 15)
    fake.script = [(200, {"status": "success", "data": {"resultType": "matrix", "result": []}})]
    with pytest.raises(PrometheusQueryError, match="expected a vector result, got matrix"):
        c.query_instant("DCGM_FI_DEV_GPU_UTIL", START)


def test_the_metric_names_and_matchers_of_the_catalogs_queries():
    assert query_names("max without (err_code, err_msg) (DCGM_FI_DEV_XID_ERRORS)") == {
        "DCGM_FI_DEV_XID_ERRORS"
    }
    assert query_names('100 * (1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[1m])))') == {
        "node_cpu_seconds_total"
    }
    assert query_names("100 * (1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)") == {
        "node_memory_MemAvailable_bytes",
        "node_memory_MemTotal_bytes",
    }
    assert query_matchers('X{Hostname=~"a\\\\.b|c",mode!="idle"}') == [
        ("Hostname", "=~", "a\\.b|c"),
        ("mode", "!=", "idle"),
    ]


def test_a_recorded_real_answer_served_to_the_live_client_is_checked_against_each_query(fake, catalog):
    # The instant vector UpCloud's Prometheus gave for DCGM_FI_DEV_GPU_TEMP (field corpus), served
    # for every query: right for gpu_temp, refused naming the query for any other metric.
    recorded = FIELD_API / "instant_vector_gpu_temp_l40s_upcloud.json"
    fake.default = (200, json.loads(recorded.read_text()))
    c, _ = client(fake)
    at = 1775721747.082
    series = c.query_instant("DCGM_FI_DEV_GPU_TEMP", at)
    assert [s["metric"]["Hostname"] for s in series] == ["gpu1-wl8sg"] and series[0]["value"][1] == "32"
    with pytest.raises(
        PrometheusQueryError, match=r"'DCGM_FI_DEV_FB_USED'.*series 1 is DCGM_FI_DEV_GPU_TEMP"
    ):
        c.query_instant("DCGM_FI_DEV_FB_USED", at)
    with pytest.raises(PrometheusQueryError, match="outside the asked"):
        c.query_instant("DCGM_FI_DEV_GPU_TEMP", at + 3600)  # an answer for another time
