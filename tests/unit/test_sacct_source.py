"""The Slurm sacct job source (acme.jobs.sacct) on real and constructed sacct output.

Fixture provenance: tests/fixtures/sacct/SOURCES.md.
"""

from __future__ import annotations

import random
import re
import stat
import sys
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from acme.errors import ConfigError, InputError, SchemaDriftError
from acme.jobs import sacct as sacct_module
from acme.jobs.classify import JobTypeClassifier, JobTypeRule, load_classifier
from acme.jobs.sacct import (
    DEFAULT_FIELDS,
    LIVE_STATES,
    SKIP_COMMENT,
    SKIP_PENDING,
    SKIP_SUPERSEDED,
    parse_sacct,
    read_sacct_file,
    run_sacct,
    sacct_command,
)
from acme.jobs.schema import JOB_COLUMNS, STATES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sacct"

HB_FIELDS = (
    "JobID,JobName,User,Partition,NodeList,NNodes,NCPUs,NTasks,State,Submit,Start,End,Timelimit,Elapsed,"
    "TotalCPU,CPUTime,UserCPU,SystemCPU,ReqMem,MaxRSS,MaxVMSize,ReqTRES,AllocTRES,TRESUsageInMax,"
    "TRESUsageInTot,TRESUsageOutTot,MaxDiskRead,MaxDiskWrite,MaxRSSNode,MaxRSSTask,MaxVMSizeNode,"
    "MaxVMSizeTask,MaxDiskReadNode,MaxDiskReadTask,MaxDiskWriteNode,MaxDiskWriteTask,Comment"
)
SLYME_FIELDS = [
    "User", "JobID", "JobName", "State", "Partition", "NCPUS", "NNodes", "CPUTime", "TotalCPU", "UserCPU",
    "SystemCPU", "ReqMem", "MaxRSS", "Submit", "Start", "End", "NodeList",
]  # fmt: skip
FRONTIER_FIELDS = (
    "JobID",
    "JobName",
    "Partition",
    "QOS",
    "State",
    "ExitCode",
    "Elapsed",
    "Timelimit",
    "NNodes",
    "AllocTRES",
    "Submit",
    "Start",
    "End",
)
HEADER = "|".join(DEFAULT_FIELDS)


