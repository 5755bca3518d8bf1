"""Fixtures for the LangGraph adapter: a Baton store on SQLite or PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("langgraph.checkpoint.conformance", reason="needs the 'langgraph' extra of baton")


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """A URL of an empty Baton store on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'baton.db'}"
    else:
        yield request.getfixturevalue("postgres_url")
