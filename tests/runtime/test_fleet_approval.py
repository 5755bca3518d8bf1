"""The fleet's release-board approval lapses on the catalog's clock, however often a coordinator is built.

The window is read from the catalog's own record of the better release's publication; a policy built again later
must not slide it forward (it once ran from `now` at every build, so it never lapsed in a running fleet).
"""

from __future__ import annotations

import datetime as dt

from baton.catalog.releases import BETTER_RELEASE, OLDER_RELEASE, RELEASES
from baton.catalog.seed import seed_catalog
from baton.placements import DEFAULT_PLACEMENTS
from baton.runtime.dispatch import build_coordinator
from baton.runtime.fleet_plan import APPROVAL_TTL_S, clock_and_fleet_policy, store_fleet_policy
from baton.sim.memory_store import MemoryStore
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

V7, V8 = RELEASES[OLDER_RELEASE].release_id, RELEASES[BETTER_RELEASE].release_id


def _published_ago(store: SqlStore, seconds: float) -> None:
    """The catalog's record says the better release was published `seconds` ago (as if the fleet ran that long)."""
    then = store.dialect.ts_in(store.db_now() - dt.timedelta(seconds=seconds))
    store.execute_raw("UPDATE catalog_releases SET updated_at = ? WHERE release_id = ?", (then, V8))


def test_an_approval_granted_at_publication_has_lapsed_for_a_coordinator_built_after_its_window(
        store: SqlStore, blobs: BlobStore) -> None:
    seed_catalog(store)
    fresh = build_coordinator(store, blobs, DEFAULT_PLACEMENTS, ()).policy
    assert any(a.covers(V7, V8, store.db_now()) for a in fresh.approvals)

    _published_ago(store, APPROVAL_TTL_S + 60)
    (row,) = [r for r in store.catalog_releases() if r.release_id == V8]
    late = build_coordinator(store, blobs, DEFAULT_PLACEMENTS, ()).policy
    assert [a.expires_at for a in late.approvals] == [row.updated_at + dt.timedelta(seconds=APPROVAL_TTL_S)]
    assert not any(a.covers(V7, V8, store.db_now()) for a in late.approvals)


def test_a_withdrawn_better_release_carries_no_approval(store: SqlStore) -> None:
    seed_catalog(store)
    store.catalog_withdraw_release(V8, actor="release-board", reason="regression found")
    assert store_fleet_policy(store).approvals == ()


class _Transactions:
    """Every transaction a memory store runs: (write, the public store method it ran for)."""

    def __init__(self) -> None:
        self.seen: list[tuple[bool, str]] = []

    def before_tx(self, store: object, write: bool, caller: str) -> None:
        self.seen.append((write, caller))

    def after_tx(self, store: object, write: bool, caller: str) -> None:
        pass


def test_the_policy_and_the_clock_are_one_read_as_the_clock_alone_was() -> None:
    """Each build of the policy replaced a clock reading; reading the catalog too must not add a transaction (in
    the simulation every transaction is an interleaving point, and pinned schedules count them)."""
    hooks = _Transactions()
    store = MemoryStore("fleet-approval-reads", hooks=hooks)
    try:
        seed_catalog(store)
        hooks.seen.clear()
        now, policy = clock_and_fleet_policy(store)
        assert hooks.seen == [(False, "release_publication")]
        assert [a.expires_at for a in policy.approvals] == [
            row.updated_at + dt.timedelta(seconds=APPROVAL_TTL_S) for row in store.catalog_releases()
            if row.release_id == V8]
        assert now <= store.db_now()
    finally:
        store.close()
