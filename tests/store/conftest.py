"""The store suites here also run on the simulation's in-memory store (`baton.sim.memory_store`).

Same SQL, same migrations and triggers; only the connection (one shared
in-memory SQLite database) and the clock (a Python function) differ.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builders.fixtures import BACKENDS, Backend, sqlite_url

if TYPE_CHECKING:
    from baton.store.base import SqlStore

_names = itertools.count()


@dataclass(frozen=True)
class MemoryBackend(Backend):
    """A named in-memory database; `open` joins it like another process opening the file."""

    def open(self) -> SqlStore:
        from baton.sim.memory_store import MemoryStore

        return MemoryStore(self.url.removeprefix("memory:"))


@pytest.fixture(params=[*BACKENDS, "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh SQLite file, a fresh PostgreSQL database, or a fresh in-memory database.

    The in-memory database lives as long as one store holds it open, so the fixture keeps
    one open for the test's duration (as a file outlives the stores that open it).
    """
    if request.param == "sqlite":
        yield Backend("sqlite", sqlite_url(tmp_path / "baton.db"))
    elif request.param == "memory":
        memory = MemoryBackend("sqlite", f"memory:conformance-{next(_names)}")
        keeper = memory.open()
        try:
            yield memory
        finally:
            keeper.close()
    else:
        yield Backend("postgres", str(request.getfixturevalue("postgres_url")))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that need a second OS process cannot share an in-memory database: they do not run on it."""
    unfit = [item for item in items
             if getattr(item, "callspec", None) is not None and item.callspec.params.get("backend") == "memory"
             and any(name in item.name for name in _NEEDS_PROCESSES)]
    if unfit:
        config.hook.pytest_deselected(items=unfit)
        items[:] = [item for item in items if item not in unfit]


_NEEDS_PROCESSES = ("forked_child", "test_lease_race", "processes", "sigkill")
