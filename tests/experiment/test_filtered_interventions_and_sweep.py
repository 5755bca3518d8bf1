"""Filters on the Strategies page reach the human-assisted interventions of an old file and the sweep charts.

Every expected figure below is worked out by hand from the crafted rows; the files are written by the
experiment's own writer (then aged with DuckDB where a test needs a file from an older writer).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from baton.experiment.results import TABLES, ExperimentResult, experiment_path, read_experiment, run_rows, \
    write_experiment
from baton.experiment.run import run_experiment
from baton.experiment.strategies import ORDER
from baton.metrics.experiment_outcomes import filtered_sweep, outcome_rows, simpler_wins, strategy_figures, \
    sweep_groups
from dashboard.filters import Filters

PAGE = Path(__file__).resolve().parents[2] / "dashboard" / "pages" / "2_Strategies.py"

# (strategy, run, reason, migration class, faults, interventions). Human-assisted recovery intervenes once per
# fault (the engine's rule); Baton never calls a human.
RUNS = [
    ("baton", 0, "crash", "PHYSICAL", 2, 0),
    ("baton", 1, "placement_lost", "BEHAVIORAL", 1, 0),
    ("baton", 2, "crash", "PHYSICAL", 1, 0),
    ("baton", 3, "none", "none", 0, 0),
    ("human_assisted", 0, "crash", "PHYSICAL", 2, 2),
    ("human_assisted", 1, "placement_lost", "BEHAVIORAL", 1, 1),
    ("human_assisted", 2, "crash", "PHYSICAL", 1, 1),
    ("human_assisted", 3, "none", "none", 0, 0),
]


def _meta(sweep: bool) -> dict[str, object]:
    return {"experiment_id": "crafted", "command": "crafted", "seed": 1, "runs": 4, "sweep": sweep,
            "git_commit": "abc", "started_at": "2026-12-02T00:00:00+00:00", "seconds": 0.1, "parameters_json": "{}"}


def _summary(human_total: int) -> list[dict[str, object]]:
    rows = []
    for strategy, total in (("baton", 0), ("human_assisted", human_total)):
        rows.append({"experiment_id": "crafted", "strategy": strategy, "label": strategy, "runs": 4, "verified": 4,
                     "success_rate": 1.0, "success_low": None, "success_high": None, "duplicate_effects": 0,
                     "stale_evidence_accepted": 0, "total_cost_usd": 4.0, "cost_per_verified_usd": 1.0,
                     "mean_completion_s": 10.0, "p95_completion_s": 10.0, "compute_s": 4.0, "interventions": total})
    return rows


def _outcomes() -> dict[str, list[object]]:
    columns: dict[str, list[object]] = {name: [] for name, _ in TABLES["run_outcomes"]}
    for strategy, run, reason, migration, faults, interventions in RUNS:
        row = {"experiment_id": "crafted", "strategy": strategy, "run_index": run, "agent_kind": "coding",
               "length_class": "short", "steps": 5, "faults": faults, "consequential": False, "verified": True,
               "duplicate_effects": 0, "stale_evidence_accepted": 0, "cost_usd": 1.0, "compute_s": 1.0,
               "completion_s": 10.0, "handoffs": 0 if migration == "none" else 1, "reason": reason,
               "migration_class": migration, "interventions": interventions}
        for name in columns:
            columns[name].append(row[name])
    return columns


def _old_file_without_interventions(path: Path, human_total: int = 4) -> None:
    """A file as the writer before per-run interventions left it: the summary has totals, the runs none."""
    write_experiment(ExperimentResult(meta=_meta(False), summary=_summary(human_total), outcomes=_outcomes()), path)
    with duckdb.connect(str(path)) as con:
        con.execute("ALTER TABLE run_outcomes DROP COLUMN interventions")


def _interventions(rows: list[dict[str, object]], path: Path, filters: Filters) -> dict[str, object]:
    snapshot = read_experiment(path)
    assert snapshot is not None
    kept = [r for r in rows if filters.keep(r, kind="agent_kind", reason="reason", migration_class="migration_class")]
    return {row["strategy"]: row["interventions"] for row in strategy_figures(kept, snapshot.summary)}


def _page(path: Path) -> AppTest:
    app = AppTest.from_file(str(PAGE), default_timeout=90).run()
    assert not app.exception, app.exception
    return app


def _text(app: AppTest) -> str:
    return " ".join([c.value for c in app.caption] + [i.value for i in app.info] + [m.value for m in app.markdown])


# --- gap 1: human-assisted interventions under a filter, in a file written before runs carried them ----------------

def test_an_old_files_interventions_are_rebuilt_per_run_and_filter_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _old_file_without_interventions(path)
    assert all(r["interventions"] is None for r in outcome_rows(path))  # what the file itself holds
    rows = run_rows(path)
    # crash: human runs 0 and 2, 2 + 1 faults -> 3 interventions; Baton calls no human.
    assert _interventions(rows, path, Filters(reasons=("crash",))) == {"baton": 0, "human_assisted": 3}
    # BEHAVIORAL: human run 1, one fault -> 1.
    assert _interventions(rows, path, Filters(classes=("BEHAVIORAL",))) == {"baton": 0, "human_assisted": 1}
    # none: run 3, no fault -> 0; unfiltered the rebuilt runs give the stored total back.
    assert _interventions(rows, path, Filters(reasons=("none",))) == {"baton": 0, "human_assisted": 0}
    assert _interventions(rows, path, Filters()) == {"baton": 0, "human_assisted": 4}


def test_totals_that_do_not_add_up_leave_the_interventions_unknown(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _old_file_without_interventions(path, human_total=5)  # 5 != 2 + 1 + 1 + 0: the rule does not hold here
    assert _interventions(run_rows(path), path, Filters(reasons=("crash",))) == {"baton": 0, "human_assisted": None}


def test_the_strategies_page_shows_an_old_files_interventions_under_a_filter(baton_home: Path) -> None:
    _old_file_without_interventions(experiment_path(baton_home))
    app = _page(experiment_path(baton_home))
    app.sidebar.multiselect(key="filter_reason").set_value(["crash"]).run()
    assert not app.exception, app.exception
    table = app.dataframe[0].value.set_index("strategy")
    assert table.loc["human_assisted", "interventions"] == 3 and table.loc["baton", "interventions"] == 0
    assert "Interventions unknown" not in _text(app)


def test_the_strategies_page_names_interventions_it_cannot_rebuild(baton_home: Path) -> None:
    _old_file_without_interventions(experiment_path(baton_home), human_total=5)
    app = _page(experiment_path(baton_home))
    app.sidebar.multiselect(key="filter_reason").set_value(["crash"]).run()
    assert not app.exception, app.exception
    assert "Interventions unknown for human_assisted" in _text(app)


# --- gap 2: the sweep's crossover plot, winner map and sentence under the sidebar filters ---------------------------

# (strategy, run length, agent kind, reason, migration class, runs, verified, cost, completion, duplicates), all at
# fault rate 0.01. Coding runs struck a crash first; deploy runs saw no fault; Baton's coding runs moved PHYSICAL.
GROUPS = [
    ("baton", 4, "coding", "crash", "PHYSICAL", 2, 2, 4.0, 20.0, 0),
    ("baton", 4, "deploy", "none", "none", 2, 1, 6.0, 30.0, 0),
    ("restart", 4, "coding", "crash", "none", 2, 2, 2.0, 40.0, 0),
    ("restart", 4, "deploy", "none", "none", 2, 2, 10.0, 40.0, 1),
    ("baton", 16, "coding", "crash", "PHYSICAL", 2, 2, 8.0, 20.0, 0),
    ("baton", 16, "deploy", "none", "none", 2, 2, 8.0, 20.0, 0),
    ("restart", 16, "coding", "crash", "none", 2, 0, 6.0, 40.0, 0),
    ("restart", 16, "deploy", "none", "none", 2, 2, 4.0, 40.0, 0),
]
# The stored cells, worked out from GROUPS: length 4: baton 4 runs, 3 verified, $10 -> $3.33 per verified run;
# restart $12 / 4 = $3.00 but one duplicate effect, so it cannot win -> baton. Length 16: baton $16 / 4 = $4.00,
# restart $10 / 2 = $5.00 -> baton.
CELLS = [
    ("baton", 4, 4, 0.75, 10.0 / 3, 12.5, 0, True),
    ("restart", 4, 4, 1.0, 3.0, 20.0, 1, False),
    ("baton", 16, 4, 1.0, 4.0, 10.0, 0, True),
    ("restart", 16, 4, 0.5, 5.0, 20.0, 0, False),
]


def _sweep_file(path: Path) -> None:
    groups = [{"experiment_id": "crafted", "strategy": s, "run_length": n, "fault_rate": 0.01, "agent_kind": k,
               "reason": r, "migration_class": m, "runs": runs, "verified": ok, "cost_usd": cost,
               "completion_s": done, "duplicate_effects": dup, "stale_evidence_accepted": 0}
              for s, n, k, r, m, runs, ok, cost, done, dup in GROUPS]
    cells = [{"experiment_id": "crafted", "strategy": s, "run_length": n, "fault_rate": 0.01, "runs": runs,
              "success_rate": rate, "cost_per_verified_usd": cost, "mean_completion_s": done,
              "duplicate_effects": dup, "winner": won} for s, n, runs, rate, cost, done, dup, won in CELLS]
    write_experiment(ExperimentResult(meta=_meta(True), summary=_summary(4), outcomes=_outcomes(), sweep=cells,
                                      sweep_groups=groups), path)


def _winners(sweep: list[dict[str, object]]) -> dict[int, str]:
    return {int(c["run_length"]): str(c["strategy"]) for c in sweep if c["winner"]}


def _filtered(path: Path, filters: Filters) -> list[dict[str, object]]:
    snapshot = read_experiment(path)
    groups = sweep_groups(path)
    assert snapshot is not None and groups is not None
    return filtered_sweep([g for g in groups if filters.keep(g, kind="agent_kind", reason="reason",
                                                               migration_class="migration_class")], snapshot.sweep)


def test_the_sweep_recomputed_over_the_filtered_runs_gives_the_hand_worked_winners(tmp_path: Path) -> None:
    path = tmp_path / "sweep.duckdb"
    _sweep_file(path)
    everything = _filtered(path, Filters())
    assert _winners(everything) == {4: "baton", 16: "baton"}  # the stored winners, from the groups
    # coding only: length 4, baton $4 / 2 = $2.00 against restart $2 / 2 = $1.00 (no duplicate) -> restart;
    # length 16, restart verified none (no cost per verified run) -> baton at $8 / 2 = $4.00.
    coding = _filtered(path, Filters(kinds=("coding",)))
    assert _winners(coding) == {4: "restart", 16: "baton"}
    by = {(c["strategy"], c["run_length"]): c for c in coding}
    assert by[("restart", 4)]["cost_per_verified_usd"] == 1.0 and by[("baton", 4)]["cost_per_verified_usd"] == 2.0
    assert by[("restart", 16)]["cost_per_verified_usd"] is None and by[("restart", 16)]["success_rate"] == 0.0
    assert by[("baton", 4)]["mean_completion_s"] == 10.0 and by[("restart", 4)]["runs"] == 2
    assert simpler_wins(coding) == [{"strategy": "restart", "run_length": 4, "fault_rate": 0.01,
                                     "cost_per_verified_usd": 1.0, "baton_cost_per_verified_usd": 2.0,
                                     "cheaper_by": 0.5}]
    # deploy (reason "none" is the same runs): length 4, restart's duplicate rules it out -> baton at $6;
    # length 16, restart $4 / 2 = $2.00 against baton $8 / 2 = $4.00 -> restart.
    assert _winners(_filtered(path, Filters(kinds=("deploy",)))) == {4: "baton", 16: "restart"}
    assert _winners(_filtered(path, Filters(reasons=("none",)))) == {4: "baton", 16: "restart"}
    # PHYSICAL: only Baton's coding runs moved; restart keeps its rows with zero runs and cannot win.
    physical = _filtered(path, Filters(classes=("PHYSICAL",)))
    assert _winners(physical) == {4: "baton", 16: "baton"}
    assert [(c["strategy"], c["runs"]) for c in physical if c["run_length"] == 4] == [("baton", 2), ("restart", 0)]


def _chart(app: AppTest, key: str) -> dict[str, object]:
    chart = next(c for c in app.get("plotly_chart") if c.proto.id.endswith(key) or key in c.proto.id)
    return json.loads(chart.proto.spec)


def _map_winners(app: AppTest) -> dict[str, str]:
    heatmap = _chart(app, "winners")["data"][0]
    return {length: text for length, row in zip(heatmap["y"], heatmap["text"], strict=True) for text in row if text}


def test_the_strategies_page_filters_the_sweep_charts(baton_home: Path) -> None:
    _sweep_file(experiment_path(baton_home))
    app = _page(experiment_path(baton_home))
    assert _map_winners(app) == {"4": "baton", "16": "baton"}
    assert "Baton's safe handoff wins all 2 cells" in _text(app)
    app.sidebar.multiselect(key="filter_kind").set_value(["coding"]).run()
    assert not app.exception, app.exception
    assert _map_winners(app) == {"4": "restart", "16": "baton"}
    text = _text(app)
    assert "A simpler strategy wins 1 of 2 cells: restart at length 4, fault rate 0.01 (50.0% cheaper" in text
    assert "recomputed over the sweep's runs that pass the filters (8 of 16 runs" in text
    assert "cannot apply to the crossover plot" not in text
    app.selectbox(key="sweep_length").set_value(16).run()
    lines = {trace["name"]: trace["y"] for trace in _chart(app, "crossover")["data"]}
    assert lines == {"baton": [4.0], "restart": [None]}


def test_an_old_sweep_names_the_filters_that_cannot_apply(baton_home: Path) -> None:
    path = experiment_path(baton_home)
    _sweep_file(path)
    with duckdb.connect(str(path)) as con:
        con.execute("DROP TABLE sweep_outcomes")
    assert sweep_groups(path) is None
    app = _page(path)
    app.sidebar.multiselect(key="filter_kind").set_value(["coding"]).run()
    assert not app.exception, app.exception
    text = _text(app)
    assert ("The filters (agent kind coding) cannot apply to the crossover plot, the winner map or the sentence "
            "under them: this file's sweep was written before it kept each run's agent kind") in text
    assert _map_winners(app) == {"4": "baton", "16": "baton"}  # every run of each cell, as stored


def test_the_engines_sweep_groups_add_up_to_its_cells(tmp_path: Path) -> None:
    path = tmp_path / "experiment.duckdb"
    write_experiment(run_experiment(40, 7, sweep=True, command="baton experiment --runs 40 --seed 7 --sweep").result,
                     path)
    snapshot = read_experiment(path)
    groups = sweep_groups(path)
    assert snapshot is not None and groups
    assert {g["migration_class"] for g in groups} >= {"PHYSICAL", "BEHAVIORAL", "none"}
    mine = {(c["strategy"], c["run_length"], c["fault_rate"]): c for c in filtered_sweep(groups, snapshot.sweep, ORDER)}
    for theirs in snapshot.sweep:
        cell = mine[(theirs["strategy"], theirs["run_length"], theirs["fault_rate"])]
        assert cell["runs"] == theirs["runs"] and cell["duplicate_effects"] == theirs["duplicate_effects"]
        assert cell["winner"] == theirs["winner"]
        for key in ("success_rate", "cost_per_verified_usd", "mean_completion_s"):
            assert cell[key] == pytest.approx(theirs[key]), key
