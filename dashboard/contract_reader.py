"""TEMPORARY reader of the experiment file strictly per contract-17, until baton.experiment.results is merged."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

EXPERIMENT_FILE = "experiment.duckdb"


@dataclass(frozen=True)
class ExperimentSnapshot:
    path: Path
    meta: dict[str, Any]
    summary: list[dict[str, Any]]
    sweep: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)


def experiment_path(home: Path) -> Path:
    return home / "analytics" / EXPERIMENT_FILE


def read_experiment(path: Path) -> ExperimentSnapshot | None:
    if not path.is_file():
        return None
    with duckdb.connect(str(path), read_only=True) as con:
        def rows(sql: str) -> list[dict[str, Any]]:
            cursor = con.execute(sql)
            names = [c[0] for c in cursor.description]
            return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        meta = rows("SELECT * FROM experiment_meta")
        return ExperimentSnapshot(path, meta[0] if meta else {}, rows("SELECT * FROM strategy_summary ORDER BY strategy"),
                                  rows("SELECT * FROM sweep_cells ORDER BY run_length, fault_rate, strategy"),
                                  rows("SELECT * FROM experiment_metrics ORDER BY strategy, name"))
