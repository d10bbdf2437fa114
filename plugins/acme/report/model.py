"""What a report is made of, shared by the code that fills it (``characterize`` and each section, e.g.
``ettr``), draws it (``figures``) and writes it (``publish``): the report, its figures' specs, and how
numbers are written on its pages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from acme.lake import Lake
    from acme.report.periods import Period
    from acme.report.queries import ReportQueries
    from acme.report.sections import Section


@dataclass
class FigureSpec:
    """One figure: its tables (written as CSV and JSON), its finding, and the section it belongs to (set by
    :func:`acme.report.characterize.characterize` from the registry entry of the section that added it)."""

    name: str
    title: str
    finding: str
    tables: list[str]
    drawn: bool = True  # False: the data is missing, the section shows the finding only
    section: int = 0


@dataclass
class Characterization:
    cluster: str
    period: Period
    definition: str
    days: list[str]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: list[FigureSpec] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    failure_note: str = ""
    sections: dict[int, Section] = field(default_factory=dict)  # the sections that filled it, by number

    def figure(self, name: str) -> FigureSpec:
        return next(f for f in self.figures if f.name == name)


@dataclass(frozen=True)
class ReportInputs:
    """What a section reads: the lake, and the period's open queries over it (jobs, telemetry, diagnoses)."""

    lake: Lake
    queries: ReportQueries


def pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None or value != value else f"{100 * value:.{digits}f}%"


def seconds(value: float | None) -> str:
    if value is None or value != value:
        return "n/a"
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"
