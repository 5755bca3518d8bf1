"""Which worker write seals which boundary: the write counts a pinned `crash`/`catalog_change` plan names.

A fault-free world is run with its trail kept; every `w` line by an actor of a worker
process (`w:...`) is one count of the write-fault trigger (`baton.sim.faults`). The
checkpoint rows, read raw from the store in sealing order, name the boundary each
`append_checkpoint` write sealed.
"""

from __future__ import annotations

from baton.models import RunKind
from baton.sim.faults import FaultPlan
from baton.sim.runner import config_for
from baton.sim.world import SimRecords, run_world


def seal_writes(seed: int, kinds: tuple[RunKind, ...]) -> list[tuple[int, str, str]]:
    """(write count, run id, boundary) of every checkpoint a fault-free world of `seed` seals, in order."""
    rows: list[tuple[str, str]] = []

    def look(records: SimRecords) -> None:
        raw = records.store.raw("SELECT run_id, boundary, sealed_at, seq FROM checkpoints ORDER BY sealed_at, seq")
        rows.extend((str(r[0]), str(r[1])) for r in raw)

    outcome = run_world(config_for(seed, 0, plan=FaultPlan(), kinds=kinds, keep_trail=True), before_check=look)
    worker_actors: set[str] = set()
    counts: list[int] = []
    writes = 0
    for line in outcome.trail or []:
        parts = line.split(" ")
        if parts[1] == "spawn" and parts[-1].startswith("w:"):
            worker_actors.add(" ".join(parts[2:-2]))
            continue
        if " w " not in line:
            continue
        actor, _, caller = " ".join(parts[1:]).rpartition(" w ")
        if actor in worker_actors:
            writes += 1
            if caller == "append_checkpoint":
                counts.append(writes)
    return [(count, run_id, boundary) for count, (run_id, boundary) in zip(counts, rows, strict=False)]
