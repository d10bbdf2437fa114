"""The registry of report sections: a new section is one module plus one entry in ``SECTIONS``.

A section module provides a fill function ``(report, inputs) -> None`` (:class:`acme.report.model.ReportInputs`:
the lake and the period's open queries) that adds its tables to ``report.tables``, one
:class:`~acme.report.model.FigureSpec` per figure to ``report.figures`` and, if it has any, its headline
figures to ``report.summary``; and a draw function ``(report) -> matplotlib Figure`` for each figure it
marks drawn. The entry gives the section its number and title on the page, names those functions, and may
name a template fragment (``include/report/templates``) shown under a figure, for tables shown in the page
itself. Nothing else lists the sections: :func:`acme.report.characterize.characterize` fills them in order,
:func:`render_figures` draws their figures, and :mod:`acme.report.publish` lays the page out from the entries
the report was filled by.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from acme.report import ettr, figures, lemon_section, paper_sections

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from acme.report.model import Characterization, ReportInputs


@dataclass(frozen=True)
class Section:
    number: int  # its place and anchor on the page (``#section-<number>``)
    title: str
    fill: Callable[[Characterization, ReportInputs], None]  # adds the tables, figures and summary entries
    drawers: Mapping[str, Callable[[Characterization], Figure]] = field(default_factory=dict)  # by figure
    fragments: Mapping[str, str] = field(default_factory=dict)  # figure name -> template shown under it


SECTIONS: tuple[Section, ...] = (
    Section(1, "Summary", paper_sections.summary, fragments={"summary": "_summary_table.html.j2"}),
    Section(
        2,
        "Job duration and GPU utilization",
        paper_sections.duration_and_utilization,
        {"duration_cdf": figures.draw_duration_cdf, "gpu_util_cdf": figures.draw_gpu_util_cdf},
    ),
    Section(3, "GPU demand", paper_sections.gpu_demand, {"gpu_demand_cdf": figures.draw_gpu_demand_cdf}),
    Section(
        4,
        "Workload types",
        paper_sections.workload_types,
        {"type_shares": figures.draw_type_shares},
        {"type_shares": "_type_stats_table.html.j2"},
    ),
    Section(
        5,
        "Demand, duration and queueing per workload type",
        paper_sections.workload_types_detail,
        {"type_demand_duration_queue": figures.draw_type_demand_duration_queue},
    ),
    Section(
        6,
        "Infrastructure utilization",
        paper_sections.infrastructure,
        {"utilization_cdf": figures.draw_utilization_cdf},
    ),
    Section(7, "Power", paper_sections.power, {"power_cdf": figures.draw_power_cdf}),
    Section(
        8,
        "Final states and failures",
        paper_sections.failures,
        {
            "outcomes": figures.draw_outcomes,
            "failure_categories": figures.draw_failure_categories,
            "temperature_failures": figures.draw_temperature_failures,
        },
        {"failure_categories": "_failure_tables.html.j2"},
    ),
    Section(9, "Trends across nights", paper_sections.trends, {"trends": figures.draw_trends}),
    Section(
        10,
        ettr.SECTION_TITLE,
        ettr.attach_ettr,
        {"ettr_progress": ettr.draw_ettr_progress},
        {"ettr_progress": "_ettr.html.j2"},
    ),
    Section(
        11,
        lemon_section.SECTION_TITLE,
        lemon_section.attach_lemon_nodes,
        fragments={lemon_section.FIGURE: "_lemon.html.j2"},
    ),  # issue 25: the nodes that keep failing
)


def render_figures(report: Characterization) -> dict[str, bytes]:
    """PNG bytes of every drawn figure of the report's sections, keyed by figure name."""
    import matplotlib

    from acme.report.style import DPI

    matplotlib.use("Agg", force=True)  # no display; Figure objects below never touch pyplot's state
    pngs = {}
    for spec in report.figures:
        section = report.sections.get(spec.section)
        draw = section.drawers.get(spec.name) if section else None
        if draw is None or not spec.drawn:
            continue
        buffer = io.BytesIO()
        draw(report).savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
        pngs[spec.name] = buffer.getvalue()
    return pngs
