"""The report's lemon-node section: the cluster's nodes ranked by their recent infrastructure failures.

The ranking is ``acme.recovery.lemon``'s score as of the end of the report's last day, over the lake's
history (``ACME_LEMON_LOOKBACK_DAYS`` back from there, not only the report's period: a lemon is a node that
keeps failing). Its table ``lemon_nodes`` holds the first :data:`SHOWN` nodes; the page shows it in the
section (``_lemon.html.j2``, its fragment in :mod:`acme.report.sections`), with the nodes the nightly run
suggests keeping cordoned marked.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from acme.lake import Lake
    from acme.report.model import Characterization, ReportInputs

SECTION_TITLE = "Lemon nodes: repeat offenders"
FIGURE = "lemon_nodes"
SHOWN = 20


def lemon_section_data(lake: Lake, cluster: str, day: date) -> tuple[pd.DataFrame, str, dict[str, Any]]:
    """The section's table, its finding and its summary entry, as of the end of ``day``."""
    import pandas as pd

    from acme import settings
    from acme.recovery.lemon import worst_nodes
    from acme.recovery.lemon_nightly import end_of_day, lemon_ranking, ranking_rows

    lemon = settings.lemon()
    ranking, evidence = lemon_ranking(lake, cluster, end_of_day(day), lemon)
    worst = {entry.node for entry in worst_nodes(ranking, lemon.suggest_top, lemon.min_score)}
    rows = [{**row, "suggest_cordon": row["node"] in worst} for row in ranking_rows(ranking, SHOWN)]
    table = pd.DataFrame(rows, columns=_COLUMNS)
    if not ranking:
        finding = (
            f"no infrastructure failure attributed to a node in the {lemon.lookback_days} days up to {day} "
            f"(read: {_read_text(evidence.read)})"
        )
    else:
        top = ranking[0]
        share = sum(e.score for e in ranking[:3]) / (sum(e.score for e in ranking) or 1.0)
        finding = (
            f"{len(ranking)} nodes have failure events in the {lemon.lookback_days} days up to {day}; the worst, "
            f"{top.node}, scores {top.score:.2f} from {top.events} events; the top 3 hold {100 * share:.0f}% of the "
            f"score; {len(worst)} reach the cordon suggestion (score at least {lemon.min_score:g}, at most "
            f"{lemon.suggest_top}); half-life {lemon.half_life_days:g} days"
        )
    summary = {"nodes_ranked": len(ranking), "suggested": sorted(worst)}
    return table, finding, summary


_COLUMNS = [
    "rank", "node", "score", "events", "diagnosis_events", "node_fail_events", "localization_events",
    "telemetry_events", "gpu_hours_lost", "last_failure", "suggest_cordon",
]  # fmt: skip


def _read_text(read: dict[str, int]) -> str:
    return ", ".join(f"{count} {what.replace('_', ' ')}" for what, count in sorted(read.items())) or "nothing"


def attach_lemon_nodes(report: Characterization, inputs: ReportInputs) -> None:
    """Add the section's table and finding to a characterization (its entry in :mod:`acme.report.sections`)."""
    from acme.report.model import FigureSpec

    table, finding, summary = lemon_section_data(
        inputs.lake, report.cluster, date.fromisoformat(report.days[-1])
    )
    report.tables[FIGURE] = table
    report.summary["lemon_nodes"] = summary
    report.figures.append(FigureSpec(FIGURE, SECTION_TITLE, finding, [FIGURE], drawn=False))
