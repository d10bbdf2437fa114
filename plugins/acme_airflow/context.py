"""What a task reads from its run's context."""

from __future__ import annotations

from datetime import UTC, date, timedelta
from typing import Any


def triggering_extras(context: Any) -> list[dict[str, Any]]:
    """The extra of every Asset event that triggered the run (none for a manual or timed run)."""
    return [
        event.extra or {}
        for events in (context.get("triggering_asset_events") or {}).values()
        for event in events
    ]


def run_date(context: Any) -> date:
    """The run's own time as a day: its logical date, else when it was to run (a manual or
    asset-triggered run may have no logical date)."""
    return (context.get("logical_date") or context["dag_run"].run_after).date()


def run_day(context: Any) -> date:
    """The UTC day a run is about: the `day` param, else the data interval, else yesterday."""
    if context["params"].get("day"):
        return date.fromisoformat(context["params"]["day"])
    interval_start = context.get("data_interval_start")
    if interval_start is not None:
        return interval_start.astimezone(UTC).date()
    return (context["dag_run"].run_after.astimezone(UTC) - timedelta(days=1)).date()
