"""Blob bodies compressed at rest (migration 7; primed with a dictionary since migration 8), on every SQL backend.

The row's key is the sha256 of the raw bytes; every read decodes the row and
verifies what it decoded against that key, so a damaged compressed body is
refused as loudly as a damaged raw one. Rows written before migration 7 (raw,
codec 0) read unchanged, and a database opened by this code migrates in place.
"""

from __future__ import annotations

import base64
import json
import random
import zlib

import pytest

from baton.errors import IntegrityError
from baton.identity import sha256_ref
from baton.store.base import SqlStore
from baton.store import row_codec
from baton.store.blobs_sql import CODEC_DEFLATE, CODEC_PACKED_V1, CODEC_RAW, decode_body, digest_of, encode_body
from baton.store.sql_blobs import SqlBlobStore
from builders.fixtures import Backend

RECORD = json.dumps({"source": "corpus://doc", "query": {"q": "x" * 40}, "hash": "sha256:" + "ab" * 32,
                     "limits": {"model_calls": 10_000, "tool_calls": 10_000}}, sort_keys=True).encode()
NOISE = random.Random(7).randbytes(600)  # incompressible


def _row(store: SqlStore, ref: str) -> tuple[bytes, int]:
    data, codec = store.execute_raw("SELECT data, codec FROM blobs WHERE digest = ?", (digest_of(ref),))[0]
    return bytes(data), int(codec)


