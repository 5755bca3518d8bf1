"""One run of the whole matrix per test session (it takes a few seconds); tests read it."""

from __future__ import annotations

import pytest

from baton.faults.matrix import MatrixReport, run_matrix


@pytest.fixture(scope="session")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> MatrixReport:
    return run_matrix(0, root=tmp_path_factory.mktemp("faults"))
