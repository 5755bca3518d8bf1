"""run_outcomes carries each run's reason and migration class; the Strategies page filters on them.

The crafted file's per-strategy figures are worked out by hand below; the engine's columns are checked
against the run's own fault and handoff counts; an old file without the columns reads as "unknown".
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from baton.experiment.results import TABLES, ExperimentResult, experiment_path, read_experiment, write_experiment
from baton.experiment.run import run_experiment
from baton.experiment.strategies import BY_ID
from baton.experiment.workload import FAULT_KINDS
from baton.metrics.experiment_outcomes import UNKNOWN, outcome_rows, strategy_figures
from dashboard.filters import Filters

PAGE = Path(__file__).resolve().parents[2] / "dashboard" / "pages" / "2_Strategies.py"

# (strategy, run, reason, migration class, verified, cost, duplicates)
RUNS = [
    ("baton", 0, "crash", "PHYSICAL", True, 1.0, 0),
    ("baton", 1, "placement_lost", "BEHAVIORAL", True, 2.0, 0),
    ("baton", 2, "ambiguous", "PHYSICAL", False, 4.0, 1),
    ("baton", 3, "none", "none", True, 8.0, 0),
    ("restart", 0, "crash", "none", False, 1.0, 0),
    ("restart", 1, "placement_lost", "none", True, 3.0, 0),
    ("restart", 2, "ambiguous", "none", False, 5.0, 1),
    ("restart", 3, "none", "none", True, 7.0, 0),
]


def _meta() -> dict[str, object]:
    return {"experiment_id": "crafted", "command": "crafted", "seed": 1, "runs": 4, "sweep": False,
            "git_commit": "abc", "started_at": "2026-12-02T00:00:00+00:00", "seconds": 0.1, "parameters_json": "{}"}


def _summary_row(strategy: str) -> dict[str, object]:
    mine = [r for r in RUNS if r[0] == strategy]
    verified = sum(r[4] for r in mine)
    total = sum(r[5] for r in mine)
    return {"experiment_id": "crafted", "strategy": strategy, "label": strategy.upper(), "runs": len(mine),
            "verified": verified, "success_rate": verified / len(mine), "success_low": None, "success_high": None,
            "duplicate_effects": sum(r[6] for r in mine), "stale_evidence_accepted": 0, "total_cost_usd": total,
            "cost_per_verified_usd": total / verified, "mean_completion_s": 10.0, "p95_completion_s": 10.0,
            "compute_s": 1.0, "interventions": 0}


def _crafted(path: Path) -> None:
    columns = {name: [] for name, _ in TABLES["run_outcomes"]}
    for strategy, run, reason, migration, verified, cost, duplicates in RUNS:
        row = {"experiment_id": "crafted", "strategy": strategy, "run_index": run, "agent_kind": "coding",
               "length_class": "short", "steps": 5, "faults": 0 if reason == "none" else 1, "consequential": False,
               "verified": verified, "duplicate_effects": duplicates, "stale_evidence_accepted": 0, "cost_usd": cost,
               "compute_s": 1.0, "completion_s": 10.0, "handoffs": 0 if migration == "none" else 1,
               "reason": reason, "migration_class": migration, "interventions": 0}
        for name in columns:
            columns[name].append(row[name])
    write_experiment(ExperimentResult(meta=_meta(), summary=[_summary_row("baton"), _summary_row("restart")],
                                      outcomes=columns), path)


def _figures(path: Path, filters: Filters) -> dict[str, dict[str, object]]:
    snapshot = read_experiment(path)
    assert snapshot is not None
    kept = [r for r in outcome_rows(path)
            if filters.keep(r, kind="agent_kind", reason="reason", migration_class="migration_class")]
    return {row["strategy"]: row for row in strategy_figures(kept, snapshot.summary)}


def _brief(row: dict[str, object]) -> tuple[object, ...]:
    return row["runs"], row["verified"], row["total_cost_usd"], row["cost_per_verified_usd"], row["duplicate_effects"]


def test_filtering_by_reason_and_class_gives_the_hand_worked_figures(tmp_path: Path) -> None:
    path = tmp_path / "experiment.duckdb"
    _crafted(path)
    everything = _figures(path, Filters())
    assert _brief(everything["baton"]) == (4, 3, 15.0, 5.0, 1)
    assert _brief(everything["restart"]) == (4, 2, 16.0, 8.0, 1)
    crash = _figures(path, Filters(reasons=("crash",)))
    assert _brief(crash["baton"]) == (1, 1, 1.0, 1.0, 0)
    assert _brief(crash["restart"]) == (1, 0, 1.0, None, 0)
    physical = _figures(path, Filters(classes=("PHYSICAL",)))
    assert _brief(physical["baton"]) == (2, 1, 5.0, 5.0, 1)
    assert _brief(physical["restart"]) == (0, 0, 0.0, None, 0) and physical["restart"]["success_rate"] is None
    both = _figures(path, Filters(reasons=("placement_lost", "ambiguous"), classes=("BEHAVIORAL",)))
    assert _brief(both["baton"]) == (1, 1, 2.0, 2.0, 0) and both["baton"]["label"] == "BATON"
    assert both["baton"]["success_rate"] == 1.0


def test_an_old_file_without_the_columns_reads_them_as_unknown(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _crafted(path)
    with duckdb.connect(str(path)) as con:
        con.execute("ALTER TABLE run_outcomes DROP COLUMN reason")
        con.execute("ALTER TABLE run_outcomes DROP COLUMN migration_class")
    rows = outcome_rows(path)
    assert len(rows) == len(RUNS)
    assert {r["reason"] for r in rows} == {r["migration_class"] for r in rows} == {UNKNOWN}
    assert _brief(_figures(path, Filters(reasons=(UNKNOWN,)))["baton"]) == (4, 3, 15.0, 5.0, 1)
    assert _figures(path, Filters(reasons=("crash",)))["baton"]["runs"] == 0


def test_the_engine_writes_each_runs_first_fault_and_first_move_class(tmp_path: Path) -> None:
    path = tmp_path / "experiment.duckdb"
    done = run_experiment(150, 7, sweep=False, command="baton experiment --runs 150 --seed 7")
    write_experiment(done.result, path)
    rows = outcome_rows(path)
    with duckdb.connect(str(path), read_only=True) as con:
        facts = {(s, i): (f, h) for s, i, f, h in con.execute(
            "SELECT strategy, run_index, faults, handoffs FROM run_outcomes").fetchall()}
    by_run: dict[int, set[str]] = {}
    for r in rows:
        faults, handoffs = facts[(r["strategy"], r["run_index"])]
        assert (r["reason"] == "none") == (faults == 0)
        assert r["reason"] in FAULT_KINDS or r["reason"] == "none"
        assert (r["migration_class"] == "none") == (handoffs == 0)
        assert r["migration_class"] in ("PHYSICAL", "BEHAVIORAL", "none")
        if not BY_ID[r["strategy"]].moves:
            assert r["migration_class"] == "none"
        by_run.setdefault(r["run_index"], set()).add(r["reason"])
    # The first fault strikes before any strategy's choices differ: every strategy names the same reason.
    assert all(len(reasons) == 1 for reasons in by_run.values())
    assert {r["migration_class"] for r in rows} >= {"PHYSICAL", "BEHAVIORAL", "none"}
    # Unfiltered, the recomputed figures are the engine's own strategy_summary.
    snapshot = read_experiment(path)
    assert snapshot is not None
    for mine, theirs in zip(strategy_figures(rows, snapshot.summary), snapshot.summary, strict=True):
        for key in ("strategy", "runs", "verified", "duplicate_effects", "stale_evidence_accepted"):
            assert mine[key] == theirs[key], key
        for key in ("total_cost_usd", "success_rate", "mean_completion_s", "p95_completion_s", "compute_s"):
            assert mine[key] == pytest.approx(theirs[key]), key


def test_the_strategies_page_applies_the_reason_and_class_filters(baton_home: Path) -> None:
    _crafted(experiment_path(baton_home))
    app = AppTest.from_file(str(PAGE), default_timeout=90).run()
    assert not app.exception, app.exception
    table = app.dataframe[0].value
    assert list(table["runs"]) == [4, 4]
    assert set(app.multiselect(key="filter_reason").options) == {"ambiguous", "crash", "none", "placement_lost"}
    app.multiselect(key="filter_reason").set_value(["crash"]).run()
    assert not app.exception, app.exception
    table = app.dataframe[0].value
    assert list(table["runs"]) == [1, 1] and list(table["verified"]) == [1, 0]
    app.multiselect(key="filter_reason").set_value([]).run()
    app.multiselect(key="filter_class").set_value(["PHYSICAL"]).run()
    assert not app.exception, app.exception
    table = app.dataframe[0].value
    assert list(table["strategy"]) == ["baton", "restart"]
    assert list(table["runs"]) == [2, 0] and list(table["total_cost_usd"]) == [5.0, 0.0]
