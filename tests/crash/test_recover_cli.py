"""`baton recover` on bad input: a clear error, exit code 2, nothing written; a dry run changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from baton.cli import app
from baton.handoff import HandoffCoordinator, HandoffRequest, PreparedHandoff
from baton.models import Boundary, EventType
from baton.store.blobs import BlobStore
from baton.store.factory import open_store

from builders.handoff import PEER, SOURCE, events, seed_run

runner = CliRunner()


def test_unknown_run_and_bad_numbers_are_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    unknown = runner.invoke(app, ["recover", "--home", str(home), "--run", "no-such-run"])
    assert unknown.exit_code == 2 and "run 'no-such-run' is not in the store" in unknown.output
    negative = runner.invoke(app, ["recover", "--home", str(home), "--prepare-deadline", "-1"])
    assert negative.exit_code == 2 and "prepare-deadline" in negative.output
    nothing = runner.invoke(app, ["recover", "--home", str(home)])
    assert nothing.exit_code == 0 and "0 half-done move(s) handled" in nothing.output


def test_dry_run_lists_and_the_real_run_aborts_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    url = "sqlite:///" + str(home / "baton.db")
    store = open_store(url)
    blobs = BlobStore(home / "blobs")
    try:
        run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
        coordinator = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, PEER)}, quiesce_timeout_s=0.1)
        prepared = coordinator.prepare(HandoffRequest(run.run_id, "rebalance", source_alive=False))
        assert isinstance(prepared, PreparedHandoff)
        args = ["recover", "--home", str(home), "--database-url", url, "--prepare-deadline", "0", "--json"]
        listed = runner.invoke(app, [*args, "--dry-run"])
        assert listed.exit_code == 0, listed.output
        assert [json.loads(line)["stage"] for line in listed.output.splitlines()] == ["prepared"]
        assert events(store, run.run_id, EventType.HANDOFF_ABORTED) == []
        done = runner.invoke(app, args)
        assert done.exit_code == 0, done.output
        (row,) = [json.loads(line) for line in done.output.splitlines()]
        assert (row["run_id"], row["stage"], row["action"], row["request_seq"]) == (
            run.run_id, "prepared", "aborted", prepared.request_seq)
        assert runner.invoke(app, args).output.strip() == ""  # nothing left
        assert len(events(store, run.run_id, EventType.HANDOFF_ABORTED)) == 1
    finally:
        store.close()
