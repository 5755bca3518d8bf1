"""Handoff and run events: every step is recorded, append-only."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from pydantic import Field, JsonValue

from baton.models.base import Record


class EventType(StrEnum):
    CHECKPOINT_STARTED = "checkpoint_started"
    CHECKPOINT_SEALED = "checkpoint_sealed"
    HANDOFF_REQUESTED = "handoff_requested"
    SOURCE_QUIESCED = "source_quiesced"
    SOURCE_FENCED = "source_fenced"
    TARGET_SELECTED = "target_selected"
    COMPATIBILITY_PASSED = "compatibility_passed"
    COMPATIBILITY_FAILED = "compatibility_failed"
    OWNERSHIP_TRANSFERRED = "ownership_transferred"
    STATE_RESTORED = "state_restored"
    REVALIDATION_STARTED = "revalidation_started"
    REVALIDATION_FAILED = "revalidation_failed"
    RESUME_STARTED = "resume_started"
    RESUME_VERIFIED = "resume_verified"
    HANDOFF_ABORTED = "handoff_aborted"
    # Beyond the handoff itself: ownership, authority and side effects.
    RUN_CREATED = "run_created"
    RUN_FINISHED = "run_finished"
    LEASE_ACQUIRED = "lease_acquired"
    STALE_WORKER_REJECTED = "stale_worker_rejected"
    AUTHORITY_DOWNGRADED = "authority_downgraded"
    OPERATION_RECONCILED = "operation_reconciled"
    RUN_ESCALATED = "run_escalated"
    REVERIFICATION_REQUIRED = "reverification_required"
    SCHEMA_MIGRATED = "schema_migrated"
    # The release and placement catalog (run_id is `baton.catalog.CATALOG_EVENT_RUN_ID`).
    RELEASE_PUBLISHED = "release_published"
    RELEASE_WITHDRAWN = "release_withdrawn"
    PLACEMENT_UPDATED = "placement_updated"
    EVIDENCE_RECORDED = "evidence_recorded"  # verifier evidence recorded outside a checkpoint (reverification)
    BROWSER_RESUME_CHOSEN = "browser_resume_chosen"  # the sec. 13 class a browser run resumed by


CATALOG_EVENT_RUN_ID = "baton:catalog"
"""The reserved `run_id` of catalog events (releases and placements), which belong to no run.

No run may take this id (the store refuses it), so run-scoped readers never
mistake a catalog change for a run's event."""


class Event(Record):
    """One event with the fields a handoff investigation needs; unused fields stay None."""

    event_type: EventType
    run_id: str = Field(min_length=1)
    at: dt.datetime
    checkpoint_id: str | None = None
    source_placement: str | None = None
    target_placement: str | None = None
    source_epoch: int | None = None
    target_epoch: int | None = None
    release_id: str | None = None
    state_schema: str | None = None
    reason: str | None = None
    compatibility_decision: dict[str, JsonValue] | None = None
    authority_before: str | None = None
    authority_after: str | None = None
    resume_boundary: str | None = None
    detail: dict[str, JsonValue] = Field(default_factory=dict)
