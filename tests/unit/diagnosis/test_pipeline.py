"""The diagnosis pipeline: log location (and its refusals), rules -> retrieval -> agent, learning, routing, CLI.

The LLM agent is a stand-in object here (tests named ``..._stub_agent``); the real agent is tested against
an OpenAI-compatible server on loopback in test_llm_agent.py.
"""

from __future__ import annotations

import gzip
import json
import os
from datetime import date

import pytest

from acme.diagnosis.diagnose_cli import diagnose_log_cli
from acme.diagnosis.llm_agent import AgentAnswer, AgentUnavailable
from acme.diagnosis.pipeline import diagnose_job, locate_logs, resolve_log_location
from acme.diagnosis.records import write_records
from acme.diagnosis.retrieval import CaseStore, LexicalEmbedder
from acme.diagnosis.routing import (
    NO_ROUTE,
    OWNER_MESSAGE,
    RECOVERY,
    route,
    write_owner_message,
)
from acme.diagnosis.synth_log import iter_training_log
from acme.errors import InputError
from acme.hostlist import expand_hostlist
from acme.lake import Lake
from tests.diagnosis_support import read_records

FLUX = [
    "[rank2]: Traceback (most recent call last):",
    '[rank2]:   File "/workspace/train.py", line 88, in <module>',
    "[rank2]: widgetlib.FluxCapacitorFault: flux capacitor drained on device 3 (code 0x1f)",
]
JOB = {"job_type": "Pretrain", "user": "u1", "job_name": "gpt-pretrain-run1", "node_list": "node[01-02,07]",
       "submit_time": "2023-07-01T03:00:00+00:00"}  # fmt: skip


