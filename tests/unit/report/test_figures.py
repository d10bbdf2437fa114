"""The figures as a reader sees them: one colour per job type on every cluster's page, readable
time axes (no "0" on a log axis, ticks in s/min/h), percentages ending at 100, and labelled bars
where a log axis would leave no readable tick."""

from __future__ import annotations

import pytest

from acme.report import figures, sections, style
from acme.report.characterize import characterize
from acme.report.periods import parse_period


@pytest.fixture(scope="module")
def reports(synth_lake):
    return {cluster: characterize(synth_lake, cluster, parse_period("all")) for cluster in ("seren", "kalos")}


def stack_colours(figure) -> dict[str, tuple]:
    """Job type -> fill colour of the jobs-per-day stack plot."""
    ax = figure.axes[0]
    return {c.get_label(): tuple(c.get_facecolor()[0]) for c in ax.collections}


def test_each_job_type_has_one_colour_on_every_clusters_page(reports):
    from matplotlib.colors import to_rgba

    seen = {cluster: stack_colours(figures.draw_trends(report)) for cluster, report in reports.items()}
    shared = set(seen["seren"]) & set(seen["kalos"])
    assert {"Pretrain", "Eval", "SFT"} <= shared
    for job_type in shared:
        assert seen["seren"][job_type] == seen["kalos"][job_type] == to_rgba(figures.type_color(job_type))
    bars = figures.draw_type_demand_duration_queue(reports["kalos"]).axes[0]
    types = [label.get_text() for label in bars.get_yticklabels()]
    assert [to_rgba(figures.type_color(t)) for t in types] == [tuple(p.get_facecolor()) for p in bars.patches]


def test_time_axes_start_at_one_second_with_readable_ticks(reports):
    figure = figures.draw_duration_cdf(reports["seren"])
    ax = figure.axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlim()[0] == 1
    labels = [label.get_text() for label in ax.get_xticklabels()]
    assert labels[:4] == ["1 s", "10 s", "1 min", "10 min"] and "0" not in labels
    queueing = figures.draw_trends(reports["kalos"]).axes[2]
    assert queueing.get_yscale() == "log" and len(queueing.get_yticklabels()) >= 3


def test_per_type_bars_are_labelled_with_their_values_on_linear_axes(reports):
    figure = figures.draw_type_demand_duration_queue(reports["kalos"])
    table = reports["kalos"].tables["type_stats"]
    for ax in figure.axes:
        assert ax.get_xscale() == "linear"
        assert len(ax.texts) == len(table)  # one value label per job type
    run_labels = [text.get_text() for text in figure.axes[1].texts]
    assert all(label.endswith((" s", " min", " h")) for label in run_labels)


def test_percent_axes_end_at_100_and_figures_fill_the_page(reports):
    figure = figures.draw_utilization_cdf(reports["kalos"])  # Kalos's CPU reference reaches 239 %
    cpu = next(ax for ax in figure.axes if ax.get_xlabel() == "CPU utilization (%)")
    assert cpu.get_xlim() == (0, 100)
    pngs = sections.render_figures(reports["seren"])
    from acme.report.publish import png_size

    assert {png_size(png)[0] for png in pngs.values()} == {int(style.FIGURE_WIDTH_IN * style.DPI)}
