"""What one leg (one system, one trajectory length) reports, and the contract legs follow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from baton.bench.measure import Footprint


@dataclass(frozen=True)
class LegInput:
    """Everything a leg needs: the observations, a private scratch directory, a database URL.

    `database_url` names a fresh, empty PostgreSQL database for PostgreSQL legs
    and is None for embedded (SQLite) legs.
    """

    observations: Sequence[str]
    workdir: Path
    database_url: str | None = None


@dataclass(frozen=True)
class LegOutput:
    """Per-step wall times and what stayed on disk outside a PostgreSQL database.

    `components` names each part of the footprint (e.g. "sqlite", "blobs"), so
    a report can show where the bytes are. PostgreSQL database growth is added
    by the runner, which owns the database.
    """

    step_seconds: tuple[float, ...]
    components: dict[str, Footprint] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


class Leg(Protocol):
    def __call__(self, leg: LegInput) -> LegOutput: ...
