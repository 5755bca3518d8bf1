"""Cached reads for the dashboard pages, keyed on the files' modification stamps.

Every analytics file is opened read-only and replaced atomically by its one writer, so a cached read
stays valid until the file's stamp changes. Baton's store is read through its own interface; an
embedded SQLite store is keyed on its database and WAL files, a PostgreSQL store on a short clock.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import streamlit as st

from baton import clock
from baton.experiment.results import ExperimentSnapshot, experiment_path, read_experiment, run_rows
from baton.metrics.definitions import handoff_metrics, verified_success
from baton.metrics.experiment_outcomes import sweep_groups
from baton.metrics.export import _metric_row, analytics_path
from baton.metrics.fault_matrix import read_fault_matrix
from baton.metrics.handoffs import handoff_requests, run_timeline
from baton.metrics.history import read_history
from baton.metrics.load import load_from_store
from baton.metrics.read import MetricsSnapshot, read_snapshot
from baton.metrics.target_effects import target_effects
from baton.models.events import CATALOG_EVENT_RUN_ID
from baton.store.factory import SQLITE_FILENAME, baton_home, database_url, open_store

ROOT = Path(__file__).resolve().parents[1]
STORE_POLL_S = 5.0
FAULT_MATRIX_FILE = "fault-matrix.json"

Stamp = tuple[int, int] | None


def stamp(path: Path) -> Stamp:
    """(mtime in ns, size) of a file, or None when it does not exist: the cache key of a read."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_mtime_ns, info.st_size


def home() -> Path:
    return baton_home()


