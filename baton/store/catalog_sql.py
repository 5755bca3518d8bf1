"""The release and placement catalog of the SQL store.

Two mutable tables hold the current catalog; every change to them commits in
the same transaction as exactly one event in the append-only `events` table
(run id `CATALOG_EVENT_RUN_ID`), so the event log explains every state the
catalog ever had, and one seq orders catalog and run events together.

A placement row holds the whole `Placement` record, including the release ids
it lists. A withdrawn release stays listed, but is offered by nobody: readers
see a placement's `supported_release_ids` filtered to published releases.
Every write takes the event append lock first, so catalog writers are
serialized with each other and with every event append.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from baton.catalog.placement_update import PlacementUpdate, field_changes
from baton.catalog.records import CatalogRelease, ReleasePublication, ReleaseState
from baton.errors import CatalogConflictError, CatalogError, UnknownPlacementError, UnknownReleaseError
from baton.identity import parse_ref
from baton.models import BehavioralRelease, Event, EventType, Placement
from baton.models.events import CATALOG_EVENT_RUN_ID
from baton.store.core import Tx, json_text
from baton.store.runs_sql import RunsSql

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)  # replaced by the database clock (stamp)

CATALOG_VERSION_SQL = (
    "SELECT COALESCE(MAX(changed_seq), 0) FROM (SELECT changed_seq FROM catalog_placements "
    "UNION ALL SELECT changed_seq FROM catalog_releases) AS changed"
)
"""The catalog's version: the seq of its last change (each change stamps the rows it writes); 0 while empty."""

_SNAPSHOT_SQL = (
    f"SELECT 'v', NULL, CAST(({CATALOG_VERSION_SQL}) AS TEXT)"
    " UNION ALL SELECT 'p', name, CAST(record AS TEXT) FROM catalog_placements"
    " UNION ALL SELECT 'r', release_id, NULL FROM catalog_releases WHERE state = 'published'"
    " ORDER BY 1, 2"
)
"""The catalog's version, every placement (by name) and the published releases' ids, in one statement."""


def _event(event_type: EventType, *, release_id: str | None, reason: str | None, detail: dict[str, JsonValue]) -> Event:
    return Event(event_type=event_type, run_id=CATALOG_EVENT_RUN_ID, at=_EPOCH, release_id=release_id,
                 reason=reason, detail=detail)


