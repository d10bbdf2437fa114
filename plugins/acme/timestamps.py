"""Times as operators write them in settings and scrape files, shared by the configuration
(``acme.clusters`` checks a cluster's ``metrics.scrape_time``) and the monitoring parsers."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_scrape_time(text: str) -> int | None:
    """Epoch ms of an RFC 3339 time or epoch seconds; None when neither."""
    text = text.strip()
    try:
        return round(float(text) * 1000)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)
