"""`baton bench langgraph`: the same LangGraph graph checkpointed by BatonSaver and by LangGraph's savers.

The graph is the checkpoint benchmark's (`ckpt_langgraph`): one node appends
one 2 KB observation per superstep to an `Annotated[list, operator.add]`
channel (LangGraph's `DeltaChannel` in the delta legs), saved after every
step with `durability="sync"`. Only the checkpointer differs. Bytes are what
stayed allocated on disk (the SQLite file after its WAL is folded back, or the
growth of a fresh PostgreSQL database); ms per step is the mean wall time from
one entry into the node to the next.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton import secret_scan
from baton.bench import ckpt_langgraph
from baton.bench.leg import LegInput, LegOutput
from baton.bench.measure import mean_ms, sqlite_footprint
from baton.bench.pg import NoPostgres, fresh_database, postgres_server
from baton.bench.trajectory import OBSERVATION_BYTES, Trajectory

DEFAULT_STEPS = (50, 400)
BYTES_TARGET = 3.0  # BatonSaver bytes / observation bytes at the longest run
THREAD = "bench-run"


def _baton_leg(backend: str, **options: Any) -> Callable[[LegInput], LegOutput]:
    def leg(inp: LegInput) -> LegOutput:
        from baton.integrations.langgraph import BatonSaver

        path = inp.workdir / "baton.db"
        target = path if backend == "sqlite" else inp.database_url
        assert target is not None
        with BatonSaver.from_conn_string(target, **options) as saver:
            seconds = ckpt_langgraph._run(saver, ckpt_langgraph.AppendState, inp.observations)
            _check_platform(saver)
        components = {"sqlite": sqlite_footprint(path)} if backend == "sqlite" else {}
        return LegOutput(step_seconds=seconds, components=components)

    return leg


# The observations are recorded evidence; scanning them as state is measured too ("scan all").
_EVIDENCE = {"evidence_channels": ("observations",)}


def _check_platform(saver: Any) -> None:
    """Every LangGraph save was sealed as a Baton checkpoint of the thread's run (or the leg is void)."""
    run_id = saver.run_id_for(THREAD)
    sealed = len(saver.store.list_checkpoints(run_id))
    saved = sum(1 for _ in saver.list({"configurable": {"thread_id": THREAD}}))
    if sealed != saved:
        raise RuntimeError(f"{saved} LangGraph checkpoints but {sealed} Baton checkpoints")


@dataclass(frozen=True)
class System:
    key: str
    name: str
    backend: str  # sqlite | postgres
    leg: Callable[[LegInput], LegOutput]


SYSTEMS: tuple[System, ...] = (
    System("baton-sqlite", "BatonSaver · SQLite (observations as evidence)", "sqlite", _baton_leg("sqlite", **_EVIDENCE)),
    System("baton-scanall-sqlite", "BatonSaver · SQLite (scan all channels)", "sqlite", _baton_leg("sqlite")),
    System("langgraph-sqlite", "LangGraph SqliteSaver", "sqlite", ckpt_langgraph.sqlite_leg),
    System("langgraph-delta-sqlite", "LangGraph SqliteSaver + DeltaChannel (beta)", "sqlite",
           ckpt_langgraph.delta_sqlite_leg),
    System("baton-postgres", "BatonSaver · PostgreSQL (observations as evidence)", "postgres",
           _baton_leg("postgres", **_EVIDENCE)),
    System("baton-scanall-postgres", "BatonSaver · PostgreSQL (scan all channels)", "postgres", _baton_leg("postgres")),
    System("langgraph-postgres", "LangGraph PostgresSaver", "postgres", ckpt_langgraph.postgres_leg),
    System("langgraph-delta-postgres", "LangGraph PostgresSaver + DeltaChannel (beta)", "postgres",
           ckpt_langgraph.delta_postgres_leg),
)


@dataclass(frozen=True)
class Result:
    system: System
    steps: int
    allocated_bytes: int
    ms_per_step: float

    @property
    def ratio(self) -> float:
        return self.allocated_bytes / (self.steps * OBSERVATION_BYTES)


