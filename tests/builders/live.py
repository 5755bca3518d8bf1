"""Live pieces for the integration tests: target services, worker processes, waiting."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from baton.authority_http import AuthorityServiceProcess
from baton.runtime.supervisor import Supervisor
from baton.store.base import SqlStore
from baton.store.records import RunRecord
from baton.targets.service_process import ServiceProcess, target_data_dir

T = TypeVar("T")


@contextmanager
def live_targets(home: Path, *, ambiguous_rate: float = 0.0, ambiguous_delay_s: float = 3.0) -> Iterator[None]:
    """The deploy and corpus services serving `home/targets/...` for the duration of the block."""
    deploy = ServiceProcess.deploy(target_data_dir("deploy", home), ambiguous_rate=ambiguous_rate, seed=7,
                                   ambiguous_delay_s=ambiguous_delay_s).start()
    try:
        corpus = ServiceProcess.corpus(target_data_dir("corpus", home)).start()
        try:
            yield
        finally:
            corpus.stop()
    finally:
        deploy.stop()


@contextmanager
def workers(
    home: Path, placements: dict[str, str], *, database_url: str | None = None, **options: str
) -> Iterator[tuple[Supervisor, dict[str, object]]]:
    """Worker processes (`slot name -> placement`) sharing one history file under `home`, and their authority.

    As in the fleet, the authority is its own process and the supervisor provisions each worker's identity.
    `database_url` (default: the SQLite file under `home`) is the store they all share.
    """
    store_url = database_url or f"sqlite:///{home / 'baton.db'}"
    with AuthorityServiceProcess(home / "authority", store_url) as authority:
        supervisor = Supervisor(home=home, log_dir=home / "logs", history_path=home / "history.jsonl",
                                database_url=database_url,
                                options={"lease-ttl-s": "2", "authority-url": authority.url, **options},
                                provision=authority.provision)
        slots = {name: supervisor.add(name, placement) for name, placement in placements.items()}
        supervisor.start_all()
        try:
            yield supervisor, slots  # type: ignore[misc]
        finally:
            supervisor.stop_all(grace_s=3.0)


def wait_for(probe: Callable[[], T | None], *, timeout_s: float, what: str, poll_s: float = 0.05) -> T:
    """Poll `probe` until it returns something; fail the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(poll_s)


def ended_run(store: SqlStore, run_id: str, *, timeout_s: float = 60.0) -> RunRecord:
    """Wait until the run is verified, failed or escalated; return its record."""

    def probe() -> RunRecord | None:
        run = store.get_run(run_id)
        return None if run.status == "active" else run

    return wait_for(probe, timeout_s=timeout_s, what=f"run {run_id} to end")