def utc(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def parse(text: str, **kwargs) -> sacct_module.ParseResult:
    kwargs.setdefault("source_file", "test.txt")
    return parse_sacct(text, "testcluster", **kwargs)


def fixture(name: str) -> str:
    return read_sacct_file(FIXTURES / name)


def by_id(result) -> dict[str, dict]:
    return {row["job_id"]: row for row in result.jobs.to_dict("records")}


def line(**values: str) -> str:
    """A DEFAULT_FIELDS line for a good COMPLETED job, with some fields replaced."""
    row = {
        "JobID": "100",
        "JobName": "train",
        "User": "u1",
        "Partition": "gpu",
        "State": "COMPLETED",
        "Submit": "2024-03-10T00:00:00",
        "Start": "2024-03-10T00:01:00",
        "End": "2024-03-10T01:01:00",
        "Elapsed": "01:00:00",
        "NNodes": "1",
        "NCPUS": "8",
        "NodeList": "gpu01",
        "AllocTRES": "billing=8,cpu=8,gres/gpu=1,mem=64G,node=1",
        "ReqTRES": "billing=8,cpu=8,gres/gpu=1,mem=64G,node=1",
        "ExitCode": "0:0",
    }
    row.update(values)
    return "|".join(row[f] for f in DEFAULT_FIELDS)


def assert_invariant(result) -> None:
    assert result.rows_in == (
        len(result.jobs) + len(result.rejects) + result.skipped_other_days + sum(result.skipped.values())
    )
    assert result.skipped_other_days == 0
    assert list(result.jobs.columns) == list(JOB_COLUMNS)
    for name in ("submit_time", "start_time", "end_time"):
        assert str(result.jobs[name].dtype) == "datetime64[us, UTC]"
    assert (result.jobs["source"] == "sacct").all()
    assert not result.jobs["job_id"].str.contains(r"\.", regex=True).any(), "a step was not folded"
    assert result.jobs["job_id"].is_unique


# --------------------------------------------------------------------------- real fixtures


def test_habrok_header_less_parsable_with_snowman_delimiter():
    result = parse(
        fixture("hb_jobinfo_habrok.txt"),
        fields=HB_FIELDS,
        delimiter="☃",
        tz="Europe/Amsterdam",
        source_file="hb",
    )
    assert_invariant(result)
    # 46 lines: 26 job lines (25 jobs + 1 PENDING job, skipped and counted) and 20 step lines
    # folded into them.
    assert (result.rows_in, len(result.jobs), len(result.rejects)) == (26, 25, 0)
    assert result.skipped == {SKIP_PENDING: 1}
    assert "7951810" not in set(result.jobs["job_id"])
    assert result.notes == [f"1 skipped: {SKIP_PENDING}"]

    jobs = by_id(result)
    # A CANCELLED GPU job; AllocTRES has gres/gpu:v100=1 *and* gres/gpu=1 -> 1 GPU, not 2.
    j = jobs["7965768"]
    assert j["state"] == "CANCELLED" and j["state_group"] == "cancelled"
    assert j["submit_time"] == utc("2024-04-04T17:29:45")  # 19:29:45 CEST
    assert j["start_time"] == utc("2024-04-04T19:45:17")
    assert j["end_time"] == utc("2024-04-05T11:13:39")
    assert j["run_s"] == j["source_duration_s"] == 15 * 3600 + 28 * 60 + 22
    assert (j["gpu_num"], j["cpu_num"], j["node_num"], j["node_list"]) == (1, 8, 1, "v100gpu16")
    assert j["gpu_time"] == j["run_s"]
    assert (j["user"], j["job_name"], j["source_line"], j["job_type"]) == (
        "user2",
        "P7WYGV7QAUP",
        10,
        "Other",
    )
    assert pd.isna(j["exit_code"])  # no ExitCode in this --format
    # Winter time (CET, +01:00) and a two-node job with .batch/.extern/.0 steps folded.
    j = jobs["6708912"]
    assert j["state"] == "TIMEOUT"  # the job line wins over its CANCELLED .batch and FAILED .0
    assert j["submit_time"] == utc("2024-01-01T09:45:27")
    assert (j["node_num"], j["cpu_num"], j["node_list"]) == (2, 256, "omni[11-12]")
    assert j["source_duration_s"] == 3 * 86400 + 25
    # Cancelled before it started: no start, no nodes; CPUs from ReqTRES (NCPUs is 0).
    j = jobs["4047445"]
    assert j["state"] == "CANCELLED" and pd.isna(j["start_time"]) and pd.isna(j["run_s"])
    assert pd.isna(j["node_list"]) and j["cpu_num"] == 8 and j["gpu_num"] == 0
    # Array tasks are jobs of their own.
    assert {"5908801_3", "2344446_26", "2344448_100"} <= set(jobs)
    assert jobs["2344446_26"]["node_list"] == "node[34,37]"
    assert result.jobs["state"].isin(STATES).all()


def test_odyssey_header_less_parsable2_folds_steps():
    result = parse(
        fixture("fasrc_slyme_parallel.txt"), fields=SLYME_FIELDS, tz="America/New_York", source_file="p"
    )
    assert_invariant(result)
    assert (result.rows_in, len(result.jobs), len(result.rejects)) == (1, 1, 0)
    j = result.jobs.iloc[0]
    assert (j["job_id"], j["user"], j["job_name"], j["state"]) == (
        "77454",
        "jab",
        "cpu_user_parallel",
        "COMPLETED",
    )
    assert j["submit_time"] == utc("2014-06-26T15:51:28")  # 11:51:28 EDT
    assert j["end_time"] == utc("2014-06-26T15:52:31")
    assert j["run_s"] == 63 and pd.isna(j["source_duration_s"])  # no Elapsed field
    assert (j["cpu_num"], j["node_num"], j["node_list"]) == (3, 2, "hero[4515-4516]")
    assert pd.isna(j["gpu_num"]) and j["job_type"] == "CPU"
    assert any("no AllocTRES/ReqTRES" in note for note in result.notes)

    serial = parse(fixture("fasrc_slyme_serial.txt"), fields=",".join(SLYME_FIELDS), tz="America/New_York")
    assert_invariant(serial)
    assert serial.jobs["job_id"].tolist() == ["77369"]
    assert serial.jobs["run_s"].tolist() == [62.0]


def test_triton_header_with_multichar_delimiter():
    result = parse(fixture("slurm2sql_triton.txt"), delimiter=";|;", tz="Europe/Helsinki")
    assert_invariant(result)
    assert (result.rows_in, len(result.jobs), len(result.rejects)) == (2, 2, 0)
    jobs = by_id(result)
    j = jobs["43974388"]
    assert j["state"] == "CANCELLED"  # "CANCELLED by 1300204"
    assert j["submit_time"] == utc("2019-07-31T19:29:13")  # 22:29:13 EEST
    assert j["end_time"] == utc("2019-07-31T23:02:39")
    assert j["run_s"] == j["source_duration_s"] == 3 * 3600 + 33 * 60 + 25
    assert j["exit_code"] == 0  # the job line's 0:0, not the .batch step's 0:9
    assert (j["cpu_num"], j["node_num"], j["node_list"], j["source_line"]) == (2, 1, "pe2", 2)
    assert pd.isna(j["gpu_num"])  # TRES fields present but empty everywhere
    j = jobs["43977780"]
    # End=Unknown on a cancelled job: End = Start + Elapsed (17 s), and a note says so.
    assert j["state"] == "CANCELLED" and j["end_time"] == utc("2019-07-31T21:35:44") and j["run_s"] == 17
    assert j["source_line"] == 5 and j["source_duration_s"] == 17
    assert any("End = Start + Elapsed" in note for note in result.notes)


def test_frontier_times_are_converted_from_cluster_local_time():
    result = parse(fixture("emender_frontier_e97_32node.txt"), fields=FRONTIER_FIELDS, tz="America/New_York")
    assert_invariant(result)
    assert (result.rows_in, len(result.jobs)) == (1, 1)
    j = result.jobs.iloc[0]
    # The source's run directory is stamped 20260624T110146Z: sacct's 07:01:42 is EDT.
    assert j["start_time"] == utc("2026-06-24T11:01:42")
    assert j["submit_time"] == utc("2026-06-24T11:01:33")
    assert j["end_time"] == utc("2026-06-24T11:22:04")
    assert j["run_s"] == j["source_duration_s"] == 1222
    assert j["queue_s"] == 9
    assert (j["node_num"], j["cpu_num"], j["gpu_num"], j["exit_code"]) == (32, 3584, 0, 0)
    assert pd.isna(j["user"]) and j["job_type"] == "CPU"


def test_real_header_without_times_is_schema_drift():
    with pytest.raises(SchemaDriftError) as caught:
        parse(fixture("cluster_utils_issue87.txt"), source_file="galvani.txt")
    assert isinstance(caught.value, InputError)
    problem = caught.value.problem
    assert "Start and End" in problem and "JobID, NodeList, State, ExitCode" in problem
    assert "Submit" not in problem.split("(it has")[0] and "sacct --format" in problem
    assert "JobID" not in caught.value.problem.split("(")[0]
    assert caught.value.source == "galvani.txt"


def test_constructed_edge_cases():
    result = parse(fixture("constructed_edge_cases.txt"), source_file="edge.txt")
    assert_invariant(result)
    assert (result.rows_in, len(result.jobs), len(result.rejects)) == (16, 15, 0)
    assert result.skipped == {SKIP_PENDING: 1}  # the pending range 7100_[5-9%2]
    jobs = by_id(result)
    assert set(jobs) == {
        "7000+0", "7000+1", "7100_1", "7100_2", "7101_[3-4]", "7200", "7201", "7202", "7203", "7204",
        "7205", "7206", "7207", "7208", "7209",
    }  # fmt: skip
    # Heterogeneous components are separate jobs; gres/gpu=16 + gres/gpu:a100=16 is 16 GPUs.
    assert (jobs["7000+0"]["gpu_num"], jobs["7000+0"]["node_num"], jobs["7000+0"]["job_type"]) == (
        16,
        2,
        "Pretrain",
    )
    assert (jobs["7000+1"]["gpu_num"], jobs["7000+1"]["job_type"]) == (0, "CPU")
    # RUNNING: End Unknown.
    running = jobs["7100_2"]
    assert running["state"] == "RUNNING" and pd.isna(running["end_time"]) and pd.isna(running["run_s"])
    assert running["source_duration_s"] == 3000 and running["job_type"] == "Eval"
    # A cancelled, never-expanded array range is one record; resources from the request.
    rng = jobs["7101_[3-4]"]
    assert rng["state"] == "CANCELLED" and pd.isna(rng["start_time"]) and pd.isna(rng["node_list"])
    assert (rng["gpu_num"], rng["cpu_num"]) == (1, 8)
    # Typed-only GPU entries are summed; Elapsed with days.
    assert jobs["7200"]["gpu_num"] == 6
    assert jobs["7200"]["source_duration_s"] == 86400 + 2 * 3600 + 3 * 60 + 4 == jobs["7200"]["run_s"]
    assert jobs["7200"]["exit_code"] == 1
    assert jobs["7201"]["source_duration_s"] == 184  # "03:04"
    states = {k: v["state"] for k, v in jobs.items()}
    assert states["7201"] == "OUT_OF_MEMORY" and states["7202"] == "NODE_FAIL"
    assert states["7203"] == "PREEMPTED" and states["7204"] == "TIMEOUT"
    assert states["7205"] == states["7206"] == "RUNNING"  # REQUEUED, SUSPENDED
    assert states["7207"] == "WEIRD_STATE" and pd.isna(jobs["7207"]["state_group"])
    # Missing NodeList/ExitCode on the job line come from the .extern / .batch steps.
    assert (jobs["7208"]["node_list"], jobs["7208"]["exit_code"]) == ("gpu[09-10]", 2)
    assert jobs["7209"]["exit_code"] == 0  # 0:9, killed by signal 9
    assert jobs["7204"]["exit_code"] == 0  # the job line's 0:0, not the batch step's 0:15


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("hb_jobinfo_habrok.txt", {"fields": HB_FIELDS, "delimiter": "☃", "tz": "Europe/Amsterdam"}),
        ("fasrc_slyme_parallel.txt", {"fields": SLYME_FIELDS, "tz": "America/New_York"}),
        ("fasrc_slyme_serial.txt", {"fields": SLYME_FIELDS, "tz": "America/New_York"}),
        ("slurm2sql_triton.txt", {"delimiter": ";|;", "tz": "Europe/Helsinki"}),
        ("emender_frontier_e97_32node.txt", {"fields": FRONTIER_FIELDS, "tz": "America/New_York"}),
        ("constructed_edge_cases.txt", {}),
    ],
)
def test_day_is_ignored_and_invariant_holds(name, kwargs):
    text = fixture(name)
    plain = parse(text, **kwargs)
    dated = parse(text, day=date(2000, 1, 1), **kwargs)
    assert_invariant(plain)
    pd.testing.assert_frame_equal(plain.jobs, dated.jobs)
    assert dated.skipped_other_days == 0


