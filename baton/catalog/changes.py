"""The catalog contract: read placements and releases, change them, and list what changed since a seq.

Placements (each with its environment identity) and the behavioral releases
they offer live in Baton's store. They change only through
`publish_release`, `withdraw_release` and `update_placement`; each call
commits its change together with exactly one event in Baton's event log, or
raises and writes nothing. Catalog events share the log's seq with run events
(their run id is the reserved `CATALOG_EVENT_RUN_ID`), so a reader keeps one
high-water mark for both: `catalog_changes_since(store, after_seq)` returns
the catalog changes with a larger seq, oldest first.

Every call first seeds an empty catalog from today's catalog
(`baton.catalog.seed`); the seed's changes carry `seeded=True` and are
creations (a placement's `environment_id_before` is None), not changes under
any run. A change that goes A -> B -> A is three events with three seqs.

Errors: an unknown placement raises `UnknownPlacementError`, an unknown
release `UnknownReleaseError`, a release id that is not a `sha256:` ref
`InvalidRefError`, and a call that would change nothing (or reuse another
release's name) `CatalogConflictError`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from baton.catalog.placement_update import PlacementUpdate
from baton.catalog.records import RELEASE_NAME, CatalogRelease
from baton.catalog.seed import seed_catalog
from baton.errors import CatalogError, StoreError
from baton.identity import parse_ref
from baton.models import AuthorityLevel, BehavioralRelease, Event, EventType, Placement
from baton.models.events import CATALOG_EVENT_RUN_ID
from baton.store.base import SqlStore

__all__ = [
    "CATALOG_EVENT_RUN_ID",
    "CatalogChange",
    "CatalogChangeKind",
    "CatalogRelease",
    "catalog_changes_since",
    "current_placements",
    "current_releases",
    "publish_release",
    "release_manifests",
    "update_placement",
    "withdraw_release",
]


class CatalogChangeKind(StrEnum):
    RELEASE_PUBLISHED = "release_published"
    RELEASE_WITHDRAWN = "release_withdrawn"
    PLACEMENT_UPDATED = "placement_updated"


_EVENT_TYPES: tuple[EventType, ...] = tuple(EventType(kind.value) for kind in CatalogChangeKind)


@dataclass(frozen=True)
class CatalogChange:
    """One catalog event, as a sensor needs it."""

    seq: int
    """The event's seq in Baton's event log (the same sequence as run events)."""
    kind: CatalogChangeKind
    at: dt.datetime
    placement: str | None
    """The updated placement (PLACEMENT_UPDATED); None for release changes."""
    release_id: str | None
    environment_id_before: str | None
    """None for release changes, and for a placement the seed created."""
    environment_id_after: str | None
    placements: tuple[str, ...] = ()
    """Placements the change concerns: the updated one, or those listing the release."""
    release_name: str | None = None
    reason: str | None = None
    actor: str | None = None
    seeded: bool = False

    @property
    def environment_changed(self) -> bool:
        """True when a placement's environment identity moved (not on creation by the seed)."""
        return self.environment_id_before is not None and self.environment_id_before != self.environment_id_after


def _change(seq: int, event: Event) -> CatalogChange:
    detail = event.detail
    kind = CatalogChangeKind(event.event_type.value)

    def text(key: str) -> str | None:
        value = detail.get(key)
        return value if isinstance(value, str) else None

    listed = detail.get("placements")
    placements = tuple(str(name) for name in listed) if isinstance(listed, list) else ()
    placement = text("placement")
    return CatalogChange(
        seq=seq, kind=kind, at=event.at, placement=placement, release_id=event.release_id,
        environment_id_before=text("environment_id_before"), environment_id_after=text("environment_id_after"),
        placements=(placement,) if placement is not None else placements,
        release_name=text("release_name"), reason=event.reason, actor=text("actor"),
        seeded=detail.get("seeded") is True,
    )


