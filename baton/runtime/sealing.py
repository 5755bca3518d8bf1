"""Sealing a run at its boundary, and the quiesce point between boundaries.

`Sealer.seal` derives the resumability class from the run's state, writes the
checkpoint through `seal_checkpoint` (the store refuses a stale epoch: the
owner is then fenced) and records CHECKPOINT_STARTED / CHECKPOINT_SEALED and
the boundary's budget charges in the checkpoint's own transaction: one durable
commit per boundary.
`Sealer.confirm` checks the first transition after a resume. `Sealer.pause`
is the quiesce point: after the (simulated) work time between boundaries, a
pending handoff request is acknowledged with the checkpoint just sealed and
`HandoffRequested` is raised.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from baton import clock
from baton.checkpoints import restore, seal_checkpoint
from baton.errors import StaleEpochError
from baton.handoff.quiesce import HandoffWatch, QuiesceSignal, acknowledge_quiesce
from baton.handoff.resume import ResumePlan, confirm_resume
from baton.models import BudgetUsage, Event, EventType, ExecutionCheckpoint
from baton.resumability import classify_resumability, sealed_browser_class
from baton.runtime.errors import HandoffRequested, RunFenced, WorkerStopping
from baton.runtime.run_state import RunState
from baton.runtime.services import RuntimeServices
from baton.store.core import Tx


@dataclass
class Sealer:
    """Seals one run for one owner (run id, epoch) and records what happened."""

    services: RuntimeServices
    run_id: str
    epoch: int
    owner: str
    process: str
    lost: threading.Event
    watch: HandoffWatch = field(init=False)
    _prefetched: tuple[QuiesceSignal | None] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.watch = HandoffWatch(self.run_id)

    def ensure_owner(self) -> None:
        """RunFenced once the lease is known to be lost."""
        if self.lost.is_set():
            raise RunFenced(f"run {self.run_id!r}: {self.owner} lost the lease of epoch {self.epoch}")

    def _event(
        self,
        state: RunState,
        event_type: EventType,
        *,
        at: dt.datetime,
        checkpoint: ExecutionCheckpoint | None = None,
        reason: str | None = None,
        detail: dict[str, JsonValue] | None = None,
    ) -> Event:
        return Event(
            event_type=event_type,
            run_id=self.run_id,
            at=at,
            checkpoint_id=None if checkpoint is None else checkpoint.checkpoint_id,
            source_placement=state.parts.placement.name,
            source_epoch=self.epoch,
            release_id=state.parts.release.release_id,
            state_schema=state.head.schema_version,
            reason=reason,
            resume_boundary=state.boundary.value,
            detail=detail or {},
        )

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
        store.append_event(self._event(state, event_type, at=store.db_now(), checkpoint=checkpoint, reason=reason,
                                       detail=detail))

    def seal(
        self,
        state: RunState,
        *,
        contents: Sequence[bytes] = (),
        charges: Sequence[tuple[BudgetUsage, str]] = (),
        check_handoff: bool = False,
        at: dt.datetime | None = None,
    ) -> ExecutionCheckpoint:
        """Seal `state` at its boundary in ONE store transaction; RunFenced if the store refuses this epoch.

        The transaction holds the new blobs (raw `contents` and the new parts),
        the checkpoint row, CHECKPOINT_STARTED and CHECKPOINT_SEALED, and the
        boundary's budget `charges`; all commit or none does. With
        `check_handoff` (and no work time between boundaries) the pending
        handoff lookup runs in the same transaction, and `pause` uses its answer.
        If the seal fails, the charges are still recorded on their own, so spend
        is never lost with a refused checkpoint. `at` is the store clock reading
        to seal at (the caller's, taken at this boundary), else a new one.
        """
        self.ensure_owner()
        began = clock.monotonic()
        store = self.services.store
        parts = state.parts_to_seal()
        resumability = classify_resumability(
            state.boundary, parts.run_kind, parts.operations, has_recorded_observations=len(state.book) > 0,
            workspace=parts.workspace, constraints=parts.constraints, source=parts.placement,
            browser=sealed_browser_class(parts.run_kind),
        )
        now = at or store.db_now()
        started = self._event(state, EventType.CHECKPOINT_STARTED, at=now)
        watch_in_tx = check_handoff and self.services.boundary_pause_s <= 0
        self._prefetched = None
        lookups: list[Callable[[], QuiesceSignal | None]] = []

        def within(tx: Tx) -> None:
            if charges:
                store.insert_budget_charges(tx, self.run_id, self.epoch, charges)
            if watch_in_tx:
                lookups[:] = [self.watch.lookup_later(store, tx)]  # its rows are read once the seal commits

        def events(checkpoint: ExecutionCheckpoint) -> list[Event]:
            # stamped when the seal's work is done, inside its transaction: the pair measures checkpoint latency
            # (one clock reading for both made it 0 for every seal); the checkpoint itself keeps `now`
            done = now + dt.timedelta(seconds=max(0.0, clock.monotonic() - began))
            sealed = self._event(state, EventType.CHECKPOINT_SEALED, at=done, checkpoint=checkpoint,
                                 detail={"checkpoint_hash": checkpoint.checkpoint_hash,
                                         "resumability": checkpoint.resumability.value, "owner": self.owner})
            return [started, sealed]

        try:
            checkpoint = seal_checkpoint(
                store, self.services.blobs, run_id=self.run_id, parts=parts, new_observations=state.new_observations,
                parent=state.head, boundary=state.boundary, resumability=resumability.resumability,
                resumability_reasons=resumability.reasons, owner_epoch=self.epoch, sealed_at=now,
                contents=contents, within=within, events=events,
            )
        except StaleEpochError as exc:
            self._prefetched = None
            self._charge_alone(charges)
            self.lost.set()
            self.emit(state, EventType.STALE_WORKER_REJECTED, reason="checkpoint from a stale epoch refused at the store",
                      detail={"process": self.process, "owner": self.owner})
            raise RunFenced(f"run {self.run_id!r}: the store refused a checkpoint at epoch {self.epoch}: {exc}") from exc
        except BaseException:
            self._prefetched = None
            self._charge_alone(charges)
            raise
        if lookups:
            self._prefetched = (lookups[0](),)
        state.sealed(checkpoint)
        return checkpoint

    def _charge_alone(self, charges: Sequence[tuple[BudgetUsage, str]]) -> None:
        for usage, reason in charges:
            self.services.store.append_budget_charge(self.run_id, self.epoch, usage, reason)

    def confirm(self, plan: ResumePlan, checkpoint: ExecutionCheckpoint) -> list[str]:
        """Problems with the first checkpoint sealed after `plan` (RESUME_VERIFIED or REVALIDATION_FAILED)."""
        return confirm_resume(self.services.store, plan, checkpoint, restore(self.services.blobs, checkpoint))

    def pause(self, state: RunState) -> None:
        """Work time between boundaries, then the quiesce point (HandoffRequested, WorkerStopping)."""
        if self.services.boundary_pause_s > 0:
            clock.wait(self.lost, self.services.boundary_pause_s)
        self.ensure_owner()
        prefetched, self._prefetched = self._prefetched, None
        signal = prefetched[0] if prefetched is not None else self.watch.check(self.services.store)
        if signal is not None:
            acknowledge_quiesce(
                self.services.store, signal, checkpoint_id=state.head.checkpoint_id, epoch=self.epoch,
                placement=state.parts.placement.name, note=f"quiesced by {self.owner} at {state.boundary.value}",
            )
            raise HandoffRequested(signal, state.head.checkpoint_id)
        if self.services.stopping.is_set():
            raise WorkerStopping(f"run {self.run_id!r}: worker {self.owner} is stopping")