# --------------------------------------------------------------------------- input forms


def test_header_less_with_fields_equals_header():
    text = fixture("constructed_edge_cases.txt")
    body = text.split("\n", 1)[1]
    with_header = parse(text)
    as_list = parse(body, fields=DEFAULT_FIELDS)
    as_string = parse(body, fields=",".join(f.lower() + "%20" for f in DEFAULT_FIELDS))
    for other in (as_list, as_string):
        pd.testing.assert_frame_equal(
            with_header.jobs.drop(columns="source_line"), other.jobs.drop(columns="source_line")
        )
        assert (other.jobs["source_line"] == with_header.jobs["source_line"] - 1).all()


def test_parsable_trailing_delimiter_is_accepted():
    text = fixture("constructed_edge_cases.txt")
    trailing = "\n".join(f"{ln}|" if ln else ln for ln in text.split("\n"))
    assert trailing.startswith(HEADER + "|\n")
    pd.testing.assert_frame_equal(parse(text).jobs, parse(trailing).jobs)
    header_less = "\n".join(trailing.split("\n")[1:])
    assert len(parse(header_less, fields=DEFAULT_FIELDS).jobs) == 15


def test_crlf_line_ends_and_blank_lines():
    text = fixture("constructed_edge_cases.txt")
    crlf = text.replace("\n", "\r\n")
    spaced = text.replace(line_1 := text.split("\n")[1], line_1 + "\n   ")
    pd.testing.assert_frame_equal(parse(text).jobs, parse(crlf).jobs)
    result = parse(spaced)
    assert len(result.jobs) == 15 and result.jobs["source_line"].max() == 23  # physical lines


