"""`baton checkpoint export|import|show|verify` through Typer's test runner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from baton.cli import checkpoint_cmd
from baton.models import PortabilityConstraints
from baton.placements import dump_placements
from baton.store.factory import open_blobs, open_store

from builders.checkpoints import seed_run
from builders.records import parts, placement

runner = CliRunner()


@pytest.fixture
def app() -> typer.Typer:
    cli = typer.Typer()
    checkpoint_cmd.register(cli)

    @cli.command("noop")
    def noop() -> None:  # a second command keeps `checkpoint` a sub-command
        """Nothing."""

    return cli


@pytest.fixture
def seeded(baton_home: Path) -> Iterator[Path]:
    store = open_store(None, baton_home)
    try:
        seed_run(store, open_blobs(baton_home), 3)
    finally:
        store.close()
    yield baton_home


def test_export_then_import_into_another_home(app: typer.Typer, seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run-1.bundle"
    result = runner.invoke(app, ["checkpoint", "export", "run-1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "3 checkpoint(s)" in result.output and out.is_file()

    other = tmp_path / "other-home"
    monkeypatch.setenv("BATON_HOME", str(other))
    result = runner.invoke(app, ["checkpoint", "import", str(out)])
    assert result.exit_code == 0, result.output
    assert "3 new checkpoint(s)" in result.output

    again = runner.invoke(app, ["checkpoint", "import", str(out)])
    assert again.exit_code == 0 and "0 new checkpoint(s), 3 already present" in again.output

    shown = runner.invoke(app, ["checkpoint", "show", "run-1/000002", "--json"])
    assert shown.exit_code == 0
    assert json.loads(shown.output)["checkpoint_id"] == "run-1/000002"

    table = runner.invoke(app, ["checkpoint", "show", "run-1/000002"])
    assert table.exit_code == 0 and "VERIFIED" in table.output

    verified = runner.invoke(app, ["checkpoint", "verify", "run-1/000002"])
    assert verified.exit_code == 0, verified.output
    assert "verified" in verified.output and "3 observation(s)" in verified.output


def test_import_with_a_named_placement_from_a_catalog(app: typer.Typer, baton_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(None, baton_home)
    try:
        seed_run(store, open_blobs(baton_home), 2, base=parts(constraints=PortabilityConstraints(portable_to_regions=("eu-west",))))
    finally:
        store.close()
    out = tmp_path / "b.bundle"
    assert runner.invoke(app, ["checkpoint", "export", "run-1", "--out", str(out)]).exit_code == 0
    catalog = tmp_path / "placements.json"
    dump_placements([placement("eu-2"), placement("us-1", region="us-east")], catalog)
    monkeypatch.setenv("BATON_HOME", str(tmp_path / "other"))

    unplaced = runner.invoke(app, ["checkpoint", "import", str(out)])
    assert unplaced.exit_code == 1 and "placement_unspecified" in unplaced.output
    wrong = runner.invoke(app, ["checkpoint", "import", str(out), "--placement", "us-1", "--catalog", str(catalog)])
    assert wrong.exit_code == 1
    assert "BundlePlacementError" in wrong.output and "region_not_allowed" in wrong.output
    assert "nothing was imported" in wrong.output
    unknown = runner.invoke(app, ["checkpoint", "import", str(out), "--placement", "mars-1", "--catalog", str(catalog)])
    assert unknown.exit_code == 1 and "unknown placement 'mars-1'" in unknown.output
    right = runner.invoke(app, ["checkpoint", "import", str(out), "--placement", "eu-2", "--catalog", str(catalog)])
    assert right.exit_code == 0, right.output


def test_import_of_a_tampered_bundle_fails_with_the_specific_error(app: typer.Typer, seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run-1.bundle"
    assert runner.invoke(app, ["checkpoint", "export", "run-1", "--out", str(out)]).exit_code == 0
    out.write_bytes(out.read_bytes()[:3000])
    other = tmp_path / "other-home"
    monkeypatch.setenv("BATON_HOME", str(other))
    result = runner.invoke(app, ["checkpoint", "import", str(out)])
    assert result.exit_code == 1
    assert "BundleTruncatedError" in result.output
    store = open_store(None, other)
    try:
        assert store.list_runs() == []
    finally:
        store.close()


def test_verify_fails_on_a_corrupt_blob(app: typer.Typer, seeded: Path) -> None:
    store = open_store(None, seeded)
    try:
        checkpoint = store.get_checkpoint("run-1/000001")
    finally:
        store.close()
    digest = checkpoint.task_state_ref.removeprefix("sha256:")
    path = seeded / "blobs" / digest[:2] / digest[2:]
    path.write_bytes(path.read_bytes() + b" ")
    result = runner.invoke(app, ["checkpoint", "verify", "run-1/000001"])
    assert result.exit_code == 1
    assert "CheckpointIntegrityError" in result.output and "corrupt" in result.output


def test_unknown_ids_exit_1(app: typer.Typer, baton_home: Path, tmp_path: Path) -> None:
    for args in (
        ["checkpoint", "show", "run-9/000000"],
        ["checkpoint", "verify", "run-9/000000"],
        ["checkpoint", "export", "run-9", "--out", str(tmp_path / "x.bundle")],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, args
        assert "RecordNotFoundError" in result.output
