"""One detection pass over the lake (jobs ingested from sacct, telemetry through the real metrics ingest),
the command line, the evidence logs and their episodes, and the Prometheus source against a FAKE server."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from acme.detection.run import detect_cluster, report_suspects
from acme.detection.scenario import DAY, JOB_ID, NODES, build_lake, step_of
from acme.lake import Lake
from acme.metrics.synth import Episode
from acme.settings import DetectionSettings

SETTINGS = DetectionSettings()


def at(hour: int, minute: int) -> datetime:
    return datetime(DAY.year, DAY.month, DAY.day, hour, minute, tzinfo=UTC)


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """A hang of the running job from 02:00 to 02:30, a straggler node from 06:00 to 08:00, and a checkpoint
    write from 09:57 interrupted by a hang at 10:00 (to 10:30); the nodes' storage writes are published."""
    tmp = tmp_path_factory.mktemp("detect")
    build_lake(
        tmp / "lake",
        tmp,
        [
            Episode("hang", tuple(range(NODES)), step_of(2), step_of(2, 30)),
            Episode("straggler", (3,), step_of(6), step_of(8), factor=0.45),
            Episode("checkpoint", tuple(range(NODES)), step_of(9, 57), step_of(10, 3)),
            Episode("hang", tuple(range(NODES)), step_of(10), step_of(10, 30)),
        ],
    )
    return Lake(str(tmp / "lake"))


def test_a_pass_over_the_lake_finds_the_hang_then_the_straggler_and_nothing_else(lake):
    quiet = detect_cluster(lake, "seren", at(1, 50), SETTINGS)
    assert (quiet["jobs_running"], quiet["jobs_checked"], quiet["suspects"]) == (1, 1, [])
    (hang,) = detect_cluster(lake, "seren", at(2, 3), SETTINGS)["suspects"]
    assert (hang["kind"], hang["job_id"], hang["job_type"], hang["since"]) == (
        "hang", JOB_ID, "Pretrain", "2024-03-10T02:00:00Z",
    )  # fmt: skip
    assert hang["nodes"] == hang["suspect_nodes"] and len(hang["nodes"]) == NODES
    (slow,) = detect_cluster(lake, "seren", at(6, 20), SETTINGS)["suspects"]
    assert slow["kind"] == "fail-slow" and slow["suspect_nodes"] == [slow["nodes"][3]]


def test_a_hang_during_a_checkpoint_write_is_told_apart_by_the_storage_writes_in_the_lake(lake):
    assert detect_cluster(lake, "seren", at(9, 59), SETTINGS)["suspects"] == []  # writing: a checkpoint
    (hang,) = detect_cluster(lake, "seren", at(10, 3), SETTINGS)["suspects"]
    assert (hang["kind"], hang["since"]) == ("hang", "2024-03-10T10:00:00Z")
    assert "no node writing to storage" in hang["evidence"][0]
    assert hang["measures"]["max_storage_write_bps"] < SETTINGS.storage_write_bps


def test_no_running_gpu_job_reads_no_telemetry(lake, tmp_path):
    empty = Lake(str(tmp_path / "empty"))
    result = detect_cluster(empty, "seren", at(2, 3), SETTINGS)
    assert (result["jobs_running"], result["jobs_checked"], result["suspects"]) == (0, 0, [])
    before = detect_cluster(lake, "seren", datetime(2024, 3, 9, 23, 0, tzinfo=UTC), SETTINGS)
    assert before["jobs_running"] == 0  # the job started at 00:05 on the 10th


def test_the_window_never_reaches_before_the_job_started(lake):
    # 00:12: the job has run 7 minutes; the idle nodes before it must not look like a stall.
    assert detect_cluster(lake, "seren", at(0, 12), SETTINGS, window_minutes=60)["suspects"] == []


def test_evidence_is_written_once_per_episode_under_the_log_root(lake, monkeypatch):
    first = detect_cluster(lake, "seren", at(2, 4), SETTINGS)
    (trigger,) = report_suspects(lake, first, SETTINGS)
    assert trigger["trigger_run_id"] == f"detect__seren__{JOB_ID}__hang__20240310T020000Z"
    assert trigger["conf"]["day"] == "2024-03-10" and trigger["conf"]["job_id"] == JOB_ID
    lines = lake.read_bytes(f"logs/{trigger['conf']['log']}").decode().splitlines()
    assert lines[0].startswith("2024-03-10T02:04:00Z ERROR acme-detect: hang: ")
    # Twenty minutes later the window no longer reaches the onset, but it is the same episode.
    later = detect_cluster(lake, "seren", at(2, 24), SETTINGS)
    assert later["suspects"][0]["since"] != first["suspects"][0]["since"]
    assert report_suspects(lake, later, SETTINGS) == [trigger]
    assert report_suspects(lake, first, SETTINGS) == [trigger]  # a re-run of the first pass: the same


def test_the_diagnosis_rules_classify_the_evidence_as_infrastructure(lake):
    from tests.diagnosis_support import diagnose_log

    for moment, reason in ((at(2, 4), "NCCLTimeoutError"), (at(6, 20), "FailSlow")):
        suspect = detect_cluster(lake, "seren", moment, SETTINGS)["suspects"][0]
        lines = [f"2024-03-10T00:00:00Z ERROR {line}" for line in suspect["evidence"]]
        diagnosis = diagnose_log(lines)
        assert (diagnosis.reason, diagnosis.category, diagnosis.attribution) == (
            reason, "Infrastructure", "infrastructure",
        )  # fmt: skip
        assert diagnosis.confidence >= 0.7  # no retrieval or LLM needed to route it


