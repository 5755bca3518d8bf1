"""The one place protocol code reads time from.

Live mode uses `SystemClock` (the host's wall clock and monotonic clock; the
store keeps judging leases by the database's own clock). The deterministic
simulation installs a virtual clock for the duration of a run (`use_clock`),
so lease expiry, freshness budgets, deadlines, capability and approval expiry,
poll timeouts and sleeps all follow simulated time.

Protocol modules call the module functions `now()`, `monotonic()`, `sleep()`,
`wait()` and `start_thread()`, never `time.time()`, `datetime.now()` or
`threading.Thread(...).start()` for protocol work; `tests/sim/test_clock_scan.py`
enforces that.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol


class Clock(Protocol):
    """What protocol code may ask of time."""

    def now(self) -> dt.datetime:
        """The current wall-clock time, aware UTC."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (timeouts and intervals)."""

    def sleep(self, seconds: float) -> None:
        """Let `seconds` pass."""

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        """Wait until `event` is set or `timeout_s` passed; True when it was set."""

    def start_thread(self, target: Callable[[], object], name: str) -> None:
        """Run `target` concurrently (a daemon thread live; a scheduled actor in simulation)."""


class SystemClock:
    """The host's clocks and real threads."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        return event.wait(timeout_s)

    def start_thread(self, target: Callable[[], object], name: str) -> None:
        threading.Thread(target=target, name=name, daemon=True).start()


class VirtualClock:
    """A clock that moves only when told to (`advance`); sleeping advances it.

    On its own it is a plain settable clock (useful in tests). The simulation's
    scheduler subclasses it so that `sleep` and `wait` hand control to other
    actors while virtual time passes.
    """

    def __init__(self, start: dt.datetime, *, resolution_s: float = 1e-6) -> None:
        if start.tzinfo is None:
            raise ValueError("a virtual clock starts at an aware datetime")
        self._start = start.astimezone(dt.timezone.utc)
        self._elapsed = 0.0
        self.resolution_s = resolution_s

    @property
    def elapsed_s(self) -> float:
        return self._elapsed

    def advance(self, seconds: float) -> None:
        """Move time forward (never back)."""
        if seconds < 0:
            raise ValueError(f"a virtual clock never goes back (asked {seconds} s)")
        self._elapsed += seconds

    def offset_s(self) -> float:
        """Skew added to this reader's view of time (none by default)."""
        return 0.0

    def now(self) -> dt.datetime:
        micros = round((self._elapsed + self.offset_s()) / self.resolution_s) * self.resolution_s
        return self._start + dt.timedelta(seconds=micros)

    def db_now(self) -> dt.datetime:
        """The shared (unskewed) time: what a database server would answer."""
        return self._start + dt.timedelta(seconds=round(self._elapsed, 6))

    def monotonic(self) -> float:
        return self._elapsed + self.offset_s()

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        if not event.is_set():
            self.sleep(timeout_s)
        return event.is_set()

    def start_thread(self, target: Callable[[], object], name: str) -> None:
        threading.Thread(target=target, name=name, daemon=True).start()


SYSTEM = SystemClock()
_current: Clock = SYSTEM
_lock = threading.Lock()


def current() -> Clock:
    """The clock in force (the system clock unless a simulation installed one)."""
    return _current


@contextmanager
def use_clock(clock: Clock) -> Iterator[Clock]:
    """Install `clock` for protocol code in this process until the block ends."""
    global _current
    with _lock:
        previous, _current = _current, clock
    try:
        yield clock
    finally:
        with _lock:
            _current = previous


def now() -> dt.datetime:
    """Aware UTC wall-clock time from the clock in force."""
    return _current.now()


def monotonic() -> float:
    return _current.monotonic()


def sleep(seconds: float) -> None:
    _current.sleep(seconds)


def wait(event: threading.Event, timeout_s: float) -> bool:
    return _current.wait(event, timeout_s)


def start_thread(target: Callable[[], object], name: str) -> None:
    _current.start_thread(target, name)