@pytest.fixture
def lake(tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")
    for name in ("ACME_DIAGNOSIS_LOG_PATTERN", "ACME_DIAGNOSIS_LOG_ROOT", "ACME_DIAGNOSIS_MIN_CONFIDENCE"):
        monkeypatch.delenv(name, raising=False)
    return Lake(str(tmp_path / "lake"))


def put_log(lake: Lake, job_id: str, lines, name: str = "train.log") -> str:
    path = os.path.join(lake.root, "logs", "cluster=seren", f"job={job_id}", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = ("\n".join(lines) + "\n").encode()
    with gzip.open(path, "wb") if name.endswith(".gz") else open(path, "wb") as handle:
        handle.write(data)
    return path


def training_log(failure=None, excerpt=None, seed=1):
    return list(iter_training_log(3_000, seed=seed, ranks=8, failure=failure, excerpt=excerpt))


class StubAgent:
    """Stands in for FailureAgent: returns a fixed answer (or raises) and records what it was shown."""

    def __init__(self, answer: AgentAnswer | None = None, error: str | None = None):
        self.answer, self.error, self.calls = answer, error, []

    def diagnose(self, compressed_log_text, similar_cases, job=None):
        self.calls.append({"log": compressed_log_text, "similar": similar_cases, "job": job})
        if self.error:
            raise AgentUnavailable(self.error)
        return self.answer


def flux_answer(regex: str | None = "FluxCapacitorFault", confidence: float = 0.92) -> AgentAnswer:
    return AgentAnswer(
        reason="CUDAError", category="Infrastructure", attribution="infrastructure", confidence=confidence,
        evidence_lines=[], mitigation="Replace the flux capacitor.", signature_regex=regex,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ log location
def test_log_locations_outside_the_root_are_refused(lake, tmp_path):
    root = f"{lake.uri}/logs"
    assert (
        resolve_log_location("cluster=seren/job=1/train.log", root) == f"{root}/cluster=seren/job=1/train.log"
    )
    assert resolve_log_location(f"{root}/x/train.log", root) == f"{root}/x/train.log"
    for bad in (
        "../secrets.log",
        "a/../../b.log",
        "/etc/passwd",
        str(tmp_path / "elsewhere.log"),
        f"{root}x/a",
    ):
        with pytest.raises(InputError, match="log location"):
            resolve_log_location(bad, root)
    with pytest.raises(InputError, match="outside the log root"):
        resolve_log_location("s3://other-bucket/logs/a.log", "s3://bucket/logs")
    assert resolve_log_location("s3://bucket/logs/a.log", "s3://bucket/logs") == "s3://bucket/logs/a.log"


def test_a_link_out_of_the_log_root_is_refused(lake, tmp_path):
    outside = tmp_path / "outside.log"
    outside.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    link = os.path.join(lake.root, "logs", "sneaky.log")
    os.makedirs(os.path.dirname(link))
    os.symlink(outside, link)
    with pytest.raises(InputError, match="outside the log root"):
        locate_logs(lake, "seren", {"job_id": "1"}, "sneaky.log")
    with pytest.raises(InputError, match="no log file"):
        locate_logs(lake, "seren", {"job_id": "1"}, "missing.log")


def test_a_job_id_cannot_steer_the_log_search(lake):
    with pytest.raises(InputError, match="job id"):
        diagnose_job(lake, "seren", {"job_id": "../../etc"}, agent=None)


def test_logs_are_found_by_the_configured_pattern_gzip_included(lake, monkeypatch):
    put_log(lake, "7", training_log("KeyError"), name="rank0.log.gz")
    record = diagnose_job(lake, "seren", {**JOB, "job_id": "7"}, agent=None)
    assert (record.reason, record.source) == ("KeyError", "rule")
    monkeypatch.setenv("ACME_DIAGNOSIS_LOG_PATTERN", "{lake}/logs/cluster={cluster}/job={job_id}/*.txt")
    record = diagnose_job(lake, "seren", {**JOB, "job_id": "7"}, agent=None)
    assert record.reason == "Unknown" and "no log found" in record.note


# ------------------------------------------------------------------------------------------ the decision
def test_a_confident_rule_never_calls_the_stub_agent(lake):
    put_log(lake, "1", training_log("ECCError"))
    agent = StubAgent(flux_answer())
    record = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=agent)
    assert (record.reason, record.source, record.rule_id) == ("ECCError", "rule", "ecc-uncorrectable")
    assert record.date == date(2023, 7, 1) and record.evidence and not agent.calls


def test_unknown_failure_goes_to_the_stub_agent_which_teaches_a_rule(lake):
    put_log(lake, "1", training_log(excerpt=FLUX))
    agent = StubAgent(flux_answer())
    first = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=agent)
    assert (first.reason, first.source, first.confidence) == ("CUDAError", "llm", 0.92)
    assert (
        first.mitigation == "Replace the flux capacitor." and "learned rule learned-cudaerror-" in first.note
    )
    (call,) = agent.calls
    assert "FluxCapacitorFault" in call["log"] and call["job"]["job_id"] == "1"
    assert [r["job_id"] for r in CaseStore(lake, LexicalEmbedder()).read("seren")] == ["1"]

    put_log(lake, "2", training_log(excerpt=[line.replace("device 3", "device 5") for line in FLUX], seed=9))
    second = diagnose_job(lake, "seren", {**JOB, "job_id": "2"}, agent=agent)
    assert (second.reason, second.source) == ("CUDAError", "rule")  # the learned rule, no second LLM call
    assert second.rule_id == first.note.split("learned rule ")[1].split(";")[0] and len(agent.calls) == 1
    # A rule decided: no similar-case lookup (no model load); the case waits for the nightly flush.
    assert second.similar_cases == [] and "similar past cases not looked up" in second.note
    assert lake.exists("diagnosis/cases_deferred/cluster=seren/2.json")


def test_unavailable_stub_agent_falls_back_to_retrieval_and_says_so(lake, monkeypatch):
    put_log(lake, "1", training_log(excerpt=FLUX))
    diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=StubAgent(flux_answer(regex=None)))
    put_log(lake, "2", training_log(excerpt=FLUX, seed=5))
    unavailable = StubAgent(error="HTTP 429 after 3 tries")
    confident = diagnose_job(lake, "seren", {**JOB, "job_id": "2"}, agent=unavailable)
    assert (confident.source, confident.note, unavailable.calls) == ("retrieval", None, [])  # close enough

    monkeypatch.setenv(
        "ACME_DIAGNOSIS_MIN_CONFIDENCE", "0.99"
    )  # now a near (not identical) case is not enough
    put_log(lake, "3", training_log(excerpt=[line.replace("drained", "overheated") for line in FLUX], seed=6))
    record = diagnose_job(lake, "seren", {**JOB, "job_id": "3"}, agent=unavailable)
    assert len(unavailable.calls) == 1 and unavailable.calls[0]["similar"][0]["case_id"] == "seren/1"
    assert (record.reason, record.source) == ("CUDAError", "retrieval")
    assert "LLM agent unavailable (HTTP 429 after 3 tries); fell back to retrieval" in record.note
    assert record.similar_cases[0]["case_id"] == "seren/1" and 0.5 < record.similar_cases[0]["similarity"] < 1
    assert "FluxCapacitorFault" in record.evidence[0]["text"]  # the decisive line, not the traceback header
    # Retrieval's own answers are not stored as cases: retrieval never feeds on itself.
    assert [r["job_id"] for r in CaseStore(lake, LexicalEmbedder()).read("seren")] == ["1"]


