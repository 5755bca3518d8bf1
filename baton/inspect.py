"""A run's event trail told as a story: one plain sentence per event, in order."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from baton.models import Event, EventType


@dataclass(frozen=True)
class StoryLine:
    """One event, as a sentence, with its offset from the first event."""

    seq: int
    at: dt.datetime
    offset_s: float
    event_type: EventType
    sentence: str


def _epochs(e: Event) -> str:
    if e.source_epoch is not None and e.target_epoch is not None:
        return f"epoch {e.source_epoch} -> {e.target_epoch}"
    if e.target_epoch is not None:
        return f"epoch {e.target_epoch}"
    return "" if e.source_epoch is None else f"epoch {e.source_epoch}"


def _decision(e: Event) -> str:
    d = e.compatibility_decision or {}
    if not d:
        return ""
    reasons = ", ".join(str(r) for r in d.get("reasons", []) or []) or "no findings"  # type: ignore[union-attr]
    return (
        f"{d.get('migration_class') or 'no'} migration, resume mode {d.get('resume_mode')}, "
        f"authority ceiling {d.get('authority_ceiling')} ({reasons})"
    )


def _with(text: str, *extras: str) -> str:
    rest = "; ".join(extra for extra in extras if extra)
    return f"{text} ({rest})" if rest else text


_SENTENCES: dict[EventType, Callable[[Event], str]] = {
    EventType.RUN_CREATED: lambda e: "The run was created.",
    EventType.LEASE_ACQUIRED: lambda e: _with(
        f"{e.detail.get('owner', 'an owner')} took the lease", _epochs(e), e.reason or ""),
    EventType.CHECKPOINT_STARTED: lambda e: "Sealing a checkpoint began.",
    EventType.CHECKPOINT_SEALED: lambda e: _with(
        f"Checkpoint {e.checkpoint_id} was sealed at {e.resume_boundary}", e.reason or ""),
    EventType.HANDOFF_REQUESTED: lambda e: _with(
        f"A handoff was requested: {e.reason}", f"source {e.source_placement}", _epochs(e)),
    EventType.SOURCE_QUIESCED: lambda e: _with(
        f"The source on {e.source_placement} stopped at a boundary", f"checkpoint {e.checkpoint_id}"),
    EventType.TARGET_SELECTED: lambda e: f"{e.target_placement} was chosen and reserved as the target.",
    EventType.COMPATIBILITY_PASSED: lambda e: _with(
        f"The gate allowed the move to {e.target_placement}", _decision(e)),
    EventType.COMPATIBILITY_FAILED: lambda e: _with(
        "The gate refused every target", str(e.detail.get("refusals", ""))),
    EventType.SOURCE_FENCED: lambda e: _with("The old epoch was fenced", _epochs(e), e.reason or ""),
    EventType.OWNERSHIP_TRANSFERRED: lambda e: _with(
        f"Ownership moved from {e.source_placement} to {e.target_placement}", _epochs(e),
        f"authority {e.authority_before} -> {e.authority_after}"),
    EventType.STATE_RESTORED: lambda e: _with(
        f"{e.target_placement or 'The new owner'} restored checkpoint {e.checkpoint_id} and verified every hash",
        _epochs(e)),
    EventType.REVALIDATION_STARTED: lambda e: _with("Recorded observations are being revalidated", e.reason or ""),
    EventType.REVALIDATION_FAILED: lambda e: _with("Revalidation failed", e.reason or ""),
    EventType.REVERIFICATION_REQUIRED: lambda e: _with("Evidence must be re-verified", e.reason or ""),
    EventType.RESUME_STARTED: lambda e: _with(
        f"The run resumed from {e.resume_boundary}", f"authority {e.authority_after}" if e.authority_after else ""),
    EventType.RESUME_VERIFIED: lambda e: _with("The first resumed step kept every invariant", e.reason or ""),
    EventType.HANDOFF_ABORTED: lambda e: _with("The handoff was aborted; the source keeps the run", e.reason or ""),
    EventType.STALE_WORKER_REJECTED: lambda e: _with("A stale worker's mutation was refused", e.reason or "", _epochs(e)),
    EventType.AUTHORITY_DOWNGRADED: lambda e: _with(
        f"Authority was reduced from {e.authority_before} to {e.authority_after}", e.reason or ""),
    EventType.OPERATION_RECONCILED: lambda e: _with("An operation was reconciled with its target", e.reason or ""),
    EventType.RUN_ESCALATED: lambda e: _with("The run was escalated to a human", e.reason or ""),
    EventType.SCHEMA_MIGRATED: lambda e: _with("The checkpoint was migrated to a newer schema", e.reason or ""),
    EventType.EVIDENCE_RECORDED: lambda e: _with(
        f"Re-verification recorded {e.detail.get('result', 'a verdict')} for candidate "
        f"{str(e.detail.get('candidate_hash', ''))[:19]}", e.reason or ""),
    EventType.RUN_FINISHED: lambda e: _with("The run finished", e.reason or str(e.detail.get("status", ""))),
}


def sentence(event: Event) -> str:
    """One plain sentence for `event`."""
    render = _SENTENCES.get(event.event_type)
    return render(event) if render else _with(event.event_type.value, event.reason or "")


def story(events: Sequence[tuple[int, Event]]) -> list[StoryLine]:
    """The events of one run, in order, as sentences timed from the first."""
    if not events:
        return []
    start = events[0][1].at
    return [
        StoryLine(seq=seq, at=event.at, offset_s=(event.at - start).total_seconds(),
                  event_type=event.event_type, sentence=sentence(event))
        for seq, event in events
    ]
