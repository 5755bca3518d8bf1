"""Verified success with versus without handoff inside one strategy of the experiment file (contract-17).

The experiment writes one row per run and strategy (`run_outcomes`); this groups a strategy's runs by
agent kind and by whether they moved, with 95% Wilson intervals, in the cells
`baton.metrics.figures.verified_success_figure` draws for the live fleet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from baton.metrics.intervals import wilson

SIMULATED_CLASS = "simulated"
"""The experiment's runs carry no migration class; the cells name their origin instead."""


def outcome_success(path: Path, strategy: str) -> list[dict[str, Any]]:
    """Cells (kind, handoff, migration_class, verified, finished, rate, low, high) of `strategy`'s runs."""
    if not path.is_file():
        return []
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute("""
            SELECT agent_kind, CASE WHEN handoffs > 0 THEN 'with handoff' ELSE 'without handoff' END AS handoff,
                   count(*) FILTER (WHERE verified), count(*)
            FROM run_outcomes WHERE strategy = ? GROUP BY ALL ORDER BY ALL""", [strategy]).fetchall()
    cells: list[dict[str, Any]] = []
    for kind, handoff, verified, finished in rows:
        low, high = wilson(int(verified), int(finished)) or (None, None)
        cells.append({"kind": kind, "handoff": handoff,
                      "migration_class": SIMULATED_CLASS if handoff == "with handoff" else "none",
                      "verified": int(verified), "finished": int(finished),
                      "rate": int(verified) / int(finished) if finished else None, "low": low, "high": high})
    return cells


def simpler_wins(sweep: list[dict[str, Any]], reference: str = "baton") -> list[dict[str, Any]]:
    """Sweep cells another strategy wins, with its cost per verified run against `reference`'s in that cell."""
    costs = {(c["strategy"], c["run_length"], c["fault_rate"]): c["cost_per_verified_usd"] for c in sweep}
    wins: list[dict[str, Any]] = []
    for cell in sweep:
        if not cell["winner"] or cell["strategy"] == reference:
            continue
        theirs = costs.get((reference, cell["run_length"], cell["fault_rate"]))
        ours = cell["cost_per_verified_usd"]
        saving = (theirs - ours) / theirs if theirs and ours is not None else None
        wins.append({"strategy": cell["strategy"], "run_length": cell["run_length"], "fault_rate": cell["fault_rate"],
                     "cost_per_verified_usd": ours, f"{reference}_cost_per_verified_usd": theirs,
                     "cheaper_by": saving})
    return wins
