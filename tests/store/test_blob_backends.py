"""Blob backends (files, SQL table) and sealing a checkpoint with its new blobs, on every SQL backend."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from baton.checkpoints import restore, seal_checkpoint
from baton.errors import AppendOnlyViolation, BlobNotFoundError, IntegrityError, InvalidRefError, SecretInStateError
from baton.identity import sha256_ref
from baton.models import Boundary, ResumabilityClass
from baton.store.base import SqlStore
from baton.store.blobs import Blobs, BlobStore
from baton.store.blobs_sql import digest_of
from baton.store.hybrid_blobs import HybridBlobStore
from baton.store.sql_blobs import SqlBlobStore
from baton.store.staging import StagedBlobs
from builders.records import T0, observation, parts

BLOB_KINDS = ["files", "sql", "hybrid"]
HYBRID_LARGE_BYTES = 4
"""Small enough that the contract's blobs go both ways: b"hello" to a file, b"a" to the table."""


def blobs_for(kind: str, store: SqlStore, tmp_path: Path) -> Blobs:
    if kind == "hybrid":
        return HybridBlobStore(store, BlobStore(tmp_path / "blobs"), large_bytes=HYBRID_LARGE_BYTES)
    return BlobStore(tmp_path / "blobs") if kind == "files" else SqlBlobStore(store)


@pytest.mark.parametrize("kind", BLOB_KINDS)
def test_blob_backend_contract(kind: str, store: SqlStore, tmp_path: Path) -> None:
    blobs = blobs_for(kind, store, tmp_path)
    ref = blobs.put(b"hello")
    assert ref == sha256_ref(b"hello") and blobs.put(b"hello") == ref
    assert blobs.get(ref) == b"hello" and blobs.has(ref) and blobs.size(ref) == 5
    assert blobs.total_bytes() == 5
    blobs.put_many({sha256_ref(b"a"): b"a", sha256_ref(b"b"): b"b"})
    assert blobs.total_bytes() == 7
    with pytest.raises(BlobNotFoundError):
        blobs.get(sha256_ref(b"never"))
    with pytest.raises(InvalidRefError):
        blobs.get("../../etc/passwd")
    with pytest.raises(IntegrityError):
        blobs.put_many({sha256_ref(b"x"): b"not x"})


def test_sql_blobs_are_immutable_and_verified(store: SqlStore) -> None:
    ref = SqlBlobStore(store).put(b"original")
    with pytest.raises(AppendOnlyViolation):
        store.execute_raw("UPDATE blobs SET data = ? WHERE digest = ?", (b"tampered", digest_of(ref)))


def test_staging_only_holds_what_is_new(tmp_path: Path) -> None:
    base = BlobStore(tmp_path)
    old = base.put(b"old")
    staged = StagedBlobs(base)
    assert staged.put(b"old") == old and not staged.pending
    new = staged.put(b"new")
    assert staged.pending == {new: b"new"} and staged.has(new) and not base.has(new)
    assert staged.get(new) == b"new" and staged.get(old) == b"old"


@pytest.mark.parametrize("kind", BLOB_KINDS)
def test_seal_checkpoint_commits_parts_and_restores(kind: str, store: SqlStore, tmp_path: Path) -> None:
    blobs = blobs_for(kind, store, tmp_path)
    run = store.create_run("run-1", parts().run_kind, parts().release.release_id, "eu-1")
    parent = None
    current = parts()
    for step in range(3):
        content = f"observation {step}".encode()
        current = dataclasses.replace(current, state=current.state.model_copy(update={"step": step}))
        parent = seal_checkpoint(
            store, blobs, contents=[content], run_id=run.run_id, parts=current,
            new_observations=[observation(sha256_ref(content), source=f"corpus://{step}")], parent=parent,
            boundary=Boundary.GENERATING, resumability=ResumabilityClass.R3, resumability_reasons=("recorded",),
            owner_epoch=0, sealed_at=T0,
        )
    stored = store.latest_checkpoint(run.run_id)
    assert stored == parent
    restored = restore(blobs, stored)
    assert restored.parts == current and len(restored.observations) == 3
    assert blobs.get(restored.observations[-1].content_ref) == b"observation 2"


