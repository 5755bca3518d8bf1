"""Capabilities: issued from policy, scoped, short-lived; every kind of misuse is refused."""

from __future__ import annotations

import base64
import datetime as dt
import json
import secrets
import time
from pathlib import Path

import jwt
import pytest

from baton.authority import (
    AuthorityService,
    authority_after_handoff,
    capped_authority,
    may_perform,
)
from baton.checker import check
from baton.errors import AuthorityDeniedError, CapabilityError
from baton.gateway import MutationGateway
from baton.history import ListHistory
from baton.identity import canonical_json
from baton.models import AuthorityContext, AuthorityLevel, EventType
from baton.ownership import Coordinator
from baton.store.base import SqlStore
from baton.store.records import Lease
from baton.targets.ledger_target import LedgerTargetProcess

from builders.authority import ARTIFACT, OPERATION, OTHER_ARTIFACT, TARGET, approval, capability, context, new_run, placement, request

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
L = AuthorityLevel


def _lease(run_id: str = "run-a", epoch: int = 3, valid_s: float = 60.0) -> Lease:
    return Lease(run_id=run_id, owner="worker", epoch=epoch, expires_at=NOW + dt.timedelta(seconds=valid_s))


def _service() -> AuthorityService:
    return AuthorityService(secrets.token_bytes(32))


def _issue(service: AuthorityService, **overrides: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "run_id": "run-a", "epoch": 3, "operation": OPERATION, "artifact_hash": ARTIFACT, "level": L.EXTERNAL_MUTATE,
        "lease": _lease(), "placement": placement(), "context": context(NOW), "now": NOW,
    }
    args.update(overrides)
    return service.issue(**args)  # type: ignore[arg-type]


def _verify(service: AuthorityService, token: str, **overrides: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "run_id": "run-a", "epoch": 3, "operation": OPERATION, "artifact_hash": ARTIFACT,
        "required_level": L.EXTERNAL_MUTATE, "now": NOW + dt.timedelta(seconds=1),
    }
    args.update(overrides)
    return service.verify(token, **args)  # type: ignore[arg-type]


def _reason(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(CapabilityError) as refused:
        call()
    return refused.value.reason


def _tamper(token: str, **claims: object) -> str:
    header, payload, signature = token.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    data.update(claims)
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return ".".join((header, forged, signature))


# --- issuance ---------------------------------------------------------------------------------


def test_a_capability_is_scoped_and_never_outlives_the_lease_or_the_approval() -> None:
    service = _service()
    cap = _issue(service, lease=_lease(valid_s=20))
    claims = _verify(service, cap.token)
    assert (claims.run_id, claims.epoch, claims.operation, claims.artifact_hash, claims.level) == (
        "run-a", 3, OPERATION, ARTIFACT, L.EXTERNAL_MUTATE,
    )
    assert claims.expires_at == NOW + dt.timedelta(seconds=20)  # clamped to the lease, not the 300 s default
    short_approval = AuthorityContext(level=L.EXTERNAL_MUTATE, policy_id="p", approvals=(approval(NOW, valid_s=5),))
    assert _issue(service, context=short_approval).claims.expires_at == NOW + dt.timedelta(seconds=5)
    assert _issue(service, ttl_s=2).claims.expires_at == NOW + dt.timedelta(seconds=2)
    assert _issue(service).claims.capability_id != _issue(service).claims.capability_id  # jti is unique


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"placement": placement(ceiling=L.VERIFY)}, "ceiling VERIFY"),
        ({"context": context(NOW, level=L.SANDBOX_MUTATE)}, "holds authority SANDBOX_MUTATE"),
        ({"context": AuthorityContext(level=L.EXTERNAL_MUTATE, policy_id="p")}, "needs an unexpired approval"),
        ({"context": context(NOW, artifact=OTHER_ARTIFACT)}, "needs an unexpired approval"),
        ({"context": context(NOW, operation="rollback")}, "needs an unexpired approval"),
        ({"context": context(NOW, valid_s=-1)}, "needs an unexpired approval"),
        (
            {"context": AuthorityContext(level=L.EXTERNAL_MUTATE, policy_id="p", approvals=(approval(NOW, level=L.SANDBOX_MUTATE),))},
            "needs an unexpired approval",
        ),
        ({"lease": _lease(valid_s=-1)}, "does not hold a live lease"),
        ({"lease": _lease(epoch=2)}, "does not hold a live lease"),
        ({"lease": _lease(run_id="run-b")}, "does not hold a live lease"),
    ],
)
def test_policy_refuses_to_issue(overrides: dict[str, object], needle: str) -> None:
    with pytest.raises(AuthorityDeniedError, match=needle):
        _issue(_service(), **overrides)


