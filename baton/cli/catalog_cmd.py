"""`baton placement list|update` and `baton release list|publish|withdraw`: the catalog in the store.

Every change goes through `baton.catalog.changes`, so it appends exactly one
event to Baton's event log (which the platform's sensors read); a refused
change prints why and exits with code 2, having written nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from baton.catalog import changes
from baton.catalog.changes import CatalogChange
from baton.errors import BatonError
from baton.models import AuthorityLevel, BehavioralRelease
from baton.store.base import SqlStore
from baton.store.factory import baton_home, open_store

CLI_ACTOR = "cli"


@contextmanager
def _store() -> Iterator[SqlStore]:
    """The store of BATON_DATABASE_URL / BATON_HOME; a refused change becomes exit code 2."""
    store = open_store(None, baton_home())
    try:
        yield store
    except (BatonError, ValidationError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    finally:
        store.close()


def _short(ref: str | None) -> str:
    return "-" if ref is None else ref[:19]


def _change_json(change: CatalogChange) -> dict[str, Any]:
    return {
        "seq": change.seq, "kind": change.kind.value, "at": change.at.isoformat(), "placement": change.placement,
        "release_id": change.release_id, "release_name": change.release_name,
        "environment_id_before": change.environment_id_before, "environment_id_after": change.environment_id_after,
        "placements": list(change.placements), "reason": change.reason, "actor": change.actor,
    }


def _print_change(change: CatalogChange, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(_change_json(change), indent=2))
        return
    subject = change.placement or f"{change.release_name} ({change.release_id})"
    line = f"event {change.seq}: {change.kind.value} {subject}"
    if change.environment_id_before != change.environment_id_after:
        line += f"; environment {_short(change.environment_id_before)} -> {_short(change.environment_id_after)}"
    if change.kind is not changes.CatalogChangeKind.PLACEMENT_UPDATED:
        line += f"; placements {', '.join(change.placements) or '-'}"
    typer.echo(line)


def _tool_versions(entries: list[str]) -> dict[str, str] | None:
    if not entries:
        return None
    parsed = {}
    for entry in entries:
        tool, sep, version = entry.partition("=")
        if not sep or not tool or not version:
            typer.echo(f"error: --tool takes TOOL=VERSION, got {entry!r}", err=True)
            raise typer.Exit(code=2)
        parsed[tool] = version
    return parsed


def _placement_commands() -> typer.Typer:
    app = typer.Typer(help="Placements and their environment identity, as the store holds them.", no_args_is_help=True)

    @app.command("list")
    def list_placements(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Every placement: region, provider, ceiling, runtime image, environment id and the releases it offers."""
        with _store() as store:
            placements = changes.current_placements(store)
            names = {release.release_id: release.name for release in changes.current_releases(store)}
        if as_json:
            typer.echo(json.dumps([
                {**p.model_dump(mode="json"), "environment_id": p.environment.environment_id} for p in placements
            ], indent=2))
            return
        table = Table(show_header=True, header_style="bold", box=None)
        for column in ("name", "region", "provider", "accelerator", "ceiling", "image", "environment", "releases"):
            table.add_column(column)
        for p in placements:
            table.add_row(p.name, p.region, p.provider, p.accelerator, p.authority_ceiling.value,
                          p.environment.runtime_image, _short(p.environment.environment_id),
                          ", ".join(names.get(r, r) for r in p.supported_release_ids) or "-")
        Console(width=max(Console().width, 140)).print(table)

    @app.command("update")
    def update(
        name: str = typer.Argument(..., help="The placement to change."),
        region: str | None = typer.Option(None, help="New region (placement and environment)."),
        provider: str | None = typer.Option(None, help="New provider (placement and environment)."),
        image: str | None = typer.Option(None, "--image", help="New runtime image."),
        tool: list[str] = typer.Option([], "--tool", help="TOOL=VERSION, repeatable; merged into the tool versions."),
        ceiling: AuthorityLevel | None = typer.Option(None, "--ceiling", help="New authority ceiling."),
        accelerator: str | None = typer.Option(None, help="New accelerator (e.g. gpu-h100, none)."),
        reason: str | None = typer.Option(None, help="Why; recorded in the event."),
        as_json: bool = typer.Option(False, "--json", help="Print the change as JSON."),
    ) -> None:
        """Change a placement (one event); its environment id moves when region, provider, image or tools do."""
        tools = _tool_versions(tool)
        with _store() as store:
            change = changes.update_placement(store, name, region=region, provider=provider, runtime_image=image,
                                              tool_versions=tools, authority_ceiling=ceiling, accelerator=accelerator,
                                              actor=CLI_ACTOR, reason=reason)
        _print_change(change, as_json)

    return app


