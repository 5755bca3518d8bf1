"""Measuring what a system stored and how long each step took."""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Footprint:
    """Bytes a system holds: logical (file or relation sizes) and allocated on disk."""

    logical: int
    allocated: int

    def __add__(self, other: Footprint) -> Footprint:
        return Footprint(self.logical + other.logical, self.allocated + other.allocated)


EMPTY = Footprint(0, 0)


def files_footprint(paths: Iterable[Path]) -> Footprint:
    """Sizes of the given files (missing ones count zero)."""
    logical = allocated = 0
    for path in paths:
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        logical += stat.st_size
        allocated += stat.st_blocks * 512
    return Footprint(logical, allocated)


def tree_footprint(root: Path) -> Footprint:
    """Sizes of every regular file under `root`."""
    return files_footprint(path for path in root.rglob("*") if path.is_file())


def sqlite_footprint(database: Path) -> Footprint:
    """An SQLite database's size once its WAL (if any) is folded back into the main file.

    Counts the database file and its `-wal` and `-journal` files; `-shm` is an
    index of the WAL kept in shared memory and holds no data.
    """
    with sqlite3.connect(database) as conn:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() == "wal":
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return files_footprint(Path(f"{database}{suffix}") for suffix in ("", "-wal", "-journal"))


@dataclass
class StepClock:
    """Wall time of each step, by perf_counter laps."""

    seconds: list[float] = field(default_factory=list)

    def time_step(self) -> _Lap:
        return _Lap(self)


class _Lap:
    def __init__(self, clock: StepClock) -> None:
        self._clock = clock
        self._start = 0.0

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self._clock.seconds.append(time.perf_counter() - self._start)


def laps_from_marks(marks: Sequence[float], end: float) -> list[float]:
    """Durations between consecutive marks, the last one ending at `end`."""
    bounds = [*marks, end]
    return [bounds[i + 1] - bounds[i] for i in range(len(marks))]


def mean_ms(seconds: Sequence[float]) -> float:
    return statistics.fmean(seconds) * 1000.0 if seconds else float("nan")


def median_ms(seconds: Sequence[float]) -> float:
    return statistics.median(seconds) * 1000.0 if seconds else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): the smallest value with at least q% of the values at or below it."""
    if not values:
        return float("nan")
    if not 0 < q <= 100:
        raise ValueError(f"percentile q must be in (0, 100], not {q}")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100)
    return ordered[int(rank) - 1]
