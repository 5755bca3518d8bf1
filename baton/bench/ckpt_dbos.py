"""DBOS legs: one durable workflow, one `@DBOS.step` per observation.

DBOS records each step's return value in its system database before the
workflow moves on, which is how a DBOS user makes an agent's observations
durable: the step fetches the observation and returns it. The workflow's
input is only the number of steps, so the observations are stored once, as
step outputs. Per-step time is the wall time of each step call inside the
workflow, which includes DBOS's check for a recorded output and the durable
write of the new one.

DBOS is a process-wide singleton; each leg builds it for its own system
database (SQLite file or a fresh PostgreSQL database), launches it, runs one
workflow and destroys it again. Decorated functions stay registered across
instances.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from dbos import DBOS, DBOSConfig

from baton.bench.leg import LegInput, LegOutput
from baton.bench.measure import sqlite_footprint


@dataclass
class _Feed:
    """What the running workflow reads its observations from and writes its timings to."""

    observations: Sequence[str] = ()
    step_seconds: list[float] = field(default_factory=list)


_FEED = _Feed()


@DBOS.step(name="baton_bench_observe")
def observe(index: int) -> str:
    return _FEED.observations[index]


@DBOS.workflow(name="baton_bench_trajectory")
def trajectory(steps: int) -> int:
    total = 0
    for index in range(steps):
        start = time.perf_counter()
        total += len(observe(index))
        _FEED.step_seconds.append(time.perf_counter() - start)
    return total


def _run(system_database_url: str, observations: Sequence[str]) -> tuple[float, ...]:
    _FEED.observations = observations
    _FEED.step_seconds = []
    config: DBOSConfig = {
        "name": "baton-bench",
        "system_database_url": system_database_url,
        "log_level": "WARNING",
    }
    DBOS(config=config)
    try:
        DBOS.launch()
        stored = trajectory(len(observations))
    finally:
        DBOS.destroy()
    if stored != len(observations) * len(observations[0]):
        raise RuntimeError(f"DBOS workflow returned {stored} bytes of observations")
    return tuple(_FEED.step_seconds)


def sqlite_leg(inp: LegInput) -> LegOutput:
    path = inp.workdir / "dbos.sqlite"
    seconds = _run(f"sqlite:///{path}", inp.observations)
    return LegOutput(step_seconds=seconds, components={"sqlite": sqlite_footprint(path)})


def postgres_leg(inp: LegInput) -> LegOutput:
    assert inp.database_url is not None
    return LegOutput(step_seconds=_run(inp.database_url, inp.observations))
