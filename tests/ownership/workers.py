"""Bodies of the worker processes the ownership tests start (multiprocessing 'spawn').

Each opens its own store, and reports back through a JSON file: nothing but
plain strings and numbers crosses the process boundary.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from baton.authority import CapabilityVerifier
from baton.errors import BatonError, TargetRejectedError
from baton.fencing import FencingToken
from baton.gateway import MutationGateway
from baton.history import JsonlHistory
from baton.ownership import Coordinator, LeaseHolder
from baton.store.factory import open_store
from baton.targets.ledger_target import LedgerTargetClient

from builders.authority import TARGET, request

from .worker_authority import ask, client_for

WAIT_S = 120.0


def _outcome(call: Any) -> dict[str, Any]:
    """Run `call` and describe what happened in plain JSON."""
    try:
        value = call()
    except TargetRejectedError as exc:
        return {"ok": False, "error": type(exc).__name__, "reason": exc.reason, "fenced": exc.fenced, "message": str(exc)}
    except BatonError as exc:
        return {"ok": False, "error": type(exc).__name__, "message": str(exc)}
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return {"ok": True, "value": value}


def paused_worker(
    url: str, run_id: str, owner: str, ttl_s: float, ledger_url: str, history_path: str, out_path: str,
    ready: Any, resume: Any,
) -> None:
    """Own the run, commit once, then (after being paused and resumed) try every way to mutate."""
    store = open_store(url)
    authority = client_for(owner)  # no key here: capabilities come from the authority process
    client = LedgerTargetClient(ledger_url, timeout_s=10.0)
    gateway = MutationGateway(store, CapabilityVerifier(authority.trusted_keys()), {TARGET: client}, history=JsonlHistory(history_path))
    report: dict[str, Any] = {}
    try:
        coordinator = Coordinator(store, name=f"coordinator@{owner}", history=JsonlHistory(history_path))
        lease = coordinator.grant(run_id, owner, ttl_s=ttl_s, fence_targets=[client])
        assert lease is not None and lease.epoch == 1, lease
        holder = LeaseHolder(store, lease, ttl_s=ttl_s)
        heartbeat = holder.heartbeat(interval_s=ttl_s / 5)
        first = request(lease, ask(authority, lease), "before-pause", {"n": 1}, process=owner)
        report["before"] = _outcome(lambda: gateway.submit(first))
        held = holder.lease
        later_cap = ask(authority, held)  # obtained while still the owner
        ready.set()
        resume.wait(WAIT_S)
        # Resumed after the takeover. It acts as a careless worker would: no look at its lease first.
        fresh = request(held, later_cap, "after-resume", {"n": 2}, process=owner)
        report["gateway_new_key"] = _outcome(lambda: gateway.submit(fresh))
        report["gateway_replay"] = _outcome(lambda: gateway.submit(first))
        token = FencingToken(run_id, held.epoch)
        report["direct_new_key"] = _outcome(
            lambda: client.apply("op-" + uuid.uuid4().hex, "after-resume-direct", token, {"n": 3})
        )
        report["direct_replay"] = _outcome(
            lambda: client.apply("op-" + uuid.uuid4().hex, "before-pause", token, {"n": 1})
        )
        report["renew"] = _outcome(holder.renew)
        report["heartbeat_lost"] = heartbeat.lost.wait(ttl_s * 4)
        heartbeat.stop()
    finally:
        client.close()
        store.close()
        Path(out_path).write_text(json.dumps(report))


def doomed_worker(url: str, run_id: str, owner: str, ledger_url: str, history_path: str, key: str) -> None:
    """Own the run and send one request; the test kills this process before the outcome is recorded."""
    store = open_store(url)
    authority = client_for(owner)  # no key here: capabilities come from the authority process
    client = LedgerTargetClient(ledger_url, timeout_s=60.0)
    gateway = MutationGateway(store, CapabilityVerifier(authority.trusted_keys()), {TARGET: client}, history=JsonlHistory(history_path))
    lease = store.get_lease(run_id)
    assert lease.owner == owner, lease
    gateway.submit(request(lease, ask(authority, lease), key, {"deploy": key}, process=owner))
    raise AssertionError("the target was told to hold this request; it should never have returned")
