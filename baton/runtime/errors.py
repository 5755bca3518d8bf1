"""Why a run stopped making progress on this worker: the SDK raises these, the worker handles them.

Agent code does not catch them. Each one tells the worker what to do with the
run: give it up (fenced, handed off), end it (failed, escalated), or fix its
inputs first (revalidation needed).
"""

from __future__ import annotations

from baton.errors import BatonError
from baton.handoff.quiesce import QuiesceSignal
from baton.models import Observation, UseMode


class RunStopped(BatonError):
    """Base class: the run cannot continue on this worker right now."""


class HandoffRequested(RunStopped):
    """A handoff was requested; the run sealed a checkpoint, acknowledged, and must pause."""

    def __init__(self, signal: QuiesceSignal, checkpoint_id: str | None) -> None:
        super().__init__(f"run {signal.run_id!r}: handoff requested ({signal.reason}); quiesced at {checkpoint_id}")
        self.signal = signal
        self.checkpoint_id = checkpoint_id


class RunFenced(RunStopped):
    """This worker no longer owns the run's current epoch; it must not touch the run again."""


class RunFailed(RunStopped):
    """The run ended as FAILED (a checkpoint at FAILED was sealed)."""


class RunEscalated(RunStopped):
    """The run ended as ESCALATED: a human (or a further reconciliation) must decide."""


class WorkerStopping(RunStopped):
    """The worker is shutting down; the run stops at a sealed boundary and its lease is given up."""


class BudgetExhausted(RunStopped):
    """The run's budget ledger has reached a limit; no further work is allowed."""

    def __init__(self, message: str, *, limits: tuple[str, ...]) -> None:
        super().__init__(message)
        self.limits = limits


class ObservationNeedsRevalidation(BatonError):
    """An observation may not be used as recorded: revalidate or refresh it first (invariant 9)."""

    def __init__(self, observation: Observation, mode: UseMode) -> None:
        super().__init__(
            f"observation of {observation.source} (observed {observation.observed_at.isoformat()}) must be used "
            f"as {mode.value}; revalidate it against the live source before relying on it"
        )
        self.observation = observation
        self.mode = mode


class BoundaryError(BatonError):
    """An SDK call was made at a boundary where it makes no sense (e.g. perform before approval)."""
