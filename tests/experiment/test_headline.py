"""The headline figures computed from crafted summary and sweep rows whose answers are known."""

from __future__ import annotations

from typing import Any

from baton.experiment.headline import headline


def _row(strategy: str, success: float, cost: float, duplicates: int = 0, stale: int = 0) -> dict[str, Any]:
    return {"strategy": strategy, "success_rate": success, "cost_per_verified_usd": cost,
            "duplicate_effects": duplicates, "stale_evidence_accepted": stale}


def _cell(restart_cost: float | None, restart_success: float, baton_success: float) -> dict[str, Any]:
    return {"restart_cost_vs_baton": restart_cost, "restart_success": restart_success, "baton_success": baton_success}


def test_restart_wins_only_where_it_is_cheaper_without_verifying_fewer_runs() -> None:
    summary = [_row("baton", 1.0, 2.0), _row("coarse_checkpoints", 0.9, 2.5), _row("naive", 0.8, 1.9, 3, 4)]
    cells = [_cell(-0.10, 1.0, 1.0), _cell(-0.20, 0.9, 1.0), _cell(0.5, 1.0, 1.0), _cell(None, 1.0, 1.0)]
    figures = headline(summary, cells)
    assert figures["cells_total"] == 4
    assert figures["cells_where_restart_beats_handoff"] == 1  # the cheaper cell that verified fewer runs is no win
    assert figures["restart_best_saving_vs_handoff"] == 0.10
    assert figures["restart_worst_extra_cost_vs_handoff"] == 0.5
    assert abs(figures["coarse_minus_baton_verified_success"] - (-0.1)) < 1e-12
    assert abs(figures["coarse_cost_per_verified_vs_baton"] - 0.25) < 1e-12
    assert figures["duplicate_effects"]["naive"] == 3 and figures["stale_evidence_accepted"]["naive"] == 4


def test_without_a_sweep_no_cell_is_claimed() -> None:
    figures = headline([_row("baton", 1.0, 2.0), _row("coarse_checkpoints", 1.0, 2.0)], [])
    assert figures["cells_total"] == 0 and figures["cells_where_restart_beats_handoff"] == 0
    assert figures["restart_best_saving_vs_handoff"] is None