def test_header_wins_over_a_different_field_list():
    text = f"{HEADER}\n{line()}\n"
    result = parse(text, fields=["JobID", "State", "Submit"])
    assert len(result.jobs) == 1
    assert any("header line differs" in note for note in result.notes)


def test_header_only_input_gives_no_jobs():
    result = parse(HEADER + "\n")
    assert (result.rows_in, len(result.jobs), len(result.rejects)) == (0, 0, 0)
    assert list(result.jobs.columns) == list(JOB_COLUMNS)


@pytest.mark.parametrize("text", ["", "\n", "   \n\t\n"])
def test_empty_input(text):
    with pytest.raises(InputError) as caught:
        parse(text, source_file="e.txt")
    assert (
        caught.value.problem.startswith("empty: not even sacct's header line")
        and caught.value.source == "e.txt"
    )


def test_no_header_and_no_fields():
    with pytest.raises(InputError) as caught:
        parse("\n" + line() + "\n", source_file="nh.txt")
    assert "no header line and no field list" in caught.value.problem
    assert caught.value.line == 2
    assert not isinstance(caught.value, SchemaDriftError)


def test_field_list_without_required_fields_is_schema_drift():
    with pytest.raises(SchemaDriftError) as caught:
        parse("100|COMPLETED\n", fields=["JobID", "State"])
    assert "field list" in caught.value.problem and "Start and End" in caught.value.problem
    assert "--fields" in caught.value.problem


def test_header_missing_several_required_fields():
    with pytest.raises(SchemaDriftError) as caught:
        parse("JobID|JobName|MaxRSS|\n123|x|1K|\n")
    assert "State, Start and End" in caught.value.problem


def test_unknown_time_zone():
    with pytest.raises(ConfigError):
        parse(f"{HEADER}\n{line()}\n", tz="Mars/Olympus")


# --------------------------------------------------------------------------- bad lines


BAD_CASES = [
    ("100|train", "wrong field count: expected 15 '|'-separated fields, got 2"),
    (line(JobName="a|b"), "wrong field count: expected 15 '|'-separated fields, got 16"),
    (line(JobID=""), "missing JobID"),
    (line(JobID="abc"), "malformed JobID 'abc'"),
    (line(JobID="12.3.4"), "malformed JobID '12.3.4'"),
    (line(Submit="2024-13-45T99:00:00"), "unparseable Submit '2024-13-45T99:00:00'"),
    (line(Submit="yesterday"), "unparseable Submit 'yesterday'"),
    (line(Submit="Unknown", Start="", End=""), "no time at all"),
    (line(Start="2024-03-10 00:01"), "unparseable Start '2024-03-10 00:01'"),
    (line(End="2024-02-30T00:00:00"), "unparseable End '2024-02-30T00:00:00'"),
    (line(Elapsed="1h"), "unparseable Elapsed '1h'"),
    (line(NNodes="two"), "unparseable NNodes 'two'"),
    (line(NCPUS="-8"), "unparseable NCPUS '-8'"),
    (line(ExitCode="x:y"), "unparseable ExitCode 'x:y'"),
    (line(AllocTRES="cpu=8,gres/gpu=many"), "AllocTRES: unparseable gres/gpu count 'many'"),
    (line(AllocTRES="cpu=8,gpu"), "AllocTRES: malformed TRES entry 'gpu'"),
    (line(AllocTRES="", ReqTRES="gres/gpu:a100=x"), "ReqTRES: unparseable gres/gpu:a100 count 'x'"),
    (line(State=""), "empty State"),
]


