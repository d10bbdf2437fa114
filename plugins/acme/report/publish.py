"""Writing reports: one writer for the lake (``reports/…``) and for a local folder (``-o DIR``).

A report is a folder ``<root>/cluster=<c>/period=<p>/`` holding ``index.html``, ``figures/*.png``,
``tables/<name>.csv`` and ``.json`` and ``report.json`` (its manifest: summary, findings); ``<root>/index.html`` lists every
report found under the root. Every object is published whole (the lake's write); files a
previous version of the same report had and this one has not are removed afterwards, so a re-run
replaces a report instead of accumulating files.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from acme import lake_keys, settings

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.report.model import Characterization

MANIFEST = "report.json"


@dataclass
class ReportWriter:
    """Publishes reports under ``prefix`` of ``lake`` (``reports`` in the lake, ``""`` for -o DIR)."""

    lake: Lake
    prefix: str = lake_keys.REPORTS

    def key(self, *parts: str) -> str:
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p and p.strip("/"))

    def report_key(self, cluster: str, period: str) -> str:
        return lake_keys.report(cluster, period, root=self.key())

    def is_manifest(self, key: str) -> bool:
        """Whether ``key`` is the manifest of a report under the prefix."""
        values = lake_keys.partition_values(key)
        if "cluster" not in values or "period" not in values:
            return False
        return key == f"{self.report_key(values['cluster'], values['period'])}/{MANIFEST}"

    def write_report(
        self, report: Characterization, pngs: dict[str, bytes], generated_at: datetime | None = None
    ) -> dict[str, Any]:
        """Write one report's files; returns its manifest (index URL, figures, tables, summary)."""
        base = self.report_key(report.cluster, report.period.label)
        written: list[str] = []

        def put(relative: str, data: bytes) -> None:
            self.lake.write_bytes(f"{base}/{relative}", data)
            written.append(f"{base}/{relative}")

        for name, png in pngs.items():
            put(f"figures/{name}.png", png)
        for name, frame in report.tables.items():
            put(f"tables/{name}.csv", frame.to_csv(index=False).encode())
            put(f"tables/{name}.json", _frame_json(frame).encode())
        summary = {
            **report.summary,
            "title": f"{report.cluster} · {report.period.title}",
            "figures": sorted(pngs),
            "tables": sorted(report.tables),
            "findings": {f.name: f.finding for f in report.figures},
        }
        put(MANIFEST, json.dumps(summary, indent=2, sort_keys=True, default=str).encode())
        html = render_template(
            "report.html.j2",
            report=report,
            sections=report.sections,
            figures_by_section=_by_section(report),
            pngs=pngs,
            image_sizes={name: _css_size(png) for name, png in pngs.items()},
            html_tables=_html_tables(report),
            generated_at=(generated_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        )
        put("index.html", html.encode())
        for stale in set(self.lake.list(base)) - set(written):
            self.lake.remove(stale)
        return {
            "index": self.lake.url(f"{base}/index.html"),
            "figures": len(pngs),
            "tables": sorted(report.tables),
            "summary": report.summary,
        }

    def write_index(self) -> str:
        """(Re)write ``<prefix>/index.html`` listing every report under the prefix; its URL.

        Under the lake's lock, so that two writers finishing together cannot leave an index that
        misses the report of one of them."""
        with self.lake.lock(f"reports-index-{self.prefix or 'root'}"):
            entries = []
            for key in self.lake.list(self.prefix):
                if not self.is_manifest(key):
                    continue
                summary = json.loads(self.lake.read_bytes(key))
                relative = key[len(self.prefix) + 1 :] if self.prefix else key
                summary["href"] = relative.rsplit("/", 1)[0] + "/index.html"
                entries.append(summary)
            entries.sort(key=lambda s: (s.get("cluster", ""), _period_order(s.get("period", ""))))
            html = render_template("index.html.j2", entries=entries)
            return self.lake.write_bytes(self.key("index.html"), html.encode())


def _period_order(label: str) -> tuple[int, str]:
    """The whole history first, then months, then days, newest first within each."""
    kind = 0 if label == "all" else (1 if len(label) == 7 else 2)
    return kind, "".join(chr(255 - ord(c)) for c in label)


def _frame_json(frame) -> str:
    """Records with ISO dates and nulls for NaN (what dashboards read)."""
    return frame.to_json(orient="records", date_format="iso", indent=1)


def _by_section(report: Characterization) -> dict[int, list]:
    sections: dict[int, list] = {number: [] for number in report.sections}
    for figure in report.figures:
        sections[figure.section].append(figure)
    return sections


# The summary table's rows as shown on the page: a readable label and how its values read (the CSV
# keeps the identifiers). count: whole number; seconds: a duration; gpus: GPUs per job; share: a
# percentage; gpu_time: GPU-seconds shown as GPU-hours.
SUMMARY_LABELS: dict[str, tuple[str, str]] = {
    "job_num": ("Jobs", "count"),
    "cpu_job_num": ("CPU jobs", "count"),
    "gpu_job_num": ("GPU jobs", "count"),
    "avg_run_time_gpu": ("GPU jobs: mean run time", "seconds"),
    "avg_que_time_gpu": ("GPU jobs: mean queueing delay", "seconds"),
    "avg_gpu_num": ("GPU jobs: mean GPUs per job", "gpus"),
    "med_run_time_gpu": ("GPU jobs: median run time", "seconds"),
    "med_que_time_gpu": ("GPU jobs: median queueing delay", "seconds"),
    "med_gpu_num": ("GPU jobs: median GPUs per job", "gpus"),
    "max_run_time_gpu": ("GPU jobs: longest run time", "seconds"),
    "max_gpu": ("GPU jobs: most GPUs in one job", "gpus"),
    "complete_rate_gpu": ("GPU jobs completed (% of finished)", "share"),
    "cancel_rate_gpu": ("GPU jobs cancelled (% of finished)", "share"),
    "fail_rate_gpu": ("GPU jobs failed (% of finished)", "share"),
    "complete_gpu_time": ("GPU time of completed jobs", "gpu_time"),
    "cancel_gpu_time": ("GPU time of cancelled jobs", "gpu_time"),
    "fail_gpu_time": ("GPU time of failed jobs", "gpu_time"),
    "complete_rate_gpu_time": ("GPU time: completed jobs' share", "share"),
    "cancel_rate_gpu_time": ("GPU time: cancelled jobs' share", "share"),
    "fail_rate_gpu_time": ("GPU time: failed jobs' share", "share"),
    "avg_run_time_cpu": ("CPU jobs: mean run time", "seconds"),
    "avg_que_time_cpu": ("CPU jobs: mean queueing delay", "seconds"),
    "med_run_time_cpu": ("CPU jobs: median run time", "seconds"),
    "med_que_time_cpu": ("CPU jobs: median queueing delay", "seconds"),
    "complete_rate_cpu": ("CPU jobs completed (% of finished)", "share"),
    "cancel_rate_cpu": ("CPU jobs cancelled (% of finished)", "share"),
    "fail_rate_cpu": ("CPU jobs failed (% of finished)", "share"),
}

# Per-type table columns as shown on the page (short headers with units; the CSV keeps the names).
TYPE_COLUMNS = {
    "job_type": "type",
    "jobs": "GPU jobs",
    "job_share": "% jobs",
    "gpu_time": "GPU-hours",
    "gpu_time_share": "% GPU time",
    "avg_gpu_num": "GPUs mean",
    "med_gpu_num": "GPUs median",
    "med_run_s": "run median",
    "avg_run_s": "run mean",
    "med_queue_s": "queue median",
    "avg_queue_s": "queue mean",
    "p90_queue_s": "queue p90",
    "fail_rate": "% failed",
}
FAILURE_COLUMNS = {
    "category": "category",
    "reason": "reason",
    "jobs": "failed jobs",
    "job_share": "% jobs",
    "gpu_time": "GPU-hours",
    "gpu_time_share": "% GPU time",
    "med_time_to_failure_s": "time to failure, median",
    "avg_time_to_failure_s": "time to failure, mean",
    "med_gpu_num": "GPUs median",
    "avg_gpu_num": "GPUs mean",
}


def _html_tables(report: Characterization) -> dict[str, str]:
    """The small tables shown in the page itself (the rest are linked as CSV/JSON), with readable
    headers and units; the CSV and JSON keep the identifiers and raw values."""
    from acme.report.model import pct, seconds

    shown = {}
    summary = report.tables["summary"].set_index("id").T
    summary.columns.name = None
    rows = {
        SUMMARY_LABELS.get(name, (name, "count"))[0]: [
            _summary_cell(v, SUMMARY_LABELS.get(name, (name, "count"))[1]) for v in summary.loc[name]
        ]
        for name in summary.index
    }
    import pandas as pd

    shown["summary"] = pd.DataFrame.from_dict(rows, orient="index", columns=list(summary.columns)).to_html(
        classes="data summary"
    )
    types = report.tables["type_stats"].copy()
    for column in ("job_share", "gpu_time_share", "fail_rate"):
        types[column] = types[column].map(pct)
    for column in ("med_run_s", "avg_run_s", "med_queue_s", "avg_queue_s", "p90_queue_s"):
        types[column] = types[column].map(seconds)
    types["gpu_time"] = (types["gpu_time"] / 3600).map(lambda v: f"{v:,.0f}")
    types["avg_gpu_num"] = types["avg_gpu_num"].map(lambda v: f"{v:,.1f}")
    types["med_gpu_num"] = types["med_gpu_num"].map(lambda v: f"{v:,.0f}")
    shown["type_stats"] = types.rename(columns=TYPE_COLUMNS).to_html(index=False, classes="data")
    failures = report.tables["failure_reasons"].copy()
    if len(failures):
        for column in ("job_share", "gpu_time_share"):
            failures[column] = failures[column].map(pct)
        for column in ("med_time_to_failure_s", "avg_time_to_failure_s"):
            failures[column] = failures[column].map(seconds)
        failures["gpu_time"] = (failures["gpu_time"] / 3600).map(lambda v: f"{v:,.1f}")
        for column in ("med_gpu_num", "avg_gpu_num"):
            failures[column] = failures[column].map(lambda v: f"{v:,.1f}")
        shown["failure_reasons"] = failures.rename(columns=FAILURE_COLUMNS).to_html(
            index=False, classes="data"
        )
        categories = report.tables["failure_categories"].copy()
        for column in ("job_share", "gpu_time_share"):
            categories[column] = categories[column].map(pct)
        categories["gpu_time"] = (categories["gpu_time"] / 3600).map(lambda v: f"{v:,.1f}")
        shown["failure_categories"] = categories.rename(columns=FAILURE_COLUMNS).to_html(
            index=False, classes="data"
        )
    return shown


def _summary_cell(value: Any, kind: str) -> str:
    """One summary value in its unit; – for none."""
    from acme.report.model import pct, seconds

    if value is None or value != value:
        return "–"
    number = float(value)
    if kind == "share":
        return pct(number)
    if kind == "seconds":
        return seconds(number)
    if kind == "gpu_time":
        return f"{number / 3600:,.0f} GPU-h"
    if kind == "gpus":
        return f"{number:,.0f}" if number.is_integer() else f"{number:,.2f}"
    return f"{number:,.0f}"


def render_template(name: str, **context: Any) -> str:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(settings.project().include_dir / "report" / "templates")),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return environment.get_template(name).render(**context)


def _css_size(png: bytes) -> tuple[int, int]:
    """The size a figure is shown at, in CSS pixels: drawn at PIXEL_RATIO, sharp on HiDPI screens."""
    from acme.report.style import PIXEL_RATIO

    width, height = png_size(png)
    return width // PIXEL_RATIO, height // PIXEL_RATIO


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG from its header (tests and the page's img attributes)."""
    import struct

    with io.BytesIO(data) as handle:
        handle.seek(16)
        return struct.unpack(">II", handle.read(8))
