"""Fault tools for cluster tests (placeholder: filled in below)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
WAIT_S = 60.0  # a bound for a loaded 2-core machine; a passing run never waits this long


def wait_until(predicate: Callable[[], T], *, timeout: float = WAIT_S, interval: float = 0.02,
               what: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy (returned); fail past ``timeout``.

    The interval is a polling period, not synchronisation: the condition decides.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        time.sleep(interval)
