"""Figures over the experiment file's per-run rows (contract-17), so the dashboard can filter them.

The experiment writes one row per run and strategy (`run_outcomes`). `success_cells` groups one
strategy's runs by agent kind, by whether they moved and by the class of their first move, with 95%
Wilson intervals, in the cells `baton.metrics.figures.verified_success_figure` draws for the live
fleet; `strategy_figures` recomputes the per-strategy summary over any subset of the rows.

The sweep writes its runs grouped by cell, strategy, agent kind, reason and migration class
(`sweep_outcomes`, sums per group); `filtered_sweep` rebuilds the sweep's cells, and each cell's winner
by `pick_winner` (the sweep's own rule), over the groups that pass the filters.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from baton.metrics.intervals import wilson

UNKNOWN = "unknown"
"""Reason and migration class of runs in a file written before `run_outcomes` carried them."""

OUTCOME_COLUMNS = ("strategy", "run_index", "agent_kind", "reason", "migration_class", "verified",
                   "duplicate_effects", "stale_evidence_accepted", "cost_usd", "compute_s", "completion_s",
                   "handoffs", "faults", "interventions")
_LATER_COLUMNS = {"reason": f"'{UNKNOWN}'", "migration_class": f"'{UNKNOWN}'", "interventions": "NULL"}
"""Columns a file from an older writer may lack, and what they read as."""

SWEEP_GROUP_KEYS = ("strategy", "run_length", "fault_rate", "agent_kind", "reason", "migration_class")
SWEEP_GROUP_SUMS = ("runs", "verified", "cost_usd", "completion_s", "duplicate_effects", "stale_evidence_accepted")
SWEEP_GROUP_COLUMNS = SWEEP_GROUP_KEYS + SWEEP_GROUP_SUMS
"""One `sweep_outcomes` row: a group of one sweep cell's runs under one strategy, and its sums."""


def success_cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cells (kind, handoff, migration_class, verified, finished, rate, low, high) over `rows` (one strategy's
    run rows, already filtered); a run with handoffs is counted under the class of its first move."""
    counts: dict[tuple[str, str, str], list[int]] = {}
    for row in rows:
        moved = bool(row["handoffs"])
        key = (row["agent_kind"], "with handoff" if moved else "without handoff",
               row["migration_class"] if moved else "none")
        cell = counts.setdefault(key, [0, 0])
        cell[0] += int(bool(row["verified"]))
        cell[1] += 1
    cells: list[dict[str, Any]] = []
    for (kind, handoff, migration), (verified, finished) in sorted(counts.items()):
        low, high = wilson(verified, finished) or (None, None)
        cells.append({"kind": kind, "handoff": handoff, "migration_class": migration, "verified": verified,
                      "finished": finished, "rate": verified / finished if finished else None, "low": low,
                      "high": high})
    return cells


def outcome_rows(path: Path) -> list[dict[str, Any]]:
    """Every row of `run_outcomes` (the columns the figures need); a column an older file lacks reads as
    `_LATER_COLUMNS` says (reason and migration class UNKNOWN, interventions None)."""
    if not path.is_file():
        return []
    with duckdb.connect(str(path), read_only=True) as con:
        present = {row[0] for row in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'run_outcomes'").fetchall()}
        if not present:
            return []
        select = ", ".join(name if name in present else f"{_LATER_COLUMNS.get(name, 'NULL')} AS {name}"
                           for name in OUTCOME_COLUMNS)
        cursor = con.execute(f"SELECT {select} FROM run_outcomes ORDER BY strategy, run_index")
        return [dict(zip(OUTCOME_COLUMNS, row, strict=True)) for row in cursor.fetchall()]


def strategy_figure(verified: np.ndarray, duplicates: np.ndarray, stale: np.ndarray, cost_usd: np.ndarray,
                    completion_s: np.ndarray, compute_s: np.ndarray,
                    interventions: np.ndarray | None) -> dict[str, Any]:
    """One strategy's figures over its runs (one array entry per run), in `strategy_summary`'s shape."""
    runs, ok = int(verified.size), int(verified.sum())
    low, high = wilson(ok, runs) or (None, None)
    total = float(cost_usd.sum())
    return {
        "runs": runs, "verified": ok, "success_rate": ok / runs if runs else None, "success_low": low,
        "success_high": high, "duplicate_effects": int(duplicates.sum()), "stale_evidence_accepted": int(stale.sum()),
        "total_cost_usd": total, "cost_per_verified_usd": total / ok if ok else None,
        "mean_completion_s": float(completion_s.mean()) if runs else None,
        "p95_completion_s": float(np.quantile(completion_s, 0.95)) if runs else None,
        "compute_s": float(compute_s.sum()),
        "interventions": None if interventions is None else int(interventions.sum()),
    }


def strategy_figures(rows: list[dict[str, Any]], summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-strategy rows in `strategy_summary`'s shape, recomputed over the (already filtered) run rows.

    Strategy order and labels come from `summary`; a strategy none of whose runs passed has zero runs.
    Interventions are None only for a file written before runs carried them.
    """
    by_strategy: dict[str, list[dict[str, Any]]] = {row["strategy"]: [] for row in summary}
    for row in rows:
        by_strategy.setdefault(row["strategy"], []).append(row)
    labels = {row["strategy"]: row.get("label") for row in summary}

    def column(runs: list[dict[str, Any]], name: str, dtype: type) -> np.ndarray:
        return np.asarray([r[name] for r in runs], dtype=dtype)

    return [{"strategy": strategy, "label": labels.get(strategy)} | strategy_figure(
                column(runs, "verified", bool), column(runs, "duplicate_effects", np.int64),
                column(runs, "stale_evidence_accepted", np.int64), column(runs, "cost_usd", float),
                column(runs, "completion_s", float), column(runs, "compute_s", float),
                None if any(r["interventions"] is None for r in runs) else column(runs, "interventions", np.int64))
            for strategy, runs in by_strategy.items()]


