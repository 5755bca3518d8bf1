"""Filters on the Strategies page reach the human-assisted interventions of an old file and the sweep charts.

Every expected figure below is worked out by hand from the crafted rows; the files are written by the
experiment's own writer (then aged with DuckDB where a test needs a file from an older writer).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
from streamlit.testing.v1 import AppTest

from baton.experiment.results import TABLES, ExperimentResult, experiment_path, read_experiment, run_rows, \
    write_experiment
from baton.metrics.experiment_outcomes import outcome_rows, strategy_figures
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
