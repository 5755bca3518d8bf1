"""`baton bench`: Baton measured side by side with LangGraph and DBOS.

Sub-benchmarks live in `baton.bench` (one module each) and are imported only
when run, so the rest of the CLI never needs the benchmark-only extra.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import typer


def _parse_steps(text: str) -> tuple[int, ...]:
    try:
        steps = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError as exc:
        raise typer.BadParameter(f"--steps takes comma-separated integers, not {text!r}") from exc
    if not steps or steps[0] < 1:
        raise typer.BadParameter("--steps needs at least one positive integer")
    return steps


def _emit_json(document: dict[str, Any]) -> None:
    from baton.bench.report import dump_json

    typer.echo(dump_json(document), nl=False)


def register(app: typer.Typer) -> None:
    bench = typer.Typer(
        name="bench",
        help="Benchmarks against the alternatives (needs the optional 'bench' extra of the baton package).",
        no_args_is_help=True,
    )

    @bench.command("checkpoint")
    def checkpoint(
        steps: str = typer.Option("50,100,200,400", "--steps", help="Trajectory lengths, comma-separated."),
        systems: str = typer.Option(
            "all",
            "--systems",
            help="Comma-separated system keys (e.g. baton-sqlite,langgraph-postgres), families "
            "(baton, langgraph, dbos) or backends (sqlite, postgres); 'all' for every system.",
        ),
        repeat: int = typer.Option(
            1, "--repeat", min=1, help="Run every leg this many times; report the run with the median time."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of tables."),
        out: Path | None = typer.Option(
            None, "--out", help="Directory (e.g. docs/) to write the JSON, the plots and benchmarks.md into."
        ),
        workdir: Path | None = typer.Option(None, "--workdir", help="Where the scratch directories go (default: $TMPDIR)."),
    ) -> None:
        """Checkpoint growth: bytes stored and ms per step, one 2 KB observation per step."""
        from baton.bench.checkpoint_bench import select_systems
        from baton.bench.run_checkpoint import main

        try:
            chosen = select_systems(systems)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        document = main(
            steps=_parse_steps(steps),
            systems=[s.key for s in chosen],
            out=out,
            repeat=repeat,
            as_json=as_json,
            workdir=workdir,
        )
        if as_json:
            _emit_json(document)

    @bench.command("checkpoint-profile")
    def checkpoint_profile(
        steps: int = typer.Option(400, "--steps", min=1, help="Trajectory length."),
        backend: str = typer.Option("sqlite", "--backend", help="sqlite or postgres."),
        blobs: str = typer.Option("files", "--blobs", help="files (the default backend) or sql (BATON_BLOBS=sql)."),
        out: Path | None = typer.Option(None, "--out", help="Directory (e.g. docs/) whose benchmarks.md gets the profile."),
    ) -> None:
        """Where Baton's checkpoint step spends its time (timers per phase, then cProfile)."""
        from rich.console import Console

        from baton.bench import report
        from baton.bench.checkpoint_profile import profile_baton

        if backend not in ("sqlite", "postgres"):
            raise typer.BadParameter("--backend is sqlite or postgres")
        if blobs not in ("files", "sql"):
            raise typer.BadParameter("--blobs is files or sql")
        profile = profile_baton(steps, backend, blobs)
        report.print_profile(profile, Console())
        if out is not None:
            command = f"baton bench checkpoint-profile --steps {steps} --backend {backend} --blobs {blobs} --out {out}"
            doc = out / "benchmarks.md"
            report.update_markdown(
                doc, f"checkpoint-profile-{backend}-{blobs}", report.profile_markdown(profile, command),
                f"Checkpoint step profile: Baton ({report.BLOB_NAMES[blobs]} blobs) on {report.BACKEND_NAMES[backend]}",
            )
            Console(stderr=True).print(f"wrote {doc}")

    @bench.command("all")
    def run_all(
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document keyed by sub-benchmark."),
        out: Path | None = typer.Option(None, "--out", help="Directory (e.g. docs/) to write every report into."),
    ) -> None:
        """Every available sub-benchmark with its defaults."""
        from baton.bench import SUBBENCHMARKS

        documents: dict[str, Any] = {}
        for name, module in SUBBENCHMARKS.items():
            documents[name] = importlib.import_module(module).main(out=out, as_json=as_json)
        if as_json:
            _emit_json(documents)

    app.add_typer(bench, name="bench")
