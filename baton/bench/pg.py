"""PostgreSQL for the benchmark legs: a given server or a throwaway cluster.

The server comes from `BATON_BENCH_DATABASE_URL`, else `BATON_DATABASE_URL`,
else a cluster started with `scripts/pg_throwaway.sh` (source checkouts
only). Each leg gets a fresh database, so its size says what that one system
stored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from typing import Any

import psycopg
from psycopg import sql

ENV_VARS = ("BATON_BENCH_DATABASE_URL", "BATON_DATABASE_URL")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg_throwaway.sh"
_START_TIMEOUT_S = 180


class NoPostgres(RuntimeError):
    """No PostgreSQL server could be reached or started; the message says why."""


@dataclass(frozen=True)
class PgServer:
    url: str
    origin: str  # "env:<VAR>" or "throwaway"


def with_database(server_url: str, dbname: str) -> str:
    """The same server URL naming another database."""
    return urlunsplit(urlsplit(server_url)._replace(path="/" + dbname))


def _check(url: str) -> None:
    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise NoPostgres(f"cannot connect to {url}: {exc}") from exc


@contextmanager
def postgres_server() -> Iterator[PgServer]:
    """Yield a reachable server; raise NoPostgres when there is none to be had."""
    for var in ENV_VARS:
        url = os.environ.get(var, "").strip()
        if url.startswith(("postgresql://", "postgres://")):
            _check(url)
            yield PgServer(url=url, origin=f"env:{var}")
            return
    if not SCRIPT.exists() or shutil.which("bash") is None:
        raise NoPostgres(f"no {' or '.join(ENV_VARS)} set and {SCRIPT} is not available")
    directory = Path(tempfile.mkdtemp(prefix="baton-bench-pg-"))
    try:
        proc = subprocess.run(
            ["bash", str(SCRIPT), "start", str(directory)],
            capture_output=True,
            text=True,
            timeout=_START_TIMEOUT_S,
            check=False,
        )
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines or not lines[-1].startswith("postgresql://"):
            detail = (proc.stderr.strip() or proc.stdout.strip())[-1000:]
            raise NoPostgres(f"pg_throwaway.sh start failed (exit {proc.returncode}): {detail}")
        url = lines[-1]
        _check(url)
        yield PgServer(url=url, origin="throwaway")
    except subprocess.TimeoutExpired as exc:
        raise NoPostgres(f"pg_throwaway.sh start timed out after {_START_TIMEOUT_S}s") from exc
    finally:
        subprocess.run(
            ["bash", str(SCRIPT), "stop", str(directory)],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        shutil.rmtree(directory, ignore_errors=True)


def server_checkpoint(server_url: str) -> None:
    """Ask the server to write its dirty buffers out now (ignored without the privilege)."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        try:
            conn.execute("CHECKPOINT")
        except psycopg.Error:
            pass


_RELATIONS_BYTES = """
SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
"""


def _relations_bytes(conn: psycopg.Connection[Any]) -> int:
    """Bytes of every table (with its indexes, TOAST and maps) outside PostgreSQL's own schemas."""
    row = conn.execute(_RELATIONS_BYTES).fetchone()
    assert row is not None
    return int(row[0])


@dataclass(frozen=True)
class FreshDatabase:
    """An empty database created for one leg, and its size before anything was written."""

    server_url: str
    name: str
    url: str
    baseline_bytes: int

    def stored_bytes(self) -> int:
        """Growth of the system's own relations since the database was created (after a checkpoint, where allowed).

        Every table, index, TOAST table and their free-space and visibility maps outside PostgreSQL's own schemas:
        what the compared system stores. The system catalogs are left out: their size moves by up to ~160 KB
        between otherwise equal runs (catalog churn of creating a schema), more than a short trajectory writes."""
        server_checkpoint(self.server_url)  # without the privilege, sizes are still current: relations extend eagerly
        with psycopg.connect(self.url, autocommit=True) as conn:
            return _relations_bytes(conn) - self.baseline_bytes


@contextmanager
def fresh_database(server_url: str, prefix: str = "bench") -> Iterator[FreshDatabase]:
    """Create an empty database, yield it, then drop it."""
    name = f"{prefix}_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = with_database(server_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        baseline = _relations_bytes(conn)
    database = FreshDatabase(server_url, name, url, baseline)
    try:
        yield database
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