def catalog_changes_since(store: SqlStore, after_seq: int, limit: int = 1000) -> list[CatalogChange]:
    """Catalog changes with seq > `after_seq`, oldest first, at most `limit`."""
    if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < 0:
        raise StoreError(f"after_seq must be a non-negative int, got {after_seq!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise StoreError(f"limit must be a positive int, got {limit!r}")
    seed_catalog(store)
    events = store.list_events(run_id=CATALOG_EVENT_RUN_ID, after_seq=after_seq,
                               event_types=_EVENT_TYPES, limit=limit)
    return [_change(seq, event) for seq, event in events]


def current_placements(store: SqlStore) -> list[Placement]:
    """Every placement by name, each listing only the published releases it offers."""
    seed_catalog(store)
    return store.catalog_placements()


def current_releases(store: SqlStore) -> list[CatalogRelease]:
    """Every release the catalog knows, published or withdrawn, with the placements that offer it."""
    seed_catalog(store)
    return store.catalog_releases()


def release_manifests(store: SqlStore) -> dict[str, BehavioralRelease]:
    """Release id -> manifest for every release the catalog knows (a withdrawn one still runs its pinned runs)."""
    return {release.release_id: release.manifest for release in current_releases(store)}


def _read_back(store: SqlStore, seq: int) -> CatalogChange:
    found = store.list_events(run_id=CATALOG_EVENT_RUN_ID, after_seq=seq - 1, limit=1)
    if not found or found[0][0] != seq:
        raise StoreError(f"catalog event {seq} was committed but cannot be read back")
    return _change(*found[0])


def publish_release(
    store: SqlStore,
    release: BehavioralRelease | str,
    *,
    name: str | None = None,
    placements: Sequence[str] = (),
    actor: str = "api",
    reason: str | None = None,
) -> CatalogChange:
    """Publish a release and list it on `placements`.

    `release` is a new manifest (then `name` is required) or the id of a
    release the catalog knows (to publish it again after a withdrawal, or to
    list it on more placements).
    """
    seed_catalog(store)
    if isinstance(release, str):
        manifest = store.catalog_release(parse_ref(release))
        if name is None:
            name = next(r.name for r in store.catalog_releases() if r.release_id == release)
    else:
        manifest = release
        if name is None:
            known = {r.release_id: r.name for r in store.catalog_releases()}
            name = known.get(manifest.release_id)
    if name is None:
        raise CatalogError(f"release {manifest.release_id} is new to the catalog: give it a name")
    if not RELEASE_NAME.fullmatch(name):
        raise CatalogError(f"release name {name!r} must match {RELEASE_NAME.pattern}")
    seq = store.catalog_publish_release(manifest, name, placements, actor=actor, reason=reason)
    return _read_back(store, seq)


def withdraw_release(store: SqlStore, release_id: str, *, actor: str = "api", reason: str | None = None) -> CatalogChange:
    """Withdraw a published release: no placement offers it any more (its runs keep their manifest)."""
    seed_catalog(store)
    seq = store.catalog_withdraw_release(parse_ref(release_id), actor=actor, reason=reason)
    return _read_back(store, seq)


def _listed(names: Sequence[str] | None) -> tuple[str, ...] | None:
    if isinstance(names, str):
        raise CatalogError(f"give a list of names, not the string {names!r}")
    return None if names is None else tuple(names)


def update_placement(
    store: SqlStore,
    name: str,
    *,
    region: str | None = None,
    provider: str | None = None,
    runtime_image: str | None = None,
    tool_versions: Mapping[str, str] | None = None,
    authority_ceiling: AuthorityLevel | str | None = None,
    accelerator: str | None = None,
    readable_schema_versions: Sequence[str] | None = None,
    verifiers: Sequence[str] | None = None,
    tools: Sequence[str] | None = None,
    actor: str = "api",
    reason: str | None = None,
) -> CatalogChange:
    """Change a placement's environment identity (region, provider, image, tool versions), ceiling or accelerator,
    or what it can host (readable checkpoint schema versions, verifier bundles, tool contracts: each list replaced)."""
    update = PlacementUpdate(
        region=region, provider=provider, runtime_image=runtime_image,
        tool_versions=dict(tool_versions) if tool_versions is not None else None,
        authority_ceiling=AuthorityLevel(authority_ceiling) if authority_ceiling is not None else None,
        accelerator=accelerator,
        readable_schema_versions=_listed(readable_schema_versions), verifiers=_listed(verifiers), tools=_listed(tools),
    )
    seed_catalog(store)
    seq = store.catalog_update_placement(name, update, actor=actor, reason=reason)
    return _read_back(store, seq)
