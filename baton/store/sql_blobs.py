"""A blob backend inside the SQL store: blobs commit in the same transaction as their checkpoint."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from baton.identity import sha256_ref
from baton.store.base import SqlStore
from baton.store.blobs_sql import SqlBlobReader


class SqlBlobStore:
    """The `Blobs` interface over the store's `blobs` table.

    Remembers the refs it has seen stored (blobs are never removed), so sealing
    can skip parts it already wrote without a round trip to the database.
    """

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._known: set[str] = set()

    def mark_stored(self, refs: Iterable[str]) -> None:
        """Remember refs that a committed transaction stored."""
        self._known.update(refs)

    def stored_hint(self, refs: Iterable[str]) -> set[str]:
        """Refs this process knows are stored; unknown ones may be stored too (inserts ignore duplicates)."""
        return self._known.intersection(refs)

    def for_transaction(self, blobs: Mapping[str, bytes]) -> dict[str, bytes]:
        """The blobs to insert in the caller's store transaction (all of them, for this backend)."""
        return dict(blobs)

    def put(self, data: bytes) -> str:
        ref = sha256_ref(data)
        self.store.put_blobs({ref: data})
        self._known.add(ref)
        return ref

    def put_many(self, blobs: Mapping[str, bytes]) -> None:
        self.store.put_blobs(blobs)
        self._known.update(blobs)

    def get(self, ref: str) -> bytes:
        return self.store.get_blob(ref)

    def get_many(self, refs: Iterable[str], *, missing_ok: bool = False) -> dict[str, bytes]:
        """One query in one read transaction for all of `refs`, each verified."""
        return self.store.get_blobs(refs, missing_ok=missing_ok)

    @contextmanager
    def reading(self) -> Iterator[SqlBlobReader]:
        """A reader whose fetches share one read transaction of the store (none of this thread's
        other store calls may run until it closes)."""
        with self.store.blob_reader() as reader:
            yield reader

    def has(self, ref: str) -> bool:
        return self.store.has_blob(ref)

    def has_many(self, refs: Iterable[str]) -> set[str]:
        wanted = set(refs)
        found = self._known & wanted
        found |= self.store.stored_blobs(wanted - found)
        self._known |= found
        return found

    def size(self, ref: str) -> int:
        return self.store.blob_size(ref)

    def total_bytes(self) -> int:
        return self.store.blob_bytes_total()
