"""Checkpoint growth: the same trajectory through Baton, LangGraph and DBOS, side by side.

For every system and every trajectory length N, a fresh leg runs N steps in a
fresh directory (and, for PostgreSQL, a fresh database); each step appends one
2 KB observation and makes it durable. The leg reports the wall time of each
step and the bytes left stored. Legs are interleaved (for each N, every
system in turn) so slow drift of the machine touches every system alike, and
each system first runs a short discarded warm-up leg so import and first-call
costs are not charged to the first measured step.
"""

from __future__ import annotations

import importlib
import os
import shutil
import statistics
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from baton.bench.floor import Floor, measure_floor
from baton.bench.leg import LegInput, LegOutput
from baton.bench.measure import Footprint, mean_ms, median_ms
from baton.bench.pg import FreshDatabase, NoPostgres, PgServer, fresh_database, postgres_server, server_checkpoint
from baton.bench.trajectory import OBSERVATION_BYTES, Trajectory

Backend = Literal["sqlite", "postgres"]
Status = Literal["ok", "skipped", "failed"]

DEFAULT_STEPS: tuple[int, ...] = (50, 100, 200, 400)
WINDOW = 50
"""Steps averaged at the start and at the end of the longest trajectory."""
WARMUP_STEPS = 5


@dataclass(frozen=True)
class System:
    key: str
    family: str  # "baton", "langgraph", "dbos"
    label: str
    backend: Backend
    leg: str  # "module:function", imported lazily: LangGraph and DBOS are optional
    requires: str  # the distribution to install when the import fails
    baseline: bool = True  # compared against Baton in the targets


SYSTEMS: tuple[System, ...] = (
    System("baton-sdk-sqlite", "baton", "Baton, SDK boundary (default)", "sqlite", "baton.bench.ckpt_sdk:sdk_leg",
           "baton"),
    System(
        "baton-seal-sqlite", "baton", "Baton, seal_checkpoint alone (default blobs)", "sqlite",
        "baton.bench.ckpt_baton:default_blobs_leg", "baton",
    ),
    System("baton-sqlite", "baton", "Baton, file blobs", "sqlite", "baton.bench.ckpt_baton:file_blobs_leg", "baton"),
    System(
        "baton-sqlblobs-sqlite", "baton", "Baton, SQL blobs", "sqlite", "baton.bench.ckpt_baton:sql_blobs_leg", "baton"
    ),
    System(
        "langgraph-sqlite", "langgraph", "LangGraph SqliteSaver", "sqlite",
        "baton.bench.ckpt_langgraph:sqlite_leg", "langgraph-checkpoint-sqlite",
    ),
    System(
        "langgraph-delta-sqlite", "langgraph", "LangGraph SqliteSaver + DeltaChannel (beta)", "sqlite",
        "baton.bench.ckpt_langgraph:delta_sqlite_leg", "langgraph-checkpoint-sqlite", baseline=False,
    ),
    System("dbos-sqlite", "dbos", "DBOS steps", "sqlite", "baton.bench.ckpt_dbos:sqlite_leg", "dbos"),
    System(
        "baton-sdk-postgres", "baton", "Baton, SDK boundary (default)", "postgres", "baton.bench.ckpt_sdk:sdk_leg",
        "baton",
    ),
    System(
        "baton-seal-postgres", "baton", "Baton, seal_checkpoint alone (default blobs)", "postgres",
        "baton.bench.ckpt_baton:default_blobs_leg", "baton",
    ),
    System(
        "baton-postgres", "baton", "Baton, file blobs", "postgres", "baton.bench.ckpt_baton:file_blobs_leg", "baton"
    ),
    System(
        "baton-sqlblobs-postgres", "baton", "Baton, SQL blobs", "postgres", "baton.bench.ckpt_baton:sql_blobs_leg",
        "baton",
    ),
    System(
        "langgraph-postgres", "langgraph", "LangGraph PostgresSaver", "postgres",
        "baton.bench.ckpt_langgraph:postgres_leg", "langgraph-checkpoint-postgres",
    ),
    System(
        "langgraph-delta-postgres", "langgraph", "LangGraph PostgresSaver + DeltaChannel (beta)", "postgres",
        "baton.bench.ckpt_langgraph:delta_postgres_leg", "langgraph-checkpoint-postgres", baseline=False,
    ),
    System("dbos-postgres", "dbos", "DBOS steps", "postgres", "baton.bench.ckpt_dbos:postgres_leg", "dbos"),
)
SYSTEMS_BY_KEY: dict[str, System] = {system.key: system for system in SYSTEMS}


