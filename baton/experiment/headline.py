"""The experiment's headline figures: the few numbers a reader (and the evidence report) asks of a run."""

from __future__ import annotations

from typing import Any


def _by_strategy(summary: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["strategy"]: row for row in summary}


def headline(summary: list[dict[str, Any]], restart_cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Duplicates and stale evidence per strategy, where restart beats handoff, and what coarse checkpoints cost.

    `restart_cells` is `sweep.restart_versus_baton` over the sweep (empty without `--sweep`): restart
    beats handoff in a cell when it verifies at least as many runs for less per verified run.
    """
    rows = _by_strategy(summary)
    baton, coarse = rows["baton"], rows["coarse_checkpoints"]
    wins = [cell for cell in restart_cells
            if cell["restart_cost_vs_baton"] is not None and cell["restart_cost_vs_baton"] < 0
            and cell["restart_success"] >= cell["baton_success"]]
    losses = [cell["restart_cost_vs_baton"] for cell in restart_cells
              if cell["restart_cost_vs_baton"] is not None and cell["restart_cost_vs_baton"] > 0]
    return {
        "duplicate_effects": {name: row["duplicate_effects"] for name, row in rows.items()},
        "stale_evidence_accepted": {name: row["stale_evidence_accepted"] for name, row in rows.items()},
        "cells_total": len(restart_cells),
        "cells_where_restart_beats_handoff": len(wins),
        "restart_best_saving_vs_handoff": max((-cell["restart_cost_vs_baton"] for cell in wins), default=None),
        "restart_worst_extra_cost_vs_handoff": max(losses, default=None),
        "coarse_minus_baton_verified_success": coarse["success_rate"] - baton["success_rate"],
        "coarse_cost_per_verified_vs_baton": coarse["cost_per_verified_usd"] / baton["cost_per_verified_usd"] - 1.0,
    }
