"""The agent runtime: the SDK agents call at boundaries (`sdk.RunContext`) and the worker that runs them.

Only the SDK surface is exported here; the worker (`python -m baton.runtime.worker`),
the executor and the fleet helpers are imported from their modules.
"""

from baton.runtime.errors import (
    BoundaryError,
    BudgetExhausted,
    HandoffRequested,
    ObservationNeedsRevalidation,
    RunEscalated,
    RunFailed,
    RunFenced,
    RunStopped,
    WorkerStopping,
)
from baton.runtime.sdk import ObservedContent, RunContext, VerdictLike

__all__ = [
    "BoundaryError",
    "BudgetExhausted",
    "HandoffRequested",
    "ObservationNeedsRevalidation",
    "ObservedContent",
    "RunContext",
    "RunEscalated",
    "RunFailed",
    "RunFenced",
    "RunStopped",
    "VerdictLike",
    "WorkerStopping",
]