def select_systems(spec: str | Sequence[str] | None) -> tuple[System, ...]:
    """Systems named by keys, families ("baton", "langgraph", "dbos") or backends ("sqlite", "postgres")."""
    if spec is None:
        return SYSTEMS
    names = [part.strip() for part in (spec.split(",") if isinstance(spec, str) else spec) if part.strip()]
    if not names or names == ["all"]:
        return SYSTEMS
    chosen: list[System] = []
    for name in names:
        matches = [s for s in SYSTEMS if name in (s.key, s.family, s.backend)]
        if not matches:
            known = ", ".join(s.key for s in SYSTEMS)
            raise ValueError(f"unknown system {name!r}; known: {known}, or a family or backend name")
        chosen += [s for s in matches if s not in chosen]
    return tuple(s for s in SYSTEMS if s in chosen)


@dataclass(frozen=True)
class LegResult:
    system: str
    steps: int
    status: Status
    reason: str = ""
    step_ms: tuple[float, ...] = ()
    stored: Footprint = Footprint(0, 0)
    components: dict[str, Footprint] = field(default_factory=dict)
    repetition: int = 0

    @property
    def observation_bytes(self) -> int:
        return self.steps * OBSERVATION_BYTES

    @property
    def ratio_to_observations(self) -> float:
        return self.stored.logical / self.observation_bytes

    @property
    def mean_ms(self) -> float:
        return mean_ms([ms / 1000 for ms in self.step_ms])

    @property
    def median_ms(self) -> float:
        return median_ms([ms / 1000 for ms in self.step_ms])

    @property
    def first_window_ms(self) -> float:
        return mean_ms([ms / 1000 for ms in self.step_ms[:WINDOW]])

    @property
    def last_window_ms(self) -> float:
        return mean_ms([ms / 1000 for ms in self.step_ms[-WINDOW:]])


