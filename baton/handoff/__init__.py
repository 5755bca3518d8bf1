"""The two-phase handoff: prepare (quiesce, seal, gate, reserve), commit (fence, transfer), restore.

`HandoffCoordinator.handoff` is the one call every trigger uses (the fleet
loop, a Dagster sensor, the CLI); `prepare_resume` and `confirm_resume` are the
new owner's side.
"""

from baton.handoff.coordinator import HandoffCoordinator, HandoffOutcome, HandoffRequest, HandoffStatus, PreparedHandoff
from baton.handoff.quiesce import QuiesceSignal, acknowledge_quiesce, pending_handoff_request, wait_for_handoff_result
from baton.handoff.resume import ObservationUse, ResumePlan, confirm_resume, prepare_resume
from baton.handoff.selection import rank_targets

__all__ = [
    "HandoffCoordinator",
    "HandoffOutcome",
    "HandoffRequest",
    "HandoffStatus",
    "ObservationUse",
    "PreparedHandoff",
    "QuiesceSignal",
    "ResumePlan",
    "acknowledge_quiesce",
    "confirm_resume",
    "pending_handoff_request",
    "prepare_resume",
    "rank_targets",
    "wait_for_handoff_result",
]
