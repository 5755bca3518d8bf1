"""`baton bench`: Baton measured side by side with LangGraph and DBOS, and against the raw floor.

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


def _parse_levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError as exc:
        raise typer.BadParameter(f"--concurrency takes comma-separated integers, not {text!r}") from exc
    if not levels or levels[0] < 1:
        raise typer.BadParameter("--concurrency needs at least one positive integer")
    return levels


def _emit_json(document: dict[str, Any]) -> None:
    from baton.bench.report import dump_json

    typer.echo(dump_json(document), nl=False)


def _bound(kind: str, as_json: bool, **options: Any) -> None:
    """Run `baton.bench.run_bounds.<kind>` (sdk or gateway); its JSON on stdout with `as_json`."""
    from baton.bench import run_bounds

    document = getattr(run_bounds, kind)(as_json=as_json, **options)
    if as_json:
        _emit_json(document)


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
        blobs: str = typer.Option("files", "--blobs", help="files, sql, default (open_blobs) or sdk (the whole SDK boundary)."),
        out: Path | None = typer.Option(None, "--out", help="Directory (e.g. docs/) whose benchmarks.md gets the profile."),
    ) -> None:
        """Where Baton's checkpoint step spends its time (timers per phase, then cProfile)."""
        from rich.console import Console

        from baton.bench import report
        from baton.bench.checkpoint_profile import profile_baton

        if backend not in ("sqlite", "postgres"):
            raise typer.BadParameter("--backend is sqlite or postgres")
        if blobs not in ("files", "sql", "default", "sdk"):
            raise typer.BadParameter("--blobs is files, sql, default or sdk")
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

    @bench.command("sdk-bound")
    def sdk_bound(
        steps: int = typer.Option(400, "--steps", min=1, help="Trajectory length."),
        repeat: int = typer.Option(3, "--repeat", min=1, help="Rounds; each figure is the median over them."),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of tables."),
        out: Path | None = typer.Option(None, "--out", help="Directory (e.g. docs/) whose benchmarks.md gets the tables."),
        workdir: Path | None = typer.Option(None, "--workdir", help="Where the scratch directories go (default: $TMPDIR)."),
    ) -> None:
        """How fast the SQLite SDK boundary could be: its own SQL replayed with no Python, plus its secret scan."""
        _bound("sdk", as_json, steps=steps, repeat=repeat, out=out, workdir=workdir)

    @bench.command("gateway-bound")
    def gateway_bound(
        ops: int = typer.Option(1000, "--ops", min=1, help="Operations per leg."),
        repeat: int = typer.Option(3, "--repeat", min=1, help="Rounds; each figure is the median over them."),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of tables."),
        out: Path | None = typer.Option(None, "--out", help="Directory (e.g. docs/) whose benchmarks.md gets the tables."),
    ) -> None:
        """How fast the gateway could be: its statements replayed with no Python, plus its Ed25519 signatures."""
        _bound("gateway", as_json, ops=ops, repeat=repeat, out=out)

    @bench.command("handoff")
    def handoff(
        samples: int = typer.Option(200, "--samples", min=1, help="Handoffs measured per store (each of its own run)."),
        systems: str = typer.Option(
            "all", "--systems",
            help="Comma-separated stores: sqlite-files, sqlite-sqlblobs, postgres-files, postgres-sqlblobs, "
            "or a backend (sqlite, postgres); 'all' for every one.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of tables."),
        out: Path | None = typer.Option(None, "--out", help="Directory (e.g. docs/) to write the JSON and benchmarks.md into."),
        workdir: Path | None = typer.Option(None, "--workdir", help="Where the scratch directories go (default: $TMPDIR)."),
    ) -> None:
        """Handoff latency: prepare, commit and restore (p50, p99) without revalidation, SQLite and PostgreSQL."""
        from baton.bench.handoff_bench import select_systems as select_handoff
        from baton.bench.run_handoff import main

        try:
            chosen = select_handoff(systems)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        document = main(samples=samples, systems=[s.key for s in chosen], out=out, as_json=as_json, workdir=workdir)
        if as_json:
            _emit_json(document)

    @bench.command("gateway")
    def gateway(
        concurrency: str = typer.Option("1,4,8", "--concurrency", help="Worker process counts, comma-separated."),
        duration: float = typer.Option(5.0, "--duration", min=0.1, help="Seconds each round measures."),
        repeat: int = typer.Option(2, "--repeat", min=1, help="Rounds of each kind (gateway, floor) per level."),
        profile_ops: int = typer.Option(
            300, "--profile-ops", min=0, help="Mutations in the single-process step profile (0: no profile)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of tables."),
        out: Path | None = typer.Option(None, "--out", help="Directory (e.g. docs/) to write the JSON and benchmarks.md into."),
        workdir: Path | None = typer.Option(None, "--workdir", help="Where the scratch directories go (default: $TMPDIR)."),
        backend: str = typer.Option("postgresql", "--backend",
                                    help="postgresql (with the floor and report) or sqlite (gateway rounds only)."),
    ) -> None:
        """Gateway throughput: fenced mutations/s and latency with N worker processes, beside the floor on PostgreSQL."""
        from baton.bench.run_gateway import main

        if backend not in ("postgresql", "sqlite"):
            raise typer.BadParameter(f"backend must be postgresql or sqlite, not {backend!r}")
        if backend == "sqlite":
            from baton.bench.gateway_bench import run_sqlite_gateway_rounds

            rounds = run_sqlite_gateway_rounds(_parse_levels(concurrency), duration_s=duration, repeat=repeat,
                                               workdir=workdir)
            rows = [{"backend": "sqlite", "concurrency": r.concurrency, "round": r.repetition + 1, "ops": r.ops,
                     "mutations_per_s": round(r.throughput, 1), "p50_ms": round(r.p50_ms, 2),
                     "p99_ms": round(r.p99_ms, 2), "stale_attempts": r.stale_attempts,
                     "stale_accepted": r.stale_accepted + r.stale_effects + r.stale_in_store} for r in rounds]
            if as_json:
                _emit_json({"gateway_sqlite": rows})
            else:
                for row in rows:
                    typer.echo("  ".join(f"{k}={v}" for k, v in row.items()))
            return
        document = main(concurrency=_parse_levels(concurrency), duration_s=duration, repeat=repeat,
                        profile_ops=profile_ops, out=out, as_json=as_json, workdir=workdir)
        if as_json:
            _emit_json(document)

    @bench.command("langgraph")
    def langgraph(
        steps: str = typer.Option("50,400", "--steps", help="Trajectory lengths, comma-separated."),
        repeat: int = typer.Option(1, "--repeat", min=1, help="Run every leg this many times; report the median-time run."),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of tables."),
        out: Path | None = typer.Option(None, "--out", help="Directory (e.g. docs/) whose benchmarks.md gets the section."),
        workdir: Path | None = typer.Option(None, "--workdir", help="Where the scratch directories go (default: $TMPDIR)."),
    ) -> None:
        """BatonSaver against LangGraph's SqliteSaver, PostgresSaver and DeltaChannel: bytes and ms per step."""
        from baton.bench.langgraph_bench import main

        document = main(steps=_parse_steps(steps), out=out, as_json=as_json, workdir=workdir, repeat=repeat)
        if as_json:
            _emit_json(document)

    @bench.command("dagster")
    def dagster(
        runs: str = typer.Option("1000,10000", "--runs", help="Baton run counts to measure at, comma-separated."),
        samples: int = typer.Option(10, "--samples", min=1, help="Tick rounds, and timed requests per GraphQL query."),
        keep_finished: int = typer.Option(200, "--keep-finished", min=0, help="Finished runs kept as partitions."),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of tables."),
        out: Path | None = typer.Option(None, "--out", help="Directory (e.g. docs/) to write the JSON and benchmarks.md into."),
        workdir: Path | None = typer.Option(None, "--workdir", help="Where the scratch directories go (default: $TMPDIR)."),
        storage: str = typer.Option("sqlite", "--storage", help="Dagster storages, comma-separated: sqlite, postgres."),
        ticks_only: bool = typer.Option(False, "--ticks-only", help="Ticks and archiving only: no catch-up, GraphQL or daemon."),
        daemon_ticks: int = typer.Option(2, "--daemon-ticks", help="Ticks per sensor read from a real dagster-daemon (0: none)."),
        slow_queries: bool = typer.Option(False, "--slow-queries", help="Also time the stale status of every partition (slow)."),
        catch_up_budget: float | None = typer.Option(None, "--catch-up-budget", help="Seconds the catch-up may tick; the rest is fast-forwarded."),
        seeded_home: Path | None = typer.Option(None, "--seeded-home", help="Copy this Baton home, seeded earlier by the same plan, instead of seeding."),
        parallel_legs: bool = typer.Option(False, "--parallel-legs", help="Run the storages' legs at once."),
    ) -> None:
        """Dagster platform: sensor tick time, GraphQL latency and the archive step at N runs (a subprocess runs Dagster)."""
        from baton.bench.dagster_bench import Options, main

        try:
            options = Options(sizes=_parse_steps(runs), samples=samples, keep_finished=keep_finished,
                              storages=tuple(s.strip() for s in storage.split(",") if s.strip()),
                              ticks_only=ticks_only, daemon_ticks=daemon_ticks, slow_queries=slow_queries,
                              catch_up_budget_s=catch_up_budget,
                              seeded_home=seeded_home, parallel_legs=parallel_legs)
        except (ValueError, typer.BadParameter) as exc:
            raise typer.BadParameter(str(exc).replace("--steps", "--runs")) from exc
        document = main(options=options, out=out, as_json=as_json, workdir=workdir)
        if as_json:
            _emit_json(document)

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