@dataclass(frozen=True)
class CheckpointRun:
    steps: tuple[int, ...]
    systems: tuple[System, ...]
    legs: tuple[LegResult, ...]  # every repetition
    postgres: str  # where PostgreSQL came from, or why it was not available
    repetitions: int = 1
    floors: tuple[Floor, ...] = ()  # one per round of legs

    def repeats(self, system: str, steps: int) -> list[LegResult]:
        return [leg for leg in self.legs if leg.system == system and leg.steps == steps]

    def leg(self, system: str, steps: int) -> LegResult | None:
        """The representative leg: of the repetitions that succeeded, the one with the median mean time."""
        legs = self.repeats(system, steps)
        ok = sorted((leg for leg in legs if leg.status == "ok"), key=lambda leg: leg.mean_ms)
        if ok:
            return ok[(len(ok) - 1) // 2]
        return legs[0] if legs else None

    def ok_legs(self, system: str) -> list[LegResult]:
        chosen = (self.leg(system, n) for n in self.steps)
        return [leg for leg in chosen if leg is not None and leg.status == "ok"]

    @property
    def floor(self) -> Floor | None:
        """Median over rounds of each floor primitive."""
        if not self.floors:
            return None
        return Floor(
            statistics.median(f.sqlite_commit_ms for f in self.floors),
            statistics.median(f.file_fsync_rename_ms for f in self.floors),
        )


LegFn = Callable[[LegInput], LegOutput]


def _load_leg(system: System) -> LegFn:
    module_name, _, attr = system.leg.partition(":")
    leg: LegFn = getattr(importlib.import_module(module_name), attr)
    return leg


ProgressHook = Callable[[str], None]


def _quiesce(pg: PgServer | None) -> None:
    """Flush what earlier legs left dirty, so their write-back does not land on this leg's fsyncs."""
    if pg is not None:
        server_checkpoint(pg.url)
    os.sync()


class LegRunner:
    """Runs legs in scratch directories and fresh databases; turns failures into results."""

    def __init__(self, workdir: Path, pg: PgServer | None, pg_reason: str, flush: bool = True) -> None:
        self.workdir = workdir
        self.flush = flush
        self.pg = pg
        self.pg_reason = pg_reason
        self._legs: dict[str, LegFn | str] = {}
        self._count = 0

    def leg_fn(self, system: System) -> LegFn | str:
        if system.key not in self._legs:
            try:
                self._legs[system.key] = _load_leg(system)
            except ImportError as exc:
                self._legs[system.key] = f"skipped: {exc.name or exc} not installed (pip install {system.requires})"
        return self._legs[system.key]

    @contextmanager
    def _scratch(self) -> Iterator[Path]:
        self._count += 1
        path = self.workdir / f"leg-{self._count:03d}"
        path.mkdir()
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def floor(self) -> Floor:
        with self._scratch() as scratch:
            _quiesce(self.pg)
            return measure_floor(scratch)

    def run(self, system: System, observations: Sequence[str], repetition: int = 0) -> LegResult:
        steps = len(observations)
        fn = self.leg_fn(system)
        if isinstance(fn, str):
            return LegResult(system.key, steps, "skipped", fn)
        if system.backend == "postgres" and self.pg is None:
            return LegResult(system.key, steps, "skipped", f"skipped: no PostgreSQL ({self.pg_reason})")
        try:
            with ExitStack() as stack:
                scratch = stack.enter_context(self._scratch())
                database: FreshDatabase | None = None
                if system.backend == "postgres":
                    assert self.pg is not None
                    database = stack.enter_context(fresh_database(self.pg.url, prefix="bench"))
                if self.flush:
                    _quiesce(self.pg)
                out = fn(LegInput(observations, scratch, None if database is None else database.url))
                components = dict(out.components)
                if database is not None:
                    size = database.stored_bytes()
                    components["postgres"] = Footprint(size, size)
        except Exception as exc:  # a broken system is reported, not fatal to the others
            detail = "".join(traceback.format_exception_only(exc)).strip()
            return LegResult(system.key, steps, "failed", f"failed: {detail}")
        stored = sum(components.values(), Footprint(0, 0))
        return LegResult(
            system.key,
            steps,
            "ok",
            step_ms=tuple(round(s * 1000, 4) for s in out.step_seconds),
            stored=stored,
            components=components,
            repetition=repetition,
        )


def run_checkpoint_bench(
    steps: Sequence[int] = DEFAULT_STEPS,
    systems: Sequence[System] = SYSTEMS,
    *,
    workdir: Path | None = None,
    repeat: int = 1,
    warmup: bool = True,
    measure_floors: bool = True,
    flush_between_legs: bool = True,
    progress: ProgressHook | None = None,
) -> CheckpointRun:
    """Run every (system, N) leg `repeat` times and return the results; one system's failure never stops the rest.

    Rounds go N by N and, within a round, system by system (each round
    starting one system later), so drift of the machine touches every system
    alike; each round starts by measuring the
    disk's durability floor, and each leg by flushing what earlier legs left
    dirty (both can be turned off for smoke tests).
    """
    steps = tuple(sorted(set(steps)))
    if not steps or steps[0] < 1:
        raise ValueError(f"step counts must be positive, not {steps}")
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, not {repeat}")
    needs_pg = any(system.backend == "postgres" for system in systems)
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    scratch_root = Path(tempfile.mkdtemp(prefix="baton-bench-", dir=workdir))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, scratch_root, True)
        pg: PgServer | None = None
        pg_note = "not needed"
        if needs_pg:
            try:
                pg = stack.enter_context(postgres_server())
                pg_note = pg.origin
            except NoPostgres as exc:
                pg_note = str(exc)
        runner = LegRunner(scratch_root, pg, pg_note, flush=flush_between_legs)
        if warmup:
            warm = Trajectory(WARMUP_STEPS, seed=1).materialize()
            for system in systems:
                if progress:
                    progress(f"warm-up {system.key}")
                runner.run(system, warm)
        legs: list[LegResult] = []
        floors: list[Floor] = []
        trajectories = {n: Trajectory(n).materialize() for n in steps}
        rounds = 0
        for repetition in range(repeat):
            for n in steps:
                if measure_floors:
                    floors.append(runner.floor())
                # Rotate who goes first, so no system always runs right after the floor or a heavy writer.
                shift = rounds % len(systems)
                rounds += 1
                for system in (*systems[shift:], *systems[:shift]):
                    if progress:
                        suffix = f" (run {repetition + 1}/{repeat})" if repeat > 1 else ""
                        progress(f"{system.key} N={n}{suffix}")
                    legs.append(runner.run(system, trajectories[n], repetition))
    return CheckpointRun(
        steps=steps, systems=tuple(systems), legs=tuple(legs), postgres=pg_note, repetitions=repeat,
        floors=tuple(floors),
    )


def leg_count(steps: Sequence[int], systems: Sequence[System], repeat: int = 1, warmup: bool = True) -> int:
    return len(set(steps)) * len(systems) * repeat + (len(systems) if warmup else 0)
