"""Choosing a target placement: every candidate through the gate, best allowed first."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from baton.checkpoints import RestoredRun
from baton.compat import HandoffDecision, HandoffPolicy, MigrationClass, evaluate_handoff
from baton.models import Placement

_CLASS_COST = {MigrationClass.PHYSICAL: 0, MigrationClass.LOGICAL: 1, MigrationClass.BEHAVIORAL: 2}


def rank_targets(
    restored: RestoredRun,
    candidates: Iterable[Placement],
    policy: HandoffPolicy,
    *,
    now: dt.datetime,
    preferred: tuple[str, ...] = (),
    has_unresolved_operations: bool = False,
) -> list[tuple[Placement, HandoffDecision]]:
    """Every candidate with its gate decision; allowed ones first, best first.

    Best means: a preferred placement, then no authority reduction, then the
    cheapest migration class, then the same region, then the name (so the
    order is deterministic). `has_unresolved_operations` adds operations the
    store knows to be open that the checkpoint's own ledger may not list yet
    (an owner that died between sending a request and sealing).
    """
    parts = restored.parts
    source = parts.placement
    unresolved = has_unresolved_operations or bool(parts.operations.unresolved())
    decided = [
        (
            target,
            evaluate_handoff(
                restored.checkpoint, source, target, policy, now=now, release=parts.release,
                authority=parts.authority.level, has_unresolved_operations=unresolved,
            ),
        )
        for target in candidates
    ]

    def key(item: tuple[Placement, HandoffDecision]) -> tuple[int, int, int, int, int, str]:
        target, decision = item
        return (
            0 if decision.allowed else 1,
            preferred.index(target.name) if target.name in preferred else len(preferred),
            0 if decision.authority_ceiling == parts.authority.level else 1,
            _CLASS_COST.get(decision.migration_class, 3) if decision.migration_class else 3,
            0 if target.region == source.region else 1,
            target.name,
        )

    return sorted(decided, key=key)