def past_case(lake, job_id: str, failure: str, reason: str) -> None:
    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.retrieval import case_from_lines, signature_lines
    from acme.diagnosis.rules import load_rules

    lines = signature_lines(compress_log(training_log(failure, seed=int(job_id))))
    case = case_from_lines(
        "seren", job_id, lines, reason=reason, category=None, attribution="infrastructure", source="operator",
        confidence=1.0, rules=load_rules(),
    )  # fmt: skip
    CaseStore(lake).upsert([case])


def test_similar_cases_confirm_a_weak_rule_but_never_overrule_it(lake):
    put_log(lake, "1", training_log("NCCLTimeoutError"))
    alone = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=None)
    assert (alone.reason, alone.confidence) == ("NCCLTimeoutError", 0.5)  # a symptom rule alone: weak

    past_case(lake, "50", "NCCLTimeoutError", "NetworkError")  # an operator said: that one was the network
    overruled = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=None)
    assert (overruled.reason, overruled.source, overruled.confidence) == ("NCCLTimeoutError", "rule", 0.5)
    assert "similar past cases point at NetworkError" in overruled.note

    past_case(lake, "50", "NCCLTimeoutError", "NCCLTimeoutError")
    confirmed = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=None)
    assert (confirmed.reason, confirmed.source) == ("NCCLTimeoutError", "rule")
    assert confirmed.confidence > 0.9 and "1 similar past case(s) agree" in confirmed.note


def test_a_low_confidence_stub_agent_teaches_nothing(lake):
    put_log(lake, "1", training_log(excerpt=FLUX))
    record = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=StubAgent(flux_answer(confidence=0.6)))
    assert record.source == "llm" and "rule not learned: agent confidence 0.6" in record.note
    assert not lake.exists("diagnosis/rules/learned.yaml")


def test_nothing_known_gives_unknown_with_source_none(lake):
    put_log(lake, "1", ["training started", "widget calibration drifted"])
    record = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=None)
    assert (record.reason, record.category, record.confidence, record.source) == (
        "Unknown",
        None,
        0.0,
        "none",
    )
    assert route(record, JOB).kind == NO_ROUTE


def test_a_rerun_replaces_the_record_and_the_case(lake):
    put_log(lake, "1", training_log("NVLinkError"))
    for _ in range(2):
        write_records(lake, [diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=None)])
    (stored,) = read_records(lake, "seren", date(2023, 7, 1))
    assert stored.reason == "NVLinkError" and stored.similar_cases == []  # never its own earlier self
    from acme.diagnosis.deferred_cases import flush_deferred_cases

    assert flush_deferred_cases(lake) == 1  # a rule decided: the case was deferred, stored once
    assert len(CaseStore(lake, LexicalEmbedder()).read("seren")) == 1


# ------------------------------------------------------------------------------------------ routing
def test_infrastructure_failure_of_a_training_job_requests_recovery(lake, monkeypatch):
    monkeypatch.setenv("ACME_CHECKPOINT_URI_PATTERN", "s3://ckpt/{cluster}/{job_id}")  # recover_training's
    put_log(lake, "1", training_log("ECCError"))
    record = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=None)
    decided = route(record, {**JOB, "job_id": "1"})
    assert decided.kind == RECOVERY
    conf = decided.recovery_conf
    evidence = [e["text"] for e in record.evidence]
    assert conf == {
        "cluster": "seren", "job_id": "1", "nodes": ["node01", "node02", "node07"],
        "checkpoint_uri": "", "dry_run": True, "reason": "ECCError", "recovery_id": "diag-seren-1",
        "diagnosis_source": "rule", "confidence": record.confidence, "evidence": evidence,
    }  # fmt: skip
    assert evidence and all(
        "Xid" in line or "ECC" in line or "uncorrectable" in line.lower() for line in evidence
    )
    assert route(record, {**JOB, "job_type": "Eval"}).kind == NO_ROUTE
    assert route(record, {**JOB, "node_list": None}).kind == NO_ROUTE  # nothing to localize faults among


