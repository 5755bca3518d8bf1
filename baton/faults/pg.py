"""A fresh PostgreSQL database per matrix run, so every case starts from an empty store and catalog."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit


def _with_database(url: str, dbname: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + dbname))


def fresh_database(server_url: str, label: str) -> tuple[str, Callable[[], None]]:
    """Create an empty database on the server of `server_url`; return its URL and a function dropping it."""
    if not server_url.startswith(("postgresql://", "postgres://")):
        raise ValueError(f"--store-url must be a postgresql:// URL, not {server_url!r}")
    import psycopg

    name = "baton_faults_" + re.sub(r"[^a-z0-9_]", "_", label.lower())[:40]
    admin = _with_database(server_url, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return _with_database(server_url, name), drop
