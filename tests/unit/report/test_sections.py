"""The report-section registry: every entry resolves, every figure belongs to the section that added it, and
a new section is one module plus one entry (this file plays the module of a section the house never had)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from acme import settings
from acme.report import sections
from acme.report.build import build_report
from acme.report.characterize import characterize
from acme.report.model import Characterization, FigureSpec, ReportInputs
from acme.report.periods import parse_period


def test_every_entry_names_a_fill_function_drawers_and_templates_that_exist():
    numbers = [section.number for section in sections.SECTIONS]
    assert numbers == sorted(set(numbers)) == list(range(1, len(numbers) + 1))
    templates = settings.project().include_dir / "report" / "templates"
    for section in sections.SECTIONS:
        assert callable(section.fill), section.number
        assert all(callable(draw) for draw in section.drawers.values()), section.number
        for fragment in section.fragments.values():
            assert (templates / fragment).is_file(), fragment


def test_each_figure_is_numbered_by_the_section_that_added_it_and_drawn_by_its_entry(synth_lake):
    report = characterize(synth_lake, "seren", parse_period("all"))
    assert list(report.sections) == [section.number for section in sections.SECTIONS]
    owners = {figure: section.number for section in sections.SECTIONS for figure in section.drawers}
    for figure in report.figures:
        assert figure.section in report.sections
        if figure.drawn and figure.name != "summary":  # the summary is a table, never drawn
            assert owners[figure.name] == figure.section, figure.name
    assert {f.name for f in report.figures} >= set(owners)  # every registered figure was produced


# --- a section the house never had: its whole module is the two functions below ----------------------


def busiest_day(report: Characterization, inputs: ReportInputs) -> None:
    """Adds a table and a drawn figure: the submit day with the most GPU jobs."""
    per_day = inputs.queries.jobs("select_daily_usage").groupby("day", as_index=False)["jobs"].sum()
    top = per_day.sort_values("jobs", ascending=False).head(1)
    report.tables["busiest_day"] = pd.DataFrame(top)
    finding = f"{top['day'].iloc[0]}: {int(top['jobs'].iloc[0]):,} jobs"
    report.figures.append(FigureSpec("busiest_day", "The busiest day", finding, ["busiest_day"]))


def draw_busiest_day(report: Characterization):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(4, 2))
    figure.subplots().bar([0], report.tables["busiest_day"]["jobs"].tolist())
    return figure


def test_a_new_section_is_one_module_and_one_entry(synth_lake, tmp_path, monkeypatch):
    entry = sections.Section(
        len(sections.SECTIONS) + 1, "Busiest day", busiest_day, {"busiest_day": draw_busiest_day}
    )
    monkeypatch.setattr(sections, "SECTIONS", (*sections.SECTIONS, entry))
    build_report(synth_lake, "seren", "2023-06", out_dir=str(tmp_path))
    base = Path(tmp_path) / "cluster=seren" / "period=2023-06"
    html = (base / "index.html").read_text()
    assert re.search(rf'<h2 id="section-{entry.number}">{entry.number}\. Busiest day</h2>', html)
    assert '<img src="figures/busiest_day.png"' in html
    assert (base / "figures" / "busiest_day.png").stat().st_size > 0
    assert (base / "tables" / "busiest_day.csv").is_file()
    assert 'The busiest day.</b> <span class="finding">2023-06-' in html
    # The sections already registered are all still on the page, in order.
    numbers = [int(n) for n in re.findall(r'<h2 id="section-(\d+)">', html)]
    assert numbers == list(range(1, entry.number + 1))
