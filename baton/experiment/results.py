"""The experiment's DuckDB file (the contract with the dashboard): tables, atomic write, read-only read."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from baton.experiment.strategies import interventions_for
from baton.metrics.experiment_outcomes import outcome_rows

EXPERIMENT_FILE = "experiment.duckdb"

# Table name -> (column, DuckDB type), in the contract's order. Every table exists even when empty.
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "experiment_meta": (
        ("experiment_id", "VARCHAR"), ("command", "VARCHAR"), ("seed", "BIGINT"), ("runs", "BIGINT"),
        ("sweep", "BOOLEAN"), ("git_commit", "VARCHAR"), ("started_at", "VARCHAR"), ("seconds", "DOUBLE"),
        ("parameters_json", "VARCHAR")),
    "strategy_summary": (
        ("experiment_id", "VARCHAR"), ("strategy", "VARCHAR"), ("label", "VARCHAR"), ("runs", "BIGINT"),
        ("verified", "BIGINT"), ("success_rate", "DOUBLE"), ("success_low", "DOUBLE"), ("success_high", "DOUBLE"),
        ("duplicate_effects", "BIGINT"), ("stale_evidence_accepted", "BIGINT"), ("total_cost_usd", "DOUBLE"),
        ("cost_per_verified_usd", "DOUBLE"), ("mean_completion_s", "DOUBLE"), ("p95_completion_s", "DOUBLE"),
        ("compute_s", "DOUBLE"), ("interventions", "BIGINT")),
    "run_outcomes": (
        ("experiment_id", "VARCHAR"), ("strategy", "VARCHAR"), ("run_index", "BIGINT"), ("agent_kind", "VARCHAR"),
        ("length_class", "VARCHAR"), ("steps", "BIGINT"), ("faults", "BIGINT"), ("consequential", "BOOLEAN"),
        ("verified", "BOOLEAN"), ("duplicate_effects", "BIGINT"), ("stale_evidence_accepted", "BIGINT"),
        ("cost_usd", "DOUBLE"), ("compute_s", "DOUBLE"), ("completion_s", "DOUBLE"), ("handoffs", "BIGINT"),
        ("reason", "VARCHAR"), ("migration_class", "VARCHAR"),
        ("interventions", "BIGINT")),
    "sweep_cells": (
        ("experiment_id", "VARCHAR"), ("strategy", "VARCHAR"), ("run_length", "BIGINT"), ("fault_rate", "DOUBLE"),
        ("runs", "BIGINT"), ("success_rate", "DOUBLE"), ("cost_per_verified_usd", "DOUBLE"),
        ("mean_completion_s", "DOUBLE"), ("duplicate_effects", "BIGINT"), ("winner", "BOOLEAN")),
    "sweep_outcomes": (
        ("experiment_id", "VARCHAR"), ("strategy", "VARCHAR"), ("run_length", "BIGINT"), ("fault_rate", "DOUBLE"),
        ("agent_kind", "VARCHAR"), ("reason", "VARCHAR"), ("migration_class", "VARCHAR"), ("runs", "BIGINT"),
        ("verified", "BIGINT"), ("cost_usd", "DOUBLE"), ("completion_s", "DOUBLE"), ("duplicate_effects", "BIGINT"),
        ("stale_evidence_accepted", "BIGINT")),
    "experiment_metrics": (
        ("experiment_id", "VARCHAR"), ("strategy", "VARCHAR"), ("name", "VARCHAR"), ("kind", "VARCHAR"),
        ("value", "DOUBLE"), ("numerator", "BIGINT"), ("denominator", "BIGINT"), ("low", "DOUBLE"),
        ("high", "DOUBLE"), ("p50", "DOUBLE"), ("p95", "DOUBLE"), ("unit", "VARCHAR"), ("count", "BIGINT")),
}

Rows = Sequence[Mapping[str, Any]]
Columns = Mapping[str, Sequence[Any]]


@dataclass(frozen=True)
class ExperimentResult:
    """Everything one `baton experiment` produced, table by table.

    `outcomes` is columnar (column name -> one value per run and strategy), since it holds
    runs x strategies rows; the other tables are lists of row dicts.
    """

    meta: Mapping[str, Any]
    summary: Rows
    outcomes: Columns
    sweep: Rows = ()
    metrics: Rows = ()
    sweep_groups: Rows = ()


@dataclass(frozen=True)
class ExperimentSnapshot:
    """What one experiment wrote, as the dashboard reads it."""

    path: Path
    meta: dict[str, Any]
    summary: list[dict[str, Any]]
    sweep: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)


def experiment_path(home: Path) -> Path:
    """BATON_HOME/analytics/experiment.duckdb, beside the metrics export."""
    return home / "analytics" / EXPERIMENT_FILE


def _frame(table: str, data: Rows | Columns) -> pd.DataFrame:
    names = [name for name, _ in TABLES[table]]
    frame = pd.DataFrame(dict(data)) if isinstance(data, Mapping) else pd.DataFrame(list(data))
    missing = [name for name in names if name not in frame.columns] if len(frame) else []
    if missing:
        raise ValueError(f"table {table}: missing column(s) {', '.join(missing)}")
    return frame.reindex(columns=names)


def write_experiment(result: ExperimentResult, path: Path) -> dict[str, int]:
    """Write every table into a file beside `path`, then rename it over `path`; returns row counts per table."""
    sources: dict[str, Rows | Columns] = {
        "experiment_meta": [result.meta], "strategy_summary": result.summary, "run_outcomes": result.outcomes,
        "sweep_cells": result.sweep, "experiment_metrics": result.metrics, "sweep_outcomes": result.sweep_groups,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    scratch.unlink(missing_ok=True)
    counts: dict[str, int] = {}
    con = duckdb.connect(str(scratch))
    try:
        for table, columns in TABLES.items():
            con.execute(f"CREATE TABLE {table} ({', '.join(f'{n} {t}' for n, t in columns)})")
            frame = _frame(table, sources[table])
            if len(frame):
                con.register("source_frame", frame)
                casts = ", ".join(f"CAST(source_frame.{n} AS {t})" for n, t in columns)
                con.execute(f"INSERT INTO {table} SELECT {casts} FROM source_frame")
                con.unregister("source_frame")
            counts[table] = len(frame)
        con.execute("CHECKPOINT")
    except BaseException:
        con.close()
        scratch.unlink(missing_ok=True)
        raise
    con.close()
    os.replace(scratch, path)
    return counts


def read_experiment(path: Path) -> ExperimentSnapshot | None:
    """The latest experiment (read-only connection), or None when none has been written."""
    if not path.is_file():
        return None
    with duckdb.connect(str(path), read_only=True) as con:
        meta = _dicts(con, "SELECT * FROM experiment_meta")
        return ExperimentSnapshot(
            path=path, meta=meta[0] if meta else {},
            summary=_dicts(con, "SELECT * FROM strategy_summary ORDER BY strategy"),
            sweep=_dicts(con, "SELECT * FROM sweep_cells ORDER BY run_length, fault_rate, strategy"),
            metrics=_dicts(con, "SELECT * FROM experiment_metrics ORDER BY strategy, name"))


def _dicts(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def run_rows(path: Path) -> list[dict[str, Any]]:
    """`run_outcomes` as the dashboard filters it: `outcome_rows`, with the per-run interventions of a file
    written before runs carried them rebuilt by `rebuild_interventions`."""
    rows = outcome_rows(path)
    if not any(row["interventions"] is None for row in rows):
        return rows
    snapshot = read_experiment(path)
    return rebuild_interventions(rows, {row["strategy"]: row["interventions"]
                                        for row in (snapshot.summary if snapshot else [])})


def rebuild_interventions(rows: list[dict[str, Any]], totals: Mapping[str, int | None]) -> list[dict[str, Any]]:
    """Fill a missing per-run `interventions` from the run's faults (`interventions_for`), strategy by strategy,
    only where the rebuilt runs add up to the strategy's stored total (`totals`, from `strategy_summary`);
    a strategy whose runs do not add up keeps None (unknown)."""
    rebuilt: dict[str, list[int | None]] = {}
    for row in rows:
        if row["interventions"] is None:
            faults = row.get("faults")
            rebuilt.setdefault(row["strategy"], []).append(
                None if faults is None else interventions_for(row["strategy"], int(faults)))
    confirmed = {strategy for strategy, values in rebuilt.items()
                 if None not in values and totals.get(strategy) is not None
                 and sum(v for v in values if v is not None) == totals[strategy]}
    return [row | {"interventions": interventions_for(row["strategy"], int(row["faults"]))}
            if row["interventions"] is None and row["strategy"] in confirmed else row for row in rows]
