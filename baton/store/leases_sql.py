"""Leases and fencing epochs: compare-and-set on one row per run, judged by the database clock."""

from __future__ import annotations

import datetime as dt

from baton.ablation import Ablation, is_ablated
from baton.errors import RecordNotFoundError, StoreError
from baton.store.core import Row, StoreCore
from baton.store.dialect import check_duration
from baton.store.records import Lease, awaits_an_owner

_LEASE_COLUMNS = "run_id, owner, epoch, expires_at"


class LeasesSql(StoreCore):
    """get / acquire / renew / release a run's lease."""

    def _lease(self, row: Row) -> Lease:
        return Lease(
            run_id=row[0],
            owner=row[1],
            epoch=int(row[2]),
            expires_at=None if row[3] is None else self.dialect.ts_out(row[3]),
        )

    def get_lease(self, run_id: str) -> Lease:
        """The run's lease row."""
        with self._tx(write=False) as tx:
            row = tx.one(f"SELECT {_LEASE_COLUMNS} FROM leases WHERE run_id = ?", (run_id,))
        if row is None:
            raise RecordNotFoundError(f"run {run_id!r} is not in the store")
        return self._lease(row)

    def current_epoch(self, run_id: str) -> int:
        """The run's current fencing epoch."""
        return self.get_lease(run_id).epoch

    def acquire_lease(
        self, run_id: str, owner: str, ttl_s: float, expected_epoch: int, *, require_expired: bool = True
    ) -> Lease | None:
        """Compare-and-set: take epoch expected_epoch+1 for `owner`, or None if another caller won.

        Succeeds only if the stored epoch is `expected_epoch` and, when
        `require_expired`, nobody holds an unexpired lease (by database clock).
        """
        if not owner:
            raise StoreError("lease owner must not be empty")
        duration = self.dialect.duration_param(check_duration(ttl_s))
        sql = (
            "UPDATE leases SET owner = ?, epoch = ?, expires_at = {now_plus}, updated_at = {now} "
            "WHERE run_id = ? AND " + ("(epoch = ? OR TRUE)" if is_ablated(Ablation.LEASE_CAS) else "epoch = ?")
        )
        if require_expired:
            sql += " AND (owner IS NULL OR expires_at IS NULL OR expires_at <= {now})"
        sql += f" RETURNING {_LEASE_COLUMNS}"
        with self._tx() as tx:
            row = tx.one(sql, (owner, expected_epoch + 1, duration, run_id, expected_epoch))
            if row is None:
                self._require_run(tx, run_id)
                return None
        return self._lease(row)

    def renew_lease(self, run_id: str, owner: str, epoch: int, ttl_s: float) -> Lease | None:
        """Extend a lease its holder still holds (same owner and epoch, not expired); else None."""
        duration = self.dialect.duration_param(check_duration(ttl_s))
        with self._tx() as tx:
            row = tx.one(
                "UPDATE leases SET expires_at = {now_plus}, updated_at = {now} "
                "WHERE run_id = ? AND owner = ? AND epoch = ? AND expires_at > {now} "
                f"RETURNING {_LEASE_COLUMNS}",
                (duration, run_id, owner, epoch),
            )
            if row is None:
                self._require_run(tx, run_id)
                return None
        return self._lease(row)

    def release_lease(self, run_id: str, owner: str, epoch: int) -> bool:
        """Give up a lease (owner and expiry cleared, epoch kept); False if not held by owner at epoch."""
        with self._tx() as tx:
            row = tx.one(
                "UPDATE leases SET owner = NULL, expires_at = NULL, updated_at = {now} "
                "WHERE run_id = ? AND owner = ? AND epoch = ? RETURNING run_id",
                (run_id, owner, epoch),
            )
            if row is None:
                self._require_run(tx, run_id)
        return row is not None

    def lapsed_leases(self) -> tuple[dt.datetime, list[Lease]]:
        """The database time and the leases of active runs that nobody holds at that time.

        A lease counts once its owner is gone (expired by the database clock, or
        released while the run is still active) and nothing else will grant it
        (`records.awaits_an_owner`: granted before, or imported from a bundle).
        One read, so every lease is judged against the same instant.
        """
        with self._tx(write=False) as tx:
            clock = tx.one("SELECT " + self.dialect.clock_sql)
            assert clock is not None
            now = self.dialect.ts_out(clock[0])
            rows = tx.rows(
                "SELECT l.run_id, l.owner, l.epoch, l.expires_at, r.detail FROM leases l "
                "JOIN runs r ON r.run_id = l.run_id WHERE r.status = 'active' "
                "AND (l.owner IS NULL OR l.expires_at IS NULL OR l.expires_at <= ?) ORDER BY l.run_id",
                (self.dialect.ts_in(now),),
            )
        leases = [(self._lease(row), self.dialect.json_out(row[4]) or {}) for row in rows]
        return now, [lease for lease, detail in leases if awaits_an_owner(lease, detail, now)]