def test_levels_below_the_approval_threshold_need_no_approval_but_respect_the_ceiling() -> None:
    service = _service()
    sandbox = AuthorityContext(level=L.SANDBOX_MUTATE, policy_id="p")
    cap = _issue(service, level=L.SANDBOX_MUTATE, context=sandbox, artifact_hash=None)
    assert _verify(service, cap.token, artifact_hash=None, required_level=L.SANDBOX_MUTATE).level is L.SANDBOX_MUTATE
    with pytest.raises(AuthorityDeniedError):
        _issue(service, level=L.SANDBOX_MUTATE, context=sandbox, placement=placement(ceiling=L.PLAN))


# --- verification -----------------------------------------------------------------------------


def test_expired_capabilities_are_refused() -> None:
    service = _service()
    cap = _issue(service, ttl_s=10)
    assert _verify(service, cap.token, now=NOW + dt.timedelta(seconds=9.999)).capability_id
    assert _reason(lambda: _verify(service, cap.token, now=NOW + dt.timedelta(seconds=10))) == "expired"
    assert _reason(lambda: _verify(service, cap.token, now=NOW + dt.timedelta(hours=1))) == "expired"


def test_forged_capabilities_are_refused() -> None:
    service = _service()
    genuine = _issue(service)
    impostor = _issue(_service())  # same shape, another key
    assert _reason(lambda: _verify(service, impostor.token)) == "untrusted_key"  # another key: its kid is not trusted
    payload = jwt.decode(genuine.token, options={"verify_signature": False})
    other_alg = jwt.encode(payload, secrets.token_bytes(64), algorithm="HS512")
    assert _reason(lambda: _verify(service, other_alg)) == "forged"
    unsigned = jwt.encode(payload, None, algorithm="none")
    assert _reason(lambda: _verify(service, unsigned)) in {"forged", "malformed"}
    assert _reason(lambda: _verify(service, _tamper(genuine.token, run="run-b"), run_id="run-b")) == "forged"
    assert _reason(lambda: _verify(service, "not-a-token")) == "malformed"


def test_replayed_capabilities_for_another_run_epoch_artifact_or_operation_are_refused() -> None:
    service = _service()
    token = _issue(service).token
    assert _reason(lambda: _verify(service, token, run_id="run-b")) == "wrong_run"
    assert _reason(lambda: _verify(service, token, epoch=4)) == "wrong_epoch"
    assert _reason(lambda: _verify(service, token, epoch=2)) == "wrong_epoch"
    assert _reason(lambda: _verify(service, token, artifact_hash=OTHER_ARTIFACT)) == "wrong_artifact"
    assert _reason(lambda: _verify(service, token, operation="rollback")) == "wrong_operation"


def test_widened_capabilities_are_refused() -> None:
    service = _service()
    sandbox = _issue(service, level=L.SANDBOX_MUTATE).token
    # Used for more than it grants.
    assert _reason(lambda: _verify(service, sandbox, required_level=L.EXTERNAL_MUTATE)) == "insufficient_level"
    # Its level claim edited upwards: the signature no longer matches.
    assert _reason(lambda: _verify(service, _tamper(sandbox, level="EXTERNAL_MUTATE"))) == "forged"
    # Presented where the ceiling is lower than what it claims (e.g. carried across a handoff).
    full = _issue(service).token
    assert _reason(lambda: _verify(service, full, required_level=L.VERIFY, ceiling=L.VERIFY)) == "above_ceiling"


# --- the signing key --------------------------------------------------------------------------


def test_the_signing_key_never_appears_in_capabilities_contexts_or_reprs() -> None:
    key = secrets.token_bytes(32)
    service = AuthorityService(key)
    cap = _issue(service)
    dumped = canonical_json(cap.claims) + canonical_json(context(NOW)) + repr(service).encode() + repr(cap).encode()
    assert key not in dumped and key.hex().encode() not in dumped
    assert cap.token not in repr(cap)


# --- authority across a handoff ----------------------------------------------------------------


