"""Field tier, jobs: every real sacct output and Kubernetes object of the corpus, ingested as an
operator would (``python -m acme ingest-jobs`` with the settings in
``tests/fixtures/field/jobs/expected.yaml``), ends one of two ways:

- published, with every row accounted for: ``rows_in`` = published + quarantined + skipped (by
  counted reason), something stored, and the facts checked by hand (SOURCES.md) in the lake;
- refused with one line that says what is missing or why nothing can be stored.

The inputs were written by others (see ``tests/fixtures/field/jobs/SOURCES.md``); none is ours.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from acme.cli import main

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "field" / "jobs"


def _manifest() -> dict:
    import yaml

    return yaml.safe_load((CORPUS / "expected.yaml").read_text(encoding="utf-8"))


MANIFEST = _manifest()
CASES = [(fmt, name, spec) for fmt in ("sacct", "k8s") for name, spec in MANIFEST[fmt].items()]


def _path(name: str, spec: dict) -> Path:
    return (CORPUS / spec.get("path", name)).resolve()


def _argv(fmt: str, path: Path, lake: Path, settings: dict, *, with_share: bool = True) -> list[str]:
    argv = ["ingest-jobs", "--format", fmt, "--cluster", "field", "--input", str(path), "--lake", str(lake)]
    if "fields" in settings:
        argv += ["--fields", settings["fields"]]
    if "delimiter" in settings:
        argv += ["--delimiter", settings["delimiter"].replace("\t", "\\t")]
    if "timezone" in settings:
        argv += ["--timezone", settings["timezone"]]
    if "day" in settings:
        argv += ["--day", settings["day"]]
    if with_share and "max_quarantine_share" in settings:
        argv += ["--max-quarantine-share", str(settings["max_quarantine_share"])]
    return argv


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _published(lake: Path):
    import pandas as pd
    import pyarrow.parquet as pq

    from acme.jobs.schema import jobs_from_arrow

    files = sorted(lake.glob("jobs/cluster=field/date=*/jobs.parquet"))
    if not files:
        return pd.DataFrame()
    return pd.concat([jobs_from_arrow(pq.read_table(f)) for f in files], ignore_index=True)


def _same(actual, expected) -> bool:
    import pandas as pd

    if expected is None:
        return actual is None or bool(pd.isna(actual))
    if actual is None or (not isinstance(actual, str) and pd.isna(actual)):
        return False
    if isinstance(expected, str) and isinstance(actual, pd.Timestamp):
        return actual == pd.Timestamp(expected)
    if isinstance(expected, float):
        return math.isclose(float(actual), expected, rel_tol=1e-6, abs_tol=1e-6)
    return actual == expected


def test_the_corpus_is_what_the_issue_asks_for():
    sacct = [name for name in MANIFEST["sacct"] if not name.startswith("constructed_")]
    k8s = [name for name in MANIFEST["k8s"] if not name.startswith("constructed_")]
    assert len(sacct) >= 15, sacct
    assert len(k8s) >= 10, k8s
    sources = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    for _fmt, name, spec in CASES:
        assert _path(name, spec).is_file(), name
        file_name = Path(spec.get("path", name)).name
        assert f"`{file_name}`" in sources, f"{file_name} has no entry in SOURCES.md"


@pytest.mark.parametrize(("fmt", "name", "spec"), CASES, ids=[f"{f}-{n}" for f, n, _ in CASES])
def test_corpus_file_is_accounted_for_or_refused_in_one_line(fmt, name, spec, tmp_path, capsys):
    settings = spec.get("settings") or {}
    lake = tmp_path / "lake"
    code, out, err = _run(_argv(fmt, _path(name, spec), lake, settings), capsys)

    if spec["outcome"] == "refused":
        assert code == 2, (out, err)
        line = err.strip()
        assert "\n" not in line and line.startswith("error: "), err
        for words in spec["refused"]:
            assert words in line, line
        assert not list(lake.glob("jobs/**/jobs.parquet")), "a refused input published rows"
        return

    assert code == 0, err
    summary = json.loads(out)
    skipped = summary["skipped"]
    assert summary["rows_in"] == (
        summary["rows"] + summary["quarantined"] + sum(skipped.values()) + summary["skipped_other_days"]
    ), summary
    assert summary["rows"] + summary["quarantined"] > 0, "exit 0 with nothing stored"
    assert (summary["rows"], summary["quarantined"]) == (spec["rows"], spec["quarantined"]), summary
    expected_skips = spec.get("skipped") or {}
    for prefix, count in expected_skips.items():
        hits = [reason for reason in skipped if reason.startswith(prefix)]
        assert len(hits) == 1 and skipped[hits[0]] == count, (prefix, skipped)
    assert sum(skipped.values()) == sum(expected_skips.values()), skipped

    jobs = _published(lake)
    assert len(jobs) == spec["rows"]
    if spec["quarantined"]:
        assert summary["quarantine"], summary
    for fact in spec.get("facts") or []:
        row = jobs.loc[jobs["job_id"] == fact["job_id"]]
        assert len(row) == 1, (fact["job_id"], list(jobs["job_id"]))
        record = row.iloc[0]
        for field, value in fact.items():
            assert _same(record[field], value), (fact["job_id"], field, record[field], value)

    if "refused_by_default" in spec:  # the same file at the default quarantine share
        code, out, err = _run(
            _argv(fmt, _path(name, spec), tmp_path / "lake2", settings, with_share=False), capsys
        )
        line = err.strip()
        assert code == 2 and "\n" not in line, err
        for words in spec["refused_by_default"]:
            assert words in line, line
