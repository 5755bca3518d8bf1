"""Sealed checkpoints of the SQL store: an append-only, hash-linked chain per run (rows as deltas)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from baton.errors import CheckpointIntegrityError, RecordNotFoundError, StaleEpochError, StoreError
from baton.identity import plain_value
from baton.models.checkpoint import LEGACY_HASH_VERSIONS, ExecutionCheckpoint
from baton.models.events import Event
from baton.store import manifest_delta, row_codec
from baton.store.blobs_sql import BlobsSql
from baton.store.core import Row, Tx
from baton.store.dialect import require_aware

_CKPT_COLUMNS = "checkpoint_id, run_id, seq, checkpoint_hash, body, body_kind, parent_checkpoint_id, {packed}"
"""(`{packed}`: see `StoreCore.with_packed`.)"""
_BODY_CACHE_LIMIT = 256
# PostgreSQL: fails (casting a text that is no integer) unless the run has a lease whose epoch is at most the
# seal's and its latest checkpoint is the expected "seq id hash" (NULL: none yet); locks the lease row, as the
# head read does.
_SEAL_GUARD = (
    "SELECT CAST(COALESCE((SELECT CASE WHEN l.epoch <= ? AND (SELECT c.seq || ' ' || c.checkpoint_id || ' ' ||"
    " c.checkpoint_hash FROM checkpoints c WHERE c.run_id = l.run_id ORDER BY c.seq DESC LIMIT 1)"
    " IS NOT DISTINCT FROM ? THEN '0' ELSE 'seal refused: epoch or parent not current' END"
    " FROM leases l WHERE l.run_id = ? {for_update_lease}), 'seal refused: no lease') AS integer)"
)
PACKED_BODY = ""
"""`checkpoints.body` of a row whose text is kept in `packed` instead (migration 8)."""


def body_text(checkpoint_id: str, body: Any, packed: Any) -> str:
    """A row's body text: `body`, or `packed` unpacked; CheckpointIntegrityError if `packed` is damaged."""
    if packed is None:
        return str(body)
    try:
        return row_codec.unpack_text(bytes(packed))
    except ValueError as exc:
        raise CheckpointIntegrityError(f"checkpoint {checkpoint_id}: its packed body is corrupt ({exc})") from None


def _stored_row(row: Row) -> manifest_delta.StoredRow:
    """A row of `_CKPT_COLUMNS` as rebuilding needs it."""
    checkpoint_id, _run_id, seq, stored_hash, text, kind, parent_id, packed = row
    return manifest_delta.StoredRow(
        str(checkpoint_id), int(seq), str(stored_hash), None if parent_id is None else str(parent_id),
        str(kind), body_text(str(checkpoint_id), text, packed),
    )


