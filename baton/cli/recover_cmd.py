"""`baton recover`: finish or undo every move left half done (`baton.handoff.recovery`), outside the fleet loop."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Optional

import typer

from baton.errors import RecordNotFoundError
from baton.fencing import FenceAware
from baton.handoff.recovery import (
    DEFAULT_PREPARE_DEADLINE_S,
    DEFAULT_RESERVATION_TTL_S,
    Recovery,
    find_half_done,
    recover,
)
from baton.store.factory import baton_home, open_store


def _fence_targets(home: Path, stack: ExitStack, timeout_s: float) -> tuple[list[FenceAware], str]:
    """Clients of the home's deploy and corpus services, if they publish a port; else none (and why)."""
    from baton.runtime.worker import connect_targets

    try:
        deploy, corpus = connect_targets(home, timeout_s=timeout_s)
    except (FileNotFoundError, ValueError) as exc:
        return [], f"targets not fenced (no running target services under {home}: {exc})"
    stack.callback(deploy.close)
    stack.callback(corpus.close)
    return [deploy, corpus], "targets fenced at every new epoch"


def _row(recovery: Recovery) -> dict[str, object]:
    move = recovery.move
    return {"run_id": move.run_id, "stage": move.stage.value, "epoch_before": move.epoch,
            "epoch_after": recovery.epoch_after, "owner_before": move.owner, "placement": move.placement,
            "request_seq": move.request_seq, "action": recovery.action.value, "detail": recovery.detail}


def register(app: typer.Typer) -> None:
    @app.command("recover")
    def recover_cmd(
        home: Optional[Path] = typer.Option(None, "--home", help="BATON_HOME (default: $BATON_HOME or ./.baton)."),
        database_url: Optional[str] = typer.Option(None, "--database-url",
                                                   help="postgresql://... (default: $BATON_DATABASE_URL or SQLite)."),
        run: list[str] = typer.Option([], "--run", help="Only this run (repeatable)."),
        prepare_deadline: float = typer.Option(DEFAULT_PREPARE_DEADLINE_S, "--prepare-deadline", min=0.0,
                                               help="Seconds a handoff request may stay unanswered before it is undone."),
        reservation_ttl: float = typer.Option(DEFAULT_RESERVATION_TTL_S, "--reservation-ttl", min=0.1,
                                              help="Seconds a renewed reservation lasts."),
        fence: bool = typer.Option(True, "--fence/--no-fence", help="Fence the home's target services at new epochs."),
        dry_run: bool = typer.Option(False, "--dry-run", help="List the half-done moves; change nothing."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object per line."),
    ) -> None:
        """Find moves left half done (prepared, committed, adopted) and finish or undo each, recording events."""
        where = home or baton_home()
        store = open_store(database_url, where)
        with ExitStack() as stack:
            stack.callback(store.close)
            try:
                for run_id in run:
                    store.get_run(run_id)
            except RecordNotFoundError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(code=2) from exc
            run_ids = run or None
            if dry_run:
                for move in find_half_done(store, run_ids=run_ids, prepare_deadline_s=prepare_deadline):
                    line = {"run_id": move.run_id, "stage": move.stage.value, "epoch": move.epoch,
                            "owner": move.owner, "placement": move.placement, "request_seq": move.request_seq}
                    typer.echo(json.dumps(line) if as_json else
                               f"{move.run_id}: {move.stage.value} at epoch {move.epoch} (owner {move.owner})")
                return
            targets, fencing = _fence_targets(where, stack, timeout_s=5.0) if fence else ([], "targets not fenced")
            done = recover(store, run_ids=run_ids, fence_targets=targets, prepare_deadline_s=prepare_deadline,
                           reservation_ttl_s=reservation_ttl)
        for recovery in done:
            row = _row(recovery)
            typer.echo(json.dumps(row) if as_json else
                       f"{row['run_id']}: {row['stage']} -> {row['action']} (epoch {row['epoch_before']} -> "
                       f"{row['epoch_after']}): {row['detail']}")
        if not as_json:
            typer.echo(f"{len(done)} half-done move(s) handled; {fencing}")
