"""Catalog faults: the world under a run changes mid-run (the placement and release cases of sec. 27).

A `catalog_change` fault fires at the n-th store write by a worker (like the
other write faults) and names one sub-kind in its `arg`. When it fires, the
simulated operator (or model provider) first appends what it is about to do
to its own record file, then makes the change through the same catalog calls
the live operator, `baton placement update` / `baton release ...` and the
fleet's chaos make (`baton.catalog.changes`). The change hits the placement
the world's first active run is *not* on; the fleet then asks to move every
active run there (a planned move, as a rebalance is). The gate, reading the
store's catalog as it does live, must refuse or downgrade the move; the
oracles (`baton.sim.oracles`) read the operator's record, the owner's record
of what each run needs, the provider's bill and the targets' own logs.

| sub-kind             | the change                                                                    |
|----------------------|-------------------------------------------------------------------------------|
| release_withdrawn    | the runs' releases (v7, v8) withdrawn; a new alias release published there   |
| placement_left_region| the placement re-homed to us-east (the runs may run only in the EU)           |
| provider_changed     | the placement moved to a provider the runs may not use                        |
| schema_lost          | its workers read only older checkpoint schemas                                |
| verifier_lost        | it no longer hosts the deploy checker (nor the release's verifier bundle)     |
| tools_lost           | it no longer hosts the releases' tool contract                                |
| ceiling_lowered      | its authority ceiling lowered to SANDBOX_MUTATE (its standing worker unaware) |
| environment_changed  | its tool versions changed                                                     |
| runtime_changed      | its runtime image changed                                                     |
| older_release_retired| the runs' release (v7) withdrawn; v8, which the fleet policy approves, stays  |
| verifier_lost_after_move | as verifier_lost, once the fleet's move onto the placement has committed  |

`verifier_lost_after_move` is `verifier_lost` made the other way round: the fleet moves the runs onto the placement
first, and the operator changes it once the move has committed (`AFTER_MOVE`).

`older_release_retired` is not among the sub-kinds `baton.sim.faults.generate` draws (`SUBKINDS`: adding one would
move every seed's catalog draws); the swarm mix adds it to a share of seeds from its own stream
(`baton.sim.scenarios.draw_retirement`). The runs must then move to model-v8, a behavioral migration the fleet
policy allows and approves: the candidate and its evidence made again under v8 before any mutation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from baton.catalog.changes import current_releases, publish_release, update_placement, withdraw_release
from baton.catalog.releases import RELEASES
from baton.catalog.seed import hosted_placements
from baton.errors import CatalogConflictError
from baton.models import Placement
from baton.models.checkpoint import CHECKPOINT_SCHEMA_VERSION
from baton.placements import DEFAULT_PLACEMENTS

CATALOG_CHANGE = "catalog_change"
SUBKINDS: tuple[str, ...] = (
    "release_withdrawn", "placement_left_region", "provider_changed", "schema_lost", "verifier_lost",
    "tools_lost", "ceiling_lowered", "environment_changed", "runtime_changed",
)
RETIRED = "older_release_retired"
AFTER_MOVE = "verifier_lost_after_move"
"""The fleet moves the runs first (a planned move onto the placement the first active run is not on, as for every
change); once that move has committed, the operator takes the releases' verifier off the placement, before its
worker adopts the run: the live case `ended-run-moved-to-unfit`, whose target becomes unfit under a committed move.
Not drawn by `generate` (adding it to `SUBKINDS` would move every seed's catalog draws)."""
KNOWN: tuple[str, ...] = (*SUBKINDS, RETIRED, AFTER_MOVE)
"""Every catalog change `apply_catalog_change` makes (the drawn ones and the retirement)."""
OPERATOR_FILE = "operator/catalog.jsonl"
"""The operator's and the provider's own record of every change, written before the catalog call."""
OWNER_FILE = "owner/runs.json"
"""Each run's needs and residency rule as its owner declared them at launch (before the run started)."""
BILL_FILE = "provider/bill.jsonl"
"""The model provider's bill (`baton.agents.scripted_models.record_bill`)."""

REGIONS: tuple[str, ...] = ("eu-central", "eu-west")
PROVIDERS: tuple[str, ...] = ("cloudco", "local")
OUTSIDE_REGION = "us-east"
OTHER_PROVIDER = "othercloud"
LOWERED_CEILING = "SANDBOX_MUTATE"
ALIAS_NAME = "model-v7b"
ALIAS = RELEASES["model-v7"].model_copy(update={"model": "scripted-model-v7-2026-12"})
"""What the provider serves under its model alias after withdrawing v7 and v8: a manifest no run is pinned to."""
WITHDRAWN = ("model-v7", "model-v8")
def owner_needs(release_name: str, authority: str, *, state_schema: str | None = None) -> dict[str, Any]:
    """What a run needs wherever it runs, from its release manifest, and where it may run. `state_schema` is the
    schema of the state it starts from when an older site sealed it (this site's schema otherwise)."""
    release = RELEASES[release_name]
    return {"release_id": release.release_id, "state_schema": state_schema or CHECKPOINT_SCHEMA_VERSION,
            "verifier_bundle": release.verifier_bundle, "tool_contract": release.tool_contract,
            "authority": authority, "regions": list(REGIONS), "providers": list(PROVIDERS)}


def write_owner_record(root: Path, needs: dict[str, dict[str, Any]]) -> None:
    path = root / OWNER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(needs, sort_keys=True))


