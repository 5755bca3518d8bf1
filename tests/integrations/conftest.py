"""Fixtures for the LangGraph adapter: a Baton store on SQLite or PostgreSQL."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest

if importlib.util.find_spec("langgraph") is None or importlib.util.find_spec("langgraph.checkpoint.conformance") is None:
    if os.environ.get("CI"):  # CI installs the extra (make install): its absence is a failure, never a skip
        raise ImportError("tests/integrations needs the 'langgraph' extra of baton (pip install -e '.[langgraph]')")
    collect_ignore_glob = ["test_*.py"]  # a local checkout without the extra


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """A URL of an empty Baton store on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'baton.db'}"
    else:
        yield request.getfixturevalue("postgres_url")
