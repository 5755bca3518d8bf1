"""Content-addressed blobs inside the SQL store, so a checkpoint and its new parts commit together."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from baton.errors import BlobNotFoundError, IntegrityError, StoreError
from baton.identity import REF_PREFIX, hex_of
from baton.store import row_codec
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
#
# Blob bodies are kept compressed at rest where that pays (see `encode_body`), so the chain query
# reads `codec` too; segments carry the link marker and are always stored raw, so their links stay
# readable to it.
_LINK_SQL = "encode(substr({data}, position('\"previous\":\"sha256:'::bytea in {data}) + 19, 64), 'escape')"
_SEGMENT_CHAIN_SQL = {
    "postgres": (
        "WITH RECURSIVE chain (digest, data, codec, link) AS ("
        f" SELECT digest, data, codec, {_LINK_SQL.format(data='data')} FROM blobs WHERE digest = ?"
        " UNION"
        f" SELECT b.digest, b.data, b.codec, {_LINK_SQL.format(data='b.data')} FROM chain JOIN blobs b"
        " ON b.digest = CASE WHEN length(chain.link) = 64 AND translate(chain.link, '0123456789abcdef', '') = ''"
        " THEN decode(chain.link, 'hex') END"
        ") SELECT digest, data, codec FROM chain"
    ),
}


CODEC_RAW = 0
"""`blobs.codec` of a row whose `data` is the blob's bytes as they are (every row before migration 7)."""
CODEC_DEFLATE = 1
"""`blobs.codec` of a row whose `data` is the blob's bytes compressed as a raw DEFLATE stream (RFC 1951)."""
CODEC_PACKED_V1 = 2
"""`blobs.codec` of a row whose `data` is raw DEFLATE primed with `row_codec.DICTIONARY_V1` (migration 8 on)."""

_MIN_SAVING = 16
"""A body is stored compressed only when that saves at least this many bytes (and a tenth of it)."""
_LINK_MARK = b'"previous":"sha256:'
"""Bodies that link to a predecessor stay raw on PostgreSQL, so its chain query can read the link."""


