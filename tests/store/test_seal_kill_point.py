"""Kill points on the default write path: SIGKILL a process mid-boundary, then the store verifies clean.

The worker (`seal_kill_worker.py`) seals SDK boundaries in a loop with the
default blob backend (small blobs in the SQL store, large ones as files). It
is killed at an arbitrary moment, several times over, and after each kill the
checks read the store with plain SQL and hashlib, not with the code that wrote it:
- every blob row hashes to its digest, every blob file to its name, and no
  temp file is left where a blob would be read;
- every checkpoint restores with every part verified, and each boundary's
  rows are all there or none are: one CHECKPOINT_STARTED and one
  CHECKPOINT_SEALED per SDK checkpoint and one tool-call charge per
  observation sealed;
- a new owner adopts the run and seals the next boundary.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from baton.checkpoints import restore
from baton.models import EventType
from baton.store.blobs_sql import decode_body
from baton.store.factory import open_blobs, open_store
from builders.live import wait_for
from builders.fixtures import Backend

WORKER = Path(__file__).with_name("seal_kill_worker.py")
RUN_ID = "kill-run"
KILLS = 3


def _checkpoints(url: str) -> int:
    with open_store(url, migrate=False) as store:
        return len(store.list_checkpoints(RUN_ID))


def _start(url: str, home: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "BATON_BLOBS_LARGE_BYTES": "4096"}
    env.pop("BATON_BLOBS", None)
    return subprocess.Popen([sys.executable, str(WORKER), url, str(home), RUN_ID], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _verify_raw(url: str, home: Path) -> None:
    with open_store(url, migrate=False) as store:
        for digest, data, codec in store.execute_raw("SELECT digest, data, codec FROM blobs"):
            raw = decode_body("sha256:" + bytes(digest).hex(), int(codec), bytes(data))
            assert hashlib.sha256(raw).digest() == bytes(digest)
    files = [p for p in (home / "blobs").rglob("*") if p.is_file()]
    blob_files = [p for p in files if not p.name.startswith(".tmp-")]
    assert blob_files, "the worker never wrote a large blob: the file path was not exercised"
    for path in blob_files:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == path.parent.name + path.name


def _verify_store(url: str, home: Path) -> int:
    with open_store(url, migrate=False) as store:
        blobs = open_blobs(home, store)
        checkpoints = store.list_checkpoints(RUN_ID)
        for checkpoint in checkpoints:
            restore(blobs, checkpoint)
        latest = restore(blobs, checkpoints[-1])
        for observation in latest.observations:
            assert hashlib.sha256(blobs.get(observation.content_ref)).hexdigest() == observation.content_ref[7:]
        counts = dict(store.execute_raw(
            "SELECT event_type, COUNT(*) FROM events WHERE run_id = ? GROUP BY event_type", (RUN_ID,)))
        charges = store.execute_raw("SELECT COUNT(*) FROM budget_charges WHERE run_id = ? AND reason LIKE ?",
                                    (RUN_ID, "observe %"))[0][0]
    sdk_checkpoints = len(checkpoints) - 1  # checkpoint 0 is the launch's, with a SEALED event of its own
    assert counts.get(EventType.CHECKPOINT_STARTED.value, 0) == sdk_checkpoints
    assert counts.get(EventType.CHECKPOINT_SEALED.value, 0) == sdk_checkpoints + 1
    assert charges == sdk_checkpoints == len(latest.observations)
    return len(checkpoints)


def test_sigkill_mid_boundary_leaves_a_clean_store(backend: Backend, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    url = backend.url
    sealed = 0
    for kill in range(KILLS):
        worker = _start(url, home)
        try:
            assert worker.stdout is not None
            line = worker.stdout.readline()
            assert line.strip() == b"ready", worker.stderr.read().decode() if worker.stderr else line
            goal = sealed + 8 + 5 * kill
            wait_for(lambda: _checkpoints(url) >= goal, timeout_s=120.0, what=f"{goal} checkpoints")
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait(30)
        assert worker.returncode == -signal.SIGKILL
        _verify_raw(url, home)
        now = _verify_store(url, home)
        assert now > sealed
        sealed = now
    from baton.bench.ckpt_sdk import start_sdk_run

    with open_store(url, migrate=False) as store:
        ctx = start_sdk_run(store, open_blobs(home, store), RUN_ID, owner="worker:after")
        ctx.observe("kill://after", {"step": "after"}, b"after the kills", freshness_s=60)
    assert _verify_store(url, home) == sealed + 1