TIE = 1e-3
"""Relative difference under which two costs per verified run tie: a tenth of a per cent is no win on price (it is
below what the calibration's measured latencies can resolve: e.g. a handoff's seconds of compute over a cell)."""


def pick_winner(cell: list[dict[str, Any]], order: Sequence[str] = ()) -> str | None:
    """The strategy that wins one sweep cell (its rows, one per strategy): the lowest cost per verified run among
    those with no duplicate effect and no stale evidence accepted; costs within `TIE` of the lowest tie, and ties go
    to the higher success rate, then to the shorter mean time to completion, then to the strategy first in `order`
    (else in `cell`); None when none qualifies."""
    safe = [row for row in cell if row["duplicate_effects"] == 0 and row["stale_evidence_accepted"] == 0
            and row["cost_per_verified_usd"] is not None]
    if not safe:
        return None
    cheapest = min(row["cost_per_verified_usd"] for row in safe)
    tied = [row for row in safe if row["cost_per_verified_usd"] <= cheapest + abs(cheapest) * TIE]
    rank = {strategy: index for index, strategy in enumerate(order)}
    position = {id(row): index for index, row in enumerate(cell)}
    best = min(tied, key=lambda row: (-row["success_rate"], row.get("mean_completion_s") or 0.0,
                                      rank.get(row["strategy"], len(rank)), position[id(row)]))
    return str(best["strategy"])


def sweep_group_rows(strategy: str, run_length: int, fault_rate: float, kinds: np.ndarray, reasons: np.ndarray,
                     classes: np.ndarray, verified: np.ndarray, cost_usd: np.ndarray, completion_s: np.ndarray,
                     duplicates: np.ndarray, stale: np.ndarray) -> list[dict[str, Any]]:
    """One strategy's runs of one sweep cell (one array entry per run), summed per (agent kind, reason,
    migration class), in `sweep_outcomes`' shape."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for i in range(int(verified.size)):
        sums = groups.setdefault((str(kinds[i]), str(reasons[i]), str(classes[i])), [0, 0, 0.0, 0.0, 0, 0])
        sums[0] += 1
        sums[1] += int(bool(verified[i]))
        sums[2] += float(cost_usd[i])
        sums[3] += float(completion_s[i])
        sums[4] += int(duplicates[i])
        sums[5] += int(stale[i])
    return [dict(zip(SWEEP_GROUP_KEYS, (strategy, run_length, fault_rate, *key), strict=True))
            | dict(zip(SWEEP_GROUP_SUMS, sums, strict=True)) for key, sums in sorted(groups.items())]


def sweep_groups(path: Path) -> list[dict[str, Any]] | None:
    """Every row of `sweep_outcomes`, or None for a file written before the sweep kept its runs' agent kind,
    reason and migration class (they are unknown there: only per-cell totals exist)."""
    if not path.is_file():
        return None
    with duckdb.connect(str(path), read_only=True) as con:
        present = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'sweep_outcomes'")
        if not present.fetchone()[0]:
            return None
        cursor = con.execute(f"SELECT {', '.join(SWEEP_GROUP_COLUMNS)} FROM sweep_outcomes "
                             "ORDER BY run_length, fault_rate, strategy, agent_kind, reason, migration_class")
        return [dict(zip(SWEEP_GROUP_COLUMNS, row, strict=True)) for row in cursor.fetchall()]


def filtered_sweep(groups: list[dict[str, Any]], sweep: list[dict[str, Any]],
                   order: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The sweep's cells in `sweep_cells`' shape, recomputed over the (already filtered) groups, each cell's
    winner picked again by `pick_winner` (`order`: the engine's strategy order, for ties); every (cell, strategy)
    of `sweep` stays, with zero runs if none passed."""
    sums: dict[tuple[str, int, float], list[float]] = {
        (c["strategy"], c["run_length"], c["fault_rate"]): [0, 0, 0.0, 0.0, 0, 0] for c in sweep}
    for group in groups:
        total = sums.setdefault((group["strategy"], group["run_length"], group["fault_rate"]), [0, 0, 0.0, 0.0, 0, 0])
        for index, name in enumerate(SWEEP_GROUP_SUMS):
            total[index] += group[name]
    experiment = sweep[0].get("experiment_id") if sweep else None
    cells: dict[tuple[int, float], list[dict[str, Any]]] = {}
    for (strategy, length, rate), (runs, verified, cost, completion, duplicates, stale) in sums.items():
        cells.setdefault((length, rate), []).append({
            "experiment_id": experiment, "strategy": strategy, "run_length": length, "fault_rate": rate,
            "runs": int(runs), "success_rate": verified / runs if runs else None,
            "cost_per_verified_usd": cost / verified if verified else None,
            "mean_completion_s": completion / runs if runs else None, "duplicate_effects": int(duplicates),
            "stale_evidence_accepted": int(stale), "winner": False})
    out: list[dict[str, Any]] = []
    for key in sorted(cells):
        rows = sorted(cells[key], key=lambda row: row["strategy"])
        winner = pick_winner(rows, order)
        out.extend(row | {"winner": row["strategy"] == winner} for row in rows)
    return out


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
