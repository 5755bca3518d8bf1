"""Content-addressed blob store on the local file system.

Each blob lives at `<root>/<2 hex>/<62 hex>`. Writes are atomic (temp file,
fsync, rename) and deduplicated; reads re-hash the bytes. A ref is validated
before it is turned into a path, so no input can name a file outside the root.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from baton.errors import BlobNotFoundError, IntegrityError
from baton.identity import REF_PREFIX, hex_of


class BlobStore:
    """Immutable bytes addressed by their sha256."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, ref: str) -> Path:
        digest = hex_of(ref)
        return self.root / digest[:2] / digest[2:]

    def put(self, data: bytes) -> str:
        """Store `data` (once) and return its ref."""
        digest = hashlib.sha256(data).hexdigest()
        ref = REF_PREFIX + digest
        path = self.root / digest[:2] / digest[2:]
        if path.exists():
            return ref
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
        return ref

    def get(self, ref: str) -> bytes:
        """The bytes stored under `ref`, verified against it."""
        path = self._path(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobNotFoundError(f"blob {ref} is not in the store at {self.root}") from None
        actual = REF_PREFIX + hashlib.sha256(data).hexdigest()
        if actual != ref:
            raise IntegrityError(f"blob {ref} is corrupt: its bytes hash to {actual}")
        return data

    def has(self, ref: str) -> bool:
        return self._path(ref).exists()

    def size(self, ref: str) -> int:
        return self._path(ref).stat().st_size

    def total_bytes(self) -> int:
        """Bytes held by all blobs (for benchmarks and reports)."""
        return sum(path.stat().st_size for path in self.root.glob("??/*") if not path.name.startswith("."))
