"""Sealing a run at its boundary, and the quiesce point between boundaries.

`Sealer.seal` derives the resumability class from the run's state, writes the
checkpoint through `seal_checkpoint` (the store refuses a stale epoch: the
owner is then fenced) and records CHECKPOINT_STARTED / CHECKPOINT_SEALED.
`Sealer.confirm` checks the first transition after a resume. `Sealer.pause`
is the quiesce point: after the (simulated) work time between boundaries, a
pending handoff request is acknowledged with the checkpoint just sealed and
`HandoffRequested` is raised.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pydantic import JsonValue

from baton.checkpoints import restore, seal_checkpoint
from baton.errors import StaleEpochError
from baton.handoff.quiesce import acknowledge_quiesce, pending_handoff_request
from baton.handoff.resume import ResumePlan, confirm_resume
from baton.models import Event, EventType, ExecutionCheckpoint
from baton.resumability import classify_resumability, sealed_browser_class
from baton.runtime.errors import HandoffRequested, RunFenced, WorkerStopping
from baton.runtime.run_state import RunState
from baton.runtime.services import RuntimeServices


@dataclass
class Sealer:
    """Seals one run for one owner (run id, epoch) and records what happened."""

    services: RuntimeServices
    run_id: str
    epoch: int
    owner: str
    process: str
    lost: threading.Event

    def ensure_owner(self) -> None:
        """RunFenced once the lease is known to be lost."""
        if self.lost.is_set():
            raise RunFenced(f"run {self.run_id!r}: {self.owner} lost the lease of epoch {self.epoch}")

    def emit(
        self,
        state: RunState,
        event_type: EventType,
        *,
        checkpoint: ExecutionCheckpoint | None = None,
        reason: str | None = None,
        detail: dict[str, JsonValue] | None = None,
    ) -> None:
        """Append one event about this run, as seen by this owner."""
        store = self.services.store
        store.append_event(Event(
            event_type=event_type,
            run_id=self.run_id,
            at=store.db_now(),
            checkpoint_id=None if checkpoint is None else checkpoint.checkpoint_id,
            source_placement=state.parts.placement.name,
            source_epoch=self.epoch,
            release_id=state.parts.release.release_id,
            state_schema=state.head.schema_version,
            reason=reason,
            resume_boundary=state.boundary.value,
            detail=detail or {},
        ))

    def seal(self, state: RunState) -> ExecutionCheckpoint:
        """Seal `state` at its boundary; RunFenced if the store refuses this epoch."""
        self.ensure_owner()
        store = self.services.store
        parts = state.parts_to_seal()
        resumability = classify_resumability(
            state.boundary, parts.run_kind, parts.operations, has_recorded_observations=len(state.book) > 0,
            workspace=parts.workspace, constraints=parts.constraints, source=parts.placement,
            browser=sealed_browser_class(parts.run_kind),
        )
        self.emit(state, EventType.CHECKPOINT_STARTED)
        try:
            checkpoint = seal_checkpoint(
                store, self.services.blobs, run_id=self.run_id, parts=parts, new_observations=state.new_observations,
                parent=state.head, boundary=state.boundary, resumability=resumability.resumability,
                resumability_reasons=resumability.reasons, owner_epoch=self.epoch, sealed_at=store.db_now(),
            )
        except StaleEpochError as exc:
            self.lost.set()
            self.emit(state, EventType.STALE_WORKER_REJECTED, reason="checkpoint from a stale epoch refused at the store",
                      detail={"process": self.process, "owner": self.owner})
            raise RunFenced(f"run {self.run_id!r}: the store refused a checkpoint at epoch {self.epoch}: {exc}") from exc
        state.sealed(checkpoint)
        self.emit(state, EventType.CHECKPOINT_SEALED, checkpoint=checkpoint,
                  detail={"checkpoint_hash": checkpoint.checkpoint_hash, "resumability": checkpoint.resumability.value,
                          "owner": self.owner})
        return checkpoint

    def confirm(self, plan: ResumePlan, checkpoint: ExecutionCheckpoint) -> list[str]:
        """Problems with the first checkpoint sealed after `plan` (RESUME_VERIFIED or REVALIDATION_FAILED)."""
        return confirm_resume(self.services.store, plan, checkpoint, restore(self.services.blobs, checkpoint))

    def pause(self, state: RunState) -> None:
        """Work time between boundaries, then the quiesce point (HandoffRequested, WorkerStopping)."""
        if self.services.boundary_pause_s > 0:
            self.lost.wait(self.services.boundary_pause_s)
        self.ensure_owner()
        signal = pending_handoff_request(self.services.store, self.run_id)
        if signal is not None:
            acknowledge_quiesce(
                self.services.store, signal, checkpoint_id=state.head.checkpoint_id, epoch=self.epoch,
                placement=state.parts.placement.name, note=f"quiesced by {self.owner} at {state.boundary.value}",
            )
            raise HandoffRequested(signal, state.head.checkpoint_id)
        if self.services.stopping.is_set():
            raise WorkerStopping(f"run {self.run_id!r}: worker {self.owner} is stopping")