@pytest.mark.parametrize(("bad", "reason"), BAD_CASES)
def test_bad_line_is_rejected_with_reason_and_line(bad, reason):
    text = "\n".join([HEADER, line(JobID="1"), bad, line(JobID="2")]) + "\n"
    result = parse(text, source_file="bad.txt")
    assert_invariant(result)
    assert result.jobs["job_id"].tolist() == ["1", "2"]
    assert len(result.rejects) == 1
    reject = result.rejects.iloc[0]
    assert reject["source_line"] == 3
    assert reject["reason"].startswith(reason)
    assert reject["record"] == bad
    assert reject["source_file"] == "bad.txt"


def test_several_problems_on_one_line_are_all_named():
    bad = line(JobID="9", Submit="never", NNodes="x", ExitCode="?")
    result = parse(f"{HEADER}\n{bad}\n")
    reason = result.rejects.iloc[0]["reason"]
    assert reason == "unparseable Submit 'never'; unparseable NNodes 'x'; unparseable ExitCode '?'"


def test_orphan_step_is_rejected():
    text = "\n".join([HEADER, line(JobID="1"), line(JobID="777.batch"), line(JobID="777.extern")]) + "\n"
    result = parse(text)
    assert_invariant(result)
    assert result.jobs["job_id"].tolist() == ["1"]
    assert result.rejects["source_line"].tolist() == [3, 4]
    assert result.rejects["reason"].iloc[0] == "orphan step 777.batch: job 777 has no job line in this input"
    assert result.rows_in == 3


def test_step_id_forms_fold_into_their_job():
    ids = ["7", "7.0+1", "7.batch", "8_3", "8_3.extern", "8_3.12", "9+1", "9+1.0", "9+1.batch", "9+0"]
    result = parse("\n".join([HEADER, *(line(JobID=i) for i in ids)]) + "\n")
    assert_invariant(result)
    assert result.jobs["job_id"].tolist() == ["7", "8_3", "9+1", "9+0"]
    assert (result.rows_in, len(result.rejects)) == (4, 0)


def test_step_before_its_job_line_is_folded():
    text = "\n".join(
        [HEADER, line(JobID="5.batch", NodeList="n9", ExitCode="3:0"), line(JobID="5", ExitCode="")]
    )
    result = parse(text)
    assert (result.rows_in, len(result.jobs), len(result.rejects)) == (1, 1, 0)
    assert result.jobs["exit_code"].tolist() == [3]


def test_duplicate_job_line_keeps_the_later_one():
    text = "\n".join([HEADER, line(JobID="5", State="REQUEUED"), line(JobID="5", State="COMPLETED")]) + "\n"
    result = parse(text)
    assert_invariant(result)
    assert (result.rows_in, len(result.jobs), len(result.rejects)) == (2, 1, 0)
    assert result.jobs["state"].tolist() == ["COMPLETED"]
    assert result.jobs["source_line"].tolist() == [3]
    assert result.skipped == {SKIP_SUPERSEDED: 1}  # an older record of the job, not a defect


def test_bad_step_lines_do_not_reject_their_job():
    text = "\n".join(
        [HEADER, line(JobID="5", NodeList="", ExitCode=""), line(JobID="5.batch", ExitCode="??")]
    )
    result = parse(text)
    assert (len(result.jobs), len(result.rejects)) == (1, 0)
    assert pd.isna(result.jobs["exit_code"].iloc[0])


# --------------------------------------------------------------------------- states, times, GPUs


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        ("COMPLETED", "COMPLETED"),
        ("CANCELLED by 1234", "CANCELLED"),
        ("CANCELLED by 0", "CANCELLED"),
        ("CANCELLED+", "CANCELLED"),
        ("FAILED", "FAILED"),
        ("TIMEOUT", "TIMEOUT"),
        ("NODE_FAIL", "NODE_FAIL"),
        ("OUT_OF_MEMORY", "OUT_OF_MEMORY"),
        ("PREEMPTED", "PREEMPTED"),
        ("RUNNING", "RUNNING"),
        ("BOOT_FAIL", "NODE_FAIL"),
        ("DEADLINE", "TIMEOUT"),
        ("REVOKED", "CANCELLED"),
        ("REQUEUED", "RUNNING"),
        ("REQUEUE_HOLD", "RUNNING"),
        ("RESIZING", "RUNNING"),
        ("SUSPENDED", "RUNNING"),
        ("COMPLETING", "RUNNING"),
        ("completed", "COMPLETED"),
        ("SPECIAL_EXIT", "SPECIAL_EXIT"),  # unknown: kept for the validation step
    ],
)
def test_state_mapping(raw, state):
    result = parse(f"{HEADER}\n{line(State=raw)}\n")
    assert result.jobs["state"].tolist() == [state]


def test_times_with_an_offset_use_their_own_offset():
    text = f"{HEADER}\n{line(Submit='2023-02-21T14:37:02+0100', Start='2023-02-21T14:37:07+01:00', End='Unknown')}\n"
    for tz in ("UTC", "Asia/Tokyo"):
        job = parse(text, tz=tz).jobs.iloc[0]
        assert job["submit_time"] == utc("2023-02-21T13:37:02")
        assert job["start_time"] == utc("2023-02-21T13:37:07")