def _facts(subkind: str, placement: Placement) -> dict[str, Any]:
    """The placement facts a sub-kind changes, as the operator records them (lists replaced whole)."""
    if subkind == "placement_left_region":
        return {"region": OUTSIDE_REGION}
    if subkind == "provider_changed":
        return {"provider": OTHER_PROVIDER}
    if subkind == "schema_lost":
        return {"readable_schema_versions": [v for v in ("1", "2") if v != CHECKPOINT_SCHEMA_VERSION]}
    if subkind in ("verifier_lost", AFTER_MOVE):
        return {"verifiers": [v for v in placement.verifiers if v == "citations-1"]}
    if subkind == "tools_lost":
        contracts = {release.tool_contract for release in RELEASES.values()}
        return {"tools": [t for t in placement.tools if t not in contracts]}
    if subkind == "ceiling_lowered":
        return {"authority_ceiling": LOWERED_CEILING}
    if subkind == "environment_changed":
        return {"tool_versions": {tool: f"{version}.1" for tool, version in placement.environment.tool_versions.items()}}
    if subkind == "runtime_changed":
        return {"runtime_image": f"{placement.environment.runtime_image}+rebuilt"}
    raise ValueError(f"unknown catalog change {subkind!r}; known: {', '.join(KNOWN)}")


def _record(root: Path, line: dict[str, Any]) -> None:
    path = root / OPERATOR_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")


def _published(store: Any) -> set[str]:
    """The release ids the store's catalog offers now."""
    return {release.release_id for release in current_releases(store) if release.published}


def apply_catalog_change(store: Any, root: Path, subkind: str, placement: str, at_iso: str,
                         names: Sequence[str]) -> str:
    """Make `subkind` happen to `placement`: the operator's (provider's) record first, then the catalog call."""
    current = hosted_placements(store, DEFAULT_PLACEMENTS, list(names))[placement]
    if subkind == "release_withdrawn":
        published = _published(store)
        gone = [name for name in WITHDRAWN if RELEASES[name].release_id in published]  # one retired already stays so
        _record(root, {"at": at_iso, "subkind": subkind,
                       "withdrawn": [RELEASES[name].release_id for name in gone],
                       "published": {ALIAS_NAME: ALIAS.release_id}, "placement": placement})
        for name in gone:
            try:
                withdraw_release(store, RELEASES[name].release_id, actor="provider", reason="withdrawn mid-run")
            except CatalogConflictError:  # withdrawn meanwhile by a concurrent change (a retirement): it stays so,
                continue  # and the provider goes on with the rest, as its record says
        publish_release(store, ALIAS, name=ALIAS_NAME, placements=[placement], actor="provider")
        return f"withdrew {list(WITHDRAWN)}, published {ALIAS_NAME} on {placement}"
    if subkind == RETIRED:
        older = RELEASES["model-v7"].release_id
        if older not in _published(store):
            raise ValueError("model-v7 is withdrawn already")  # refused before the record: nothing changes
        _record(root, {"at": at_iso, "subkind": subkind, "withdrawn": [older], "placement": placement})
        withdraw_release(store, older, actor="provider", reason="older release retired mid-run")
        return "withdrew ['model-v7']"
    facts = _facts(subkind, current)
    _record(root, {"at": at_iso, "subkind": subkind, "placement": placement, "facts": facts})
    update_placement(store, placement, actor="operator", reason=f"{subkind} mid-run", **facts)
    return f"placement {placement} now {facts}"


def current_catalog(store: Any, names: Sequence[str]) -> tuple[Placement, ...]:
    """The store's record of the world's placements (seeding an empty catalog from the defaults first)."""
    hosted = hosted_placements(store, DEFAULT_PLACEMENTS, list(names))
    return tuple(hosted[name] for name in names)
