"""The trend of the headline metrics: every export carries the previous file's snapshots forward.

DuckDB has one writer (the `handoff_metrics` asset). Each export builds a new file, copies the
history of the file it replaces into it (read-only ATTACH), appends its own snapshot and renames
the new file over the old one, so the dashboard never sees a half-written history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

HISTORY_TABLE = "metric_history"
MAX_SNAPSHOTS = 1440
"""Snapshots kept: a day of the one-minute `metrics_refresh` schedule."""

HISTORY_COLUMNS = ("name VARCHAR, kind VARCHAR, value DOUBLE, numerator BIGINT, denominator BIGINT, low DOUBLE, "
                   "high DOUBLE, p50 DOUBLE, p95 DOUBLE, unit VARCHAR, count BIGINT, measured_at VARCHAR")


def carry_history(out: duckdb.DuckDBPyConnection, previous: Path, *, keep: int = MAX_SNAPSHOTS) -> int:
    """Create `metric_history` in `out` from the previous export's history (its latest `keep - 1` snapshots).

    A previous file written before history existed contributes its single `handoff_metrics` snapshot.
    Returns the number of rows carried.
    """
    if keep < 1:
        raise ValueError(f"keep must be at least 1 snapshot, not {keep}")
    out.execute(f"CREATE TABLE {HISTORY_TABLE} ({HISTORY_COLUMNS})")
    if not previous.is_file():
        return 0
    out.execute(f"ATTACH '{_quoted(previous)}' AS previous (READ_ONLY)")
    try:
        tables = {row[0] for row in out.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'previous'").fetchall()}
        source = HISTORY_TABLE if HISTORY_TABLE in tables else "handoff_metrics" if "handoff_metrics" in tables else None
        if source is None:
            return 0
        out.execute(f"""
            INSERT INTO {HISTORY_TABLE}
            SELECT name, kind, value, numerator, denominator, low, high, p50, p95, unit, count, measured_at
            FROM previous.{source}
            WHERE measured_at IN (SELECT DISTINCT measured_at FROM previous.{source}
                                  ORDER BY measured_at DESC LIMIT {keep - 1})""")
        row = out.execute(f"SELECT count(*) FROM {HISTORY_TABLE}").fetchone()
        return int(row[0]) if row else 0
    finally:
        out.execute("DETACH previous")


def read_history(path: Path) -> list[dict[str, Any]]:
    """Every snapshot in the export at `path`, oldest first ([] without a file or a history table)."""
    if not path.is_file():
        return []
    with duckdb.connect(str(path), read_only=True) as con:
        tables = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if HISTORY_TABLE not in tables:
            return []
        cursor = con.execute(f"SELECT * FROM {HISTORY_TABLE} ORDER BY measured_at, name")
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
