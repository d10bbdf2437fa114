"""Report periods: a UTC day (``2023-07-14``), a month (``2023-07``) or the whole history (``all``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

from acme.errors import ConfigError

_MONTH = re.compile(r"^\d{4}-\d{2}$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Period:
    """A period of submit days; ``first``/``last`` are inclusive and None for ``all``."""

    label: str
    kind: str  # day | month | all
    first: date | None = None
    last: date | None = None

    def contains(self, day: date) -> bool:
        if self.first is None or self.last is None:  # kind "all"
            return True
        return self.first <= day <= self.last

    @property
    def title(self) -> str:
        return {"day": f"day {self.label}", "month": f"month {self.label}", "all": "whole history"}[self.kind]


def parse_period(text: str) -> Period:
    """``YYYY-MM-DD``, ``YYYY-MM`` or ``all``; anything else is a ConfigError naming the value."""
    text = (text or "").strip()
    try:
        if text == "all":
            return Period("all", "all")
        if _DAY.match(text):
            day = date.fromisoformat(text)
            return Period(text, "day", day, day)
        if _MONTH.match(text):
            first = date.fromisoformat(f"{text}-01")
            following = (first.replace(day=28) + timedelta(days=4)).replace(day=1)
            return Period(text, "month", first, following - timedelta(days=1))
    except ValueError:
        pass
    raise ConfigError(f"report period {text!r} is not a day (YYYY-MM-DD), a month (YYYY-MM) or 'all'")


def month_of(day: date) -> Period:
    return parse_period(day.strftime("%Y-%m"))


def previous_month(day: date) -> Period:
    return month_of(day.replace(day=1) - timedelta(days=1))
