"""The one wait loop of the tests that drive a running deployment (``make stack``, the compose tier)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout_s: float,
    what: str,
    context: Callable[[], str] = str,
    poll_s: float = 2,
) -> T:
    """``predicate()``'s first truthy result, asked every ``poll_s`` seconds; after ``timeout_s`` the test
    fails naming ``what``, followed by ``context()`` (the services' logs, say)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}{context()}")