def run(steps: Sequence[int] = DEFAULT_STEPS, workdir: Path | None = None,
        progress: Callable[[str], None] | None = None, repeat: int = 1) -> tuple[list[Result], list[str]]:
    """Every system at every length, `repeat` times (rounds interleaved); the median-time run of each.

    Returns (results, notes on what could not be measured).
    """
    samples: dict[tuple[str, int], list[Result]] = {}
    notes: list[str] = []
    trajectories = {n: Trajectory(n).materialize() for n in steps}  # generated before anything is timed
    root = Path(tempfile.mkdtemp(prefix="baton-bench-lg-", dir=workdir))
    try:
        with _maybe_postgres(notes) as server_url:
            for n, round_no, system in ((n, r, s) for n in steps for r in range(repeat) for s in SYSTEMS):
                observations = trajectories[n]
                if progress:
                    progress(f"{system.name} @ {n} (round {round_no + 1}/{repeat})")
                leg_dir = root / f"{system.key}-{n}-{round_no}"
                leg_dir.mkdir()
                # The secret scan remembers lines it found clean; every leg starts with none remembered,
                # or a later leg would be timed on observations an earlier one already scanned.
                secret_scan._CLEAN.clear()
                if system.backend == "sqlite":
                    out = system.leg(LegInput(observations, leg_dir))
                    allocated = sum(part.allocated for part in out.components.values())
                elif server_url is None:
                    continue
                else:
                    with fresh_database(server_url, prefix="bench_lg") as database:
                        out = system.leg(LegInput(observations, leg_dir, database.url))
                        allocated = database.stored_bytes()
                samples.setdefault((system.key, n), []).append(Result(system, n, allocated, mean_ms(out.step_seconds)))
                shutil.rmtree(leg_dir, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results = [sorted(runs, key=lambda r: r.ms_per_step)[(len(runs) - 1) // 2] for runs in samples.values()]
    if repeat > 1:
        notes.append(f"each leg ran {repeat} times, rounds interleaved; shown: the run with the median ms per step")
    return results, notes


class _maybe_postgres:
    """The PostgreSQL server's URL, or None (with a note) when there is none."""

    def __init__(self, notes: list[str]) -> None:
        self._notes = notes
        self._cm: Any = None

    def __enter__(self) -> str | None:
        try:
            self._cm = postgres_server()
            return self._cm.__enter__().url
        except NoPostgres as exc:
            self._cm = None
            self._notes.append(f"PostgreSQL legs not measured: {exc}")
            return None

    def __exit__(self, *exc: object) -> None:
        if self._cm is not None:
            self._cm.__exit__(*exc)


def find(results: Sequence[Result], key: str, steps: int) -> Result | None:
    return next((r for r in results if r.system.key == key and r.steps == steps), None)


def targets(results: Sequence[Result]) -> list[tuple[str, str, str, bool]]:
    """(target, measured, limit, met) at the longest run."""
    if not results:
        return []
    longest = max(r.steps for r in results)
    rows: list[tuple[str, str, str, bool]] = []
    for backend in ("sqlite", "postgres"):
        baton = find(results, f"baton-{backend}", longest)
        if baton is None:
            continue
        rows.append((f"{baton.system.name}: bytes / observation bytes @{longest}", f"{baton.ratio:.2f}x",
                     f"<= {BYTES_TARGET:.0f}x", baton.ratio <= BYTES_TARGET))
        other = find(results, f"langgraph-{backend}", longest)
        for key in (f"baton-{backend}", f"baton-scanall-{backend}"):
            mine = find(results, key, longest)
            if other is not None and mine is not None:
                rows.append((f"{mine.system.name}: ms per step @{longest}, vs {other.system.name}",
                             f"{mine.ms_per_step:.2f} vs {other.ms_per_step:.2f}", "faster",
                             mine.ms_per_step < other.ms_per_step))
    return rows


def markdown(results: Sequence[Result], notes: Sequence[str], machine_lines: Sequence[str], command: str) -> str:
    from baton.bench.report import md_table

    steps = sorted({r.steps for r in results})
    header = ["system", *[f"bytes @{n}" for n in steps], *[f"ms/step @{n}" for n in steps]]
    rows = []
    for system in SYSTEMS:
        cells = [find(results, system.key, n) for n in steps]
        if not any(cells):
            continue
        rows.append([system.name,
                     *[f"{c.allocated_bytes / 1e6:.2f} MB ({c.ratio:.2f}x)" if c else "-" for c in cells],
                     *[f"{c.ms_per_step:.2f}" if c else "-" for c in cells]])
    payload = ", ".join(f"{n} steps = {n * OBSERVATION_BYTES / 1e6:.2f} MB" for n in steps)
    parts = [
        f"Command: `{command}` (one run, every system at every length).", "",
        *machine_lines, "",
        f"Observation payload: {payload}. Bytes are allocated on disk; (Nx) is bytes / payload.", "",
        md_table(header, rows), "",
        "**Targets**", "",
        md_table(["target", "measured", "limit", "met"],
                 [[t, m, lim, "yes" if ok else "NO"] for t, m, lim, ok in targets(results)]), "",
    ]
    parts += [f"- {note}" for note in notes]
    return "\n".join(parts)


def main(*, steps: Sequence[int] = DEFAULT_STEPS, out: Path | None = None, as_json: bool = False,
         workdir: Path | None = None, console: Any = None, repeat: int = 1) -> dict[str, Any]:
    """Run the benchmark, print its table, write its section of `out/benchmarks.md`."""
    from rich.console import Console
    from rich.table import Table

    from baton.bench import report
    from baton.bench.machine import describe

    err = Console(stderr=True)
    results, notes = run(steps, workdir, progress=lambda text: err.print(f"langgraph: {text}"), repeat=repeat)
    command = ("baton bench langgraph --steps " + ",".join(str(n) for n in steps)
               + (f" --repeat {repeat}" if repeat != 1 else "") + (f" --out {out}" if out else ""))
    document = {
        "command": command,
        "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "results": [{"system": r.system.key, "steps": r.steps, "allocated_bytes": r.allocated_bytes,
                     "ratio_to_payload": round(r.ratio, 3), "ms_per_step": round(r.ms_per_step, 3)}
                    for r in results],
        "targets": [{"target": t, "measured": m, "limit": lim, "met": ok} for t, m, lim, ok in targets(results)],
        "notes": notes,
    }
    if not as_json:
        console = console or Console()
        table = Table(title="LangGraph checkpointers")
        for column in ("system", "steps", "bytes", "x payload", "ms/step"):
            table.add_column(column)
        for r in results:
            table.add_row(r.system.name, str(r.steps), f"{r.allocated_bytes:,}", f"{r.ratio:.2f}", f"{r.ms_per_step:.2f}")
        console.print(table)
        for t, m, lim, ok in targets(results):
            console.print(f"{'met' if ok else 'MISSED'}: {t}: {m} ({lim})")
    if out is not None:
        machine = describe(workdir)
        doc = out / "benchmarks.md"
        report.update_markdown(doc, "langgraph", markdown(results, notes, report.machine_lines(machine), command),
                               "LangGraph checkpointers: BatonSaver against LangGraph's own savers")
        err.print(f"wrote {doc}")
    return document