def test_daylight_saving_edges_are_noted():
    text = "\n".join(
        [
            HEADER,
            line(
                JobID="1", Submit="2024-11-03T01:30:00", Start="2024-11-03T03:00:00", End="None"
            ),  # repeated hour
            line(
                JobID="2", Submit="2024-03-10T02:30:00", Start="2024-03-10T03:30:00", End="None"
            ),  # skipped hour
        ]
    )
    result = parse(text, tz="America/New_York")
    jobs = by_id(result)
    assert jobs["1"]["submit_time"] == utc("2024-11-03T05:30:00")  # read as EDT (-04:00)
    assert jobs["2"]["submit_time"] == utc("2024-03-10T07:00:00")  # shifted to 03:00 EDT
    assert any("repeated hour" in note for note in result.notes)
    assert any("skipped" in note for note in result.notes)


@pytest.mark.parametrize(
    ("alloc", "req", "gpus"),
    [
        ("billing=8,cpu=64,gres/gpu=8,mem=512G,node=1", "", 8),
        ("cpu=64,gres/gpu:a100=8,gres/gpu=8,mem=512G", "", 8),
        ("cpu=64,gres/gpu=8,gres/gpu:a100=8", "", 8),
        ("cpu=64,gres/gpu:a100=4,gres/gpu:h100=2", "", 6),
        ("cpu=64,gres/gpumem=20500736K,gres/gpuutil=90,mem=1G", "", 0),
        ("cpu=64,mem=512G,node=1", "gres/gpu=4", 0),  # allocated, with no GPU
        ("", "cpu=8,gres/gpu=4", 4),  # never started: the request
        ("", "", None),
    ],
)
def test_gpus_from_tres(alloc, req, gpus):
    job = parse(f"{HEADER}\n{line(AllocTRES=alloc, ReqTRES=req)}\n").jobs.iloc[0]
    assert (None if pd.isna(job["gpu_num"]) else job["gpu_num"]) == gpus


def test_cpu_and_nodes_from_tres_when_counts_are_missing():
    fields = ("JobID", "State", "Submit", "AllocTRES")
    job = parse(
        "7|COMPLETED|2024-01-01T00:00:00|billing=4,cpu=48,gres/gpu=2,node=3\n", fields=fields
    ).jobs.iloc[0]
    assert (job["cpu_num"], job["node_num"], job["gpu_num"]) == (48, 3, 2)
    assert pd.isna(job["exit_code"]) and pd.isna(job["job_name"]) and pd.isna(job["end_time"])


@pytest.mark.parametrize(
    ("elapsed", "seconds"),
    [("1-02:03:04", 93784), ("02:03:04", 7384), ("03:04.123", 184.123), ("00:00:00", 0), ("", None)],
)
def test_elapsed_formats(elapsed, seconds):
    job = parse(f"{HEADER}\n{line(Elapsed=elapsed)}\n").jobs.iloc[0]
    if seconds is None:
        assert pd.isna(job["source_duration_s"])
    else:
        assert job["source_duration_s"] == pytest.approx(seconds)


def test_names_are_free_text():
    job = parse(f"{HEADER}\n{line(JobName='None', User='Unknown', NodeList='None assigned')}\n").jobs.iloc[0]
    assert (job["job_name"], job["user"]) == ("None", "Unknown")
    assert pd.isna(job["node_list"])


def test_elapsed_raw_is_used_without_elapsed():
    fields = ("JobID", "State", "Submit", "ElapsedRaw")
    result = parse("7|COMPLETED|2024-01-01T00:00:00|4920\n8|COMPLETED|2024-01-01T00:00:00|x\n", fields=fields)
    assert result.jobs["source_duration_s"].tolist() == [4920.0]
    assert result.rejects["reason"].tolist() == ["unparseable ElapsedRaw 'x'"]


# --------------------------------------------------------------------------- classification


def test_classifier_argument_is_used():
    only_eval = JobTypeClassifier([JobTypeRule("Eval", partition=re.compile("gpu"))])
    result = parse(f"{HEADER}\n{line(JobName='anything')}\n", classifier=only_eval)
    assert result.jobs["job_type"].tolist() == ["Eval"]


def test_rulewise_classification_matches_classify():
    classifier = load_classifier()
    rng = random.Random(7)
    words = ["train", "eval", "sft", "llava", "pt", "bash", "debug", "mmlu", "x", "", "Pretrain-7B", "vl"]
    keys = [
        (
            rng.choice([None, "-".join(rng.sample(words, 2)), rng.choice(words)]),
            rng.choice([None, "gpu", "debug", "dev-a100", "cpu"]),
            rng.choice([0, 0, 1, 8]),
        )
        for _ in range(3000)
    ]
    names, parts, gpus = zip(*keys, strict=True)
    fast = sacct_module._classify_all(classifier, list(names), list(parts), list(gpus))
    slow = [classifier.classify(n, p, gpu_num=g) for n, p, g in keys]
    assert fast == slow
    assert sacct_module._plain_rules(classifier)

    class Custom(JobTypeClassifier):
        def classify(self, name, partition=None, labels=None, gpu_num=0):
            return "Debug"

    assert not sacct_module._plain_rules(Custom(classifier.rules))
    assert sacct_module._classify_all(Custom(classifier.rules), ["a"], ["b"], [1]) == ["Debug"]


