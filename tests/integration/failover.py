"""A fleet as a real process, one of its workers SIGKILLed, and the run followed until another worker holds it.

Shared by the end-to-end tests of both coordinators: `local` (the fleet hands
off the run itself) and `dagster` (Dagster's lease-expiry sensor launches
`handoff_job`). The oracles are the store's lease (who holds the run, at which
epoch) and the deploy target's own record file (one deployment per key).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from baton.runtime.worker import WORKER_OWNER_PREFIX
from baton.store.factory import open_store
from baton.targets.deploy_service import count_side_effects, read_effects
from baton.targets.service_process import target_data_dir

from builders.live import wait_for


@dataclass(frozen=True)
class Failover:
    """What happened to the killed worker's run."""

    run_id: str
    killed_worker: str
    resumed_worker: str
    epoch_before: int
    epoch_after: int
    kill_to_resume_s: float
    final_status: str
    deploy_effects: dict[str, object]
    effects_of_run: int
    killed_at_unix: float  # wall clock, to line the kill up with Dagster's own run times
    resumed_at_unix: float


def worker_pid(worker_id: str, home: Path) -> int | None:
    """The pid of the worker process of `home` started with `--worker-id worker_id` (from /proc).

    Other fleets on the machine reuse the same worker ids: the home tells ours apart.
    """
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if b"baton.runtime.worker" in argv and worker_id.encode() in argv and str(home).encode() in argv:
            return int(entry.name)
    return None


def start_fleet(home: Path, coordinator: str, env: dict[str, str], *, runs: int = 2, workers: int = 2) -> subprocess.Popen[bytes]:
    """`baton fleet` in its own session (no chaos: the test does the killing)."""
    baton = str(Path(sys.executable).parent / "baton")
    log = open(home.parent / f"fleet-{coordinator}.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [baton, "fleet", "--runs", str(runs), "--workers", str(workers), "--home", str(home), "--timeout", "240",
         "--launch-interval", "0.5", "--boundary-pause", "1.0", "--coordinator", coordinator],
        env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_fleet(fleet: subprocess.Popen[bytes]) -> None:
    if fleet.poll() is None:
        os.killpg(fleet.pid, signal.SIGTERM)
        try:
            fleet.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(fleet.pid, signal.SIGKILL)
            fleet.wait(timeout=30)


def kill_a_deploy_worker_and_follow(home: Path, database_url: str | None, *, resume_timeout_s: float = 120.0) -> Failover:
    """Wait for a worker to hold a deploy run, SIGKILL it, wait for another worker to hold the run and for it to end."""
    store = open_store(database_url, home)
    try:
        def held_deploy_run() -> tuple[str, str, int] | None:
            for run in store.list_runs(status="active"):
                lease = store.get_lease(run.run_id)
                if run.kind == "deploy" and (lease.owner or "").startswith(WORKER_OWNER_PREFIX):
                    return run.run_id, lease.owner[len(WORKER_OWNER_PREFIX):], lease.epoch
            return None

        run_id, worker, epoch = wait_for(held_deploy_run, timeout_s=180, what="a worker to hold a deploy run")
        pid = wait_for(lambda: worker_pid(worker, home), timeout_s=10, what=f"the process of worker {worker}")
        os.kill(pid, signal.SIGKILL)
        killed_at, killed_at_unix = time.monotonic(), time.time()

        def resumed() -> tuple[str, int] | None:
            lease = store.get_lease(run_id)
            owner = lease.owner or ""
            if owner.startswith(WORKER_OWNER_PREFIX) and owner[len(WORKER_OWNER_PREFIX):] != worker and lease.epoch > epoch:
                return owner[len(WORKER_OWNER_PREFIX):], lease.epoch
            if store.get_run(run_id).status != "active":
                return "(ended before a worker adopted it)", lease.epoch
            return None

        new_worker, new_epoch = wait_for(resumed, timeout_s=resume_timeout_s, what=f"run {run_id} to resume",
                                         poll_s=0.05)
        kill_to_resume, resumed_at_unix = time.monotonic() - killed_at, time.time()
        final = wait_for(lambda: None if (r := store.get_run(run_id)).status == "active" else r.status,
                         timeout_s=180, what=f"run {run_id} to end", poll_s=0.2)
    finally:
        store.close()
    return Failover(run_id, worker, new_worker, epoch, new_epoch, round(kill_to_resume, 2), final,
                    count_side_effects(target_data_dir("deploy", home)),
                    sum(1 for effect in read_effects(target_data_dir("deploy", home)) if effect.run_id == run_id),
                    killed_at_unix, resumed_at_unix)
