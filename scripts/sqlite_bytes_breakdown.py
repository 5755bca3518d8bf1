"""Where a SQLite store's bytes go after N SDK boundaries of the checkpoint benchmark's workload.

Usage: python scripts/sqlite_bytes_breakdown.py WORKDIR [STEPS]

Runs one SDK leg (`baton.bench.ckpt_sdk.sdk_leg`, the same observations as `baton bench checkpoint`)
into WORKDIR, prints allocated bytes over observation bytes, then pages per table and index
(SQLite's `dbstat` virtual table).
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

from baton.bench.ckpt_sdk import sdk_leg
from baton.bench.leg import LegInput
from baton.bench.trajectory import Trajectory


def main(workdir: Path, steps: int) -> None:
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    trajectory = Trajectory(steps)
    out = sdk_leg(LegInput(trajectory.materialize(), workdir))
    payload = trajectory.observation_bytes
    allocated = sum(component.allocated for component in out.components.values())
    print(f"steps {steps}: observation bytes {payload}, allocated {allocated}, ratio {allocated / payload:.3f}")
    conn = sqlite3.connect(workdir / "baton_home" / "baton.db")
    try:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        print(f"page size {page_size}")
        for name, pages, used, unused in conn.execute(
                "SELECT name, count(*), sum(payload), sum(unused) FROM dbstat GROUP BY name ORDER BY 2 DESC, 1"):
            print(f"{name:40s} pages {pages:5d}  bytes {pages * page_size:9d}  payload {used:9d}  unused {unused:9d}")
    finally:
        conn.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 400)