def test_a_diagnosis_only_the_llm_made_never_recovers_for_real(lake, monkeypatch):
    """A planted prompt injection could make the agent say ECCError: its recovery is planned, never run."""
    from dataclasses import replace

    monkeypatch.setenv("ACME_RECOVERY_DRY_RUN", "false")
    put_log(lake, "1", training_log("ECCError"))
    by_rule = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=None)
    assert route(by_rule, {**JOB, "job_id": "1"}).recovery_conf["dry_run"] is False
    by_llm = replace(by_rule, source="llm", rule_id=None, rule_version=None)
    assert route(by_llm, {**JOB, "job_id": "1"}).recovery_conf["dry_run"] is True


def test_user_failure_writes_an_owner_message(lake):
    put_log(lake, "1", training_log("KeyError"))
    record = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=None)
    decided = route(record, JOB)
    assert decided.kind == OWNER_MESSAGE
    write_owner_message(lake, record, decided.message)
    write_owner_message(lake, record, decided.message)  # a re-run overwrites
    (key,) = lake.list("diagnosis/messages")
    assert key == "diagnosis/messages/cluster=seren/date=2023-07-01/1.json"
    message = lake.read_json(key)
    assert message["to"] == "u1" and "KeyError" in message["text"] and "What to do:" in message["text"]
    assert f"line {record.evidence[0]['line']}" in message["text"]


def test_expand_hostlist():
    assert expand_hostlist("node[01-03,07],gpu-5") == ["node01", "node02", "node03", "node07", "gpu-5"]
    assert expand_hostlist("rack[1-2]-n[1-2]") == ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
    assert expand_hostlist(None) == [] and expand_hostlist("None assigned") == []


# ------------------------------------------------------------------------------------------ command line
def test_cli_prints_the_issue_keys_and_reads_the_lake_without_writing(lake, tmp_path):
    log = tmp_path / "crash.log"
    log.write_text("\n".join(training_log(excerpt=FLUX)) + "\n")
    offline = diagnose_log_cli(log)
    assert set(offline) == {
        "reason",
        "category",
        "attribution",
        "confidence",
        "source",
        "evidence",
        "mitigation",
    }
    assert (offline["reason"], offline["source"]) == ("Unknown", "none")

    put_log(lake, "1", training_log(excerpt=FLUX, seed=3))
    diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=StubAgent(flux_answer(regex=None)))
    before = sorted(lake.list(""))
    with_lake = diagnose_log_cli(log, json.dumps({"job_id": "99", "cluster": "seren"}), lake_uri=lake.uri)
    assert (with_lake["reason"], with_lake["source"]) == ("CUDAError", "retrieval")
    assert sorted(lake.list("")) == before
    with pytest.raises(InputError, match="not found"):
        diagnose_log_cli(tmp_path / "nope.log")
    with pytest.raises(InputError, match="not a JSON object"):
        diagnose_log_cli(log, "[1, 2]")


def test_a_model_that_cannot_load_is_said_in_the_record(lake, monkeypatch):
    from acme.diagnosis import retrieval

    def broken(self):
        raise OSError("model files missing")

    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "minilm")
    monkeypatch.setattr(retrieval, "_EMBEDDERS", {})
    monkeypatch.setattr(retrieval, "fallback_reason", None)
    monkeypatch.setattr(retrieval.MiniLMEmbedder, "__init__", broken)
    put_log(lake, "1", training_log(excerpt=FLUX))  # no rule decides: retrieval is asked, so the model
    record = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=None)
    assert record.reason == "Unknown"
    assert "embedding model unavailable, lexical retrieval used (OSError: model files missing)" in record.note


