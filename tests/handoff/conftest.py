"""The handoff tests' own fixture: a fenced publisher target (stores, blobs and authority are shared)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.faults.target import LogTarget


@pytest.fixture
def publisher(tmp_path: Path) -> Iterator[LogTarget]:
    target = LogTarget(tmp_path / "publisher", "publisher")
    try:
        yield target
    finally:
        target.close()