# --------------------------------------------------------------------------- encoding


def test_read_sacct_file_replaces_non_utf8_and_parse_notes_it(tmp_path):
    path = tmp_path / "latin1.txt"
    text = f"{HEADER}\n{line(JobID='1')}\n{line(JobID='2', JobName='caf@')}\n"
    path.write_bytes(text.encode().replace(b"@", b"\xe9"))  # a Latin-1 job name
    text = read_sacct_file(path)
    assert "caf\ufffd" in text
    result = parse(text)
    assert len(result.jobs) == 2
    assert by_id(result)["2"]["job_name"] == "caf\ufffd"
    assert any("U+FFFD" in note and "line 3" in note for note in result.notes)


def test_read_sacct_file_strict_names_offset_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    data = f"{HEADER}\n{line(JobName='caf@')}\n".encode().replace(b"@", b"\xe9")
    path.write_bytes(data)
    with pytest.raises(InputError) as caught:
        read_sacct_file(path, strict=True)
    assert caught.value.source == str(path)
    offset = data.index(b"\xe9")
    assert f"byte 0xe9 at byte offset {offset}" in caught.value.problem
    assert caught.value.line == 2


def test_read_sacct_file_rejects_utf16_and_missing_files(tmp_path):
    path = tmp_path / "utf16.txt"
    path.write_bytes(f"{HEADER}\n".encode("utf-16"))
    with pytest.raises(InputError, match="NUL byte"):
        read_sacct_file(path)
    with pytest.raises(InputError, match="cannot read"):
        read_sacct_file(tmp_path / "missing.txt")


def test_read_sacct_file_drops_a_bom(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + f"{HEADER}\n{line()}\n".encode())
    assert len(parse(read_sacct_file(path)).jobs) == 1


# --------------------------------------------------------------------------- live mode


def test_sacct_command_utc_window():
    argv = sacct_command(date(2024, 3, 10))
    assert argv == [
        "sacct",
        "--parsable2",
        "--allusers",
        "--allocations",
        "--starttime=2024-03-10T00:00:00",
        "--endtime=2024-03-11T00:00:00",
        "--state=" + ",".join(LIVE_STATES),
        "--format=" + ",".join(DEFAULT_FIELDS),
    ]
    assert "PD" not in LIVE_STATES and "--noheader" not in argv


def test_sacct_command_window_in_cluster_time_and_ssh_prefix():
    argv = sacct_command(
        date(2024, 3, 10), ("ssh", "login1", "sacct"), ("JobID", "State", "Submit"), tz="America/New_York"
    )
    assert argv[:4] == ["ssh", "login1", "sacct", "--parsable2"]
    # The UTC day 2024-03-10 in New York wall-clock time; summer time starts that day.
    assert "--starttime=2024-03-09T19:00:00" in argv
    assert "--endtime=2024-03-10T20:00:00" in argv
    assert argv[-1] == "--format=JobID,State,Submit"


def test_sacct_command_needs_required_fields():
    with pytest.raises(ConfigError, match="Start and End"):
        sacct_command(date(2024, 3, 10), fields=("JobID", "State"))


