"""`baton inspect` tells a run's handoff as a story, one sentence per event, in protocol order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli import app
from baton.handoff import HandoffCoordinator, HandoffRequest, prepare_resume
from baton.inspect import story
from baton.models import Boundary, EventType
from baton.store.blobs import BlobStore
from baton.store.factory import open_store

from builders.handoff import SOURCE, V8, place, seed_run


def test_story_of_an_aborted_then_committed_handoff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store("sqlite:///" + str((tmp_path / "baton.db").resolve()))
    blobs = BlobStore(tmp_path / "blobs")
    try:
        run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
        target = place("eu-b")
        refused = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, place("us-v8", releases=(V8,)))}
                                     ).handoff(HandoffRequest(run.run_id, "region capacity lost", source_alive=False))
        assert not refused.committed
        moved = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, target)}).handoff(
            HandoffRequest(run.run_id, "provider unhealthy", source_alive=False))
        assert moved.committed
        prepare_resume(store, blobs, run.run_id, placement=target, epoch=moved.target_epoch or 0)
        lines = story(store.list_events(run_id=run.run_id))
    finally:
        store.close()

    kinds = [line.event_type for line in lines]
    assert kinds.index(EventType.HANDOFF_ABORTED) < kinds.index(EventType.OWNERSHIP_TRANSFERRED)
    assert kinds.index(EventType.OWNERSHIP_TRANSFERRED) < kinds.index(EventType.RESUME_STARTED)
    text = {line.event_type: line.sentence for line in lines}
    assert "region capacity lost" in next(l.sentence for l in lines if l.event_type is EventType.HANDOFF_REQUESTED)
    assert text[EventType.OWNERSHIP_TRANSFERRED].startswith(f"Ownership moved from {SOURCE.name} to eu-b")
    assert "epoch" in text[EventType.OWNERSHIP_TRANSFERRED]
    assert text[EventType.HANDOFF_ABORTED].startswith("The handoff was aborted")
    assert all(b.offset_s >= a.offset_s for a, b in zip(lines, lines[1:]))

    monkeypatch.setenv("BATON_HOME", str(tmp_path))
    monkeypatch.delenv("BATON_DATABASE_URL", raising=False)
    shown = CliRunner().invoke(app, ["inspect", run.run_id])
    assert shown.exit_code == 0, shown.output
    assert "Ownership moved from" in shown.output and "aborted" in shown.output
    as_json = json.loads(CliRunner().invoke(app, ["inspect", run.run_id, "--json"]).output)
    assert as_json["placement"] == "eu-b" and len(as_json["story"]) == len(lines)
    missing = CliRunner().invoke(app, ["inspect", "no-such-run"])
    assert missing.exit_code == 2
