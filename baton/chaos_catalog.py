"""What a fired chaos event changes in the catalog, made through the catalog's own calls.

Chaos decides when infrastructure changes; this records each change that is
a catalog fact, so whoever watches the event log (a Dagster sensor, an
operator) sees it exactly as if an operator had made it:

| reason                | catalog change                                               |
|-----------------------|--------------------------------------------------------------|
| gpu_reclaimed         | the placement's accelerator becomes `none` (environment kept)|
| browser_pool_drained  | the pool is refilled from a new runtime image: its           |
|                       | environment identity changes                                 |
| better_model_released | the better release is published on every affected placement |
|                       | that does not list it yet (nothing if all list it already)   |
| provider_unhealthy,   | none: health and capacity are not catalog data; the runs     |
| region_capacity_lost, | move by handoff only                                         |
| scheduler_rebalance   |                                                              |

A change that is already in place (a GPU reclaimed twice) is not made again,
so every call that is made appends one real change.
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.catalog.changes import CatalogChange, current_placements, publish_release, update_placement
from baton.chaos import ChaosEvent, ChaosReason
from baton.store.base import SqlStore

CHAOS_ACTOR = "chaos"
NO_ACCELERATOR = "none"


def refilled_image(image: str, event_id: str) -> str:
    """The runtime image a drained pool is refilled from: the base image rebuilt for this event."""
    return f"{image.split('+', 1)[0]}+{event_id}"


def record_chaos(store: SqlStore, event: ChaosEvent, placements: Sequence[str]) -> list[CatalogChange]:
    """Make the catalog changes of `event`; `placements` are the fleet's placements it may publish to."""
    catalog = {p.name: p for p in current_placements(store)}
    source = catalog.get(event.source_placement)
    reason = f"{event.reason.value} ({event.event_id})"
    if source is None:
        return []
    if event.reason is ChaosReason.GPU_RECLAIMED:
        if source.accelerator == NO_ACCELERATOR:
            return []
        return [update_placement(store, source.name, accelerator=NO_ACCELERATOR, actor=CHAOS_ACTOR, reason=reason)]
    if event.reason is ChaosReason.BROWSER_POOL_DRAINED:
        image = refilled_image(source.environment.runtime_image, event.event_id)
        if image == source.environment.runtime_image:
            return []
        return [update_placement(store, source.name, runtime_image=image, actor=CHAOS_ACTOR, reason=reason)]
    if event.reason is ChaosReason.BETTER_MODEL_RELEASED and event.target_release_id is not None:
        lacking = [name for name in placements
                   if name in catalog and event.target_release_id not in catalog[name].supported_release_ids]
        if not lacking:
            return []
        return [publish_release(store, event.target_release_id, placements=lacking, actor=CHAOS_ACTOR, reason=reason)]
    return []
