"""What a task reads from its run's context."""

from __future__ import annotations

from datetime import UTC, date, timedelta
from typing import Any


def run_day(context: Any) -> date:
    """The UTC day a run is about: the `day` param, else the data interval, else yesterday."""
    if context["params"].get("day"):
        return date.fromisoformat(context["params"]["day"])
    interval_start = context.get("data_interval_start")
    if interval_start is not None:
        return interval_start.astimezone(UTC).date()
    return (context["dag_run"].run_after.astimezone(UTC) - timedelta(days=1)).date()
