"""`baton checkpoint`: export and import portable bundles, show and verify checkpoints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from baton.bundle import export_run, reachable_refs
from baton.bundle_admission import import_bundle
from baton.catalog.changes import current_placements
from baton.checkpoints import restore
from baton.errors import BatonError
from baton.models import Placement
from baton.placements import load_placements, placement_named
from baton.store.base import SqlStore
from baton.store.blobs import Blobs, BlobStore
from baton.store.factory import baton_home, open_blobs, open_store

_console = Console()
_errors = Console(stderr=True)


@contextmanager
def _stores() -> Iterator[tuple[SqlStore, Blobs]]:
    home = baton_home()
    store = open_store(None, home)
    try:
        yield store, open_blobs(home, store)
    finally:
        store.close()


@contextmanager
def _refusal(action: str) -> Iterator[None]:
    """Turn a Baton error into one line on stderr and exit code 1."""
    try:
        yield
    except (BatonError, KeyError, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        _errors.print(f"[red]{action} failed[/red]: {type(exc).__name__}: {message}", markup=True, highlight=False)
        raise typer.Exit(code=1) from None


def _placement(store: SqlStore, name: str | None, catalog: Path | None) -> Placement | None:
    """The placement `name` from a catalog file, or else from the store's catalog."""
    if name is None:
        return None
    return placement_named(current_placements(store) if catalog is None else load_placements(catalog), name)


def register(app: typer.Typer) -> None:
    checkpoint_app = typer.Typer(
        name="checkpoint", help="Export, import, show and verify checkpoints.", no_args_is_help=True
    )
    app.add_typer(checkpoint_app, name="checkpoint")

    @checkpoint_app.command("export")
    def export_cmd(
        run_id: str = typer.Argument(..., help="The run to export."),
        out: Path = typer.Option(..., "--out", help="The bundle file to write."),
    ) -> None:
        """Write a run's checkpoints and every blob they reach to one bundle file."""
        with _refusal("export"), _stores() as (store, blobs):
            report = export_run(store, blobs, run_id, out)
        _console.print(
            f"exported run {report.run_id}: {len(report.checkpoint_ids)} checkpoint(s), "
            f"{report.blob_count} blob(s), {report.bundle_bytes} bytes -> {report.path}"
        )

    @checkpoint_app.command("import")
    def import_cmd(
        file: Path = typer.Argument(..., help="The bundle file to import."),
        placement: str | None = typer.Option(
            None, "--placement", help="Placement the run will live on; without it only unconstrained runs import."
        ),
        catalog: Path | None = typer.Option(None, "--catalog", help="Placement catalog JSON (default: the store's catalog)."),
        approvers: Path | None = typer.Option(
            None, "--approvers",
            help="Approvers' public keys (jwks.json); every approval in the bundle must verify under them. "
            "Default: BATON_HOME/approvers/jwks.json when it exists.",
        ),
    ) -> None:
        """Verify a bundle completely, then import it; a refused bundle imports nothing."""
        from baton.authority_keys import TrustedKeys

        with _refusal("import (nothing was imported)"), _stores() as (store, blobs):
            keys_file = approvers or baton_home() / "approvers" / "jwks.json"
            trusted = TrustedKeys.load(keys_file) if approvers is not None or keys_file.exists() else None
            report = import_bundle(store, blobs, file, placement=_placement(store, placement, catalog), approvers=trusted)
        _console.print(
            f"imported run {report.run_id}: {len(report.imported)} new checkpoint(s), "
            f"{len(report.already_present)} already present, {report.blobs_written} new blob(s)"
        )

    @checkpoint_app.command("show")
    def show_cmd(
        checkpoint_id: str = typer.Argument(..., help="e.g. run-1/000003"),
        as_json: bool = typer.Option(False, "--json", help="Print the checkpoint record as JSON."),
    ) -> None:
        """Print one checkpoint's fields."""
        with _refusal("show"), _stores() as (store, _blobs):
            checkpoint = store.get_checkpoint(checkpoint_id)
        if as_json:
            typer.echo(json.dumps(checkpoint.model_dump(mode="json"), indent=2, sort_keys=True))
            return
        table = Table(title=f"checkpoint {checkpoint.checkpoint_id}", show_header=False)
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for key, value in checkpoint.model_dump(mode="json").items():
            shown = ", ".join(map(str, value)) if isinstance(value, list) else json.dumps(value) if isinstance(value, dict) else str(value)
            table.add_row(key, shown)
        _console.print(table)

    @checkpoint_app.command("migrate")
    def migrate_cmd(
        to: Path = typer.Option(..., "--to", help="An empty BATON_HOME for the migrated store (SQLite + file blobs)."),
    ) -> None:
        """Migrate every checkpoint of this store to the current canonical form, into a new store.

        The store named by BATON_HOME / BATON_DATABASE_URL is only read. Each
        migrated checkpoint names its original (`migrated_from_hash`) and a
        lineage record of every part it renamed (`migration_ref`).
        """
        from baton.catalog.releases import RELEASES
        from baton.hash_migration import migrate_store
        from baton.store.sqlite import SqliteStore

        with _refusal("migrate (the source store is unchanged)"):
            if (to / "baton.db").exists() or (to / "blobs").exists():
                raise ValueError(f"{to} already holds a store; migrate into an empty directory")
            with _stores() as (store, blobs):
                dest = SqliteStore(to / "baton.db")
                try:
                    reports = migrate_store(store, blobs, dest, BlobStore(to / "blobs"), known=RELEASES.values())
                finally:
                    dest.close()
        for report in reports:
            changed = sum(1 for old, new in report.hashes if old != new)
            _console.print(f"run {report.run_id}: {len(report.hashes)} checkpoint(s), {changed} re-sealed, "
                           f"{report.blobs_copied} original blob(s) copied")
            for old, new in report.hashes:
                typer.echo(f"  {old} -> {new}")

    @checkpoint_app.command("verify")
    def verify_cmd(checkpoint_id: str = typer.Argument(..., help="e.g. run-1/000003")) -> None:
        """Restore a checkpoint and verify its hash and every blob it reaches."""
        with _refusal("verify"), _stores() as (store, blobs):
            checkpoint = store.get_checkpoint(checkpoint_id)
            restored = restore(blobs, checkpoint)
            refs = reachable_refs([checkpoint], blobs)
            for ref in sorted(refs):
                blobs.get(ref)
        _console.print(
            f"[green]verified[/green] {checkpoint.checkpoint_id} {checkpoint.checkpoint_hash}: "
            f"{len(refs)} blob(s), {len(restored.observations)} observation(s), "
            f"{len(restored.parts.candidates)} candidate(s), {len(restored.parts.evidence)} evidence record(s)"
        )
