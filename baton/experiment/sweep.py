"""The sweep: run length x fault rate, every strategy per cell, and the winner of each cell.

The winner of a cell is the strategy with the lowest cost per verified run among those the oracle
found with no duplicate effect and no stale evidence accepted (a strategy that corrupts a target
cannot win on price). Costs within a tenth of a per cent tie; ties go to the higher success rate, then
to the shorter mean time to completion, then to the strategy listed first
(`baton.metrics.experiment_outcomes.pick_winner`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from baton.experiment.calibration import Calibration
from baton.experiment.engine import run_strategy
from baton.experiment.strategies import ORDER, STRATEGIES
from baton.experiment.workload import AGENT_KINDS, Parameters, generate
from baton.metrics.experiment_outcomes import pick_winner, sweep_group_rows

RUN_LENGTHS = (4, 16, 64, 256)
FAULT_RATES = (0.001, 0.01, 0.03, 0.1)


def sweep_cells(experiment_id: str, seed: int, runs_per_cell: int, params: Parameters, cal: Calibration,
                tick: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """One row per cell and strategy (`sweep_cells`), its winner marked."""
    return run_sweep(experiment_id, seed, runs_per_cell, params, cal, tick)[0]


def run_sweep(experiment_id: str, seed: int, runs_per_cell: int, params: Parameters, cal: Calibration,
              tick: Callable[[int], None] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The sweep's cells (`sweep_cells`) and its runs summed per cell, strategy, agent kind, reason and migration
    class (`sweep_outcomes`), so a reader can recompute the cells over the runs a filter keeps."""
    rows: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    kinds = np.asarray(AGENT_KINDS, dtype=object)
    for li, length in enumerate(RUN_LENGTHS):
        for fi, rate in enumerate(FAULT_RATES):
            cell = replace(params, fixed_length=length, fault_rate=rate)
            w = generate(seed * 1000 + li * 10 + fi, runs_per_cell, cell)
            cell_rows = []
            for strategy in STRATEGIES:
                r = run_strategy(strategy, w, cell, cal, seed=seed, with_metrics=False)
                verified = int(r.verified.sum())
                cell_rows.append({
                    "experiment_id": experiment_id, "strategy": strategy.id, "run_length": length,
                    "fault_rate": rate, "runs": runs_per_cell, "success_rate": verified / runs_per_cell,
                    "cost_per_verified_usd": float(r.cost_usd.sum()) / verified if verified else None,
                    "mean_completion_s": float(r.completion_s.mean()), "duplicate_effects": int(r.duplicates.sum()),
                    "stale_evidence_accepted": int(r.stale.sum()), "winner": False})
                groups.extend({"experiment_id": experiment_id} | group for group in sweep_group_rows(
                    strategy.id, length, rate, kinds[w.kind], r.reasons, r.migration_classes, r.verified,
                    r.cost_usd, r.completion_s, r.duplicates, r.stale))
            winner = pick_winner(cell_rows, ORDER)
            rows.extend({key: value for key, value in row.items() if key != "stale_evidence_accepted"}
                        | {"winner": row["strategy"] == winner} for row in cell_rows)
            if tick is not None:
                tick(1)
    return rows, groups


def _versus(other: float | None, baton: float | None) -> float | None:
    return other / baton - 1.0 if other is not None and baton else None


def restart_versus_baton(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per cell: the winner and restart from the beginning against Baton (cost per verified run, mean time)."""
    by = {(r["run_length"], r["fault_rate"], r["strategy"]): r for r in rows}
    out = []
    for length in RUN_LENGTHS:
        for rate in FAULT_RATES:
            b, s = by.get((length, rate, "baton")), by.get((length, rate, "restart"))
            if not b or not s:
                continue
            win = next((r for r in rows if r["run_length"] == length and r["fault_rate"] == rate and r["winner"]), b)
            out.append({"run_length": length, "fault_rate": rate, "winner": win["strategy"],
                        "winner_cost_vs_baton": _versus(win["cost_per_verified_usd"], b["cost_per_verified_usd"]),
                        "winner_time_vs_baton": _versus(win["mean_completion_s"], b["mean_completion_s"]),
                        "restart_cost_vs_baton": _versus(s["cost_per_verified_usd"], b["cost_per_verified_usd"]),
                        "restart_time_vs_baton": _versus(s["mean_completion_s"], b["mean_completion_s"]),
                        "restart_success": s["success_rate"], "baton_success": b["success_rate"]})
    return out