def _release_commands() -> typer.Typer:
    app = typer.Typer(help="Behavioral releases: published, withdrawn, and where offered.", no_args_is_help=True)

    @app.command("list")
    def list_releases(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Every release the catalog knows: name, id, state and the placements that offer it."""
        with _store() as store:
            releases = changes.current_releases(store)
        if as_json:
            typer.echo(json.dumps([
                {"release_id": r.release_id, "name": r.name, "state": r.state.value, "offered_by": list(r.offered_by),
                 "listed_by": list(r.listed_by), "changed_seq": r.changed_seq, "manifest": r.manifest.model_dump()}
                for r in releases
            ], indent=2))
            return
        table = Table(show_header=True, header_style="bold", box=None)
        for column in ("name", "release id", "state", "model", "offered by", "changed at seq"):
            table.add_column(column, no_wrap=column == "release id")
        for r in releases:
            table.add_row(r.name, r.release_id, r.state.value, r.manifest.model, ", ".join(r.offered_by) or "-",
                          str(r.changed_seq))
        Console(width=max(Console().width, 200)).print(table)

    @app.command("publish")
    def publish(
        release_id: str | None = typer.Argument(None, help="A known release's id (publish again, or offer on more placements)."),
        manifest: Path | None = typer.Option(None, "--manifest", exists=True, dir_okay=False,
                                             help="JSON file of a new release manifest."),
        name: str | None = typer.Option(None, help="Catalog name of a new release."),
        placement: list[str] = typer.Option([], "--placement", help="Placement to offer it on, repeatable."),
        reason: str | None = typer.Option(None, help="Why; recorded in the event."),
        as_json: bool = typer.Option(False, "--json", help="Print the change as JSON."),
    ) -> None:
        """Publish a release (one event): a new manifest (--manifest, --name), or a known id."""
        if (release_id is None) == (manifest is None):
            typer.echo("error: give a RELEASE_ID or --manifest FILE, not both or neither", err=True)
            raise typer.Exit(code=2)
        with _store() as store:
            release: BehavioralRelease | str
            if manifest is not None:
                release = BehavioralRelease.model_validate_json(manifest.read_bytes())
            else:
                assert release_id is not None
                release = release_id
            change = changes.publish_release(store, release, name=name, placements=placement, actor=CLI_ACTOR,
                                             reason=reason)
        _print_change(change, as_json)

    @app.command("withdraw")
    def withdraw(
        release_id: str = typer.Argument(..., help="The release's id (sha256:...; see `baton release list`)."),
        reason: str | None = typer.Option(None, help="Why; recorded in the event."),
        as_json: bool = typer.Option(False, "--json", help="Print the change as JSON."),
    ) -> None:
        """Withdraw a release (one event): no placement offers it any more."""
        with _store() as store:
            change = changes.withdraw_release(store, release_id, actor=CLI_ACTOR, reason=reason)
        _print_change(change, as_json)

    return app


def register(app: typer.Typer) -> None:
    app.add_typer(_placement_commands(), name="placement")
    app.add_typer(_release_commands(), name="release")
