"""Turning a fired chaos event into handoff requests for the handoff coordinator.

`baton.chaos` says which runs an event displaces and where they should
preferably go. Here the fleet adds what only the live fleet knows:

* a reclaimed GPU kills the worker, so its runs move without quiescing
  (`source_alive=False`);
* a run still held by its placement's reservation (no worker has adopted it
  yet) is left alone by a live event: nothing runs it there to displace, and
  its adoption is moments away (the event waits for it); a killed worker's
  reserved runs move like the others;
* a placement-wide outage excludes every placement it took out;
* a better model only moves runs not already on it, and only to placements
  that cannot run their current release: the move is a behavioral migration,
  decided by the gate under the policy's approval;
* a drained browser pool is refilled at once (`baton.chaos_catalog`), its
  sessions revoked: its runs go elsewhere first, and a run that only a
  browser pool can host (the gate refuses the others) may go back to it and
  rebuild its session there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from baton.chaos import ChaosEvent, ChaosReason
from baton.handoff.coordinator import HandoffRequest
from baton.models import Placement
from baton.runtime.worker import WORKER_OWNER_PREFIX


class SessionRevoker(Protocol):
    def revoke_sessions(self, account: str | None = None, reason: str = ..., *,
                        runs: Sequence[str] | None = None) -> int: ...


def revoke_drained_sessions(event: ChaosEvent, moved: Sequence[str], webapp: SessionRevoker | None) -> int:
    """A drained browser pool's browsers are gone, and the sessions they held with them: revoke, at the app,
    the sessions of the runs the drain moves. Returns how many (0 for any other reason, or without an app)."""
    if event.reason is not ChaosReason.BROWSER_POOL_DRAINED or webapp is None or not moved:
        return 0
    return webapp.revoke_sessions(reason=f"browser pool {event.source_placement} drained ({event.event_id})",
                                  runs=moved)


@dataclass(frozen=True)
class PlannedMove:
    """A handoff request for one run, or why the event leaves the run alone."""

    run_id: str
    request: HandoffRequest | None
    skipped: str | None = None


def moves_for(
    event: ChaosEvent,
    active: Mapping[str, str],
    *,
    placements: Sequence[Placement],
    lease_owner: Callable[[str], str | None],
    release_of: Callable[[str], str | None],
) -> list[PlannedMove]:
    """Handoff requests for the runs `event` displaces (`active`: run id -> placement now)."""
    moves = []
    for chaos in event.requests(active):
        owner = lease_owner(chaos.run_id)
        adopted = owner is not None and owner.startswith(WORKER_OWNER_PREFIX)
        if not adopted and not event.kill_worker:
            moves.append(PlannedMove(chaos.run_id, None, "not adopted yet: nothing runs it there to displace"))
            continue
        alive = adopted and not event.kill_worker
        excluded: tuple[str, ...] = tuple(event.affected)
        if event.reason is ChaosReason.BETTER_MODEL_RELEASED:
            current = release_of(chaos.run_id)
            if current is None or current == event.target_release_id:
                moves.append(PlannedMove(chaos.run_id, None, "already on the better release"))
                continue
            excluded = tuple(sorted(p.name for p in placements if current in p.supported_release_ids))
            if not [p for p in placements if p.name not in excluded and p.name != chaos.source_placement]:
                moves.append(PlannedMove(chaos.run_id, None, "no other placement runs only the better release"))
                continue
        refilled = event.reason is ChaosReason.BROWSER_POOL_DRAINED
        if refilled:  # the pool is refilled at once: a run only a browser pool can host may go back to it, last
            excluded = ()
        request = HandoffRequest(
            run_id=chaos.run_id,
            reason=chaos.reason.handoff_reason,
            preferred_targets=tuple(name for name in chaos.preferred_targets if name not in excluded),
            excluded_placements=excluded,
            source_alive=alive,
            allow_same_placement=refilled,
        )
        moves.append(PlannedMove(chaos.run_id, request))
    return moves
