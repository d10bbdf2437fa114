"""Daylight-saving and leap-day boundaries in scheduler times: a local wall-clock time becomes the
right UTC instant, and durations across a change of offset are the elapsed time, not the clock
difference (sacct prints naive local times in the cluster's zone)."""

from __future__ import annotations

import pandas as pd

from acme.jobs.sacct import parse_sacct

HEADER = "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|AllocTRES|ReqTRES|ExitCode"
TAIL = "1|8|n1|cpu=8,gres/gpu=1|cpu=8|0:0"
ROWS = [  # job id, name, submit, start, end, sacct's Elapsed
    ("1", "leap-day", "2024-02-29T23:30:00", "2024-02-29T23:40:00", "2024-03-01T00:40:00", "01:00:00"),
    (
        "2",
        "across-spring-gap",
        "2024-03-10T01:50:00",
        "2024-03-10T03:10:00",
        "2024-03-10T04:10:00",
        "01:00:00",
    ),
    ("3", "in-spring-gap", "2024-03-10T02:30:00", "2024-03-10T03:10:00", "2024-03-10T04:10:00", "01:00:00"),
    (
        "4",
        "in-repeated-hour",
        "2024-11-03T01:30:00",
        "2024-11-03T01:40:00",
        "2024-11-03T01:50:00",
        "00:10:00",
    ),
    (
        "5",
        "across-fall-back",
        "2024-11-03T00:50:00",
        "2024-11-03T00:55:00",
        "2024-11-03T03:05:00",
        "03:10:00",
    ),
]


def parse():
    lines = [HEADER] + [f"{j}|{n}|a|gpu|COMPLETED|{s}|{st}|{e}|{el}|{TAIL}" for j, n, s, st, e, el in ROWS]
    return parse_sacct("\n".join(lines), "c", source_file="dst.txt", tz="America/New_York")


def utc(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def test_local_times_around_dst_and_leap_day_become_the_right_utc_instants():
    jobs = parse().jobs.set_index("job_id")
    assert len(jobs) == 5
    # Leap day, 23:30 EST (UTC-5) is already 1 March in UTC: the job belongs to that UTC day.
    assert jobs.loc["1", "submit_time"] == utc("2024-03-01 04:30")
    # Spring forward: 01:50 EST is 06:50Z, 03:10 EDT is 07:10Z -- 20 minutes of queueing, not 80.
    assert jobs.loc["2", "queue_s"] == 20 * 60
    # A time in the skipped hour (02:30 does not exist) is shifted forward to 03:00 EDT.
    assert jobs.loc["3", "submit_time"] == utc("2024-03-10 07:00")
    # Fall back: 00:55 EDT to 03:05 EST is 3 h 10 min elapsed (the clock says 2 h 10 min).
    assert jobs.loc["5", "run_s"] == 3 * 3600 + 10 * 60


def test_run_times_equal_the_schedulers_elapsed_and_ambiguities_are_reported():
    result = parse()
    elapsed = {j: pd.Timedelta(e).total_seconds() for j, _, _, _, _, e in ROWS}
    for job_id, run_s in zip(result.jobs["job_id"], result.jobs["run_s"], strict=True):
        assert run_s == elapsed[job_id], job_id
    assert result.rejects.empty
    notes = " ".join(result.notes)
    assert "skipped" in notes and "repeated hour" in notes
