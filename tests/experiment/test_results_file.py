"""The experiment file contract (tables, columns, atomic replace) that the dashboard reads."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from baton.experiment.results import (TABLES, ExperimentResult, experiment_path, read_experiment,
                                      write_experiment)

CONTRACT = {
    "experiment_meta": "experiment_id command seed runs sweep git_commit started_at seconds parameters_json",
    "strategy_summary": "experiment_id strategy label runs verified success_rate success_low success_high "
                        "duplicate_effects stale_evidence_accepted total_cost_usd cost_per_verified_usd "
                        "mean_completion_s p95_completion_s compute_s interventions",
    "run_outcomes": "experiment_id strategy run_index agent_kind length_class steps faults consequential verified "
                    "duplicate_effects stale_evidence_accepted cost_usd compute_s completion_s handoffs reason "
                    "migration_class interventions",
    "sweep_cells": "experiment_id strategy run_length fault_rate runs success_rate cost_per_verified_usd "
                   "mean_completion_s duplicate_effects winner",
    "experiment_metrics": "experiment_id strategy name kind value numerator denominator low high p50 p95 unit count",
    "sweep_outcomes": "experiment_id strategy run_length fault_rate agent_kind reason migration_class runs verified "
                      "cost_usd completion_s duplicate_effects stale_evidence_accepted",
}


def _meta(experiment_id: str) -> dict[str, object]:
    return {"experiment_id": experiment_id, "command": "baton experiment", "seed": 1, "runs": 0, "sweep": False,
            "git_commit": "abc", "started_at": "2026-12-02T00:00:00+00:00", "seconds": 0.5, "parameters_json": "{}"}


def test_empty_result_writes_every_table_with_the_contract_columns(tmp_path: Path) -> None:
    path = experiment_path(tmp_path)
    assert path == tmp_path / "analytics" / "experiment.duckdb"
    counts = write_experiment(ExperimentResult(meta=_meta("e1"), summary=[], outcomes={}), path)
    assert counts == {"experiment_meta": 1, "strategy_summary": 0, "run_outcomes": 0, "sweep_cells": 0,
                      "experiment_metrics": 0, "sweep_outcomes": 0}
    with duckdb.connect(str(path), read_only=True) as con:
        for table, columns in CONTRACT.items():
            names = [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()]
            assert names == columns.split(), table
    assert set(TABLES) == set(CONTRACT)
    snapshot = read_experiment(path)
    assert snapshot is not None and snapshot.meta["experiment_id"] == "e1" and snapshot.summary == []


def test_rewrite_replaces_the_file_whole_and_leaves_no_scratch(tmp_path: Path) -> None:
    path = experiment_path(tmp_path)
    write_experiment(ExperimentResult(meta=_meta("first"), summary=[], outcomes={}), path)
    reader = read_experiment(path)
    write_experiment(ExperimentResult(meta=_meta("second"), summary=[], outcomes={}), path)
    assert reader is not None and reader.meta["experiment_id"] == "first"
    again = read_experiment(path)
    assert again is not None and again.meta["experiment_id"] == "second"
    assert sorted(p.name for p in path.parent.iterdir()) == ["experiment.duckdb"]


def test_a_failed_write_keeps_the_previous_file(tmp_path: Path) -> None:
    path = experiment_path(tmp_path)
    write_experiment(ExperimentResult(meta=_meta("kept"), summary=[], outcomes={}), path)
    with pytest.raises(ValueError, match="missing column"):
        write_experiment(ExperimentResult(meta=_meta("bad"), summary=[{"strategy": "baton"}], outcomes={}), path)
    snapshot = read_experiment(path)
    assert snapshot is not None and snapshot.meta["experiment_id"] == "kept"
    assert sorted(p.name for p in path.parent.iterdir()) == ["experiment.duckdb"]


def test_no_file_reads_as_none(tmp_path: Path) -> None:
    assert read_experiment(experiment_path(tmp_path)) is None
