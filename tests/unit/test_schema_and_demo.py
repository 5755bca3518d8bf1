import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli import app
from baton.scripted_run import run_scripted_research
from baton.store.factory import open_blobs, open_store


def test_schema_command_writes_valid_json_schemas(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["schema", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    checkpoint = json.loads((tmp_path / "execution_checkpoint.schema.json").read_text())
    assert checkpoint["$schema"].endswith("2020-12/schema")
    assert "checkpoint_hash" in checkpoint["required"]
    assert checkpoint["properties"]["task_state_ref"]["type"] == "string"


@pytest.mark.parametrize("blobs_kind", ["files", "sql"])
def test_scripted_run_seals_and_reverifies_every_checkpoint(
    baton_home: Path, monkeypatch: pytest.MonkeyPatch, blobs_kind: str
) -> None:
    monkeypatch.setenv("BATON_BLOBS", blobs_kind)
    store = open_store(None, baton_home)
    try:
        steps = run_scripted_research(store, open_blobs(baton_home, store))
        assert [s.checkpoint.boundary.value for s in steps] == ["GENERATING", "CANDIDATE_READY", "VERIFIED"]
        assert all(s.verified_on_restore for s in steps)
        run = store.get_run(steps[0].checkpoint.run_id)
        assert run.status == "verified"
        chain = store.list_checkpoints(run.run_id)
        assert [c.parent_checkpoint_hash for c in chain[1:]] == [c.checkpoint_hash for c in chain[:-1]]
    finally:
        store.close()
