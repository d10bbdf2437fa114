"""What every task body starts with: the lake, under the bad-input policy.

    @task
    def publish(planned: dict) -> dict:
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            return publish_staged(lake, ...)

Inside ``lake_task()`` bad input (an :class:`~acme.errors.InputError`, a quarantine over its threshold, a
:class:`~acme.errors.ConfigError`) fails the task at once, since a retry would read the same input and
fail the same way, while a storage or network error keeps the task's retries.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from acme_airflow.failures import no_retry_for_bad_input
from acme_airflow.lake import task_lake

if TYPE_CHECKING:
    from acme.lake import Lake


@contextlib.contextmanager
def lake_task() -> Iterator[Lake]:
    """The task's lake (see :func:`acme_airflow.lake.task_lake`), with bad input failing without retry."""
    with no_retry_for_bad_input():
        yield task_lake()
