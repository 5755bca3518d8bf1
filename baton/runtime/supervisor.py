"""Worker processes of a fleet: start, SIGKILL (chaos), restart, stop.

Each slot is one worker bound to one placement. Every (re)start is a new
incarnation with its own worker id (`<slot>.<n>`), so a dead incarnation's
unfinished history records are never paired with its successor's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from baton.authority_callers import CALLER_ENV, CALLER_SECRET_ENV
from baton.store.base import SqlStore
from baton.store.sqlite import SqliteStore
from baton.targets.http_server import ORIGIN_ENV

WORKER_MODULE = "baton.runtime.worker"
WORKER_OWNER_PREFIX = "worker:"  # as `baton.runtime.worker.worker_owner` names a worker's leases
PROBE_S = 1.0  # how long a probe waits for the store's write lock (live writers hold it for milliseconds)
STOP_ATTEMPTS = 20
STOPPED_WITHIN_S = 10.0  # how long the kernel may take to stop every thread after SIGSTOP (generous: shared machines)


class StopError(RuntimeError):
    """A process could not be stopped outside a store transaction."""


def stop_outside_store_transactions(pid: int, store: SqlStore) -> int:
    """SIGSTOP `pid` at a moment it holds no store transaction; returns `pid`.

    A worker's heartbeat thread writes to the store now and then. Stopped inside
    that write, the process would keep the store's write lock (SQLite) or its
    row locks (PostgreSQL) for as long as it stays stopped, and every other
    process would fail or wait: the store made unavailable, a different fault
    from a stalled worker. So while the stopped process blocks the store it is
    continued, given a moment, and stopped again (StopError after STOP_ATTEMPTS).
    """
    for _ in range(STOP_ATTEMPTS):
        os.kill(pid, signal.SIGSTOP)
        wait_stopped(pid)
        if store_unblocked(store):
            return pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.05)
    raise StopError(f"process {pid} was inside a store transaction at each of {STOP_ATTEMPTS} stops")


def wait_stopped(pid: int, timeout_s: float = STOPPED_WITHIN_S) -> None:
    """Return once every thread of `pid` is stopped (StopError past `timeout_s`).

    `kill` only queues SIGSTOP: on a loaded machine a thread of the process can still run, and
    begin a store write, after the probe that follows has found the store free. So the probe
    waits for the kernel to report each thread stopped (/proc/PID/task/*/stat)."""
    deadline = time.monotonic() + timeout_s
    while not _all_threads_stopped(pid):
        if time.monotonic() > deadline:
            raise StopError(f"process {pid} was not stopped {timeout_s:.0f} s after SIGSTOP")
        time.sleep(0.002)


def _all_threads_stopped(pid: int) -> bool:
    try:
        stats = [path.read_text() for path in Path(f"/proc/{pid}/task").glob("*/stat")]
    except (FileNotFoundError, ProcessLookupError):  # a thread ended, or the process did: look again
        return not Path(f"/proc/{pid}").exists()
    # the state is the first field after the command name, which is in parentheses and may hold any byte
    return bool(stats) and all(stat.rsplit(")", 1)[1].split()[0] in ("T", "t") for stat in stats)


def store_unblocked(store: SqlStore) -> bool:
    """True when no stopped client can be holding the store: a write transaction can start (SQLite),
    or no Baton session sits idle inside a transaction (PostgreSQL)."""
    if isinstance(store, SqliteStore):
        return _sqlite_write_lock_free(store)
    time.sleep(PROBE_S / 2)  # a live client's transaction ends well within this
    with store.read_tx() as tx:
        row = tx.one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'baton' "
            "AND state IN ('idle in transaction', 'idle in transaction (aborted)') "
            "AND state_change < now() - interval '0.4 seconds'"
        )
    return row is not None and int(row[0]) == 0


