"""A paused or frozen worker is never stopped inside a store transaction (the CI flake of stop 23).

Used by the fleet's `--pause-worker` (`Supervisor.pause`) and the fault matrix's `BatonRun.freeze`.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.faults.rig import sigcont, wait_until
from baton.runtime import supervisor
from baton.runtime.supervisor import StopError, stop_outside_store_transactions, store_unblocked
from baton.store.sqlite import SqliteStore

# A client that sits inside write transactions most of the time, as a heartbeat under load might.
WRITER = textwrap.dedent("""
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
    hold, gap = float(sys.argv[2]), float(sys.argv[3])
    print("ready", flush=True)
    while True:
        conn.execute("BEGIN IMMEDIATE")
        time.sleep(hold)
        conn.execute("ROLLBACK")
        time.sleep(gap)
""")


def _writer(path: Path, hold_s: float, gap_s: float) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(hold_s), str(gap_s)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "baton.db") as opened:
        yield opened


def test_freeze_lands_between_transactions(store: SqliteStore) -> None:
    process = _writer(store.path, hold_s=0.2, gap_s=0.2)  # inside a transaction half the time
    try:
        stop_outside_store_transactions(process.pid, store)
        # Oracle outside the probe: with the process stopped, an ordinary store write goes through.
        wait_until(lambda: Path(f"/proc/{process.pid}/stat").read_text().split()[2] == "T",
                   timeout_s=5.0, what="the process to be stopped")
        store.execute_raw("CREATE TABLE written_while_frozen (x INTEGER)")
    finally:
        sigcont(process.pid)
        process.kill()
        process.wait()


def test_freeze_gives_up_on_a_process_that_never_leaves_its_transaction(
        store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "STOP_ATTEMPTS", 3)
    monkeypatch.setattr(supervisor, "PROBE_S", 0.2)
    process = _writer(store.path, hold_s=3600.0, gap_s=0.0)
    try:
        wait_until(lambda: not store_unblocked(store), timeout_s=5.0, what="the writer to hold the lock")
        with pytest.raises(StopError, match="inside a store transaction"):
            stop_outside_store_transactions(process.pid, store)
    finally:
        sigcont(process.pid)
        process.kill()
        process.wait()


def test_a_plain_sigstop_inside_a_transaction_blocks_the_store(store: SqliteStore) -> None:
    """The ablation of the probe: the stop the freeze avoids does lock every other writer out."""
    process = _writer(store.path, hold_s=3600.0, gap_s=0.0)
    try:
        wait_until(lambda: not store_unblocked(store), timeout_s=5.0, what="the writer to hold the lock")
        process.send_signal(19)  # SIGSTOP
        blocked = SqliteStore(store.path, busy_timeout_s=0.3, migrate=False)
        with pytest.raises(Exception, match="locked"):
            blocked.execute_raw("CREATE TABLE never_written (x INTEGER)")
        blocked.close()
    finally:
        sigcont(process.pid)
        process.kill()
        process.wait()


THREADS = textwrap.dedent("""
    import threading, time
    def spin():
        while True:
            sum(range(1000))
    for _ in range(3):
        threading.Thread(target=spin, daemon=True).start()
    print("ready", flush=True)
    spin()
""")


def _thread_states(pid: int) -> list[str]:
    return [path.read_text().rsplit(")", 1)[1].split()[0] for path in Path(f"/proc/{pid}/task").glob("*/stat")]


def test_wait_stopped_returns_only_once_every_thread_is_stopped() -> None:
    """SIGSTOP is only queued by `kill`; the probe must not run while a thread of the process still runs."""
    process = subprocess.Popen([sys.executable, "-c", THREADS], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        assert len(_thread_states(process.pid)) == 4
        process.send_signal(19)  # SIGSTOP
        supervisor.wait_stopped(process.pid)
        assert set(_thread_states(process.pid)) <= {"T", "t"}  # the kernel's own record, read after the return
    finally:
        sigcont(process.pid)
        process.kill()
        process.wait()


def test_wait_stopped_gives_up_on_a_running_process() -> None:
    process = subprocess.Popen([sys.executable, "-c", THREADS], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        with pytest.raises(StopError, match="not stopped"):
            supervisor.wait_stopped(process.pid, timeout_s=0.3)
    finally:
        process.kill()
        process.wait()
