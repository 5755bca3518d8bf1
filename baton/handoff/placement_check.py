"""Judging a placement as the store's catalog has it now, with the compatibility gate.

A coordinator is built with the placements it may place runs on, and a worker
with its own placement; either copy can be older than the catalog. Whoever acts
on a placement (a move's commit, a worker adopting a reservation) reads the
record again here and judges it with the one gate (`rank_targets`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from baton.checkpoints import RestoredRun
from baton.compat import GateReason, HandoffDecision, HandoffPolicy
from baton.handoff.selection import rank_targets
from baton.models import Placement
from baton.store.base import SqlStore

_NOT_HOSTING = frozenset({
    GateReason.CHECKPOINT_NOT_RESUMABLE, GateReason.MIGRATION_UNSAFE,  # whether the checkpoint may move at all
    GateReason.BEHAVIORAL_MIGRATION_UNAPPROVED, GateReason.SCHEMA_TRANSFORM_FORBIDDEN,  # the mover's policy ...
    GateReason.REGION_CHANGE_FORBIDDEN, GateReason.PROVIDER_CHANGE_FORBIDDEN, GateReason.AUTHORITY_DOWNGRADE_FORBIDDEN,
})
"""Blocking reasons that are not about what a placement can host: the checkpoint's own, and the deployment policy's
choices about a move, which the move's commit made on the catalog as it was then."""


def placements_now(store: SqlStore, known: Mapping[str, Placement]) -> tuple[int, dict[str, Placement]]:
    """The catalog's version and `known`, each placement the store's catalog holds replaced by its record there.

    A placement the catalog does not hold (an unseeded catalog, a placements file) keeps the given record.
    """
    version, catalog = store.catalog_snapshot()
    current = {placement.name: placement for placement in catalog}
    return version, {name: current.get(name, placement) for name, placement in known.items()}


def judge_placement(
    restored: RestoredRun, placement: Placement, policy: HandoffPolicy, *, now: dt.datetime,
    has_unresolved_operations: bool = False,
) -> HandoffDecision:
    """The gate's decision for resuming `restored` on `placement` (the selection's gate, for one candidate)."""
    return rank_targets(restored, [placement], policy, now=now, has_unresolved_operations=has_unresolved_operations)[0][1]


def unfit_reasons(decision: HandoffDecision) -> tuple[GateReason, ...]:
    """The blocking reasons that say the placement cannot host the run (what adoption refuses on).

    A run adopted where a move or its launch put it is not moving again: whether its checkpoint could move (R0,
    MIGRATION_UNSAFE) and what the mover's policy allowed (a downgrade, a region change, ...) were settled when it
    was put there. What the catalog can change since is what the placement hosts: the run's release, its state
    schema, its verifier bundle and tool contract, the region, provider, attestation and data scope it needs.
    """
    return tuple(reason for reason in decision.blocking_reasons if reason not in _NOT_HOSTING)
