"""Each strategy's simulated event log, in Baton's event vocabulary, loaded into the metric tables.

The tables have the columns of `baton.metrics.load` (EVENT_COLUMNS and the others) and are
filled column-wise from numpy arrays, so a million events load in well under a second; the
metrics themselves are `baton.metrics.definitions`, unchanged.
"""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import numpy as np
import pandas as pd

from baton.metrics.load import CHECKPOINT_COLUMNS, EFFECT_COLUMNS, EVENT_COLUMNS, RUN_COLUMNS
from baton.models.events import EventType

EPOCH = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)
TYPES: tuple[EventType, ...] = tuple(EventType)
CODE = {event_type: index for index, event_type in enumerate(TYPES)}
# Small JSON payloads, by code: 0 means none.
PAYLOADS: tuple[str | None, ...] = (
    None,
    json.dumps({"state": "COMMITTED"}), json.dumps({"state": "NOT_COMMITTED"}), json.dumps({"state": "UNKNOWN"}),
    json.dumps({"migration_class": "PHYSICAL", "reasons": []}),
    json.dumps({"migration_class": "BEHAVIORAL", "reasons": []}),
    json.dumps({"migration_class": "PHYSICAL", "reasons": ["state_schema_incompatible"]}),
)
COMMITTED, NOT_COMMITTED, UNKNOWN, PHYSICAL, BEHAVIORAL, SCHEMA_FAILED = range(1, 7)


class Recorder:
    """Events of one strategy over the workload: point events, plus checkpoint segments expanded later."""

    def __init__(self, calibration_seal_ms: np.ndarray, seal: bool) -> None:
        self.run: list[int] = []
        self.code: list[int] = []
        self.at: list[float] = []
        self.payload: list[int] = []
        self.reason: list[str | None] = []
        # Checkpoint segments: run, wall time of the first boundary, step seconds, boundaries.
        self.seg_run: list[int] = []
        self.seg_t0: list[float] = []
        self.seg_dt: list[float] = []
        self.seg_n: list[int] = []
        self._seal_ms = calibration_seal_ms
        self.seal = seal

    def emit(self, run: int, event_type: EventType, at: float, payload: int = 0, reason: str | None = None) -> None:
        self.run.append(run)
        self.code.append(CODE[event_type])
        self.at.append(at)
        self.payload.append(payload)
        self.reason.append(reason)

    def checkpoints(self, run: int, t0: float, step_s: float, count: int) -> None:
        if count > 0:
            self.seg_run.append(run)
            self.seg_t0.append(t0)
            self.seg_dt.append(step_s)
            self.seg_n.append(count)

    def expand(self, rng: np.random.Generator, fixed_ms: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(run, boundary time s, seal latency ms) per checkpoint, latency drawn from the measured samples."""
        n = np.asarray(self.seg_n, dtype=np.int64)
        total = int(n.sum())
        run = np.repeat(np.asarray(self.seg_run, dtype=np.int64), n)
        offsets = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
        at = np.repeat(np.asarray(self.seg_t0), n) + (offsets + 1) * np.repeat(np.asarray(self.seg_dt), n)
        latency = (np.full(total, fixed_ms) if fixed_ms is not None
                   else rng.choice(self._seal_ms, size=total) if total else np.zeros(0))
        return run, at, latency


def load_tables(recorder: Recorder, checkpoints: tuple[np.ndarray, np.ndarray, np.ndarray], kinds: list[str],
                statuses: list[str], effects: list[tuple[int, str, str]], checkpoint_bytes: int,
                con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """The `events`, `runs`, `effects`, `checkpoint_sizes` tables of `baton.metrics.load`, from one log."""
    con = con or duckdb.connect()
    ck_run, ck_at, ck_ms = checkpoints
    started, sealed = CODE[EventType.CHECKPOINT_STARTED], CODE[EventType.CHECKPOINT_SEALED]
    run = np.concatenate([np.asarray(recorder.run, dtype=np.int64), ck_run, ck_run])
    code = np.concatenate([np.asarray(recorder.code, dtype=np.int64), np.full(ck_run.size, started),
                           np.full(ck_run.size, sealed)])
    at = np.concatenate([np.asarray(recorder.at, dtype=float), ck_at, ck_at + ck_ms / 1000.0])
    payload = np.concatenate([np.asarray(recorder.payload, dtype=np.int64), np.zeros(2 * ck_run.size, np.int64)])
    reason = np.concatenate([np.asarray(recorder.reason, dtype=object), np.full(2 * ck_run.size, None, object)])
    order = np.lexsort((np.arange(run.size), at, run))
    frame = pd.DataFrame({
        "seq": np.arange(1, run.size + 1), "run": run[order], "code": code[order],
        "us": np.round(at[order] * 1e6).astype(np.int64), "payload": payload[order], "reason": reason[order]})
    types = pd.DataFrame({"code": np.arange(len(TYPES)), "event_type": [t.value for t in TYPES]})
    payloads = pd.DataFrame({"payload": np.arange(len(PAYLOADS)), "body": list(PAYLOADS)})
    con.execute(f"CREATE OR REPLACE TABLE events ({EVENT_COLUMNS})")
    con.register("ev_frame", frame)
    con.register("ev_types", types)
    con.register("ev_payloads", payloads)
    base = EPOCH.isoformat()
    con.execute(f"""
        INSERT INTO events
        SELECT f.seq, 'run-' || f.run, t.event_type, TIMESTAMPTZ '{base}' + to_microseconds(f.us),
               NULL, NULL, NULL, NULL, NULL, NULL, f.reason, NULL, NULL, NULL,
               CASE WHEN t.event_type LIKE 'compatibility_%' THEN p.body::JSON END,
               CASE WHEN t.event_type = 'operation_reconciled' THEN p.body::JSON
                    WHEN t.event_type = 'run_created' THEN json_object('kind', f.reason)
                    END
        FROM ev_frame f JOIN ev_types t USING (code) JOIN ev_payloads p USING (payload)""")
    for name in ("ev_frame", "ev_types", "ev_payloads"):
        con.unregister(name)
    con.execute(f"CREATE OR REPLACE TABLE runs ({RUN_COLUMNS})")
    con.register("run_frame", pd.DataFrame({"i": np.arange(len(kinds)), "kind": kinds, "status": statuses}))
    con.execute("INSERT INTO runs SELECT 'run-' || i, kind, status FROM run_frame")
    con.unregister("run_frame")
    con.execute(f"CREATE OR REPLACE TABLE effects ({EFFECT_COLUMNS})")
    if effects:
        con.register("fx_frame", pd.DataFrame(effects, columns=["run", "op", "key"]))
        con.execute("INSERT INTO effects SELECT 'run-' || run, 'target', op, key FROM fx_frame")
        con.unregister("fx_frame")
    con.execute(f"CREATE OR REPLACE TABLE checkpoint_sizes ({CHECKPOINT_COLUMNS})")
    # Sizes are of Baton's sealed manifests only; a transcript write has no manifest to measure.
    con.register("ck_frame", pd.DataFrame({"run": ck_run if recorder.seal else ck_run[:0]}))
    con.execute(f"INSERT INTO checkpoint_sizes SELECT 'run-' || run, 'ck-' || row_number() OVER (), "
                f"{int(checkpoint_bytes)} FROM ck_frame")
    con.unregister("ck_frame")
    return con
