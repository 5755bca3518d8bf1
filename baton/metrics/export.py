"""Write the metrics to a DuckDB file the dashboard reads (one writer; atomic replace)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import duckdb

from baton import clock
from baton.metrics.definitions import Count, Distribution, Rate, handoff_metrics, verified_success
from baton.metrics.history import HISTORY_TABLE, carry_history
from baton.metrics.load import EffectRecord, load_from_store
from baton.store.base import SqlStore

ANALYTICS_FILE = "metrics.duckdb"


def analytics_path(home: Path) -> Path:
    return home / "analytics" / ANALYTICS_FILE


def export_metrics(store: SqlStore, effects: list[EffectRecord], path: Path,
                   *, now: dt.datetime | None = None) -> dict[str, int]:
    """Compute every metric over the store's log and write tables `handoff_metrics` and `verified_success`.

    The file is built beside `path` and renamed over it, so a reader never sees a half-written file.
    Table `metric_history` carries the replaced file's snapshots forward and appends this one.
    Returns row counts per table.
    """
    measured_at = (now or clock.now()).isoformat()
    source = load_from_store(store, effects)
    metrics = handoff_metrics(source)
    success = verified_success(source)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(f".tmp-{os.getpid()}")
    scratch.unlink(missing_ok=True)
    out = duckdb.connect(str(scratch))
    try:
        out.execute("CREATE TABLE handoff_metrics (name VARCHAR, kind VARCHAR, value DOUBLE, numerator BIGINT, "
                    "denominator BIGINT, low DOUBLE, high DOUBLE, p50 DOUBLE, p95 DOUBLE, unit VARCHAR, "
                    "count BIGINT, measured_at VARCHAR)")
        for metric in metrics:
            out.execute("INSERT INTO handoff_metrics VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        _metric_row(metric, measured_at))
        carry_history(out, path)
        out.execute(f"INSERT INTO {HISTORY_TABLE} SELECT * FROM handoff_metrics")
        history = out.execute(f"SELECT count(*) FROM {HISTORY_TABLE}").fetchone()
        out.execute("CREATE TABLE verified_success (kind VARCHAR, handoff VARCHAR, migration_class VARCHAR, "
                    "verified BIGINT, finished BIGINT, rate DOUBLE, low DOUBLE, high DOUBLE)")
        for cell in success:
            interval = cell.rate.interval or (None, None)
            out.execute("INSERT INTO verified_success VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (cell.kind, cell.handoff, cell.migration_class, cell.verified, cell.finished,
                         cell.rate.value, interval[0], interval[1]))
        out.execute("CHECKPOINT")
    finally:
        out.close()
    os.replace(scratch, path)
    return {"handoff_metrics": len(metrics), "verified_success": len(success),
            HISTORY_TABLE: int(history[0]) if history else 0}


def _metric_row(metric: Rate | Distribution | Count, measured_at: str) -> tuple[object, ...]:
    if isinstance(metric, Rate):
        low, high = metric.interval or (None, None)
        return (metric.name, "rate", metric.value, metric.numerator, metric.denominator, low, high, None, None,
                None, metric.denominator, measured_at)
    if isinstance(metric, Distribution):
        return (metric.name, "distribution", metric.p50, None, None, None, None, metric.p50, metric.p95,
                metric.unit, metric.count, measured_at)
    return (metric.name, "count", float(metric.value), metric.value, None, None, None, None, None, None, None,
            measured_at)
