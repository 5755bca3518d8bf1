"""Triggering handoffs: one call per request, a few at a time, never two at once for one run.

`trigger_handoff` is the only way the fleet moves a run; a Dagster sensor
would make the same call. `HandoffDispatcher` runs those calls in a small
thread pool (a live handoff waits for its source to quiesce) and notices the
ones that lost a race (the run was adopted, or sealed a newer checkpoint, while
the move was being prepared), so the caller can ask again with what it knows now.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from baton.handoff.coordinator import HandoffCoordinator, HandoffOutcome, HandoffRequest
from baton.runtime.dispatch import dispatch

_RACES = ("epoch moved", "newer checkpoint")


def trigger_handoff(coordinator: HandoffCoordinator, request: HandoffRequest) -> HandoffOutcome:
    """Move one run: the single handoff path of the fleet (`baton.runtime.dispatch.dispatch`)."""
    return dispatch(coordinator, request)


def lost_a_race(outcome: HandoffOutcome) -> bool:
    """True for an abort caused by the run moving on while the handoff was prepared."""
    return not outcome.committed and any(race in (outcome.abort_reason or "") for race in _RACES)


@dataclass
class HandoffDispatcher:
    """Runs `trigger_handoff` calls in a thread pool, one in flight per run."""

    coordinator: HandoffCoordinator
    retry_races: int = 2
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(4, thread_name_prefix="handoff"))
    in_flight: dict[str, tuple[HandoffRequest, Future[HandoffOutcome]]] = field(default_factory=dict)
    outcomes: list[HandoffOutcome] = field(default_factory=list)
    raced: list[HandoffRequest] = field(default_factory=list)
    _retries: dict[tuple[str, str], int] = field(default_factory=dict)

    def busy(self, run_id: str) -> bool:
        """True while a handoff of `run_id` is in flight (collects it once it is done)."""
        entry = self.in_flight.get(run_id)
        if entry is None:
            return False
        request, future = entry
        if not future.done():
            return True
        del self.in_flight[run_id]
        if future.exception() is None:
            outcome = future.result()
            self.outcomes.append(outcome)
            slot = (request.run_id, request.reason)
            if lost_a_race(outcome) and self._retries.get(slot, 0) < self.retry_races:
                self._retries[slot] = self._retries.get(slot, 0) + 1
                self.raced.append(request)
        return False

    def submit(self, request: HandoffRequest) -> bool:
        """Start a handoff unless one of the same run is in flight."""
        if self.busy(request.run_id):
            return False
        self.in_flight[request.run_id] = (request, self.pool.submit(trigger_handoff, self.coordinator, request))
        return True

    def take_raced(self) -> list[HandoffRequest]:
        """Requests that lost a race since the last call (to be asked again, updated)."""
        for run_id in list(self.in_flight):
            self.busy(run_id)
        raced, self.raced = self.raced, []
        return raced

    def drain(self) -> None:
        """Wait for every handoff in flight."""
        self.pool.shutdown(wait=True)
        for run_id in list(self.in_flight):
            self.busy(run_id)


def with_source_alive(request: HandoffRequest, alive: bool) -> HandoffRequest:
    """The same request, for a source that is (or is not) there to quiesce."""
    return dataclasses.replace(request, source_alive=alive)
