"""Batched blob reads (`get_many`, `reading`) and batched event appends, on every SQL backend."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from unittest import mock

import pytest

from baton.checkpoints import load_observations, restore, seal_checkpoint
from baton.errors import BlobNotFoundError, CheckpointIntegrityError, IntegrityError, RecordNotFoundError, StoreError
from baton.identity import sha256_ref
from baton.models import Boundary, Event, EventType, ResumabilityClass
from baton.store.base import SqlStore
from baton.store.blobs import Blobs, BlobStore
from baton.store.blobs_sql import digest_of
from baton.store.sql_blobs import SqlBlobStore
from baton.store.staging import StagedBlobs
from builders.records import T0, observation, parts
from builders.rows import counted_transactions

BLOB_KINDS = ["files", "sql"]


def blobs_for(kind: str, store: SqlStore, tmp_path: Path) -> Blobs:
    return BlobStore(tmp_path / "blobs") if kind == "files" else SqlBlobStore(store)


def seal_chain(store: SqlStore, blobs: Blobs, steps: int, run_id: str = "run-1"):  # type: ignore[no-untyped-def]
    store.create_run(run_id, parts().run_kind, parts().release.release_id, "eu-1")
    parent = None
    current = parts()
    for step in range(steps):
        content = f"observation {step}".encode()
        current = dataclasses.replace(current, state=current.state.model_copy(update={"step": step}))
        parent = seal_checkpoint(
            store, blobs, contents=[content], run_id=run_id, parts=current,
            new_observations=[observation(sha256_ref(content), source=f"corpus://{step}")], parent=parent,
            boundary=Boundary.GENERATING, resumability=ResumabilityClass.R3, resumability_reasons=("recorded",),
            owner_epoch=0, sealed_at=T0,
        )
    assert parent is not None
    return parent, current


# -- get_many and reading -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", BLOB_KINDS)
def test_get_many_returns_every_ref_verified(kind: str, store: SqlStore, tmp_path: Path) -> None:
    blobs = blobs_for(kind, store, tmp_path)
    refs = [blobs.put(f"blob {i}".encode()) for i in range(5)]
    assert blobs.get_many([*refs, refs[0]]) == {ref: f"blob {i}".encode() for i, ref in enumerate(refs)}
    assert blobs.get_many([]) == {}
    absent = sha256_ref(b"never stored")
    with pytest.raises(BlobNotFoundError):
        blobs.get_many([refs[0], absent])
    assert blobs.get_many([refs[0], absent], missing_ok=True) == {refs[0]: b"blob 0"}
    with blobs.reading() as reader:
        assert reader.get_many(refs[:2]) == {refs[0]: b"blob 0", refs[1]: b"blob 1"}
        assert reader.get(refs[2]) == b"blob 2"
        assert reader.get_many([absent], missing_ok=True) == {}


def test_sql_get_many_is_one_query_and_chunks_long_lists(store: SqlStore) -> None:
    blobs = SqlBlobStore(store)
    data = {sha256_ref(f"b{i}".encode()): f"b{i}".encode() for i in range(1203)}
    blobs.put_many(data)
    with counted_transactions() as opened:
        assert blobs.get_many(data) == data
    assert opened == [False]  # one read transaction (three statements of at most 500 refs)


@pytest.mark.parametrize("kind", BLOB_KINDS)
def test_get_many_refuses_corrupt_bytes(kind: str, store: SqlStore, tmp_path: Path) -> None:
    blobs = blobs_for(kind, store, tmp_path)
    good = blobs.put(b"good")
    bad = sha256_ref(b"what the ref promises")
    if kind == "files":
        digest = bad.removeprefix("sha256:")
        (tmp_path / "blobs" / digest[:2]).mkdir(parents=True, exist_ok=True)
        (tmp_path / "blobs" / digest[:2] / digest[2:]).write_bytes(b"something else")
    else:
        store.execute_raw("INSERT INTO blobs (digest, data) VALUES (?, ?)", (digest_of(bad), b"something else"))
    with pytest.raises(IntegrityError, match="corrupt"):
        blobs.get_many([good, bad])
    with pytest.raises(IntegrityError, match="corrupt"):
        blobs.get_many([good, bad], missing_ok=True)


def test_staged_get_many_sees_pending_and_base(tmp_path: Path) -> None:
    base = BlobStore(tmp_path)
    old = base.put(b"old")
    staged = StagedBlobs(base)
    new = staged.put(b"new")
    assert staged.get_many([new, old]) == {new: b"new", old: b"old"}
    with staged.reading() as reader:
        assert reader.get_many([old, new]) == {old: b"old", new: b"new"} and reader.get(new) == b"new"


@pytest.mark.parametrize("kind", BLOB_KINDS)
def test_restore_reads_level_by_level(kind: str, store: SqlStore, tmp_path: Path) -> None:
    blobs = blobs_for(kind, store, tmp_path)
    latest, current = seal_chain(store, blobs, 6)
    fresh = SqlBlobStore(store) if kind == "sql" else blobs  # nothing remembered from sealing
    with counted_transactions() as opened:
        restored = restore(fresh, latest)
    assert restored.parts == current
    assert [o.source for o in restored.observations] == [f"corpus://{i}" for i in range(6)]
    assert load_observations(fresh, latest.observation_manifest_ref) == restored.observations
    # SQL blobs: the whole walk in one read transaction; files: no store transaction at all.
    assert opened == ([False] if kind == "sql" else [])


def test_restore_sql_blobs_queries_per_level_not_per_blob(store: SqlStore) -> None:
    blobs = SqlBlobStore(store)
    latest, _ = seal_chain(store, blobs, 6)
    with mock.patch.object(SqlStore, "_select_blobs", autospec=True, side_effect=SqlStore._select_blobs) as select, \
            mock.patch.object(SqlStore, "_select_segment_chain", autospec=True,
                              side_effect=SqlStore._select_segment_chain) as chain:
        restored = restore(SqlBlobStore(store), latest, verify_artifact=True)
    assert len(restored.observations) == 6 and chain.call_count == 1
    if store.backend == "postgres":
        # parts and newest segment; the segment chain in one recursive query; every observation
        assert select.call_count == 2
    else:
        # parts and newest segment, then one level per older segment (with the observations of
        # the segment after it), then the oldest segment's observations
        assert select.call_count == 1 + 6


def test_postgres_chain_query_is_only_a_hint(store: SqlStore) -> None:
    """Forged rows (bytes that do not hash to their digest) are never taken from the chain query."""
    blobs = SqlBlobStore(store)
    latest, _ = seal_chain(store, blobs, 3)
    head = latest.observation_manifest_ref
    with store.blob_reader() as reader:
        chain = reader.segment_chain(head)
    if store.backend == "postgres":
        assert len(chain) == 3 and head in chain
    else:
        assert chain == {}
    forged = sha256_ref(b"a segment nobody sealed")
    loop = ('{"observation_refs":[],"previous":"' + forged + '","total":0}').encode()
    store.execute_raw("INSERT INTO blobs (digest, data) VALUES (?, ?)", (digest_of(forged), loop))  # links to itself
    with store.blob_reader() as reader:
        assert reader.segment_chain(forged) == {}
    with pytest.raises(CheckpointIntegrityError, match="observation segment .* corrupt"):
        load_observations(blobs, forged)


@pytest.mark.parametrize("link", [
    b'"previous":"sha256:' + b"Z" * 64 + b'"',  # not hex
    b'"previous":"sha256:' + b"AB" * 32 + b'"',  # upper case: not a link the chain query follows
    b'"previous":"sha256:abc"',  # too short
    b'"previous":"sha256:',  # cut off at the end
    b"\xff\x00\\" + b'"previous":"sha256:' + b"\x80" * 64,  # bytes that are no text at all
    b"no link here",
])
def test_postgres_chain_query_never_fails_on_content(store: SqlStore, link: bytes) -> None:
    """Whatever a blob holds, following its link is a hint that stops, never an error."""
    data = b'{"observation_refs":[],' + link + b',"total":0}'
    ref = sha256_ref(data)
    store.put_blobs({ref: data})
    with store.blob_reader() as reader:
        chain = reader.segment_chain(ref)
    assert chain == ({ref: data} if store.backend == "postgres" else {})


@pytest.mark.parametrize("kind", BLOB_KINDS)
def test_restore_names_missing_and_corrupt_parts(kind: str, store: SqlStore, tmp_path: Path) -> None:
    blobs = blobs_for(kind, store, tmp_path)
    latest, _ = seal_chain(store, blobs, 3)
    moved = dataclasses.replace(parts(), state=parts().state.model_copy(update={"step": 99}))
    absent_state = sha256_ref(moved.state.canonical())
    missing = latest.model_copy(update={"task_state_ref": absent_state})
    with pytest.raises(CheckpointIntegrityError, match="run state .* missing"):
        restore(blobs, missing)
    bad = sha256_ref(b"a budget ledger that was never stored")
    if kind == "files":
        digest = bad.removeprefix("sha256:")
        (tmp_path / "blobs" / digest[:2]).mkdir(parents=True, exist_ok=True)
        (tmp_path / "blobs" / digest[:2] / digest[2:]).write_bytes(b"{}")
    else:
        store.execute_raw("INSERT INTO blobs (digest, data) VALUES (?, ?)", (digest_of(bad), b"{}"))
    corrupt = latest.model_copy(update={"budget_ledger_ref": bad})
    with pytest.raises(CheckpointIntegrityError, match="budget ledger .* corrupt"):
        restore(blobs, corrupt)


# -- append_events --------------------------------------------------------------------------------


def _event(run_id: str, kind: EventType, at: dt.datetime = T0, **fields: object) -> Event:
    return Event(event_type=kind, run_id=run_id, at=at, **fields)  # type: ignore[arg-type]


def test_append_events_is_one_transaction_in_order(store: SqlStore) -> None:
    store.create_run("run-e", "research", "rel", "eu-1")
    before = store.append_event(_event("run-e", EventType.RUN_CREATED))
    kinds = [EventType.CHECKPOINT_SEALED, EventType.TARGET_SELECTED, EventType.COMPATIBILITY_PASSED]
    with counted_transactions() as opened:
        seqs = store.append_events([_event("run-e", kind, reason=str(i)) for i, kind in enumerate(kinds)])
    assert opened == [True]
    assert seqs == sorted(seqs) and seqs[0] > before and len(set(seqs)) == 3
    listed = store.list_events(run_id="run-e", after_seq=before)
    assert [(seq, e.event_type, e.reason, e.at) for seq, e in listed] == [
        (seq, kind, str(i), T0) for i, (seq, kind) in enumerate(zip(seqs, kinds, strict=True))
    ]
    assert store.append_events([]) == []


def test_append_events_stamps_the_database_clock(store: SqlStore) -> None:
    store.create_run("run-s", "research", "rel", "eu-1")
    start = store.db_now()
    seqs = store.append_events([_event("run-s", EventType.SOURCE_FENCED), _event("run-s", EventType.OWNERSHIP_TRANSFERRED)],
                               stamp=True)
    end = store.db_now()
    stamped = [e for _, e in store.list_events(run_id="run-s")]
    assert [e.event_type for e in stamped] == [EventType.SOURCE_FENCED, EventType.OWNERSHIP_TRANSFERRED]
    assert len(seqs) == 2 and all(start <= e.at <= end for e in stamped) and stamped[0].at == stamped[1].at


def test_append_events_is_all_or_nothing(store: SqlStore) -> None:
    store.create_run("run-a", "research", "rel", "eu-1")
    naive = Event.model_construct(event_type=EventType.RUN_FINISHED, run_id="run-a", at=dt.datetime(2026, 1, 1))
    with pytest.raises(StoreError, match="naive"):
        store.append_events([_event("run-a", EventType.RUN_CREATED), naive])
    assert store.list_events(run_id="run-a") == []


def test_placement_moves_with_its_events(store: SqlStore) -> None:
    store.create_run("run-p", "research", "rel", "eu-1")
    with counted_transactions() as opened:
        record = store.set_run_placement("run-p", "eu-2", stamp=True, events=[
            _event("run-p", EventType.SOURCE_FENCED), _event("run-p", EventType.OWNERSHIP_TRANSFERRED)])
    assert opened == [True] and record.placement == "eu-2" and store.get_run("run-p").placement == "eu-2"
    assert [e.event_type for _, e in store.list_events(run_id="run-p")] == [
        EventType.SOURCE_FENCED, EventType.OWNERSHIP_TRANSFERRED]
    with pytest.raises(RecordNotFoundError):
        store.set_run_placement("no-such-run", "eu-2", events=[_event("no-such-run", EventType.SOURCE_FENCED)])
    assert store.list_events(run_id="no-such-run") == []
    assert store.set_run_placement("run-p", None).placement is None
