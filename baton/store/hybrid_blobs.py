"""The default blob backend: small blobs in the SQL store, large artifacts as files.

A checkpoint's new parts are mostly small records (an observation, a run
state, a segment: a few KB each). As files, each costs a file create, an fsync
and a whole 4 KiB disk block; in the store's `blobs` table they commit in the
checkpoint's own transaction, in pages already allocated. Blobs of at least
`large_bytes` (default 1 MiB) still go to files under `<home>/blobs`, written
atomically (temp file, fsync, rename) before the row that names them commits.

Reads look in the table first and then in the files, so a store written by the
old layout (every blob a file) reads unchanged; every read is verified against
its ref either way, and refs are validated before they name a path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from baton.errors import BlobNotFoundError
from baton.identity import sha256_ref
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.blobs_sql import SqlBlobReader
from baton.store.sql_blobs import SqlBlobStore

DEFAULT_LARGE_BYTES = 1 << 20
"""Blobs of this size or more are files; smaller ones live in the SQL store."""


class HybridBlobStore(SqlBlobStore):
    """`Blobs` over the SQL blob table for small blobs and files for large ones."""

    def __init__(self, store: SqlStore, files: BlobStore, *, large_bytes: int = DEFAULT_LARGE_BYTES) -> None:
        if large_bytes < 1:
            raise ValueError(f"large_bytes must be positive, not {large_bytes}")
        super().__init__(store)
        self.files = files
        self.large_bytes = large_bytes

    def split(self, blobs: Mapping[str, bytes]) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """(small, large): which blobs belong in the table and which in files."""
        small: dict[str, bytes] = {}
        large: dict[str, bytes] = {}
        for ref, data in blobs.items():
            (large if len(data) >= self.large_bytes else small)[ref] = data
        return small, large

    def for_transaction(self, blobs: Mapping[str, bytes]) -> dict[str, bytes]:
        """Write the large blobs as files now (durably), and return the small ones for the caller's transaction."""
        small, large = self.split(blobs)
        if large:
            self.files.put_many(large)
            self._known.update(large)
        return small

    def put(self, data: bytes) -> str:
        ref = sha256_ref(data)
        self.put_many({ref: data})
        return ref

    def put_many(self, blobs: Mapping[str, bytes]) -> None:
        small = self.for_transaction(blobs)
        if small:
            self.store.put_blobs(small)
            self._known.update(small)

    def get(self, ref: str) -> bytes:
        return self.get_many([ref])[ref]

    def get_many(self, refs: Iterable[str], *, missing_ok: bool = False) -> dict[str, bytes]:
        """The table first (one query), then files for the rest; every blob verified."""
        wanted = list(dict.fromkeys(refs))
        found = self.store.get_blobs(wanted, missing_ok=True)
        return _with_files(found, wanted, self.files, missing_ok=missing_ok)

    @contextmanager
    def reading(self) -> Iterator[HybridReader]:  # type: ignore[override]
        with self.store.blob_reader() as reader:
            yield HybridReader(reader, self.files)

    def has(self, ref: str) -> bool:
        return bool(self.has_many([ref]))

    def has_many(self, refs: Iterable[str]) -> set[str]:
        wanted = set(refs)
        found = super().has_many(wanted)
        found |= self.files.has_many(wanted - found)
        self._known |= found
        return found

    def size(self, ref: str) -> int:
        try:
            return self.store.blob_size(ref)
        except BlobNotFoundError:
            return self.files.size(ref)

    def total_bytes(self) -> int:
        return self.store.blob_bytes_total() + self.files.total_bytes()


def _with_files(
    found: dict[str, bytes], wanted: list[str], files: BlobStore, *, missing_ok: bool
) -> dict[str, bytes]:
    rest = [ref for ref in wanted if ref not in found]
    if rest:
        found.update(files.get_many(rest, missing_ok=missing_ok))
    return {ref: found[ref] for ref in wanted if ref in found}


class HybridReader:
    """A walk's reads: the table inside one read transaction, then the files."""

    def __init__(self, reader: SqlBlobReader, files: BlobStore) -> None:
        self._reader = reader
        self._files = files

    def get_many(self, refs: Iterable[str], *, missing_ok: bool = False) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(refs))
        found = self._reader.get_many(wanted, missing_ok=True)
        return _with_files(found, wanted, self._files, missing_ok=missing_ok)

    def get(self, ref: str) -> bytes:
        return self.get_many([ref])[ref]

    def segment_chain(self, head: str) -> dict[str, bytes]:
        """The table's prefetch of an observation log (a hint; files are read by the walk itself)."""
        return self._reader.segment_chain(head)