def _update_row(store: SqlStore, ref: str, column: str, value: bytes | int) -> None:
    """Change one column of a stored blob row as a disk or operator error would: around the append-only triggers."""
    statement = f"UPDATE blobs SET {column} = ? WHERE digest = ?"
    if store.dialect.name == "sqlite":
        triggers = [(str(name), str(sql)) for name, sql in store.execute_raw(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'blobs'")]
        for name, _ in triggers:
            store.execute_raw(f'DROP TRIGGER "{name}"')
        try:
            store.execute_raw(statement, (value, digest_of(ref)))
        finally:
            for _, sql in triggers:
                store.execute_raw(sql)
    else:
        store.execute_raw("ALTER TABLE blobs DISABLE TRIGGER USER")
        try:
            store.execute_raw(statement, (value, digest_of(ref)))
        finally:
            store.execute_raw("ALTER TABLE blobs ENABLE TRIGGER USER")


def _overwrite_row(store: SqlStore, ref: str, data: bytes) -> None:
    _update_row(store, ref, "data", data)


def test_encode_body_compresses_only_where_it_pays() -> None:
    codec, stored = encode_body(RECORD)
    assert codec == CODEC_PACKED_V1 and len(stored) < len(RECORD)
    assert decode_body(sha256_ref(RECORD), codec, stored) == RECORD
    assert encode_body(NOISE) == (CODEC_RAW, NOISE)
    assert encode_body(b"tiny") == (CODEC_RAW, b"tiny")
    segment = b'{"observation_refs":["sha256:' + b"0" * 64 + b'"],"previous":"sha256:' + b"1" * 64 + b'"}'
    assert encode_body(segment) == (CODEC_RAW, segment)  # PostgreSQL's chain query reads its link in place
    codec, stored = encode_body(segment, links_raw=False)  # SQLite has no such query
    assert codec == CODEC_PACKED_V1 and decode_body(sha256_ref(segment), codec, stored) == segment
    text = base64.b64encode(random.Random(3).randbytes(1536))  # the benchmark's observations: a quarter smaller
    codec, stored = encode_body(text)
    assert codec == CODEC_PACKED_V1 and len(stored) < 0.8 * len(text)


def test_blobs_are_stored_compressed_where_it_pays_and_read_back(store: SqlStore) -> None:
    blobs = SqlBlobStore(store)
    record, noise = blobs.put(RECORD), blobs.put(NOISE)
    data, codec = _row(store, record)
    if store.compress_blobs:  # the SQLite file and PostgreSQL; the simulation's in-memory store keeps rows raw
        assert codec == CODEC_PACKED_V1 and len(data) < len(RECORD)
    else:
        assert (data, codec) == (RECORD, CODEC_RAW)
    assert _row(store, noise) == (NOISE, CODEC_RAW)
    assert blobs.get(record) == RECORD and blobs.get_many([noise, record]) == {noise: NOISE, record: RECORD}
    with blobs.reading() as reader:
        assert reader.get(record) == RECORD
    assert blobs.size(record) == len(RECORD) and blobs.size(noise) == len(NOISE)
    assert blobs.total_bytes() == len(RECORD) + len(NOISE)


@pytest.mark.parametrize("damage", ["flip", "truncate", "other_bytes", "deflate_other_bytes", "unknown_codec"])
def test_a_corrupt_compressed_row_is_refused(store: SqlStore, damage: str) -> None:
    store.compress_blobs = True  # on every backend, the in-memory one included
    blobs = SqlBlobStore(store)
    ref = blobs.put(RECORD)
    data, codec = _row(store, ref)
    assert codec == CODEC_PACKED_V1
    if damage == "flip":
        changed = bytearray(data)
        changed[len(changed) // 2] ^= 0x01
        _overwrite_row(store, ref, bytes(changed))
    elif damage == "truncate":
        _overwrite_row(store, ref, data[: len(data) // 2])
    elif damage == "other_bytes":  # a well-formed stream of other content
        _overwrite_row(store, ref, row_codec.pack(RECORD.replace(b"corpus", b"CORPUS")))
    elif damage == "deflate_other_bytes":  # a migration-7 row (plain DEFLATE) of other content
        packer = zlib.compressobj(6, zlib.DEFLATED, -15)
        _overwrite_row(store, ref, packer.compress(RECORD.replace(b"corpus", b"CORPUS")) + packer.flush())
        _set_codec(store, ref, CODEC_DEFLATE)
    else:
        _set_codec(store, ref, 7)
    for read in (lambda: blobs.get(ref), lambda: blobs.get_many([ref]), lambda: blobs.get_many([ref], missing_ok=True),
                 lambda: blobs.size(ref), blobs.total_bytes):
        with pytest.raises(IntegrityError, match=f"blob {ref} is corrupt"):
            read()
    with blobs.reading() as reader, pytest.raises(IntegrityError, match="corrupt"):
        reader.get(ref)


def _set_codec(store: SqlStore, ref: str, codec: int) -> None:
    _update_row(store, ref, "codec", codec)


def test_a_database_from_before_compression_migrates_and_reads(backend: Backend) -> None:
    """A store at migration 6 (no `codec` column, raw rows) opens, migrates in place, and reads its rows."""
    with backend.open() as store:
        store.execute_raw("ALTER TABLE blobs DROP COLUMN codec")
        store.execute_raw("DELETE FROM schema_migrations WHERE version = 7")
        old = sha256_ref(RECORD)
        store.execute_raw("INSERT INTO blobs (digest, data) VALUES (?, ?)", (digest_of(old), RECORD))
    with backend.open() as store:
        assert 7 in store.applied_migrations()
        assert _row(store, old) == (RECORD, CODEC_RAW)
        blobs = SqlBlobStore(store)
        assert blobs.get(old) == RECORD
        new = blobs.put(RECORD + b" and more")
        assert blobs.get_many([old, new]) == {old: RECORD, new: RECORD + b" and more"}


def test_a_row_compressed_before_migration_8_still_reads(store: SqlStore) -> None:
    """Rows migration 7 wrote (plain DEFLATE, codec 1) read back, verified, beside the primed ones."""
    store.compress_blobs = True
    blobs = SqlBlobStore(store)
    ref = blobs.put(RECORD)
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    _overwrite_row(store, ref, packer.compress(RECORD) + packer.flush())
    _set_codec(store, ref, CODEC_DEFLATE)
    assert blobs.get(ref) == RECORD and blobs.get_many([ref]) == {ref: RECORD}
    assert blobs.size(ref) == len(RECORD) and blobs.total_bytes() == len(RECORD)
