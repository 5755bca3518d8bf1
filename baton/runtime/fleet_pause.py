"""A worker frozen with SIGSTOP past its lease, its runs taken over, then woken with SIGCONT.

Issue 12's stale-worker demonstration, on the fleet's real processes. One
worker slot is started with the `before_send` fault point armed
(`baton.fault_points`): the first mutation it is about to send, after the
gateway passed every check of its own, holds and announces itself. Then:

1. the fleet SIGSTOPs that worker (paused, not killed: its process and the
   request it holds survive, only its heartbeats stop);
2. its leases lapse and the fleet's ordinary lease-expiry path hands its runs
   off; the new owners' epochs are raised at the targets;
3. once every run it held has moved on (a higher epoch, or ended), the fleet
   releases the hold and SIGCONTs it. Its held request now reaches the target
   with the old epoch, and the target's own fence must refuse it.

Whether it did is read from the targets' request logs (`baton.runtime.fleet_stale`),
never from what the worker says about itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from baton import clock, fault_points
from baton.chaos import has_gpu
from baton.models import AuthorityLevel, Placement, RunKind
from baton.placements import hosts_kind
from baton.runtime.supervisor import Supervisor, WorkerSlot
from baton.runtime.worker import worker_owner
from baton.store.base import SqlStore

PAUSE_POINT = "before_send"


def pause_placement(worker_placements: Sequence[str], catalog: Mapping[str, Placement]) -> str:
    """Where to freeze a worker: the first placement with a worker that may mutate external systems, has no
    GPU (a reclaimed GPU would SIGKILL it) and is not a browser pool (its runs have somewhere else to go)."""
    for name in worker_placements:
        placement = catalog.get(name)
        if (placement is not None and placement.authority_ceiling.allows(AuthorityLevel.EXTERNAL_MUTATE)
                and not has_gpu(placement) and not hosts_kind(placement, RunKind.BROWSER)):
            return name
    if not worker_placements:
        raise ValueError("a fleet without workers has no worker to pause")
    return worker_placements[0]


class PausePhase(StrEnum):
    ARMED = "armed"
    FROZEN = "frozen"
    WOKEN = "woken"


@dataclass
class WorkerPause:
    """The one pause of a fleet: which slot, what it held when frozen, and when it was woken."""

    slot: WorkerSlot
    directory: Path
    lease_ttl_s: float
    give_up_after_s: float = 60.0
    """A frozen worker whose runs never move is woken anyway after this long (the report says so)."""
    phase: PausePhase = PausePhase.ARMED
    frozen_at: float | None = None
    woken_after_s: float | None = None
    held: dict[str, int] = field(default_factory=dict)
    """Run id -> epoch of every run the frozen worker owned, at the moment it was frozen."""
    moved: bool = False

    @classmethod
    def arm(cls, supervisor: Supervisor, directory: Path, *, lease_ttl_s: float, placement: str | None = None,
            give_up_after_s: float = 60.0) -> WorkerPause:
        """Arm the fault point in one slot (on `placement`, or the first slot) before the workers start."""
        slots = [s for s in supervisor.slots if placement is None or s.placement == placement]
        if not slots:
            known = sorted({s.placement for s in supervisor.slots})
            raise ValueError(f"no worker on placement {placement!r} to pause; the fleet's workers are on {known}")
        directory.mkdir(parents=True, exist_ok=True)
        slot = slots[0]
        slot.env = {**slot.env, fault_points.POINT_ENV: PAUSE_POINT, fault_points.DIR_ENV: str(directory)}
        return cls(slot=slot, directory=directory, lease_ttl_s=lease_ttl_s, give_up_after_s=give_up_after_s)

    @property
    def owner(self) -> str:
        return worker_owner(self.slot.worker_id)

    def _reached_by_our_process(self) -> bool:
        marker = fault_points.marker(self.directory, PAUSE_POINT, "reached")
        if not marker.exists() or self.slot.process is None:
            return False
        text = marker.read_text(encoding="utf-8").strip()
        return text.isdigit() and int(text) == self.slot.process.pid

    def step(self, store: SqlStore, supervisor: Supervisor, active: set[str]) -> None:
        """Advance the pause by what the store says now; call once per fleet loop pass."""
        if self.phase is PausePhase.ARMED and self._reached_by_our_process():
            if supervisor.pause(self.slot, store):
                self.frozen_at = clock.monotonic()
                self.held = {run_id: lease.epoch for run_id in sorted(active)
                             if (lease := store.get_lease(run_id)).owner == self.owner}
                self.phase = PausePhase.FROZEN
            return
        if self.phase is not PausePhase.FROZEN or self.frozen_at is None:
            return
        frozen_for = clock.monotonic() - self.frozen_at
        moved_on = all(run_id not in active or store.get_lease(run_id).epoch > epoch
                       for run_id, epoch in self.held.items())
        if (moved_on and frozen_for > self.lease_ttl_s) or frozen_for > self.give_up_after_s:
            self.moved = moved_on
            fault_points.marker(self.directory, PAUSE_POINT, "go").write_text("go", encoding="utf-8")
            supervisor.resume(self.slot)
            self.woken_after_s = round(frozen_for, 2)
            self.phase = PausePhase.WOKEN

    def report(self) -> dict[str, object]:
        """What happened, for the fleet summary."""
        return {"worker": self.slot.worker_id, "placement": self.slot.placement, "phase": self.phase.value,
                "held_runs": sorted(self.held), "runs_moved_before_wake": self.moved,
                "frozen_s": self.woken_after_s}
