"""How fast the SQLite SDK boundary could be: its own SQL with no Python around it, plus its secret scan.

Issue 16 asks for an SDK boundary of at most 3x one durable SQLite commit (the
floor). This measures, side by side in one run, what no rewrite of the Python
layer could take away:

* the SDK boundary itself, LangGraph's `SqliteSaver` and DBOS, each leg run
  exactly as `baton bench checkpoint` runs it (`baton-sdk-sqlite`,
  `langgraph-sqlite`, `dbos-sqlite`);
* the same boundaries' SQL alone: every statement the store sent during a
  traced run of the same trajectory (parameters expanded by SQLite itself),
  replayed verbatim from one bare `sqlite3` connection into a copy of the
  store taken before the first step, one durable transaction per step as the
  SDK commits it, with the store's own pragmas (WAL, synchronous=FULL);
* the secret scan of each observation's content, which the SDK must run
  before the content may enter state (`baton.secret_scan.ensure_no_secrets`,
  as the SDK calls it);
* the floor (`baton.bench.floor.measure_floor`), before and after.

The bound (replay + scan) leaves out the seal's hashing, its records and the
second scan (of the new parts), so it is lower than any boundary that keeps
every check: where the bound is above a target, no faster Python meets that
target on this disk; where it is below, the gap to the SDK is what a faster
Python layer could win at most.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from baton.bench.checkpoint_bench import SYSTEMS_BY_KEY, LegResult, LegRunner
from baton.bench.ckpt_sdk import start_sdk_run
from baton.bench.floor import measure_floor
from baton.bench.trajectory import observation
from baton.secret_scan import ensure_no_secrets

SOURCE = "bench://trajectory"
FLOOR_MULTIPLE = 3.0
BASELINE_FRACTION = 0.25
COMPARED = ("baton-sdk-sqlite", "langgraph-sqlite", "dbos-sqlite")


@dataclass(frozen=True)
class BoundRound:
    """One round: per-step seconds of each part, and the statements each traced step sent."""

    legs: dict[str, tuple[float, ...]]  # system key -> its leg's seconds per step
    replay: tuple[float, ...]
    scan: tuple[float, ...]
    statements: tuple[int, ...]
    floor_ms: tuple[float, float]  # before, after


@dataclass(frozen=True)
class SdkBound:
    steps: int
    rounds: tuple[BoundRound, ...]

    def _median_of_means(self, part: str) -> float:
        return statistics.median(statistics.fmean(getattr(r, part)) * 1000 for r in self.rounds)

    def leg_ms(self, key: str) -> float:
        """Mean ms per step of a compared leg (median over rounds), as the checkpoint benchmark reports it."""
        return statistics.median(statistics.fmean(r.legs[key]) * 1000 for r in self.rounds)

    @property
    def sdk_ms(self) -> float:
        return self.leg_ms("baton-sdk-sqlite")

    @property
    def replay_ms(self) -> float:
        return self._median_of_means("replay")

    @property
    def scan_ms(self) -> float:
        return self._median_of_means("scan")

    @property
    def floor_ms(self) -> float:
        return statistics.median(ms for r in self.rounds for ms in r.floor_ms)

    @property
    def bound_ms(self) -> float:
        """The boundary's SQL alone plus its content scan: below any boundary that keeps every check."""
        return self.replay_ms + self.scan_ms

    @property
    def target_ms(self) -> float:
        return FLOOR_MULTIPLE * self.floor_ms

    @property
    def statements_per_step(self) -> float:
        return statistics.fmean(n for r in self.rounds for n in r.statements)


def _traced_steps(home: Path, texts: Sequence[str], copy_to: Path) -> tuple[list[str], list[int]]:
    """The SDK boundaries once more, every statement the store sends recorded; the store copied before step 1."""
    from baton.store.factory import open_blobs, open_store

    home.mkdir(parents=True)
    store = open_store(None, home)
    trace: list[str] = []
    marks: list[int] = []
    try:
        ctx = start_sdk_run(store, open_blobs(home, store))
        with sqlite3.connect(home / "baton.db") as source, sqlite3.connect(copy_to) as target:
            source.backup(target)
        store._conn().set_trace_callback(trace.append)  # noqa: SLF001 - the measured connection itself
        for index, text in enumerate(texts):
            marks.append(len(trace))
            ctx.observe(SOURCE, {"step": index}, text.encode("ascii"), freshness_s=3600)
    finally:
        store.close()
    return trace, marks