def fake_command(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "fake-sacct"
    script.write_text(f"#!{sys.executable}\nimport sys, time\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return [str(script)]


def test_run_sacct_returns_stdout_and_passes_the_window(tmp_path):
    record = tmp_path / "argv.txt"
    out = FIXTURES / "constructed_edge_cases.txt"
    base = fake_command(
        tmp_path,
        f"open({str(record)!r}, 'w').write(' '.join(sys.argv[1:]))\n"
        f"sys.stdout.buffer.write(open({str(out)!r}, 'rb').read())",
    )
    text = run_sacct(date(2024, 3, 10), base)
    assert text == out.read_text()
    assert record.read_text().split() == sacct_command(date(2024, 3, 10), ())
    assert len(parse(text).jobs) == 15


def test_run_sacct_failure_names_the_command(tmp_path):
    base = fake_command(
        tmp_path, "sys.stderr.write('sacct: error: Problem talking to the database\\n'); sys.exit(3)"
    )
    with pytest.raises(InputError) as caught:
        run_sacct(date(2024, 3, 10), base)
    assert "fake-sacct" in caught.value.source and "--starttime=2024-03-10T00:00:00" in caught.value.source
    assert "exited with status 3" in caught.value.problem
    assert "Problem talking to the database" in caught.value.problem


def test_run_sacct_timeout(tmp_path):
    base = fake_command(tmp_path, "time.sleep(30)")
    with pytest.raises(InputError, match="timed out after 0.5 s"):
        run_sacct(date(2024, 3, 10), base, timeout_s=0.5)


def test_run_sacct_missing_command(tmp_path):
    with pytest.raises(InputError, match="command not found"):
        run_sacct(date(2024, 3, 10), [str(tmp_path / "no-such-sacct")])


# --------------------------------------------------------------------------- speed


def test_100k_lines_fold_into_their_33k_jobs():
    """Scale, not speed (speed is benchmarks/bench_ingest_jobs.py's): every job once, its steps folded in."""
    classifier = load_classifier()
    rows = [HEADER]
    for i in range(33_334):
        job = 5_000_000 + i
        gpus = (0, 1, 8)[i % 3]
        rows.append(
            f"{job}|{('pretrain', 'sft', 'eval', 'job')[i % 4]}-{i % 997}|u{i % 211}|gpu|COMPLETED|"
            f"2024-03-10T0{i % 10}:{i % 60:02d}:00|2024-03-10T10:00:{i % 60:02d}|2024-03-10T11:{i % 60:02d}:00|"
            f"01:00:00|1|64|gpu{i % 500:03d}|billing=64,cpu=64,gres/gpu={gpus},mem=512G,node=1|"
            f"billing=64,cpu=64,gres/gpu={gpus},mem=512G,node=1|0:0"
        )
        for step in ("batch", "extern"):
            rows.append(f"{job}.{step}|{step}||||2024-03-10T10:00:00|2024-03-10T10:00:00|2024-03-10T11:00:00|"
                        f"01:00:00|1|64|gpu001|cpu=64,mem=512G,node=1||0:0")  # fmt: skip
    text = "\n".join(rows) + "\n"
    result = parse(text, classifier=classifier, tz="Europe/Amsterdam")
    assert len(rows) > 100_000 and len(result.jobs) == 33_334
    assert result.jobs["job_id"].is_unique and len(result.rejects) == 0


# --------------------------------------------------------------------------- field-shaped exports


def test_export_without_submit_has_null_queue_time_and_says_so():
    text = "JobID|State|Start|End|Elapsed\n11|COMPLETED|2024-03-10T10:00:00|2024-03-10T11:00:00|01:00:00\n"
    result = parse(text, source_file="nosubmit.txt")
    assert_invariant(result)
    job = result.jobs.iloc[0]
    assert pd.isna(job["submit_time"]) and pd.isna(job["queue_s"])
    assert job["start_time"] == pd.Timestamp("2024-03-10T10:00:00Z") and job["run_s"] == 3600
    assert any("no Submit field" in note and "queueing statistics" in note for note in result.notes)


def test_end_is_derived_from_start_and_elapsed_when_absent():
    text = "JobID|State|Start|Elapsed\n12|FAILED|2024-03-10T10:00:00|1-00:00:05\n13|RUNNING|2024-03-10T10:00:00|00:10:00\n"
    result = parse(text)
    jobs = by_id(result)
    assert jobs["12"]["end_time"] == pd.Timestamp("2024-03-11T10:00:05Z") and jobs["12"]["run_s"] == 86405
    assert pd.isna(jobs["13"]["end_time"])  # still running: no end
    assert any("End = Start + Elapsed" in note for note in result.notes)


def test_elapsed_only_export_is_refused_naming_the_fields_to_add():
    with pytest.raises(SchemaDriftError, match="Start and End .*sacct --format"):
        parse("JobID|State|Elapsed\n1|COMPLETED|00:01:00\n")


def test_pending_jobs_are_skipped_and_counted_not_rejected():
    text = "\n".join(
        [HEADER, line(JobID="1"), line(JobID="2", State="PENDING", Start="Unknown", End="Unknown")]
    )
    result = parse(text + "\n")
    assert_invariant(result)
    assert result.jobs["job_id"].tolist() == ["1"] and result.rejects.empty
    assert result.skipped == {SKIP_PENDING: 1}


def test_comment_lines_are_skipped_and_counted():
    text = "\n".join(["# exported by hand", HEADER, line(JobID="1"), "#" + line(JobID="2")]) + "\n"
    result = parse(text)
    assert_invariant(result)
    # the comment before the header is not a record (as a blank line); the one among the data is
    assert result.jobs["job_id"].tolist() == ["1"] and result.skipped == {SKIP_COMMENT: 1}


def test_hash_prefixed_tab_header_is_read():
    text = "#jobid\tstate\tstart\tend\n7\tCOMPLETED\t2017-06-12T20:40:15\t2017-06-12T21:28:29\n"
    result = parse(text, delimiter="\t")
    assert result.jobs["job_id"].tolist() == ["7"] and result.jobs["run_s"].tolist() == [2894.0]


def test_multi_byte_delimiter():
    text = "JobID::State::Start::End\n8::COMPLETED::2024-01-01T00:00:00::2024-01-01T00:00:10\n"
    assert parse(text, delimiter="::").jobs["run_s"].tolist() == [10.0]


def test_job_across_the_autumn_dst_change_is_consistent():
    # Europe/Amsterdam leaves summer time at 03:00 CEST on 2023-10-29 (clocks go back to 02:00):
    # a job from 00:30 to 05:30 local ran 6 hours, which is what sacct's Elapsed says.
    text = "JobID|State|Submit|Start|End|Elapsed\n9|COMPLETED|2023-10-29T00:20:00|2023-10-29T00:30:00|2023-10-29T05:30:00|06:00:00\n"
    result = parse(text, tz="Europe/Amsterdam")
    job = result.jobs.iloc[0]
    assert job["start_time"] == pd.Timestamp("2023-10-28T22:30:00Z")
    assert job["end_time"] == pd.Timestamp("2023-10-29T04:30:00Z")
    assert job["run_s"] == job["source_duration_s"] == 6 * 3600
