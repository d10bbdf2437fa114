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
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from acme import config

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.report.characterize import Characterization

_REPORT_MANIFEST = re.compile(r"(^|/)cluster=[^/]+/period=[^/]+/report\.json$")

SECTIONS = {
    1: "Summary",
    2: "Job duration and GPU utilization",
    3: "GPU demand",
    4: "Workload types",
    5: "Demand, duration and queueing per workload type",
    6: "Infrastructure utilization",
    7: "Power",
    8: "Final states and failures",
    9: "Trends across nights",
    10: "Effective training time of pretraining campaigns (ETTR)",  # acme.report.ettr (issue 19)
}


@dataclass
class ReportWriter:
    """Publishes reports under ``prefix`` of ``lake`` (``reports`` in the lake, ``""`` for -o DIR)."""

    lake: Lake
    prefix: str = "reports"

    def key(self, *parts: str) -> str:
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p and p.strip("/"))

    def report_key(self, cluster: str, period: str) -> str:
        return self.key(f"cluster={cluster}", f"period={period}")

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
        put("report.json", json.dumps(summary, indent=2, sort_keys=True, default=str).encode())
        html = render_template(
            "report.html.j2",
            report=report,
            sections=SECTIONS,
            figures_by_section=_by_section(report),
            pngs=pngs,
            html_tables=_html_tables(report),
            generated_at=(generated_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        )
        put("index.html", html.encode())
        for stale in set(self.lake.list(base)) - set(written):
            self.lake.fs.rm(self.lake.path(stale))
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
                if not _REPORT_MANIFEST.search(key):
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
    sections: dict[int, list] = {number: [] for number in SECTIONS}
    for figure in report.figures:
        sections[figure.section].append(figure)
    return sections


def _html_tables(report: Characterization) -> dict[str, str]:
    """The small tables shown in the page itself (the rest are linked as CSV/JSON)."""
    from acme.report.characterize import pct, seconds

    shown = {}
    summary = report.tables["summary"].set_index("id").T
    summary.columns.name = None
    shown["summary"] = summary.map(_summary_cell).to_html(classes="data")
    types = report.tables["type_stats"].copy()
    for column in ("job_share", "gpu_time_share", "fail_rate"):
        types[column] = types[column].map(pct)
    for column in ("med_run_s", "avg_run_s", "med_queue_s", "avg_queue_s", "p90_queue_s"):
        types[column] = types[column].map(seconds)
    types["gpu_time"] = (types["gpu_time"] / 3600).map(lambda v: f"{v:,.0f} GPU-h")
    shown["type_stats"] = types.to_html(index=False, float_format=lambda v: f"{v:,.2f}", classes="data")
    failures = report.tables["failure_reasons"].copy()
    if len(failures):
        for column in ("job_share", "gpu_time_share"):
            failures[column] = failures[column].map(pct)
        for column in ("med_time_to_failure_s", "avg_time_to_failure_s"):
            failures[column] = failures[column].map(seconds)
        failures["gpu_time"] = (failures["gpu_time"] / 3600).map(lambda v: f"{v:,.1f} GPU-h")
        shown["failure_reasons"] = failures.to_html(
            index=False, float_format=lambda v: f"{v:,.1f}", classes="data"
        )
        categories = report.tables["failure_categories"].copy()
        for column in ("job_share", "gpu_time_share"):
            categories[column] = categories[column].map(pct)
        categories["gpu_time"] = (categories["gpu_time"] / 3600).map(lambda v: f"{v:,.1f} GPU-h")
        shown["failure_categories"] = categories.to_html(index=False, classes="data")
    return shown


def _summary_cell(value: Any) -> str:
    """Counts and seconds as whole numbers, shares and averages with three decimals, – for none."""
    if value is None or value != value:
        return "–"
    number = float(value)
    return f"{number:,.0f}" if number.is_integer() else f"{number:,.3f}"


def render_template(name: str, **context: Any) -> str:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(config.include_dir() / "report" / "templates")),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return environment.get_template(name).render(**context)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG from its header (tests and the page's img attributes)."""
    import struct

    with io.BytesIO(data) as handle:
        handle.seek(16)
        return struct.unpack(">II", handle.read(8))
