"""The great-expectations job suite: each rule rejects the rows that break it, with its reason."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from acme.errors import SchemaDriftError
from acme.jobs.acmetrace import parse_acmetrace_table
from acme.jobs.schema import jobs_from_arrow
from acme.jobs.validate import validate_job_table, validate_jobs


@pytest.fixture(scope="module")
def seren_jobs(shared_reference):
    return jobs_from_arrow(
        parse_acmetrace_table(
            shared_reference / "acmetrace" / "samples" / "trace_seren_sample.csv", "seren"
        ).jobs
    )


@pytest.fixture(scope="module")
def kalos_jobs(shared_reference):
    return jobs_from_arrow(
        parse_acmetrace_table(
            shared_reference / "acmetrace" / "samples" / "trace_kalos_sample.csv", "kalos"
        ).jobs
    )


def reasons_by_line(outcome) -> dict[int, str]:
    return dict(zip(outcome.rejected["source_line"], outcome.rejected["reason"], strict=True))


def test_clean_rows_pass_and_the_report_lists_every_expectation(seren_jobs):
    outcome = validate_jobs(seren_jobs, layout="seren", source_file="seren.csv")
    assert len(outcome.accepted) == 5 and outcome.rejected.empty
    assert outcome.report["success"] is True
    names = {item["expectation"] for item in outcome.report["expectations"]}
    assert {"expect_column_values_to_be_unique", "expect_column_pair_values_a_to_be_greater_than_b"} <= names
    json.dumps(outcome.report)  # saved beside the partition: must be JSON-ready


def test_each_broken_rule_rejects_its_row_with_its_reason(seren_jobs):
    jobs = seren_jobs.copy()
    jobs.loc[0, "state"] = "EXPLODED"  # line 2
    jobs.loc[1, "start_time"] = jobs.loc[1, "submit_time"] - pd.Timedelta(seconds=5)  # line 3
    jobs.loc[1, "queue_s"] = -5.0
    jobs.loc[2, "run_s"] = -1.0  # line 4
    jobs.loc[3, "job_type"] = "Training"  # line 5
    outcome = validate_jobs(jobs, layout="seren", source_file="seren.csv")
    reasons = reasons_by_line(outcome)
    assert reasons[2] == "unknown state"
    assert reasons[3] == "start_time before submit_time; negative queue_s"
    assert (
        "negative run_s" in reasons[4]
        and "gpu_time differs from GPUs (gpu_share, else gpu_num) × run_s" in reasons[4]
    )
    assert reasons[5] == "unknown job type"
    assert list(outcome.accepted["source_line"]) == [6]
    record = json.loads(outcome.rejected.set_index("source_line").loc[2, "record"])
    assert record["job_id"] == "5778432" and record["state"] == "EXPLODED"


def test_duplicate_job_ids_are_all_quarantined(seren_jobs):
    jobs = pd.concat([seren_jobs, seren_jobs.iloc[[0]].assign(source_line=7)], ignore_index=True)
    outcome = validate_jobs(jobs, layout="seren", source_file="seren.csv")
    assert reasons_by_line(outcome) == {
        2: "job_id appears more than once",
        7: "job_id appears more than once",
    }


def test_source_figures_must_agree_with_the_times(seren_jobs, kalos_jobs):
    seren = seren_jobs.copy()
    seren.loc[0, "source_duration_s"] += 60
    assert reasons_by_line(validate_jobs(seren, layout="seren", source_file="s"))[2] == (
        "source gpu_time differs from gpu_num × source duration; source duration differs from end − start"
    )
    # Kalos measures duration from submit: the same rows pass under the Kalos rule only.
    assert validate_jobs(kalos_jobs, layout="kalos", source_file="k").rejected.empty
    wrong_rule = validate_jobs(kalos_jobs, layout="seren", source_file="k")
    assert set(wrong_rule.rejected["reason"]) == {"source duration differs from end − start"}


def test_finished_jobs_need_an_end_and_running_jobs_must_not_have_one(kalos_jobs):
    jobs = kalos_jobs.copy()
    jobs.loc[0, "end_time"] = pd.NaT
    jobs.loc[0, "run_s"] = float("nan")
    jobs.loc[0, "gpu_time"] = float("nan")
    jobs.loc[1, "state"] = "RUNNING"
    jobs.loc[1, "state_group"] = "running"
    reasons = reasons_by_line(validate_jobs(jobs, layout="k8s", source_file="k"))
    assert reasons == {2: "finished job without end_time", 3: "RUNNING job with an end_time"}


def test_naive_times_are_schema_drift_not_row_problems(seren_jobs):
    jobs = seren_jobs.copy()
    jobs["submit_time"] = jobs["submit_time"].dt.tz_localize(None)
    with pytest.raises(SchemaDriftError, match="submit_time"):
        validate_jobs(jobs, layout="seren", source_file="seren.csv")


def test_sacct_rows_as_the_field_has_them_pass():
    """No Submit, no User, no TRES (null GPUs), Elapsed shorter than End − Start (suspended time),
    a fractional GPU whose gpu_time is share × run time: all legitimate, none quarantined; an
    Elapsed longer than End − Start is not."""
    from acme.jobs.base import jobs_frame

    def job(job_id, **fields):
        base = {
            "cluster": "field", "job_id": job_id, "job_type": "Other", "state": "COMPLETED",
            "start_time": pd.Timestamp("2024-03-10T10:00:00Z"), "end_time": pd.Timestamp("2024-03-10T11:00:00Z"),
            "source": "sacct", "source_file": "f", "source_line": int(job_id),
        }  # fmt: skip
        return {**base, **fields}

    jobs = jobs_frame(
        [
            job("1"),  # no submit, no user, no GPUs known
            job("2", source_duration_s=3000.0),  # suspended for 10 minutes
            job("3", gpu_num=1, gpu_share=0.25),  # a quarter of a GPU
            job("4", source_duration_s=3700.0),  # longer than it ran: a defect
        ]
    )
    assert jobs.loc[2, "gpu_time"] == 900.0
    outcome = validate_jobs(jobs, layout="sacct", source_file="f")
    assert outcome.accepted["job_id"].tolist() == ["1", "2", "3"]
    assert outcome.rejected["reason"].tolist() == ["source duration is longer than end − start"]


def test_acmetrace_rows_still_need_user_gpus_and_submit(seren_jobs):
    broken = seren_jobs.copy()
    broken.loc[0, "user"] = None
    broken.loc[1, "submit_time"] = pd.NaT
    outcome = validate_jobs(broken, layout="seren", source_file="s")
    reasons = reasons_by_line(outcome)
    assert "user is missing" in reasons[broken.loc[0, "source_line"]]
    assert "submit_time is missing" in reasons[broken.loc[1, "source_line"]]


def test_the_arrow_path_rejects_the_same_rows_as_the_frame_path(seren_jobs):
    """``validate_job_table`` hands great-expectations each job id as its code in a dictionary of
    the ids and dictionary-encoded text as categoricals: duplicates, missing ids and unknown values
    fail on the same rows, with the same reasons, as on the text itself."""
    import pyarrow as pa

    from acme.jobs.ingest import _jobs_table

    jobs = pd.concat([seren_jobs, seren_jobs.iloc[[0]].assign(source_line=7)], ignore_index=True)
    jobs.loc[1, "job_id"] = None
    jobs.loc[2, "state"] = "EXPLODED"
    table = _jobs_table(jobs)
    compact = table.cast(
        pa.schema(
            pa.field(f.name, pa.dictionary(pa.int32(), f.type))
            if f.type == pa.large_string() and f.name != "job_id"
            else f
            for f in table.schema
        )
    )
    expected = {
        2: "job_id appears more than once",
        3: "job_id is missing",
        4: "unknown state",
        7: "job_id appears more than once",
    }
    assert reasons_by_line(validate_jobs(jobs, layout="seren", source_file="s")) == expected
    outcome = validate_job_table(compact, layout="seren", source_file="s")
    assert reasons_by_line(outcome) == expected
    assert outcome.accepted["source_line"].to_pylist() == [5, 6]
    assert json.loads(outcome.rejected.set_index("source_line").loc[4, "record"])["state"] == "EXPLODED"


def test_great_expectations_is_imported_without_the_modules_the_suite_never_uses(tmp_path):
    """scipy.stats, altair, jsonschema and mistune (KL-divergence, KS-test and JSON-schema
    expectations, charts, Markdown) stay unloaded through the import and a validation, in a fresh
    interpreter; great-expectations' references to them load them on first use, and code importing
    them afterwards gets the real modules. SQLAlchemy, psycopg2, boto3 and botocore (its SQL data
    sources, S3 stores) are not loaded at all, and are importable afterwards."""
    import subprocess
    import sys

    script = """
