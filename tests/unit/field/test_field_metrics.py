"""The field tier for telemetry: every metrics corpus file, as operators have it, through the CLI.

The corpus (``tests/fixtures/field/metrics/``: exporter scrapes and Prometheus API answers written
by others, with their sources in ``SOURCES.md``) and each file's expected outcome
(``manifest.yaml``) are data; this test runs ``python -m acme ingest-metrics`` in-process on each
into a fresh lake and checks the one-of-two outcome of issue 14:

- stored: exit 0, the expected samples stored, and every sample line of the file accounted for
  (stored + skipped as outside the catalog + quarantined), counted here independently of the
  parser;
- refused: exit 2 with one line naming what is missing and the flag or setting that supplies it,
  and nothing stored.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import yaml

from acme.cli import main

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "field" / "metrics"
MANIFEST = yaml.safe_load((CORPUS / "manifest.yaml").read_text())
STORED_AREAS = ("metrics", "metrics_snapshots")


def sample_lines(path: Path) -> int:
    """Samples in a file, counted without the project's parsers: exposition lines that are not
    comments or blank, or the points of a saved API answer."""
    if path.suffix == ".json":
        body = json.loads(path.read_text())
        result = (body.get("data") or {}).get("result") or []
        return sum(len(item["values"]) if "values" in item else 1 for item in result)
    lines = path.read_text().splitlines()
    return sum(1 for line in lines if line.strip() and not line.lstrip().startswith("#"))


def run_cli(case: dict, lake: Path) -> tuple[int, str, str]:
    argv = ["ingest-metrics", "--format", case["format"], "--cluster", "field", "--lake", str(lake)]
    argv += ["--input", str(CORPUS / case["file"]), *[str(a) for a in case.get("args") or []]]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def stored_files(lake: Path) -> list[Path]:
    return [p for area in STORED_AREAS for p in (lake / area).rglob("*.parquet")]


def stored_values(lake: Path, metric: str) -> list[float]:
    """The values of ``metric`` in the lake, read back as stored (the samples' ``value`` column)."""
    import pyarrow.parquet as pq

    files = [p for area in STORED_AREAS for p in (lake / area).glob(f"metric={metric}/**/*.parquet")]
    return [float(v) for f in files for v in pq.read_table(f, columns=["value"])["value"].to_pylist()]


def case_id(case: dict) -> str:
    return f"{Path(case['file']).name}[{' '.join(str(a) for a in case.get('args') or []) or 'no flags'}]"


@pytest.mark.parametrize("case", MANIFEST, ids=[case_id(c) for c in MANIFEST])
def test_corpus_file_is_stored_whole_or_refused_in_one_line(case, tmp_path):
    lake = tmp_path / "lake"
    code, out, err = run_cli(case, lake)
    if case["outcome"] == "stored":
        assert code == 0, err
        summary = json.loads(out)
        assert summary["samples"] == case["samples"], summary
        assert sum(summary["skipped_metrics"].values()) == case["skipped"]
        assert summary["quarantined"] == case["quarantined"]
        assert sorted(summary["metrics"]) == sorted(case["metrics"])
        every_sample = sample_lines(CORPUS / case["file"])
        summed = sum((summary.get("summed_samples") or {}).values())
        assert summed == case.get("summed", 0), summary
        assert summary["samples"] + sum(summary["skipped_metrics"].values()) + summary[
            "quarantined"
        ] + summed == (every_sample), (
            "every sample of the file is stored, skipped with a count, quarantined, or summed into one"
        )
        assert sum(summary["time_sources"].values()) == summary["samples"] + summary["quarantined"]
        files = stored_files(lake)
        assert files and all(f.parent.parent.parent.parent.name in STORED_AREAS for f in files)
        for metric, values in (case.get("values") or {}).items():
            assert sorted(stored_values(lake, metric)) == sorted(values), metric
    else:
        assert code == 2, f"expected a refusal, got exit {code}: {out[:300]}"
        lines = err.strip().splitlines()
        assert len(lines) == 1, f"a refusal is one line, got {len(lines)}: {err}"
        assert re.search(case["error"], lines[0]), lines[0]
        assert case["remedy"] in lines[0], f"the refusal names {case['remedy']}: {lines[0]}"
        assert stored_files(lake) == [], "a refused input stores nothing"


def test_every_corpus_file_has_an_expected_outcome():
    listed = {(CORPUS / case["file"]).resolve() for case in MANIFEST}
    corpus = {p.resolve() for p in CORPUS.rglob("*") if p.suffix in (".prom", ".json")}
    assert corpus <= listed, f"corpus files without an expected outcome: {sorted(corpus - listed)}"
    scrapes = {p for p in listed if p.suffix == ".prom"}
    answers = {p for p in listed if p.suffix == ".json"}
    assert len(scrapes) >= 10 and len(answers) >= 5, "issue 14: 10 exporter scrapes and 5 API answers"


def test_every_corpus_file_has_its_source():
    sources = (CORPUS / "SOURCES.md").read_text()
    for case in MANIFEST:
        assert Path(case["file"]).name in sources, f"{case['file']} has no entry in SOURCES.md"
