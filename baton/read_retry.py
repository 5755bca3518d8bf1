"""Asking a read again when its answer is lost: one policy for target clients and browser page loads.

A read changes nothing at the other end, so repeating one whose answer went missing (a timeout, a
dropped connection, a service briefly answering 502/503/504) is safe, and a run should not end because
one answer was lost. Mutations never come here: an unanswered mutation is UNKNOWN and is reconciled.
The backoff sleeps on Baton's clock, so the simulation's virtual time governs it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from baton import clock

READ_ATTEMPTS = 3
READ_BACKOFF_S = 0.25
"""The first retry waits this long, each later one twice as long as the one before."""
RETRY_STATUSES = frozenset({502, 503, 504})
"""HTTP statuses of a service that is briefly unavailable: a read answered with one is asked again."""

T = TypeVar("T")


def retry_read(read: Callable[[], T], transient: tuple[type[BaseException], ...], *,
               again: Callable[[T], bool] | None = None, attempts: int = READ_ATTEMPTS) -> T:
    """Call `read` until it returns an answer `again` does not reject, or raises nothing in `transient`.

    The last attempt's answer is returned (or its exception raised) whatever it is."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    for attempt in range(attempts - 1):
        try:
            answer = read()
        except transient:
            pass
        else:
            if again is None or not again(answer):
                return answer
        clock.sleep(READ_BACKOFF_S * 2**attempt)
    return read()