@pytest.mark.parametrize("kind", BLOB_KINDS)
def test_secret_leaves_nothing_behind(kind: str, store: SqlStore, tmp_path: Path) -> None:
    blobs = blobs_for(kind, store, tmp_path)
    run = store.create_run("run-2", parts().run_kind, parts().release.release_id, "eu-1")
    leaky = dataclasses.replace(parts(), state=parts().state.model_copy(update={"memory": {"password": "hunter2hunter2"}}))
    with pytest.raises(SecretInStateError):
        seal_checkpoint(
            store, blobs, contents=[b"c"], run_id=run.run_id, parts=leaky, new_observations=[], parent=None,
            boundary=Boundary.GENERATING, resumability=ResumabilityClass.R2, resumability_reasons=(),
            owner_epoch=0, sealed_at=T0,
        )
    assert blobs.total_bytes() == 0
    assert store.latest_checkpoint(run.run_id) is None


def test_hybrid_puts_small_blobs_in_the_table_and_large_ones_in_files(store: SqlStore, tmp_path: Path) -> None:
    files = BlobStore(tmp_path / "blobs")
    blobs = HybridBlobStore(store, files, large_bytes=100)
    small, large = blobs.put(b"s" * 99), blobs.put(b"L" * 100)
    assert store.has_blob(small) and not files.has(small)
    assert files.has(large) and not store.has_blob(large)
    assert blobs.get_many([small, large]) == {small: b"s" * 99, large: b"L" * 100}
    with blobs.reading() as reader:
        assert reader.get(large) == b"L" * 100 and reader.get(small) == b"s" * 99
    assert blobs.has_many([small, large, sha256_ref(b"none")]) == {small, large}
    assert blobs.size(large) == 100 and blobs.total_bytes() == 199


def test_hybrid_reads_a_store_written_with_file_blobs(store: SqlStore, tmp_path: Path) -> None:
    """The layout before the hybrid default (every blob a file) reads unchanged, verified."""
    old = BlobStore(tmp_path / "blobs")
    ref = old.put(b"written by the old layout")
    blobs = HybridBlobStore(store, BlobStore(tmp_path / "blobs"))
    assert blobs.get(ref) == b"written by the old layout" and blobs.has(ref)
    path = tmp_path / "blobs" / ref[7:9] / ref[9:]
    path.write_bytes(b"tampered")
    with pytest.raises(IntegrityError):
        blobs.get(ref)
    with pytest.raises(BlobNotFoundError):
        blobs.get(sha256_ref(b"in neither"))
    assert blobs.get_many([sha256_ref(b"in neither")], missing_ok=True) == {}


def test_hybrid_seal_writes_large_parts_as_files_before_the_row(store: SqlStore, tmp_path: Path) -> None:
    files = BlobStore(tmp_path / "blobs")
    blobs = HybridBlobStore(store, files, large_bytes=1000)
    run = store.create_run("run-1", parts().run_kind, parts().release.release_id, "eu-1")
    big, small = b"B" * 5000, b"small content"
    checkpoint = seal_checkpoint(
        store, blobs, contents=[big, small], run_id=run.run_id, parts=parts(),
        new_observations=[observation(sha256_ref(big), source="corpus://big"),
                          observation(sha256_ref(small), source="corpus://small")],
        parent=None, boundary=Boundary.GENERATING, resumability=ResumabilityClass.R3,
        resumability_reasons=("recorded",), owner_epoch=0, sealed_at=T0,
    )
    assert files.has(sha256_ref(big)) and store.has_blob(sha256_ref(small))
    assert not files.has(sha256_ref(small))
    restored = restore(blobs, checkpoint)
    assert [blobs.get(o.content_ref) for o in restored.observations] == [big, small]
