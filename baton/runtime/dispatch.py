"""Building the handoff coordinator a deployment uses, and running one request through it.

The fleet loop and Dagster's `handoff_job` both move runs through this module:
`build_coordinator` assembles the coordinator from the store, the blobs, the
target services of a Baton home (the fence-aware targets) and the placements
that can take runs; `run_handoff` builds one for a single request, runs it and
closes the target clients. There is no second handoff path.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from baton.fencing import FenceAware
from baton.handoff.coordinator import STRANDED_AFTER_S, HandoffCoordinator, HandoffOutcome, HandoffRequest
from baton.models import Placement
from baton.runtime.fleet_plan import store_fleet_policy
from baton.runtime.worker import connect_git_remote, connect_targets, connect_webapp
from baton.store.base import SqlStore
from baton.store.blobs import Blobs


@dataclass(frozen=True)
class DispatchSettings:
    """Timings of a coordinator: how long a target reservation lasts, how long to wait for a quiesce, and how long
    an unowned run that no placement can take waits before it is escalated."""

    reservation_ttl_s: float = 10.0
    quiesce_timeout_s: float = 3.0
    target_timeout_s: float = 5.0
    stranded_after_s: float = STRANDED_AFTER_S


def build_coordinator(
    store: SqlStore,
    blobs: Blobs,
    placements: Mapping[str, Placement] | Sequence[Placement],
    fence_targets: Sequence[FenceAware],
    settings: DispatchSettings = DispatchSettings(),
) -> HandoffCoordinator:
    """The coordinator every trigger uses: the fleet policy, the given placements and fence-aware targets."""
    by_name = dict(placements) if isinstance(placements, Mapping) else {p.name: p for p in placements}
    return HandoffCoordinator(
        store, blobs, by_name, policy=store_fleet_policy(store), fence_targets=tuple(fence_targets),
        lease_ttl_s=settings.reservation_ttl_s, quiesce_timeout_s=settings.quiesce_timeout_s,
        stranded_after_s=settings.stranded_after_s,
    )


@contextmanager
def home_coordinator(
    store: SqlStore,
    blobs: Blobs,
    home: Path,
    placements: Mapping[str, Placement] | Sequence[Placement],
    settings: DispatchSettings = DispatchSettings(),
) -> Iterator[HandoffCoordinator]:
    """A coordinator fencing every target service of `home` (deploy and corpus; the git remote and the web
    application when they run); clients close on exit."""
    deploy, corpus = connect_targets(home, timeout_s=settings.target_timeout_s)
    optional = [client for client in (connect_git_remote(home, timeout_s=settings.target_timeout_s),
                                      connect_webapp(home, timeout_s=settings.target_timeout_s)) if client is not None]
    try:
        yield build_coordinator(store, blobs, placements, (deploy, corpus, *optional), settings)
    finally:
        for client in (corpus, deploy, *optional):
            client.close()


def dispatch(coordinator: HandoffCoordinator, request: HandoffRequest) -> HandoffOutcome:
    """Move one run: the single call behind every handoff, whoever triggered it."""
    return coordinator.handoff(request)


def run_handoff(
    store: SqlStore,
    blobs: Blobs,
    home: Path,
    placements: Mapping[str, Placement] | Sequence[Placement],
    request: HandoffRequest,
    settings: DispatchSettings = DispatchSettings(),
) -> HandoffOutcome:
    """Build the coordinator for `home`, run `request` through it, close the target clients."""
    with home_coordinator(store, blobs, home, placements, settings) as coordinator:
        return dispatch(coordinator, request)
