"""Read models over the event log for the dashboard: one row per handoff request, and one run's timeline.

Requests are attributed exactly as the metric definitions attribute them (their shared views), so
the filters the dashboard offers (agent kind, reason, migration class, time window) select the same
handoffs the metrics count.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import duckdb

from baton.metrics.definitions import prepare_views
from baton.models import Event

def handoff_requests(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every handoff request in a loaded log: run, kind, when, why, migration class and outcome."""
    prepare_views(con)
    cursor = con.execute("""
        WITH detail AS (
            SELECT run_id, request_no,
                   arg_min(reason, seq) FILTER (WHERE event_type = 'handoff_requested') AS reason,
                   arg_max(json_extract_string(decision, '$.migration_class'), seq)
                       FILTER (WHERE event_type IN ('compatibility_passed', 'compatibility_failed')) AS migration_class
            FROM windowed WHERE request_no > 0 GROUP BY run_id, request_no),
        kinds AS (
            SELECT run_id, arg_min(json_extract_string(detail, '$.kind'), seq) AS created_kind
            FROM run_events WHERE event_type = 'run_created' GROUP BY run_id)
        SELECT q.run_id, q.request_no, q.requested_at,
               coalesce(r.kind, k.created_kind, 'unknown') AS kind,
               coalesce(d.reason, 'unstated') AS reason,
               coalesce(d.migration_class, 'undecided') AS migration_class,
               CASE WHEN q.committed THEN 'committed' WHEN q.aborted THEN 'rolled back' ELSE 'pending' END AS outcome,
               q.downgraded
        FROM requests q LEFT JOIN detail d USING (run_id, request_no)
             LEFT JOIN runs r USING (run_id) LEFT JOIN kinds k USING (run_id)
        ORDER BY q.requested_at, q.run_id, q.request_no""")
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@dataclass(frozen=True)
class TimelineEntry:
    """One event of a run as the timeline shows it."""

    seq: int
    at: dt.datetime
    event_type: str
    epoch: int | None
    placement: str
    reason: str
    migration_class: str

    def row(self) -> dict[str, Any]:
        return {"seq": self.seq, "at": self.at, "event": self.event_type, "epoch": self.epoch,
                "placement": self.placement, "reason": self.reason, "migration class": self.migration_class}


def run_timeline(events: Iterable[tuple[int, Event]]) -> list[TimelineEntry]:
    """A run's events in log order, with the placement move, epoch and decision each one names."""
    entries: list[TimelineEntry] = []
    for seq, event in events:
        source, target = event.source_placement, event.target_placement
        placement = f"{source} -> {target}" if source and target and source != target else (target or source or "")
        decision = event.compatibility_decision or {}
        entries.append(TimelineEntry(
            seq=seq, at=event.at, event_type=event.event_type.value,
            epoch=event.target_epoch if event.target_epoch is not None else event.source_epoch,
            placement=placement, reason=event.reason or "",
            migration_class=str(decision.get("migration_class") or "")))
    return entries

