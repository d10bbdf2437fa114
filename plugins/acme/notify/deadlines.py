"""When the nightly chain is late: the deadline of its scheduled head as an interval after the run's logical
date, from an hour of the day in the clusters' time zone (``ACME_NOTIFY_DEADLINE_HOUR``,
``ACME_NOTIFY_DEADLINE_TIMEZONE``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

DAY = timedelta(days=1)


def interval_to_hour(hour: int, zone: str, reference: datetime) -> timedelta:
    """From the logical date of a daily run (the start of its UTC day) to the first ``hour``:00 in ``zone`` at
    or after the day's end (when the run starts), with ``zone``'s UTC offset at ``reference``."""
    offset = ZoneInfo(zone).utcoffset(reference.replace(tzinfo=None)) or timedelta(0)
    after_end = (timedelta(hours=hour) - offset) % DAY
    return DAY + after_end
