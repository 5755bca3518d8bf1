"""`baton placement ...` and `baton release ...` against a real store on each backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.catalog.changes import CATALOG_EVENT_RUN_ID, current_placements, current_releases
from baton.catalog.releases import OLDER_RELEASE, RELEASES
from baton.cli import app
from baton.store.base import SqlStore

from builders.fixtures import Backend

V7 = RELEASES[OLDER_RELEASE]


@pytest.fixture
def cli(backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("BATON_DATABASE_URL", backend.url)
    monkeypatch.setenv("BATON_HOME", str(tmp_path / "home"))
    return CliRunner()


def _catalog_events(store: SqlStore) -> list[int]:
    return [seq for seq, _ in store.list_events(run_id=CATALOG_EVENT_RUN_ID)]


def test_placement_list_shows_the_seeded_catalog(cli: CliRunner, store: SqlStore) -> None:
    result = cli.invoke(app, ["placement", "list", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    assert [entry["name"] for entry in listed] == [p.name for p in current_placements(store)]
    assert all(entry["environment_id"].startswith("sha256:") for entry in listed)


def test_placement_update_appends_one_event(cli: CliRunner, store: SqlStore) -> None:
    current_placements(store)  # seed
    before = _catalog_events(store)
    result = cli.invoke(app, ["placement", "update", "cloud-eu", "--image", "baton-worker:2.0", "--tool",
                              "python=3.12", "--reason", "upgrade", "--json"])
    assert result.exit_code == 0, result.output
    change = json.loads(result.output)
    assert _catalog_events(store) == before + [change["seq"]]
    assert change["environment_id_before"] != change["environment_id_after"] and change["reason"] == "upgrade"
    placement = next(p for p in current_placements(store) if p.name == "cloud-eu")
    assert placement.environment.runtime_image == "baton-worker:2.0"
    assert placement.environment.environment_id == change["environment_id_after"]


def test_release_withdraw_publish_and_new_manifest(cli: CliRunner, store: SqlStore, tmp_path: Path) -> None:
    current_placements(store)
    start = _catalog_events(store)
    assert cli.invoke(app, ["release", "withdraw", V7.release_id]).exit_code == 0
    assert cli.invoke(app, ["release", "publish", V7.release_id]).exit_code == 0
    manifest = tmp_path / "v9.json"
    manifest.write_text(V7.model_copy(update={"prompt_bundle": "p4"}).model_dump_json())
    result = cli.invoke(app, ["release", "publish", "--manifest", str(manifest), "--name", "model-v9",
                              "--placement", "cloud-us", "--json"])
    assert result.exit_code == 0, result.output
    assert len(_catalog_events(store)) == len(start) + 3
    released = {r.name: r for r in current_releases(store)}
    assert released["model-v9"].offered_by == ("cloud-us",) and released[OLDER_RELEASE].published
    listed = json.loads(cli.invoke(app, ["release", "list", "--json"]).output)
    assert {entry["name"]: entry["state"] for entry in listed}["model-v9"] == "published"


@pytest.mark.parametrize("argv, message", [
    (["placement", "update", "mars-1", "--image", "x"], "unknown placement 'mars-1'"),
    (["placement", "update", "cloud-eu", "--tool", "python"], "TOOL=VERSION"),
    (["placement", "update", "cloud-eu"], "at least one field"),
    (["release", "withdraw", "model-v7"], "not a content ref"),
    (["release", "withdraw", "sha256:" + "1" * 64], "unknown release"),
    (["release", "publish", "sha256:" + "1" * 64], "unknown release"),
    (["release", "publish"], "RELEASE_ID or --manifest"),
])
def test_bad_input_exits_2_and_writes_nothing(cli: CliRunner, store: SqlStore, argv: list[str], message: str) -> None:
    current_placements(store)
    before = store.list_events()
    result = cli.invoke(app, argv)
    assert result.exit_code == 2 and message in result.output
    assert store.list_events() == before
