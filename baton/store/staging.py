"""Staging a checkpoint's new blobs so they become durable together with it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from baton.identity import sha256_ref
from baton.store.blobs import BlobReader, Blobs


def _with_pending(pending: Mapping[str, bytes], base: BlobReader, refs: Iterable[str], missing_ok: bool) -> dict[str, bytes]:
    """Staged bytes where staged, the rest from `base` in one call; in the order asked."""
    wanted = list(dict.fromkeys(refs))
    found = {ref: pending[ref] for ref in wanted if ref in pending}
    rest = [ref for ref in wanted if ref not in found]
    if rest:
        found.update(base.get_many(rest, missing_ok=missing_ok))
    return {ref: found[ref] for ref in wanted if ref in found}


class _StagedReader:
    """A base reader seen through the staged bytes."""

    def __init__(self, pending: Mapping[str, bytes], base: BlobReader) -> None:
        self._pending = pending
        self._base = base

    def get(self, ref: str) -> bytes:
        return self._pending[ref] if ref in self._pending else self._base.get(ref)

    def get_many(self, refs: Iterable[str], *, missing_ok: bool = False) -> dict[str, bytes]:
        return _with_pending(self._pending, self._base, refs, missing_ok)


class StagedBlobs:
    """Collects new blobs in memory over a base backend; reads see both.

    Only bytes the base does not hold yet are staged, so `pending` is exactly
    what one checkpoint adds.
    """

    def __init__(self, base: Blobs) -> None:
        self.base = base
        self.pending: dict[str, bytes] = {}
        self._known: set[str] = set()

    def put(self, data: bytes) -> str:
        ref = sha256_ref(data)
        if ref not in self.pending and ref not in self._known:
            if self.base.has(ref):
                self._known.add(ref)
            else:
                self.pending[ref] = data
        return ref

    def put_many(self, blobs: Mapping[str, bytes]) -> None:
        """Stage blobs the caller already knows the base lacks (no lookup)."""
        self.pending.update(blobs)

    def stored_hint(self, refs: Iterable[str]) -> set[str]:
        wanted = set(refs)
        here = {ref for ref in wanted if ref in self.pending or ref in self._known}
        return here | self.base.stored_hint(wanted - here)

    def is_new(self, ref: str) -> bool:
        """True when `ref` was staged here (the base did not hold it)."""
        return ref in self.pending

    def get(self, ref: str) -> bytes:
        if ref in self.pending:
            return self.pending[ref]
        return self.base.get(ref)

    def get_many(self, refs: Iterable[str], *, missing_ok: bool = False) -> dict[str, bytes]:
        return _with_pending(self.pending, self.base, refs, missing_ok)

    @contextmanager
    def reading(self) -> Iterator[BlobReader]:
        with self.base.reading() as base:
            yield _StagedReader(self.pending, base)

    def has(self, ref: str) -> bool:
        return ref in self.pending or ref in self._known or self.base.has(ref)

    def has_many(self, refs: Iterable[str]) -> set[str]:
        wanted = set(refs)
        here = {ref for ref in wanted if ref in self.pending or ref in self._known}
        found = self.base.has_many(wanted - here)
        self._known |= found
        return here | found

    def size(self, ref: str) -> int:
        if ref in self.pending:
            return len(self.pending[ref])
        return self.base.size(ref)

    def total_bytes(self) -> int:
        return self.base.total_bytes() + sum(len(data) for data in self.pending.values())
