"""Read the exported metrics file (read-only), as the dashboard does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb


@dataclass(frozen=True)
class MetricsSnapshot:
    """What one export wrote: the metric rows and the verified-success cells."""

    path: Path
    metrics: list[dict[str, Any]]
    success: list[dict[str, Any]]

    @property
    def measured_at(self) -> str | None:
        return self.metrics[0]["measured_at"] if self.metrics else None


def read_snapshot(path: Path) -> MetricsSnapshot | None:
    """The latest export, or None when no export has been written yet."""
    if not path.is_file():
        return None
    with duckdb.connect(str(path), read_only=True) as con:
        metrics = _dicts(con, "SELECT * FROM handoff_metrics")
        success = _dicts(con, "SELECT * FROM verified_success ORDER BY kind, handoff, migration_class")
    return MetricsSnapshot(path=path, metrics=metrics, success=success)


def _dicts(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def metric_text(row: dict[str, Any]) -> tuple[str, str]:
    """(headline, detail) for one metric row; 'n/a' when nothing was measured."""
    if row["kind"] == "rate":
        if row["value"] is None:
            return "n/a", "nothing to measure yet"
        return f"{row['value']:.1%}", f"{row['numerator']}/{row['denominator']}, 95% CI {row['low']:.0%} to {row['high']:.0%}"
    if row["kind"] == "distribution":
        if row["p50"] is None:
            return "n/a", "nothing to measure yet"
        return f"{row['p50']:.4g} {row['unit']}", f"p50 of {row['count']}; p95 {row['p95']:.4g} {row['unit']}"
    return f"{int(row['value'])}", "count"
