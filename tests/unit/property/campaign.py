"""The Hypothesis settings of every property test: ``ACME_PROPERTY_EXAMPLES`` cases per test (100 by
default, as in CI), the same cases every run unless ``ACME_PROPERTY_RANDOM=1`` (then with
``pytest --hypothesis-seed=N``) explores new ones."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("ACME_PROPERTY_EXAMPLES", "100"))


def campaign_settings(*more_suppressed: HealthCheck) -> settings:
    return settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, *more_suppressed],
        derandomize=not os.environ.get("ACME_PROPERTY_RANDOM"),
    )


SETTINGS = campaign_settings()
