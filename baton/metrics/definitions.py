"""The twelve handoff-quality metrics of sec. 25, and verified success with and without handoff.

Every definition is one SQL query over the tables of `baton.metrics.load`. A handoff is one
`handoff_requested`; it commits with the `ownership_transferred` (or rolls back with the
`handoff_aborted`) that follows it. What the new owner did (adoption, revalidation, the verified
first transition) is attributed to the latest transfer before it, because a run can be asked to
move again before its new owner has resumed. Rates carry their numerator, denominator and a 95% Wilson interval; a metric with nothing
to measure is None, never zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from baton.metrics.intervals import wilson

SCHEMA_REASONS = ("state_schema_incompatible", "schema_transform_forbidden", "schema_transform_required")

_RUN_EVENTS = "CREATE OR REPLACE TEMP VIEW run_events AS SELECT * FROM events WHERE run_id <> 'baton:catalog'"

# Every event of a run numbered by the handoff request and the transfer it falls in (read models use it).
_WINDOWED = """
CREATE OR REPLACE TEMP VIEW windowed AS
    SELECT *,
           sum(CASE WHEN event_type = 'handoff_requested' THEN 1 ELSE 0 END) OVER w AS request_no,
           sum(CASE WHEN event_type = 'ownership_transferred' THEN 1 ELSE 0 END) OVER w AS transfer_no
    FROM run_events WINDOW w AS (PARTITION BY run_id ORDER BY seq ROWS UNBOUNDED PRECEDING)
"""

# The per-handoff tables are materialized once per computation (not views): every metric reads them,
# and re-running the window over a million events for each metric would dominate the cost.
_HANDOFF_TABLES = """
CREATE OR REPLACE TEMP TABLE handoff_window AS
    SELECT run_id, seq, ts, event_type,
           event_type = 'operation_reconciled' AND json_extract_string(detail, '$.state') = 'UNKNOWN' AS unknown_left,
           sum(CASE WHEN event_type = 'handoff_requested' THEN 1 ELSE 0 END) OVER w AS request_no,
           sum(CASE WHEN event_type = 'ownership_transferred' THEN 1 ELSE 0 END) OVER w AS transfer_no
    FROM run_events
    WHERE event_type IN ('handoff_requested', 'ownership_transferred', 'handoff_aborted', 'authority_downgraded',
                         'resume_verified', 'revalidation_failed', 'revalidation_started',
                         'reverification_required', 'operation_reconciled')
    WINDOW w AS (PARTITION BY run_id ORDER BY seq ROWS UNBOUNDED PRECEDING);
CREATE OR REPLACE TEMP TABLE requests AS
    SELECT run_id, request_no,
           min(ts) FILTER (WHERE event_type = 'handoff_requested') AS requested_at,
           bool_or(event_type = 'ownership_transferred') AS committed,
           bool_or(event_type = 'handoff_aborted') AS aborted,
           bool_or(event_type = 'authority_downgraded') AS downgraded
    FROM handoff_window WHERE request_no > 0 GROUP BY run_id, request_no;
CREATE OR REPLACE TEMP TABLE transfers AS
    SELECT run_id, transfer_no,
           max(request_no) FILTER (WHERE event_type = 'ownership_transferred') AS request_no,
           min(ts) FILTER (WHERE event_type = 'resume_verified') AS verified_at,
           bool_or(event_type = 'revalidation_failed') AS revalidation_failed,
           bool_or(event_type IN ('revalidation_started', 'reverification_required')) AS revalidated,
           bool_or(unknown_left) AS left_unknown
    FROM handoff_window WHERE transfer_no > 0 GROUP BY run_id, transfer_no;
CREATE OR REPLACE TEMP TABLE moves AS
    SELECT r.*, t.transfer_no, t.verified_at, coalesce(t.revalidation_failed, false) AS revalidation_failed,
           coalesce(t.revalidated, false) AS revalidated, coalesce(t.left_unknown, false) AS left_unknown
    FROM requests r LEFT JOIN transfers t USING (run_id, request_no);
