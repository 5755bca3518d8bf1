"""The sweep: run length x fault rate, every strategy per cell, and the winner of each cell.

The winner of a cell is the strategy with the lowest cost per verified run among those the oracle
found with no duplicate effect and no stale evidence accepted (a strategy that corrupts a target
cannot win on price). Ties go to the higher success rate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from baton.experiment.calibration import Calibration
from baton.experiment.engine import run_strategy
from baton.experiment.strategies import STRATEGIES
from baton.experiment.workload import Parameters, generate

RUN_LENGTHS = (4, 16, 64, 256)
FAULT_RATES = (0.001, 0.01, 0.03, 0.1)


def sweep_cells(experiment_id: str, seed: int, runs_per_cell: int, params: Parameters, cal: Calibration,
                tick: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
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
                    "stale": int(r.stale.sum()), "winner": False})
            safe = [row for row in cell_rows if row["duplicate_effects"] == 0 and row["stale"] == 0
                    and row["cost_per_verified_usd"] is not None]
            if safe:
                min(safe, key=lambda row: (row["cost_per_verified_usd"], -row["success_rate"]))["winner"] = True
            rows.extend({key: value for key, value in row.items() if key != "stale"} for row in cell_rows)
            if tick is not None:
                tick(1)
    return rows


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
