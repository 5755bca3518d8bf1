"""The Baton store and blobs as a Dagster resource, opened from BATON_HOME / BATON_DATABASE_URL.

Every asset, sensor and job opens Baton's state through `BatonResource.open()`,
which uses the core's own `open_store` / `open_blobs`: PostgreSQL when
BATON_DATABASE_URL is a postgresql:// URL, else the SQLite file under BATON_HOME.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import ConfigurableResource

from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from baton.store.factory import baton_home, open_blobs, open_store


class BatonResource(ConfigurableResource):  # type: ignore[misc]
    """Where Baton's state lives; empty fields fall back to the environment."""

    home: str = ""
    database_url: str = ""

    def home_path(self) -> Path:
        return Path(self.home) if self.home else baton_home()

    @contextmanager
    def open(self) -> Iterator[tuple[SqlStore, Blobs]]:
        """The store and blobs, closed on exit."""
        home = self.home_path()
        store = open_store(self.database_url or None, home)
        try:
            yield store, open_blobs(home, store)
        finally:
            store.close()
