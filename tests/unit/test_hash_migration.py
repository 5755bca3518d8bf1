"""Migrating a store written by the old hashing (the committed fixture) to the canonical form (schema 3)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.catalog.releases import RELEASES
from baton.checkpoints import restore
from baton.cli import app
from baton.errors import IntegrityError
from baton.hash_migration import lineage_of, migrate_store
from baton.identity_legacy import legacy_ref_of
from baton.store.blobs import BlobStore
from baton.store.sqlite import SqliteStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_store_v2"


def _digest_tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def legacy_home(tmp_path: Path) -> Path:
    home = tmp_path / "legacy"
    shutil.copytree(FIXTURE, home)
    return home


def _migrate(source_home: Path, dest_home: Path) -> list:
    # The source is only read: not even a newer schema migration is applied to it.
    source, dest = SqliteStore(source_home / "baton.db", migrate=False), SqliteStore(dest_home / "baton.db")
    try:
        return migrate_store(source, BlobStore(source_home / "blobs"), dest, BlobStore(dest_home / "blobs"),
                             known=RELEASES.values())
    finally:
        source.close()
        dest.close()


def test_the_fixture_is_a_schema_2_store_that_still_loads_and_restores(legacy_home: Path) -> None:
    store, blobs = SqliteStore(legacy_home / "baton.db"), BlobStore(legacy_home / "blobs")
    try:
        runs = store.list_runs()
        assert len(runs) == 2
        for run in runs:
            for checkpoint in store.list_checkpoints(run.run_id):
                assert checkpoint.schema_version == "2"
                assert checkpoint.checkpoint_hash == legacy_ref_of(
                    checkpoint.model_dump(mode="json", exclude={"checkpoint_hash", "migration_ref"}))
                restore(blobs, checkpoint)
    finally:
        store.close()


def test_every_migrated_checkpoint_verifies_with_its_lineage(legacy_home: Path, tmp_path: Path) -> None:
    before = _digest_tree(legacy_home)
    reports = _migrate(legacy_home, tmp_path / "new")
    assert _digest_tree(legacy_home) == before  # originals untouched (rows and blobs)
    source, dest = SqliteStore(legacy_home / "baton.db"), SqliteStore(tmp_path / "new" / "baton.db")
    old_blobs, new_blobs = BlobStore(legacy_home / "blobs"), BlobStore(tmp_path / "new" / "blobs")
    try:
        assert {r.run_id for r in reports} == {r.run_id for r in source.list_runs()}
        for report in reports:
            originals = source.list_checkpoints(report.run_id)
            migrated = dest.list_checkpoints(report.run_id)
            assert len(migrated) == len(originals) == len(report.hashes)
            for old, new in zip(originals, migrated, strict=True):
                assert new.schema_version == "3" and new.migrated_from_hash == old.checkpoint_hash
                assert new.checkpoint_hash == new.content_hash() != old.checkpoint_hash
                lineage = lineage_of(new, new_blobs)
                assert lineage.original_checkpoint_hash == old.checkpoint_hash
                renamed = {pair.original: pair.migrated for pair in lineage.parts}
                for field in ("release_id", "environment_id", "placement_ref", "task_state_ref", "budget_ledger_ref",
                              "authority_context_ref", "operation_ledger_ref", "observation_manifest_ref"):
                    assert renamed[getattr(old, field)] == getattr(new, field)
                for pair in lineage.parts:  # the originals stay readable beside the new parts
                    assert new_blobs.get(pair.original) == old_blobs.get(pair.original)
                was, now = restore(old_blobs, old), restore(new_blobs, new)
                assert now.parts.budget == was.parts.budget
                assert now.parts.authority == was.parts.authority
                assert now.parts.state.task == was.parts.state.task
                assert [o.content_ref for o in now.observations] == [o.content_ref for o in was.observations]
                assert [c.artifact_hash for c in now.parts.candidates] == [c.artifact_hash for c in was.parts.candidates]
                assert now.parts.release.release_id == new.release_id
            for parent, child in zip(migrated, migrated[1:]):
                assert child.parent_checkpoint_hash == parent.checkpoint_hash
            assert dest.get_run(report.run_id).release_id == migrated[0].release_id
            # Decimal("2.00") in the old budget was hashed as "2.00"; the canonical form says "2".
            assert originals[0].budget_ledger_ref != migrated[0].budget_ledger_ref
    finally:
        source.close()
        dest.close()


def test_migration_is_deterministic(legacy_home: Path, tmp_path: Path) -> None:
    first = _migrate(legacy_home, tmp_path / "a")
    second = _migrate(legacy_home, tmp_path / "b")
    assert first == second
    assert sorted(_digest_tree(tmp_path / "a" / "blobs").items()) == sorted(_digest_tree(tmp_path / "b" / "blobs").items())


def test_a_tampered_original_is_refused_not_migrated(legacy_home: Path, tmp_path: Path) -> None:
    store = SqliteStore(legacy_home / "baton.db")
    try:
        budget_ref = store.list_checkpoints("legacy-scripted")[0].budget_ledger_ref
    finally:
        store.close()
    path = legacy_home / "blobs" / budget_ref[7:9] / budget_ref[9:]
    path.write_bytes(path.read_bytes().replace(b'"2.00"', b'"9.00"'))
    with pytest.raises(IntegrityError):
        _migrate(legacy_home, tmp_path / "new")


def test_cli_migrate_writes_a_store_that_verifies(legacy_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    monkeypatch.setenv("BATON_HOME", str(legacy_home))
    monkeypatch.delenv("BATON_DATABASE_URL", raising=False)
    result = runner.invoke(app, ["checkpoint", "migrate", "--to", str(tmp_path / "new")])
    assert result.exit_code == 0, result.output
    assert "re-sealed" in result.output
    again = runner.invoke(app, ["checkpoint", "migrate", "--to", str(tmp_path / "new")])
    assert again.exit_code == 1 and "already holds a store" in " ".join(again.output.split())
    monkeypatch.setenv("BATON_HOME", str(tmp_path / "new"))
    verified = runner.invoke(app, ["checkpoint", "verify", "legacy-scripted/000002"])
    assert verified.exit_code == 0 and "verified" in verified.output, verified.output
