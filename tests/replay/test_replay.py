"""Replay re-executes a run from a checkpoint with recorded observations and reports divergences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.agents.derivers import DERIVERS
from baton.cli import app
from baton.checkpoints import restore
from baton.identity import hex_of
from baton.models import Boundary
from baton.replay import ReplayError, replay_run
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.factory import open_blobs, open_store

from builders.replay import V7, V8, record_run

@pytest.mark.parametrize("kind", ["report", "deployment-spec"])
def test_an_untouched_run_replays_without_divergence(store: SqlStore, blobs: BlobStore, kind: str) -> None:
    chain = record_run(store, blobs, "run-clean", kind=kind)
    report = replay_run(store, blobs, "run-clean", chain[0].checkpoint_id, derivers=DERIVERS)
    assert not report.diverged, report.divergences
    assert [s.seq for s in report.steps] == [1, 2, 3, 4, 5, 6]
    assert [s.replayed_boundary for s in report.steps] == [c.boundary for c in chain[1:]]
    ready = report.steps[0]
    assert ready.replayed_candidate == ready.recorded_candidate is not None
    assert report.steps[1].replayed_evidence == report.steps[1].recorded_evidence == "PASS"
    assert any("simulated from the ledger as COMMITTED" in note for s in report.steps for note in s.notes)


def test_replay_from_a_middle_checkpoint_walks_only_what_follows(store: SqlStore, blobs: BlobStore) -> None:
    chain = record_run(store, blobs, "run-mid")
    report = replay_run(store, blobs, "run-mid", "3", derivers=DERIVERS)
    assert report.from_checkpoint == chain[3].checkpoint_id and [s.seq for s in report.steps] == [4, 5, 6]
    assert not report.diverged
    assert replay_run(store, blobs, "run-mid", chain[-1].checkpoint_id, derivers=DERIVERS).steps == ()


def test_counterfactual_release_diverges_field_by_field(store: SqlStore, blobs: BlobStore) -> None:
    record_run(store, blobs, "run-cf", release=V7)
    report = replay_run(store, blobs, "run-cf", "0", derivers=DERIVERS, release=V8)
    fields = [(d.seq, d.field) for d in report.divergences]
    assert (1, "candidate_hash") in fields and (2, "evidence_binding") in fields
    assert (3, "boundary") in fields  # the approval binds to the v7 report, not to v8's
    assert (4, "operation_artifact") in fields  # the ledger's request was for another artifact
    assert (2, "evidence_result") not in fields  # v8's report cites recorded observations too: it passes
    candidate = next(d for d in report.divergences if d.field == "candidate_hash")
    assert candidate.recorded != candidate.replayed and "scripted-model-v8" in candidate.detail
    assert report.steps[2].replayed_boundary is Boundary.AWAITING_AUTHORITY
    assert report.steps[-1].replayed_boundary is Boundary.AUTHORIZED  # never committed in the replay
    assert report.release_override == V8.release_id


def test_a_record_that_lies_about_its_release_diverges(store: SqlStore, blobs: BlobStore) -> None:
    record_run(store, blobs, "run-lie", release=V7, drafted_by=V8)  # v8 wrote it, the record says v7
    report = replay_run(store, blobs, "run-lie", "0", derivers=DERIVERS)
    assert [d.field for d in report.divergences if d.seq == 1] == ["candidate_hash"]
    assert "scripted-model-v7" in report.divergences[0].detail


def test_an_altered_recorded_blob_is_a_specific_divergence(store: SqlStore, blobs: BlobStore) -> None:
    chain = record_run(store, blobs, "run-bad", kind="deployment-spec")
    content_ref = restore(blobs, chain[0]).observations[0].content_ref
    path = blobs.root / hex_of(content_ref)[:2] / hex_of(content_ref)[2:]
    path.write_bytes(path.read_bytes().replace(b"1.4.2", b"1.4.3"))
    report = replay_run(store, blobs, "run-bad", "0", derivers=DERIVERS)
    altered = [d for d in report.divergences if d.field == "recorded_blob"]
    assert altered and altered[0].recorded == content_ref
    assert "IntegrityError" in altered[0].detail and "corrupt" in altered[0].detail
    assert "content of observation builds://checkout" in altered[0].detail


def test_replay_writes_nothing(store: SqlStore, blobs: BlobStore) -> None:
    record_run(store, blobs, "run-ro")
    events, files = len(store.list_events()), sorted(blobs.root.glob("??/*"))
    replay_run(store, blobs, "run-ro", "0", derivers=DERIVERS, release=V8)
    assert len(store.list_events()) == events and sorted(blobs.root.glob("??/*")) == files


def test_unknown_checkpoint_and_run_are_refused(store: SqlStore, blobs: BlobStore) -> None:
    record_run(store, blobs, "run-x")
    with pytest.raises(ReplayError, match="no checkpoint '42'"):
        replay_run(store, blobs, "run-x", "42", derivers=DERIVERS)
    with pytest.raises(ReplayError):
        replay_run(store, blobs, "ghost", "0", derivers=DERIVERS)


def _seed_home(home: Path, run_id: str, **options) -> list:
    store = open_store(None, home)
    try:
        return record_run(store, open_blobs(home), run_id, **options)
    finally:
        store.close()


def test_cli_exit_codes_and_json(baton_home: Path) -> None:
    chain = _seed_home(baton_home, "run-cli")
    runner = CliRunner()
    clean = runner.invoke(app, ["replay", "run-cli", "--from", chain[0].checkpoint_id, "--json"])
    assert clean.exit_code == 0, clean.output
    data = json.loads(clean.output)
    assert data["diverged"] is False and len(data["steps"]) == 6 and data["divergences"] == []

    table = runner.invoke(app, ["replay", "run-cli", "--from", "0"])
    assert table.exit_code == 0 and "no divergence" in table.output

    diverged = runner.invoke(app, ["replay", "run-cli", "--from", "0", "--release", "model-v8", "--json"])
    assert diverged.exit_code == 1
    assert {d["field"] for d in json.loads(diverged.output)["divergences"]} >= {"candidate_hash", "evidence_binding"}

    assert runner.invoke(app, ["replay", "run-cli", "--from", "99"]).exit_code == 2
    assert runner.invoke(app, ["replay", "run-cli", "--from", "0", "--release", "model-v99"]).exit_code == 2