class CheckpointsSql(BlobsSql):
    """Append and read checkpoints; every read re-validates the seal."""

    def _body_cache(self) -> dict[str, dict[str, Any]]:
        cache: dict[str, dict[str, Any]] | None = getattr(self, "_bodies", None)
        if cache is None:
            cache = self._bodies = {}
        return cache

    def _remember(self, checkpoint_id: str, body: dict[str, Any]) -> None:
        cache = self._body_cache()
        if len(cache) >= _BODY_CACHE_LIMIT:
            cache.clear()
        cache[checkpoint_id] = body

    def _full_body(
        self, tx: Tx, run_id: str, row: manifest_delta.StoredRow,
        since_full: Sequence[manifest_delta.StoredRow] | None = None,
    ) -> dict[str, Any]:
        """The whole body of `row`, rebuilding a delta from its parent (cached) or its last full ancestor.

        `since_full`, when the caller read them already: the run's rows from the last full one up to `row`.
        """
        if row.kind == manifest_delta.FULL:
            return dict(json.loads(row.text))
        parent = self._body_cache().get(row.parent_checkpoint_id or "")
        if parent is not None:
            return manifest_delta.apply(parent, row)
        if since_full:
            return manifest_delta.rebuild(since_full)
        rows = tx.rows(self.with_packed(
            tx,
            "SELECT checkpoint_id, seq, checkpoint_hash, parent_checkpoint_id, body_kind, body, {packed} FROM checkpoints "
            "WHERE run_id = ? AND seq <= ? AND seq >= "
            "(SELECT MAX(seq) FROM checkpoints WHERE run_id = ? AND seq <= ? AND body_kind = 'full') ORDER BY seq"),
            (run_id, row.seq, run_id, row.seq),
        )
        return manifest_delta.rebuild(
            manifest_delta.StoredRow(str(r[0]), int(r[1]), str(r[2]), None if r[3] is None else str(r[3]),
                                     str(r[4]), body_text(str(r[0]), r[5], r[6]))
            for r in rows
        )

    def _checkpoint(self, tx: Tx, row: Row, since_full: Sequence[Row] = ()) -> ExecutionCheckpoint:
        """The checkpoint of `row` (`_CKPT_COLUMNS`), validated; `since_full` as `_full_body`'s, in those columns."""
        checkpoint_id, run_id, seq, stored_hash = row[:4]
        stored = _stored_row(row)
        try:
            body = self._full_body(tx, run_id, stored, [_stored_row(r) for r in since_full] or None)
            ckpt = ExecutionCheckpoint.model_validate(body)
        except (ValidationError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointIntegrityError(f"checkpoint {checkpoint_id}: stored body does not validate: {exc}") from exc
        if ckpt.checkpoint_hash != stored_hash:
            raise CheckpointIntegrityError(
                f"checkpoint {checkpoint_id}: row hash {stored_hash} differs from "
                f"the body's hash {ckpt.checkpoint_hash}"
            )
        if (ckpt.checkpoint_id, ckpt.run_id, ckpt.seq) != (checkpoint_id, run_id, int(seq)):
            raise CheckpointIntegrityError(
                f"checkpoint {checkpoint_id}: row (run {run_id}, seq {seq}) does not match its body "
                f"({ckpt.checkpoint_id}, run {ckpt.run_id}, seq {ckpt.seq})"
            )
        self._remember(ckpt.checkpoint_id, body)
        return ckpt

    @staticmethod
    def _check_owner_epoch(ckpt: ExecutionCheckpoint, current: int) -> None:
        # A fenced worker must not extend the chain: sealing is a mutation too.
        if ckpt.owner_epoch < current:
            raise StaleEpochError(
                f"checkpoint {ckpt.checkpoint_id} of run {ckpt.run_id!r} was sealed at epoch {ckpt.owner_epoch}, "
                f"but the run's current epoch is {current}: the sealing worker has been fenced"
            )

    def append_checkpoint(
        self,
        ckpt: ExecutionCheckpoint,
        blobs: Mapping[str, bytes] | None = None,
        *,
        within: Callable[[Tx], None] | None = None,
        events: Sequence[Event] = (),
    ) -> None:
        """Append the run's next checkpoint: seq latest+1 (0 first), parent = the latest.

        `blobs` (ref -> bytes) are written to the blob table in the same
        transaction, so a checkpoint and the parts it introduced commit at once.
        `within`, if given, runs in that transaction once the epoch and chain
        checks passed (an adapter's own rows commit, or are refused, with the seal);
        `events` are appended last in it, as `append_events` would.
        """
        body = self._sealed_body(ckpt)
        # RunsSql supplies the event helpers in SqlStore (the mixins share one class).
        prepared = self._event_rows(events) if events else ()  # type: ignore[attr-defined]
        guard = self._seal_guard(ckpt)
        if guard is not None:
            try:
                self._append_tx(ckpt, body, blobs, within, prepared, guard)
            except StoreError:
                # Nothing of it committed; the statement-by-statement append names what was refused, if anything.
                guard = None
        if guard is None:
            self._append_tx(ckpt, body, blobs, within, prepared, None)
        self._remember(ckpt.checkpoint_id, body)

    def _seal_guard(self, ckpt: ExecutionCheckpoint) -> tuple[str | None, dict[str, Any] | None] | None:
        """Where `ckpt` can be appended in one round trip: the chain head its guard expects and its parent's body.

        That is where writes are pipelined (PostgreSQL, outside `atomic()`) and the parent's body is at hand
        (this store sealed or read it last), which the row's delta encoding needs. The epoch and chain checks
        are then a statement that fails unless they pass (`_SEAL_GUARD`), queued first with the lease row
        locked; every write follows it in the same pipeline and the commit's sync is the only wait.
        """
        if not getattr(self, "pipeline_writes", False) or getattr(self._local, "atomic", None) is not None:
            return None
        if ckpt.seq == 0:
            if ckpt.parent_checkpoint_id is not None or ckpt.parent_checkpoint_hash is not None:
                return None  # refused by `_check_chain`
            return None, None
        parent = self._body_cache().get(ckpt.parent_checkpoint_id or "")
        if parent is None or parent.get("checkpoint_hash") != ckpt.parent_checkpoint_hash:
            return None
        return f"{ckpt.seq - 1} {ckpt.parent_checkpoint_id} {ckpt.parent_checkpoint_hash}", parent

    def _append_tx(
        self,
        ckpt: ExecutionCheckpoint,
        body: dict[str, Any],
        blobs: Mapping[str, bytes] | None,
        within: Callable[[Tx], None] | None,
        prepared: Sequence[tuple[Event, object]],
        guard: tuple[str | None, dict[str, Any] | None] | None,
    ) -> None:
        """The append's transaction: checked by the queued `guard` (see `_seal_guard`), else by reading the head."""
        with self._tx() as tx:
            if guard is None:
                self._append_in(tx, ckpt, body, blobs=blobs, within=within)
            else:
                expected_head, parent = guard
                tx.send(_SEAL_GUARD, (ckpt.owner_epoch, expected_head, ckpt.run_id))
                self._insert_sealed(tx, ckpt, body, parent, blobs=blobs, within=within)
            if prepared:
                self._insert_events(tx, prepared, stamp=False, seqs_wanted=False)  # type: ignore[attr-defined]

    @staticmethod
    def _sealed_body(ckpt: ExecutionCheckpoint) -> dict[str, Any]:
        """The row body of `ckpt`, once its seal is checked against it."""
        sealed = ExecutionCheckpoint.take_sealed_body(ckpt)
        if sealed is not None:  # this object came from `seal`, which hashed exactly this value
            return sealed
        body = plain_value(ckpt)
        # One dump serves the row and the check (a legacy version hashes its own JSON form).
        expected_hash = (ckpt.content_hash() if ckpt.schema_version in LEGACY_HASH_VERSIONS
                         else ExecutionCheckpoint.compute_hash(body))
        if expected_hash != ckpt.checkpoint_hash:
            raise CheckpointIntegrityError(
                f"checkpoint {ckpt.checkpoint_id}: hash {ckpt.checkpoint_hash} does not match content {expected_hash}"
            )
        return dict(body)

    def _append_in(
        self,
        tx: Tx,
        ckpt: ExecutionCheckpoint,
        body: dict[str, Any],
        *,
        blobs: Mapping[str, bytes] | None = None,
        within: Callable[[Tx], None] | None = None,
    ) -> None:
        """`append_checkpoint`'s work inside `tx`: lock the lease row, check the epoch and the chain, insert."""
        # One statement locks the lease row (so the epoch cannot advance under this append)
        # and reads the epoch and the latest checkpoint.
        head = tx.one(self.with_packed(
            tx,
            "SELECT l.epoch, c.seq, c.checkpoint_id, c.checkpoint_hash, c.body_kind, c.body, "
            "c.parent_checkpoint_id, {packed} FROM leases l "
            "LEFT JOIN checkpoints c ON c.run_id = l.run_id "
            "AND c.seq = (SELECT MAX(seq) FROM checkpoints WHERE run_id = l.run_id) "
            "WHERE l.run_id = ? {for_update_lease}"),
            (ckpt.run_id,),
        )
        if head is None:
            raise RecordNotFoundError(f"run {ckpt.run_id!r} is not in the store")
        self._check_owner_epoch(ckpt, int(head[0]))
        latest = None if head[1] is None else head[1:]
        self._check_chain(ckpt, latest)
        parent = None
        if latest is not None:
            parent = self._body_cache().get(str(latest[1])) or self._full_body(
                tx,
                ckpt.run_id,
                manifest_delta.StoredRow(str(latest[1]), int(latest[0]), str(latest[2]),
                                         None if latest[5] is None else str(latest[5]),
                                         str(latest[3]), body_text(str(latest[1]), latest[4], latest[6])),
            )
        self._insert_sealed(tx, ckpt, body, parent, blobs=blobs, within=within)

    def _insert_sealed(
        self,
        tx: Tx,
        ckpt: ExecutionCheckpoint,
        body: dict[str, Any],
        parent: dict[str, Any] | None,
        *,
        blobs: Mapping[str, bytes] | None,
        within: Callable[[Tx], None] | None,
    ) -> None:
        """The writes of an append whose checks passed (or are queued before them): blobs, `within`, the row."""
        if blobs:
            self._insert_blobs(tx, blobs)
        if within is not None:
            within(tx)
        kind, text = manifest_delta.encode(body, parent, ckpt.seq)
        packed = row_codec.pack_text(text) if self.compress_blobs else None
        tx.send(
            "INSERT INTO checkpoints (checkpoint_id, run_id, seq, checkpoint_hash, parent_checkpoint_id, "
            "schema_version, boundary, body, sealed_at, body_kind, packed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ckpt.checkpoint_id,
                ckpt.run_id,
                ckpt.seq,
                ckpt.checkpoint_hash,
                ckpt.parent_checkpoint_id,
                ckpt.schema_version,
                ckpt.boundary.value,
                text if packed is None else PACKED_BODY,
                self.dialect.ts_in(require_aware(ckpt.sealed_at, "sealed_at")),
                kind,
                packed,
            ),
        )

    @staticmethod
    def _check_chain(ckpt: ExecutionCheckpoint, latest: Row | None) -> None:
        where = f"checkpoint {ckpt.checkpoint_id} of run {ckpt.run_id!r}"
        if latest is None:
            if ckpt.seq != 0:
                raise StoreError(f"{where}: the run has no checkpoint yet, so seq must be 0, not {ckpt.seq}")
            if ckpt.parent_checkpoint_id is not None:
                raise StoreError(f"{where}: the first checkpoint cannot name a parent ({ckpt.parent_checkpoint_id})")
            return
        seq, parent_id, parent_hash = int(latest[0]), latest[1], latest[2]
        if ckpt.seq != seq + 1:
            raise StoreError(f"{where}: seq must be {seq + 1} (latest is {seq}), not {ckpt.seq}")
        if ckpt.parent_checkpoint_id != parent_id or ckpt.parent_checkpoint_hash != parent_hash:
            raise StoreError(
                f"{where}: parent must be the latest checkpoint {parent_id} ({parent_hash}), "
                f"not {ckpt.parent_checkpoint_id} ({ckpt.parent_checkpoint_hash})"
            )

    def get_checkpoint(self, checkpoint_id: str) -> ExecutionCheckpoint:
        """The checkpoint, re-validated; CheckpointIntegrityError if it was tampered with."""
        with self._tx(write=False) as tx:
            row = tx.one(self.with_packed(tx, f"SELECT {_CKPT_COLUMNS} FROM checkpoints WHERE checkpoint_id = ?"),
                         (checkpoint_id,))
            if row is None:
                raise RecordNotFoundError(f"checkpoint {checkpoint_id!r} is not in the store")
            return self._checkpoint(tx, row)

    def latest_checkpoint(self, run_id: str) -> ExecutionCheckpoint | None:
        """The run's highest-seq checkpoint, or None if it has none."""
        with self._tx(write=False) as tx:
            # The newest row and the rows since the last full one, which rebuilding a delta needs: one statement
            # (at most FULL_EVERY rows), not a second query after the first.
            rows = tx.rows(self.with_packed(
                tx,
                f"SELECT {_CKPT_COLUMNS} FROM checkpoints WHERE run_id = ? AND seq >= COALESCE("
                "(SELECT MAX(seq) FROM checkpoints WHERE run_id = ? AND body_kind = 'full'), "
                "(SELECT MAX(seq) FROM checkpoints WHERE run_id = ?)) ORDER BY seq"),
                (run_id, run_id, run_id),
            )
            if not rows:
                return None
            if rows[0][5] != manifest_delta.FULL:  # no full row to start from (a damaged run): as for any row
                return self._checkpoint(tx, rows[-1])
            return self._checkpoint(tx, rows[-1], rows)

    def list_checkpoints(self, run_id: str) -> list[ExecutionCheckpoint]:
        """The run's checkpoints in seq order."""
        with self._tx(write=False) as tx:
            rows = tx.rows(self.with_packed(tx, f"SELECT {_CKPT_COLUMNS} FROM checkpoints WHERE run_id = ? ORDER BY seq"),
                           (run_id,))
            return [self._checkpoint(tx, row) for row in rows]

    def checkpoint_by_hash(self, checkpoint_hash: str) -> ExecutionCheckpoint | None:
        """The checkpoint sealed with `checkpoint_hash`, or None."""
        with self._tx(write=False) as tx:
            row = tx.one(self.with_packed(tx, f"SELECT {_CKPT_COLUMNS} FROM checkpoints WHERE checkpoint_hash = ?"),
                         (checkpoint_hash,))
            return None if row is None else self._checkpoint(tx, row)