def encode_body(data: bytes, *, links_raw: bool = True) -> tuple[int, bytes]:
    """(codec, stored bytes) for a blob row: DEFLATE primed with Baton's vocabulary (`row_codec`) where it
    saves enough, else the bytes as they are.

    With `links_raw` (a backend whose chain query reads links in the stored bytes: PostgreSQL), a body
    that links to a predecessor stays raw. The row's key stays the sha256 of the raw bytes; `decode_body` gives them back and every read
    verifies them against that key, so compression never weakens the integrity check.
    """
    if len(data) < 2 * _MIN_SAVING or (links_raw and _LINK_MARK in data):
        return CODEC_RAW, data
    packed = row_codec.pack(data)
    if len(data) - len(packed) < max(_MIN_SAVING, len(data) // 10):
        return CODEC_RAW, data
    return CODEC_PACKED_V1, packed


def decode_body(ref: str, codec: int, stored: bytes) -> bytes:
    """The raw bytes of a blob row stored under `ref` (not yet verified against it).

    A body that cannot be decoded (an unknown codec, a damaged or truncated DEFLATE
    stream) is as corrupt as one that hashes wrong: IntegrityError.
    """
    if codec == CODEC_RAW:
        return stored
    if codec == CODEC_PACKED_V1:
        try:
            return row_codec.unpack(stored)
        except ValueError as exc:
            raise IntegrityError(f"blob {ref} is corrupt: its packed bytes do not unpack ({exc})") from None
    if codec != CODEC_DEFLATE:
        raise IntegrityError(f"blob {ref} is corrupt: its row names an unknown codec {codec!r}")
    unpacker = zlib.decompressobj(-15)
    try:
        data = unpacker.decompress(stored) + unpacker.flush()
    except zlib.error as exc:
        raise IntegrityError(f"blob {ref} is corrupt: its compressed bytes do not decompress ({exc})") from None
    if not unpacker.eof or unpacker.unused_data:
        raise IntegrityError(f"blob {ref} is corrupt: its compressed bytes are truncated or followed by others")
    return data


def _verified(ref: str, codec: int, stored: bytes) -> bytes:
    data = decode_body(ref, codec, stored)
    actual = REF_PREFIX + hashlib.sha256(data).hexdigest()
    if actual != ref:
        raise IntegrityError(f"blob {ref} is corrupt: its bytes hash to {actual}")
    return data


def digest_of(ref: str) -> bytes:
    """The 32 raw digest bytes of a (validated) ref."""
    return bytes.fromhex(hex_of(ref))


class BlobsSql(StoreCore):
    """Immutable bytes keyed by their sha256; written once, verified on every read.

    Stores at rest (the SQLite file, PostgreSQL) set `compress_blobs` and keep
    bodies compressed where that pays (`encode_body`); the simulation's in-memory
    store keeps them raw. Either way rows of both kinds read, and every read
    decodes and verifies.
    """

    compress_blobs = False

    def _insert_blobs(self, tx: Tx, blobs: Mapping[str, bytes]) -> None:
        params: list[object] = []
        links_raw = self.dialect.name in _SEGMENT_CHAIN_SQL  # only a backend with the chain query reads links in place
        for ref, data in blobs.items():
            actual = REF_PREFIX + hashlib.sha256(data).hexdigest()
            if actual != ref:
                raise IntegrityError(f"refusing to store bytes under {ref}: they hash to {actual}")
            codec, stored = encode_body(data, links_raw=links_raw) if self.compress_blobs else (CODEC_RAW, data)
            params += [digest_of(ref), stored, codec]
        for start in range(0, len(params), 3 * _ROWS_PER_INSERT):  # one statement per batch of rows
            chunk = params[start:start + 3 * _ROWS_PER_INSERT]
            values = ", ".join("(?, ?, ?)" for _ in range(len(chunk) // 3))
            tx.send(f"INSERT INTO blobs (digest, data, codec) VALUES {values} ON CONFLICT DO NOTHING", tuple(chunk))

    def put_blobs(self, blobs: Mapping[str, bytes]) -> None:
        """Store each (ref, bytes) pair once, in one transaction."""
        if blobs:
            with self._tx() as tx:
                self._insert_blobs(tx, blobs)

    def get_blob(self, ref: str) -> bytes:
        """The bytes stored under `ref`, verified against it."""
        with self._tx(write=False) as tx:
            row = tx.one("SELECT data, codec FROM blobs WHERE digest = ?", (digest_of(ref),))
        if row is None:
            raise BlobNotFoundError(f"blob {ref} is not in the SQL blob table")
        return _verified(ref, int(row[1]), bytes(row[0]))

    def _select_blobs(self, tx: Tx, refs: Iterable[str], *, missing_ok: bool) -> dict[str, bytes]:
        """`refs` (each once, in the order given) fetched in `tx`, every one verified against its hash.

        One statement per 500 refs. A missing ref raises BlobNotFoundError, or is
        left out when `missing_ok`; bytes that do not hash to their ref raise
        IntegrityError (for the first such ref in the order given).
        """
        by_digest = {digest_of(ref): ref for ref in dict.fromkeys(refs)}
        digests = list(by_digest)
        stored: dict[str, tuple[int, bytes]] = {}
        for start in range(0, len(digests), _REFS_PER_SELECT):
            chunk = digests[start:start + _REFS_PER_SELECT]
            marks = ", ".join("?" for _ in chunk)
            sql = f"SELECT digest, data, codec FROM blobs WHERE digest IN ({marks})"
            for digest, data, codec in tx.rows(sql, tuple(chunk)):
                stored[by_digest[bytes(digest)]] = (int(codec), bytes(data))
        found: dict[str, bytes] = {}
        for ref in by_digest.values():
            row = stored.get(ref)
            if row is None:
                if missing_ok:
                    continue
                raise BlobNotFoundError(f"blob {ref} is not in the SQL blob table")
            found[ref] = _verified(ref, *row)
        return found

    def _select_segment_chain(self, tx: Tx, head: str) -> dict[str, bytes]:
        """The observation segment `head` and those it links back to, as far as the database can follow
        them in one query (nothing where the dialect has no such query). Only rows whose bytes match
        their digest are returned: this is a prefetch, never the judge of a blob."""
        sql = _SEGMENT_CHAIN_SQL.get(self.dialect.name)
        if sql is None:
            return {}
        found: dict[str, bytes] = {}
        for digest, data, codec in tx.rows(sql, (digest_of(head),)):
            ref = REF_PREFIX + bytes(digest).hex()
            try:
                payload = decode_body(ref, int(codec), bytes(data))
            except IntegrityError:
                continue  # the walk reads this row again and reports it
            if hashlib.sha256(payload).digest() == bytes(digest):
                found[ref] = payload
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
        """The blob's size as stored by its writer (its raw bytes, however the row keeps them)."""
        with self._tx(write=False) as tx:
            row = tx.one("SELECT length(data), codec FROM blobs WHERE digest = ?", (digest_of(ref),))
        if row is None:
            raise BlobNotFoundError(f"blob {ref} is not in the SQL blob table")
        if int(row[1]) == CODEC_RAW:
            return int(row[0])
        return len(self.get_blob(ref))

    def blob_bytes_total(self) -> int:
        """The raw bytes of every blob in the table (compressed rows are decoded and verified to count them)."""
        with self._tx(write=False) as tx:
            row = tx.one("SELECT COALESCE(SUM(length(data)), 0) FROM blobs WHERE codec = ?", (CODEC_RAW,))
            total = int(row[0]) if row else 0
            for digest, data, codec in tx.rows("SELECT digest, data, codec FROM blobs WHERE codec <> ?", (CODEC_RAW,)):
                total += len(_verified(REF_PREFIX + bytes(digest).hex(), int(codec), bytes(data)))
        return total


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
