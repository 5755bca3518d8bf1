"""A worker paused past its lease, then resumed after a takeover, changes nothing anywhere."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from baton.authority import AuthorityService
from baton.cancellation import CancellationTracker, PhysicalStatus
from baton.checker import check
from baton.gateway import MutationGateway
from baton.history import JsonlHistory
from baton.models import EventType
from baton.ownership import Coordinator
from baton.store.base import SqlStore
from baton.targets.ledger_target import LedgerTargetProcess

from builders.authority import TARGET, capability, new_run, request

from .worker_authority import WorkerAuthority
from .workers import paused_worker

TTL_S = 1.0


def wait_for(event: Any, process: Any, timeout_s: float = 60.0) -> None:
    """Wait for `event`, failing at once if `process` dies first."""
    deadline = time.monotonic() + timeout_s
    while not event.wait(0.05):
        assert process.is_alive(), f"worker exited early with {process.exitcode}"
        assert time.monotonic() < deadline, "worker never became ready"


@pytest.mark.integration
def test_worker_resumed_after_takeover_is_refused_at_gateway_and_at_target(
    store: SqlStore, store_url: str, authority: AuthorityService, ledger_service: LedgerTargetProcess, tmp_path: Path,
    worker_authority: WorkerAuthority,
) -> None:
    run_id = new_run(store)
    history_path = tmp_path / "history.jsonl"
    history = JsonlHistory(history_path)
    client = ledger_service.client()
    coordinator = Coordinator(store, history=history)

    ctx = multiprocessing.get_context("spawn")
    ready, resume = ctx.Event(), ctx.Event()
    out = tmp_path / "worker.json"
    worker = ctx.Process(
        target=paused_worker,
        args=(store_url, run_id, "worker-1", TTL_S, ledger_service.url, str(history_path), str(out), ready, resume),
        daemon=True,
    )
    worker.start()
    try:
        wait_for(ready, worker)
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGSTOP)  # a long GC pause, a frozen VM...
        lapsed = coordinator.wait_until_expired(run_id, timeout_s=TTL_S * 10)
        assert lapsed.owner == "worker-1" and lapsed.epoch == 1
        second = coordinator.grant(run_id, "worker-2", ttl_s=60, observed_epoch=1, fence_targets=[client])
        assert second is not None and second.epoch == 2
        cancellation = CancellationTracker(store).cancel_logically(run_id, "worker-1", 1)
        assert cancellation.physical is PhysicalStatus.UNCONFIRMED and not cancellation.may_assume_stopped
        os.kill(worker.pid, signal.SIGCONT)
        resume.set()
        worker.join(60)
    finally:
        if worker.is_alive() and worker.pid is not None:
            os.kill(worker.pid, signal.SIGCONT)
            worker.terminate()
            worker.join(10)
    assert worker.exitcode == 0
    report = json.loads(out.read_text())

    assert report["before"]["ok"] is True  # it really owned the run before the pause
    for attempt in ("gateway_new_key", "gateway_replay"):
        assert report[attempt]["ok"] is False
        assert report[attempt]["error"] == "StaleEpochError", report[attempt]
        assert "epoch 1" in report[attempt]["message"] and "epoch 2" in report[attempt]["message"]
    for attempt in ("direct_new_key", "direct_replay"):
        assert report[attempt] == {**report[attempt], "ok": False, "reason": "fenced", "fenced": True}
    assert report["renew"]["error"] == "LeaseLostError"
    assert report["heartbeat_lost"] is True

    # The new owner proceeds normally.
    gateway = MutationGateway(store, authority, {TARGET: client}, history=history)
    done = gateway.submit(request(second, capability(authority, store, second), "after-takeover", {"n": 4}, process="worker-2"))
    assert done.replayed is False

    effects = [effect for effect in ledger_service.effects() if effect.run_id == run_id]
    assert [(effect.idempotency_key, effect.epoch) for effect in effects] == [("before-pause", 1), ("after-takeover", 2)]
    refused = [row for row in ledger_service.requests() if row["run_id"] == run_id and row["result"] == "fenced"]
    assert {row["idempotency_key"] for row in refused} == {"after-resume-direct", "before-pause"}
    assert all(row["epoch"] == 1 for row in refused)
    stale = [event for _, event in store.list_events(run_id, event_types=[EventType.STALE_WORKER_REJECTED])]
    assert len(stale) == 2 and all((e.source_epoch, e.target_epoch) == (1, 2) for e in stale)
    ledger = store.list_operations(run_id)
    assert [(entry.idempotency_key, entry.epoch, entry.state.value) for entry in ledger] == [
        ("before-pause", 1, "COMMITTED"),
        ("after-takeover", 2, "COMMITTED"),
    ]
    events = [event for _, event in store.list_events(run_id)]
    assert check(history.ops, ledger, effects, events) == []