def test_authority_after_handoff_is_the_lesser_and_a_downgrade_is_recorded(store: SqlStore) -> None:
    run_id = new_run(store)
    held = context(NOW, level=L.EXTERNAL_MUTATE)
    reduced = authority_after_handoff(
        held, L.VERIFY, run_id=run_id, events=store, source_placement="enclave", target_placement="edge", at=NOW
    )
    assert reduced.level is L.VERIFY and reduced.downgraded_from is L.EXTERNAL_MUTATE
    assert reduced.approvals == held.approvals  # grounds are kept; the level is what limits issuance
    assert all(may_perform(reduced, level) for level in (L.OBSERVE, L.PLAN, L.VERIFY))
    assert not may_perform(reduced, L.SANDBOX_MUTATE)
    (event,) = [e for _, e in store.list_events(run_id, event_types=[EventType.AUTHORITY_DOWNGRADED])]
    assert (event.authority_before, event.authority_after) == ("EXTERNAL_MUTATE", "VERIFY")
    assert event.detail["mutation_paused"] is True
    # Mutation waits: even on a capable placement, nothing above VERIFY can be issued from the reduced context.
    with pytest.raises(AuthorityDeniedError, match="holds authority VERIFY"):
        _issue(_service(), context=reduced)
    # Never widened by a later handoff, and no event when nothing is lost.
    assert authority_after_handoff(reduced, L.EXTERNAL_MUTATE, run_id=run_id, events=store) == reduced
    assert authority_after_handoff(held, L.EXTERNAL_MUTATE, run_id=run_id, events=store) is held
    again = authority_after_handoff(reduced, L.OBSERVE, run_id=run_id, events=store)
    assert again.level is L.OBSERVE and again.downgraded_from is L.EXTERNAL_MUTATE
    assert len(store.list_events(run_id, event_types=[EventType.AUTHORITY_DOWNGRADED])) == 2


def test_the_gates_ceiling_caps_authority_even_with_the_resumes_downgrade_switched_off(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`capped_authority` is the gate's cap at the resume: it has no switch of its own, so it holds where the resume's
    own downgrade (`authority-downgrade`) is off, and it records its own reason."""
    from baton.ablation import Ablation

    monkeypatch.setenv("BATON_ABLATE", Ablation.AUTHORITY_DOWNGRADE.value)
    run_id = new_run(store)
    held = context(NOW, level=L.EXTERNAL_MUTATE)
    assert authority_after_handoff(held, L.SANDBOX_MUTATE, run_id=run_id, events=store) is held  # switched off
    capped = capped_authority(held, L.SANDBOX_MUTATE, "the gate decided SANDBOX_MUTATE", run_id=run_id, events=store,
                              at=NOW)
    assert capped.level is L.SANDBOX_MUTATE and capped.downgraded_from is L.EXTERNAL_MUTATE
    (event,) = [e for _, e in store.list_events(run_id, event_types=[EventType.AUTHORITY_DOWNGRADED])]
    assert event.reason == "the gate decided SANDBOX_MUTATE"
    assert capped_authority(capped, L.EXTERNAL_MUTATE, "never widened") is capped


# --- at the gateway ------------------------------------------------------------------------------


@pytest.mark.integration
def test_the_gateway_refuses_every_bad_capability_before_any_side_effect(
    store: SqlStore, authority: AuthorityService, ledger_service: LedgerTargetProcess
) -> None:
    run_id, other_run = new_run(store), new_run(store)
    history = ListHistory()
    client = ledger_service.client()
    coordinator = Coordinator(store, history=history)
    first = coordinator.grant(run_id, "w1", ttl_s=60, fence_targets=[client])
    elsewhere = coordinator.grant(other_run, "w1", ttl_s=60)
    assert first is not None and elsewhere is not None
    old_epoch_cap = capability(authority, store, first)
    lease = coordinator.grant(run_id, "w1", ttl_s=60, force=True, fence_targets=[client])
    assert lease is not None and lease.epoch == 2
    gateway = MutationGateway(store, authority, {TARGET: client}, history=history, ceiling=L.EXTERNAL_MUTATE)
    other_key = AuthorityService(secrets.token_bytes(32))
    sandbox = authority.issue(
        run_id=run_id, epoch=2, operation=OPERATION, artifact_hash=ARTIFACT, level=L.SANDBOX_MUTATE, lease=lease,
        placement=placement(), context=context(store.db_now()), now=store.db_now(),
    )
    short = capability(authority, store, lease, ttl_s=0.2)
    cases = {
        "untrusted_key": capability(other_key, store, lease).token,
        "wrong_run": capability(authority, store, elsewhere).token,
        "wrong_epoch": old_epoch_cap.token,
        "wrong_artifact": capability(authority, store, lease, artifact=OTHER_ARTIFACT).token,
        "insufficient_level": sandbox.token,
    }
    time.sleep(0.3)
    cases["expired"] = short.token
    for index, (reason, token) in enumerate(cases.items()):
        with pytest.raises(CapabilityError) as refused:
            gateway.submit(request(lease, token, f"key-{index}", {"n": index}, process="w1"))
        assert refused.value.reason == reason, (reason, str(refused.value))
    assert store.list_operations(run_id) == []
    assert [e for e in ledger_service.effects() if e.run_id == run_id] == []
    ok = gateway.submit(request(lease, capability(authority, store, lease), "good", {"n": 99}, process="w1"))
    assert not ok.replayed
    assert check(history.ops, store.list_operations(run_id), ledger_service.effects()) == []
