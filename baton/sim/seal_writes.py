"""Which worker write seals which boundary: the write counts a pinned `crash`/`catalog_change` plan names.

A fault-free world is run with its trail kept; every `w` line by an actor of a worker
process (`w:...`) is one count of the write-fault trigger (`baton.sim.faults`). The
checkpoint rows, read raw from the store in sealing order, name the boundary each
`append_checkpoint` write sealed.
"""

from __future__ import annotations

from collections.abc import Iterable

from baton.models import RunKind
from baton.sim.faults import FaultPlan
from baton.sim.runner import config_for
from baton.sim.world import SimRecords, run_world


def worker_writes(trail: Iterable[str]) -> list[str]:
    """The store call of each worker write in a kept trail, in order: entry n-1 is what write count n triggers on."""
    worker_actors: set[str] = set()
    calls: list[str] = []
    for line in trail:
        parts = line.split(" ")
        if parts[1] == "spawn" and parts[-1].startswith("w:"):
            worker_actors.add(" ".join(parts[2:-2]))
            continue
        if " w " not in line:
            continue
        actor, _, caller = " ".join(parts[1:]).rpartition(" w ")
        if actor in worker_actors:
            calls.append(caller)
    return calls


def seal_writes(seed: int, kinds: tuple[RunKind, ...]) -> list[tuple[int, str, str]]:
    """(write count, run id, boundary) of every checkpoint a fault-free world of `seed` seals, in order."""
    rows: list[tuple[str, str]] = []

    def look(records: SimRecords) -> None:
        raw = records.store.raw("SELECT run_id, boundary, sealed_at, seq FROM checkpoints ORDER BY sealed_at, seq")
        rows.extend((str(r[0]), str(r[1])) for r in raw)

    outcome = run_world(config_for(seed, 0, plan=FaultPlan(), kinds=kinds, keep_trail=True), before_check=look)
    counts = [n for n, caller in enumerate(worker_writes(outcome.trail or []), 1) if caller == "append_checkpoint"]
    return [(count, run_id, boundary) for count, (run_id, boundary) in zip(counts, rows, strict=False)]
