"""Why a handoff was refused, read back from Baton's event log (the gate's per-target reasons)."""

from __future__ import annotations

from baton.models import EventType
from baton.store.base import SqlStore


def gate_refusals(store: SqlStore, run_id: str) -> dict[str, list[str]]:
    """Target placement -> the gate's reason codes, for the newest handoff request of `run_id` the gate refused.

    Empty when the newest aborted request never reached the gate (the run was
    not active, had no checkpoint, or no placement was left to consider).
    """
    aborted = store.list_events(run_id=run_id, event_types=[EventType.HANDOFF_ABORTED])
    if not aborted:
        return {}
    request_seq = aborted[-1][1].detail.get("request_seq")
    for _, event in reversed(store.list_events(run_id=run_id, event_types=[EventType.COMPATIBILITY_FAILED])):
        if event.detail.get("request_seq") == request_seq:
            refusals = event.detail.get("refusals")
            if isinstance(refusals, dict):
                return {str(target): [str(r) for r in reasons] for target, reasons in refusals.items()
                        if isinstance(reasons, list)}
    return {}
