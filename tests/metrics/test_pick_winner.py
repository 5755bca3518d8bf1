"""The sweep's winner rule: the cheapest safe strategy, where a tenth of a per cent is a tie that time decides."""

from __future__ import annotations

from typing import Any

from baton.metrics.experiment_outcomes import pick_winner


def _row(strategy: str, cost: float | None, time_s: float, *, success: float = 1.0, dup: int = 0,
         stale: int = 0) -> dict[str, Any]:
    return {"strategy": strategy, "cost_per_verified_usd": cost, "mean_completion_s": time_s, "success_rate": success,
            "duplicate_effects": dup, "stale_evidence_accepted": stale}


def test_a_cheaper_strategy_wins_when_the_difference_is_real() -> None:
    assert pick_winner([_row("baton", 3.30, 100.0), _row("restart", 3.28, 90.0)], ("baton", "restart")) == "restart"


def test_costs_within_a_tenth_of_a_per_cent_tie_and_the_faster_wins() -> None:
    cell = [_row("baton", 3.2930, 1332.0), _row("retry_same_placement", 3.2929, 1511.0)]
    assert pick_winner(cell, ("baton", "retry_same_placement")) == "baton"
    assert pick_winner([_row("baton", 3.2930, 1600.0), cell[1]], ("baton", "retry_same_placement")) \
        == "retry_same_placement"


def test_a_tie_goes_to_the_higher_success_rate_before_time() -> None:
    cell = [_row("a", 1.000, 10.0, success=0.99), _row("b", 1.0005, 20.0, success=1.0)]
    assert pick_winner(cell, ("a", "b")) == "b"


def test_an_unsafe_strategy_never_wins_on_price() -> None:
    cell = [_row("naive", 1.0, 1.0, dup=1), _row("competent", 1.0, 1.0, stale=2), _row("baton", 2.0, 5.0)]
    assert pick_winner(cell, ("baton", "naive", "competent")) == "baton"
    assert pick_winner([_row("naive", 1.0, 1.0, dup=1)]) is None
