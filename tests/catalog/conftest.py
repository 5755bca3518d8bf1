"""The store fixtures of the conformance suite: every catalog test runs on SQLite and on PostgreSQL."""

from tests.store.conftest import Backend, backend, store

__all__ = ["Backend", "backend", "store"]
