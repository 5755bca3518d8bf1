"""Throwaway PostgreSQL servers and per-test databases for the test suite.

The fixtures in ``conftest.py`` are thin wrappers around this module; tests may
also import it directly (``import pg``) to build URLs or open admin connections.

A server comes from one of two places:

* ``BATON_TEST_DATABASE_URL`` (CI starts one cluster with
  ``scripts/pg_throwaway.sh`` and exports it), or
* a cluster this process starts itself with the same script in a fresh
  temporary directory, stopped and deleted at the end of the session.  Each
  pytest-xdist worker starts its own, so workers never share a server.

Nothing here imports ``baton``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = REPO_ROOT / "scripts" / "pg_throwaway.sh"
ENV_URL = "BATON_TEST_DATABASE_URL"
START_TIMEOUT_S = 180


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be had; the message says why."""


def in_ci() -> bool:
    value = os.environ.get("CI", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


def with_database(server_url: str, dbname: str) -> str:
    """The same server URL pointing at another database."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path="/" + dbname))


def check_connect(url: str, timeout_s: int = 10) -> None:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=timeout_s) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise PostgresUnavailable(f"cannot connect to {url}: {exc}") from exc


@dataclass
class ThrowawayCluster:
    """A cluster started by ``scripts/pg_throwaway.sh`` in its own temp dir."""

    directory: Path
    url: str

    @classmethod
    def start(cls) -> "ThrowawayCluster":
        if not SCRIPT.exists():
            raise PostgresUnavailable(f"{SCRIPT} is missing")
        if shutil.which("bash") is None:
            raise PostgresUnavailable("bash is not available to run pg_throwaway.sh")
        # Not under pytest's basetemp: when running as root the cluster belongs
        # to the postgres user, and /tmp/pytest-of-root is closed to it.
        directory = Path(tempfile.mkdtemp(prefix="baton-pg-"))
        try:
            proc = subprocess.run(
                ["bash", str(SCRIPT), "start", str(directory)],
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT_S,
                cwd=REPO_ROOT,
            )
        except subprocess.TimeoutExpired as exc:
            cls._discard(directory)
            raise PostgresUnavailable(
                f"pg_throwaway.sh start timed out after {START_TIMEOUT_S}s"
            ) from exc
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines or not lines[-1].startswith("postgresql://"):
            cls._discard(directory)
            detail = (proc.stderr.strip() or proc.stdout.strip())[-2000:]
            raise PostgresUnavailable(
                f"could not start a throwaway PostgreSQL cluster "
                f"(pg_throwaway.sh exit {proc.returncode}): {detail}"
            )
        return cls(directory=directory, url=lines[-1])

    def stop(self) -> None:
        self._discard(self.directory)

    @staticmethod
    def _discard(directory: Path) -> None:
        try:
            subprocess.run(
                ["bash", str(SCRIPT), "stop", str(directory)],
                capture_output=True,
                text=True,
                timeout=90,
                cwd=REPO_ROOT,
            )
        finally:
            shutil.rmtree(directory, ignore_errors=True)


def create_database(server_url: str) -> tuple[str, str]:
    """Create an empty database ``t_<uuid hex>``; return (name, url)."""
    import psycopg
    from psycopg import sql

    name = "t_" + uuid.uuid4().hex
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name, with_database(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
