"""`baton sim`: the protocol on a virtual clock under seeded faults, checked by independent oracles.

    baton sim --seeds 200 --faults 5            seeds 0..199, 5 faults each
    baton sim --seed 42                         replay one seed (prints its trail hash)
    baton sim --seed 42 --plan '[...]'          replay a seed with a given (e.g. shrunk) schedule
    baton sim --seeds 300 --ablate idempotency  with one protection removed: find, shrink and replay a failure
    baton sim --agree killed-after-seal         a sec.-27 case live and as its named plan: same verdict?
    baton sim --seeds 200 --runs deploy,research --strategy naive
                                                the same seeds' workload and faults run by a transcript-only
                                                control (naive or competent) instead of Baton, same oracles

Exit codes: 0 no violation; 1 some seed violated an invariant (without --ablate),
or, with --ablate, no seed caught the ablation; 2 bad input.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from baton.ablation import UnknownAblation, parse_ablations
from baton.models import RunKind
from baton.sim.faults import KINDS, FaultPlan
from baton.sim.runner import Summary, invariants_of, run_many, run_seed, shrink
from baton.sim.world import SimOutcome


def _outcome_json(outcome: SimOutcome) -> dict[str, Any]:
    return {
        "seed": outcome.seed, "ok": outcome.ok, "trail_hash": outcome.trail_hash, "steps": outcome.steps,
        "virtual_s": round(outcome.virtual_s, 3), "statuses": outcome.statuses,
        "fault_schedule": json.loads(outcome.plan.to_json()), "fired": [f.describe() for f in outcome.fired],
        "violations": outcome.violations, "errors": outcome.errors, "strategy": outcome.strategy,
        "not_applicable": [f.describe() for f in outcome.skipped],
    }


SIMULATED_KINDS = (RunKind.DEPLOY, RunKind.RESEARCH, RunKind.CODING, RunKind.BROWSER)


def _kinds(value: str) -> tuple[RunKind, ...]:
    try:
        kinds = tuple(RunKind(part.strip()) for part in value.split(",") if part.strip())
    except ValueError as exc:
        raise typer.BadParameter(f"{exc}; use deploy, research, coding and/or browser, comma-separated") from None
    unsupported = [kind.value for kind in kinds if kind not in SIMULATED_KINDS]
    if unsupported or not kinds:
        raise typer.BadParameter(f"the simulation runs deploy, research, coding and browser agents only, "
                                 f"not {unsupported or 'none'}")
    return kinds


def _replay(seed: int, faults: int, ablate: tuple[str, ...], plan: FaultPlan | None, kinds: tuple[RunKind, ...],
            as_json: bool, console: Console, strategy: str = "baton", await_stalled: bool = False) -> int:
    outcome = run_seed(seed, faults, ablate, plan=plan, kinds=kinds, strategy=strategy, await_stalled=await_stalled)
    if as_json:
        print(json.dumps(_outcome_json(outcome), indent=2, sort_keys=True))
    else:
        console.print(f"seed {seed}: {'[green]ok[/green]' if outcome.ok else '[red]VIOLATED[/red]'}  "
                      f"trail {outcome.trail_hash}  steps {outcome.steps}  virtual {outcome.virtual_s:.1f}s")
        console.print(f"schedule {outcome.plan.to_json()}")
        console.print(f"fired    {[f.describe() for f in outcome.fired]}")
        console.print(f"runs     {outcome.statuses}  ({outcome.strategy})")
        for line in outcome.violations:
            console.print(f"[red]{line}[/red]")
    return 0 if outcome.ok or ablate else 1


def _print_summary(summary: Summary, console: Console) -> None:
    table = Table(title="fault kinds")
    table.add_column("kind")
    table.add_column("scheduled", justify="right")
    table.add_column("fired", justify="right")
    for kind in KINDS:
        table.add_row(kind, str(summary.scheduled_counts.get(kind, 0)), str(summary.fault_counts.get(kind, 0)))
    console.print(table)
    console.print(f"{summary.seeds} seeds in {summary.seconds:.1f}s = {summary.seeds_per_s:.2f} seeds/s; "
                  f"runs {dict(summary.statuses)}; violating seeds {len(summary.failing)}")
    if summary.seeds_by_oracle:
        console.print(f"violating seeds by invariant {dict(sorted(summary.seeds_by_oracle.items()))}")
    if summary.skipped_counts:
        console.print(f"scheduled faults with no counterpart for the strategy {dict(summary.skipped_counts)}")


def _summary_json(summary: Summary) -> dict[str, Any]:
    return {
        "seeds": summary.seeds, "seconds": round(summary.seconds, 3), "seeds_per_s": round(summary.seeds_per_s, 3),
        "fault_kinds_scheduled": dict(summary.scheduled_counts), "fault_kinds_fired": dict(summary.fault_counts),
        "run_statuses": dict(summary.statuses), "violating_seeds": [o.seed for o in summary.failing],
        "violating_seed_count": len(summary.failing), "seeds_with_actor_errors": summary.errors, "steps": summary.steps,
        "violations_by_invariant": dict(sorted(summary.violations_by_oracle.items())),
        "violating_seeds_by_invariant": dict(sorted(summary.seeds_by_oracle.items())),
        "fault_kinds_not_applicable": dict(summary.skipped_counts),
    }


def sim(
    seeds: int = typer.Option(100, "--seeds", min=1, help="how many seeds to run (0..N-1 from --first)"),
    faults: int = typer.Option(5, "--faults", min=0, help="faults per seed"),
    seed: int | None = typer.Option(None, "--seed", help="replay this one seed"),
    first: int = typer.Option(0, "--first", min=0, help="first seed of a batch"),
    plan: str | None = typer.Option(None, "--plan", help="with --seed: this fault schedule (JSON) instead"),
    ablate: list[str] = typer.Option([], "--ablate", help="switch one protection off (baton.ablation names)"),
    kinds: str = typer.Option("deploy", "--runs", help="runs per world: deploy, research, coding, browser "
                              "(comma-separated; coding runs clone a real git repository and run real pytest, about "
                              "1 s of CPU each; browser runs drive an HTTP-level browser twin against the web application)"),
    jobs: int = typer.Option(1, "--jobs", min=1, help="processes to spread seeds over"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
    agree: str | None = typer.Option(None, "--agree", help="CASE[,CASE]: run these sec.-27 cases live and as their "
                                     "named sim plans (baton.sim.sec27_plans) and compare the verdicts"),
    strategy: str = typer.Option("baton", "--strategy", help="who runs the runs: baton, a transcript-only control, "
                                 "naive or competent (deploy and research runs), or a baseline run by Baton's machinery "
                                 "under another recovery policy, retry_same_placement, wait_same_pool, restart, "
                                 "restart_last_step, coarse_checkpoints or human_assisted "
                                 "(baton.sim.baseline_world); same workload, faults and oracles"),
    await_stalled: bool = typer.Option(False, "--await-stalled", help="keep each world running until its stalled "
                                       "workers woke and finished what they were doing (zombies judged too)"),
) -> None:
    """Run the unchanged protocol in simulated worlds and check DESIGN.md's invariants after each."""
    console = Console(stderr=as_json)
    try:
        ablations = tuple(sorted(parse_ablations(",".join(ablate)))) if ablate else ()
    except UnknownAblation as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    if agree is not None:
        from baton.sim_agreement import main as agreement

        raise typer.Exit(0 if all(row["agree"] for row in agreement([agree])) else 1)
    run_kinds = _kinds(kinds)
    from baton.sim.baseline_world import BASELINES, SIM_STRATEGIES
    from baton.sim.control_world import CONTROL_KINDS

    if strategy not in SIM_STRATEGIES:
        console.print(f"[red]unknown strategy {strategy!r}; use {', '.join(SIM_STRATEGIES)}[/red]")
        raise typer.Exit(2)
    if strategy != "baton" and ablations:
        console.print("[red]only baton's own strategy has protections to ablate[/red]")
        raise typer.Exit(2)
    if strategy not in ("baton", *BASELINES) and any(kind not in CONTROL_KINDS for kind in run_kinds):
        console.print("[red]a control runs deploy and research runs only[/red]")
        raise typer.Exit(2)
    schedule = None
    if plan is not None:
        if seed is None:
            console.print("[red]--plan replays one seed: give --seed too[/red]")
            raise typer.Exit(2)
        try:
            schedule = FaultPlan.from_json(plan)
        except ValueError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from None
    if seed is not None:
        raise typer.Exit(_replay(seed, faults, ablations, schedule, run_kinds, as_json, console, strategy,
                                 await_stalled))

    with Progress(TextColumn("sim"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]} seeds/s"),
                  TextColumn("{task.fields[bad]} violating"), TimeElapsedColumn(), console=console,
                  transient=as_json) as progress:
        task = progress.add_task("sim", total=seeds, rate="-", bad=0)
        import time

        started = time.perf_counter()
        bad = 0

        def tick(outcome: SimOutcome) -> None:
            nonlocal bad
            bad += not outcome.ok
            elapsed = time.perf_counter() - started
            done = progress.tasks[0].completed + 1
            progress.update(task, advance=1, rate=f"{done / elapsed:.1f}" if elapsed > 0 else "-", bad=bad)

        summary = run_many(range(first, first + seeds), faults, ablate=ablations, jobs=jobs, kinds=run_kinds,
                           stop_at_first_failure=bool(ablations), on_outcome=tick, strategy=strategy,
                           await_stalled=await_stalled)
    report = _summary_json(summary)
    if summary.failing:
        first_bad = summary.failing[0]
        shrunk, tries = shrink(first_bad.seed, first_bad.plan, ablate=ablations, kinds=run_kinds, strategy=strategy,
                               await_stalled=await_stalled)
        replays = [run_seed(first_bad.seed, 0, ablations, plan=shrunk, kinds=run_kinds, strategy=strategy,
                            await_stalled=await_stalled) for _ in range(2)]
        report["first_failure"] = {
            **_outcome_json(first_bad), "shrunk_schedule": json.loads(shrunk.to_json()), "shrink_replays": tries,
            "shrunk_violations": sorted(invariants_of(replays[0])),
            "replay_trail_hashes": [r.trail_hash for r in replays],
            "replay_identical": replays[0].trail_hash == replays[1].trail_hash,
            "replay": f"baton sim --seed {first_bad.seed} --plan '{shrunk.to_json()}'"
                      + "".join(f" --ablate {a}" for a in ablations)
                      + (f" --runs {','.join(k.value for k in run_kinds)}" if run_kinds != (RunKind.DEPLOY,) else "")
                      + (f" --strategy {strategy}" if strategy != "baton" else "")
                      + (" --await-stalled" if await_stalled else ""),
        }
    if as_json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        _print_summary(summary, console)
        failure = report.get("first_failure")
        if failure:
            console.print(f"[red]first violating seed {failure['seed']}[/red]: {failure['violations'][:3]}")
            console.print(f"shrunk schedule: {json.dumps(failure['shrunk_schedule'])} "
                          f"({failure['shrink_replays']} replays)")
            console.print(f"replay twice: {failure['replay_trail_hashes']} identical={failure['replay_identical']}")
            console.print(f"replay: {failure['replay']}")
    if ablations:
        raise typer.Exit(0 if summary.failing else 1)
    raise typer.Exit(1 if summary.failing else 0)


def register(app: typer.Typer) -> None:
    app.command("sim")(sim)
