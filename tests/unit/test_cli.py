"""The command line, run as a user runs it: a subprocess, JSON on stdout, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SACCT = ROOT / "tests" / "fixtures" / "sacct" / "constructed_edge_cases.txt"


def acme(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "acme", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_help_lists_the_commands():
    done = acme("--help")
    assert done.returncode == 0
    for command in ("ingest-jobs", "synth-trace", "lake-summary"):
        assert command in done.stdout


def test_ingest_acmetrace_prints_one_json_summary(tmp_path, shared_reference):
    sample = shared_reference / "acmetrace" / "samples" / "trace_kalos_sample.csv"
    done = acme("ingest-jobs", "--format", "acmetrace", "--cluster", "kalos", "--input", str(sample),
                "--lake", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["rows"] == 5 and summary["quarantined"] == 0
    assert summary["partitions"] == [str(tmp_path / "jobs/cluster=kalos/date=2023-05-17/jobs.parquet")]


def test_ingest_sacct_quarantines_bad_lines_and_keeps_the_rest(tmp_path):
    done = acme("ingest-jobs", "--format", "sacct", "--cluster", "seren", "--input", str(SACCT),
                "--lake", str(tmp_path), "--max-quarantine-share", "1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["rows"] > 0 and summary["quarantined"] > 0
    (quarantine,) = tmp_path.glob("quarantine/jobs/cluster=seren/*/*.parquet")
    assert Path(summary["quarantine"]) == quarantine


def test_the_quarantine_threshold_exits_2_with_the_file_and_first_problems(tmp_path):
    done = acme("ingest-jobs", "--format", "sacct", "--cluster", "seren", "--input", str(SACCT),
                "--lake", str(tmp_path))  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: {SACCT}: ") and "rows" in done.stderr and "line " in done.stderr
    assert "Traceback" not in done.stderr


def test_unusable_input_exits_2_naming_the_file(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    done = acme("ingest-jobs", "--format", "acmetrace", "--cluster", "seren", "--input", str(empty),
                "--lake", str(tmp_path / "lake"))  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {empty}: empty file: no header and no rows"
    missing = acme("ingest-jobs", "--format", "acmetrace", "--cluster", "seren", "--input", str(tmp_path / "nope.csv"),
                   "--lake", str(tmp_path / "lake"))  # fmt: skip
    assert missing.returncode == 2 and "nope.csv: no such file" in missing.stderr


def test_synth_trace_and_lake_summary(tmp_path):
    out = tmp_path / "days"
    done = acme("synth-trace", "--cluster", "kalos", "--start", "2023-07-01", "--days", "2", "--scale", "0.2",
                "--seed", "3", "--per-day", "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout)["files"]
    assert [Path(f).name for f in files] == ["2023-07-01.csv", "2023-07-02.csv"]
    for day_file in files:
        ingest = acme("ingest-jobs", "--format", "acmetrace", "--cluster", "kalos", "--input", day_file,
                      "--lake", str(tmp_path / "lake"))  # fmt: skip
        assert ingest.returncode == 0, ingest.stderr
    summary = json.loads(acme("lake-summary", "--lake", str(tmp_path / "lake"), "--json").stdout)
    assert [p["date"] for p in summary["partitions"]] == ["2023-07-01", "2023-07-02"]
    expected = sum(len(Path(f).read_text().splitlines()) - 1 for f in files)
    assert summary["jobs"] == expected


def test_ingest_kubernetes_json_lines(tmp_path):
    pods = ROOT / "tests" / "fixtures" / "k8s" / "constructed_pod_states.jsonl"
    done = acme("ingest-jobs", "--format", "k8s", "--cluster", "kalos", "--input", str(pods),
                "--lake", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["rows"] == len(pods.read_text().splitlines()) and summary["quarantined"] == 0
    import pyarrow.parquet as pq

    states = {s for p in summary["partitions"] for s in pq.read_table(p)["state"].to_pylist()}
    assert {"OUT_OF_MEMORY", "PREEMPTED", "NODE_FAIL", "CANCELLED"} <= states


def test_locate_faults_on_a_simulated_cluster():
    done = acme("locate-faults", "--nodes", "16", "--faulty", "3,9", "--stragglers", "12", "--seed", "1")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["rounds"] == 2 and result["faulty"] == ["node-003", "node-009"]
    assert result["stragglers"] == ["node-012"] and result["undecided"] == []
    bad = acme("locate-faults", "--nodes", "4", "--faulty", "7")
    assert bad.returncode == 2 and "7" in bad.stderr and "Traceback" not in bad.stderr


def test_plan_eval_simulates_the_default_suite_against_the_baselines():
    done = acme("plan-eval", "--nodes", "1", "--simulate")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) >= {"trials", "makespan_s", "naive_makespan_s", "opencompass_makespan_s", "lower_bound_s",
                           "speedup_vs_naive", "speedup_vs_opencompass"}  # fmt: skip
    assert result["lower_bound_s"] <= result["makespan_s"] < result["opencompass_makespan_s"]
    assert result["speedup_vs_opencompass"] == round(
        result["opencompass_makespan_s"] / result["makespan_s"], 3
    )


def test_plan_eval_warns_about_unknown_sizes_and_refuses_a_missing_suite(tmp_path):
    suite = tmp_path / "suite.csv"
    suite.write_text("dataset,n_samples,metric_kind\nmystery,,match\n")
    done = acme("plan-eval", "--suite", str(suite), "--nodes", "1", "--simulate")
    assert done.returncode == 0, done.stderr
    assert any("mystery" in warning for warning in json.loads(done.stdout)["warnings"])
    missing = acme("plan-eval", "--suite", str(tmp_path / "nope.csv"), "--nodes", "1")
    assert missing.returncode == 2 and "nope.csv" in missing.stderr


def test_synth_metrics_then_ingest_metrics(tmp_path):
    wide = tmp_path / "wide"
    made = acme("synth-metrics", "--cluster", "kalos", "--nodes", "1", "--start", "2023-07-01",
                "--format", "acmetrace-csv", "--seed", "2", "-o", str(wide))  # fmt: skip
    assert made.returncode == 0, made.stderr
    done = acme("ingest-metrics", "--format", "acmetrace-csv", "--cluster", "kalos", "--input", str(wide),
                "--lake", str(tmp_path / "lake"), "--day", "2023-07-01")  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["samples"] > 0 and summary["quarantined"] == 0 and "gpu_util" in summary["metrics"]
    assert all(Path(p).exists() for p in summary["partitions"])


def test_compress_and_diagnose_a_crashed_training_log(tmp_path):
    sys.path.insert(0, str(ROOT / "plugins"))
    from acme.diagnosis.synth_log import iter_training_log

    log = tmp_path / "train.log"
    log.write_text(
        "".join(f"{line.rstrip()}\n" for line in iter_training_log(5000, seed=3, failure="NVLinkError"))
    )
    compressed = acme("compress", str(log), "-o", str(tmp_path / "out.txt"))
    assert compressed.returncode == 0, compressed.stderr
    stats = json.loads(compressed.stdout)
    assert stats["lines_out"] < stats["lines_in"] * 0.05 and stats["kept_errors"] > 0
    diagnosed = acme("diagnose", str(log))
    assert diagnosed.returncode == 0, diagnosed.stderr
    diagnosis = json.loads(diagnosed.stdout)
    assert diagnosis["reason"] == "NVLinkError" and diagnosis["category"] == "Infrastructure"
    assert diagnosis["evidence"] and diagnosis["source"] == "rule"
