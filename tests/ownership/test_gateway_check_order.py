"""The gateway's checks keep their order (epoch, capability, key) now that one store transaction makes them."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import pytest

from baton.authority import AuthorityService
from baton.checker import check
from baton.errors import CapabilityError, PayloadMismatchError, StaleEpochError
from baton.gateway import MutationGateway
from baton.history import ListHistory
from baton.models import EventType
from baton.ownership import Coordinator
from baton.store.base import SqlStore

from .model_target import InProcessLedger
from builders.authority import TARGET, capability, new_run, request


def _stale_events(store: SqlStore, run_id: str) -> int:
    return len(store.list_events(run_id, event_types=[EventType.STALE_WORKER_REJECTED]))


def test_a_stale_caller_is_refused_for_its_epoch_whatever_its_capability(
    store: SqlStore, authority: AuthorityService, tmp_path: Path
) -> None:
    run_id = new_run(store)
    history = ListHistory()
    target = InProcessLedger(tmp_path / "fence.db")
    coordinator = Coordinator(store, history=history)
    old = coordinator.grant(run_id, "w1", ttl_s=60)
    assert old is not None
    old_cap = capability(authority, store, old)
    forged = capability(AuthorityService(secrets.token_bytes(32)), store, old)
    new = coordinator.grant(run_id, "w2", ttl_s=60, force=True)
    assert new is not None and new.epoch == old.epoch + 1
    gateway = MutationGateway(store, authority, {TARGET: target}, history=history)

    for index, token in enumerate((old_cap.token, forged.token, "not-a-token")):
        with pytest.raises(StaleEpochError, match="fenced"):
            gateway.submit(request(old, token, f"key-{index}", {"n": index}, process="w1"))
        assert _stale_events(store, run_id) == index + 1
    # An epoch that was never issued is refused too, but it is no stale worker: no event. (Through a
    # gateway without history: the checker rightly calls a mutation at an unissued epoch a violation.)
    unrecorded = MutationGateway(store, authority, {TARGET: target})
    with pytest.raises(StaleEpochError, match="has not been issued"):
        unrecorded.submit(request((run_id, new.epoch + 1), old_cap, "key-ahead", {"n": 9}, process="w1"))
    assert _stale_events(store, run_id) == 3
    assert store.list_operations(run_id) == [] and target.effects == []

    # At the current epoch the capability is judged next, then the key.
    new_cap = capability(authority, store, new)
    with pytest.raises(CapabilityError) as refused:
        gateway.submit(request(new, old_cap, "key-0", {"n": 0}, process="w2"))
    assert refused.value.reason == "wrong_epoch"
    assert gateway.submit(request(new, new_cap, "key-0", {"n": 0}, process="w2")).replayed is False
    with pytest.raises(CapabilityError) as forged_refusal:
        gateway.submit(request(new, forged, "key-0", {"n": 1}, process="w2"))
    assert forged_refusal.value.reason == "untrusted_key"
    with pytest.raises(PayloadMismatchError):
        gateway.submit(request(new, new_cap, "key-0", {"n": 1}, process="w2"))
    assert len(store.list_operations(run_id)) == 1 and len(target.effects) == 1
    assert check(history.ops, store.list_operations(run_id), target.effects) == []


def test_a_capability_that_worked_expires_by_the_database_clock(
    store: SqlStore, authority: AuthorityService, tmp_path: Path
) -> None:
    run_id = new_run(store)
    lease = Coordinator(store).grant(run_id, "w1", ttl_s=60)
    assert lease is not None
    target = InProcessLedger(tmp_path / "fence.db")
    gateway = MutationGateway(store, authority, {TARGET: target})
    short = capability(authority, store, lease, ttl_s=0.5)
    assert not gateway.submit(request(lease, short, "first", {"n": 1})).replayed  # its claims are now cached
    time.sleep(0.6)
    with pytest.raises(CapabilityError) as refused:
        gateway.submit(request(lease, short, "second", {"n": 2}))
    assert refused.value.reason == "expired"
    # Even the replay of a committed key needs an unexpired capability, as before.
    with pytest.raises(CapabilityError):
        gateway.submit(request(lease, short, "first", {"n": 1}))
    assert [op.idempotency_key for op in store.list_operations(run_id)] == ["first"]
    assert len(target.effects) == 1


def test_decoded_claims_are_cached_only_for_tokens_that_verify(store: SqlStore, authority: AuthorityService) -> None:
    run_id = new_run(store)
    lease = Coordinator(store).grant(run_id, "w1", ttl_s=60)
    assert lease is not None
    token = capability(authority, store, lease).token
    assert authority.decode(token) is authority.decode(token)
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    for _ in range(2):
        with pytest.raises(CapabilityError) as refused:
            authority.decode(tampered)
        assert refused.value.reason in ("forged", "malformed")
