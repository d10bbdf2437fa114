"""Report periods: a day, a month, the whole history; anything else is a clear error."""

from __future__ import annotations

from datetime import date

import pytest

from acme.errors import ConfigError
from acme.report.periods import parse_period, previous_month


def test_month_day_and_all():
    july = parse_period("2023-07")
    assert (july.kind, july.first, july.last) == ("month", date(2023, 7, 1), date(2023, 7, 31))
    assert parse_period("2024-02").last == date(2024, 2, 29)
    day = parse_period("2023-07-14")
    assert day.contains(date(2023, 7, 14)) and not day.contains(date(2023, 7, 15))
    assert parse_period("all").contains(date(1999, 1, 1))
    assert previous_month(date(2023, 8, 1)).label == "2023-07"
    assert previous_month(date(2023, 1, 15)).label == "2022-12"


@pytest.mark.parametrize("text", ["2023-13", "2023-07-32", "July", "", "2023-7"])
def test_bad_period_names_the_value(text):
    with pytest.raises(ConfigError, match="is not a day"):
        parse_period(text)
