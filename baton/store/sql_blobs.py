"""A blob backend inside the SQL store: blobs commit in the same transaction as their checkpoint."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from baton.identity import sha256_ref
from baton.store.base import SqlStore


class SqlBlobStore:
    """The `Blobs` interface over the store's `blobs` table."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    def put(self, data: bytes) -> str:
        ref = sha256_ref(data)
        self.store.put_blobs({ref: data})
        return ref

    def put_many(self, blobs: Mapping[str, bytes]) -> None:
        self.store.put_blobs(blobs)

    def get(self, ref: str) -> bytes:
        return self.store.get_blob(ref)

    def has(self, ref: str) -> bool:
        return self.store.has_blob(ref)

    def has_many(self, refs: Iterable[str]) -> set[str]:
        return self.store.stored_blobs(refs)

    def size(self, ref: str) -> int:
        return self.store.blob_size(ref)

    def total_bytes(self) -> int:
        return self.store.blob_bytes_total()