def test_a_fail_slow_node_is_its_own_outcome_routed_to_recovery(lake):
    """FailSlow, not NodeFailure: the node still works, so the mitigation confirms it before draining it."""
    from acme.diagnosis.records import DiagnosisRecord
    from acme.diagnosis.routing import RECOVERY, route
    from acme.diagnosis.rules import attribution_of, category_of
    from tests.diagnosis_support import diagnose_log

    (suspect,) = detect_cluster(lake, "seren", at(6, 20), SETTINGS)["suspects"]
    diagnosis = diagnose_log([f"2024-03-10T06:20:00Z ERROR {line}" for line in suspect["evidence"]])
    assert (diagnosis.reason, diagnosis.rule_id) == ("FailSlow", "detected-fail-slow")
    assert (category_of("FailSlow"), attribution_of("FailSlow")) == ("Infrastructure", "infrastructure")
    mitigation = diagnosis.mitigation.lower()
    assert "confirm" in mitigation and "cordon" in mitigation and "drain the slow node" in mitigation
    assert mitigation.index("confirm") < mitigation.index("cordon")
    record = DiagnosisRecord(
        cluster="seren", job_id=JOB_ID, date=DAY, reason=diagnosis.reason, category=diagnosis.category,
        attribution=diagnosis.attribution, confidence=diagnosis.confidence, source="rule",
    )  # fmt: skip
    decided = route(record, {"job_type": suspect["job_type"], "node_list": ",".join(suspect["nodes"])})
    assert decided.kind == RECOVERY and decided.recovery_conf["reason"] == "FailSlow"
    assert decided.recovery_conf["nodes"] == suspect["nodes"]


def test_the_command_prints_one_json_object_of_suspects(lake, capsys):
    from acme.cli import main

    assert (
        main(["detect-hangs", "--lake", lake.uri, "--cluster", "seren", "--at", "2024-03-10T02:05:00+00:00"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert [s["kind"] for s in out["suspects"]] == ["hang"]
    assert out["clusters"]["seren"]["jobs_checked"] == 1 and out["clusters"]["seren"]["source"] == "lake"
    assert main(["detect-hangs", "--lake", lake.uri, "--cluster", "seren", "--at", "2024-03-10T02:05"]) == 2
    assert "has no time zone" in capsys.readouterr().err
    assert main(["detect-hangs", "--lake", lake.uri, "--cluster", "seren", "--window", "1"]) == 2
    assert "shorter than the hang rule" in capsys.readouterr().err
    assert main(["detect-hangs", "--lake", lake.uri, "--cluster", "seren/../../x"]) == 2
    assert "unknown cluster" in capsys.readouterr().err
    assert main(["detect-hangs", "--lake", lake.uri, "--at", "10000-01-01T00:00:00+00:00"]) == 2


def test_prometheus_source_through_the_client_against_a_fake_server(lake, tmp_path, monkeypatch):
    """The cluster's metrics source is Prometheus: the window comes from query_range (answered by a FAKE
    Prometheus from the lake's samples), not from the lake."""
    from acme.detection.telemetry import METRICS, prometheus_specs, read_lake_samples
    from acme.metrics.prometheus import render_query

    specs = prometheus_specs(SETTINGS.storage_write_promql)
    assert set(specs) == set(METRICS)  # storage writes too, through ACME_DETECT_STORAGE_WRITE_PROMQL
    start_ms = int((at(2, 4) - timedelta(minutes=30)).timestamp() * 1000)
    stored = read_lake_samples(lake, "seren", start_ms, int(at(2, 4).timestamp() * 1000))
    by_query = {}
    for metric in METRICS:
        samples = stored[metric]
        result = []
        for sid, row in samples.series.iterrows():
            pick = samples.series_id == sid
            labels = (
                {"Hostname": row["node"], "gpu": str(int(row["gpu"])), "UUID": row["uuid"] or ""}
                if specs[metric].per_gpu
                else {"instance": f"{row['node']}:9100"}
            )
            values = [
                [t / 1000, str(v)] for t, v in zip(samples.ts_ms[pick], samples.value[pick], strict=True)
            ]
            result.append({"metric": labels, "values": values})
        by_query[render_query(specs[metric].promql, None)] = result
    asked = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            params = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
            asked.append(params["query"])
            # Like a real Prometheus, answer only the points inside the asked window.
            low, high = float(params["start"]), float(params["end"])
            result = [
                {"metric": s["metric"], "values": [p for p in s["values"] if low <= p[0] <= high]}
                for s in by_query[params["query"]]
            ]
            body = json.dumps(
                {
                    "status": "success",
                    "data": {"resultType": "matrix", "result": [s for s in result if s["values"]]},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        clusters = tmp_path / "clusters.yaml"
        clusters.write_text(
            "clusters:\n  seren:\n    jobs: {format: acmetrace, input: x.csv}\n"
            f"    metrics: {{format: prometheus, input: 'http://127.0.0.1:{server.server_port}', step_s: 15}}\n"
        )
        monkeypatch.setenv("ACME_CLUSTERS_FILE", str(clusters))
        result = detect_cluster(lake, "seren", at(2, 4), SETTINGS)
    finally:
        server.shutdown()
    assert result["source"] == "prometheus" and len(asked) == len(METRICS)
    assert [s["kind"] for s in result["suspects"]] == ["hang"]


def test_evidence_goes_to_a_log_root_outside_the_lake(lake, tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_DIAGNOSIS_LOG_ROOT", str(tmp_path / "logs"))
    result = detect_cluster(lake, "seren", at(6, 20), SETTINGS)
    (trigger,) = report_suspects(lake, result, SETTINGS)
    written = tmp_path / "logs" / trigger["conf"]["log"]
    assert written.read_text().startswith("2024-03-10T06:20:00Z ERROR acme-detect: fail-slow: node ")
    assert not list(written.parent.glob("*.tmp"))