DROP TABLE handoff_window;
"""


@dataclass(frozen=True)
class Rate:
    name: str
    numerator: int
    denominator: int

    @property
    def value(self) -> float | None:
        return self.numerator / self.denominator if self.denominator else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson(self.numerator, self.denominator)


@dataclass(frozen=True)
class Distribution:
    name: str
    unit: str
    count: int
    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class Count:
    name: str
    value: int


@dataclass(frozen=True)
class VerifiedSuccess:
    kind: str
    handoff: str
    migration_class: str
    verified: int
    finished: int

    @property
    def rate(self) -> Rate:
        return Rate(f"verified success, {self.kind}, {self.handoff}, {self.migration_class}", self.verified,
                    self.finished)


Metric = Rate | Distribution | Count


def _prepare(con: duckdb.DuckDBPyConnection, *, handoffs: bool = True) -> None:
    """Create what the definitions read: the `run_events` and `windowed` views, and (with `handoffs`) the
    `requests`, `transfers` and `moves` tables."""
    con.execute(_RUN_EVENTS)
    con.execute(_WINDOWED)
    if handoffs:
        for statement in filter(str.strip, _HANDOFF_TABLES.split(";")):
            con.execute(statement)


def _rate(con: duckdb.DuckDBPyConnection, name: str, sql: str) -> Rate:
    row = con.execute(sql).fetchone()
    assert row is not None
    return Rate(name, int(row[0] or 0), int(row[1] or 0))


def _distribution(con: duckdb.DuckDBPyConnection, name: str, unit: str, values_sql: str) -> Distribution:
    row = con.execute(f"SELECT count(v), quantile_cont(v, 0.5), quantile_cont(v, 0.95) FROM ({values_sql}) AS t(v)"
                      ).fetchone()
    assert row is not None
    count = int(row[0])
    return Distribution(name, unit, count, float(row[1]) if count else None, float(row[2]) if count else None)


def handoff_metrics(con: duckdb.DuckDBPyConnection) -> list[Metric]:
    """The twelve metrics of sec. 25, in the chapter's order."""
    _prepare(con, handoffs=True)
    schema_reasons = ", ".join(f"'{reason}'" for reason in SCHEMA_REASONS)
    return [
        _rate(con, "handoff success rate",
              "SELECT count(*) FILTER (WHERE committed AND verified_at IS NOT NULL AND NOT revalidation_failed), "
              "count(*) FROM moves"),
        _rate(con, "resume failure rate",
              "SELECT count(*) FILTER (WHERE revalidation_failed OR verified_at IS NULL), count(*) FROM transfers"),
        _distribution(con, "checkpoint latency", "ms",
                      "SELECT epoch_ms(sealed_at) - epoch_ms(ts) FROM ("
                      " SELECT ts, event_type, lead(ts) OVER w AS sealed_at, lead(event_type) OVER w AS next_type"
                      " FROM run_events WHERE event_type IN ('checkpoint_started', 'checkpoint_sealed')"
                      " WINDOW w AS (PARTITION BY run_id ORDER BY seq))"
                      " WHERE event_type = 'checkpoint_started' AND next_type = 'checkpoint_sealed'"),
        _distribution(con, "checkpoint size", "manifest bytes", "SELECT bytes FROM checkpoint_sizes"),
        _distribution(con, "recovery time", "s",
                      "SELECT (epoch_ms(verified_at) - epoch_ms(requested_at)) / 1000.0 FROM moves "
                      "WHERE committed AND verified_at IS NOT NULL"),
        _rate(con, "revalidation rate", "SELECT count(*) FILTER (WHERE revalidated), count(*) FROM transfers"),
        _rate(con, "handoff-induced UNKNOWN rate", "SELECT count(*) FILTER (WHERE left_unknown), count(*) FROM moves"),
        Count("duplicate-side-effect incidents", int(con.execute(
            "SELECT count(*) FROM (SELECT run_id, logical_operation FROM effects GROUP BY ALL HAVING count(*) > 1)"
        ).fetchone()[0])),  # type: ignore[index]
        Count("stale-worker rejections", int(con.execute(
            "SELECT count(*) FROM run_events WHERE event_type = 'stale_worker_rejected'").fetchone()[0])),  # type: ignore[index]
        _rate(con, "state incompatibility rate",
              "SELECT count(*) FILTER (WHERE list_has_any(json_extract_string(decision, '$.reasons[*]'), "
              f"[{schema_reasons}])), count(*) FROM run_events "
              "WHERE event_type IN ('compatibility_passed', 'compatibility_failed') AND decision IS NOT NULL"),
        _rate(con, "handoff rollback rate",
              "SELECT count(*) FILTER (WHERE aborted AND NOT committed), count(*) FROM requests"),
        _rate(con, "authority downgrade rate",
              "SELECT count(*) FILTER (WHERE downgraded), count(*) FROM requests WHERE committed"),
    ]


def verified_success(con: duckdb.DuckDBPyConnection) -> list[VerifiedSuccess]:
    """Verified success of finished runs, with versus without a committed handoff, by kind and migration class."""
    _prepare(con, handoffs=False)
    rows = con.execute("""
        WITH finished AS (
            SELECT run_id, arg_max(reason, seq) AS status FROM run_events
            WHERE event_type = 'run_finished' GROUP BY run_id),
        moved AS (
            SELECT run_id, count(*) FILTER (WHERE event_type = 'ownership_transferred') AS moves,
                   arg_max(json_extract_string(decision, '$.migration_class'), seq)
                       FILTER (WHERE event_type = 'compatibility_passed') AS migration_class,
                   arg_max(json_extract_string(detail, '$.kind'), seq)
                       FILTER (WHERE event_type = 'run_created') AS created_kind
            FROM run_events GROUP BY run_id)
        SELECT coalesce(r.kind, m.created_kind, 'unknown') AS kind,
               CASE WHEN coalesce(m.moves, 0) > 0 THEN 'with handoff' ELSE 'without handoff' END AS handoff,
               CASE WHEN coalesce(m.moves, 0) > 0 THEN coalesce(m.migration_class, 'unknown') ELSE 'none' END,
               count(*) FILTER (WHERE f.status = 'verified'), count(*)
        FROM finished f LEFT JOIN moved m USING (run_id) LEFT JOIN runs r USING (run_id)
        GROUP BY ALL ORDER BY ALL
    """).fetchall()
    return [VerifiedSuccess(str(k), str(h), str(c), int(v), int(n)) for k, h, c, v, n in rows]


prepare_views = _prepare
"""The views the definitions share, for read models that attribute events the same way (baton.metrics.handoffs)."""
