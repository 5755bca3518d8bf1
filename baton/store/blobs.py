"""Content-addressed blob store on the local file system.

Each blob lives at `<root>/<2 hex>/<62 hex>`. Writes are atomic (temp file,
fsync, rename) and deduplicated; reads re-hash the bytes. A ref is validated
before it is turned into a path, so no input can name a file outside the root.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from baton.errors import BlobNotFoundError, IntegrityError
from baton.identity import REF_PREFIX, hex_of


class BlobReader(Protocol):
    """Verified reads; what `Blobs.reading()` hands out for a walk of several fetches."""

    def get(self, ref: str) -> bytes: ...

    def get_many(self, refs: Iterable[str], *, missing_ok: bool = False) -> dict[str, bytes]: ...


class Blobs(Protocol):
    """What every blob backend offers: content-addressed, deduplicated, verified on read."""

    def put(self, data: bytes) -> str: ...

    def put_many(self, blobs: Mapping[str, bytes]) -> None: ...

    def get(self, ref: str) -> bytes: ...

    def get_many(self, refs: Iterable[str], *, missing_ok: bool = False) -> dict[str, bytes]:
        """The bytes of every ref (each once), each verified against its hash, in one backend call.

        A missing ref raises BlobNotFoundError, or is left out of the result when
        `missing_ok`; bytes that do not match their ref raise IntegrityError.
        """
        ...

    def reading(self) -> AbstractContextManager[BlobReader]:
        """A reader for several fetches in a row (the SQL backend serves them from one read transaction)."""
        ...

    def has(self, ref: str) -> bool: ...

    def has_many(self, refs: Iterable[str]) -> set[str]: ...

    def stored_hint(self, refs: Iterable[str]) -> set[str]:
        """Refs known to be stored without asking far (a subset of `has_many`; cheap)."""
        ...

    def size(self, ref: str) -> int: ...

    def total_bytes(self) -> int: ...


class BlobStore:
    """Immutable bytes addressed by their sha256, one file each."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, ref: str) -> Path:
        digest = hex_of(ref)
        return self.root / digest[:2] / digest[2:]

    def put(self, data: bytes) -> str:
        """Store `data` (once) and return its ref."""
        ref = REF_PREFIX + hashlib.sha256(data).hexdigest()
        self.put_many({ref: data})
        return ref

    def put_many(self, blobs: Mapping[str, bytes]) -> None:
        """Store several blobs durably: each written to a temp file and fsynced, then renamed.

        The renames are made durable by one fsync per directory touched.
        """
        directories: set[Path] = set()
        for ref, data in blobs.items():
            digest = hex_of(ref)
            if hashlib.sha256(data).hexdigest() != digest:
                raise IntegrityError(f"refusing to store bytes under {ref}: they hash differently")
            path = self.root / digest[:2] / digest[2:]
            if path.exists():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp_name, path)
            except BaseException:
                Path(tmp_name).unlink(missing_ok=True)
                raise
            directories.add(path.parent)
        for directory in directories:
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def get(self, ref: str) -> bytes:
        """The bytes stored under `ref`, verified against it."""
        digest = hex_of(ref)  # validated: no ref names a file outside the root
        try:
            with open(os.path.join(self.root, digest[:2], digest[2:]), "rb") as handle:  # str paths: cheaper
                data = handle.read()
        except FileNotFoundError:
            raise BlobNotFoundError(f"blob {ref} is not in the store at {self.root}") from None
        actual = REF_PREFIX + hashlib.sha256(data).hexdigest()
        if actual != ref:
            raise IntegrityError(f"blob {ref} is corrupt: its bytes hash to {actual}")
        return data

    def get_many(self, refs: Iterable[str], *, missing_ok: bool = False) -> dict[str, bytes]:
        """Each ref's bytes, verified (one file read each: files gain nothing from batching)."""
        found: dict[str, bytes] = {}
        for ref in dict.fromkeys(refs):
            try:
                found[ref] = self.get(ref)
            except BlobNotFoundError:
                if not missing_ok:
                    raise
        return found

    @contextmanager
    def reading(self) -> Iterator[BlobStore]:
        """Files need no session: the store reads for itself."""
        yield self

    def has(self, ref: str) -> bool:
        return self._path(ref).exists()

    def has_many(self, refs: Iterable[str]) -> set[str]:
        """The subset of `refs` already stored."""
        return {ref for ref in refs if self.has(ref)}

    def stored_hint(self, refs: Iterable[str]) -> set[str]:
        """For files, asking is a stat: exact."""
        return self.has_many(refs)

    def size(self, ref: str) -> int:
        return self._path(ref).stat().st_size

    def total_bytes(self) -> int:
        """Bytes held by all blobs (for benchmarks and reports)."""
        return sum(path.stat().st_size for path in self.root.glob("??/*") if not path.name.startswith("."))
