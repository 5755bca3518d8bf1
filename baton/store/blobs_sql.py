"""Content-addressed blobs inside the SQL store, so a checkpoint and its new parts commit together."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from baton.errors import BlobNotFoundError, IntegrityError, StoreError
from baton.identity import REF_PREFIX, hex_of
from baton.store.core import StoreCore, Tx


_ROWS_PER_INSERT = 200
_REFS_PER_SELECT = 500

# An observation log is a chain of segments, each naming the one before it ("previous" in its
# canonical JSON). PostgreSQL can follow that chain in one recursive query. The link is cut out of the
# stored bytes with position() and substr() (a regular expression per row cost ten times as much) and
# used only when it is 64 lowercase hex digits, so no content can make the query fail; it is only a
# hint: every row is verified against its digest before it is used, and the caller walks the chain
# again from verified segments (fetching whatever the hint missed). UNION drops repeated rows, so even
# forged rows that link in a circle end the recursion. SQLite (3.40, no unhex()) has no such query:
# its reads are in-process and cheap, so its walk stays one query per segment.
_LINK_SQL = "encode(substr({data}, position('\"previous\":\"sha256:'::bytea in {data}) + 19, 64), 'escape')"
_SEGMENT_CHAIN_SQL = {
    "postgres": (
        "WITH RECURSIVE chain (digest, data, link) AS ("
        f" SELECT digest, data, {_LINK_SQL.format(data='data')} FROM blobs WHERE digest = ?"
        " UNION"
        f" SELECT b.digest, b.data, {_LINK_SQL.format(data='b.data')} FROM chain JOIN blobs b"
        " ON b.digest = CASE WHEN length(chain.link) = 64 AND translate(chain.link, '0123456789abcdef', '') = ''"
        " THEN decode(chain.link, 'hex') END"
        ") SELECT digest, data FROM chain"
    ),
}


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

    def _select_blobs(self, tx: Tx, refs: Iterable[str], *, missing_ok: bool) -> dict[str, bytes]:
        """`refs` (each once, in the order given) fetched in `tx`, every one verified against its hash.

        One statement per 500 refs. A missing ref raises BlobNotFoundError, or is
        left out when `missing_ok`; bytes that do not hash to their ref raise
        IntegrityError (for the first such ref in the order given).
        """
        by_digest = {digest_of(ref): ref for ref in dict.fromkeys(refs)}
        digests = list(by_digest)
        stored: dict[str, bytes] = {}
        for start in range(0, len(digests), _REFS_PER_SELECT):
            chunk = digests[start:start + _REFS_PER_SELECT]
            marks = ", ".join("?" for _ in chunk)
            for digest, data in tx.rows(f"SELECT digest, data FROM blobs WHERE digest IN ({marks})", tuple(chunk)):
                stored[by_digest[bytes(digest)]] = bytes(data)
        found: dict[str, bytes] = {}
        for ref in by_digest.values():
            data = stored.get(ref)
            if data is None:
                if missing_ok:
                    continue
                raise BlobNotFoundError(f"blob {ref} is not in the SQL blob table")
            actual = REF_PREFIX + hashlib.sha256(data).hexdigest()
            if actual != ref:
                raise IntegrityError(f"blob {ref} is corrupt: its bytes hash to {actual}")
            found[ref] = data
        return found

    def _select_segment_chain(self, tx: Tx, head: str) -> dict[str, bytes]:
        """The observation segment `head` and those it links back to, as far as the database can follow
        them in one query (nothing where the dialect has no such query). Only rows whose bytes match
        their digest are returned: this is a prefetch, never the judge of a blob."""
        sql = _SEGMENT_CHAIN_SQL.get(self.dialect.name)
        if sql is None:
            return {}
        found: dict[str, bytes] = {}
        for digest, data in tx.rows(sql, (digest_of(head),)):
            payload = bytes(data)
            if hashlib.sha256(payload).digest() == bytes(digest):
                found[REF_PREFIX + bytes(digest).hex()] = payload
        return found

    def get_blobs(self, refs: Iterable[str], *, missing_ok: bool = False) -> dict[str, bytes]:
        """The bytes stored under each of `refs`, verified, from one query in one read transaction.

        BlobNotFoundError for a missing ref unless `missing_ok` (then it is left
        out); IntegrityError for bytes that do not match their ref.
        """
        wanted = list(refs)
        if not wanted:
            return {}
        with self._tx(write=False) as tx:
            return self._select_blobs(tx, wanted, missing_ok=missing_ok)

    @contextmanager
    def blob_reader(self) -> Iterator[SqlBlobReader]:
        """A reader whose fetches share one read transaction (a walk of several levels in one).

        No other store call may run on this thread while the reader is open
        (store transactions do not nest).
        """
        with self._tx(write=False) as tx:
            reader = SqlBlobReader(self, tx)
            try:
                yield reader
            finally:
                reader.closed = True

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


class SqlBlobReader:
    """Verified blob fetches inside one open read transaction of the store (see `BlobsSql.blob_reader`)."""

    def __init__(self, store: BlobsSql, tx: Tx) -> None:
        self._store = store
        self._tx = tx
        self.closed = False

    def get_many(self, refs: Iterable[str], *, missing_ok: bool = False) -> dict[str, bytes]:
        """As `BlobsSql.get_blobs`, in this reader's transaction."""
        if self.closed:
            raise StoreError("this blob reader's transaction has ended")
        wanted = list(refs)
        if not wanted:
            return {}
        return self._store._select_blobs(self._tx, wanted, missing_ok=missing_ok)

    def get(self, ref: str) -> bytes:
        return self.get_many([ref])[ref]

    def segment_chain(self, head: str) -> dict[str, bytes]:
        """Verified blobs of the observation segment chain ending at `head`, fetched in one query where
        the backend can follow it (PostgreSQL); possibly incomplete, possibly empty: a hint for a walk."""
        if self.closed:
            raise StoreError("this blob reader's transaction has ended")
        return self._store._select_segment_chain(self._tx, head)