class CatalogSql(RunsSql):
    """Placements and behavioral releases, changed only together with one event each."""

    # -- reads ---------------------------------------------------------------------------------

    def _placement_rows(self, tx: Tx) -> list[Placement]:
        rows = tx.rows("SELECT record FROM catalog_placements ORDER BY name")
        return [Placement.model_validate(self.dialect.json_out(row[0])) for row in rows]

    def _release_rows(self, tx: Tx) -> list[tuple[str, str, BehavioralRelease, ReleaseState, int, dt.datetime]]:
        rows = tx.rows("SELECT release_id, name, manifest, state, changed_seq, updated_at FROM catalog_releases "
                       "ORDER BY changed_seq, release_id")
        return [
            (str(rid), str(name), BehavioralRelease.model_validate(self.dialect.json_out(manifest)),
             ReleaseState(state), int(seq), self.dialect.ts_out(updated))
            for rid, name, manifest, state, seq, updated in rows
        ]

    def catalog_placements(self, *, offered_only: bool = True) -> list[Placement]:
        """Every placement, by name; `supported_release_ids` lists only published releases unless not `offered_only`."""
        return self.catalog_snapshot(offered_only=offered_only)[1]

    def catalog_snapshot(self, *, offered_only: bool = True) -> tuple[int, list[Placement]]:
        """The catalog's version (`CATALOG_VERSION_SQL`) and its placements (as `catalog_placements`), read together.

        One statement, so on PostgreSQL the version and the rows come from one snapshot too.
        """
        with self._tx(write=False) as tx:
            rows = tx.rows(_SNAPSHOT_SQL)
        version = 0
        placements: list[Placement] = []
        published: set[str] = set()
        for kind, key, value in rows:
            if kind == "v":
                version = int(value)
            elif kind == "p":
                placements.append(Placement.model_validate(self.dialect.json_out(value)))
            else:
                published.add(str(key))
        if not offered_only:
            return version, placements
        return version, [
            p.model_copy(update={"supported_release_ids": tuple(r for r in p.supported_release_ids if r in published)})
            for p in placements
        ]

    def catalog_releases(self) -> list[CatalogRelease]:
        """Every release ever published, in the order of their last change."""
        with self._tx(write=False) as tx:
            placements = self._placement_rows(tx)
            rows = self._release_rows(tx)
        return [
            CatalogRelease(
                release_id=rid, name=name, manifest=manifest, state=state, changed_seq=seq, updated_at=updated,
                listed_by=tuple(p.name for p in placements if rid in p.supported_release_ids),
            )
            for rid, name, manifest, state, seq, updated in rows
        ]

    def release_publication(self, release_id: str) -> ReleasePublication:
        """The store's clock, whether the catalog was ever seeded, and when `release_id` was last published.

        One statement in one read: where this replaces a clock reading (a policy built at a boundary), it
        costs no extra round trip or transaction.
        """
        with self._tx(write=False) as tx:
            row = tx.one(
                f"SELECT {self.dialect.clock_sql}, (SELECT COUNT(*) FROM catalog_releases), "
                "(SELECT updated_at FROM catalog_releases WHERE release_id = ? AND state = 'published')",
                (release_id,),
            )
        assert row is not None
        return ReleasePublication(self.dialect.ts_out(row[0]), int(row[1]) > 0,
                                  None if row[2] is None else self.dialect.ts_out(row[2]))

    # -- writes --------------------------------------------------------------------------------

    def _lock_catalog(self, tx: Tx) -> None:
        tx.take_append_lock()

    def _append_one(self, tx: Tx, event: Event) -> int:
        return self._insert_events(tx, [(event, self.dialect.ts_in(event.at))], stamp=True)[0]

    def _placement(self, tx: Tx, name: str) -> Placement:
        row = tx.one("SELECT record FROM catalog_placements WHERE name = ?", (name,))
        if row is None:
            known = [str(r[0]) for r in tx.rows("SELECT name FROM catalog_placements ORDER BY name")]
            raise UnknownPlacementError(f"unknown placement {name!r}; known: {known}")
        return Placement.model_validate(self.dialect.json_out(row[0]))

    def _write_placement(self, tx: Tx, placement: Placement, seq: int, *, insert: bool = False) -> None:
        record = json_text(placement.model_dump(mode="json"), f"placement {placement.name!r}")
        if insert:
            tx.rows("INSERT INTO catalog_placements (name, record, environment_id, changed_seq, updated_at) "
                    "VALUES (?, {json}, ?, ?, {now})",
                    (placement.name, record, placement.environment.environment_id, seq))
        else:
            tx.rows("UPDATE catalog_placements SET record = {json}, environment_id = ?, changed_seq = ?, "
                    "updated_at = {now} WHERE name = ?",
                    (record, placement.environment.environment_id, seq, placement.name))

    def seed_catalog_rows(
        self, placements: Sequence[Placement], releases: Mapping[str, BehavioralRelease], *, actor: str
    ) -> list[int]:
        """Write the first catalog, one event per release and per placement; [] if there is one already."""
        ids = {release.release_id for release in releases.values()}
        for placement in placements:
            unknown = sorted(set(placement.supported_release_ids) - ids)
            if unknown:
                raise UnknownReleaseError(f"placement {placement.name!r} lists releases not in the seed: {unknown}")
        names = [p.name for p in placements]
        if len(set(names)) != len(names):
            raise CatalogConflictError(f"duplicate placement names in the seed: {sorted(names)}")
        with self._tx() as tx:
            self._lock_catalog(tx)
            if tx.one("SELECT 1 FROM catalog_placements UNION ALL SELECT 1 FROM catalog_releases") is not None:
                return []
            seqs = []
            for name, release in releases.items():
                listed = [p.name for p in placements if release.release_id in p.supported_release_ids]
                seq = self._append_one(tx, _event(
                    EventType.RELEASE_PUBLISHED, release_id=release.release_id, reason="catalog seeded",
                    detail={"release_name": name, "placements": list(listed), "actor": actor, "seeded": True}))
                tx.rows("INSERT INTO catalog_releases (release_id, name, manifest, state, changed_seq, updated_at) "
                        "VALUES (?, ?, {json}, 'published', ?, {now})",
                        (release.release_id, name, json_text(release.model_dump(mode="json"), "release"), seq))
                seqs.append(seq)
            for placement in placements:
                seq = self._append_one(tx, _event(
                    EventType.PLACEMENT_UPDATED, release_id=None, reason="catalog seeded",
                    detail={"placement": placement.name, "environment_id_before": None,
                            "environment_id_after": placement.environment.environment_id,
                            "changes": {}, "actor": actor, "seeded": True}))
                self._write_placement(tx, placement, seq, insert=True)
                seqs.append(seq)
            return seqs

    def catalog_publish_release(
        self, release: BehavioralRelease, name: str, placements: Sequence[str], *, actor: str, reason: str | None
    ) -> int:
        """Publish `release` (new, or again after a withdrawal) and list it on `placements`; return the event's seq.

        CatalogConflictError when the name belongs to another release, or when
        the release is published already and every placement lists it already.
        """
        release_id = release.release_id
        with self._tx() as tx:
            self._lock_catalog(tx)
            targets = [self._placement(tx, placement) for placement in dict.fromkeys(placements)]
            row = tx.one("SELECT name, state FROM catalog_releases WHERE release_id = ?", (release_id,))
            owner = tx.one("SELECT release_id FROM catalog_releases WHERE name = ?", (name,))
            if owner is not None and owner[0] != release_id:
                raise CatalogConflictError(f"release name {name!r} already belongs to release {owner[0]}")
            if row is not None and row[0] != name:
                raise CatalogConflictError(f"release {release_id} is published as {row[0]!r}, not {name!r}")
            adding = [p for p in targets if release_id not in p.supported_release_ids]
            was_published = row is not None and row[1] == ReleaseState.PUBLISHED.value
            if was_published and not adding:
                where = f"listed by {sorted(p.name for p in targets)} already" if targets else "name no new placement"
                raise CatalogConflictError(f"release {name!r} ({release_id}) is published and you {where}: "
                                           "nothing to change")
            listing = sorted({p.name for p in self._placement_rows(tx) if release_id in p.supported_release_ids}
                             | {p.name for p in adding})
            seq = self._append_one(tx, _event(
                EventType.RELEASE_PUBLISHED, release_id=release_id, reason=reason,
                detail={"release_name": name, "placements": list(listing), "added_to": [p.name for p in adding],
                        "republished": row is not None and not was_published, "actor": actor, "seeded": False}))
            if row is None:
                tx.rows("INSERT INTO catalog_releases (release_id, name, manifest, state, changed_seq, updated_at) "
                        "VALUES (?, ?, {json}, 'published', ?, {now})",
                        (release_id, name, json_text(release.model_dump(mode="json"), "release"), seq))
            else:
                tx.rows("UPDATE catalog_releases SET state = 'published', changed_seq = ?, updated_at = {now} "
                        "WHERE release_id = ?", (seq, release_id))
            for placement in adding:
                listed = placement.supported_release_ids + (release_id,)
                self._write_placement(tx, placement.model_copy(update={"supported_release_ids": listed}), seq)
            return seq

    def catalog_release(self, release_id: str) -> BehavioralRelease:
        """The manifest of a release the catalog knows (published or withdrawn)."""
        parse_ref(release_id)
        with self._tx(write=False) as tx:
            row = tx.one("SELECT manifest FROM catalog_releases WHERE release_id = ?", (release_id,))
        if row is None:
            raise UnknownReleaseError(f"unknown release {release_id}")
        return BehavioralRelease.model_validate(self.dialect.json_out(row[0]))

    def catalog_withdraw_release(self, release_id: str, *, actor: str, reason: str | None) -> int:
        """Withdraw a published release (no placement offers it any more); return the event's seq."""
        parse_ref(release_id)
        with self._tx() as tx:
            self._lock_catalog(tx)
            row = tx.one("SELECT name, state FROM catalog_releases WHERE release_id = ?", (release_id,))
            if row is None:
                known = [f"{r[1]}={r[0]}" for r in tx.rows("SELECT release_id, name FROM catalog_releases ORDER BY name")]
                raise UnknownReleaseError(f"unknown release {release_id}; known: {known}")
            if row[1] == ReleaseState.WITHDRAWN.value:
                raise CatalogConflictError(f"release {row[0]!r} ({release_id}) is withdrawn already")
            listing = [p.name for p in self._placement_rows(tx) if release_id in p.supported_release_ids]
            seq = self._append_one(tx, _event(
                EventType.RELEASE_WITHDRAWN, release_id=release_id, reason=reason,
                detail={"release_name": str(row[0]), "placements": list(listing), "actor": actor, "seeded": False}))
            tx.rows("UPDATE catalog_releases SET state = 'withdrawn', changed_seq = ?, updated_at = {now} "
                    "WHERE release_id = ?", (seq, release_id))
            return seq

    def catalog_update_placement(self, name: str, update: PlacementUpdate, *, actor: str, reason: str | None) -> int:
        """Apply `update` to placement `name`; return the event's seq. CatalogConflictError if it changes nothing."""
        if update.is_empty:
            raise CatalogError(f"an update of placement {name!r} must set at least one field")
        with self._tx() as tx:
            self._lock_catalog(tx)
            before = self._placement(tx, name)
            after = update.apply(before)
            changes = field_changes(before, after)
            if not changes:
                raise CatalogConflictError(f"placement {name!r} has these values already: nothing to change")
            detail: dict[str, Any] = {
                "placement": name, "environment_id_before": before.environment.environment_id,
                "environment_id_after": after.environment.environment_id, "changes": changes, "actor": actor,
                "seeded": False,
            }
            seq = self._append_one(tx, _event(EventType.PLACEMENT_UPDATED, release_id=None, reason=reason, detail=detail))
            self._write_placement(tx, after, seq)
            return seq
