"""Which failures a retry cannot fix: bad data and bad configuration fail the task at once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def no_retry_for_bad_input() -> Iterator[None]:
    """Turn input, schema, quarantine-threshold and configuration errors into a final failure.

    Parsing or validating the same raw copy again gives the same answer, so retrying only
    delays the alert; transient errors (object store, network) still get the task's retries.
    """
    from airflow.sdk.exceptions import AirflowFailException

    from acme.errors import ConfigError, InputError, QuarantineThresholdError

    try:
        yield
    except (InputError, QuarantineThresholdError, ConfigError) as exc:
        raise AirflowFailException(str(exc)) from exc