def _sqlite_write_lock_free(store: SqliteStore) -> bool:
    conn = sqlite3.connect(str(store.path), timeout=PROBE_S, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return False
        raise
    finally:
        conn.close()


@dataclass
class WorkerSlot:
    """One worker position of the fleet and its current process."""

    name: str
    placement: str
    incarnation: int = 0
    process: subprocess.Popen[bytes] | None = None
    killed_at: float | None = None
    kills: int = 0
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment of every incarnation (a test-harness fault point, for one)."""
    paused: bool = False

    @property
    def worker_id(self) -> str:
        return f"{self.name}.{self.incarnation}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class Supervisor:
    """Starts worker processes with one set of options and keeps count of what happened to them."""

    home: Path
    log_dir: Path
    database_url: str | None = None
    history_path: Path | None = None
    options: dict[str, str] = field(default_factory=dict)
    provision: Callable[[str], str] | None = None
    """Mints the secret a worker proves its lease owner name with (the authority's `provision`)."""
    slots: list[WorkerSlot] = field(default_factory=list)
    starts: int = 0
    restarts: int = 0

    def add(self, name: str, placement: str) -> WorkerSlot:
        slot = WorkerSlot(name=name, placement=placement)
        self.slots.append(slot)
        return slot

    def _command(self, slot: WorkerSlot) -> list[str]:
        command = [sys.executable, "-m", WORKER_MODULE, "--placement", slot.placement, "--home", str(self.home),
                   "--worker-id", slot.worker_id]
        if self.database_url:
            command += ["--database-url", self.database_url]
        if self.history_path is not None:
            command += ["--history", str(self.history_path)]
        for option, value in sorted(self.options.items()):
            command += [f"--{option}", value]
        return command

    def start(self, slot: WorkerSlot) -> None:
        """Start the slot's next incarnation."""
        if slot.alive:
            return
        if slot.process is not None or slot.killed_at is not None:
            slot.incarnation += 1
            self.restarts += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # the placement it starts the worker on: its target clients name it to the targets (the targets' origin record)
        env = {**os.environ, **slot.env, "BATON_HOME": str(self.home), ORIGIN_ENV: slot.placement}
        if self.provision is not None:  # a fresh secret per incarnation, in its environment only (not its argv)
            owner = WORKER_OWNER_PREFIX + slot.worker_id
            env[CALLER_ENV], env[CALLER_SECRET_ENV] = owner, self.provision(owner)
        with open(self.log_dir / f"worker-{slot.worker_id}.log", "ab") as log:
            slot.process = subprocess.Popen(self._command(slot), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env)
        slot.killed_at = None
        self.starts += 1

    def start_all(self) -> None:
        for slot in self.slots:
            self.start(slot)

    def kill(self, slot: WorkerSlot) -> bool:
        """SIGKILL the slot's process (no goodbye); False if it was not running."""
        if not slot.alive or slot.process is None:
            return False
        slot.process.send_signal(signal.SIGKILL)
        slot.process.wait(timeout=10)
        slot.killed_at = time.monotonic()
        slot.kills += 1
        slot.paused = False
        return True

    def pause(self, slot: WorkerSlot, store: SqlStore) -> bool:
        """SIGSTOP the slot's process outside any store transaction of its own (`stop_outside_store_transactions`):
        frozen, not dead (its leases lapse); False if it was not running, or was each time caught inside a
        transaction (it is left running; the caller may try again)."""
        if not slot.alive or slot.process is None or slot.paused:
            return False
        try:
            stop_outside_store_transactions(slot.process.pid, store)
        except StopError:
            return False
        slot.paused = True
        return True

    def resume(self, slot: WorkerSlot) -> bool:
        """SIGCONT a paused slot's process; False if it was not paused."""
        if not slot.paused or slot.process is None:
            return False
        slot.paused = False
        if slot.alive:
            slot.process.send_signal(signal.SIGCONT)
        return True

    def paused_placements(self) -> frozenset[str]:
        """Placements whose every worker is paused: nothing there can adopt a run now."""
        placements = {slot.placement for slot in self.slots}
        return frozenset(p for p in placements if all(slot.paused for slot in self.on_placement(p)))

    def on_placement(self, placement: str) -> list[WorkerSlot]:
        return [slot for slot in self.slots if slot.placement == placement]

    def restart_dead(self, *, after_s: float) -> list[WorkerSlot]:
        """Start again every slot whose process died (or was killed at least `after_s` ago)."""
        restarted = []
        now = time.monotonic()
        for slot in self.slots:
            if slot.alive:
                continue
            if slot.killed_at is not None and now - slot.killed_at < after_s:
                continue
            if slot.killed_at is None:
                slot.killed_at = now  # died on its own: count it as a crash, restart on the next pass
                continue
            self.start(slot)
            restarted.append(slot)
        return restarted

    def stop_all(self, grace_s: float = 5.0) -> None:
        """SIGTERM every worker (a paused one is woken first), SIGKILL the ones still there after `grace_s`."""
        for slot in self.slots:
            self.resume(slot)
        running = [slot for slot in self.slots if slot.alive and slot.process is not None]
        for slot in running:
            assert slot.process is not None
            slot.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for slot in running:
            assert slot.process is not None
            try:
                slot.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                slot.process.kill()
                slot.process.wait(timeout=10)
