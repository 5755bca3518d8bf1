"""What the platform's sensors decide, as plain functions over Baton's store (no Dagster here).

Every decision takes the sensor's cursor, the seq of the last Baton event it
read, and returns the jobs to raise plus the new cursor. A job's run key is
made from the change's identity and its event seq, so one change raises one
job, an unchanged world raises none, and a change that goes A -> B -> A raises
its jobs each time. Lease expiry is judged by the database clock; its run key
names the lapsed lease's epoch (a later expiry at a new epoch fires again).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from baton.catalog.changes import CatalogChange, CatalogChangeKind, catalog_changes_since, current_placements
from baton.lineage import AssetVersion, IdentityKind, changes_since, lapsed_leases
from baton.runtime.fleet_plan import store_fleet_policy
from baton.runtime.worker import WORKER_OWNER_PREFIX
from baton.store.base import SqlStore
from baton.store.blobs import Blobs

HANDOFF_JOB = "handoff_job"
REVERIFICATION_JOB = "reverification_job"

LEASE_EXPIRED = "lease_expired"
RELEASE_WITHDRAWN = "release_withdrawn"
RELEASE_PUBLISHED = "release_published"
ENVIRONMENT_CHANGED = "environment_changed"
ARTIFACT_CHANGED = "artifact_changed"
WORKSPACE_BASE_MOVED = "workspace_base_moved"

DEFAULT_KEEP_FINISHED = 1000
"""Finished runs whose partitions stay; older finished runs are archived (history stays in Baton's store)."""


@dataclass(frozen=True)
class JobRequest:
    """One job a sensor raises: a handoff (config) or a reverification (a run partition)."""

    job_name: str
    run_key: str
    run_id: str
    reason: str
    target: str | None = None
    excluded_placements: tuple[str, ...] = ()
    source_alive: bool = True
    allow_same_placement: bool = False


@dataclass(frozen=True)
class Decisions:
    """Jobs to raise and the cursor to keep."""

    requests: tuple[JobRequest, ...]
    cursor: int


@dataclass(frozen=True)
class Discovery:
    """Partitions to add and remove, the asset versions to report, and the cursor to keep."""

    add_partitions: tuple[str, ...]
    remove_partitions: tuple[str, ...]
    versions: tuple[AssetVersion, ...]
    cursor: int


def _check_cursor(cursor: int) -> int:
    if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
        raise ValueError(f"a sensor cursor is a non-negative event seq, got {cursor!r}")
    return cursor


def parse_cursor(text: str | None) -> int:
    """The cursor Dagster keeps (a decimal seq, or nothing yet) as an int; anything else is an error."""
    if text is None or text == "":
        return 0
    if not text.isdigit():
        raise ValueError(f"sensor cursor must be a decimal event seq, got {text!r}")
    return int(text)


def _latest_per_asset(versions: Iterable[AssetVersion]) -> list[AssetVersion]:
    latest: dict[tuple[str, str], AssetVersion] = {}
    for version in versions:
        key = (version.run_id, version.asset)
        if key not in latest or latest[key].seq <= version.seq:
            latest[key] = version
    return list(latest.values())


def discover_runs(
    store: SqlStore, blobs: Blobs, cursor: int, partitions: Collection[str], *, keep_finished: int = DEFAULT_KEEP_FINISHED,
) -> Discovery:
    """New runs become partitions, their newest versions asset events; finished runs past `keep_finished` leave.

    `partitions` are the run partitions that exist now. At most one version per
    asset per run is reported, the latest; versions of runs without a partition
    (archived ones) are not reported, since Dagster accepts events for unknown keys silently.
    """
    if keep_finished < 0:
        raise ValueError(f"keep_finished must be >= 0, got {keep_finished}")
    delta = changes_since(store, blobs, _check_cursor(cursor))
    existing = set(partitions)
    finished = sorted((r for r in store.list_runs() if r.status != "active"), key=lambda r: (r.updated_at, r.run_id),
                      reverse=True)
    archived = {r.run_id for r in finished[keep_finished:]}
    remove = tuple(sorted(run_id for run_id in archived if run_id in existing))
    add = tuple(run_id for run_id in delta.new_runs if run_id not in existing and run_id not in archived)
    kept = (existing - set(remove)) | set(add)
    versions = tuple(v for v in _latest_per_asset(delta.versions) if v.run_id in kept)
    return Discovery(add, remove, versions, delta.high_water)


def _active_runs(store: SqlStore) -> dict[str, tuple[str | None, str]]:
    """Active run id -> (its placement, its pinned release: the newest checkpoint's, else the launch's)."""
    found: dict[str, tuple[str | None, str]] = {}
    for run in store.list_runs(status="active"):
        latest = store.latest_checkpoint(run.run_id)
        found[run.run_id] = (run.placement, run.release_id if latest is None else latest.release_id)
    return found


def _adopted(store: SqlStore, run_id: str) -> bool:
    return (store.get_lease(run_id).owner or "").startswith(WORKER_OWNER_PREFIX)


def _catalog(store: SqlStore, cursor: int) -> tuple[list[CatalogChange], int]:
    """Catalog changes after `cursor` (seeding is not a change) and the high-water mark read."""
    changes = catalog_changes_since(store, _check_cursor(cursor))
    high = max((c.seq for c in changes), default=cursor)
    return [c for c in changes if not c.seeded], high


def release_changes(store: SqlStore, cursor: int) -> Decisions:
    """A run's pinned release withdrawn, or a newer one published that the fleet policy lets it move to."""
    changes, high = _catalog(store, cursor)
    requests: list[JobRequest] = []
    if not changes:
        return Decisions((), high)
    active = _active_runs(store)
    policy = store_fleet_policy(store)
    offering = {p.name: set(p.supported_release_ids) for p in current_placements(store)}
    for change in changes:
        if change.release_id is None:
            continue
        for run_id, (_, pinned) in sorted(active.items()):
            if change.kind is CatalogChangeKind.RELEASE_WITHDRAWN and pinned == change.release_id:
                requests.append(JobRequest(HANDOFF_JOB, f"{RELEASE_WITHDRAWN}:{change.seq}:{run_id}:{pinned}", run_id,
                                           RELEASE_WITHDRAWN, source_alive=_adopted(store, run_id)))
            elif change.kind is CatalogChangeKind.RELEASE_PUBLISHED and pinned != change.release_id and any(
                    m.from_release_id == pinned and m.to_release.release_id == change.release_id
                    for m in policy.allowed_behavioral_migrations):
                # As the fleet's chaos does: leave the placements that still run the old release.
                excluded = tuple(sorted(name for name, releases in offering.items() if pinned in releases))
                requests.append(JobRequest(HANDOFF_JOB, f"{RELEASE_PUBLISHED}:{change.seq}:{run_id}:{change.release_id}",
                                           run_id, RELEASE_PUBLISHED, excluded_placements=excluded,
                                           source_alive=_adopted(store, run_id)))
    return Decisions(tuple(requests), high)


def environment_changes(store: SqlStore, cursor: int) -> Decisions:
    """A placement's environment identity changed under its active runs: move each off it."""
    changes, high = _catalog(store, cursor)
    moved = [c for c in changes if c.kind is CatalogChangeKind.PLACEMENT_UPDATED and c.environment_changed]
    if not moved:
        return Decisions((), high)
    active = _active_runs(store)
    requests = [
        JobRequest(HANDOFF_JOB, f"{ENVIRONMENT_CHANGED}:{change.seq}:{run_id}:{change.environment_id_after}", run_id,
                   ENVIRONMENT_CHANGED, excluded_placements=(change.placement,), source_alive=_adopted(store, run_id))
        for change in moved if change.placement is not None
        for run_id, (placement, _) in sorted(active.items()) if placement == change.placement
    ]
    return Decisions(tuple(requests), high)


def artifact_changes(store: SqlStore, blobs: Blobs, cursor: int) -> Decisions:
    """Evidence no longer bound to the current candidate, or a moved workspace base: re-verify that run."""
    delta = changes_since(store, blobs, _check_cursor(cursor))
    requests: list[JobRequest] = []
    for change in delta.identity_changes:
        if change.kind is IdentityKind.ARTIFACT and change.evidence_was_bound:
            reason = ARTIFACT_CHANGED
        elif change.kind is IdentityKind.WORKSPACE:
            reason = WORKSPACE_BASE_MOVED
        else:
            continue
        requests.append(JobRequest(REVERIFICATION_JOB, f"{reason}:{change.seq}:{change.run_id}:{change.after}",
                                   change.run_id, reason))
    return Decisions(tuple(requests), delta.high_water)


def lease_expiries(store: SqlStore, cursor: int, *, already_requested: Collection[str] = ()) -> Decisions:
    """Active runs whose lease lapsed (database clock): hand off, source not alive, same placement allowed.

    `already_requested` holds run keys already launched (the daemon's own
    de-duplication; passing them keeps a tick from naming them again).
    """
    high = _check_cursor(cursor)
    while batch := store.list_events(after_seq=high, limit=10_000):
        high = batch[-1][0]
    active = set(_active_runs(store))
    requests = []
    for lapsed in lapsed_leases(store):
        key = f"{LEASE_EXPIRED}:{lapsed.run_id}:{lapsed.epoch}"
        if lapsed.run_id in active and key not in already_requested:
            requests.append(JobRequest(HANDOFF_JOB, key, lapsed.run_id, LEASE_EXPIRED, source_alive=False,
                                       allow_same_placement=True))
    return Decisions(tuple(requests), high)
