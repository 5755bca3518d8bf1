"""Load an event log (and the targets' own effect records) into DuckDB tables the metrics read."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from baton.models import Event
from baton.store.base import SqlStore
from baton.store.records import RunRecord

EVENT_COLUMNS = """
    seq BIGINT, run_id VARCHAR, event_type VARCHAR, ts TIMESTAMPTZ, checkpoint_id VARCHAR,
    source_placement VARCHAR, target_placement VARCHAR, source_epoch BIGINT, target_epoch BIGINT,
    release_id VARCHAR, reason VARCHAR, authority_before VARCHAR, authority_after VARCHAR,
    resume_boundary VARCHAR, decision JSON, detail JSON
"""
RUN_COLUMNS = "run_id VARCHAR, kind VARCHAR, status VARCHAR"
EFFECT_COLUMNS = "run_id VARCHAR, target VARCHAR, logical_operation VARCHAR, idempotency_key VARCHAR"
CHECKPOINT_COLUMNS = "run_id VARCHAR, checkpoint_id VARCHAR, bytes BIGINT"


@dataclass(frozen=True)
class EffectRecord:
    """One effect as a target's own record file shows it (never Baton's view of it)."""

    run_id: str
    target: str
    logical_operation: str
    idempotency_key: str


def _event_row(seq: int, event: Event) -> dict[str, object]:
    return {
        "seq": seq, "run_id": event.run_id, "event_type": event.event_type.value, "ts": event.at.isoformat(),
        "checkpoint_id": event.checkpoint_id, "source_placement": event.source_placement,
        "target_placement": event.target_placement, "source_epoch": event.source_epoch,
        "target_epoch": event.target_epoch, "release_id": event.release_id, "reason": event.reason,
        "authority_before": event.authority_before, "authority_after": event.authority_after,
        "resume_boundary": event.resume_boundary,
        "decision": event.compatibility_decision,
        "detail": event.detail,
    }


def _load(con: duckdb.DuckDBPyConnection, table: str, columns: str, rows: Iterable[dict[str, object]],
          scratch: Path) -> None:
    path = scratch / f"{table}.ndjson"
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    con.execute(f"CREATE OR REPLACE TABLE {table} ({columns})")
    if path.stat().st_size:
        spec = ", ".join(f"'{name}': '{kind}'" for name, kind in
                         (part.strip().split(" ", 1) for part in columns.split(",")))
        con.execute(f"INSERT INTO {table} SELECT * FROM read_json('{path}', format='newline_delimited', "
                    f"columns={{{spec}}})")


def load_event_log(
    events: Iterable[tuple[int, Event]],
    runs: Iterable[RunRecord] = (),
    effects: Iterable[EffectRecord] = (),
    checkpoint_sizes: Iterable[tuple[str, str, int]] = (),
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyConnection:
    """Tables `events`, `runs`, `effects`, `checkpoint_sizes` in a DuckDB connection (in memory by default)."""
    con = con or duckdb.connect()
    with tempfile.TemporaryDirectory(prefix="baton-metrics-") as folder:
        scratch = Path(folder)
        _load(con, "events", EVENT_COLUMNS, (_event_row(seq, event) for seq, event in events), scratch)
        _load(con, "runs", RUN_COLUMNS,
              ({"run_id": r.run_id, "kind": r.kind.value, "status": r.status} for r in runs), scratch)
        _load(con, "effects", EFFECT_COLUMNS,
              ({"run_id": e.run_id, "target": e.target, "logical_operation": e.logical_operation,
                "idempotency_key": e.idempotency_key} for e in effects), scratch)
        _load(con, "checkpoint_sizes", CHECKPOINT_COLUMNS,
              ({"run_id": run_id, "checkpoint_id": cid, "bytes": size} for run_id, cid, size in checkpoint_sizes),
              scratch)
    return con


def load_from_store(store: SqlStore, effects: Iterable[EffectRecord] = (), *,
                    con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """The whole event log and run table of a Baton store, plus the targets' effect records.

    Checkpoint size is the byte length of each sealed manifest (its canonical JSON); the blobs it
    references are shared along the chain and counted by `baton bench checkpoint`, not here.
    """
    runs = store.list_runs()
    sizes = [(c.run_id, c.checkpoint_id, len(c.model_dump_json().encode()))
             for run in runs for c in store.list_checkpoints(run.run_id)]
    return load_event_log(store.list_events(), runs, effects, sizes, con=con)
