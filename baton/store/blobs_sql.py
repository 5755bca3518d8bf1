"""Content-addressed blobs inside the SQL store, so a checkpoint and its new parts commit together."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from baton.errors import BlobNotFoundError, IntegrityError
from baton.identity import REF_PREFIX, hex_of
from baton.store.core import StoreCore, Tx


_ROWS_PER_INSERT = 200


def digest_of(ref: str) -> bytes:
    """The 32 raw digest bytes of a (validated) ref."""
    return bytes.fromhex(hex_of(ref))


class BlobsSql(StoreCore):
    """Immutable bytes keyed by their sha256; written once, verified on every read."""

    def _insert_blobs(self, tx: Tx, blobs: Mapping[str, bytes]) -> None:
        params: list[bytes] = []
        for ref, data in blobs.items():
            actual = REF_PREFIX + hashlib.sha256(data).hexdigest()
            if actual != ref:
                raise IntegrityError(f"refusing to store bytes under {ref}: they hash to {actual}")
            params += [digest_of(ref), data]
        for start in range(0, len(params), 2 * _ROWS_PER_INSERT):  # one statement per batch of rows
            chunk = params[start:start + 2 * _ROWS_PER_INSERT]
            values = ", ".join("(?, ?)" for _ in range(len(chunk) // 2))
            tx.rows(f"INSERT INTO blobs (digest, data) VALUES {values} ON CONFLICT DO NOTHING", tuple(chunk))

    def put_blobs(self, blobs: Mapping[str, bytes]) -> None:
        """Store each (ref, bytes) pair once, in one transaction."""
        if blobs:
            with self._tx() as tx:
                self._insert_blobs(tx, blobs)

    def get_blob(self, ref: str) -> bytes:
        """The bytes stored under `ref`, verified against it."""
        with self._tx(write=False) as tx:
            row = tx.one("SELECT data FROM blobs WHERE digest = ?", (digest_of(ref),))
        if row is None:
            raise BlobNotFoundError(f"blob {ref} is not in the SQL blob table")
        data = bytes(row[0])
        actual = REF_PREFIX + hashlib.sha256(data).hexdigest()
        if actual != ref:
            raise IntegrityError(f"blob {ref} is corrupt: its bytes hash to {actual}")
        return data

    def has_blob(self, ref: str) -> bool:
        with self._tx(write=False) as tx:
            return tx.one("SELECT 1 FROM blobs WHERE digest = ?", (digest_of(ref),)) is not None

    def stored_blobs(self, refs: Iterable[str]) -> set[str]:
        """The subset of `refs` present in the blob table (one query)."""
        by_digest = {digest_of(ref): ref for ref in refs}
        if not by_digest:
            return set()
        marks = ", ".join("?" for _ in by_digest)
        with self._tx(write=False) as tx:
            rows = tx.rows(f"SELECT digest FROM blobs WHERE digest IN ({marks})", tuple(by_digest))
        return {by_digest[bytes(row[0])] for row in rows}

    def blob_size(self, ref: str) -> int:
        with self._tx(write=False) as tx:
            row = tx.one("SELECT length(data) FROM blobs WHERE digest = ?", (digest_of(ref),))
        if row is None:
            raise BlobNotFoundError(f"blob {ref} is not in the SQL blob table")
        return int(row[0])

    def blob_bytes_total(self) -> int:
        with self._tx(write=False) as tx:
            row = tx.one("SELECT COALESCE(SUM(length(data)), 0) FROM blobs")
        return int(row[0]) if row else 0
