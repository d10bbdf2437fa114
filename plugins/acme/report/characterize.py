"""A characterization of one cluster over one period: every registered section's tables, figures' findings and
summary entries (:mod:`acme.report.sections`), in page order. :func:`acme.report.sections.render_figures` draws it
and :mod:`acme.report.publish` writes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from acme.report.model import Characterization, ReportInputs

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.report.periods import Period


def characterize(
    lake: Lake,
    cluster: str,
    period: Period,
    definition: str = "run",
) -> Characterization:
    """Query the lake and let every registered section (:mod:`acme.report.sections`) add its tables, figures'
    findings and summary entries, in page order."""
    from acme.report.queries import ReportQueries
    from acme.report.sections import SECTIONS

    with ReportQueries(lake, cluster, period, definition) as queries:
        report = Characterization(cluster, period, definition, queries.days)
        inputs = ReportInputs(lake, queries)
        for section in SECTIONS:
            first_new = len(report.figures)
            section.fill(report, inputs)
            for figure in report.figures[first_new:]:
                figure.section = section.number
            report.sections[section.number] = section
    return report
