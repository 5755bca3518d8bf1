"""Bundle import is all or nothing: SIGKILL it part way and the store is exactly as before (plain SQL counts).

The importing process is killed at `bundle.rows` (the run and its first
checkpoint written inside the import's transaction, the rest not), on SQLite
and PostgreSQL, with blobs in files and in the store's own table. Then the
same import, uninterrupted, adds exactly the bundle's rows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from baton.bundle import export_run
from baton.fault_points import KILL_POINT_ENV, MARK_ENV, KillPoint
from baton.store.base import SqlStore
from baton.store.factory import open_blobs, open_store

from builders.checkpoints import seed_run
from builders.fixtures import Backend

TABLES = ("runs", "leases", "checkpoints", "events", "blobs")
IMPORT = (
    "import sys; from pathlib import Path; from baton.bundle_admission import import_bundle; "
    "from baton.store.factory import open_blobs, open_store; "
    "home, url, bundle = Path(sys.argv[1]), sys.argv[2], sys.argv[3]; store = open_store(url, home); "
    "report = import_bundle(store, open_blobs(home, store), bundle, placement=None); "
    "print(len(report.imported))"
)


def counts(store: SqlStore) -> dict[str, int]:
    return {table: int(store.execute_raw(f"SELECT COUNT(*) FROM {table}")[0][0]) for table in TABLES}


def _import(home: Path, url: str, bundle: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", IMPORT, str(home), url, str(bundle)], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("blob_mode", ["files", "sql"])
def test_an_import_killed_part_way_leaves_no_trace(backend: Backend, tmp_path: Path, blob_mode: str) -> None:
    source_home = tmp_path / "source"
    with open_store("sqlite:///" + str(tmp_path / "source.db"), source_home) as source:
        source_blobs = open_blobs(source_home)
        seed_run(source, source_blobs, 4)
        bundle = export_run(source, source_blobs, "run-1", tmp_path / "run-1.bundle").path

    home = tmp_path / "target"
    store = backend.open()
    try:
        seed_run(store, open_blobs(home, store), 2, run_id="already-here")  # the store is not empty
        before = counts(store)
        mark = tmp_path / "killed.mark"
        env = {"BATON_BLOBS": blob_mode}
        killed = _import(home, backend.url, bundle, {**env, KILL_POINT_ENV: KillPoint.BUNDLE_ROWS.value, MARK_ENV: str(mark)})
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert mark.read_text().split()[0] == KillPoint.BUNDLE_ROWS.value
        assert counts(store) == before  # nothing of the run, its lease, its checkpoints or its blobs

        done = _import(home, backend.url, bundle, env)  # the mark is taken: this one runs to the end
        assert done.returncode == 0 and done.stdout.strip() == "4", done.stderr
        after = counts(store)
        assert {t: after[t] - before[t] for t in ("runs", "leases", "checkpoints", "events")} == {
            "runs": 1, "leases": 1, "checkpoints": 4, "events": 0}
        assert (after["blobs"] > before["blobs"]) is (blob_mode == "sql")
        assert [c.checkpoint_id for c in store.list_checkpoints("run-1")] == [f"run-1/{i:06d}" for i in range(4)]
        again = _import(home, backend.url, bundle, env)
        assert again.returncode == 0 and again.stdout.strip() == "0" and counts(store) == after  # idempotent
    finally:
        store.close()


def test_atomic_rolls_back_every_call_of_the_block(store: SqlStore) -> None:
    """`SqlStore.atomic`: an error after several writes leaves none of them (both backends)."""
    before = counts(store)
    with pytest.raises(RuntimeError, match="stop here"):
        with store.atomic():
            store.create_run("r-atomic", "coding", "sha256:" + "a" * 64, "eu-1")
            store.acquire_lease("r-atomic", "w", 30, expected_epoch=0)
            assert store.get_lease("r-atomic").epoch == 1  # reads inside see the block's writes
            raise RuntimeError("stop here")
    assert counts(store) == before
    with store.atomic():
        store.create_run("r-atomic", "coding", "sha256:" + "a" * 64, "eu-1")
    assert store.get_run("r-atomic").status == "active"
    with pytest.raises(Exception, match="cannot start inside"):
        with store.atomic():
            with store.atomic():
                pass