def test_a_nightly_run_covers_what_the_triggering_ingest_published():
    from acme.diagnosis.nightly import diagnosis_targets
    from acme.errors import ConfigError

    clusters = {"seren": object(), "kalos": object()}
    events = [{"cluster": "kalos", "day": "2023-07-01"}, {"cluster": "seren", "day": "2023-07-01"}, {}]
    day = date(2023, 7, 5)
    assert diagnosis_targets(clusters, "all", day, events, manual=False) == [
        ("kalos", date(2023, 7, 1)),
        ("seren", date(2023, 7, 1)),
    ]
    assert diagnosis_targets(clusters, "seren", day, events, manual=False) == [("seren", date(2023, 7, 1))]
    assert diagnosis_targets(clusters, "seren", day, events, manual=True) == [("seren", day)]
    assert diagnosis_targets(clusters, "all", day, [], manual=False) == [("kalos", day), ("seren", day)]
    with pytest.raises(ConfigError, match="unknown cluster 'venus'"):
        diagnosis_targets(clusters, "venus", day, [], manual=True)


# ------------------------------------------------------------------------------------------ unreadable logs
def _gzip_log(lines: int = 5_000) -> bytes:
    return gzip.compress(
        "".join(f"step {i} loss {1 / (i + 1):.6f}\n" for i in range(lines)).encode(), mtime=0
    )


def _corrupt_deflate(data: bytes) -> bytes:
    """Gzip data whose compressed stream is damaged after a valid header (zlib reports corrupt data)."""
    body = bytearray(data)
    for offset in range(40, min(len(body) - 8, 400)):
        body[offset] ^= 0xFF
    return bytes(body)


@pytest.mark.parametrize(
    ("name", "body", "problem"),
    [
        ("train.log.gz", _gzip_log()[: len(_gzip_log()) // 2], "truncated gzip data"),
        ("train.log.gz", b"this is plain text, not gzip\n" * 10, "not valid gzip data"),
        ("train.log.gz", _corrupt_deflate(_gzip_log()), "corrupt gzip data"),
    ],
    ids=["truncated", "not-gzip", "corrupt-stream"],
)
def test_an_unreadable_gz_log_is_an_input_error_naming_the_file(tmp_path, name, body, problem):
    import fsspec

    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.pipeline import read_log_lines

    path = tmp_path / name
    path.write_bytes(body)
    fs = fsspec.filesystem("file")
    with pytest.raises(InputError) as raised:
        list(read_log_lines([(fs, str(path))]))
    assert raised.value.source == str(path) and problem in raised.value.problem, raised.value
    # The compressor reading a path directly says the same.
    with pytest.raises(InputError) as raised:
        compress_log(path)
    assert raised.value.source == str(path) and problem in raised.value.problem, raised.value


def test_a_whole_gz_log_still_reads(tmp_path):
    import fsspec

    from acme.diagnosis.pipeline import read_log_lines

    path = tmp_path / "train.log.gz"
    path.write_bytes(_gzip_log(1_000))
    lines = list(read_log_lines([(fsspec.filesystem("file"), str(path))]))
    assert len(lines) == 1_000 and lines[-1] == "step 999 loss 0.001000"


LAUNCHER_SUMMARY = [
    "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 (pid: 4711) of binary: /usr/bin/python",
]


def test_similar_cases_alone_on_lines_that_name_no_failure_are_a_hint_and_the_answer_stays_unknown(lake):
    """Issue 31: a vote on a launcher summary (which every failure of a kind prints) is no answer."""
    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.retrieval import case_from_lines, names_a_failure, signature_lines
    from acme.diagnosis.rules import load_rules

    past = signature_lines(compress_log(training_log(excerpt=LAUNCHER_SUMMARY, seed=3)))
    assert not names_a_failure(past, load_rules())
    case = case_from_lines(
        "seren", "50", past, reason="KilledBySignal", category=None, attribution="infrastructure",
        source="operator", confidence=1.0, rules=load_rules(),
    )  # fmt: skip
    CaseStore(lake).upsert([case])

    summary = [line.replace("4711", "5150") for line in LAUNCHER_SUMMARY]
    put_log(lake, "1", training_log(excerpt=summary, seed=4))
    record = diagnose_job(lake, "seren", {**JOB, "job_id": "1"}, agent=None)
    assert record.similar_cases and record.similar_cases[0]["case_id"] == "seren/50"
    assert (record.reason, record.source) == ("Unknown", "none")
    assert "similar past cases point at KilledBySignal" in record.note and "left Unknown" in record.note

    # When the log's own lines name one, the vote decides: test_unavailable_stub_agent_falls_back_to_retrieval...