import sys
from acme.jobs.validate import import_great_expectations, validate_jobs
from acme.jobs.schema import jobs_from_arrow
from acme.jobs.acmetrace import parse_acmetrace_table
gx = import_great_expectations()
jobs = jobs_from_arrow(parse_acmetrace_table(sys.argv[1], "seren").jobs)
assert validate_jobs(jobs, layout="seren", source_file="s").rejected.empty
deferred = ("scipy.stats", "scipy.linalg", "altair", "jsonschema", "mistune")
assert not any(name.startswith(deferred) for name in sys.modules)
hidden = ("sqlalchemy", "psycopg2", "boto3", "botocore")
assert not any(name.startswith(hidden) for name in sys.modules)  # hidden from its import
from great_expectations.expectations.metrics.column_map_metrics import column_values_match_json_schema as js
assert js.jsonschema.Draft7Validator({"type": "integer"}).is_valid(3)  # loaded on first use
from great_expectations.compatibility import aws
assert not aws.boto3  # great-expectations took boto3 as not installed (its stand-in is falsy)
from great_expectations.expectations.core import expect_column_kl_divergence_to_be_less_than as kl
assert abs(kl.stats.entropy([0.5, 0.5], [0.5, 0.5])) < 1e-12  # loaded on first use
import scipy.stats
assert sys.modules["scipy.stats"] is scipy.stats and type(scipy.stats).__name__ == "module"
assert scipy.stats.norm.cdf(0) == 0.5
import sqlalchemy  # hidden from great-expectations' import only: importable afterwards
assert sqlalchemy.select(sqlalchemy.literal(1)) is not None
import boto3, jsonschema
assert boto3.client("s3", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
from great_expectations.datasource.fluent import spark_datasource  # a placeholder during the import only
assert type(spark_datasource).__name__ == "module" and hasattr(spark_datasource.SparkDatasource, "__fields__")
assert sys.modules["jsonschema"] is jsonschema and type(jsonschema).__name__ == "module"
print("ok")
"""
    import datetime as dt

    from acme.jobs.synth import write_synth_trace

    # The project's own generator, so the test runs without ../shared.
    sample = write_synth_trace("seren", dt.date(2023, 7, 1), 1, tmp_path / "trace_seren.csv", seed=3)["path"]
    import os
    from pathlib import Path

    import acme

    plugins = str(Path(acme.__file__).parents[1])  # this checkout's package, not an installed one
    environ = {**os.environ, "PYTHONPATH": plugins, "GX_ANALYTICS_ENABLED": "false"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(sample)], capture_output=True, text=True, timeout=120, env=environ
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


BROKEN_ROWS_REPORT = """
import json, sys
import pandas as pd
from acme.jobs.acmetrace import parse_acmetrace_table
from acme.jobs.schema import jobs_from_arrow
from acme.jobs.validate import import_great_expectations, validate_jobs
if sys.argv[2] == "plain":
    import great_expectations  # its own import, every data source real: import_great_expectations() keeps it
gx = import_great_expectations()
placeholders = sorted(n for n, m in sys.modules.items() if type(m).__name__ == "_PlaceholderModule")
jobs = jobs_from_arrow(parse_acmetrace_table(sys.argv[1], "seren").jobs).head(12)
jobs.loc[0, "state"] = "EXPLODED"
jobs.loc[1, "start_time"] = jobs.loc[1, "submit_time"] - pd.Timedelta(seconds=5)
jobs.loc[2, "run_s"] = -1.0
jobs.loc[3, "job_type"] = "Training"
jobs.loc[4, "job_id"] = jobs.loc[5, "job_id"]
jobs.loc[6, "user"] = None
jobs.loc[7, "gpu_time"] = 1e9
jobs.loc[8, "end_time"] = pd.NaT
jobs.loc[9, "state"] = "RUNNING"
jobs.loc[10, "job_id"] = None
outcome = validate_jobs(jobs, layout="seren", source_file="s")
from great_expectations.datasource import fluent
print(json.dumps({"report": outcome.report, "rejected": outcome.rejected.to_dict("records"),
                  "accepted": outcome.accepted["source_line"].tolist(), "placeholders": placeholders,
                  "sql_datasource": fluent.SQLDatasource.__module__ + ":" + str(hasattr(fluent.SQLDatasource, "__fields__"))},
                 default=str))
"""


def test_placeholder_data_sources_leave_every_expectation_result_as_with_all_of_them_real(tmp_path):
    """Rows that break each rule get the same report, reasons and accepted rows whether great-expectations
    was imported with its Spark/SQL/cloud data sources as placeholders (import_great_expectations) or
    with all of them real (its own import first), in fresh interpreters; no placeholder stays in
    ``sys.modules``, and the real module is imported by whoever asks for it afterwards."""
    import datetime as dt
    import os
    import subprocess
    import sys
    from pathlib import Path

    import acme
    from acme.jobs.synth import write_synth_trace

    sample = write_synth_trace("seren", dt.date(2023, 7, 1), 1, tmp_path / "trace_seren.csv", seed=3)["path"]
    environ = {
        **os.environ,
        "PYTHONPATH": str(Path(acme.__file__).parents[1]),
        "GX_ANALYTICS_ENABLED": "false",
    }
    results = {}
    for mode in ("placeholders", "plain"):
        done = subprocess.run(
            [sys.executable, "-c", BROKEN_ROWS_REPORT, str(sample), mode],
            capture_output=True, text=True, timeout=120, env=environ,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    with_placeholders, plain = results["placeholders"], results["plain"]
    assert with_placeholders["placeholders"] == plain["placeholders"] == []
    # the package keeps the placeholder class it was given; the real one has pydantic fields
    assert with_placeholders["sql_datasource"] == "great_expectations.datasource.fluent.sql_datasource:False"
    assert plain["sql_datasource"] == "great_expectations.datasource.fluent.sql_datasource:True"
    assert len(with_placeholders["rejected"]) >= 10  # the broken rows are found ...
    for key in ("report", "rejected", "accepted"):
        assert with_placeholders[key] == plain[key], key  # ... the same way


def test_only_the_thread_importing_great_expectations_is_refused_sqlalchemy():
    """While great-expectations imports on a thread (the command line's preload), another thread's
    ``import sqlalchemy`` gets the real module; a process that has SQLAlchemy already (Airflow's)
    gives it to great-expectations as it is."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import acme

    script = """
import sys, threading
from acme.jobs import validate
started = threading.Event()
real_find_spec = validate._HiddenFromThread.find_spec
def find_spec(self, fullname, path=None, target=None):
    started.set()
    return real_find_spec(self, fullname, path, target)
validate._HiddenFromThread.find_spec = find_spec
loading = validate.preload_in_background()
started.wait(60)  # great-expectations' import is under way on the other thread
import sqlalchemy
assert sqlalchemy.select(sqlalchemy.literal(1)) is not None
loading.join()
assert "great_expectations" in sys.modules
assert not any(isinstance(finder, validate._HiddenFromThread) for finder in sys.meta_path)
"""
    already = """
import sqlalchemy
from acme.jobs.validate import import_great_expectations
import_great_expectations()
from great_expectations.compatibility import sqlalchemy as compat
assert compat.sqlalchemy is sqlalchemy
"""
    plugins = str(Path(acme.__file__).parents[1])
    environ = {**os.environ, "PYTHONPATH": plugins, "GX_ANALYTICS_ENABLED": "false"}
    for code in (script, already):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=environ
        )
        assert done.returncode == 0, done.stderr


def test_job_ids_that_are_plain_numbers_are_their_own_codes_and_any_other_id_a_dictionary_index():
    import pyarrow as pa

    from acme.jobs.validate import job_id_codes

    numbers = job_id_codes(pa.chunked_array([["5778432", "0", "999999999999999999"], ["5778432"]]))
    assert numbers.type == pa.uint64() and numbers.to_pylist() == [5778432, 0, 999999999999999999, 5778432]
    # Ids that a number would merge ("007" and "7"), that are no plain number, or a missing one: the
    # dictionary, so equal codes still mean equal ids.
    for ids in (["7", "007", "7"], ["12345_1", "12345", "12345_1"], ["1", None, "1"],
                ["1" * 19, "1" * 19 + "0", "1" * 19]):  # fmt: skip
        codes = job_id_codes(pa.array(ids, pa.large_string())).to_pylist()
        assert codes[0] == codes[2] and codes[1] != codes[0], ids


def test_the_arrow_path_finds_duplicate_plain_number_ids_as_on_the_text(seren_jobs):
    from acme.jobs.ingest import _jobs_table

    jobs = pd.concat([seren_jobs, seren_jobs.iloc[[3]].assign(source_line=7)], ignore_index=True)
    assert jobs["job_id"].str.fullmatch(r"[1-9][0-9]*").all()  # the numbers' path
    expected = {5: "job_id appears more than once", 7: "job_id appears more than once"}
    assert reasons_by_line(validate_jobs(jobs, layout="seren", source_file="s")) == expected
    assert reasons_by_line(validate_job_table(_jobs_table(jobs), layout="seren", source_file="s")) == expected
