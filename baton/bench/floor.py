"""The durability floor of this disk at this moment, measured beside the legs.

Two primitives every compared system is built from: a durable SQLite commit
of one 2 KB row (WAL, synchronous=FULL), and a new 2 KB file written, fsynced
and renamed into place (what a file-per-blob store does per blob). Disk
latency on shared machines drifts, so each round of legs records the floor it
ran against.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Floor:
    sqlite_commit_ms: float
    file_fsync_rename_ms: float


def measure_floor(directory: Path, samples: int = 40) -> Floor:
    """Median milliseconds of each primitive over `samples` tries, in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    payload = os.urandom(2048)
    conn = sqlite3.connect(directory / "floor.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS t (v BLOB)")
        commits = []
        for _ in range(samples):
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (?)", (payload,))
            conn.execute("COMMIT")
            commits.append(time.perf_counter() - start)
    finally:
        conn.close()
    files = []
    for index in range(samples):
        start = time.perf_counter()
        tmp = directory / f".tmp-{index}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, directory / f"blob-{index}")
        files.append(time.perf_counter() - start)
    return Floor(statistics.median(commits) * 1000, statistics.median(files) * 1000)
