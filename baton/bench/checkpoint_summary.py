"""What the checkpoint legs add up to: growth, per-step time, ratios and the issue's targets."""

from __future__ import annotations

from dataclasses import dataclass

from baton.bench.checkpoint_bench import CheckpointRun, LegResult, System

BYTES_TARGET = {"sqlite": 2.0, "postgres": 2.5}
"""Baton stores at most this many times the observation bytes (allocated disk blocks) at the longest trajectory."""
SLOWDOWN_TARGET = 1.3
"""Baton's per-step time over the last steps is within this factor of the first steps."""
SPEED_TARGET = {"sqlite": 0.25, "postgres": 0.5}
"""Baton's per-step time is at most this fraction of a baseline's on the same backend."""
FLOOR_TARGET = 3.0
"""On SQLite, Baton's per-step time is at most this many durable commits (the floor measured in the same run)."""


@dataclass(frozen=True)
class SystemSummary:
    system: System
    shortest: LegResult
    longest: LegResult

    @property
    def growth(self) -> float:
        """Bytes at the longest trajectory over bytes at the shortest."""
        return self.longest.stored.logical / self.shortest.stored.logical

    @property
    def bytes_per_added_step(self) -> float:
        """Marginal bytes per step between the shortest and the longest trajectory (schema overhead cancels)."""
        added = self.longest.steps - self.shortest.steps
        if added <= 0:
            return float("nan")
        return (self.longest.stored.logical - self.shortest.stored.logical) / added

    @property
    def slowdown(self) -> float:
        """Mean of the last window of steps over the first window, in the longest trajectory."""
        return self.longest.last_window_ms / self.longest.first_window_ms


@dataclass(frozen=True)
class Target:
    system: System
    backend: str
    name: str
    value: float
    limit: float
    comparison: str  # "<="

    @property
    def met(self) -> bool:
        return self.value <= self.limit


def summarize(run: CheckpointRun) -> list[SystemSummary]:
    out: list[SystemSummary] = []
    for system in run.systems:
        legs = run.ok_legs(system.key)
        if legs:
            out.append(SystemSummary(system, legs[0], legs[-1]))
    return out


def targets(run: CheckpointRun) -> list[Target]:
    """The issue's targets for Baton, per backend, judged at the longest trajectory measured."""
    by_key = {summary.system.key: summary for summary in summarize(run)}
    found: list[Target] = []
    for baton in (s for s in by_key.values() if s.system.family == "baton"):
        backend = baton.system.backend
        n = baton.longest.steps
        window = min(50, n)
        found.append(
            Target(
                baton.system, backend, f"bytes stored (allocated blocks) / observation bytes at {n} steps",
                baton.longest.stored.allocated / baton.longest.observation_bytes, BYTES_TARGET[backend], "<=",
            )
        )
        floor = run.floor
        if backend == "sqlite" and floor is not None and floor.sqlite_commit_ms > 0:
            found.append(
                Target(
                    baton.system, backend, f"per-step ms at {n} steps / one durable SQLite commit (floor)",
                    baton.longest.mean_ms / floor.sqlite_commit_ms, FLOOR_TARGET, "<=",
                )
            )
        found.append(
            Target(
                baton.system, backend, f"per-step ms, last {window} / first {window} steps at {n}", baton.slowdown,
                SLOWDOWN_TARGET, "<=",
            )
        )
        for other in by_key.values():
            if other.system.backend != backend or other.system.family == "baton" or not other.system.baseline:
                continue
            if other.longest.steps != n:
                continue
            found.append(
                Target(
                    baton.system,
                    backend,
                    f"per-step ms at {n} steps, Baton / {other.system.label}",
                    baton.longest.mean_ms / other.longest.mean_ms,
                    SPEED_TARGET[backend],
                    "<=",
                )
            )
    return found
