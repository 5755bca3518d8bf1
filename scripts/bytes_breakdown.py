"""Where a store's bytes go after N SDK boundaries of the checkpoint benchmark's workload.

Usage: python scripts/bytes_breakdown.py WORKDIR [STEPS] [POSTGRES_SERVER_URL]

Runs one SDK leg (`baton.bench.ckpt_sdk.sdk_leg`, the same observations as `baton bench checkpoint`) into WORKDIR,
on SQLite, or on a fresh database of the given PostgreSQL server. Prints allocated bytes over observation bytes
(as the benchmark counts them), then the size of each table and index: pages from SQLite's `dbstat`, or each
relation's main fork and free-space and visibility maps on PostgreSQL.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import psycopg

from baton.bench.ckpt_sdk import sdk_leg
from baton.bench.leg import LegInput
from baton.bench.pg import fresh_database
from baton.bench.trajectory import Trajectory

_PG_RELATIONS = """
SELECT c.relname, c.relkind, pg_relation_size(c.oid, 'main'), pg_relation_size(c.oid, 'fsm'),
       pg_relation_size(c.oid, 'vm'),
       CASE WHEN c.reltoastrelid = 0 THEN 0 ELSE pg_total_relation_size(c.reltoastrelid) END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND c.relkind IN ('r', 'i')
ORDER BY 3 DESC, 1
"""
"""Each table and index of the store: main fork, free-space map, visibility map, and a table's TOAST (with its
index)."""


def _print_ratio(steps: int, payload: int, stored: int) -> None:
    print(f"steps {steps}: observation bytes {payload}, allocated {stored}, ratio {stored / payload:.3f}")


def sqlite_breakdown(workdir: Path, trajectory: Trajectory) -> None:
    out = sdk_leg(LegInput(trajectory.materialize(), workdir))
    _print_ratio(trajectory.steps, trajectory.observation_bytes,
                 sum(component.allocated for component in out.components.values()))
    conn = sqlite3.connect(workdir / "baton_home" / "baton.db")
    try:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        print(f"page size {page_size}")
        for name, pages, used, unused in conn.execute(
                "SELECT name, count(*), sum(payload), sum(unused) FROM dbstat GROUP BY name ORDER BY 2 DESC, 1"):
            print(f"{name:40s} pages {pages:5d}  bytes {pages * page_size:9d}  payload {used:9d}  unused {unused:9d}")
    finally:
        conn.close()


def postgres_breakdown(workdir: Path, trajectory: Trajectory, server_url: str) -> None:
    with fresh_database(server_url) as database:
        sdk_leg(LegInput(trajectory.materialize(), workdir, database.url))
        _print_ratio(trajectory.steps, trajectory.observation_bytes, database.stored_bytes())
        with psycopg.connect(database.url) as conn:
            for name, kind, main, fsm, vm, toast in conn.execute(_PG_RELATIONS).fetchall():
                if main or fsm or vm or toast:
                    print(f"{name:40s} {kind}  main {main:9d}  fsm {fsm:7d}  vm {vm:7d}  toast {toast:7d}")


if __name__ == "__main__":
    root = Path(sys.argv[1])
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    chosen = Trajectory(int(sys.argv[2]) if len(sys.argv) > 2 else 400)
    if len(sys.argv) > 3:
        postgres_breakdown(root, chosen, sys.argv[3])
    else:
        sqlite_breakdown(root, chosen)
