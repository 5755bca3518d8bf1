"""Entry point of the checkpoint sub-benchmark: run the legs, then print and write the report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from baton.bench import report
from baton.bench.checkpoint_bench import DEFAULT_STEPS, System, leg_count, run_checkpoint_bench, select_systems
from baton.bench.machine import describe


def command_line(steps: Sequence[int], systems: Sequence[System], out: Path | None, repeat: int = 1) -> str:
    words = ["baton", "bench", "checkpoint", "--steps", ",".join(str(n) for n in steps)]
    if repeat != 1:
        words += ["--repeat", str(repeat)]
    if tuple(systems) != tuple(select_systems(None)):
        words += ["--systems", ",".join(s.key for s in systems)]
    if out is not None:
        words += ["--out", str(out)]
    return " ".join(words)


def main(
    *,
    steps: Sequence[int] = DEFAULT_STEPS,
    systems: str | Sequence[str] | None = None,
    out: Path | None = None,
    repeat: int = 1,
    as_json: bool = False,
    workdir: Path | None = None,
    console: Console | None = None,
) -> dict[str, Any]:
    """Run the checkpoint benchmark; print tables (unless `as_json`) and write files under `out`."""
    chosen = select_systems(systems)
    steps = tuple(sorted(set(steps)))
    err = Console(stderr=True)
    console = console or Console()
    with Progress(
        TextColumn("[bold]checkpoint[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("starting", total=leg_count(steps, chosen, repeat))

        started = [0]

        def tick(description: str) -> None:
            """Called as each leg starts: the previous one is done."""
            progress.update(task, description=description, completed=started[0])
            started[0] += 1

        run = run_checkpoint_bench(steps, chosen, workdir=workdir, repeat=repeat, progress=tick)
        progress.update(task, completed=started[0])
    machine = describe(workdir)
    command = command_line(steps, chosen, out, repeat)
    document = report.to_json(run, machine, command)
    if not as_json:
        report.print_tables(run, console)
    if out is not None:
        for path in report.write_outputs(run, machine, command, out):
            err.print(f"wrote {path}")
    return document