def _replay(database: Path, trace: Sequence[str], marks: Sequence[int]) -> tuple[list[float], list[int]]:
    """Each step's statements, sent verbatim on one bare connection; seconds and statement count per step."""
    conn = sqlite3.connect(database, isolation_level=None)
    seconds: list[float] = []
    counts: list[int] = []
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        bounds = [*marks, len(trace)]
        for step in range(len(marks)):
            # Trigger bodies are traced as comments; SQLite runs them again by itself.
            statements = [s for s in trace[bounds[step]:bounds[step + 1]] if not s.startswith("--")]
            start = time.perf_counter()
            for statement in statements:
                conn.execute(statement).fetchall()
            seconds.append(time.perf_counter() - start)
            counts.append(len(statements))
        if conn.in_transaction:
            raise RuntimeError("the replayed trace left a transaction open")
    finally:
        conn.close()
    return seconds, counts


def _scan(texts: Sequence[str]) -> list[float]:
    seconds = []
    for text in texts:
        start = time.perf_counter()
        ensure_no_secrets([(f"observation of {SOURCE}", text)])
        seconds.append(time.perf_counter() - start)
    return seconds


def _leg_seconds(result: LegResult) -> tuple[float, ...]:
    if result.status != "ok":
        raise RuntimeError(f"{result.system}: {result.reason}")
    return tuple(ms / 1000 for ms in result.step_ms)


def measure_sdk_bound(steps: int, workdir: Path, *, repeat: int = 3) -> SdkBound:
    """`repeat` rounds of: floor, the three legs, the traced boundaries replayed, the scans, floor."""
    texts = [observation(index) for index in range(steps)]
    rounds = []
    for number in range(repeat):
        scratch = workdir / f"round-{number}"
        scratch.mkdir(parents=True)
        runner = LegRunner(scratch, None, "SQLite only")
        before = runner.floor().sqlite_commit_ms
        legs = {key: _leg_seconds(runner.run(SYSTEMS_BY_KEY[key], texts, number)) for key in COMPARED}
        copy = scratch / "replay.db"
        trace, marks = _traced_steps(scratch / "traced", texts, copy)
        os.sync()  # as before every leg: earlier write-back must not land on the replay's fsyncs
        replay, counts = _replay(copy, trace, marks)
        scan = _scan(texts)
        after = runner.floor().sqlite_commit_ms
        rounds.append(BoundRound(legs, tuple(replay), tuple(scan), tuple(counts), (before, after)))
        shutil.rmtree(scratch, ignore_errors=True)
    return SdkBound(steps, tuple(rounds))


def target_rows(bound: SdkBound) -> tuple[list[str], list[list[str]]]:
    """Each SQLite SDK target of issue 16 in ms, against the bound and the SDK measured in the same run."""
    limits = [
        (f"<= {FLOOR_MULTIPLE:g}x the durable commit", bound.target_ms),
        (f"<= {BASELINE_FRACTION:g}x LangGraph SqliteSaver", BASELINE_FRACTION * bound.leg_ms("langgraph-sqlite")),
        (f"<= {BASELINE_FRACTION:g}x DBOS steps", BASELINE_FRACTION * bound.leg_ms("dbos-sqlite")),
    ]
    header = ["target", "limit ms", "bound ms (SQL alone + scan)", "bound within it", "SDK ms", "SDK within it"]
    rows = [[name, f"{limit:.3f}", f"{bound.bound_ms:.3f}", "yes" if bound.bound_ms <= limit else "NO",
             f"{bound.sdk_ms:.3f}", "yes" if bound.sdk_ms <= limit else "NO"] for name, limit in limits]
    return header, rows


def part_rows(bound: SdkBound) -> tuple[list[str], list[list[str]]]:
    """Mean ms per step of each part (median over rounds), and as a multiple of the floor."""
    floor = bound.floor_ms
    parts = [
        ("one durable SQLite commit of a 2 KB row (the floor)", floor),
        (f"the boundary's own SQL alone, replayed ({bound.statements_per_step:.1f} statements per step)",
         bound.replay_ms),
        ("secret scan of the observed content", bound.scan_ms),
        ("bound: SQL alone + scan", bound.bound_ms),
        ("Baton SDK boundary (default configuration)", bound.sdk_ms),
        ("LangGraph SqliteSaver", bound.leg_ms("langgraph-sqlite")),
        ("DBOS steps", bound.leg_ms("dbos-sqlite")),
    ]
    return ["part", "ms per step", "x floor"], [[name, f"{ms:.3f}", f"{ms / floor:.2f}"] for name, ms in parts]
