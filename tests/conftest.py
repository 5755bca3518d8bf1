"""Shared fixtures.

PostgreSQL (see ``pg.py``):

* ``postgres_server_url`` (session): ``BATON_TEST_DATABASE_URL`` when set,
  otherwise a throwaway cluster started for this session (one per xdist
  worker).  When no server can be had the requesting tests fail if ``CI`` is
  set, and are skipped with the reason otherwise.
* ``postgres_url`` (function): a fresh empty database on that server, dropped
  after the test.

Tests that use either fixture get the ``postgres`` marker automatically, so
``-m "not postgres"`` deselects them.

The shared builders live in ``builders/`` (see its ``__init__``); its
fixtures (a store per backend, blobs, a signing key, an authority) are
registered here for every suite.

``baton`` must not be imported here at import time (only inside fixtures).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:  # e.g. under --import-mode=importlib
    sys.path.insert(0, _TESTS_DIR)

import pg  # noqa: E402

from hypothesis import settings as _hypothesis_settings

# Shared, loaded machines: Hypothesis's per-example deadline measures the machine, not the protocol.
_hypothesis_settings.register_profile("baton", deadline=None)
_hypothesis_settings.load_profile("baton")

pytest_plugins = ("builders.fixtures",)


def _unavailable(reason: str) -> None:
    if pg.in_ci():
        pytest.fail(f"PostgreSQL is required in CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL unavailable: {reason}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "postgres_url" in names or "postgres_server_url" in names:
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def postgres_server_url():
    url = os.environ.get(pg.ENV_URL, "").strip()
    if url:
        try:
            pg.check_connect(url)
        except pg.PostgresUnavailable as exc:
            # The caller asked for this server explicitly: never skip.
            pytest.fail(f"{pg.ENV_URL} is set but unusable: {exc}", pytrace=False)
        yield url
        return
    try:
        cluster = pg.ThrowawayCluster.start()
    except pg.PostgresUnavailable as exc:
        _unavailable(str(exc))
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_server_url):
    name, url = pg.create_database(postgres_server_url)
    try:
        yield url
    finally:
        pg.drop_database(postgres_server_url, name)


@pytest.fixture
def baton_home(tmp_path, monkeypatch):
    """An empty BATON_HOME for this test; the embedded SQLite store is used."""
    home = tmp_path / "baton_home"
    home.mkdir()
    monkeypatch.setenv("BATON_HOME", str(home))
    monkeypatch.delenv("BATON_DATABASE_URL", raising=False)
    return home


@pytest.fixture(autouse=True)
def _keep_main_module() -> object:
    """Put `sys.modules['__main__']` and `sys.argv` back after each test.

    Streamlit's AppTest replaces `__main__` with the page script it ran and leaves it there; a later test
    in the same worker that starts processes with the "spawn" context would then re-import that page as
    the children's main module, and every child exits 1 before its target runs.
    """
    main, argv = sys.modules.get("__main__"), list(sys.argv)
    yield
    if main is not None:
        sys.modules["__main__"] = main
    sys.argv[:] = argv