def store_stamp() -> tuple[object, ...]:
    """What changes when the store does: the SQLite files' stamps, or a 5 s clock tick for PostgreSQL."""
    url = database_url()
    if url:
        return (url, int(time.time() // STORE_POLL_S))
    db = home() / SQLITE_FILENAME
    return (str(db), stamp(db), stamp(db.with_name(db.name + "-wal")))


def metrics_path() -> Path:
    return analytics_path(home())


def experiment_file() -> Path:
    return experiment_path(home())


def fault_matrix_file() -> Path:
    """BATON_FAULT_MATRIX, else BATON_HOME/analytics/fault-matrix.json, else the committed docs/fault-matrix.json."""
    named = os.environ.get("BATON_FAULT_MATRIX")
    if named:
        return Path(named)
    local = home() / "analytics" / FAULT_MATRIX_FILE
    return local if local.is_file() else ROOT / "docs" / FAULT_MATRIX_FILE


@st.cache_data(show_spinner=False)
def _snapshot(path: str, key: Stamp) -> MetricsSnapshot | None:
    return read_snapshot(Path(path))


@st.cache_data(show_spinner=False)
def _history(path: str, key: Stamp) -> list[dict[str, Any]]:
    return read_history(Path(path))


@st.cache_data(show_spinner=False)
def _experiment(path: str, key: Stamp) -> ExperimentSnapshot | None:
    return read_experiment(Path(path))


@st.cache_data(show_spinner=False)
def _run_rows(path: str, key: Stamp) -> list[dict[str, Any]]:
    return run_rows(Path(path))


@st.cache_data(show_spinner=False)
def _sweep_groups(path: str, key: Stamp) -> list[dict[str, Any]] | None:
    return sweep_groups(Path(path))


@st.cache_data(show_spinner=False)
def _fault_matrix(path: str, key: Stamp) -> dict[str, Any] | None:
    return read_fault_matrix(Path(path))


def snapshot() -> MetricsSnapshot | None:
    path = metrics_path()
    return _snapshot(str(path), stamp(path))


def history() -> list[dict[str, Any]]:
    path = metrics_path()
    return _history(str(path), stamp(path))


def experiment() -> ExperimentSnapshot | None:
    path = experiment_file()
    return _experiment(str(path), stamp(path))


def experiment_runs() -> list[dict[str, Any]]:
    """Every row of the experiment's `run_outcomes` (in an old file: reason and migration class "unknown",
    interventions rebuilt where the stored totals confirm them, else None)."""
    path = experiment_file()
    return _run_rows(str(path), stamp(path))


def experiment_sweep_groups() -> list[dict[str, Any]] | None:
    """The sweep's runs grouped by cell, strategy, agent kind, reason and migration class; None for a file
    written before the sweep kept them."""
    path = experiment_file()
    return _sweep_groups(str(path), stamp(path))


def fault_matrix() -> tuple[Path, dict[str, Any] | None]:
    path = fault_matrix_file()
    return path, _fault_matrix(str(path), stamp(path))


@st.cache_data(show_spinner=False, ttl=60)
def _store_view(key: tuple[object, ...]) -> dict[str, list[dict[str, Any]]]:
    store = open_store(database_url(), home())
    try:
        runs = store.list_runs()
        con = load_from_store(store)
        try:
            requests = handoff_requests(con)
            cursor = con.execute("SELECT seq, ts AS at, run_id AS run, event_type AS event, coalesce(reason, '') AS reason "
                                 "FROM events ORDER BY seq DESC LIMIT 50")
            names = [column[0] for column in cursor.description]
            recent = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            con.close()
    finally:
        store.close()
    return {
        "runs": [{"run": r.run_id, "kind": r.kind.value, "status": r.status, "placement": r.placement or "",
                  "created": r.created_at, "updated": r.updated_at} for r in runs],
        "requests": requests,
        "recent": recent,
    }


def store_view() -> dict[str, list[dict[str, Any]]]:
    """Runs, handoff requests and the latest events of Baton's store (cached until the store changes)."""
    return _store_view(store_stamp())


@st.cache_data(show_spinner=False, ttl=60)
def _timeline(run_id: str, key: tuple[object, ...]) -> list[dict[str, Any]]:
    store = open_store(database_url(), home())
    try:
        return [entry.row() for entry in run_timeline(store.list_events(run_id=run_id))]
    finally:
        store.close()


def timeline(run_id: str) -> list[dict[str, Any]]:
    return _timeline(run_id, store_stamp())


@st.cache_data(show_spinner=False, ttl=60)
def _runs_snapshot(run_ids: tuple[str, ...], key: tuple[object, ...]) -> MetricsSnapshot:
    store = open_store(database_url(), home())
    try:
        con = load_from_store(store, target_effects(home()))
    finally:
        store.close()
    try:
        con.execute("CREATE TEMP TABLE kept (run_id VARCHAR)")
        # Catalog events (placement and release changes) belong to no agent run and stay.
        con.executemany("INSERT INTO kept VALUES (?)", [(run,) for run in (*run_ids, CATALOG_EVENT_RUN_ID)])
        for table in ("events", "runs", "effects", "checkpoint_sizes"):
            con.execute(f"DELETE FROM {table} WHERE run_id IS NOT NULL AND run_id NOT IN (SELECT run_id FROM kept)")
        measured_at = clock.now().isoformat()
        metrics = [dict(zip(_METRIC_COLUMNS, _metric_row(m, measured_at), strict=True)) for m in handoff_metrics(con)]
        success = [{"kind": c.kind, "handoff": c.handoff, "migration_class": c.migration_class,
                    "verified": c.verified, "finished": c.finished, "rate": c.rate.value,
                    "low": (c.rate.interval or (None, None))[0], "high": (c.rate.interval or (None, None))[1]}
                   for c in verified_success(con)]
    finally:
        con.close()
    return MetricsSnapshot(path=home(), metrics=metrics, success=success)


_METRIC_COLUMNS = ("name", "kind", "value", "numerator", "denominator", "low", "high", "p50", "p95", "unit", "count",
                   "measured_at")


def runs_snapshot(run_ids: list[str]) -> MetricsSnapshot:
    """The twelve metrics and the verified-success cells recomputed now over these runs' events, effects and
    checkpoints only (the same definitions the export uses), cached until the store changes."""
    return _runs_snapshot(tuple(sorted(run_ids)), store_stamp())
