"""The lake lookup of the last good run of a failed job's family (issue 31, item 2), on job records written by
the real sacct ingest and real logs (a failed Procgen run of the corpus and the last good run of its project,
``tests/fixtures/diagnosis/corpus/baselines.yaml``): which good run is taken, which never is, a good run
without a log, the night's cache, and the nightly diagnosis and the command line using it."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "fixtures" / "diagnosis" / "corpus"
FAILED_LOG = CORPUS / "logs" / "dtu-procgen-lsf-nameerror.log"  # NameError at line 21
GOOD_LOG = CORPUS / "baselines" / "dtu-procgen-good-8c6537e97f.log"  # its project's last good run before it
OLDER_GOOD_LOG = CORPUS / "baselines" / "dtu-procgen-good-57b7192b63.log"
CLUSTER = "h31c"
DAY = date(2024, 3, 10)

HEADER = "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|AllocTRES|ReqTRES|ExitCode"
TRES = "billing=8,cpu=8,gres/gpu=1,mem=64G,node=1"


def _row(
    job_id: str, name: str, user: str, state: str, submit: str, start: str, end: str, exit_code: str
) -> str:
    from datetime import datetime

    seconds = int((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
    elapsed = f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    return f"{job_id}|{name}|{user}|gpu|{state}|{submit}|{start}|{end}|{elapsed}|1|8|gpu01|{TRES}|{TRES}|{exit_code}"


# Family procgen-bigfish of alice: two good runs (the later one is the baseline), two failures of the night,
# and a good run that ended after the failures (never their baseline). Family bert-eval of bob: failed, and
# only carol's run of that name succeeded (another user: another family). Family gpt-pretrain of dave: the good
# run has no log.
JOBS = [
    _row("501", "procgen-bigfish-run3", "alice", "COMPLETED", "2024-03-08T08:00:00", "2024-03-08T08:00:00", "2024-03-08T10:00:00", "0:0"),
    _row("502", "procgen-bigfish-run4", "alice", "COMPLETED", "2024-03-09T09:00:00", "2024-03-09T09:00:00", "2024-03-09T12:00:00", "0:0"),
    _row("503", "procgen-bigfish-run5", "alice", "FAILED", "2024-03-10T01:00:00", "2024-03-10T01:00:00", "2024-03-10T01:20:00", "1:0"),
    _row("504", "procgen-bigfish-run6", "alice", "FAILED", "2024-03-10T02:00:00", "2024-03-10T02:00:00", "2024-03-10T02:10:00", "1:0"),
    _row("505", "procgen-bigfish-run7", "alice", "COMPLETED", "2024-03-10T00:30:00", "2024-03-10T00:30:00", "2024-03-10T09:00:00", "0:0"),
    _row("601", "bert-eval", "carol", "COMPLETED", "2024-03-09T01:00:00", "2024-03-09T01:00:00", "2024-03-09T02:00:00", "0:0"),
    _row("602", "bert-eval", "bob", "FAILED", "2024-03-10T03:00:00", "2024-03-10T03:00:00", "2024-03-10T03:05:00", "1:0"),
    _row("701", "gpt-pretrain", "dave", "COMPLETED", "2024-03-09T04:00:00", "2024-03-09T04:00:00", "2024-03-09T05:00:00", "0:0"),
    _row("702", "gpt-pretrain", "dave", "FAILED", "2024-03-10T04:00:00", "2024-03-10T04:00:00", "2024-03-10T04:30:00", "1:0"),
]  # fmt: skip


def _write_log(lake_dir: Path, job_id: str, source: Path) -> None:
    path = lake_dir / "logs" / f"cluster={CLUSTER}" / f"job={job_id}" / "train.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(source.read_bytes())


@pytest.fixture
def lake(lake_dir, tmp_path, monkeypatch):
    """A lake with the jobs above ingested by the real sacct ingest, and the logs of the failures and of
    the good runs 501, 502 (the one before the failures) and 505 (ended after them); 701 has none."""
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake

    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")
    export = tmp_path / "sacct.txt"
    export.write_text(HEADER + "\n" + "\n".join(JOBS) + "\n", encoding="utf-8")
    lake = Lake(str(lake_dir))
    summary = ingest_job_file(lake, JobInput(CLUSTER, "sacct", str(export)), export)
    assert summary["rows"] == len(JOBS), summary
    for job_id in ("503", "504", "602", "702"):
        _write_log(lake_dir, job_id, FAILED_LOG)
    _write_log(lake_dir, "501", OLDER_GOOD_LOG)
    _write_log(lake_dir, "502", GOOD_LOG)
    _write_log(lake_dir, "505", FAILED_LOG)  # a later run's log: were it the baseline, nothing would be new
    return lake


def _failed(lake) -> dict[str, dict]:
    from acme.diagnosis.nightly import failed_jobs

    return {job["job_id"]: job for job in failed_jobs(lake, CLUSTER, DAY)}


def test_the_last_good_run_before_the_failure_is_the_baseline(lake):
    from acme.diagnosis.baseline import baseline_keys_of_log
    from acme.diagnosis.baseline_lookup import BaselineFinder

    finder = BaselineFinder(lake)
    found = finder.for_job(CLUSTER, _failed(lake)["503"])
    # 502 ended last before 503 began; 505 was submitted earlier but ended after it, 501 ended earlier.
    assert found.good_job_id == "502"
    assert found.keys == frozenset(baseline_keys_of_log(GOOD_LOG))
    assert "job 502" in found.note and "procgen-bigfish" in found.note


def test_a_family_without_a_good_run_has_none_and_another_users_run_is_not_its(lake):
    from acme.diagnosis.baseline_lookup import BaselineFinder

    found = BaselineFinder(lake).for_job(CLUSTER, _failed(lake)["602"])
    assert found.keys is None and found.good_job_id is None  # carol's bert-eval is not bob's family
    assert "no successful run of family" in found.note and "bob" in found.note


def test_a_good_run_that_ended_after_the_failure_is_never_used(lake):
    from acme.diagnosis.baseline_lookup import BaselineFinder

    finder = BaselineFinder(lake)
    began = _failed(lake)["504"]["start_time"]
    good = finder.last_good_run(CLUSTER, finder_family(lake, "504"), _as_time(began))
    assert good is not None and good["job_id"] == "502"
    # Asked at a time after 505 ended, 505 is the last good run: only the time ruled it out above.
    later = finder.last_good_run(CLUSTER, finder_family(lake, "504"), _as_time("2024-03-10T10:00:00+00:00"))
    assert later is not None and later["job_id"] == "505"


def finder_family(lake, job_id: str) -> str:
    from acme.diagnosis.baseline_lookup import family_of

    family = family_of(_failed(lake)[job_id])
    assert family is not None
    return family


def _as_time(value):
    from datetime import datetime

    return datetime.fromisoformat(value) if isinstance(value, str) else value


def test_a_good_run_without_a_log_is_said_so_not_an_error(lake):
    from acme.diagnosis.baseline_lookup import BaselineFinder

    found = BaselineFinder(lake).for_job(CLUSTER, _failed(lake)["702"])
    assert found.keys is None and found.good_job_id == "701"
    assert "job 701" in found.note and "has no log at" in found.note and "no baseline" in found.note


def test_a_job_without_a_name_has_no_family():
    from acme.diagnosis.baseline_lookup import family_of

    assert family_of({"job_id": "1", "user": "u", "job_name": None}) is None  # AcmeTrace records
    assert family_of({"job_id": "1", "user": None, "job_name": "x"}) is None


def _stored(lake_dir: Path) -> dict[str, dict]:
    table = pq.read_table(lake_dir / f"diagnoses/cluster={CLUSTER}/date={DAY}/diagnoses.parquet")
    return {row["job_id"]: row for row in table.to_pylist()}


def test_the_nightly_diagnosis_uses_the_baseline_and_reads_a_good_log_once_a_night(
    lake, lake_dir, monkeypatch
):
    from acme.diagnosis import baseline_lookup as baseline_module
    from acme.diagnosis.nightly import diagnose_chunk, plan_folder, plan_run

    reads: list[str] = []
    real = baseline_module.BaselineFinder._baseline_from_log

    def counted(self, cluster, family, good):
        reads.append(good["job_id"])
        return real(self, cluster, family, good)

    monkeypatch.setattr(baseline_module.BaselineFinder, "_baseline_from_log", counted)
    plan = plan_run(lake, [(CLUSTER, DAY)], run_id="night-h31", chunks=2)
    assert plan["with_log"] == 4 and [c["jobs"] for c in plan["chunks"]] == [2, 2]  # 503, 504 | 602, 702
    for chunk in plan["chunks"]:
        diagnose_chunk(lake, chunk["plan"], chunk["chunk"], agent=None)
    # 503 and 504 share the good run 502: its log is read once; 702's good run 701 is looked at once.
    assert sorted(reads) == ["502", "701"]
    cached = lake.read_json(f"{plan_folder('night-h31')}/baselines/cluster={CLUSTER}/job=502.json")
    assert cached["job_id"] == "502" and cached["keys"]
    records = _stored(lake_dir)
    assert set(records) == {"503", "504", "602", "702"}
    for job_id in ("503", "504"):
        note = records[job_id]["note"]
        assert "job 502" in note and "kept lines are new since the last good run" in note
        assert records[job_id]["reason"] == "NameError"
        assert json.loads(records[job_id]["evidence"])[0]["line"] == 21  # the decisive line, new since 502
    assert "last good run" not in (records["602"]["note"] or "")  # no good run: nothing to say in the record
    assert "has no log at" in records["702"]["note"] and records["702"]["reason"] == "NameError"
    # Another chunk of the same night (a new process) reads the templates from the run's folder, not the log.
    reads.clear()
    again = baseline_module.BaselineFinder(lake, cache_folder=plan_folder("night-h31"))
    assert again.for_job(CLUSTER, _failed(lake)["503"]).good_job_id == "502" and reads == []


def test_the_command_line_looks_the_baseline_up_or_takes_the_given_log(lake, lake_dir, tmp_path):
    from acme.diagnosis.diagnose_cli import diagnose_log_cli
    from acme.errors import InputError

    job = json.dumps({"cluster": CLUSTER, "job_id": "503", "submit_time": "2024-03-10T01:00:00+00:00"})
    looked_up = diagnose_log_cli(FAILED_LOG, job, str(lake_dir))
    assert looked_up["reason"] == "NameError" and "job 502" in looked_up["baseline"]
    given = diagnose_log_cli(FAILED_LOG, None, None, GOOD_LOG)
    assert str(GOOD_LOG) in given["baseline"] and given["evidence"][0]["line"] == 21
    assert "baseline" not in diagnose_log_cli(FAILED_LOG)  # no lake, no log given: as before
    with pytest.raises(InputError, match="baseline log"):
        diagnose_log_cli(FAILED_LOG, None, None, tmp_path / "missing.log")
